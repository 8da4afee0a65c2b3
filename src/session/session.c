/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A session: one interactive execution of the engine's backend whose program is the
 * language's driver (engine/drivers.h), the queue of cells and file operations it runs
 * one at a time in arrival order, and its timers: the driver's start, a cell's time
 * limit and its grace, the idle timeout, the lifetime. How it ended comes from what we
 * did to it (deleted, a timer, a bad line) or else from how the execution ended
 * (memory limit, crashed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/macro.h"
#include "engine/exec.h"
#include "engine/json.h"
#include "engine/request.h"
#include "session/session.h"

enum { TAG_EXEC = 1, TAG_TIMER };

/* ---- the driver's execution ------------------------------------------------------- */

/* The driver's stdout is the protocol; its stderr stays in the execution's tail. */
static void on_driver_output(void *userdata, int stream, const void *data, size_t len)
{
        hxs_session *s = userdata;
        if (stream == 1 && !s->end)
                proto_feed(s, data, len);
}

/* The driver's request: the caller's language, memory, env, packages and files; the
 * driver's argv; the lifetime (and a margin: our own timer ends it first) as its
 * time limit. */
static int driver_request(const hxs_request *req, uint32_t lifetime_s, hxs_request **ret)
{
        hxs_request *d;
        int r = request_dup(req, &d);
        if (r < 0)
                return r;
        const char *const argv[] = { "/usr/bin/python3", "-B", SESSION_DRIVER, "--language",
                                     hxs_language_name(req->language), NULL };
        if ((r = hxs_request_set_code(d, "", 0)) < 0 || (r = request_set_interactive(d, argv)) < 0) {
                hxs_request_free(d);
                return r;
        }
        free(d->stdin_data);
        d->stdin_data = NULL;
        d->stdin_len = 0;
        for (size_t i = 0; i < d->n_globs; i++)
                free(d->return_globs[i]);
        d->n_globs = 0;
        d->timeout_s = lifetime_s + 10;
        *ret = d;
        return 0;
}

static int limits_resolve(const hxs_config *cfg, const hxs_session_limits *in, hxs_session_limits *out,
                          hxs_error *err)
{
        out->idle_timeout_s = in && in->idle_timeout_s ? in->idle_timeout_s : cfg->session_idle_timeout_s;
        out->lifetime_s = in && in->lifetime_s ? in->lifetime_s : cfg->session_lifetime_s;
        if (out->idle_timeout_s > cfg->session_idle_timeout_max_s)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "idle_timeout",
                                      "idle_timeout: %u exceeds the maximum %u seconds", out->idle_timeout_s,
                                      cfg->session_idle_timeout_max_s);
        if (out->lifetime_s > cfg->session_lifetime_max_s)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "lifetime",
                                      "lifetime: %u exceeds the maximum %u seconds", out->lifetime_s,
                                      cfg->session_lifetime_max_s);
        return 0;
}

static void session_freep(hxs_session **s) { hxs_session_free(*s); }

int hxs_session_start(hxs_engine *e, const hxs_request *req, const hxs_session_limits *lim, hxs_session **ret,
                      hxs_error *err)
{
        const hxs_config *cfg = hxs_engine_config(e);
        _cleanup_(session_freep) hxs_session *s = calloc(1, sizeof(*s));
        if (!s)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        s->engine = e;
        s->cfg = cfg;
        s->epfd = s->timer_fd = -1;
        int r = limits_resolve(cfg, lim, &s->lim, err);
        if (r < 0)
                return r;
        hxs_request *d;
        if ((r = driver_request(req, s->lim.lifetime_s, &d)) < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        r = hxs_exec_start(e, d, &s->x, err);
        bool packages = d->n_packages > 0;
        hxs_request_free(d);
        if (r < 0)
                return r;
        hxs_exec_set_output(s->x, on_driver_output, s);
        s->language = s->x->req->language;
        s->memory_mb = s->x->req->memory_mb;
        s->epfd = epoll_create1(EPOLL_CLOEXEC);
        s->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        struct epoll_event ev1 = { .events = EPOLLIN, .data.u64 = TAG_EXEC };
        struct epoll_event ev2 = { .events = EPOLLIN, .data.u64 = TAG_TIMER };
        if (s->epfd < 0 || s->timer_fd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, hxs_exec_fd(s->x), &ev1) < 0 ||
            epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->timer_fd, &ev2) < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "session: epoll: %s", strerror(errno));
        s->created_at = (int64_t)time(NULL);
        s->started_ms = session_now_ms();
        /* an install of packages= runs first, within the lifetime */
        s->ready_deadline = s->started_ms + (packages ? (uint64_t)s->lim.lifetime_s * 1000 : SESSION_READY_MS);
        s->next_handle = 1;
        (void)hxs_session_process(s); /* arms the timer */
        *ret = TAKE_PTR(s);
        return 0;
}

int hxs_session_fd(const hxs_session *s) { return s->epfd; }
bool hxs_session_finished(const hxs_session *s) { return s->finished; }

hxs_session_state hxs_session_get_state(const hxs_session *s)
{
        if (s->end)
                return HXS_SESSION_ENDED;
        if (!s->ready)
                return HXS_SESSION_STARTING;
        return s->running || s->head ? HXS_SESSION_BUSY : HXS_SESSION_IDLE;
}

void hxs_session_get_info(const hxs_session *s, hxs_session_info *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->state = hxs_session_get_state(s);
        ret->end = s->end;
        snprintf(ret->end_message, sizeof(ret->end_message), "%s", s->end_message);
        ret->language = s->language;
        ret->memory_mb = s->memory_mb;
        ret->cells = s->cells;
        ret->created_at = s->created_at;
        ret->expires_at = s->created_at + s->lim.lifetime_s;
        ret->idle_timeout_s = s->lim.idle_timeout_s;
        ret->lifetime_s = s->lim.lifetime_s;
        if (ret->state == HXS_SESSION_IDLE) {
                uint64_t end = s->idle_since + (uint64_t)s->lim.idle_timeout_s * 1000, now = session_now_ms();
                uint64_t left = end > now ? end - now : 0; /* due: its timer fires next */
                ret->idle_expires_at = (int64_t)time(NULL) + (int64_t)((left + 999) / 1000);
                if (ret->idle_expires_at > ret->expires_at)
                        ret->idle_expires_at = ret->expires_at;
        }
        snprintf(ret->driver_version, sizeof(ret->driver_version), "%s", s->version);
}

/* ---- ending ---------------------------------------------------------------------- */

void hxs_session_end_now(hxs_session *s, hxs_session_end why)
{
        switch (why) {
        case HXS_SESSION_DELETED:
                session_end(s, why, "the session was deleted");
                break;
        case HXS_SESSION_SHUTDOWN:
                session_end(s, why, "the service is shutting down");
                break;
        default:
                session_end(s, why, "the session was ended (%s)", hxs_session_end_name(why) ?: "unknown");
                break;
        }
}

/* The last line the driver wrote on stderr, for a crash's message. */
static void stderr_tail(const hxs_result *res, char *buf, size_t size)
{
        buf[0] = '\0';
        size_t len = res->stderr_len;
        while (len > 0 && (res->stderr_data[len - 1] == '\n' || res->stderr_data[len - 1] == ' '))
                len--;
        size_t start = len;
        while (start > 0 && res->stderr_data[start - 1] != '\n')
                start--;
        if (len > start)
                utf8_lossy_copy(buf, size, res->stderr_data + start, len - start);
}

/* The execution is over: why, unless we said; then everything waiting hears it. */
static void finish(hxs_session *s)
{
        hxs_result res = { 0 };
        hxs_error err = { 0 };
        int r = hxs_exec_take_result(s->x, &res, &err);
        if (!s->end) {
                char tail[160];
                if (r < 0) {
                        s->end = HXS_SESSION_CRASHED;
                        snprintf(s->end_message, sizeof(s->end_message), "the session could not start: %s",
                                 err.message);
                } else if (res.oom_killed) {
                        s->end = HXS_SESSION_MEMORY_LIMIT;
                        snprintf(s->end_message, sizeof(s->end_message),
                                 "the session was killed at its memory limit of %u MB", s->memory_mb);
                } else if (res.timed_out) {
                        s->end = HXS_SESSION_LIFETIME;
                        snprintf(s->end_message, sizeof(s->end_message), "the session's lifetime of %u s is over",
                                 s->lim.lifetime_s);
                } else {
                        stderr_tail(&res, tail, sizeof(tail));
                        s->end = HXS_SESSION_CRASHED;
                        if (res.signal)
                                snprintf(s->end_message, sizeof(s->end_message),
                                         "the session's driver was killed by signal %d%s%s", res.signal,
                                         tail[0] ? ": " : "", tail);
                        else
                                snprintf(s->end_message, sizeof(s->end_message),
                                         "the session's driver exited with status %d%s%s", res.exit_code,
                                         tail[0] ? ": " : "", tail);
                }
        }
        hxs_result_clear(&res);
        /* the sandbox goes now (its cgroup, its owner uid): the session's record stays */
        hxs_exec_free(s->x);
        s->x = NULL;
        s->finished = true;
        while (s->running || s->head) {
                if (!s->running) {
                        s->running = s->head;
                        s->head = s->head->next;
                        s->queued--;
                }
                s->running->ops->abort(s, s->running);
        }
        s->tail = NULL;
        struct itimerspec off = { 0 };
        (void)timerfd_settime(s->timer_fd, 0, &off, NULL);
}

/* ---- the queue ------------------------------------------------------------------- */

/* The running item, or the queued one, that handle names (NULL: none). */
static session_item *find_item(hxs_session *s, uint64_t handle)
{
        if (s->running && (handle == 0 || s->running->handle == handle))
                return s->running;
        for (session_item *it = s->head; it && handle; it = it->next)
                if (it->handle == handle)
                        return it;
        return NULL;
}

/* Interrupts happen in the next hxs_session_process, never within the caller's call. */
static void want_interrupt(hxs_session *s, session_item *it)
{
        if (!it->ops->interrupt || it->interrupt_wanted)
                return;
        it->interrupt_wanted = true;
        (void)timerfd_arm_ms(s->timer_fd, 1);
}

int hxs_session_interrupt(hxs_session *s, uint64_t handle)
{
        session_item *it = find_item(s, handle);
        if (!it || !it->ops->interrupt || s->end || s->finished)
                return -ENOENT;
        want_interrupt(s, it);
        return 0;
}

void hxs_session_cancel(hxs_session *s, uint64_t handle)
{
        if (handle == 0)
                return;
        if (s->running && s->running->handle == handle) {
                /* nobody waits for it: it stops, the session and its state stay */
                s->running->cancelled = true;
                want_interrupt(s, s->running);
                return;
        }
        for (session_item **p = &s->head; *p; p = &(*p)->next)
                if ((*p)->handle == handle) {
                        session_item *it = *p;
                        *p = it->next;
                        if (s->tail == it) {
                                s->tail = NULL;
                                for (session_item *q = s->head; q; q = q->next)
                                        s->tail = q;
                        }
                        s->queued--;
                        session_item_free(it);
                        return;
                }
}

static void start_next(hxs_session *s)
{
        while (!s->running && s->head && s->ready && !s->end) {
                session_item *it = s->head;
                s->head = it->next;
                if (!s->head)
                        s->tail = NULL;
                s->queued--;
                it->next = NULL;
                s->running = it;
                it->ops->begin(s, it);
        }
}

/* ---- events and timers -------------------------------------------------------------- */

static void check_timers(hxs_session *s, uint64_t now)
{
        if (s->end)
                return;
        if (now >= s->started_ms + (uint64_t)s->lim.lifetime_s * 1000) {
                session_end(s, HXS_SESSION_LIFETIME, "the session's lifetime of %u s is over", s->lim.lifetime_s);
                return;
        }
        if (!s->ready) {
                if (now >= s->ready_deadline)
                        session_end(s, HXS_SESSION_CRASHED, "the session's driver was not ready within %llu s",
                                    (unsigned long long)(s->ready_deadline - s->started_ms) / 1000);
                return;
        }
        if (!s->running && !s->head && now >= s->idle_since + (uint64_t)s->lim.idle_timeout_s * 1000) {
                session_end(s, HXS_SESSION_IDLE_TIMEOUT, "the session was idle for %u s", s->lim.idle_timeout_s);
                return;
        }
        session_item *it = s->running;
        if (!it)
                return;
        if (s->grace_deadline && now >= s->grace_deadline) {
                if (it->cancel_sent)
                        session_end(s, HXS_SESSION_CELL_TIMEOUT,
                                    "the cell did not stop within %u s of the interrupt its caller asked for",
                                    SESSION_INTERRUPT_GRACE_MS / 1000);
                else
                        session_end(s, HXS_SESSION_CELL_TIMEOUT,
                                    "the cell did not stop within %u s of its interrupt at its time limit of %u s",
                                    SESSION_INTERRUPT_GRACE_MS / 1000, it->req ? it->req->timeout_s : 0);
                return;
        }
        if (it->interrupt_wanted && it->ops->interrupt) {
                it->ops->interrupt(s, it);
                if (s->end || s->running != it)
                        return;
        }
        if (s->deadline && now >= s->deadline) {
                if (it->ops->time_limit && it->phase == PHASE_EXEC) {
                        it->ops->time_limit(s, it);
                        s->deadline = 0;
                        s->grace_deadline = now + SESSION_INTERRUPT_GRACE_MS;
                } else {
                        session_end(s, HXS_SESSION_PROTOCOL, "the driver did not answer a file operation within %u s",
                                    SESSION_OP_MS / 1000);
                }
        }
}

static void arm_timer(hxs_session *s)
{
        if (s->finished)
                return;
        uint64_t next = s->started_ms + (uint64_t)s->lim.lifetime_s * 1000;
        if (!s->end) {
                if (!s->ready && s->ready_deadline < next)
                        next = s->ready_deadline;
                if (s->ready && !s->running && !s->head) {
                        uint64_t idle = s->idle_since + (uint64_t)s->lim.idle_timeout_s * 1000;
                        if (idle < next)
                                next = idle;
                }
                if (s->running && s->deadline && s->deadline < next)
                        next = s->deadline;
                if (s->running && s->grace_deadline && s->grace_deadline < next)
                        next = s->grace_deadline;
                if (s->ready && !s->running && s->head)
                        next = 0; /* something to start: now */
        }
        uint64_t now = session_now_ms();
        (void)timerfd_arm_ms(s->timer_fd, next > now ? next - now : 1);
}

int hxs_session_process(hxs_session *s)
{
        if (s->finished)
                return 0;
        struct epoll_event evs[4];
        int n = epoll_wait(s->epfd, evs, ARRAY_SIZE(evs), 0);
        for (int i = 0; i < n; i++)
                if (evs[i].data.u64 == TAG_TIMER) {
                        uint64_t ticks;
                        (void)!read(s->timer_fd, &ticks, sizeof(ticks));
                }
        if (!hxs_exec_done(s->x))
                hxs_exec_process(s->x);
        check_timers(s, session_now_ms());
        start_next(s);
        if (hxs_exec_done(s->x)) {
                finish(s);
                return 0;
        }
        arm_timer(s);
        return 0;
}

void hxs_session_free(hxs_session *s)
{
        if (!s)
                return;
        session_item_free(s->running);
        while (s->head) {
                session_item *it = s->head;
                s->head = it->next;
                session_item_free(it);
        }
        hxs_exec_free(s->x);
        if (s->timer_fd >= 0)
                close(s->timer_fd);
        if (s->epfd >= 0)
                close(s->epfd);
        free(s->line);
        free(s);
}
