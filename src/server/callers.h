/* SPDX-License-Identifier: Apache-2.0 */
/* Per-caller state (callers.c): quotas, the fair queue, metrics labels. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "server/call.h"
#include "server/metrics.h"

/* The table of callers (callers.c's own). */
typedef struct callers callers;

typedef struct caller_state {
        char *id;                       /* SPIFFE ID, "" for anonymous */
        uint32_t running, queued;
        uint64_t memory_mb;             /* memory_mb of its running executions */
        uint64_t tokens_milli;          /* QUOTA_PER_MINUTE bucket, thousandths */
        uint64_t refilled_ms;
        int label;                      /* metrics label index; the "other" index if none */
        struct call_list queue;         /* its waiting calls, oldest first */
        bool in_rr;
        TAILQ_ENTRY(caller_state) link;         /* every caller, most recent first */
        TAILQ_ENTRY(caller_state) rr_link;      /* the ring of callers with waiting calls */
} caller_state;
TAILQ_HEAD(caller_list, caller_state);

/* Callers tracked at once; idle ones are forgotten to make room. */
#define CALLERS_MAX 4096u

/* The table for cfg's quotas (cfg and m must outlive it); the caller labels of
 * /metrics are kept in m. share: the slots one caller may hold (QUOTA_RUNNING_PER_CALLER
 * in effect; 0 for no limit). */
int callers_new(const hxs_config *cfg, metrics *m, uint32_t share, callers **ret);
void callers_free(callers *cl);                 /* NULL is fine */
uint32_t callers_share(const callers *cl);
/* The memory one caller's running executions may hold before its next waits (0: no
 * limit): with a share of slots, the same share of MEMORY_BUDGET_MB, so that a caller
 * cannot hold the whole budget while others wait either. */
void callers_set_memory_share(callers *cl, uint64_t mb);
/* The caller's state, created if new; NULL when CALLERS_MAX are all busy. */
caller_state *callers_get(callers *cl, const char *id);
/* Takes one execution from the per-minute bucket: true, or false and the seconds
 * until one is there. */
bool callers_take_token(callers *cl, caller_state *cs, uint64_t now, unsigned *ret_wait_s);
/* c (c->cs its caller) waits in its caller's queue; unqueue takes it out again. */
void callers_enqueue(callers *cl, call *c);
void callers_unqueue(callers *cl, call *c);
/* Next waiting call, round-robin by caller, skipping callers at their share, taken
 * out of its caller's queue; NULL when there is none. */
call *callers_next(callers *cl);
/* The call callers_next would take now, left where it is. */
call *callers_peek(const callers *cl);
bool callers_may_run(const callers *cl, const caller_state *cs); /* below its shares */
bool callers_waiting_may_run(const callers *cl); /* a waiting caller is below its share */
const char *callers_label(const metrics *m, int label);
