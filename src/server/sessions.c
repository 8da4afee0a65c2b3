/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's sessions. Each is one hxs_session (the library's) whose fd sits in the
 * loop; its memory_mb is held from the executions' memory budget while its sandbox
 * lives (admission.c), so sessions and executions never promise the host more than
 * MEMORY_BUDGET_MB together. A session belongs to the caller that made it: another
 * caller's id is a 404, as execution records are. Ended sessions stay visible as
 * "ended" for SESSIONS_ENDED_KEEP_MS (at most SESSIONS_ENDED_MAX of them); a deleted
 * one is gone at once. Sessions do not survive the service: on SIGTERM every one ends
 * (shutdown) and the service waits for their sandboxes to be gone.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/error.h"
#include "core/randid.h"
#include "server/admission.h"
#include "server/log.h"
#include "server/sessions.h"
#include "server/state.h"
#include "session/session-json.h"

/* After the drain began, how long sessions get to be gone before the service stops. */
#define SESSIONS_DRAIN_MS 10000

struct sessions {
        TAILQ_HEAD(, live_session) all;
        uint32_t n_live;                /* not ended */
        uint32_t n_ended;               /* ended, still listed */
        loop_hook hook;
        uint64_t created, cells, ended[HXS_SESSION_END_MAX];
        bool draining;
        uint64_t drain_ms;
};

static bool is_live(const live_session *ls)
{
        return hxs_session_get_state(ls->s) != HXS_SESSION_ENDED;
}

/* It ended: counted and logged once; once its sandbox is gone, its memory goes back. */
static void note_end(live_session *ls)
{
        server *srv = ls->srv;
        sessions *ss = srv->sessions;
        if (!is_live(ls) && !ls->counted_end) {
                hxs_session_info in;
                hxs_session_get_info(ls->s, &in);
                ls->counted_end = true;
                ss->n_live--;
                if (!ls->deleted)
                        ss->n_ended++;
                ss->ended[in.end]++;
                log_line("session_ended", "session %s (%s, %s) ended: %s: %s; %" PRIu64 " cells", ls->id,
                         ls->caller[0] ? ls->caller : "anonymous", hxs_language_name(in.language),
                         hxs_session_end_name(in.end) ?: "unknown", in.end_message, in.cells);
        }
        if (hxs_session_finished(ls->s) && !ls->ended_ms) {
                ls->ended_ms = now_ms();
                loop_del(srv->loop, &ls->w);
                if (ls->holds_memory) {
                        ls->holds_memory = false;
                        admission_memory_release(srv, ls->memory_mb);
                }
        }
}

static void on_ready(watch *w, uint32_t events)
{
        (void)events;
        live_session *ls = loop_owner(w, live_session, w);
        hxs_session_process(ls->s);
        if (ls->on_started && hxs_session_get_state(ls->s) != HXS_SESSION_STARTING) {
                session_started_fn fn = ls->on_started;
                ls->on_started = NULL;
                fn(ls, ls->start_call);
        }
        note_end(ls);
}

static void session_free(live_session *ls)
{
        server *srv = ls->srv;
        loop_del(srv->loop, &ls->w);
        if (ls->holds_memory)
                admission_memory_release(srv, ls->memory_mb);
        hxs_session_free(ls->s);
        free(ls);
}

/* Gone sandboxes of deleted sessions, and ended ones past their time or their count,
 * are forgotten (in a tick: never under an event that may still name their watch). */
static void tick(void *data, uint64_t now)
{
        server *srv = data;
        sessions *ss = srv->sessions;
        live_session *ls, *next;
        for (ls = TAILQ_FIRST(&ss->all); ls; ls = next) {
                next = TAILQ_NEXT(ls, link);
                if (!ls->ended_ms)
                        continue;
                bool old = now >= ls->ended_ms + SESSIONS_ENDED_KEEP_MS || ss->n_ended > SESSIONS_ENDED_MAX;
                if (!ls->deleted && !old)
                        continue;
                if (!ls->deleted)
                        ss->n_ended--;
                TAILQ_REMOVE(&ss->all, ls, link);
                session_free(ls);
        }
}

static uint64_t next_deadline(void *data)
{
        server *srv = data;
        uint64_t next = UINT64_MAX;
        live_session *ls;
        TAILQ_FOREACH(ls, &srv->sessions->all, link)
                if (ls->ended_ms) {
                        uint64_t t = ls->deleted ? 0 : ls->ended_ms + SESSIONS_ENDED_KEEP_MS;
                        if (t < next)
                                next = t;
                }
        return next;
}

int sessions_setup(server *srv)
{
        sessions *ss = calloc(1, sizeof(*ss));
        if (!ss)
                return -ENOMEM;
        TAILQ_INIT(&ss->all);
        ss->hook = (loop_hook){ .next_deadline = next_deadline, .tick = tick, .data = srv };
        srv->sessions = ss;
        loop_hook_add(srv->loop, &ss->hook);
        return 0;
}

void sessions_free(server *srv)
{
        sessions *ss = srv->sessions;
        if (!ss)
                return;
        live_session *ls;
        while ((ls = TAILQ_FIRST(&ss->all))) {
                TAILQ_REMOVE(&ss->all, ls, link);
                session_free(ls);
        }
        free(ss);
        srv->sessions = NULL;
}

static unsigned caller_live(server *srv, const char *caller)
{
        unsigned n = 0;
        live_session *ls;
        TAILQ_FOREACH(ls, &srv->sessions->all, link)
                if (is_live(ls) && strcmp(ls->caller, caller) == 0)
                        n++;
        return n;
}

/* 429 with Retry-After: a session frees its place only when it ends. */
static int too_many(call *c, const char *code, const char *message)
{
        call_set_error(c, 429, code, message);
        c->retry_after_s = 10;
        return -EBUSY;
}

int sessions_create(call *c, const hxs_request *req, const hxs_session_limits *lim, live_session **ret)
{
        server *srv = c->srv;
        sessions *ss = srv->sessions;
        char msg[200];
        if (ss->n_live >= srv->cfg.max_sessions) {
                snprintf(msg, sizeof(msg), "the service has %u sessions, its most (MAX_SESSIONS); retry once one ends",
                         ss->n_live);
                return too_many(c, "overloaded", msg);
        }
        if (caller_live(srv, c->caller) >= srv->cfg.max_sessions_per_caller) {
                snprintf(msg, sizeof(msg), "this caller has %u sessions, its most (MAX_SESSIONS_PER_CALLER); "
                         "delete one or retry once one ends", srv->cfg.max_sessions_per_caller);
                return too_many(c, "quota_exceeded", msg);
        }
        hxs_error err = { 0 };
        /* the memory it asks for (validated, its default set, by the parser) */
        uint32_t mb = hxs_request_memory_mb(req) ? hxs_request_memory_mb(req) : srv->cfg.default_memory_mb;
        if (admission_memory_reserve(srv, mb) < 0)
                return too_many(c, "overloaded",
                                "the memory of the service's executions and sessions (MEMORY_BUDGET_MB) is in use; retry later");
        live_session *ls = calloc(1, sizeof(*ls));
        if (!ls) {
                admission_memory_release(srv, mb);
                call_set_error(c, 500, "internal", "out of memory");
                return -ENOMEM;
        }
        ls->srv = srv;
        ls->memory_mb = mb;
        ls->holds_memory = true;
        ls->w.fd = -1;
        snprintf(ls->caller, sizeof(ls->caller), "%s", c->caller);
        randid_make(ls->id);
        int r = hxs_session_start(srv->engine, req, lim, &ls->s, &err);
        if (r == 0 && (r = loop_add(srv->loop, &ls->w, hxs_session_fd(ls->s), EPOLLIN, on_ready)) < 0)
                err_fail(&err, HXS_ERR_INTERNAL, r, "cannot watch the session: %s", strerror(-r));
        if (r < 0) {
                call_set_engine_error(c, &err, "the session could not start");
                session_free(ls);
                return r;
        }
        TAILQ_INSERT_TAIL(&ss->all, ls, link);
        ss->n_live++;
        ss->created++;
        hxs_session_info in;
        hxs_session_get_info(ls->s, &in);
        log_line("session_started", "session %s (%s, %s, %u MB, idle %u s, lifetime %u s)", ls->id,
                 ls->caller[0] ? ls->caller : "anonymous", hxs_language_name(in.language), in.memory_mb,
                 in.idle_timeout_s, in.lifetime_s);
        *ret = ls;
        return 0;
}

live_session *sessions_find(server *srv, const char *id, const char *caller)
{
        live_session *ls;
        TAILQ_FOREACH(ls, &srv->sessions->all, link)
                if (!ls->deleted && strcmp(ls->id, id) == 0)
                        return strcmp(ls->caller, caller) == 0 ? ls : NULL;
        return NULL;
}

char *sessions_list_json(server *srv, const char *caller, size_t *ret_len)
{
        json_t *a = json_array();
        live_session *ls;
        TAILQ_FOREACH(ls, &srv->sessions->all, link)
                if (a && !ls->deleted && strcmp(ls->caller, caller) == 0)
                        json_array_append_new(a, session_to_json(ls->s, ls->id));
        json_t *o = a ? json_pack("{s:o}", "sessions", a) : NULL;
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (text)
                *ret_len = strlen(text);
        return text;
}

void sessions_delete(live_session *ls)
{
        sessions *ss = ls->srv->sessions;
        if (!is_live(ls) && !ls->deleted)
                ss->n_ended--; /* it was listed as ended */
        ls->deleted = true;
        hxs_session_end_now(ls->s, HXS_SESSION_DELETED);
        note_end(ls); /* what waits is answered, and the sandbox gone, in the next rounds */
}

void sessions_count_cell(server *srv)
{
        srv->sessions->cells++;
}

void sessions_drain(server *srv)
{
        sessions *ss = srv->sessions;
        if (!ss || ss->draining)
                return;
        ss->draining = true;
        ss->drain_ms = now_ms();
        if (ss->n_live)
                log_line("drain", "ending %u sessions", ss->n_live);
        live_session *ls;
        TAILQ_FOREACH(ls, &ss->all, link) {
                hxs_session_end_now(ls->s, HXS_SESSION_SHUTDOWN);
                (void)hxs_session_process(ls->s);
                note_end(ls);
        }
}

bool sessions_done(server *srv)
{
        sessions *ss = srv->sessions;
        if (!ss || !ss->draining)
                return true;
        live_session *ls;
        TAILQ_FOREACH(ls, &ss->all, link)
                if (!hxs_session_finished(ls->s)) {
                        if (now_ms() < ss->drain_ms + SESSIONS_DRAIN_MS)
                                return false;
                        log_line("drain", "giving up on sessions whose sandbox is not gone yet");
                        return true;
                }
        return true;
}

void sessions_health(server *srv, uint32_t *ret_live, uint64_t *ret_cells)
{
        *ret_live = srv->sessions ? srv->sessions->n_live : 0;
        *ret_cells = srv->sessions ? srv->sessions->cells : 0;
}

void sessions_metrics(server *srv, FILE *f)
{
        sessions *ss = srv->sessions;
        if (!ss)
                return;
        fprintf(f, "# HELP hexr_sandbox_sessions Sessions alive now.\n# TYPE hexr_sandbox_sessions gauge\n");
        fprintf(f, "hexr_sandbox_sessions %u\n", ss->n_live);
        fprintf(f, "# HELP hexr_sandbox_max_sessions Sessions the service may have alive at once (MAX_SESSIONS).\n"
                   "# TYPE hexr_sandbox_max_sessions gauge\n");
        fprintf(f, "hexr_sandbox_max_sessions %u\n", srv->cfg.max_sessions);
        fprintf(f, "# HELP hexr_sandbox_sessions_created_total Sessions started.\n"
                   "# TYPE hexr_sandbox_sessions_created_total counter\n");
        fprintf(f, "hexr_sandbox_sessions_created_total %" PRIu64 "\n", ss->created);
        fprintf(f, "# HELP hexr_sandbox_session_cells_total Cells run in sessions.\n"
                   "# TYPE hexr_sandbox_session_cells_total counter\n");
        fprintf(f, "hexr_sandbox_session_cells_total %" PRIu64 "\n", ss->cells);
        fprintf(f, "# HELP hexr_sandbox_sessions_ended_total Sessions that ended, by why.\n"
                   "# TYPE hexr_sandbox_sessions_ended_total counter\n");
        for (int e = 1; e < HXS_SESSION_END_MAX; e++)
                fprintf(f, "hexr_sandbox_sessions_ended_total{reason=\"%s\"} %" PRIu64 "\n",
                        hxs_session_end_name((hxs_session_end)e), ss->ended[e]);
}
