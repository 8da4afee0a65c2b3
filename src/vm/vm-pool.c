/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The warm pool: VMs booted ahead of time, each waiting in its agent for one
 * execution. A thread boots them one at a time (boots compete for the same cores as
 * executions) and refills the pool whenever one is taken. A VM is handed out once and
 * destroyed after its execution; nothing is ever reused. Boot failures back off, so a
 * broken image costs a boot attempt now and then, not a busy loop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "vm/vm.h"

#define POOL_MAX          64
#define BOOT_TIMEOUT_MS   120000
#define BACKOFF_MIN_MS    500
#define BACKOFF_MAX_MS    30000

struct vm_pool {
        vm_host host;
        uint32_t ram_mb;
        unsigned target;
        pthread_t thread;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        atomic_bool stop;
        vm_instance ready[POOL_MAX];
        unsigned n_ready;
        unsigned long booted, failed;
        char last_error[300];
};

static void deadline_in(struct timespec *ts, long ms)
{
        clock_gettime(CLOCK_MONOTONIC, ts);
        ts->tv_sec += ms / 1000;
        ts->tv_nsec += (ms % 1000) * 1000000;
        if (ts->tv_nsec >= 1000000000) {
                ts->tv_sec++;
                ts->tv_nsec -= 1000000000;
        }
}

/* Boots one VM up to READY; checks the stop flag between short waits. */
static int boot_one(vm_pool *p, vm_instance *v, hxs_error *err)
{
        int r = vm_spawn(&p->host, p->ram_mb, v, err);
        if (r < 0)
                return r;
        for (int waited = 0; waited < BOOT_TIMEOUT_MS; waited += 250) {
                if (atomic_load(&p->stop)) {
                        vm_destroy(v);
                        return -ECANCELED;
                }
                r = vm_wait_ready(v, 250, err);
                if (r != -ETIMEDOUT)
                        break;
        }
        if (r < 0)
                vm_destroy(v);
        return r;
}

static void *pool_main(void *arg)
{
        vm_pool *p = arg;
        long backoff = 0;
        pthread_mutex_lock(&p->mu);
        while (!atomic_load(&p->stop)) {
                if (p->n_ready >= p->target) {
                        pthread_cond_wait(&p->cv, &p->mu);
                        continue;
                }
                pthread_mutex_unlock(&p->mu);
                vm_instance v;
                hxs_error why = { 0 };
                int r = boot_one(p, &v, &why);
                pthread_mutex_lock(&p->mu);
                if (r == 0 && !atomic_load(&p->stop)) {
                        p->ready[p->n_ready++] = v;
                        p->booted++;
                        backoff = 0;
                        continue;
                }
                if (r == 0)
                        vm_destroy(&v);
                if (r == -ECANCELED || atomic_load(&p->stop))
                        break;
                p->failed++;
                snprintf(p->last_error, sizeof(p->last_error), "%s", why.message); /* stats show it */
                backoff = backoff ? (backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2)
                                  : BACKOFF_MIN_MS;
                struct timespec ts;
                deadline_in(&ts, backoff);
                while (!atomic_load(&p->stop) &&
                       pthread_cond_timedwait(&p->cv, &p->mu, &ts) != ETIMEDOUT)
                        ;
        }
        pthread_mutex_unlock(&p->mu);
        return NULL;
}

int vm_pool_new(const vm_host *h, uint32_t size, uint32_t budget_mb, uint32_t ram_mb,
                vm_pool **ret, hxs_error *err)
{
        *ret = NULL;
        unsigned target = size;
        if (ram_mb > 0 && budget_mb / ram_mb < target)
                target = budget_mb / ram_mb;
        if (target > POOL_MAX)
                target = POOL_MAX;
        if (target == 0)
                return 0;
        vm_pool *p = calloc(1, sizeof(*p));
        if (!p)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        p->host = *h;
        p->ram_mb = ram_mb;
        p->target = target;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&p->mu, NULL);
        int r = pthread_create(&p->thread, NULL, pool_main, p);
        if (r != 0) {
                pthread_cond_destroy(&p->cv);
                pthread_mutex_destroy(&p->mu);
                free(p);
                return err_fail(err, HXS_ERR_INTERNAL, -r, "starting the microVM pool: %s", strerror(r));
        }
        *ret = p;
        return 0;
}

void vm_pool_free(vm_pool *p)
{
        if (!p)
                return;
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, true);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
        for (unsigned i = 0; i < p->n_ready; i++)
                vm_destroy(&p->ready[i]);
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
}

int vm_pool_take(vm_pool *p, uint32_t ram_mb, vm_instance *ret)
{
        int r = -EAGAIN;
        pthread_mutex_lock(&p->mu);
        if (p->n_ready > 0 && p->ram_mb >= ram_mb) {
                /* oldest first: it has waited longest */
                *ret = p->ready[0];
                memmove(&p->ready[0], &p->ready[1], (p->n_ready - 1) * sizeof(p->ready[0]));
                p->n_ready--;
                pthread_cond_signal(&p->cv);
                r = 0;
        }
        pthread_mutex_unlock(&p->mu);
        return r;
}

void vm_pool_state(vm_pool *p, unsigned *ret_ready, unsigned *ret_target,
                   unsigned long *ret_booted, unsigned long *ret_failed, char *ret_last_error, size_t size)
{
        pthread_mutex_lock(&p->mu);
        snprintf(ret_last_error, size, "%s", p->last_error);
        *ret_ready = p->n_ready;
        *ret_target = p->target;
        *ret_booted = p->booted;
        *ret_failed = p->failed;
        pthread_mutex_unlock(&p->mu);
}
