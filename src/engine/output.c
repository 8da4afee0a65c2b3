/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an execution prints, for every backend: each chunk goes to the streaming
 * callback as it is read and into the result's head+tail buffers; the total is held
 * to MAX_STREAM_BYTES. At the end, why the execution ended, in a word (hxs_end_reason)
 * and in plain words: the kill line the engine appends to stderr.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/exec.h"
#include "engine/output.h"

const char *hxs_end_reason_name(hxs_end_reason end)
{
        switch (end) {
        case HXS_END_EXITED: return "exited";
        case HXS_END_TIME_LIMIT: return "timeout";
        case HXS_END_MEMORY_LIMIT: return "memory_limit";
        case HXS_END_OUTPUT_LIMIT: return "output_limit";
        case HXS_END_SIGNAL: return "signal";
        case HXS_END_KILLED: return "killed";
        case HXS_END_MAX: break;
        }
        return "unknown";
}

void hxs_exec_set_output(hxs_exec *x, hxs_output_fn fn, void *userdata)
{
        x->out_fn = fn;
        x->out_userdata = userdata;
}

/* The streaming callback's share of a chunk and the MAX_STREAM_BYTES count. */
static bool account(hxs_exec *x, int stream, const void *data, size_t len)
{
        uint64_t limit = x->engine->cfg.max_stream_bytes;
        if (x->out_fn && x->printed < limit) {
                uint64_t room = limit - x->printed;
                x->out_fn(x->out_userdata, stream, data, len < room ? len : (size_t)room);
        }
        x->printed += len;
        if (x->printed > limit && !x->output_limited) {
                x->output_limited = true;
                return true;
        }
        return false;
}

bool exec_output(hxs_exec *x, int stream, const void *data, size_t len)
{
        if (x->req->interactive) {
                /* a session's driver: its protocol lines go to the session manager, which
                 * bounds each cell itself; stderr keeps a head and tail for its end */
                if (x->out_fn)
                        x->out_fn(x->out_userdata, stream, data, len);
                if (stream == 2)
                        (void)capbuf_append(&x->err, data, len);
                return false;
        }
        (void)capbuf_append(stream == 1 ? &x->out : &x->err, data, len);
        return account(x, stream, data, len);
}

/* The least room a read in place gets (the buffer grows for it, doubling; less only
 * near the cap). A stack chunk is read and appended only for an interactive program
 * and an output at or past its cap. */
#define OUTPUT_READ_MIN 16384

ssize_t exec_output_read(hxs_exec *x, int stream, int fd, size_t max, bool *ret_over)
{
        capbuf *b = stream == 1 ? &x->out : &x->err;
        size_t room = 0;
        /* a large output is read straight into its buffer: no copy through a chunk,
         * and reads as large as the pipe holds */
        char *dst = x->req->interactive ? NULL : capbuf_reserve(b, OUTPUT_READ_MIN, &room);
        *ret_over = false;
        if (!dst) {
                char chunk[65536];
                ssize_t n = read(fd, chunk, max < sizeof(chunk) ? max : sizeof(chunk));
                if (n > 0)
                        *ret_over = exec_output(x, stream, chunk, (size_t)n);
                return n;
        }
        ssize_t n = read(fd, dst, room < max ? room : max);
        if (n > 0) {
                capbuf_commit(b, (size_t)n);
                *ret_over = account(x, stream, dst, (size_t)n);
        }
        return n;
}

/* "64 MiB", "4 KiB" or "1000 bytes": a limit as an operator would have written it. */
static void format_bytes(char *buf, size_t size, uint64_t n)
{
        if (n >= (1u << 20) && n % (1u << 20) == 0)
                snprintf(buf, size, "%" PRIu64 " MiB", n >> 20);
        else if (n >= 1024 && n % 1024 == 0)
                snprintf(buf, size, "%" PRIu64 " KiB", n >> 10);
        else
                snprintf(buf, size, "%" PRIu64 " bytes", n);
}

/* The end reason from what the backend recorded, with its message. */
static void set_end(hxs_exec *x, hxs_result *res)
{
        char bytes[32];
        res->end_message[0] = '\0';
        if (x->output_limited) {
                res->end = HXS_END_OUTPUT_LIMIT;
                format_bytes(bytes, sizeof(bytes), x->engine->cfg.max_stream_bytes);
                snprintf(res->end_message, sizeof(res->end_message), "killed: output limit of %s exceeded",
                         bytes);
        } else if (res->timed_out) {
                res->end = HXS_END_TIME_LIMIT;
                snprintf(res->end_message, sizeof(res->end_message), "killed: time limit of %" PRIu32 " s exceeded",
                         x->req->timeout_s);
        } else if (res->oom_killed) {
                res->end = HXS_END_MEMORY_LIMIT;
                snprintf(res->end_message, sizeof(res->end_message),
                         "killed: memory limit of %" PRIu32 " MB exceeded", x->req->memory_mb);
        } else if (x->killed) {
                res->end = HXS_END_KILLED;
                snprintf(res->end_message, sizeof(res->end_message), "killed: the execution was stopped before it ended");
        } else if (res->signal) {
                const char *abbrev = sigabbrev_np(res->signal);
                res->end = HXS_END_SIGNAL;
                if (abbrev)
                        snprintf(res->end_message, sizeof(res->end_message), "killed by signal %d (SIG%s)",
                                 res->signal, abbrev);
                else
                        snprintf(res->end_message, sizeof(res->end_message), "killed by signal %d", res->signal);
        } else {
                res->end = HXS_END_EXITED;
        }
}

/* stderr ends with the kill line, on a line of its own, after the program's bytes
 * (outside the cap: it is ours). The streaming callback gets it too. */
static void append_kill_line(hxs_exec *x, hxs_result *res)
{
        char line[sizeof(res->end_message) + 32];
        bool newline = res->stderr_len > 0 && res->stderr_data && res->stderr_data[res->stderr_len - 1] != '\n';
        int n = snprintf(line, sizeof(line), "%shexr-sandbox: %s\n", newline ? "\n" : "", res->end_message);
        if (n <= 0)
                return;
        if (x->out_fn)
                x->out_fn(x->out_userdata, 2, line, (size_t)n);
        char *d = realloc(res->stderr_data, res->stderr_len + (size_t)n + 1);
        if (!d)
                return;
        memcpy(d + res->stderr_len, line, (size_t)n + 1);
        res->stderr_data = d;
        res->stderr_len += (size_t)n;
}

void exec_result_output(hxs_exec *x)
{
        hxs_result *res = &x->result;
        set_end(x, res);
        res->stdout_truncated = capbuf_truncated(&x->out);
        res->stderr_truncated = capbuf_truncated(&x->err);
        res->stdout_omitted = x->out.dropped;
        res->stderr_omitted = x->err.dropped;
        res->stdout_data = capbuf_steal(&x->out, &res->stdout_len);
        res->stderr_data = capbuf_steal(&x->err, &res->stderr_len);
        if (res->end != HXS_END_EXITED)
                append_kill_line(x, res);
}
