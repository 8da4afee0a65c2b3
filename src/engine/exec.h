/* SPDX-License-Identifier: Apache-2.0 */
/* One execution, as the engine and its backends see it: what every execution has.
 * What only one backend needs lives in that backend's own state, at priv
 * (backend.h); what only the packages= step needs, in the step (pkg/pkg-step.h). */
#pragma once

#include <stdbool.h>
#include <time.h>

#include "core/capbuf.h"
#include "engine/request.h"
#include "pkg/pkg-step.h"
#include "pkg/pkgcache.h"

struct hxs_exec {
        hxs_engine *engine;
        hxs_request *req;               /* owned copy */
        int epfd;                       /* everything below that can wake us */
        struct timespec started;        /* an install step counts against the timeout */
        uint64_t budget_ms;             /* time left for the program (0: its timeout) */
        void *priv;                     /* the backend's, once started on it (backend.h) */
        pkg_step *pkg;                  /* the packages= step, while it runs */
        /* what the sandbox gets of packages= (set by the step): host directories */
        pkg_use pkgs;                   /* the installed set it runs with, held: read-only at
                                         * /opt/packages (path "" = none) */
        char wheelhouse_dir[256];       /* installer only: read-only at /wheelhouse */
        char target_dir[512];           /* installer only: writable at /target */
        hxs_packages_source packages;
        /* progress: what it printed (output.c) */
        capbuf out, err;
        hxs_output_fn out_fn;           /* the streaming callback, if any */
        void *out_userdata;
        uint64_t printed;               /* both streams, against MAX_STREAM_BYTES */
        bool output_limited;            /* killed past it */
        bool timed_out, killed, done, setup_failed, taken;
        hxs_error setup_error;
        hxs_result result;
};

/* An execution of an owned request (freed on failure), not started. */
int exec_new(hxs_engine *e, hxs_request *req, hxs_exec **ret, hxs_error *err);
/* Starts x on the engine's backend (its private state allocated first). */
int exec_backend_start(hxs_exec *x, hxs_error *err);
/* x on its backend alone, whatever packages= step the engine runs around it: does what
 * is ready; ends it now; frees it (NULL is fine). */
int exec_process(hxs_exec *x);
void exec_kill(hxs_exec *x);
void exec_free(hxs_exec *x);
