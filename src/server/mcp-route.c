/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /mcp: the MCP server over Streamable HTTP. The protocol is src/mcp's, shared with
 * stdio; this file is the transport. Each POST carries one JSON-RPC message:
 *
 *   a request answered at once (initialize, ping, tools/list, bad params)
 *                                 200 application/json, the response
 *   a tool call                   an execution request like POST /api/v1/exec: the same
 *                                 admission (slots, queue, quotas), logs, records and
 *                                 metrics; 200 application/json with the response, or,
 *                                 when the client accepts text/event-stream and asked for
 *                                 progress, 200 text/event-stream: progress notifications
 *                                 as the program writes, the response last
 *   a session tool's call         the caller's session does it (mcp-sessions.c); 200
 *                                 with the tool result once it is done
 *   a notification or a response  202, no body (notifications/cancelled ends the call it
 *                                 names, if it is this caller's and still in flight)
 *   not JSON-RPC at all           400 with a JSON-RPC error without id
 *
 * GET and DELETE are 405: the server sends nothing unasked and keeps no session state.
 * initialize's response still carries an Mcp-Session-Id (the clients send it back),
 * which is what keeps two clients' request ids apart when one cancels. A browser's
 * Origin must be allowed (DNS rebinding), and an MCP-Protocol-Version header must name a
 * version we speak.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/macro.h"
#include "mcp/mcp.h"
#include "server/admission.h"
#include "server/call.h"
#include "server/mcp-route.h"
#include "server/mcp-sessions.h"
#include "server/metrics.h"
#include "server/state.h"
#include "server/stream.h"

#define ALLOW_MCP "POST"

/* http or https, a loopback name, an optional port: nothing else. */
static bool loopback_origin(const char *o)
{
        static const char *const hosts[] = { "localhost", "127.0.0.1", "[::1]" };
        if (strncasecmp(o, "http://", 7) == 0)
                o += 7;
        else if (strncasecmp(o, "https://", 8) == 0)
                o += 8;
        else
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(hosts); i++) {
                size_t n = strlen(hosts[i]);
                if (strncasecmp(o, hosts[i], n) != 0)
                        continue;
                const char *p = o + n;
                if (*p == '\0')
                        return true;
                if (*p != ':')
                        return false;
                size_t digits = strspn(p + 1, "0123456789");
                return digits >= 1 && digits <= 5 && p[1 + digits] == '\0';
        }
        return false;
}

bool mcp_origin_allowed(const char *origin, const char *allowed)
{
        if (!allowed[0])
                return loopback_origin(origin);
        size_t n = strlen(origin);
        for (const char *p = allowed; *p;) {
                p += strspn(p, " \t,");
                size_t len = strcspn(p, ",");
                while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
                        len--;
                if (len && len == n && strncasecmp(p, origin, n) == 0)
                        return true;
                p += strcspn(p, ",");
        }
        return false;
}

static bool is_json(const char *ct)
{
        size_t n = strlen("application/json");
        if (!ct)
                return false;
        ct += strspn(ct, " \t");
        return strncasecmp(ct, "application/json", n) == 0 && strchr(" \t;", ct[n] ? ct[n] : ' ');
}

static const char *header(const call *c, const char *name)
{
        return MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, name);
}

int mcp_route_headers(call *c, const char *method, uint64_t length)
{
        server *srv = c->srv;
        const char *origin = header(c, "Origin");
        const char *version = header(c, "MCP-Protocol-Version");
        char msg[200];

        if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
                c->allow = ALLOW_MCP;
                call_set_error(c, 405, "method_not_allowed",
                               "/mcp accepts POST only: one JSON-RPC message per request (this server sends nothing unasked, and keeps no session to delete)");
                return -EOPNOTSUPP;
        }
        if (origin && !mcp_origin_allowed(origin, srv->cfg.mcp_allowed_origins)) {
                metrics_reject(&srv->m, REJECT_FORBIDDEN);
                call_set_error(c, 403, "forbidden",
                               "Origin: not allowed to call /mcp (MCP_ALLOWED_ORIGINS; unset: localhost, 127.0.0.1 and [::1] only)");
                return -EPERM;
        }
        if (version && !mcp_version_supported(version)) {
                metrics_reject(&srv->m, REJECT_INVALID);
                snprintf(msg, sizeof(msg), "MCP-Protocol-Version: not supported (this server speaks %s, 2025-06-18 and 2025-03-26)",
                         MCP_PROTOCOL_LATEST);
                call_set_error(c, 400, "invalid_request", msg);
                return -EPROTO;
        }
        if (!is_json(header(c, MHD_HTTP_HEADER_CONTENT_TYPE))) {
                metrics_reject(&srv->m, REJECT_MEDIA_TYPE);
                call_set_error(c, 415, "unsupported_media_type", "Content-Type: must be application/json");
                return -EPROTO;
        }
        if (length > srv->cfg.max_body_bytes) {
                metrics_reject(&srv->m, REJECT_TOO_LARGE);
                snprintf(msg, sizeof(msg), "body: %llu bytes exceeds the maximum %u (MAX_BODY_BYTES)",
                         (unsigned long long)length, srv->cfg.max_body_bytes);
                call_set_error(c, 413, "too_large", msg);
                return -E2BIG;
        }
        return 0;
}

/* caller, session and JSON-RPC id: "" when it does not fit (then nothing can name it) */
static void key_of(const call *c, const char *id, char *buf, size_t size)
{
        const char *session = header(c, "Mcp-Session-Id");
        int n = snprintf(buf, size, "%s\n%s\n%s", c->caller, session ? session : "", id);
        if (n < 0 || (size_t)n >= size)
                buf[0] = '\0';
}

static void reply(call *c, unsigned status, char *text, size_t len)
{
        free(c->reply);
        c->reply = text;
        c->reply_len = len;
        c->status = status;
        c->state = CALL_REPLY;
}

static void accepted(call *c)
{
        reply(c, 202, strdup(""), 0);
}

/* notifications/cancelled: the call it names ends as if its client had gone away. */
static void cancel(call *c, const char *id)
{
        char key[sizeof(c->mcp_key)];
        call *o;

        key_of(c, id, key, sizeof(key));
        if (!key[0])
                return;
        TAILQ_FOREACH(o, &c->srv->mcp_calls, mlink)
                if (strcmp(o->mcp_key, key) == 0) {
                        if (mcp_run_kind(o->mcp) == MCP_TOOL_RUN_CODE)
                                admission_cancel(o, "cancelled");
                        else
                                mcp_sessions_cancel_call(o);
                        return;
                }
}

/* A tool call: an execution request from here on. */
static void run(call *c, mcp_run *r)
{
        c->mcp = r;
        if (mcp_run_kind(r) != MCP_TOOL_RUN_CODE) {
                /* a session tool: the caller's session does the work, no execution slot */
                key_of(c, mcp_run_id(r), c->mcp_key, sizeof(c->mcp_key));
                TAILQ_INSERT_TAIL(&c->srv->mcp_calls, c, mlink);
                c->mcp_listed = true;
                mcp_sessions_route(c);
                return;
        }
        c->req = mcp_run_take_request(r);
        c->is_exec = true;
        c->parsed = true;
        c->language = hxs_request_language(c->req);
        c->timeout_s = hxs_request_timeout_s(c->req);
        c->memory_mb = hxs_request_memory_mb(c->req);
        c->code_bytes = hxs_request_code_len(c->req);
        c->received_ms = now_ms();
        c->wants_stream = mcp_run_wants_progress(r) && stream_wanted(c->conn);
        key_of(c, mcp_run_id(r), c->mcp_key, sizeof(c->mcp_key));
        TAILQ_INSERT_TAIL(&c->srv->mcp_calls, c, mlink);
        c->mcp_listed = true;
        admission_submit(c);
}

void mcp_route_body(call *c)
{
        server *srv = c->srv;
        mcp_outcome o = { 0 };
        mcp_session *s = mcp_session_new(&srv->cfg);
        int r = s ? mcp_handle(s, c->body ? c->body : "", c->body_len, &o) : -ENOMEM;

        mcp_session_free(s);
        free(c->body);
        c->body = NULL;
        if (r < 0) {
                call_set_error(c, 500, "internal", "out of memory reading the message");
                c->state = CALL_REPLY;
                return;
        }
        metrics_mcp(&srv->m, o.method, o.tool);
        switch (o.action) {
        case MCP_ACT_REPLY:
                /* no message we could read at all: the HTTP request is bad */
                if (strcmp(o.method, "invalid") == 0)
                        metrics_reject(&srv->m, REJECT_INVALID);
                reply(c, strcmp(o.method, "invalid") == 0 ? 400 : 200, TAKE_PTR(o.reply), o.reply_len);
                if (strcmp(o.method, "initialize") == 0)
                        snprintf(c->mcp_session, sizeof(c->mcp_session), "%s", c->id);
                break;
        case MCP_ACT_RUN:
                run(c, TAKE_PTR(o.run));
                break;
        case MCP_ACT_CANCEL:
                cancel(c, o.cancel_id);
                accepted(c);
                break;
        case MCP_ACT_NONE:
        case MCP_ACT_MAX:
        default:
                accepted(c);
                break;
        }
        mcp_outcome_clear(&o);
}

void mcp_route_forget(call *c)
{
        if (c->mcp_listed) {
                TAILQ_REMOVE(&c->srv->mcp_calls, c, mlink);
                c->mcp_listed = false;
        }
        mcp_run_free(c->mcp);
        c->mcp = NULL;
}
