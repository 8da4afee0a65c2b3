/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MCP session tools over Streamable HTTP: session_create, session_exec and the file
 * tools on the service's sessions, found for the caller (another caller's session is
 * unknown, as it is a 404 on /api/v1/sessions), under the same quotas (MAX_SESSIONS,
 * MAX_SESSIONS_PER_CALLER, the memory budget). Everything the model should read is a
 * tool result, so refusals are results with isError, not HTTP errors. A request waits
 * suspended for its session's answer (session_create: the driver ready), a cell whose
 * client asked for progress streams it as run_code's does.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp.h"
#include "server/call.h"
#include "server/mcp-sessions.h"
#include "server/sessions.h"
#include "server/state.h"
#include "server/stream.h"

static void reply_text(call *c, char *text, size_t len)
{
        free(c->reply);
        c->reply = text;
        c->reply_len = len;
        c->status = text ? 200 : 500;
}

static void tool_error(call *c, const char *msg)
{
        size_t n = 0;
        char *text = mcp_run_error(c->mcp, msg, &n);
        reply_text(c, text, n);
        c->state = CALL_REPLY;
}

/* What sessions.c prepared as an HTTP error (a quota's 429...), said as a tool result. */
static void error_as_result(call *c)
{
        if (c->status == 200)
                return; /* already a tool result (call_set_engine_error's) */
        json_t *o = c->reply ? json_loadb(c->reply, c->reply_len, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
        char text[400];
        snprintf(text, sizeof(text), "%s", msg ? msg : "the session could not start");
        json_decref(o);
        c->retry_after_s = 0;
        tool_error(c, text);
}

/* The client of a waiting request went away: nothing more is asked for it. */
static void hangup(watch *w, uint32_t events)
{
        (void)events;
        mcp_sessions_cancel_call(loop_owner(w, call, client_watch));
}

static void wait_for_session(call *c)
{
        c->state = CALL_RUNNING;
        call_suspend(c, hangup);
}

static void started(live_session *ls, call *c)
{
        size_t n = 0;
        c->session = NULL;
        char *text = mcp_run_session_result(c->mcp, ls->s, ls->id, &n);
        reply_text(c, text, n);
        call_reply_ready(c);
}

static void create(call *c)
{
        live_session *ls;
        if (sessions_create(c, mcp_run_request(c->mcp), mcp_run_limits(c->mcp), &ls) < 0) {
                error_as_result(c);
                c->state = CALL_REPLY;
                return;
        }
        c->session = ls;
        ls->on_started = started;
        ls->start_call = c;
        wait_for_session(c);
}

static void cell_output(void *userdata, int stream, const void *data, size_t len)
{
        call *c = userdata;
        if (c->stream)
                stream_output(c, stream, data, len);
}

static void cell_done(void *userdata, hxs_cell_result *res)
{
        call *c = userdata;
        live_session *ls = c->session;
        size_t n = 0;
        c->session = NULL;
        char *text = mcp_run_cell_result(c->mcp, res, ls ? ls->s : NULL, ls ? ls->id : NULL, &n);
        reply_text(c, text, n);
        hxs_cell_result_clear(res);
        if (c->stream)
                stream_end(c);
        else
                call_reply_ready(c);
}

static void file_done(void *userdata, hxs_session_file_result *res)
{
        call *c = userdata;
        size_t n = 0;
        c->session = NULL;
        char *text = mcp_run_file_result(c->mcp, res, &n);
        reply_text(c, text, n);
        hxs_session_file_result_clear(res);
        call_reply_ready(c);
}

/* A cell or a file operation queued in the caller's session ls. */
static void queue_op(call *c, live_session *ls)
{
        char msg[sizeof(((hxs_error *)0)->message) + 100];
        bool cell = mcp_run_kind(c->mcp) == MCP_TOOL_SESSION_EXEC;
        mcp_session_sink sink = { .cell = { .output = cell_output, .done = cell_done, .userdata = c },
                                  .file = file_done };

        c->session = ls;
        if (c->wants_stream && stream_begin(c) < 0)
                return tool_error(c, "out of memory");
        if (mcp_run_queue_in(c->mcp, ls->s, ls->id, &sink, &c->session_op, msg, sizeof(msg)) < 0) {
                c->session = NULL;
                stream_free(c);
                return tool_error(c, msg);
        }
        if (cell)
                sessions_count_cell(c->srv);
        if (c->stream)
                c->state = CALL_STREAMING; /* http.c queues the stream */
        else
                wait_for_session(c);
}

void mcp_sessions_route(call *c)
{
        mcp_run *run = c->mcp;
        char msg[200];

        if (mcp_run_kind(run) == MCP_TOOL_SESSION_CREATE)
                return create(c);
        live_session *ls = sessions_find(c->srv, mcp_run_session_id(run), c->caller);
        if (!ls) {
                snprintf(msg, sizeof(msg), "session_id: no open session \"%.64s\" of this caller (session_create returns one)",
                         mcp_run_session_id(run));
                return tool_error(c, msg);
        }
        if (mcp_run_kind(run) == MCP_TOOL_SESSION_CLOSE) {
                size_t n = 0;
                sessions_delete(ls);
                char *text = mcp_run_session_result(run, ls->s, ls->id, &n);
                reply_text(c, text, n);
                c->state = CALL_REPLY;
                return;
        }
        c->wants_stream = mcp_run_kind(run) == MCP_TOOL_SESSION_EXEC && mcp_run_wants_progress(run) &&
                          stream_wanted(c->conn);
        queue_op(c, ls);
}

void mcp_sessions_cancel_call(call *c)
{
        if (c->state != CALL_RUNNING && c->state != CALL_STREAMING)
                return;
        live_session *ls = c->session;
        c->session = NULL;
        if (ls && ls->start_call == c && ls->on_started) {
                /* nobody learnt its id: it goes */
                ls->on_started = NULL;
                ls->start_call = NULL;
                sessions_delete(ls);
        } else if (ls && c->session_op) {
                hxs_session_cancel(ls->s, c->session_op);
        }
        c->state = c->stream ? CALL_DONE : CALL_GONE;
        stream_gone(c);
        call_resume(c);
}
