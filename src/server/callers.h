/* SPDX-License-Identifier: Apache-2.0 */
/* Per-caller state (callers.c): quotas, the fair queue, metrics labels. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "server/call.h"
#include "server/metrics.h"

struct hxs_server;

typedef struct caller_state {
        char *id;                       /* SPIFFE ID, "" for anonymous */
        uint32_t running, queued;
        uint64_t tokens_milli;          /* QUOTA_PER_MINUTE bucket, thousandths */
        uint64_t refilled_ms;
        int label;                      /* metrics label index; the "other" index if none */
        struct call_list queue;         /* its waiting calls, oldest first */
        bool in_rr;
        TAILQ_ENTRY(caller_state) link;         /* srv->callers */
        TAILQ_ENTRY(caller_state) rr_link;      /* srv->rr: callers with waiting calls */
} caller_state;
TAILQ_HEAD(caller_list, caller_state);

/* Callers tracked at once; idle ones are forgotten to make room. */
#define CALLERS_MAX 4096u

int callers_setup(struct hxs_server *srv);
void callers_cleanup(struct hxs_server *srv);
/* The caller's state, created if new; NULL when CALLERS_MAX are all busy. */
caller_state *callers_get(struct hxs_server *srv, const char *id);
/* Takes one execution from the per-minute bucket: true, or false and the seconds
 * until one is there. */
bool callers_take_token(struct hxs_server *srv, caller_state *cs, uint64_t now, unsigned *ret_wait_s);
void callers_enqueue(struct hxs_server *srv, call *c);
void callers_unqueue(struct hxs_server *srv, call *c);
/* Next waiting call, round-robin by caller, skipping callers at QUOTA_RUNNING_PER_CALLER;
 * NULL when there is none. */
call *callers_next(struct hxs_server *srv);
bool callers_may_run(const struct hxs_server *srv, const caller_state *cs); /* below its share */
bool callers_waiting_may_run(const struct hxs_server *srv); /* a waiting caller is below its share */
const char *callers_label(const metrics *m, int label);
