/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hexr-sandbox mcp [--backend B]
 * hexr-sandbox mcp --url URL [--ca-file F] [--cert-file F --key-file F]
 *
 * The MCP server over stdio: newline-delimited JSON-RPC messages on stdin, replies and
 * notifications on stdout, one per line; logs go to stderr only. Tool calls run with the
 * local engine as `exec` does (the same settings from the environment), several at once:
 * one poll loop over stdin, every running execution's fd and every session's. End of
 * stdin ends what still runs and exits 0. The protocol itself is src/mcp (shared with
 * the service's /mcp); this file is the transport only; the session tools are
 * cli-mcp-sessions.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli-mcp.h"
#include "cli/cli.h"
#include "core/macro.h"

/* A message may carry a request body of MAX_BODY_BYTES and its JSON-RPC envelope. */
#define ENVELOPE_BYTES (64u << 10)

static void usage(FILE *f)
{
        fprintf(f,
                "usage: hexr-sandbox mcp [--backend B]\n\n"
                "The MCP server (Model Context Protocol) over stdio: JSON-RPC messages, one per line,\n"
                "on stdin and stdout; logs on stderr. Its tools run code in sandboxes with the local\n"
                "engine, as `exec` does, reading the same settings from the environment: run_code (a\n"
                "fresh sandbox per call) and the session_* tools (a sandbox that keeps its state, owned\n"
                "by this process). An MCP client starts it as a command, e.g.\n"
                "{\"command\": \"hexr-sandbox\", \"args\": [\"mcp\"]} (docs/mcp.md). Ends when stdin ends,\n"
                "ending what still runs.\n\n"
                "      --backend B        auto, namespaces, qemu, firecracker (as SANDBOX_BACKEND)\n"
                "      --url URL          forward every message to a service's /mcp instead (http://host:port,\n"
                "                         https://host:port, unix:/path); no sandbox runs here\n"
                "      --ca-file F        https: the CA bundle to trust (default: HEXR_SANDBOX_CA_FILE, else the\n"
                "                         system's)\n"
                "      --cert-file F      https: a client certificate for mTLS (HEXR_SANDBOX_CERT_FILE)\n"
                "      --key-file F       its key (HEXR_SANDBOX_KEY_FILE)\n");
}

static void run_free(running *r)
{
        hxs_exec_free(r->exec);
        mcp_run_free(r->run);
        free(r);
}

/* run_code: its sandbox starts now, or it is answered with why it cannot. */
static void start_exec(mcp_stdio *m, mcp_run *run)
{
        hxs_error err = { 0 };
        size_t n = 0;

        if (m->n_runs >= m->max_runs) {
                mcp_fail_run(m, run, "%zu calls are running already (MAX_CONCURRENT); retry when one has ended",
                             m->n_runs);
                return;
        }
        running *r = calloc(1, sizeof(*r));
        if (!r) {
                mcp_fail_run(m, run, "out of memory");
                return;
        }
        r->m = m;
        r->run = run;
        if (hxs_exec_start(m->engine, mcp_run_request(run), &r->exec, &err) < 0) {
                mcp_note("%s %s: %s", mcp_run_tool(run), mcp_run_id(run), err.message);
                char *text = mcp_run_failed(run, &err, &n);
                mcp_send(m, text, &n);
                run_free(r);
                return;
        }
        hxs_exec_set_output(r->exec, mcp_on_output, r);
        mcp_running_add(m, r);
}

static void finish_exec(mcp_stdio *m, running *r)
{
        hxs_result res = { 0 };
        hxs_error err = { 0 };
        size_t n = 0;
        char *text;

        mcp_running_unlink(m, r);
        if (hxs_exec_take_result(r->exec, &res, &err) < 0) {
                mcp_note("%s %s: %s", mcp_run_tool(r->run), mcp_run_id(r->run), err.message);
                text = mcp_run_failed(r->run, &err, &n);
        } else {
                mcp_note("%s %s: exit status %d in %llu ms%s%s", mcp_run_tool(r->run), mcp_run_id(r->run),
                         res.exit_code, (unsigned long long)res.execution_time_ms, res.end_message[0] ? "; " : "",
                         res.end_message);
                text = mcp_run_result(r->run, &res, &n);
        }
        mcp_send(m, text, &n);
        hxs_result_clear(&res);
        run_free(r);
}

/* notifications/cancelled: the call ends now and is never answered (the client has
 * stopped waiting for it). */
static void cancel(mcp_stdio *m, const char *id)
{
        for (running *r = m->runs; r; r = r->next)
                if (strcmp(mcp_run_id(r->run), id) == 0) {
                        mcp_note("%s %s: cancelled by the client", mcp_run_tool(r->run), id);
                        if (!r->exec)
                                return mcp_sessions_cancel(m, r);
                        hxs_exec_kill(r->exec);
                        mcp_running_unlink(m, r);
                        run_free(r);
                        return;
                }
}

static void on_message(mcp_stdio *m, const char *msg, size_t len)
{
        mcp_outcome o;

        if (mcp_handle(m->session, msg, len, &o) < 0) {
                size_t n = 0;
                mcp_note("out of memory reading a message");
                char *text = mcp_error_text(NULL, MCP_INTERNAL_ERROR, "out of memory", &n);
                mcp_send(m, text, &n);
                return;
        }
        switch (o.action) {
        case MCP_ACT_REPLY:
                mcp_send(m, TAKE_PTR(o.reply), &o.reply_len);
                break;
        case MCP_ACT_RUN:
                if (mcp_run_kind(o.run) == MCP_TOOL_RUN_CODE)
                        start_exec(m, TAKE_PTR(o.run));
                else
                        mcp_sessions_call(m, TAKE_PTR(o.run));
                break;
        case MCP_ACT_CANCEL:
                cancel(m, o.cancel_id);
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
                                char *text = mcp_error_text(NULL, MCP_INVALID_REQUEST, why, &n);
                                mcp_send(m, text, &n);
                        } else {
                                size_t n = m->len;
                                if (n && m->line[n - 1] == '\r')
                                        n--;
                                if (n && m->remote)
                                        mcp_remote_forward(m, m->line, n);
                                else if (n)
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
                        cap = cap < m->max ? cap : m->max;
                        char *p = realloc(m->line, cap);
                        if (!p) {
                                m->skipping = true;
                                continue;
                        }
                        m->line = p;
                        m->cap = cap;
                }
                m->line[m->len++] = ch;
        }
}

/* What one round of the loop watches: stdin, the executions, the sessions. */
typedef struct watch_set {
        struct pollfd *fds;
        running **runs;         /* [i] for an execution's slot, else NULL */
        mcp_sess **sess;        /* [i] for a session's slot, else NULL */
        mcp_fwd **fwds;         /* [i] for a forwarded message's slot, else NULL */
        size_t cap;
} watch_set;

static int watch_fill(mcp_stdio *m, watch_set *w, size_t *ret_n)
{
        size_t need = 1 + m->n_runs + m->n_sessions + mcp_remote_count(m) + 8;
        for (mcp_sess *se = m->sessions; se; se = se->next)
                need++;
        if (need > w->cap) {
                struct pollfd *f = realloc(w->fds, need * sizeof(*f));
                if (f)
                        w->fds = f;
                running **r = realloc(w->runs, need * sizeof(*r));
                if (r)
                        w->runs = r;
                mcp_sess **s = realloc(w->sess, need * sizeof(*s));
                if (s)
                        w->sess = s;
                mcp_fwd **fw = realloc(w->fwds, need * sizeof(*fw));
                if (fw)
                        w->fwds = fw;
                if (!f || !r || !s || !fw)
                        return -ENOMEM;
                w->cap = need;
        }
        size_t n = 0;
        w->fds[n] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
        w->runs[n] = NULL;
        w->sess[n++] = NULL;
        for (running *r = m->runs; r; r = r->next) {
                if (!r->exec)
                        continue; /* a session operation: its session's fd */
                w->fds[n] = (struct pollfd){ .fd = hxs_exec_fd(r->exec), .events = POLLIN };
                w->runs[n] = r;
                w->sess[n++] = NULL;
        }
        for (size_t i = 0; i < w->cap; i++)
                w->fwds[i] = NULL;
        size_t k = mcp_sessions_poll(m, w->fds + n, w->sess + n, w->cap - n);
        for (size_t i = n; i < n + k; i++)
                w->runs[i] = NULL;
        n += k;
        k = mcp_remote_poll(m, w->fds + n, w->fwds + n, w->cap - n);
        for (size_t i = n; i < n + k; i++)
                w->runs[i] = NULL, w->sess[i] = NULL;
        *ret_n = n + k;
        return 0;
}

/* The loop. Returns at the end of stdin or of stdout. */
static int serve(mcp_stdio *m)
{
        watch_set w = { 0 };
        char buf[65536];
        int r = 0;

        while (!m->out_failed) {
                size_t n = 0;
                if ((r = watch_fill(m, &w, &n)) < 0) {
                        mcp_note("out of memory");
                        break;
                }
                if (poll(w.fds, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        mcp_note("poll: %s", strerror(errno));
                        break;
                }
                /* executions and sessions first: stdin may end some of them */
                for (size_t i = 1; i < n; i++) {
                        if (!w.fds[i].revents)
                                continue;
                        if (w.runs[i]) {
                                hxs_exec_process(w.runs[i]->exec);
                                if (hxs_exec_done(w.runs[i]->exec))
                                        finish_exec(m, w.runs[i]);
                        } else if (w.sess[i]) {
                                mcp_sessions_process(m, w.sess[i]);
                        } else if (w.fwds[i]) {
                                mcp_remote_process(m, w.fwds[i]);
                        }
                }
                if (w.fds[0].revents) {
                        ssize_t got = read(STDIN_FILENO, buf, sizeof(buf));
                        if (got < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (got <= 0)
                                break;
                        on_input(m, buf, (size_t)got);
                }
        }
        free(w.fds);
        free(w.runs);
        free(w.sess);
        free(w.fwds);
        return r;
}

int cli_mcp(int argc, char **argv)
{
        static const struct option opts[] = {
                { "backend", required_argument, NULL, 'B' },
                { "url", required_argument, NULL, 'U' },
                { "ca-file", required_argument, NULL, 'C' },
                { "cert-file", required_argument, NULL, 'E' },
                { "key-file", required_argument, NULL, 'K' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        hxs_config cfg;
        hxs_error err = { 0 };
        const char *url = NULL, *ca = getenv("HEXR_SANDBOX_CA_FILE"), *cert = getenv("HEXR_SANDBOX_CERT_FILE"),
                   *key = getenv("HEXR_SANDBOX_KEY_FILE");
        char why[400];
        int c;

        if (hxs_config_from_env(&cfg, &err) < 0) {
                mcp_note("%s", err.message);
                return HXS_CLI_EXIT_FAILURE;
        }
        optind = 1;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 'B':
                        if (hxs_config_set(&cfg, "SANDBOX_BACKEND", optarg, &err) < 0) {
                                mcp_note("%s", err.message);
                                return HXS_CLI_EXIT_FAILURE;
                        }
                        break;
                case 'U':
                        url = optarg;
                        break;
                case 'C':
                        ca = optarg;
                        break;
                case 'E':
                        cert = optarg;
                        break;
                case 'K':
                        key = optarg;
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

        mcp_stdio m = { .cfg = &cfg, .max = (size_t)cfg.max_body_bytes + ENVELOPE_BYTES };
        /* as the service counts it: 0 is the core count, at least 2 */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        m.max_runs = cfg.max_concurrent ? cfg.max_concurrent : cores > 2 ? (size_t)cores : 2;
        m.session = mcp_session_new(&cfg);
        int r = -ENOMEM;
        if (!m.session)
                mcp_note("out of memory");
        else if (url && (r = mcp_remote_open(&m, url, ca && ca[0] ? ca : NULL, cert && cert[0] ? cert : NULL,
                                             key && key[0] ? key : NULL, why, sizeof(why))) < 0)
                mcp_note("%s", why);
        else if (!url && (r = hxs_engine_new(&cfg, &m.engine, &err)) < 0)
                mcp_note("%s", err.message);
        else
                r = serve(&m);
        mcp_remote_close(&m);
        mcp_sessions_free_all(&m);
        hxs_engine_free(m.engine);
        mcp_session_free(m.session);
        free(m.line);
        return r < 0 ? HXS_CLI_EXIT_FAILURE : 0;
}
