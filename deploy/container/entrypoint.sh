#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The image's entrypoint, started by tini (PID 1). With CAP_SYS_ADMIN, it prepares
# what sandboxes need that a container runtime does not give without --privileged,
# then starts hexr-sandbox *without* CAP_SYS_ADMIN (and without CAP_SETPCAP), so the
# long-running service never holds it:
#
#  1. cgroups: with a private cgroup namespace, the container's own cgroup subtree is
#     what /sys/fs/cgroup shows, mounted read-only by the runtime. It is remounted
#     writable (a bind remount: this mount only, the subtree only), for the
#     sandboxes' cgroups. With the host's cgroup namespace nothing is changed, and
#     the service refuses to start, saying why.
#  2. cgroup v2 only: tini is moved into a leaf cgroup of its own, since v2 allows no
#     controllers for children of a cgroup that holds processes.
#  3. /proc: a sandbox mounts a /proc of its own pid namespace, which the kernel
#     allows in a user namespace only when a proc mount of this mount namespace is
#     fully visible; the runtime's /proc has paths masked. A proc of the container's
#     own pid namespace with only process directories (subset=pid) is mounted at
#     /run/hexr-proc: it shows nothing the service does not already see.
#
# Without CAP_SYS_ADMIN it changes nothing and starts the service, whose start-up
# check names what is missing.
set -eu

BIN=/usr/lib/hexr-sandbox/hexr-sandbox

has_cap() {
        eff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
        [ $(( (0x$eff >> $1) & 1 )) -eq 1 ]
}

if ! has_cap 21; then
        exec "$BIN" "$@"
fi

own=$(sed -n 's/^[0-9]*:[^:]*://p' /proc/self/cgroup | sort -u)
if [ "$own" = "/" ]; then
        awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo |
        while read -r m; do
                mount -o remount,bind,rw "$m"
        done
        if [ -f /sys/fs/cgroup/cgroup.procs ] && [ ! -d /sys/fs/cgroup/memory ]; then
                mkdir -p /sys/fs/cgroup/init
                echo 1 > /sys/fs/cgroup/init/cgroup.procs
        fi
fi

if ! grep -q ' /run/hexr-proc ' /proc/self/mountinfo; then
        mkdir -p /run/hexr-proc
        mount -t proc -o nosuid,nodev,noexec,hidepid=invisible,subset=pid proc /run/hexr-proc
fi

# Warm templates (SANDBOX_WARM=on) need CAP_SYS_ADMIN in the service itself: it
# writes the id maps of the user namespaces its templates create, which it does not
# own. Otherwise the service starts without it.
case "${SANDBOX_WARM:-on}" in
on|true|yes|1) drop=-setpcap ;;
*) drop=-sys_admin,-setpcap ;;
esac
# setpriv cannot drop a capability from the bounding set without CAP_SETPCAP, and
# says nothing: refuse rather than start the service with CAP_SYS_ADMIN by mistake.
if ! has_cap 8; then
        echo "hexr-sandbox: the container has CAP_SYS_ADMIN but not CAP_SETPCAP, which the entrypoint needs to drop it before the service starts (add --cap-add SETPCAP)" >&2
        exit 1
fi
exec setpriv --bounding-set="$drop" --inh-caps="$drop" -- "$BIN" "$@"
