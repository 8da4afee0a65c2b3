#!/bin/sh
# Installs the Debian packages hexr-sandbox needs to build, run and test, plus any
# package named as an argument (bench/setup.sh adds what it compares against).
# Idempotent: does nothing when everything is present. Needs root (apt-get).
set -eu

PACKAGES="build-essential cmake pkg-config
libmicrohttpd-dev libjansson-dev libseccomp-dev libcap-dev libgnutls28-dev libcmocka-dev
python3 python3-dev python3-pytest python3-yaml python3-numpy python3-pandas python3-scipy python3-packaging nodejs bash
iproute2 procps prometheus openssl clang libclang-rt-dev
qemu-system-x86 e2fsprogs lz4 binutils
buildah podman runc tini mount haproxy python3-kubernetes systemd $*"

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
