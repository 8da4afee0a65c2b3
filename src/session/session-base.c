/* SPDX-License-Identifier: Apache-2.0 */
/* What every file of a session calls: the clock, the end, the queue's two ends (an
 * item is freed and run only through its ops, session.h), the names of states and
 * reasons. It calls nothing of the session back. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fileio.h"
#include "session/session.h"

uint64_t session_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char *const state_names[HXS_SESSION_STATE_MAX] = {
        [HXS_SESSION_STARTING] = "starting", [HXS_SESSION_IDLE] = "idle",
        [HXS_SESSION_BUSY] = "busy", [HXS_SESSION_ENDED] = "ended",
};

static const char *const end_names[HXS_SESSION_END_MAX] = {
        [HXS_SESSION_DELETED] = "deleted", [HXS_SESSION_IDLE_TIMEOUT] = "idle_timeout",
        [HXS_SESSION_LIFETIME] = "lifetime", [HXS_SESSION_CELL_TIMEOUT] = "cell_timeout",
        [HXS_SESSION_MEMORY_LIMIT] = "memory_limit", [HXS_SESSION_CRASHED] = "crashed",
        [HXS_SESSION_PROTOCOL] = "protocol", [HXS_SESSION_SHUTDOWN] = "shutdown",
};

const char *hxs_session_state_name(hxs_session_state state)
{
        return (unsigned)state < HXS_SESSION_STATE_MAX ? state_names[state] : "unknown";
}

const char *hxs_session_end_name(hxs_session_end end)
{
        return (unsigned)end < HXS_SESSION_END_MAX ? end_names[end] : NULL;
}

void session_end(hxs_session *s, hxs_session_end why, const char *fmt, ...)
{
        if (s->end)
                return;
        s->end = why;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->end_message, sizeof(s->end_message), fmt, ap);
        va_end(ap);
        if (s->x)
                hxs_exec_kill(s->x);
}

void session_item_free(session_item *it)
{
        if (!it)
                return;
        it->ops->free(it);
        free(it);
}

int session_enqueue(hxs_session *s, session_item *it, uint64_t *ret_handle)
{
        if (s->end || s->finished) {
                session_item_free(it);
                return -ESHUTDOWN;
        }
        if (s->queued >= HXS_SESSION_QUEUE_MAX) {
                session_item_free(it);
                return -EBUSY;
        }
        it->handle = s->next_handle++;
        if (s->tail)
                s->tail->next = it;
        else
                s->head = it;
        s->tail = it;
        s->queued++;
        if (ret_handle)
                *ret_handle = it->handle;
        /* started by the next hxs_session_process: never from within the caller's call */
        (void)timerfd_arm_ms(s->timer_fd, 1);
        return 0;
}

void session_item_done(hxs_session *s)
{
        session_item_free(s->running);
        s->running = NULL;
        s->deadline = s->grace_deadline = 0;
        s->idle_since = session_now_ms();
}

