#!/bin/sh
# Runs the TypeScript SDK's tests: installs the pinned dev dependencies (npm ci, only
# when package.json or package-lock.json changed since the last install), compiles the
# package and the tests, and runs them with `node --test` against real services
# started from $HEXR_SANDBOX_BIN.
set -eu
cd "$(dirname "$0")/.."

for tool in node npm flock; do
        if ! command -v "$tool" >/dev/null 2>&1; then
                echo "sdk/js/test/run.sh: $tool is missing (scripts/setup.sh installs it)" >&2
                exit 1
        fi
done
# The tests choose their addresses, certificates and retries themselves.
unset HEXR_SANDBOX_URL HEXR_SANDBOX_CA_FILE HEXR_SANDBOX_CERT_FILE HEXR_SANDBOX_KEY_FILE HEXR_SANDBOX_RETRIES

# One run at a time in this directory (node_modules, build-test and dist are shared).
exec 9>.test.lock
flock -w 900 9

stamp=node_modules/.hexr-installed
want=$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
        npm ci --prefer-offline --no-audit --no-fund
        echo "$want" >"$stamp"
fi

rm -rf build-test
node node_modules/typescript/bin/tsc -p test/tsconfig.json
# Two test files at a time where node can (most of the time is spent waiting on sandboxes).
concurrency=""
if node --test-concurrency=2 -e 0 >/dev/null 2>&1; then
        concurrency="--test-concurrency=2"
fi
exec node --test $concurrency build-test/test/*.test.js
