#!/bin/sh
# Installs what bench/run.py compares against and draws with: bubblewrap, firejail,
# matplotlib (for latency.png), GNU time (peak RSS), plus the project's own build and
# runtime packages (scripts/setup.sh). Idempotent: does nothing when all is present.
# Needs root (apt-get). Build the binary afterwards:
#   cmake -S . -B build && cmake --build build -j2 --target hexr-sandbox
set -eu

here=$(cd "$(dirname "$0")" && pwd)
"$here/../scripts/setup.sh"

PACKAGES="bubblewrap firejail python3-matplotlib time strace"

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
        echo "bench/setup.sh: missing packages:$missing (run as root to install them)" >&2
        exit 1
fi
echo "bench/setup.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
