/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session tools over stdio: the sessions belong to this process (its one client),
 * at most MAX_SESSIONS at once, and end with it. Each is the library's session (an fd in
 * the poll loop, callbacks from hxs_session_process); session_create is answered once
 * the driver is ready (or the session failed to start), the other tools when their
 * operation's callback comes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli-mcp.h"
#include "core/randid.h"

static mcp_sess *find(mcp_stdio *m, const char *id)
{
        for (mcp_sess *se = m->sessions; se; se = se->next)
                if (!se->closed && strcmp(se->id, id) == 0)
                        return se;
        return NULL;
}

static void sess_free(mcp_stdio *m, mcp_sess *se)
{
        for (mcp_sess **p = &m->sessions; *p; p = &(*p)->next)
                if (*p == se) {
                        *p = se->next;
                        break;
                }
        hxs_session_free(se->s);
        mcp_run_free(se->creating);
        free(se);
}

/* An operation's end: answered, and its session may now be done with. */
static running *op_end(void *userdata)
{
        running *r = userdata;
        mcp_running_unlink(r->m, r);
        r->sess->n_ops--;
        return r;
}

static void op_free(running *r)
{
        mcp_run_free(r->run);
        free(r);
}

static void on_cell(void *userdata, hxs_cell_result *res)
{
        running *r = op_end(userdata);
        size_t n = 0;
        char *text = mcp_run_cell_result(r->run, res, r->sess->s, r->sess->id, &n);
        mcp_note("session_exec %s: session %s cell %llu %s", mcp_run_id(r->run), r->sess->id,
                 (unsigned long long)res->cell, hxs_cell_status_name(res->status));
        mcp_send(r->m, text, &n);
        hxs_cell_result_clear(res);
        op_free(r);
}

static void on_file(void *userdata, hxs_session_file_result *res)
{
        running *r = op_end(userdata);
        size_t n = 0;
        char *text = mcp_run_file_result(r->run, res, &n);
        mcp_send(r->m, text, &n);
        hxs_session_file_result_clear(res);
        op_free(r);
}

static void create(mcp_stdio *m, mcp_run *run)
{
        hxs_error err = { 0 };

        if (m->n_sessions >= m->cfg->max_sessions) {
                mcp_fail_run(m, run, "%zu sessions are open already (MAX_SESSIONS); close one with session_close",
                             m->n_sessions);
                return;
        }
        mcp_sess *se = calloc(1, sizeof(*se));
        if (!se) {
                mcp_fail_run(m, run, "out of memory");
                return;
        }
        if (hxs_session_start(m->engine, mcp_run_request(run), mcp_run_limits(run), &se->s, &err) < 0) {
                free(se);
                mcp_fail_run(m, run, "%s", err.message);
                return;
        }
        randid_make(se->id);
        se->creating = run;
        se->next = m->sessions;
        m->sessions = se;
        m->n_sessions++;
        mcp_note("session %s: starting", se->id);
}

static void close_session(mcp_stdio *m, mcp_sess *se, mcp_run *run)
{
        size_t n = 0;
        hxs_session_end_now(se->s, HXS_SESSION_DELETED);
        se->closed = true;
        m->n_sessions--;
        char *text = mcp_run_session_result(run, se->s, se->id, &n);
        mcp_send(m, text, &n);
        mcp_note("session %s: closed", se->id);
        mcp_run_free(run);
        if (se->creating) {
                n = 0;
                text = mcp_run_error(se->creating, "the session was closed before it was ready", &n);
                mcp_send(m, text, &n);
                mcp_run_free(se->creating);
                se->creating = NULL;
        }
        if (!se->n_ops)
                sess_free(m, se);
}

/* A cell or a file operation, queued in the session. */
static void queue_op(mcp_stdio *m, mcp_sess *se, mcp_run *run)
{
        char msg[sizeof(((hxs_error *)0)->message) + 100];
        running *r = calloc(1, sizeof(*r));

        if (!r) {
                mcp_fail_run(m, run, "out of memory");
                return;
        }
        *r = (running){ .m = m, .run = run, .sess = se };
        mcp_session_sink sink = { .cell = { .output = mcp_on_output, .done = on_cell, .userdata = r }, .file = on_file };
        if (mcp_run_queue_in(run, se->s, se->id, &sink, &r->handle, msg, sizeof(msg)) < 0) {
                free(r);
                mcp_fail_run(m, run, "%s", msg);
                return;
        }
        se->n_ops++;
        mcp_running_add(m, r);
}

void mcp_sessions_call(mcp_stdio *m, mcp_run *run)
{
        if (mcp_run_kind(run) == MCP_TOOL_SESSION_CREATE)
                return create(m, run);
        mcp_sess *se = find(m, mcp_run_session_id(run));
        if (!se) {
                mcp_fail_run(m, run, "session_id: no open session \"%.64s\" (session_create returns one)",
                             mcp_run_session_id(run));
                return;
        }
        if (mcp_run_kind(run) == MCP_TOOL_SESSION_CLOSE)
                return close_session(m, se, run);
        queue_op(m, se, run);
}

size_t mcp_sessions_poll(mcp_stdio *m, struct pollfd *fds, mcp_sess **by, size_t max)
{
        size_t n = 0;
        for (mcp_sess *se = m->sessions; se && n < max; se = se->next) {
                /* an ended session with nothing due has nothing more to say */
                if (hxs_session_get_state(se->s) == HXS_SESSION_ENDED && !se->n_ops && !se->creating)
                        continue;
                fds[n] = (struct pollfd){ .fd = hxs_session_fd(se->s), .events = POLLIN };
                by[n++] = se;
        }
        return n;
}

void mcp_sessions_process(mcp_stdio *m, mcp_sess *se)
{
        hxs_session_process(se->s);
        if (se->creating && hxs_session_get_state(se->s) != HXS_SESSION_STARTING) {
                size_t n = 0;
                char *text = mcp_run_session_result(se->creating, se->s, se->id, &n);
                mcp_send(m, text, &n);
                mcp_note("session %s: %s", se->id, hxs_session_state_name(hxs_session_get_state(se->s)));
                mcp_run_free(se->creating);
                se->creating = NULL;
        }
        if (se->closed && !se->n_ops)
                sess_free(m, se);
}

void mcp_sessions_cancel(mcp_stdio *m, running *r)
{
        mcp_sess *se = r->sess;
        hxs_session_cancel(se->s, r->handle);
        mcp_running_unlink(m, r);
        se->n_ops--;
        op_free(r);
        if (se->closed && !se->n_ops)
                sess_free(m, se);
}

void mcp_sessions_free_all(mcp_stdio *m)
{
        while (m->runs) {
                running *r = m->runs;
                m->runs = r->next;
                if (r->exec) {
                        hxs_exec_kill(r->exec);
                        hxs_exec_free(r->exec);
                }
                op_free(r);
        }
        m->n_runs = 0;
        while (m->sessions)
                sess_free(m, m->sessions);
        m->n_sessions = 0;
}
