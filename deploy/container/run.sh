#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# deploy/container/run.sh PORT [IMAGE]
#
# Starts the image built by `make image` on 127.0.0.1:PORT with podman, detached, as
# the container hexr-sandbox-PORT, and prints its id. Stop it with
# `podman stop hexr-sandbox-PORT` (SIGTERM: running executions finish first).
# Every flag is explained in docs/deploy.md ("A container"); extra podman flags can
# be put in HEXR_PODMAN_FLAGS (e.g. "--env SANDBOX_WARM=on --cap-add ...").
set -eu

port=${1:?usage: deploy/container/run.sh PORT [IMAGE]}
image=${2:-hexr-sandbox:latest}

# shellcheck disable=SC2086
exec podman --runtime runc run --detach --rm --name "hexr-sandbox-$port" \
        --publish "127.0.0.1:$port:8080" \
        --cgroupns private \
        --cap-drop ALL --cap-add SYS_ADMIN --cap-add SETPCAP --cap-add SETUID --cap-add SETGID \
        --security-opt no-new-privileges \
        --ulimit nofile=16384:16384 --ulimit nproc=16384:16384 \
        --env ALLOW_NON_LOOPBACK=on \
        ${HEXR_PODMAN_FLAGS:-} \
        "$image"
