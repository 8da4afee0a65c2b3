/* SPDX-License-Identifier: Apache-2.0 */
/* Admission (admission.c): slots, the queue, executions and their end. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "server/call.h"
#include "server/loop.h"

struct server;

/* The queues and the drain (admission.c's own). */
typedef struct admission admission;

/* What runs and waits now, for /health and /metrics. */
typedef struct admission_load {
        uint32_t running, queued;
        uint64_t oldest_received_ms;    /* the oldest waiting request's body; 0: none waits */
        uint64_t memory_held_mb;        /* of MEMORY_BUDGET_MB: running executions, sessions */
} admission_load;

/* Its state, and its deadlines (queue timeouts, the drain's) registered with the loop. */
int admission_setup(struct server *srv);
void admission_free(struct server *srv);
void admission_submit(call *c);                 /* body parsed into c->req */
void admission_forget(call *c);                 /* MHD is done with c: drop what is left */
/* A suspended request's client hung up (call_suspend's hangup): its execution is killed,
 * its slot or queue place freed. */
void admission_hangup(watch *w, uint32_t events);
/* The same for a reason of its own (an MCP client's notifications/cancelled): why is
 * logged where a hang-up says client_disconnected; the connection closes without a
 * reply. */
void admission_cancel(call *c, const char *why);
/* SIGTERM/SIGINT: the first drains, the second kills what runs. After SIGTERM (a
 * service manager, an orchestrator: a load balancer may still send for a moment) a
 * drained service waits for DRAIN_QUIET; after SIGINT (someone at a terminal) it does
 * not. */
void admission_drain(struct server *srv, int signo);
bool admission_draining(const struct server *srv);
/* Seconds a client turned away for a busy service should wait (its Retry-After). */
unsigned admission_retry_after(const struct server *srv);
/* Draining, may the service stop: everything answered, or the exit deadline passed
 * (logged)? */
bool admission_done(struct server *srv);
void admission_load_get(const struct server *srv, admission_load *ret);
void admission_abort_all(struct server *srv); /* last resort at exit */
/* Sessions hold memory from the executions' budget (MEMORY_BUDGET_MB) while they live:
 * reserve mb of it now (0), or -EAGAIN when it is not free or requests wait for it (the
 * caller answers 429); release gives it back and starts what then fits. Release exactly
 * what a successful reserve took. */
int admission_memory_reserve(struct server *srv, uint32_t mb);
void admission_memory_release(struct server *srv, uint32_t mb);
