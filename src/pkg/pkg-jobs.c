/* SPDX-License-Identifier: Apache-2.0 */
/* packages=: worker threads for the package cache; see pkg-jobs.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/error.h"
#include "pkg/pkg-jobs.h"

#define JOBS_MAX 64

struct pkg_jobs {
        pthread_mutex_t mu;
        pthread_cond_t cv;
        pkg_job *head, *tail;
        bool stop;
        unsigned n, started;
        pkg_job *running[JOBS_MAX];
        pthread_t threads[JOBS_MAX];
};

typedef struct worker_arg {
        pkg_jobs *pool;
        unsigned slot;
} worker_arg;

static void finish(pkg_jobs *p, pkg_job *j)
{
        bool dropped;
        pthread_mutex_lock(&p->mu);
        atomic_store(&j->done, true);
        if (j->efd >= 0)
                (void)eventfd_write(j->efd, 1);
        dropped = j->dropped;
        pthread_mutex_unlock(&p->mu);
        if (dropped)
                j->free(j);
}

static void *worker(void *arg)
{
        worker_arg a = *(worker_arg *)arg;
        pkg_jobs *p = a.pool;
        free(arg);
        pthread_mutex_lock(&p->mu);
        for (;;) {
                while (!p->head && !p->stop)
                        pthread_cond_wait(&p->cv, &p->mu);
                pkg_job *j = p->head;
                if (!j)
                        break; /* stopping, nothing left */
                p->head = j->next;
                if (!p->head)
                        p->tail = NULL;
                if (p->stop)
                        atomic_store(&j->cancel, true);
                p->running[a.slot] = j;
                pthread_mutex_unlock(&p->mu);
                j->run(j); /* a cancelled job only cleans up */
                pthread_mutex_lock(&p->mu);
                p->running[a.slot] = NULL;
                pthread_mutex_unlock(&p->mu);
                finish(p, j);
                pthread_mutex_lock(&p->mu);
        }
        pthread_mutex_unlock(&p->mu);
        return NULL;
}

int pkg_jobs_new(unsigned n, pkg_jobs **ret, hxs_error *err)
{
        if (n == 0 || n > JOBS_MAX)
                return err_fail(err, HXS_ERR_INVALID, -EINVAL, "packages: %u workers (1..%d)", n, JOBS_MAX);
        pkg_jobs *p = calloc(1, sizeof(*p));
        if (!p)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->cv, NULL);
        p->n = n;
        /* no signal is ever delivered to a worker: the service takes its own from a
         * signalfd, and a worker must not run a default action for it */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int r = 0;
        for (unsigned i = 0; i < n; i++) {
                worker_arg *a = malloc(sizeof(*a));
                if (!a) {
                        r = -ENOMEM;
                        break;
                }
                *a = (worker_arg){ p, i };
                r = -pthread_create(&p->threads[i], NULL, worker, a);
                if (r < 0) {
                        free(a);
                        break;
                }
                p->started++;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                pkg_jobs_free(p);
                return err_fail(err, HXS_ERR_SETUP, r, "packages: starting the cache's worker threads: %s",
                                strerror(-r));
        }
        *ret = p;
        return 0;
}

void pkg_jobs_free(pkg_jobs *p)
{
        if (!p)
                return;
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        for (pkg_job *j = p->head; j; j = j->next)
                atomic_store(&j->cancel, true);
        for (unsigned i = 0; i < p->n; i++)
                if (p->running[i])
                        atomic_store(&p->running[i]->cancel, true);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (unsigned i = 0; i < p->started; i++)
                pthread_join(p->threads[i], NULL);
        /* with no worker started, what was queued still has to be cleaned up */
        for (pkg_job *j = p->head, *next; j; j = next) {
                next = j->next;
                j->run(j);
                finish(p, j);
        }
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
}

static int submit(pkg_jobs *p, pkg_job *j, bool want_fd, bool detached)
{
        j->next = NULL;
        j->dropped = detached;
        atomic_store(&j->done, false);
        atomic_store(&j->cancel, false);
        j->efd = -1;
        if (want_fd && (j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
                return -errno;
        pthread_mutex_lock(&p->mu);
        if (p->tail)
                p->tail->next = j;
        else
                p->head = j;
        p->tail = j;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        return 0;
}

int pkg_jobs_submit(pkg_jobs *p, pkg_job *j, bool want_fd)
{
        return submit(p, j, want_fd, false);
}

int pkg_jobs_submit_detached(pkg_jobs *p, pkg_job *j)
{
        return submit(p, j, false, true);
}

void pkg_job_drop(pkg_jobs *p, pkg_job *j)
{
        if (!j)
                return;
        pthread_mutex_lock(&p->mu);
        bool done = atomic_load(&j->done);
        if (!done) {
                j->dropped = true;
                atomic_store(&j->cancel, true);
        }
        pthread_mutex_unlock(&p->mu);
        if (done)
                j->free(j);
}
