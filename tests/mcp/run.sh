#!/bin/sh
# Runs the MCP server's tests: installs the pinned official TypeScript SDK and the
# conformance suite (npm ci, only when package.json or package-lock.json changed since
# the last install), then runs the tests with `node --test` against $HEXR_SANDBOX_BIN
# (`hexr-sandbox mcp` over stdio, and `hexr-sandbox serve`'s /mcp).
set -eu
cd "$(dirname "$0")"

for tool in node npm flock; do
        if ! command -v "$tool" >/dev/null 2>&1; then
                echo "tests/mcp/run.sh: $tool is missing (scripts/setup.sh installs it)" >&2
                exit 1
        fi
done

# One run at a time in this directory (node_modules is shared).
exec 9>.test.lock
flock -w 900 9

stamp=node_modules/.hexr-installed
want=$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
        npm ci --prefer-offline --no-audit --no-fund
        echo "$want" >"$stamp"
fi

exec node --test ./*.test.mjs
