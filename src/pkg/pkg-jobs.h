/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=: the package cache's work that grows with what a caller chose (hashing
 * wheels, measuring and removing installed trees) runs here, on a few worker threads,
 * never on the service's event loop. A job is handed over whole; the loop learns that
 * it is done through the job's eventfd, which it puts in an execution's epoll fd.
 *
 * Ownership: the submitter owns a job until pkg_jobs_submit, then shares it with the
 * pool; pkg_job_drop gives up its share (a job still queued or running is cancelled
 * and freed by the pool when it stops). The pool calls `free` exactly once.
 * Workers run with every signal blocked.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "hexr-sandbox/sandbox.h"

typedef struct pkg_jobs pkg_jobs;
typedef struct pkg_job pkg_job;

struct pkg_job {
        void (*run)(pkg_job *j);        /* on a worker; checks `cancel` between steps */
        void (*free)(pkg_job *j);
        atomic_bool cancel;
        int efd;                        /* eventfd, readable once run has returned; -1: none */
        /* the pool's */
        pkg_job *next;
        atomic_bool done;
        bool dropped;
};

/* n worker threads. */
int pkg_jobs_new(unsigned n, pkg_jobs **ret, hxs_error *err);
/* Cancels what is queued or running, waits for the workers, frees the pool. */
void pkg_jobs_free(pkg_jobs *p);

/* Queues j. With want_fd, j->efd is an eventfd (the job's) that becomes readable
 * once j is done. On failure j is still the caller's. */
int pkg_jobs_submit(pkg_jobs *p, pkg_job *j, bool want_fd);
/* Queues j for the pool alone: it runs to its end (unless the pool stops) and is
 * freed then. On failure j is still the caller's. */
int pkg_jobs_submit_detached(pkg_jobs *p, pkg_job *j);
/* The submitter's share: a job not done yet is cancelled and freed once it stops. */
void pkg_job_drop(pkg_jobs *p, pkg_job *j);
static inline bool pkg_job_done(const pkg_job *j)
{
        return atomic_load(&j->done);
}
