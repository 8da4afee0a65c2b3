/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hexr-sandbox mcp [--backend B]
 *
 * The MCP server over stdio: newline-delimited JSON-RPC messages on stdin, replies and
 * notifications on stdout, one per line; logs go to stderr only. Tool calls run with the
 * local engine as `exec` does (the same settings from the environment), several at once:
 * one poll loop over stdin and every running execution's fd. End of stdin ends what
 * still runs and exits 0. The protocol itself is src/mcp (shared with the service's
 * /mcp); this file is the transport only.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/macro.h"
#include "hexr-sandbox/sandbox.h"
#include "mcp/mcp.h"

/* A message may carry a request body of MAX_BODY_BYTES and its JSON-RPC envelope. */
#define ENVELOPE_BYTES (64u << 10)

struct mcp_stdio;

typedef struct running {
        struct mcp_stdio *m;
        mcp_run *run;
        hxs_exec *exec;
        struct running *next;
} running;

typedef struct mcp_stdio {
        hxs_engine *engine;
        mcp_session *session;
        running *runs;
        size_t n_runs, max_runs;
        char *line;             /* the message being read */
        size_t len, cap, max;
        bool skipping;          /* the current line is over max: dropped to its end */
        bool out_failed;        /* stdout is gone: nothing more can be said */
        struct pollfd *fds;     /* max_runs + 1 of them: stdin, then the runs' */
        running **by_slot;
} mcp_stdio;

static void usage(FILE *f)
{
        fprintf(f,
                "usage: hexr-sandbox mcp [--backend B]\n\n"
                "The MCP server (Model Context Protocol) over stdio: JSON-RPC messages, one per line,\n"
                "on stdin and stdout; logs on stderr. Its tool run_code runs code in a fresh sandbox\n"
                "with the local engine, as `exec` does, reading the same settings from the environment.\n"
                "An MCP client starts it as a command, e.g. {\"command\": \"hexr-sandbox\", \"args\": [\"mcp\"]}\n"
                "(docs/mcp.md). Ends when stdin ends, ending what still runs.\n\n"
                "      --backend B        auto, namespaces, qemu, firecracker (as SANDBOX_BACKEND)\n");
}

_printf_(1, 2) static void note(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "hexr-sandbox mcp: ");
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* One message out: the text and its newline, whole (stdout stays blocking: a client
 * that stops reading stops us, which is what it asked for). */
static void send_line(mcp_stdio *m, char *text, const size_t *lenp)
{
        size_t len = *lenp; /* read now: it is set by the call that made text */
        if (!text) {
                note("out of memory writing a reply");
                return;
        }
        text[len] = '\n'; /* the JSON's NUL: the text is ours to change */
        const char *p = text;
        size_t n = len + 1;
        while (n > 0 && !m->out_failed) {
                ssize_t w = write(STDOUT_FILENO, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        m->out_failed = true;
                        break;
                }
                p += w;
                n -= (size_t)w;
        }
        free(text);
}

/* Output as it comes: a progress notification when the client asked for progress. */
static void on_output(void *userdata, int stream, const void *data, size_t len)
{
        running *r = userdata;
        size_t n = 0;
        char *text = mcp_run_progress(r->run, stream, data, len, &n);
        if (text)
                send_line(r->m, text, &n);
}

static void run_free(running *r)
{
        hxs_exec_free(r->exec);
        mcp_run_free(r->run);
        free(r);
}

static void unlink_run(mcp_stdio *m, running *r)
{
        for (running **p = &m->runs; *p; p = &(*p)->next)
                if (*p == r) {
                        *p = r->next;
                        m->n_runs--;
                        return;
                }
}

/* A tool call: its sandbox starts now, or it is answered with why it cannot. */
static void start_run(mcp_stdio *m, mcp_run *run)
{
        hxs_error err = { 0 };
        size_t n = 0;

        if (m->n_runs >= m->max_runs) {
                snprintf(err.message, sizeof(err.message),
                         "%zu calls are running already (MAX_CONCURRENT); retry when one has ended", m->n_runs);
                send_line(m, mcp_run_failed(run, &err, &n), &n);
                mcp_run_free(run);
                return;
        }
        running *r = calloc(1, sizeof(*r));
        if (!r) {
                note("out of memory starting a run");
                mcp_run_free(run);
                return;
        }
        r->m = m;
        r->run = run;
        if (hxs_exec_start(m->engine, mcp_run_request(run), &r->exec, &err) < 0) {
                note("%s: %s", mcp_run_tool(run), err.message);
                send_line(m, mcp_run_failed(run, &err, &n), &n);
                run_free(r);
                return;
        }
        hxs_exec_set_output(r->exec, on_output, r);
        r->next = m->runs;
        m->runs = r;
        m->n_runs++;
}

static void finish_run(mcp_stdio *m, running *r)
{
        hxs_result res = { 0 };
        hxs_error err = { 0 };
        size_t n = 0;

        unlink_run(m, r);
        if (hxs_exec_take_result(r->exec, &res, &err) < 0) {
                note("%s: %s", mcp_run_tool(r->run), err.message);
                send_line(m, mcp_run_failed(r->run, &err, &n), &n);
        } else {
                note("%s %s: exit status %d in %llu ms%s%s", mcp_run_tool(r->run), mcp_run_id(r->run),
                     res.exit_code, (unsigned long long)res.execution_time_ms, res.end_message[0] ? "; " : "",
                     res.end_message);
                send_line(m, mcp_run_result(r->run, &res, &n), &n);
        }
        hxs_result_clear(&res);
        run_free(r);
}

/* notifications/cancelled: the run ends now and is never answered (the client has
 * stopped waiting for it). */
static void cancel_run(mcp_stdio *m, const char *id)
{
        for (running *r = m->runs; r; r = r->next)
                if (strcmp(mcp_run_id(r->run), id) == 0) {
                        note("%s %s: cancelled by the client", mcp_run_tool(r->run), id);
                        hxs_exec_kill(r->exec);
                        unlink_run(m, r);
                        run_free(r);
                        return;
                }
}

static void on_message(mcp_stdio *m, const char *msg, size_t len)
{
        mcp_outcome o;

        if (mcp_handle(m->session, msg, len, &o) < 0) {
                size_t n = 0;
                note("out of memory reading a message");
                send_line(m, mcp_error_text(NULL, MCP_INTERNAL_ERROR, "out of memory", &n), &n);
                return;
        }
        switch (o.action) {
        case MCP_ACT_REPLY:
                send_line(m, TAKE_PTR(o.reply), &o.reply_len);
                break;
        case MCP_ACT_RUN:
                start_run(m, TAKE_PTR(o.run));
                break;
        case MCP_ACT_CANCEL:
                cancel_run(m, o.cancel_id);
                break;
        case MCP_ACT_NONE:
        case MCP_ACT_MAX:
        default:
                break;
        }
        mcp_outcome_clear(&o);
}

/* Bytes from stdin, split into lines (a blank line or a '\r' before '\n' is fine). */
static void on_input(mcp_stdio *m, const char *data, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                char ch = data[i];
                if (ch == '\n') {
                        if (m->skipping) {
                                size_t n = 0;
                                char why[120];
                                snprintf(why, sizeof(why), "message longer than %zu bytes (MAX_BODY_BYTES and its envelope)",
                                         m->max);
                                send_line(m, mcp_error_text(NULL, MCP_INVALID_REQUEST, why, &n), &n);
                        } else {
                                size_t n = m->len;
                                if (n && m->line[n - 1] == '\r')
                                        n--;
                                if (n)
                                        on_message(m, m->line, n);
                        }
                        m->len = 0;
                        m->skipping = false;
                        continue;
                }
                if (m->skipping)
                        continue;
                if (m->len == m->max) {
                        m->skipping = true;
                        continue;
                }
                if (m->len == m->cap) {
                        size_t cap = m->cap ? m->cap * 2 : 65536;
                        char *p = realloc(m->line, cap < m->max ? cap : m->max);
                        if (!p) {
                                m->skipping = true;
                                continue;
                        }
                        m->line = p;
                        m->cap = cap < m->max ? cap : m->max;
                }
                m->line[m->len++] = ch;
        }
}

/* The loop: stdin and every execution's fd. Returns at the end of stdin or of stdout. */
static int serve(mcp_stdio *m)
{
        bool in_open = true;
        char buf[65536];

        while (in_open && !m->out_failed) {
                size_t n = 0;
                struct pollfd *fds = m->fds;
                running **by_slot = m->by_slot;
                fds[n++] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
                for (running *r = m->runs; r; r = r->next) {
                        by_slot[n] = r;
                        fds[n++] = (struct pollfd){ .fd = hxs_exec_fd(r->exec), .events = POLLIN };
                }
                if (poll(fds, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        note("poll: %s", strerror(errno));
                        return -errno;
                }
                for (size_t i = 1; i < n; i++) {
                        if (!fds[i].revents)
                                continue;
                        running *r = by_slot[i];
                        hxs_exec_process(r->exec);
                        if (hxs_exec_done(r->exec))
                                finish_run(m, r);
                }
                if (fds[0].revents) {
                        ssize_t got = read(STDIN_FILENO, buf, sizeof(buf));
                        if (got < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (got <= 0)
                                in_open = false;
                        else
                                on_input(m, buf, (size_t)got);
                }
        }
        return 0;
}

static void end_all(mcp_stdio *m)
{
        while (m->runs) {
                running *r = m->runs;
                m->runs = r->next;
                hxs_exec_kill(r->exec);
                run_free(r);
        }
        m->n_runs = 0;
}

int cli_mcp(int argc, char **argv)
{
        static const struct option opts[] = {
                { "backend", required_argument, NULL, 'B' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        hxs_config cfg;
        hxs_error err = { 0 };
        int c;

        if (hxs_config_from_env(&cfg, &err) < 0) {
                note("%s", err.message);
                return HXS_CLI_EXIT_FAILURE;
        }
        optind = 1;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 'B':
                        if (hxs_config_set(&cfg, "SANDBOX_BACKEND", optarg, &err) < 0) {
                                note("%s", err.message);
                                return HXS_CLI_EXIT_FAILURE;
                        }
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return HXS_CLI_EXIT_FAILURE;
                }
        }
        if (optind != argc) {
                usage(stderr);
                return HXS_CLI_EXIT_FAILURE;
        }
        /* as exec: a process of its own, no warm templates or booted VMs kept waiting */
        cfg.warm = false;
        cfg.vm_pool_size = 0;
        signal(SIGPIPE, SIG_IGN);

        mcp_stdio m = { .max = (size_t)cfg.max_body_bytes + ENVELOPE_BYTES };
        /* as the service counts it: 0 is the core count, at least 2 */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        m.max_runs = cfg.max_concurrent ? cfg.max_concurrent : cores > 2 ? (size_t)cores : 2;
        m.fds = calloc(m.max_runs + 1, sizeof(*m.fds));
        m.by_slot = calloc(m.max_runs + 1, sizeof(*m.by_slot));
        m.session = mcp_session_new(&cfg);
        int r = -ENOMEM;
        if (!m.fds || !m.by_slot || !m.session)
                note("out of memory");
        else if ((r = hxs_engine_new(&cfg, &m.engine, &err)) < 0)
                note("%s", err.message);
        else
                r = serve(&m);
        end_all(&m);
        hxs_engine_free(m.engine);
        mcp_session_free(m.session);
        free(m.line);
        free(m.fds);
        free(m.by_slot);
        return r < 0 ? HXS_CLI_EXIT_FAILURE : 0;
}
