/* SPDX-License-Identifier: Apache-2.0 */
/* What is left of an ended sandbox, released after its reply (remains.h). */
#include <errno.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ns/remains.h"

/* PID 1 was killed: its end is its namespaces' teardown, a moment. */
#define REAP_WAIT_MS 1000

/* 0 once released, -EAGAIN while PID 1 has not ended within wait_ms (nothing else is
 * released then). */
static int release(cg_graveyard *g, ns_owners *o, ns_remnant *m, int wait_ms)
{
        if (m->pidfd >= 0) {
                struct pollfd p = { .fd = m->pidfd, .events = POLLIN };
                siginfo_t si = { 0 };
                (void)poll(&p, 1, wait_ms);
                if (waitid((idtype_t)P_PIDFD, (id_t)m->pidfd, &si, WEXITED | WNOHANG) == 0 && !si.si_pid)
                        return -EAGAIN;
                close(m->pidfd);
                m->pidfd = -1;
        }
        if (m->have_cg) {
                cg_exec_kill(&m->cg);
                if (cg_exec_remove(&m->cg) < 0)
                        cg_graveyard_add(g, &m->cg);
        }
        if (m->owner_uid)
                ns_owner_put(o, m->owner_uid);
        return 0;
}

void ns_remains_add(ns_remains *r, cg_graveyard *g, ns_owners *o, int pidfd, const cg_exec *cg, bool have_cg,
                    uid_t owner_uid)
{
        if (pidfd < 0 && !have_cg && !owner_uid)
                return;
        ns_remnant m = { .pidfd = pidfd, .cg = *cg, .have_cg = have_cg, .owner_uid = owner_uid };
        if (r->deferred && r->n < NS_REMAINS_MAX) {
                r->left[r->n++] = m;
                return;
        }
        while (release(g, o, &m, REAP_WAIT_MS) == -EAGAIN) /* as an immediate release: until it ends */
                ;
}

bool ns_remains_sweep(ns_remains *r, cg_graveyard *g, ns_owners *o)
{
        r->deferred = true;
        unsigned kept = 0;
        for (unsigned i = 0; i < r->n; i++)
                if (release(g, o, &r->left[i], REAP_WAIT_MS) == -EAGAIN)
                        r->left[kept++] = r->left[i];
        r->n = kept;
        return kept > 0;
}

void ns_remains_flush(ns_remains *r, cg_graveyard *g, ns_owners *o)
{
        for (unsigned i = 0; i < r->n; i++)
                while (release(g, o, &r->left[i], REAP_WAIT_MS) == -EAGAIN)
                        ;
        r->n = 0;
}
