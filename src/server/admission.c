/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admission and the life of an execution request after its body was parsed:
 *
 *   it fits              -> start the sandbox, suspend the connection    (RUNNING)
 *   caller over a quota  -> 429 quota_exceeded, with Retry-After
 *   it does not fit, or the caller holds its QUOTA_RUNNING_PER_CALLER share, queue room
 *                        -> suspend and wait, at most QUEUE_TIMEOUT (QUEUED); slots go
 *                           round-robin by caller, FIFO within a caller (callers.c)
 *   neither              -> 429 overloaded, with Retry-After
 *
 * An execution fits by what it uses, not by the cores: a slot of MAX_CONCURRENT (the
 * host's pid budget, budget.c) and its memory_mb of MEMORY_BUDGET_MB, held while it
 * runs. Sessions hold memory from the same budget (admission_memory_reserve). The CPU
 * is not a limit: every sandbox's cgroup has the same cpu.weight, so CPU-bound
 * executions share the cores evenly and sleeping ones cost nothing. The queue is the
 * only place work waits; its head waits for room (no smaller request overtakes it, so
 * a large one is never starved).
 *
 * A suspended connection's socket is watched for the client going away: its sandbox
 * is killed and its slot (or queue place) given to the next request. On drain,
 * queued requests get 503, running ones may finish until DRAIN_TIMEOUT and are then
 * killed; every client still gets a reply.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/error.h"
#include "server/admission.h"
#include "server/call.h"
#include "server/callers.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/records.h"
#include "server/state.h"
#include "server/stream.h"

/* After the drain deadline's kill, how long executions get to report, and replies to be
 * flushed, before the process stops anyway. */
#define EXIT_GRACE_MS 10000

struct admission {
        loop_hook hook;                 /* queue timeouts, the drain's deadlines */
        struct call_list queue;         /* CALL_QUEUED in arrival order (timeouts);
                                         * served round-robin by caller (callers.c) */
        struct call_list running;       /* CALL_RUNNING */
        uint32_t n_queued, n_running;
        uint64_t mem_held_mb;           /* memory_mb of the running, and what sessions hold */

        /* stopping */
        bool draining;
        bool killed_on_drain;
        bool no_quiet;                  /* SIGINT: no DRAIN_QUIET */
        uint64_t drain_deadline_ms;     /* then running executions are killed */
        uint64_t exit_deadline_ms;      /* then we stop whatever is left */
};

static void exec_ready(watch *w, uint32_t events);

/* Seconds a turned-away client should wait: the queue ahead of it, at the mean
 * execution time, spread over the executions that run at once now (what the budgets
 * let run, which may be fewer than the slots). Whole seconds, at least 1. */
unsigned admission_retry_after(const server *srv)
{
        double mean = srv->m.duration_count ? srv->m.duration_sum_s / (double)srv->m.duration_count : 1.0;
        double wait = mean * (double)(srv->adm->n_queued + 1) /
                      (double)(srv->adm->n_running ? srv->adm->n_running : 1);
        if (wait > 60)
                return 60;
        unsigned s = (unsigned)wait;
        if ((double)s < wait)
                s++;
        return s < 1 ? 1 : s;
}

/* Room for mb more of the memory budget, and for one more execution if slot. */
static bool room_for(const server *srv, uint64_t mb, bool slot)
{
        const admission *a = srv->adm;

        if (slot && a->n_running >= srv->cfg.max_concurrent)
                return false;
        return a->mem_held_mb + mb <= srv->cfg.memory_budget_mb;
}

/* What the running executions and sessions leave of the memory budget is the engine's
 * pre-started sandboxes' (hxs_engine_memory_room): they give it up as executions take
 * it, and are not refilled into what executions hold, so that they never turn work
 * away. Told after every change of what is held. */
static void memory_changed(server *srv)
{
        uint64_t held = srv->adm->mem_held_mb, budget = srv->cfg.memory_budget_mb;
        hxs_engine_memory_room(srv->engine, held < budget ? budget - held : 0);
}

static void suspend(call *c)
{
        call_suspend(c, admission_hangup);
}

static void reject_overloaded(call *c, reject_reason why)
{
        server *srv = c->srv;
        char msg[200];

        metrics_reject(&srv->m, why);
        if (why == REJECT_QUEUE_TIMEOUT)
                snprintf(msg, sizeof(msg),
                         "no execution slot became free within %us (%u running, %u waiting); retry later",
                         srv->cfg.queue_timeout_s, srv->adm->n_running, srv->adm->n_queued);
        else
                snprintf(msg, sizeof(msg),
                         "all %u execution slots are busy or hold the memory budget (%" PRIu64 " of %u MB), and %u requests are waiting; retry later",
                         srv->cfg.max_concurrent, srv->adm->mem_held_mb, srv->cfg.memory_budget_mb,
                         srv->adm->n_queued);
        call_set_error(c, 429, "overloaded", msg);
        c->retry_after_s = admission_retry_after(srv);
}

static void reject_draining(call *c)
{
        metrics_reject(&c->srv->m, REJECT_DRAINING);
        call_set_error(c, 503, "draining",
                       "the service is shutting down and takes no new executions; retry on another instance");
}

static void reject_quota(call *c, unsigned wait_s, const char *msg)
{
        server *srv = c->srv;

        metrics_reject(&srv->m, REJECT_QUOTA);
        metrics_caller_quota(&srv->m, c->label);
        call_set_error(c, 429, "quota_exceeded", msg);
        c->retry_after_s = wait_s;
}

/* The engine refused c or could not set its sandbox up (at the start, or after it:
 * the engine only knows once it tried): counted, logged, and the error reply. */
static void setup_failed(call *c, const hxs_error *err)
{
        server *srv = c->srv;
        unsigned status = call_status_of(err);
        const char *code = call_error_code_of(err);

        if (status == 500)
                metrics_execution(&srv->m, c->language, OUTCOME_SETUP_FAILED, 0);
        else
                metrics_reject(&srv->m, status == 422 ? REJECT_NOT_FOUND : REJECT_INVALID);
        call_set_engine_error(c, err, "the sandbox could not be set up");
        log_call(c, NULL, status == 500 ? "setup_failed" : "rejected", code);
        if (status == 500) {
                metrics_caller_execution(&srv->m, c->label, OUTCOME_SETUP_FAILED);
                records_add(srv->records, c, NULL, "setup_failed", code);
        }
        c->logged = true;
}

/* Starts c's sandbox. On failure c holds the error reply and 0 < status. */
static int start(call *c)
{
        server *srv = c->srv;
        hxs_error err = { 0 };

        c->started_ms = now_ms();
        metrics_queue_wait(&srv->m, c->started_ms - c->received_ms);
        int r = hxs_exec_start(srv->engine, c->req, &c->exec, &err);
        if (r >= 0 && c->wants_stream) {
                r = stream_begin(c);
                if (r >= 0)
                        hxs_exec_set_output(c->exec, stream_output, c);
                if (r < 0) {
                        hxs_exec_kill(c->exec);
                        hxs_exec_free(c->exec);
                        c->exec = NULL;
                        err_fail(&err, HXS_ERR_INTERNAL, r, "starting the event stream: out of memory");
                }
        }
        if (r >= 0) {
                r = loop_add(srv->loop, &c->exec_watch, hxs_exec_fd(c->exec), EPOLLIN, exec_ready);
                if (r < 0) {
                        hxs_exec_free(c->exec);
                        c->exec = NULL;
                        err_fail(&err, HXS_ERR_INTERNAL, r, "watching the execution: %s",
                                 strerror(-r));
                }
        }
        if (r < 0) {
                setup_failed(c, &err);
                c->state = CALL_REPLY;
                return r;
        }
        /* The engine copied the request. */
        hxs_request_free(c->req);
        c->req = NULL;
        TAILQ_INSERT_TAIL(&srv->adm->running, c, link);
        srv->adm->n_running++;
        srv->adm->mem_held_mb += c->memory_mb;
        memory_changed(srv);
        c->cs->running++;
        c->cs->memory_mb += c->memory_mb;
        c->state = CALL_RUNNING;
        return 0;
}

/* c's reply (result or error) is prepared: sent as the reply, or as the last events of
 * its stream. */
static void reply_ready(call *c)
{
        if (!c->stream)
                return call_reply_ready(c);
        c->state = CALL_STREAMING;
        stream_end(c);
}

/* Hands free slots to waiting requests: round-robin by caller, oldest first within one. */
static void pump(server *srv)
{
        while (!srv->adm->draining && !TAILQ_EMPTY(&srv->adm->queue)) {
                call *c = callers_peek(srv->callers);
                if (!c || !room_for(srv, c->memory_mb, true))
                        break;
                c = callers_next(srv->callers);
                TAILQ_REMOVE(&srv->adm->queue, c, link);
                srv->adm->n_queued--;
                if (start(c) < 0)
                        c->cs = NULL;
                /* its error reply is ready, or its stream: the handler queues either */
                if (c->state != CALL_RUNNING || c->stream)
                        call_resume(c);
        }
}

/* Waits for a slot: in arrival order (for the timeouts) and in its caller's queue (for
 * the turns). */
static void enqueue(call *c)
{
        server *srv = c->srv;

        TAILQ_INSERT_TAIL(&srv->adm->queue, c, link);
        srv->adm->n_queued++;
        callers_enqueue(srv->callers, c);
}

/* Out of the queue (timeout, hang-up, drain): c no longer counts for its caller. */
static void unqueue(call *c)
{
        server *srv = c->srv;

        TAILQ_REMOVE(&srv->adm->queue, c, link);
        srv->adm->n_queued--;
        callers_unqueue(srv->callers, c);
        c->cs = NULL;
}

void admission_submit(call *c)
{
        server *srv = c->srv;

        if (srv->adm->draining) {
                reject_draining(c);
                c->state = CALL_REPLY;
                return;
        }
        caller_state *cs = callers_get(srv->callers, c->caller);
        if (!cs) {
                metrics_reject(&srv->m, REJECT_OVERLOADED);
                call_set_error(c, 429, "overloaded",
                               "too many distinct callers are busy at once; retry later");
                c->retry_after_s = admission_retry_after(srv);
                c->state = CALL_REPLY;
                return;
        }
        c->label = cs->label;
        char msg[200];
        uint32_t qc = srv->cfg.quota_concurrent;
        if (qc && cs->running + cs->queued >= qc) {
                snprintf(msg, sizeof(msg),
                         "this caller already has %u executions running or waiting (QUOTA_CONCURRENT_PER_CALLER %u); retry later",
                         cs->running + cs->queued, qc);
                reject_quota(c, admission_retry_after(srv), msg);
                c->state = CALL_REPLY;
                return;
        }
        /* Who waits has the first claim, unless all who wait hold their share. */
        bool run_now = room_for(srv, c->memory_mb, true) && callers_may_run(srv->callers, cs) &&
                       (TAILQ_EMPTY(&srv->adm->queue) || !callers_waiting_may_run(srv->callers));
        if (!run_now) {
                uint32_t qq = srv->cfg.quota_queue;
                if (qq && cs->queued >= qq) {
                        snprintf(msg, sizeof(msg),
                                 "this caller already has %u requests waiting for a slot (QUOTA_QUEUE_PER_CALLER %u); retry later",
                                 cs->queued, qq);
                        reject_quota(c, admission_retry_after(srv), msg);
                        c->state = CALL_REPLY;
                        return;
                }
                if (srv->adm->n_queued >= srv->cfg.max_queue) {
                        reject_overloaded(c, REJECT_OVERLOADED);
                        c->state = CALL_REPLY;
                        return;
                }
        }
        /* Accepted: now it counts against the per-minute quota. */
        unsigned wait_s = 0;
        if (!callers_take_token(srv->callers, cs, now_ms(), &wait_s)) {
                snprintf(msg, sizeof(msg),
                         "this caller has started its %u executions of the last minute (QUOTA_PER_MINUTE); retry in %us",
                         srv->cfg.quota_per_minute, wait_s);
                reject_quota(c, wait_s, msg);
                c->state = CALL_REPLY;
                return;
        }
        c->cs = cs;
        if (run_now) {
                if (start(c) < 0)
                        c->cs = NULL;
                else if (!c->stream)
                        suspend(c); /* a stream is queued by the handler at once */
                return;
        }
        enqueue(c);
        c->state = CALL_QUEUED;
        suspend(c);
}

/* Stops tracking c's execution (it is done, or being abandoned). */
static void drop_exec(call *c)
{
        server *srv = c->srv;

        loop_del(srv->loop, &c->exec_watch);
        hxs_exec_free(c->exec);
        c->exec = NULL;
        TAILQ_REMOVE(&srv->adm->running, c, link);
        srv->adm->n_running--;
        srv->adm->mem_held_mb -= c->memory_mb;
        memory_changed(srv);
        c->cs->running--;
        c->cs->memory_mb -= c->memory_mb;
        c->cs = NULL;
}

/* c's execution is done: its result (or why it could not run) becomes the reply. */
static void finish(call *c)
{
        server *srv = c->srv;
        hxs_result res = { 0 };
        hxs_error err = { 0 };

        int r = hxs_exec_take_result(c->exec, &res, &err);
        drop_exec(c);
        if (r < 0) {
                setup_failed(c, &err);
        } else {
                outcome o = outcome_of(&res);
                metrics_execution(&srv->m, c->language, o, res.execution_time_ms);
                metrics_caller_execution(&srv->m, c->label, o);
                records_add(srv->records, c, &res, outcome_name(o), NULL);
                if ((unsigned)res.packages < HXS_PACKAGES_SOURCE_MAX)
                        srv->m.packages[res.packages]++;
                call_set_result(c, &res);
                log_call(c, &res, outcome_name(o), NULL);
        }
        c->logged = true;
        hxs_result_clear(&res);
        reply_ready(c);
        pump(srv);
}

/* c->exec's fd is readable. */
static void exec_ready(watch *w, uint32_t events)
{
        call *c = loop_owner(w, call, exec_watch);

        if (c->state != CALL_RUNNING || !c->exec)
                return; /* an event of this round for an execution already dropped */
        (void)hxs_exec_process(c->exec);
        if (hxs_exec_done(c->exec))
                finish(c);
}

/* The client's socket hung up. */
void admission_hangup(watch *w, uint32_t events)
{
        admission_cancel(loop_owner(w, call, client_watch), "client_disconnected");
}

void admission_cancel(call *c, const char *why)
{
        server *srv = c->srv;

        if (c->state == CALL_QUEUED) {
                unqueue(c);
                c->status = 499;
                log_call(c, NULL, why, NULL);
        } else if (c->state == CALL_RUNNING && c->exec) {
                uint64_t ran = hxs_exec_elapsed_ms(c->exec);
                hxs_exec_kill(c->exec);
                drop_exec(c);
                metrics_execution(&srv->m, c->language, OUTCOME_KILLED, ran);
                metrics_caller_execution(&srv->m, c->label, OUTCOME_KILLED);
                c->status = 499;
                log_call(c, NULL, "killed", why);
                records_add(srv->records, c, NULL, "killed", why);
        } else if (c->state != CALL_STREAMING) {
                return;
        }
        c->logged = true;
        /* a stream has its 200 counted already: it ends, MHD closes the connection */
        c->state = c->stream ? CALL_DONE : CALL_GONE;
        stream_gone(c);
        call_resume(c);
        pump(srv);
}

void admission_forget(call *c)
{
        server *srv = c->srv;

        loop_del(srv->loop, &c->client_watch);
        if (c->state == CALL_QUEUED) {
                unqueue(c);
        } else if (c->state == CALL_RUNNING && c->exec) {
                uint64_t ran = hxs_exec_elapsed_ms(c->exec);
                hxs_exec_kill(c->exec);
                drop_exec(c);
                metrics_execution(&srv->m, c->language, OUTCOME_KILLED, ran);
        }
        c->state = CALL_DONE;
        pump(srv);
}

/* Queue timeouts, the drain's kill, free slots. */
static void tick(void *data, uint64_t now)
{
        server *srv = data;
        call *c;

        /* Queue timeouts: the queue is in arrival order, so the oldest is first. */
        while (srv->cfg.queue_timeout_s && (c = TAILQ_FIRST(&srv->adm->queue)) &&
               now - c->received_ms >= (uint64_t)srv->cfg.queue_timeout_s * 1000) {
                bool own_share = !callers_may_run(srv->callers, c->cs);
                uint32_t running = c->cs->running;
                unqueue(c);
                if (own_share) {
                        /* It waited for its own executions, not for the others'. */
                        char msg[240];
                        snprintf(msg, sizeof(msg),
                                 "this caller's %u running executions hold all the slots (QUOTA_RUNNING_PER_CALLER %u), "
                                 "or the share of the memory budget, one caller may, and none ended within %us; retry later",
                                 running, callers_share(srv->callers), srv->cfg.queue_timeout_s);
                        reject_quota(c, admission_retry_after(srv), msg);
                } else {
                        reject_overloaded(c, REJECT_QUEUE_TIMEOUT);
                }
                call_reply_ready(c);
        }

        if (srv->adm->draining && !srv->adm->killed_on_drain && now >= srv->adm->drain_deadline_ms) {
                srv->adm->killed_on_drain = true;
                srv->adm->exit_deadline_ms = now + EXIT_GRACE_MS;
                if (srv->adm->n_running)
                        log_line("drain", "DRAIN_TIMEOUT reached: killing %u running executions",
                                 srv->adm->n_running);
                TAILQ_FOREACH(c, &srv->adm->running, link)
                        hxs_exec_kill(c->exec);
                /* Their fds report the end; each client then gets its (killed) result. */
        }
        pump(srv);
}

/* The first SIGTERM/SIGINT: queued requests get 503 now, running ones may finish until
 * DRAIN_TIMEOUT. */
static void drain(server *srv)
{
        call *c;
        uint64_t now = now_ms();

        srv->adm->draining = true;
        srv->adm->drain_deadline_ms = now + (uint64_t)srv->cfg.drain_timeout_s * 1000;
        srv->adm->exit_deadline_ms = srv->adm->drain_deadline_ms + EXIT_GRACE_MS;
        while ((c = TAILQ_FIRST(&srv->adm->queue))) {
                unqueue(c);
                reject_draining(c);
                call_reply_ready(c);
        }
}

void admission_drain(server *srv, int signo)
{
        admission *a = srv->adm;
        const char *signame = strsignal(signo);

        if (signo == SIGINT)
                a->no_quiet = true;
        if (!a->draining) {
                log_line("drain", "%s: finishing %u running executions (at most %us), refusing new ones",
                         signame, a->n_running, srv->cfg.drain_timeout_s);
                drain(srv);
        } else if (a->drain_deadline_ms > now_ms()) {
                /* Asked twice: stop waiting for running executions. */
                log_line("drain", "%s again: killing running executions now", signame);
                a->drain_deadline_ms = now_ms();
        }
}

/* Nothing runs, waits or still has its reply to send. */
static bool drained(const server *srv)
{
        return srv->adm->n_running == 0 && srv->adm->n_queued == 0 && srv->n_held == 0;
}

/* A drained instance still answers (503) until no request came for DRAIN_QUIET: a load
 * balancer that has not yet seen /health say so may hand it a request at any moment,
 * and one handed over as the socket closes is reset after it was sent, which nothing
 * may safely retry. A 503 is retried elsewhere. Within DRAIN_TIMEOUT; a second signal
 * ends it (the deadline is then now), and SIGINT skips it. */
static uint64_t quiet_end_ms(const server *srv)
{
        if (srv->adm->no_quiet)
                return 0;
        uint64_t end = srv->last_request_ms + (uint64_t)srv->cfg.drain_quiet_s * 1000;
        return end < srv->adm->drain_deadline_ms ? end : srv->adm->drain_deadline_ms;
}

static uint64_t next_deadline(void *data)
{
        server *srv = data;
        uint64_t d = UINT64_MAX;
        call *c = TAILQ_FIRST(&srv->adm->queue);

        if (c && srv->cfg.queue_timeout_s)
                d = c->received_ms + (uint64_t)srv->cfg.queue_timeout_s * 1000;
        if (srv->adm->draining) {
                if (!srv->adm->killed_on_drain && srv->adm->drain_deadline_ms < d)
                        d = srv->adm->drain_deadline_ms;
                if (drained(srv) && quiet_end_ms(srv) < d)
                        d = quiet_end_ms(srv);
                if (srv->adm->exit_deadline_ms < d)
                        d = srv->adm->exit_deadline_ms;
        }
        return d;
}

int admission_setup(server *srv)
{
        admission *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        TAILQ_INIT(&a->queue);
        TAILQ_INIT(&a->running);
        a->hook = (loop_hook){ .next_deadline = next_deadline, .tick = tick, .data = srv };
        loop_hook_add(srv->loop, &a->hook);
        srv->adm = a;
        return 0;
}

void admission_free(server *srv)
{
        free(srv->adm);
        srv->adm = NULL;
}

bool admission_draining(const server *srv)
{
        return srv->adm && srv->adm->draining;
}

void admission_load_get(const server *srv, admission_load *ret)
{
        const admission *a = srv->adm;
        const call *oldest = a ? TAILQ_FIRST(&a->queue) : NULL;

        *ret = (admission_load){ .running = a ? a->n_running : 0, .queued = a ? a->n_queued : 0,
                                 .oldest_received_ms = oldest ? oldest->received_ms : 0,
                                 .memory_held_mb = a ? a->mem_held_mb : 0 };
}

int admission_memory_reserve(server *srv, uint32_t mb)
{
        if (!srv->adm)
                return -EINVAL;
        /* who waits has the first claim on what frees up */
        if (!TAILQ_EMPTY(&srv->adm->queue) || !room_for(srv, mb, false))
                return -EAGAIN;
        srv->adm->mem_held_mb += mb;
        memory_changed(srv);
        return 0;
}

void admission_memory_release(server *srv, uint32_t mb)
{
        if (!srv->adm)
                return;
        srv->adm->mem_held_mb -= mb <= srv->adm->mem_held_mb ? mb : srv->adm->mem_held_mb;
        memory_changed(srv);
        pump(srv);
}

bool admission_done(server *srv)
{
        admission *a = srv->adm;

        if (!a->draining)
                return false;
        if (drained(srv))
                return now_ms() >= quiet_end_ms(srv);
        if (now_ms() < a->exit_deadline_ms)
                return false;
        log_line("drain", "giving up on %u executions and %u replies still in flight", a->n_running,
                 srv->n_held);
        return true;
}


void admission_abort_all(server *srv)
{
        call *c;

        while ((c = TAILQ_FIRST(&srv->adm->queue))) {
                unqueue(c);
                reject_draining(c);
                call_reply_ready(c);
        }
        while ((c = TAILQ_FIRST(&srv->adm->running))) {
                uint64_t ran = hxs_exec_elapsed_ms(c->exec);
                hxs_exec_kill(c->exec);
                drop_exec(c);
                metrics_execution(&srv->m, c->language, OUTCOME_KILLED, ran);
                call_set_error(c, 503, "draining", "the service stopped before the execution ended");
                log_call(c, NULL, "killed", "draining");
                c->logged = true;
                reply_ready(c);
        }
}
