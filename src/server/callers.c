/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-caller state: what each identity has running and waiting, its per-minute
 * bucket, its sub-queue, and its label in /metrics.
 *
 * Fair queueing: each caller waits in its own FIFO; callers with waiting requests
 * form a ring, and a free slot goes to the next caller of the ring (then that caller
 * moves to the back). One caller sending a hundred requests waits behind itself, not
 * in front of everybody else. QUOTA_QUEUE_PER_CALLER caps what one caller may have
 * waiting, so it cannot fill MAX_QUEUE either.
 *
 * Executions cannot be paused, so fair turns alone do not stop one caller from taking
 * every slot while nobody else waits and keeping them for as long as its executions
 * run. With identities, a caller may therefore hold at most QUOTA_RUNNING_PER_CALLER
 * slots (by default MAX_CONCURRENT less a quarter, so at least one slot is left for
 * the others); its further requests wait, and the ring skips it while it holds that
 * many, even with slots free.
 *
 * The table holds at most CALLERS_MAX callers. An idle caller (nothing running or
 * waiting, a full bucket) carries no information and is forgotten when room is needed.
 * Label slots are handed out to the first METRICS_CALLERS identities seen and kept for
 * the life of the process (counters must not go backwards); later ones are "other".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/call.h"
#include "server/callers.h"
#include "server/loop.h"
#include "server/metrics.h"

#define OTHER_LABEL "other"
#define ANONYMOUS_LABEL "anonymous"

struct callers {
        const hxs_config *cfg;          /* the quotas, METRICS_CALLERS */
        metrics *m;                     /* where the caller labels are kept */
        uint32_t share;                 /* QUOTA_RUNNING_PER_CALLER in effect (0: none) */
        uint64_t memory_share_mb;       /* of MEMORY_BUDGET_MB, alike (0: none) */
        struct caller_list all;         /* most recent first */
        struct caller_list rr;          /* callers with waiting calls, next turn first */
        uint32_t n;
};

void callers_free(callers *cl)
{
        caller_state *cs;

        if (!cl)
                return;
        metrics *m = cl->m;
        while ((cs = TAILQ_FIRST(&cl->all))) {
                TAILQ_REMOVE(&cl->all, cs, link);
                free(cs->id);
                free(cs);
        }
        if (m->caller_labels)
                for (uint32_t i = 0; i < m->n_caller_labels; i++)
                        free(m->caller_labels[i]);
        free(m->caller_labels);
        free(m->caller_executions);
        free(m->caller_rejected);
        m->caller_labels = NULL;
        m->caller_executions = NULL;
        m->caller_rejected = NULL;
        free(cl);
}

int callers_new(const hxs_config *cfg, metrics *m, uint32_t share, callers **ret)
{
        uint32_t n = cfg->metrics_callers;
        callers *cl = calloc(1, sizeof(*cl));

        if (!cl)
                return -ENOMEM;
        cl->cfg = cfg;
        cl->m = m;
        cl->share = share;
        TAILQ_INIT(&cl->all);
        TAILQ_INIT(&cl->rr);
        m->caller_labels = calloc(n + 1, sizeof(*m->caller_labels));
        m->caller_executions = calloc(n + 1, sizeof(*m->caller_executions));
        m->caller_rejected = calloc(n + 1, sizeof(*m->caller_rejected));
        if (!m->caller_labels || !m->caller_executions || !m->caller_rejected) {
                callers_free(cl);
                return -ENOMEM;
        }
        m->caller_other = n;
        *ret = cl;
        return 0;
}

uint32_t callers_share(const callers *cl)
{
        return cl->share;
}

void callers_set_memory_share(callers *cl, uint64_t mb)
{
        cl->memory_share_mb = mb;
}

const char *callers_label(const metrics *m, int label)
{
        if (label >= 0 && (uint32_t)label < m->n_caller_labels)
                return m->caller_labels[label];
        return OTHER_LABEL;
}

static int label_for(callers *cl, const char *id)
{
        metrics *m = cl->m;
        const char *name = id[0] ? id : ANONYMOUS_LABEL;

        for (uint32_t i = 0; i < m->n_caller_labels; i++)
                if (strcmp(m->caller_labels[i], name) == 0)
                        return (int)i;
        if (m->n_caller_labels < cl->cfg->metrics_callers) {
                char *dup = strdup(name);
                if (dup) {
                        m->caller_labels[m->n_caller_labels] = dup;
                        return (int)m->n_caller_labels++;
                }
        }
        return (int)cl->cfg->metrics_callers; /* "other" */
}

static void refill(const callers *cl, caller_state *cs, uint64_t now)
{
        uint64_t q = cl->cfg->quota_per_minute, full = q * 1000;

        if (!q)
                return;
        if (now > cs->refilled_ms) {
                /* q executions per 60000 ms, in thousandths: q / 60 per ms */
                uint64_t add = (now - cs->refilled_ms) * q / 60;
                cs->tokens_milli = cs->tokens_milli + add > full ? full : cs->tokens_milli + add;
                cs->refilled_ms = now;
        }
}

static bool is_idle(const callers *cl, caller_state *cs, uint64_t now)
{
        if (cs->running || cs->queued)
                return false;
        refill(cl, cs, now);
        return !cl->cfg->quota_per_minute || cs->tokens_milli >= (uint64_t)cl->cfg->quota_per_minute * 1000;
}

caller_state *callers_get(callers *cl, const char *id)
{
        caller_state *cs;
        uint64_t now = now_ms();

        TAILQ_FOREACH(cs, &cl->all, link)
                if (strcmp(cs->id, id) == 0) {
                        /* most recent first: the busy callers stay near the front */
                        TAILQ_REMOVE(&cl->all, cs, link);
                        TAILQ_INSERT_HEAD(&cl->all, cs, link);
                        return cs;
                }
        if (cl->n >= CALLERS_MAX) {
                caller_state *victim = NULL;
                TAILQ_FOREACH_REVERSE(cs, &cl->all, caller_list, link)
                        if (is_idle(cl, cs, now)) {
                                victim = cs;
                                break;
                        }
                if (!victim)
                        return NULL;
                TAILQ_REMOVE(&cl->all, victim, link);
                cl->n--;
                free(victim->id);
                free(victim);
        }
        cs = calloc(1, sizeof(*cs));
        if (!cs)
                return NULL;
        cs->id = strdup(id);
        if (!cs->id) {
                free(cs);
                return NULL;
        }
        TAILQ_INIT(&cs->queue);
        cs->tokens_milli = (uint64_t)cl->cfg->quota_per_minute * 1000;
        cs->refilled_ms = now;
        cs->label = label_for(cl, id);
        TAILQ_INSERT_HEAD(&cl->all, cs, link);
        cl->n++;
        return cs;
}

bool callers_take_token(callers *cl, caller_state *cs, uint64_t now, unsigned *ret_wait_s)
{
        uint64_t q = cl->cfg->quota_per_minute;

        if (!q)
                return true;
        refill(cl, cs, now);
        if (cs->tokens_milli >= 1000) {
                cs->tokens_milli -= 1000;
                return true;
        }
        /* ms until the bucket holds one whole execution again */
        uint64_t wait_ms = ((1000 - cs->tokens_milli) * 60 + q - 1) / q;
        uint64_t s = (wait_ms + 999) / 1000;
        *ret_wait_s = s < 1 ? 1 : s > 60 ? 60 : (unsigned)s;
        return false;
}

void callers_enqueue(callers *cl, call *c)
{
        caller_state *cs = c->cs;

        TAILQ_INSERT_TAIL(&cs->queue, c, clink);
        cs->queued++;
        if (!cs->in_rr) {
                TAILQ_INSERT_TAIL(&cl->rr, cs, rr_link);
                cs->in_rr = true;
        }
}

void callers_unqueue(callers *cl, call *c)
{
        caller_state *cs = c->cs;

        TAILQ_REMOVE(&cs->queue, c, clink);
        cs->queued--;
        if (cs->queued == 0 && cs->in_rr) {
                TAILQ_REMOVE(&cl->rr, cs, rr_link);
                cs->in_rr = false;
        }
}

bool callers_may_run(const callers *cl, const caller_state *cs)
{
        return (!cl->share || cs->running < cl->share) &&
               (!cl->memory_share_mb || cs->memory_mb < cl->memory_share_mb);
}

bool callers_waiting_may_run(const callers *cl)
{
        const caller_state *cs;
        TAILQ_FOREACH(cs, &cl->rr, rr_link)
                if (callers_may_run(cl, cs))
                        return true;
        return false;
}

/* The caller whose turn it is: the first of the ring below its share. */
static caller_state *turn(const callers *cl)
{
        caller_state *cs;
        TAILQ_FOREACH(cs, &cl->rr, rr_link)
                if (callers_may_run(cl, cs))
                        break;
        return cs;
}

call *callers_peek(const callers *cl)
{
        caller_state *cs = turn(cl);
        return cs ? TAILQ_FIRST(&cs->queue) : NULL;
}

call *callers_next(callers *cl)
{
        caller_state *cs = turn(cl);
        if (!cs)
                return NULL;
        call *c = TAILQ_FIRST(&cs->queue);
        callers_unqueue(cl, c);
        if (cs->in_rr) {
                /* its turn is over: to the back of the ring */
                TAILQ_REMOVE(&cl->rr, cs, rr_link);
                TAILQ_INSERT_TAIL(&cl->rr, cs, rr_link);
        }
        return c;
}
