/* SPDX-License-Identifier: Apache-2.0 */
/* One execution, as the engine and its backends see it. What only one backend needs
 * lives in that backend's own state, at priv (backend.h). */
#pragma once

#include <stdbool.h>
#include <time.h>

#include "core/capbuf.h"
#include "pkg/pkgcache.h"
#include "engine/request.h"
#include "core/cgroup.h"

struct hxs_exec {
        hxs_engine *engine;
        hxs_request *req;               /* owned copy */
        int epfd;                       /* everything below that can wake us */
        struct timespec started;
        void *priv;                     /* the backend's, once started on it (backend.h) */
        /* packages=: host directories the sandbox gets ("" = none) */
        char pkgs_dir[512];             /* an installed set, read-only at /opt/packages */
        char wheelhouse_dir[256];       /* installer only: read-only at /wheelhouse */
        char target_dir[512];           /* installer only: writable at /target */
        uint64_t budget_ms;             /* time left for the program (0: its timeout) */
        pkg_use pkg;                    /* the set in use, locked */
        hxs_exec *installer;            /* the install step, while it runs */
        char request_key[65];
        char stage[512];                /* the install's directory in the cache, until committed */
        /* packages= from an index: the downloader (pip, on the host, unprivileged) */
        bool fetching, fetch_reaped, fetch_timed_out;
        pid_t fetch_pid;
        int fetch_pidfd, fetch_out_fd, fetch_timer_fd, fetch_status;
        capbuf fetch_log;
        char fetch_dir[512];            /* where it downloads, then the installer's wheelhouse */
        cg_exec fetch_cg;               /* its own cgroup (memory, pids) */
        bool have_fetch_cg;
        /* packages=: the install's commit, on a worker (pkgcache.h), and its timer */
        pkg_commit *commit;
        int commit_timer_fd;
        hxs_packages_source packages;
        /* progress */
        capbuf out, err;
        bool timed_out, killed, done, setup_failed, taken;
        hxs_error setup_error;
        hxs_result result;
};

/* An execution of an owned request (freed on failure), not started. */
int exec_new(hxs_engine *e, hxs_request *req, hxs_exec **ret, hxs_error *err);
/* Starts x on the engine's backend (its private state allocated first). */
int exec_backend_start(hxs_exec *x, hxs_error *err);

/* Whether x is still in its install step (downloading, installing or committing). */
static inline bool pkg_busy(const hxs_exec *x)
{
        return x->installer || x->fetching || x->commit;
}

/* packages= (pkg/pkg-step.c): a cached set for x, or its install step started. */
int pkg_prepare(hxs_engine *e, hxs_exec *x, hxs_error *err);
/* Advances the install step; once it is over, starts the program or ends x. */
int pkg_install_step(hxs_exec *x);
/* Stops an install step in progress and removes its stage (for hxs_exec_free). */
void pkg_abandon(hxs_exec *x);
/* Ends the install step early (x->killed says why): kills the installer or the
 * downloader, or cancels the commit. x's fd then reports the end. */
void pkg_kill(hxs_exec *x);
