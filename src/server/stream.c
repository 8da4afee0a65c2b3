/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Server-Sent Events: POST /api/v1/exec with Accept: text/event-stream answers 200
 * text/event-stream once the sandbox started (admission and setup errors before that
 * answer as JSON, as without streaming), then
 *
 *   event: stdout / stderr   {"text": ...} or {"base64": ...}, as the program writes
 *   event: file              a returned file's object, as in the result
 *   event: result            the result object, what the JSON answer would have been
 *   event: error             {"error": {...}} when it failed after the stream began
 *
 * and ": keep-alive" comments after STREAM_HEARTBEAT of silence, so proxies do not cut
 * an idle stream. Each event's data is one line of compact JSON.
 *
 * The events wait in the call's buffer until MHD asks for body bytes (the content
 * reader below). When there are none, the reader suspends the connection and the
 * client's socket is watched for a hang-up, as for any running request (admission.c
 * kills the execution and frees the slot); new events resume it. A client that reads
 * slower than the program writes loses output events past STREAM_PENDING_MAX unread
 * bytes (a comment says how many), never the result.
 *
 * POST /mcp (an MCP tool call whose client asked for progress and accepts events) uses
 * the same stream with the Streamable HTTP framing instead: "event: message" events,
 * each a JSON-RPC message, its progress notifications as the program writes and its
 * response last.
 *
 * A UTF-8 sequence split across two reads of the program's output is held back to the
 * next chunk; a chunk that is not UTF-8 goes as base64.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include "core/macro.h"
#include "mcp/mcp.h"
#include "server/admission.h"
#include "server/call.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/state.h"
#include "server/stream.h"

/* The MHD response's block: what the reader is asked for at most. */
#define STREAM_BLOCK 16384

typedef struct stream {
        call *c;
        sse_buf out;
        sse_utf8 utf8[2];               /* stdout, stderr */
        uint64_t last_ms;               /* an event or heartbeat was last added */
        uint64_t dropped;               /* output bytes dropped: the client was too slow */
        bool queued;                    /* the response is on the connection */
        bool ended;                     /* the last event is in out */
        bool gone;                      /* the client went away */
        TAILQ_ENTRY(stream) link;
} stream;

struct stream_state {
        loop_hook hook;                 /* heartbeats */
        TAILQ_HEAD(, stream) all;       /* streams not ended */
};

/* ---- framing ---------------------------------------------------------------------- */

static int buf_reserve(sse_buf *b, size_t more)
{
        if (b->off && b->off == b->len)
                b->off = b->len = 0;
        if (b->len + more <= b->cap)
                return 0;
        if (b->off) {   /* move the unread part to the front before growing */
                memmove(b->data, b->data + b->off, b->len - b->off);
                b->len -= b->off;
                b->off = 0;
                if (b->len + more <= b->cap)
                        return 0;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + more)
                cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->cap = cap;
        return 0;
}

static int buf_add(sse_buf *b, const char *s, size_t n)
{
        int r = buf_reserve(b, n);
        if (r < 0)
                return r;
        memcpy(b->data + b->len, s, n);
        b->len += n;
        return 0;
}

int sse_append_event(sse_buf *b, const char *name, const char *json)
{
        int r = buf_reserve(b, strlen(name) + strlen(json) + 16);
        if (r < 0)
                return r;
        (void)buf_add(b, "event: ", 7);
        (void)buf_add(b, name, strlen(name));
        (void)buf_add(b, "\ndata: ", 7);
        (void)buf_add(b, json, strlen(json));
        return buf_add(b, "\n\n", 2);
}

int sse_append_comment(sse_buf *b, const char *text)
{
        int r = buf_reserve(b, strlen(text) + 4);
        if (r < 0)
                return r;
        (void)buf_add(b, ": ", 2);
        (void)buf_add(b, text, strlen(text));
        return buf_add(b, "\n\n", 2);
}

void sse_buf_free(sse_buf *b)
{
        free(b->data);
        *b = (sse_buf){ 0 };
}

/* ---- output chunks ---------------------------------------------------------------- */

/* Length of the longest prefix of p that is whole, valid UTF-8 (RFC 3629); *ret_cut:
 * what follows it is the valid start of a sequence that the end cut off. */
static size_t utf8_prefix(const unsigned char *p, size_t n, bool *ret_cut)
{
        size_t i = 0;

        *ret_cut = false;
        while (i < n) {
                unsigned char c = p[i];
                size_t need;
                unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
                if (c < 0x80) {
                        i++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf)
                        need = 2;
                else if (c >= 0xe0 && c <= 0xef) {
                        need = 3;
                        if (c == 0xe0)
                                lo = 0xa0;
                        if (c == 0xed)
                                hi = 0x9f;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        need = 4;
                        if (c == 0xf0)
                                lo = 0x90;
                        if (c == 0xf4)
                                hi = 0x8f;
                } else
                        return i;
                for (size_t k = 1; k < need; k++) {
                        if (i + k == n) {
                                *ret_cut = true;
                                return i;
                        }
                        unsigned char b = p[i + k];
                        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf))
                                return i;
                }
                i += need;
        }
        return i;
}

static char *base64(const unsigned char *p, size_t n)
{
        static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                             (i + 2 < n ? p[i + 2] : 0);
                *o++ = tab[v >> 18 & 63];
                *o++ = tab[v >> 12 & 63];
                *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
                *o++ = i + 2 < n ? tab[v & 63] : '=';
        }
        *o = '\0';
        return out;
}

int sse_output_json(sse_utf8 *u, const void *data, size_t len, bool flush, char **ret_json)
{
        _cleanup_free_ unsigned char *all = malloc(u->n_held + len + 1);
        json_t *o = NULL;
        bool cut;

        *ret_json = NULL;
        if (!all)
                return -ENOMEM;
        memcpy(all, u->held, u->n_held);
        if (len)
                memcpy(all + u->n_held, data, len);
        size_t n = u->n_held + len;
        size_t text = utf8_prefix(all, n, &cut);
        u->n_held = 0;
        if (n == 0)
                return 0;
        if (text == n || (cut && !flush)) {
                /* whole UTF-8, perhaps with the start of a sequence at the end: keep it */
                memcpy(u->held, all + text, n - text);
                u->n_held = n - text;
                if (text == 0)
                        return 0;
                o = json_pack("{s:s%}", "text", (const char *)all, text);
        } else {
                _cleanup_free_ char *b64 = base64(all, n);
                o = b64 ? json_pack("{s:s}", "base64", b64) : NULL;
        }
        *ret_json = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return *ret_json ? 0 : -ENOMEM;
}

/* ---- streams ---------------------------------------------------------------------- */

/* New events: a reader waiting for them goes on. */
static void wake(stream *s)
{
        s->last_ms = now_ms();
        if (s->queued && s->c->suspended)
                call_resume(s->c);
}

static void add_event(stream *s, const char *name, const char *json)
{
        if (!json || sse_append_event(&s->out, name, json) < 0)
                s->dropped++; /* out of memory: the stream goes on without it */
}

static void add_output(stream *s, int which, const void *data, size_t len, bool flush)
{
        _cleanup_free_ char *json = NULL;

        if (sse_output_json(&s->utf8[which - 1], data, len, flush, &json) == 0 && json)
                add_event(s, which == 1 ? "stdout" : "stderr", json);
}

void stream_output(void *userdata, int which, const void *data, size_t len)
{
        call *c = userdata;
        stream *s = c->stream;

        if (!s || s->ended || s->gone || (which != 1 && which != 2))
                return;
        if (s->out.len - s->out.off > STREAM_PENDING_MAX) {
                s->dropped += len;
                return;
        }
        if (c->mcp) {
                /* MCP: each chunk is a notifications/progress message */
                size_t n = 0;
                _cleanup_free_ char *json = mcp_run_progress(c->mcp, which, data, len, &n);
                add_event(s, "message", json);
        } else {
                add_output(s, which, data, len, false);
        }
        wake(s);
}

void stream_event(call *c, const char *name, const char *json)
{
        stream *s = c->stream;

        if (!s || s->ended || s->gone)
                return;
        if (s->out.len - s->out.off > STREAM_PENDING_MAX) {
                s->dropped += strlen(json);
                return;
        }
        add_event(s, name, json);
        wake(s);
}

static void add_files(stream *s, json_t *res)
{
        size_t i;
        json_t *f;

        json_array_foreach(json_object_get(res, "files"), i, f) {
                _cleanup_free_ char *json = json_dumps(f, JSON_COMPACT);
                add_event(s, "file", json);
        }
}

void stream_end(call *c)
{
        stream *s = c->stream;

        if (!s || s->ended)
                return;
        if (c->mcp) {
                /* MCP: the response is the last message; an error the service had
                 * after the stream began (out of memory) is a JSON-RPC error */
                size_t n = 0;
                _cleanup_free_ char *err = NULL;
                if (c->status != 200 || !c->reply)
                        err = mcp_error_text(mcp_run_id(c->mcp), MCP_INTERNAL_ERROR, "the service failed to reply", &n);
                add_event(s, "message", err ? err : c->reply);
                goto ended;
        }
        add_output(s, 1, NULL, 0, true);
        add_output(s, 2, NULL, 0, true);
        if (c->status == 200 && c->reply) {
                json_t *res = json_loadb(c->reply, c->reply_len, 0, NULL);
                if (res)
                        add_files(s, res);
                json_decref(res);
                add_event(s, "result", c->reply);
        } else {
                add_event(s, "error", c->reply ? c->reply :
                          "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}");
        }
        if (s->dropped) {
                char note[160];
                snprintf(note, sizeof(note),
                         "%llu bytes of output left out of this stream: it was read slower than the program wrote",
                         (unsigned long long)s->dropped);
                (void)sse_append_comment(&s->out, note);
        }
ended:
        s->ended = true;
        TAILQ_REMOVE(&c->srv->streams->all, s, link);
        wake(s);
}

void stream_gone(call *c)
{
        stream *s = c->stream;

        if (!s)
                return;
        s->gone = true;
        if (!s->ended) {
                s->ended = true;
                TAILQ_REMOVE(&c->srv->streams->all, s, link);
        }
}

void stream_free(call *c)
{
        stream *s = c->stream;

        if (!s)
                return;
        if (!s->ended)
                TAILQ_REMOVE(&c->srv->streams->all, s, link);
        sse_buf_free(&s->out);
        free(s);
        c->stream = NULL;
}

int stream_begin(call *c)
{
        stream *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        s->c = c;
        s->last_ms = now_ms();
        TAILQ_INSERT_TAIL(&c->srv->streams->all, s, link);
        c->stream = s;
        return 0;
}

/* MHD asks for body bytes: the events, or the end; none yet: wait for them. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        call *c = cls;
        stream *s = c->stream;

        if (!s || s->gone)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        size_t avail = s->out.len - s->out.off;
        if (avail) {
                size_t n = avail < max ? avail : max;
                memcpy(buf, s->out.data + s->out.off, n);
                s->out.off += n;
                return (ssize_t)n;
        }
        if (s->ended)
                return MHD_CONTENT_READER_END_OF_STREAM;
        call_suspend(c, admission_hangup);
        return 0;
}

enum MHD_Result stream_queue(call *c)
{
        stream *s = c->stream;

        if (!s || s->queued)
                return MHD_YES;
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK,
                                                                      stream_read, c, NULL);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no"); /* nginx: pass events on */
        MHD_add_response_header(resp, "X-Request-Id", c->id);
        enum MHD_Result ret = MHD_queue_response(c->conn, 200, resp);
        MHD_destroy_response(resp);
        s->queued = true;
        /* held until MHD completes it: a drain waits for its last events to be sent */
        if (!c->held) {
                c->held = true;
                c->srv->n_held++;
        }
        metrics_http(&c->srv->m, c->route, 200);
        return ret;
}

/* Accept names text/event-stream (any case, with parameters, among others). */
bool stream_wanted(struct MHD_Connection *conn)
{
        const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
        size_t n = strlen("text/event-stream");

        for (const char *p = v; p && *p;) {
                p += strspn(p, " \t,");
                if (strncasecmp(p, "text/event-stream", n) == 0 && strchr(" \t;,", p[n] ? p[n] : ' '))
                        return true;
                p += strcspn(p, ",");
        }
        return false;
}

/* ---- heartbeats ------------------------------------------------------------------- */

static uint64_t heartbeat_ms(const server *srv)
{
        return (uint64_t)(srv->cfg.stream_heartbeat_s ? srv->cfg.stream_heartbeat_s : 15) * 1000;
}

static uint64_t next_heartbeat(void *data)
{
        server *srv = data;
        uint64_t next = UINT64_MAX;
        stream *s;

        TAILQ_FOREACH(s, &srv->streams->all, link)
                if (s->queued && s->last_ms + heartbeat_ms(srv) < next)
                        next = s->last_ms + heartbeat_ms(srv);
        return next;
}

static void beat(void *data, uint64_t now)
{
        server *srv = data;
        stream *s;

        TAILQ_FOREACH(s, &srv->streams->all, link)
                if (s->queued && now >= s->last_ms + heartbeat_ms(srv)) {
                        (void)sse_append_comment(&s->out, "keep-alive");
                        wake(s);
                }
}

int stream_setup(server *srv)
{
        srv->streams = calloc(1, sizeof(*srv->streams));
        if (!srv->streams)
                return -ENOMEM;
        TAILQ_INIT(&srv->streams->all);
        srv->streams->hook = (loop_hook){ .next_deadline = next_heartbeat, .tick = beat, .data = srv };
        loop_hook_add(srv->loop, &srv->streams->hook);
        return 0;
}

void stream_cleanup(server *srv)
{
        free(srv->streams); /* every stream was its call's, freed with it */
        srv->streams = NULL;
}
