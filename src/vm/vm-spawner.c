/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cold starts off the event loop. When the pool has no VM for an execution, its VM is
 * started here, by one of a few long-lived threads, and the execution waits for an
 * eventfd like for any other event: vm_spawn blocks (Firecracker's jail, API calls
 * and vsock handshake take up to 15 s), the loop must not.
 *
 * The threads live as long as the backend: a hypervisor dies with the thread that
 * started it (PR_SET_PDEATHSIG follows the parent thread, not the process), so a
 * thread per start would take its VM with it. A start whose execution ended first
 * (its time limit, the client went) is abandoned: the thread destroys the VM as soon
 * as it has it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <unistd.h>

#include "core/error.h"
#include "vm/vm.h"

/* Cold starts that run at once; more wait their turn. */
#define SPAWN_THREADS_MAX 4

typedef enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE } job_state;

struct vm_spawn_job {
        vm_spawner *s;
        uint32_t ram_mb;
        int efd;                /* readable once state is JOB_DONE */
        job_state state;
        bool abandoned;         /* JOB_RUNNING only: the thread frees it */
        int r;
        vm_instance vm;         /* r == 0 */
        hxs_error err;          /* r < 0 */
        TAILQ_ENTRY(vm_spawn_job) link;
};

struct vm_spawner {
        vm_host host;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        TAILQ_HEAD(, vm_spawn_job) queue;
        pthread_t threads[SPAWN_THREADS_MAX];
        unsigned n_threads, n_idle;
        bool stop;
};

static void job_free(vm_spawn_job *j)
{
        if (j->state == JOB_DONE && j->r == 0)
                vm_destroy(&j->vm);
        close(j->efd);
        free(j);
}

static void *spawn_main(void *arg)
{
        vm_spawner *s = arg;
        pthread_mutex_lock(&s->mu);
        while (!s->stop) {
                vm_spawn_job *j = TAILQ_FIRST(&s->queue);
                if (!j) {
                        s->n_idle++;
                        pthread_cond_wait(&s->cv, &s->mu);
                        s->n_idle--;
                        continue;
                }
                TAILQ_REMOVE(&s->queue, j, link);
                j->state = JOB_RUNNING;
                pthread_mutex_unlock(&s->mu);
                vm_instance vm;
                hxs_error err = { 0 };
                int r = vm_spawn(&s->host, j->ram_mb, &vm, &err);
                pthread_mutex_lock(&s->mu);
                j->state = JOB_DONE;
                j->r = r;
                if (r == 0)
                        j->vm = vm;
                else
                        j->err = err;
                if (j->abandoned) {
                        pthread_mutex_unlock(&s->mu);
                        job_free(j); /* destroys the VM */
                        pthread_mutex_lock(&s->mu);
                        continue;
                }
                (void)eventfd_write(j->efd, 1);
        }
        pthread_mutex_unlock(&s->mu);
        return NULL;
}

int vm_spawner_new(const vm_host *h, vm_spawner **ret, hxs_error *err)
{
        vm_spawner *s = calloc(1, sizeof(*s));
        if (!s)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        s->host = *h;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv, NULL);
        TAILQ_INIT(&s->queue);
        *ret = s;
        return 0;
}

void vm_spawner_free(vm_spawner *s)
{
        if (!s)
                return;
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        /* a start under way finishes first (and is destroyed: its execution is gone) */
        for (unsigned i = 0; i < s->n_threads; i++)
                pthread_join(s->threads[i], NULL);
        vm_spawn_job *j;
        while ((j = TAILQ_FIRST(&s->queue))) {
                TAILQ_REMOVE(&s->queue, j, link);
                job_free(j);
        }
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
}

int vm_spawner_submit(vm_spawner *s, uint32_t ram_mb, vm_spawn_job **ret, int *ret_fd, hxs_error *err)
{
        vm_spawn_job *j = calloc(1, sizeof(*j));
        if (!j)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        j->s = s;
        j->ram_mb = ram_mb;
        j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (j->efd < 0) {
                int e = errno;
                free(j);
                return err_fail(err, HXS_ERR_SETUP, -e, "eventfd: %s", strerror(e));
        }
        pthread_mutex_lock(&s->mu);
        int r = 0;
        if (s->n_idle == 0 && s->n_threads < SPAWN_THREADS_MAX) {
                r = -pthread_create(&s->threads[s->n_threads], NULL, spawn_main, s);
                if (r == 0)
                        s->n_threads++;
                else if (s->n_threads > 0)
                        r = 0; /* the ones there will get to it */
        }
        if (r == 0) {
                TAILQ_INSERT_TAIL(&s->queue, j, link);
                pthread_cond_signal(&s->cv);
        }
        pthread_mutex_unlock(&s->mu);
        if (r < 0) {
                close(j->efd);
                free(j);
                return err_fail(err, HXS_ERR_SETUP, r, "starting the microVM: a thread: %s", strerror(-r));
        }
        *ret = j;
        *ret_fd = j->efd;
        return 0;
}

int vm_spawn_job_take(vm_spawn_job *j, vm_instance *ret, hxs_error *err)
{
        vm_spawner *s = j->s;
        pthread_mutex_lock(&s->mu);
        bool done = j->state == JOB_DONE;
        pthread_mutex_unlock(&s->mu);
        if (!done)
                return -EAGAIN;
        int r = j->r;
        if (r == 0) {
                *ret = j->vm;
                j->r = -ECANCELED; /* moved out: job_free must not destroy it */
        } else if (err) {
                *err = j->err;
        }
        job_free(j);
        return r;
}

void vm_spawn_job_abandon(vm_spawn_job *j)
{
        if (!j)
                return;
        vm_spawner *s = j->s;
        pthread_mutex_lock(&s->mu);
        bool free_now = true;
        if (j->state == JOB_QUEUED) {
                TAILQ_REMOVE(&s->queue, j, link);
        } else if (j->state == JOB_RUNNING) {
                j->abandoned = true; /* its thread frees it */
                free_now = false;
        }
        pthread_mutex_unlock(&s->mu);
        if (free_now)
                job_free(j);
}
