/* SPDX-License-Identifier: Apache-2.0 */
/* `hexr-sandbox mcp`'s output: JSON-RPC messages on stdout, one per line; logs on
 * stderr; progress from executions and cells; the list of calls in flight. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli-mcp.h"

void mcp_note(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "hexr-sandbox mcp: ");
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* stdout stays blocking: a client that stops reading stops us, which is what it asked for. */
void mcp_send(mcp_stdio *m, char *text, const size_t *lenp)
{
        if (!text) {
                mcp_note("out of memory writing a reply");
                return;
        }
        size_t len = *lenp;
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

void mcp_on_output(void *userdata, int stream, const void *data, size_t len)
{
        running *r = userdata;
        size_t n = 0;
        char *text = mcp_run_progress(r->run, stream, data, len, &n);
        if (text)
                mcp_send(r->m, text, &n);
}

void mcp_fail_run(mcp_stdio *m, mcp_run *run, const char *fmt, ...)
{
        char msg[600];
        va_list ap;
        size_t n = 0;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        mcp_note("%s %s: %s", mcp_run_tool(run), mcp_run_id(run), msg);
        char *text = mcp_run_error(run, msg, &n);
        mcp_send(m, text, &n);
        mcp_run_free(run);
}

void mcp_running_add(mcp_stdio *m, running *r)
{
        r->next = m->runs;
        m->runs = r;
        m->n_runs++;
}

void mcp_running_unlink(mcp_stdio *m, running *r)
{
        for (running **p = &m->runs; *p; p = &(*p)->next)
                if (*p == r) {
                        *p = r->next;
                        m->n_runs--;
                        return;
                }
}
