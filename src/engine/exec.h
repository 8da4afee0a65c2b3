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
        /* interactive stdin (request->interactive): bytes queued, not yet written */
        char *stdin_q;
        size_t stdin_q_len, stdin_q_off, stdin_q_cap;
        bool stdin_closing;             /* exec_stdin_close: close once the queue is drained */
        bool stdin_gone;                /* the program's stdin is closed: nothing more goes */
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

/* Interactive stdin (sessions). The caller queues bytes for the running program;
 * the backend (BACKEND_INTERACTIVE, its stdin_more op) writes them as its fd allows.
 * Bytes queued before the backend has started go once it has. */
#define EXEC_STDIN_QUEUE_MAX (256u << 20)   /* a session's largest put (SESSION_PUT_MAX) as base64 */
/* 0, -EPIPE once stdin is closed or the execution ended, -ENOBUFS past the queue's
 * bound, -ENOMEM, -EINVAL for an execution that is not interactive. */
int exec_stdin_write(hxs_exec *x, const void *data, size_t len);
/* The program gets EOF once what is queued is written. */
void exec_stdin_close(hxs_exec *x);
/* For the backend: what is queued (its length, 0: nothing), and n bytes of it written. */
size_t exec_stdin_pending(const hxs_exec *x, const char **ret_data);
void exec_stdin_consumed(hxs_exec *x, size_t n);
/* For the backend: the program's stdin is closed (written out after a close, or the
 * program closed it); the queue goes. */
void exec_stdin_gone(hxs_exec *x);
