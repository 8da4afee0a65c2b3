/* SPDX-License-Identifier: Apache-2.0 */
/* `hexr-sandbox mcp` (stdio), in three files: cli-mcp.c (options, the poll loop, messages,
 * run_code), cli-mcp-sessions.c (the session tools on the process's own sessions) and
 * cli-mcp-io.c (writing messages and logs, shared by both). */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hexr-sandbox/sandbox.h"
#include "mcp/mcp.h"

struct mcp_stdio;
struct mcp_sess;
typedef struct mcp_remote mcp_remote;   /* --url: the service (cli-mcp-remote.c) */
typedef struct mcp_fwd mcp_fwd;         /* a message forwarded, its answer being read */

/* A tool call in flight: an execution (run_code) or an operation queued in a session. */
typedef struct running {
        struct mcp_stdio *m;
        mcp_run *run;
        hxs_exec *exec;                 /* run_code */
        struct mcp_sess *sess;          /* session tools: its session, the operation's handle */
        uint64_t handle;
        struct running *next;
} running;

/* A session of this process: only this process's client can name it. */
typedef struct mcp_sess {
        char id[33];
        hxs_session *s;
        mcp_run *creating;              /* session_create waits for the driver's ready */
        unsigned n_ops;                 /* operations queued or running (their callbacks are due) */
        bool closed;                    /* session_close: no longer found by its id */
        struct mcp_sess *next;
} mcp_sess;

typedef struct mcp_stdio {
        hxs_engine *engine;
        const hxs_config *cfg;
        mcp_session *session;
        running *runs;
        size_t n_runs, max_runs;
        mcp_sess *sessions;
        size_t n_sessions;              /* not closed */
        char *line;                     /* the message being read */
        size_t len, cap, max;
        bool skipping;                  /* the current line is over max: dropped to its end */
        bool out_failed;                /* stdout is gone: nothing more can be said */
        mcp_remote *remote;             /* --url: every message goes there, no engine here */
        mcp_fwd *fwds;
} mcp_stdio;

/* cli-mcp-io.c */
void mcp_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One message out, text (malloc'ed, freed here) and its newline; *lenp is read after
 * the call that made text. NULL text: logged as out of memory. */
void mcp_send(mcp_stdio *m, char *text, const size_t *lenp);
/* The output callback of executions and cells: progress notifications. */
void mcp_on_output(void *userdata, int stream, const void *data, size_t len);
/* Answers run with err's message as an isError result, and frees it. */
void mcp_fail_run(mcp_stdio *m, mcp_run *run, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void mcp_running_add(mcp_stdio *m, running *r);
void mcp_running_unlink(mcp_stdio *m, running *r);

/* cli-mcp-remote.c: -EINVAL with why (a bad URL, unreadable certificates). ca, cert, key
 * may be NULL (the system's CAs; no client certificate). */
int mcp_remote_open(mcp_stdio *m, const char *url, const char *ca, const char *cert, const char *key, char *why,
                    size_t why_size);
/* Sends one message to the service's /mcp (a failure is answered as a JSON-RPC error). */
void mcp_remote_forward(mcp_stdio *m, const char *msg, size_t len);
size_t mcp_remote_count(const mcp_stdio *m);
size_t mcp_remote_poll(mcp_stdio *m, struct pollfd *fds, mcp_fwd **by, size_t max);
/* Its connection is readable: what came is relayed; at its end it is freed. */
void mcp_remote_process(mcp_stdio *m, mcp_fwd *f);
/* Every connection closed (the service ends their calls), the remote freed. */
void mcp_remote_close(mcp_stdio *m);

/* cli-mcp-sessions.c */
/* A session tool's call: started, or answered with why it cannot be. Takes run. */
void mcp_sessions_call(mcp_stdio *m, mcp_run *run);
/* Fills fds with the sessions to watch (at most max), their entries in by; the count. */
size_t mcp_sessions_poll(mcp_stdio *m, struct pollfd *fds, mcp_sess **by, size_t max);
/* A session's fd was readable: its callbacks run, a finished create is answered, a
 * closed session whose work is over is freed. */
void mcp_sessions_process(mcp_stdio *m, mcp_sess *se);
/* notifications/cancelled of a session operation: no answer will come. Frees r. */
void mcp_sessions_cancel(mcp_stdio *m, running *r);
/* The end: every session killed and freed, no callback. */
void mcp_sessions_free_all(mcp_stdio *m);
