/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's side of the wire, as the host sees it: hostile bytes. Its stdout is cut
 * into lines of at most SESSION_LINE_MAX bytes; each must be one JSON object (strict:
 * no duplicate keys, nothing after it) with a string "ev"; fields we do not know are
 * ignored. Anything else ends the session with "protocol". Commands go the other way,
 * one compact JSON object per line, through the execution's stdin queue.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/exec.h"
#include "engine/json.h"
#include "core/error.h"
#include "session/session.h"

const char *proto_string(json_t *obj, const char *key, size_t *ret_len)
{
        json_t *v = json_object_get(obj, key);
        if (!json_is_string(v))
                return NULL;
        if (ret_len)
                *ret_len = json_string_length(v);
        return json_string_value(v);
}

/* A parsed line of the driver: "ready" once, first; the rest is the running item's. */
static void on_event(hxs_session *s, const char *ev, json_t *obj)
{
        if (!s->ready) {
                if (strcmp(ev, "ready") != 0) {
                        session_end(s, HXS_SESSION_PROTOCOL, "the driver spoke before it was ready");
                        return;
                }
                size_t n;
                const char *v = proto_string(obj, "version", &n);
                if (v)
                        utf8_lossy_copy(s->version, sizeof(s->version), v, n);
                s->ready = true;
                s->idle_since = session_now_ms();
                return;
        }
        const char *id = proto_string(obj, "id", NULL);
        if (!s->running || !id || strcmp(id, s->running->id) != 0)
                return; /* late words of something already over: nobody asks */
        s->running->ops->event(s, s->running, ev, obj);
}

static void on_line(hxs_session *s, const char *line, size_t len)
{
        json_error_t jerr;
        json_t *obj = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
        if (!obj || !json_is_object(obj)) {
                json_decref(obj);
                session_end(s, HXS_SESSION_PROTOCOL, "the driver wrote a line that is not a JSON object");
                return;
        }
        const char *ev = proto_string(obj, "ev", NULL);
        if (!ev)
                session_end(s, HXS_SESSION_PROTOCOL, "the driver wrote an event without \"ev\"");
        else
                on_event(s, ev, obj);
        json_decref(obj);
}

void proto_feed(hxs_session *s, const char *data, size_t len)
{
        while (len > 0 && !s->end) {
                const char *nl = memchr(data, '\n', len);
                size_t take = nl ? (size_t)(nl - data) : len;
                if (s->line_len + take > SESSION_LINE_MAX) {
                        session_end(s, HXS_SESSION_PROTOCOL, "the driver wrote a line longer than %u bytes",
                                    SESSION_LINE_MAX);
                        return;
                }
                if (nl && s->line_len == 0) {
                        on_line(s, data, take); /* a whole line: no copy */
                } else {
                        if (s->line_len + take > s->line_cap) {
                                size_t cap = s->line_cap ? s->line_cap : 4096;
                                while (cap < s->line_len + take)
                                        cap *= 2;
                                char *p = realloc(s->line, cap);
                                if (!p) {
                                        session_end(s, HXS_SESSION_CRASHED, "out of memory reading the driver");
                                        return;
                                }
                                s->line = p;
                                s->line_cap = cap;
                        }
                        memcpy(s->line + s->line_len, data, take);
                        s->line_len += take;
                        if (nl) {
                                on_line(s, s->line, s->line_len);
                                s->line_len = 0;
                        }
                }
                if (!nl)
                        return;
                data = nl + 1;
                len -= take + 1;
        }
}

int proto_send(hxs_session *s, json_t *cmd)
{
        if (!cmd)
                return -ENOMEM;
        char *text = json_dumps(cmd, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(cmd);
        if (!text)
                return -ENOMEM;
        size_t n = strlen(text);
        text[n] = '\n'; /* the NUL goes: the line's end instead */
        int r = s->x ? exec_stdin_write(s->x, text, n + 1) : -EPIPE;
        free(text);
        if (r < 0)
                session_end(s, HXS_SESSION_CRASHED, "the session's driver no longer reads its commands");
        return r;
}

int proto_bytes(json_t *ev, unsigned char **ret, size_t *ret_len)
{
        size_t n;
        const char *t = proto_string(ev, "text", &n);
        if (t) {
                unsigned char *p = malloc(n + 1);
                if (!p)
                        return -ENOMEM;
                memcpy(p, t, n);
                p[n] = '\0';
                *ret = p;
                *ret_len = n;
                return 0;
        }
        const char *b = proto_string(ev, "base64", &n);
        if (!b)
                return -EINVAL;
        return json_base64_decode(b, n, ret, ret_len);
}
