#!/bin/sh
# Installs the Debian packages hexr-sandbox needs to build, run and test, plus any
# package named as an argument (bench/setup.sh adds what it compares against). The
# runtimes the sandbox offers come from scripts/runtimes.txt.
# Idempotent: does nothing when everything is present. Needs root (apt-get).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
RUNTIMES=$(awk '!/^[[:space:]]*(#|$)/ { print $2 }' "$here/runtimes.txt")
if [ -z "$RUNTIMES" ]; then
        echo "setup: no packages in $here/runtimes.txt" >&2
        exit 1
fi

PACKAGES="build-essential cmake pkg-config
libmicrohttpd-dev libjansson-dev libseccomp-dev libcap-dev libgnutls28-dev libcmocka-dev
python3-dev python3-pytest python3-yaml python3-packaging
$RUNTIMES
iproute2 procps prometheus openssl clang libclang-rt-dev
qemu-system-x86 e2fsprogs lz4 binutils
buildah podman runc tini mount haproxy python3-kubernetes systemd $*"
# npm installs the TypeScript SDK's pinned dev dependencies (sdk/js, npm ci). Debian's
# nodejs needs the npm package; NodeSource's nodejs carries npm itself and conflicts
# with Debian's, so the package is asked for only when the command is missing.
if ! command -v npm >/dev/null 2>&1; then
        PACKAGES="$PACKAGES npm"
fi

missing=""
for p in $PACKAGES; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
                missing="$missing $p"
        fi
done
if [ -z "$missing" ]; then
        exit 0
fi
if [ "$(id -u)" != 0 ]; then
        echo "setup: missing packages:$missing (run as root to install them)" >&2
        exit 1
fi
echo "setup: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
