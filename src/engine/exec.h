/* SPDX-License-Identifier: Apache-2.0 */
/* One execution, as the engine and its backends see it. */
#pragma once

#include <stdbool.h>
#include <time.h>

#include "core/capbuf.h"
#include "engine/engine.h"

struct hxs_exec {
        hxs_engine *engine;
        hxs_request *req;               /* owned copy */
        int epfd;                       /* everything below that can wake us */
        struct timespec started;
        /* namespace backend */
        pid_t pid;
        int pidfd, sync_fd, report_fd, stdout_fd, stderr_fd, stdin_fd, timer_fd;
        size_t stdin_off;
        char report[512];
        size_t report_len;
        char **envp;
        cg_exec cg;
        bool have_cg;
        bool warm;
        /* microVM backends */
        struct vm_exec *vm;
        /* progress */
        capbuf out, err;
        bool reaped, timed_out, killed, draining, drain_expired, done, setup_failed, taken;
        hxs_error setup_error;
        hxs_result result;
};
