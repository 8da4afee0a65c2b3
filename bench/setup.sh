#!/bin/sh
# Installs what bench/run.py compares against and draws with: bubblewrap, firejail,
# matplotlib (for latency.png), GNU time (peak RSS), plus the project's own build and
# runtime packages (scripts/setup.sh). Idempotent: does nothing when all is present.
# Needs root (apt-get). Build the binary afterwards:
#   cmake -S . -B build && cmake --build build -j2 --target hexr-sandbox
set -eu

here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../scripts/setup.sh" bubblewrap firejail python3-matplotlib time strace
