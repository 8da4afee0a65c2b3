/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's live sessions (sessions.c): who owns each, the memory each holds from
 * the executions' budget while it lives, its fd in the loop, the ended ones kept
 * visible for a while, the quotas (MAX_SESSIONS, MAX_SESSIONS_PER_CALLER), their
 * counters for /health and /metrics, and the drain (every session ends on SIGTERM).
 * The HTTP routes are session-call.c's.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/queue.h>

#include "hexr-sandbox/sandbox.h"
#include "server/call.h"
#include "server/identity.h"
#include "server/loop.h"

struct server;

/* How long an ended session stays visible (GET answers "ended"), and how many do. */
#define SESSIONS_ENDED_KEEP_MS (10 * 60 * 1000)
#define SESSIONS_ENDED_MAX 256

typedef struct live_session live_session;
/* Called once when the session is no longer starting (ready, or ended). */
typedef void (*session_started_fn)(live_session *ls, call *c);

struct live_session {
        char id[33];
        char caller[SPIFFE_ID_MAX + 1]; /* "" anonymous */
        struct server *srv;
        hxs_session *s;
        watch w;
        uint32_t memory_mb;             /* held from MEMORY_BUDGET_MB while it lives */
        bool holds_memory;
        bool deleted;                   /* DELETE: 404 from now on */
        bool counted_end;
        uint64_t ended_ms;              /* when its sandbox was gone (0: not yet) */
        session_started_fn on_started;  /* a create request waits for "ready" */
        call *start_call;
        TAILQ_ENTRY(live_session) link;
};

typedef struct sessions sessions;

int sessions_setup(struct server *srv);
void sessions_free(struct server *srv);        /* kills what is left */
/* Starts a session for the caller: 0, or an error with status/code/message prepared
 * in c (429 + Retry-After past a quota or the memory budget, 400 naming a field...). */
int sessions_create(call *c, const hxs_request *req, const hxs_session_limits *lim, live_session **ret);
/* The caller's session of that id, NULL when none (or another caller's, or deleted). */
live_session *sessions_find(struct server *srv, const char *id, const char *caller);
/* The caller's sessions as a JSON array text ({"sessions": [...]}). */
char *sessions_list_json(struct server *srv, const char *caller, size_t *ret_len);
/* DELETE: ends it, and it is 404 from now on. */
void sessions_delete(live_session *ls);
/* A cell began (for the counters). */
void sessions_count_cell(struct server *srv);
/* SIGTERM: every session ends (shutdown); sessions_done once all are gone. */
void sessions_drain(struct server *srv);
bool sessions_done(struct server *srv);
/* /health's "sessions" object and /metrics' lines. */
void sessions_health(struct server *srv, uint32_t *ret_live, uint64_t *ret_cells);
void sessions_metrics(struct server *srv, FILE *f);
