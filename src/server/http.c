/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MHD access handler: routes, methods, request bodies, and turning a prepared
 * reply into an MHD response. Nothing here blocks: an execution request is handed to
 * admission.c, which suspends the connection until its reply is ready.
 *
 * MHD calls the handler once for the headers, once per body chunk, then once with no
 * data; after MHD_resume_connection it calls it again, and that is when a suspended
 * request's reply is queued. MHD 0.9.75 takes a reply only at the headers call (it then
 * closes the connection, the body unread) or after the whole body. So a refusal known
 * from the headers is sent after a body of at most MAX_BODY_BYTES was read and
 * dropped (the connection stays open), and at once when the body is bigger or chunked;
 * a chunked body that grows past MAX_BODY_BYTES is dropped up to DISCARD_FACTOR times
 * that (at least DISCARD_MIN), then answered. Whenever a connection closes with unread bytes, conn.c closes
 * it lingering (the rest is read and dropped for a while), so a client that writes its
 * whole body before reading still reads the reply instead of a reset.
 *
 * Framing that two HTTP parsers could read differently (request smuggling) is refused
 * before anything else, and the connection closed: repeated Content-Length, repeated
 * Transfer-Encoding, a transfer coding other than chunked, and Content-Length with
 * Transfer-Encoding (RFC 9112 6.1, 6.3).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/randid.h"
#include "engine/json.h"
#include "server/admission.h"
#include "server/auth.h"
#include "server/call.h"
#include "server/conn.h"
#include "server/http.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/mcp-route.h"
#include "server/metrics.h"
#include "server/records.h"
#include "server/runtimes.h"
#include "server/session-call.h"
#include "server/sessions.h"
#include "server/state.h"
#include "server/stream.h"
#include "server/upload.h"

/* A chunked body past MAX_BODY_BYTES is read and dropped up to this many times that,
 * and at least DISCARD_MIN bytes (then the connection is closed without a reply). */
#define DISCARD_FACTOR 4
#define DISCARD_MIN ((uint64_t)64 << 20)

#define ALLOW_EXEC "POST"
#define ALLOW_GET "GET, HEAD"

static const char *const route_paths[ROUTE_MAX] = {
        [ROUTE_EXEC] = "/api/v1/exec",
        [ROUTE_EXECUTE] = "/execute",
        [ROUTE_HEALTH] = "/health",
        [ROUTE_METRICS] = "/metrics",
        [ROUTE_EXECUTIONS] = NULL,      /* a prefix, see route_of */
        [ROUTE_RUNTIMES] = "/api/v1/runtimes",
        [ROUTE_SESSIONS] = NULL,        /* a prefix, see route_of */
        [ROUTE_MCP] = "/mcp",
        [ROUTE_OTHER] = NULL,
};

#define EXECUTIONS_PREFIX "/api/v1/executions/"

static route route_of(const char *url)
{
        for (int r = 0; r < ROUTE_OTHER; r++)
                if (route_paths[r] && strcmp(url, route_paths[r]) == 0)
                        return (route)r;
        if (strncmp(url, EXECUTIONS_PREFIX, strlen(EXECUTIONS_PREFIX)) == 0)
                return ROUTE_EXECUTIONS;
        if (strncmp(url, SESSIONS_PREFIX, strlen(SESSIONS_PREFIX)) == 0 &&
            (url[strlen(SESSIONS_PREFIX)] == '\0' || url[strlen(SESSIONS_PREFIX)] == '/'))
                return ROUTE_SESSIONS;
        return ROUTE_OTHER;
}

/* application/json, any case, with optional parameters (charset=utf-8). */
static bool is_json_type(const char *ct)
{
        if (!ct)
                return false;
        while (*ct == ' ' || *ct == '\t')
                ct++;
        size_t n = strlen("application/json");
        if (strncasecmp(ct, "application/json", n) != 0)
                return false;
        ct += n;
        while (*ct == ' ' || *ct == '\t')
                ct++;
        return *ct == '\0' || *ct == ';';
}

static enum MHD_Result send_reply(call *c)
{
        server *srv = c->srv;
        struct MHD_Response *resp;
        bool is_metrics = c->route == ROUTE_METRICS && c->status == 200;
        static const char fallback[] =
                "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";

        if (c->reply) {
                resp = MHD_create_response_from_buffer(c->reply_len, c->reply, MHD_RESPMEM_MUST_FREE);
                if (resp)
                        c->reply = NULL;
        } else {
                c->status = 500;
                resp = MHD_create_response_from_buffer(strlen(fallback), (void *)fallback,
                                                       MHD_RESPMEM_PERSISTENT);
        }
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                is_metrics ? "text/plain; version=0.0.4; charset=utf-8" :
                                c->content_type && c->status < 300 ? c->content_type : "application/json");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        /* A draining instance keeps no connection: a proxy must not hold one in its
         * pool for the moment the socket closes. */
        if (c->close || admission_draining(srv))
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        MHD_add_response_header(resp, "X-Request-Id", c->id);
        if (c->allow)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, c->allow);
        if (c->mcp_session[0])
                MHD_add_response_header(resp, "Mcp-Session-Id", c->mcp_session);
        if (c->retry_after_s) {
                char ra[16];
                snprintf(ra, sizeof(ra), "%u", c->retry_after_s);
                MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
        }
        enum MHD_Result ret = MHD_queue_response(c->conn, c->status, resp);
        MHD_destroy_response(resp);

        metrics_http(&srv->m, c->route, c->status);
        if (c->is_exec && !c->logged) {
                log_call(c, NULL, c->status == 200 ? "ok" : "rejected", NULL);
                c->logged = true;
        }
        c->state = CALL_DONE;
        return ret;
}

/* /health's pool: in all and by language (those that have one), what they may hold now
 * (within what the executions leave of MEMORY_BUDGET_MB) and the setting's cap. */
static json_t *pool_json(const hxs_engine_stats *st, uint32_t setting_mb)
{
        json_t *langs = json_object();
        for (hxs_language l = 0; langs && l < HXS_LANG_MAX; l++)
                if (st->pool_lang_target[l])
                        json_object_set_new(langs, hxs_language_name(l),
                                            json_pack("{s:I,s:I,s:I}", "ready", (json_int_t)st->pool_lang_ready[l],
                                                      "target", (json_int_t)st->pool_lang_target[l], "memory_mb",
                                                      (json_int_t)st->pool_lang_memory_mb[l]));
        return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "ready", (json_int_t)st->pool_ready, "target",
                         (json_int_t)st->pool_target, "memory_mb", (json_int_t)st->pool_memory_mb,
                         "memory_limit_mb", (json_int_t)st->pool_memory_limit_mb, "memory_max_mb",
                         (json_int_t)setting_mb, "served", (json_int_t)st->pool_served, "languages", langs);
}

static void reply_health(call *c)
{
        server *srv = c->srv;
        uint64_t now = now_ms();
        const char *status = "ok";
        bool draining = admission_draining(srv);
        admission_load load;

        if (srv->health_checked_ms == 0 || now - srv->health_checked_ms >= 1000) {
                hxs_error err = { 0 };
                srv->health_r = hxs_engine_check(srv->engine, &err);
                snprintf(srv->health_message, sizeof(srv->health_message), "%s", err.message);
                srv->health_checked_ms = now;
        }
        admission_load_get(srv, &load);
        if (draining)
                status = "draining";
        else if (srv->health_r < 0)
                status = "unhealthy";

        json_t *o = json_pack("{s:s,s:s,s:[sss],s:s,s:I,s:I,s:I,s:I,s:I}", "status", status, "backend",
                              hxs_engine_backend_name(srv->engine), "languages", "python",
                              "javascript", "bash", "version", hxs_version(), "active",
                              (json_int_t)load.running, "queued", (json_int_t)load.queued,
                              "max_concurrent", (json_int_t)srv->cfg.max_concurrent,
                              "memory_budget_mb", (json_int_t)srv->cfg.memory_budget_mb,
                              "memory_held_mb", (json_int_t)load.memory_held_mb);
        if (o)
                json_object_set_new(o, "runtimes", runtimes_summary_json(hxs_engine_runtime_info(srv->engine)));
        uint32_t live_sessions;
        uint64_t cells;
        sessions_health(srv, &live_sessions, &cells);
        if (o)
                json_object_set_new(o, "sessions", json_pack("{s:I,s:I,s:I}", "live", (json_int_t)live_sessions,
                                                             "max", (json_int_t)srv->cfg.max_sessions, "cells",
                                                             (json_int_t)cells));
        if (o && srv->health_r < 0 && !draining)
                json_object_set_new(o, "message",
                                    json_string_lossy(srv->health_message,
                                                          strlen(srv->health_message)));
        /* Warm templates only make Python start faster: not part of the status. */
        hxs_engine_stats st = { 0 };
        hxs_engine_stats_get(srv->engine, &st);
        json_t *warm = json_pack("{s:b,s:I,s:I}", "enabled", st.warm_enabled, "templates_ready",
                                 (json_int_t)st.templates_ready, "templates_total",
                                 (json_int_t)st.templates_total);
        if (warm && !st.warm_enabled && st.warm_error[0])
                json_object_set_new(warm, "error",
                                    json_string_lossy(st.warm_error, strnlen(st.warm_error,
                                                                                 sizeof(st.warm_error))));
        if (o && warm)
                json_object_set_new(o, "warm", warm);
        else
                json_decref(warm);
        /* pre-started single-use JavaScript and Bash sandboxes (namespaces) */
        if (o)
                json_object_set_new(o, "pool", pool_json(&st, srv->cfg.pool_memory_mb));
        /* microVM backends: the accelerator and the pool of booted VMs */
        if (o && st.vm_accel)
                json_object_set_new(o, "vm", json_pack("{s:s,s:I,s:I,s:I,s:I}", "accel", st.vm_accel,
                                                       "pool_ready", (json_int_t)st.vm_pool_ready,
                                                       "pool_target", (json_int_t)st.vm_pool_target,
                                                       "booted", (json_int_t)st.vm_booted,
                                                       "boot_failures", (json_int_t)st.vm_boot_failures));
        if (o && st.vm_accel && st.vm_last_boot_error[0])
                json_object_set_new(json_object_get(o, "vm"), "last_boot_error",
                                    json_string_lossy(st.vm_last_boot_error,
                                                          strnlen(st.vm_last_boot_error, sizeof(st.vm_last_boot_error))));
        free(c->reply);
        c->reply = o ? json_dumps(o, JSON_COMPACT) : NULL;
        c->reply_len = c->reply ? strlen(c->reply) : 0;
        c->status = strcmp(status, "ok") == 0 ? 200 : 503;
        json_decref(o);
}

/* GET /api/v1/executions/{id}: the caller's own recent execution, else 404. */
static void reply_execution(call *c, const char *url)
{
        const char *id = url + strlen(EXECUTIONS_PREFIX);
        const exec_record *r = NULL;

        if (strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32)
                r = records_find(c->srv->records, id, c->caller);
        if (!r) {
                call_set_error(c, 404, "not_found",
                               "no recent execution with this id for this caller (records are kept for the last EXECUTION_RECORDS executions)");
                return;
        }
        free(c->reply);
        c->reply = records_to_json(r, &c->reply_len);
        c->status = 200;
}

static void reply_metrics(call *c)
{
        server *srv = c->srv;
        admission_load load;
        uint64_t now = now_ms();

        admission_load_get(srv, &load);
        metrics_gauges g = {
                .active = load.running,
                .queued = load.queued,
                .max_concurrent = srv->cfg.max_concurrent,
                .max_queue = srv->cfg.max_queue,
                .draining = admission_draining(srv),
                .oldest_wait_s = load.oldest_received_ms && now > load.oldest_received_ms ?
                                         (double)(now - load.oldest_received_ms) / 1000.0 : 0.0,
                .upload_staged = srv->upload_staged,
                .upload_staging_max = srv->cfg.upload_staging_bytes,
        };

        hxs_engine_stats_get(srv->engine, &g.engine);
        conn_stats(srv, &g.conns_fresh, &g.conns_established, &g.conns_lingering);
        free(c->reply);
        c->reply = metrics_render(&srv->m, &g, &c->reply_len);
        c->status = 200;
        /* the sessions' lines after the rest (families may come in any order) */
        char *extra = NULL;
        size_t extra_len = 0;
        FILE *f = c->reply ? open_memstream(&extra, &extra_len) : NULL;
        if (f) {
                sessions_metrics(srv, f);
                fclose(f);
                char *all = realloc(c->reply, c->reply_len + extra_len + 1);
                if (all) {
                        memcpy(all + c->reply_len, extra, extra_len + 1);
                        c->reply = all;
                        c->reply_len += extra_len;
                }
        }
        free(extra);
}

/* The most body an execution request may send: MAX_BODY_BYTES of JSON, or, as
 * multipart/form-data, that and its files. */
static uint64_t body_max(const call *c)
{
        if (c->body_limit)
                return c->body_limit;
        return c->upload ? upload_body_max(&c->srv->cfg) : c->srv->cfg.max_body_bytes;
}

/* What the headers alone decide for an execution request: 0 to read the body, or an
 * error reply prepared in c. */
static int check_exec_headers(call *c, uint64_t length)
{
        server *srv = c->srv;
        hxs_error err = { 0 };
        const char *v;
        char msg[200];

        if (admission_draining(srv)) {
                metrics_reject(&srv->m, REJECT_DRAINING);
                call_set_error(c, 503, "draining",
                               "the service is shutting down and takes no new executions; retry on another instance");
                return -ESHUTDOWN;
        }
        v = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        bool multipart = upload_is_multipart(v);
        uint64_t max = multipart ? upload_body_max(&srv->cfg) : srv->cfg.max_body_bytes;
        if (length > max) {
                metrics_reject(&srv->m, REJECT_TOO_LARGE);
                snprintf(msg, sizeof(msg), "body: %llu bytes exceeds the maximum %llu%s",
                         (unsigned long long)length, (unsigned long long)max,
                         multipart ? " (MAX_BODY_BYTES and MAX_FILES_BYTES)" : "");
                call_set_error(c, 413, "too_large", msg);
                return -E2BIG;
        }
        if (!multipart && !is_json_type(v)) {
                metrics_reject(&srv->m, REJECT_MEDIA_TYPE);
                call_set_error(c, 415, "unsupported_media_type",
                               "Content-Type: must be application/json, or multipart/form-data with files");
                return -EPROTO;
        }
        if (multipart && upload_new(&srv->cfg, &srv->upload_staged, v, &c->upload, &err) < 0) {
                metrics_reject(&srv->m, REJECT_INVALID);
                call_set_engine_error(c, &err, "multipart body: cannot be read");
                return -EINVAL;
        }
        return 0;
}

/* Sizes of what a request sends in bulk (its files, its body) are a 413; the limits
 * of its fields (code, stdin...) stay 400s naming the field. */
static bool is_too_large(int r, const hxs_error *err)
{
        return r == -E2BIG && (strncmp(err->field, "files", 5) == 0 || strcmp(err->field, "body") == 0);
}

/* An error of the body (multipart, or the request's files): its reply, sent once the
 * body was read (or dropped). Uploads over the service's staging room are a busy
 * service, as a full queue is: 429 overloaded, with Retry-After. */
static void upload_failed(call *c, int r, const hxs_error *err)
{
        bool big = is_too_large(r, err);

        if (r == -EBUSY) {
                metrics_reject(&c->srv->m, REJECT_OVERLOADED);
                call_set_error(c, 429, "overloaded", err->message);
                c->retry_after_s = admission_retry_after(c->srv);
                c->state = CALL_REPLY;
                return;
        }
        metrics_reject(&c->srv->m, big ? REJECT_TOO_LARGE : REJECT_INVALID);
        if (big)
                call_set_error(c, 413, "too_large", err->message);
        else
                call_set_engine_error(c, err, "multipart body: cannot be read");
        c->state = CALL_REPLY;
}

static call *call_new(server *srv, struct MHD_Connection *conn, const char *url)
{
        call *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->srv = srv;
        c->conn = conn;
        c->route = route_of(url);
        c->state = CALL_READING;
        c->exec_watch.fd = -1;
        c->client_watch.fd = -1;
        randid_make(c->id);
        return c;
}

struct framing {
        unsigned n_length, n_encoding;
        const char *encoding;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
        struct framing *f = cls;
        if (!key)
                return MHD_YES;
        if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
                f->n_length++;
        if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
                f->n_encoding++;
                f->encoding = value;
        }
        return MHD_YES;
}

/* 0, or -EPROTO with a 400 prepared: the body's length could be read two ways. */
static int check_framing(call *c, bool *ret_chunked)
{
        struct framing f = { 0 };
        const char *msg = NULL;

        (void)MHD_get_connection_values(c->conn, MHD_HEADER_KIND, count_framing, &f);
        *ret_chunked = f.n_encoding > 0;
        if (f.n_length > 1)
                msg = "Content-Length: sent more than once; send it once";
        else if (f.n_encoding > 1)
                msg = "Transfer-Encoding: sent more than once; send it once, chunked";
        else if (f.n_encoding && (!f.encoding || strcasecmp(f.encoding, "chunked") != 0))
                msg = "Transfer-Encoding: only chunked is accepted";
        else if (f.n_encoding && f.n_length)
                msg = "Content-Length and Transfer-Encoding: send one of them, not both";
        if (!msg)
                return 0;
        if (c->route == ROUTE_EXEC || c->route == ROUTE_EXECUTE) {
                c->is_exec = true;
                metrics_reject(&c->srv->m, REJECT_INVALID);
        }
        call_set_error(c, 400, "invalid_request", msg);
        return -EPROTO;
}

/* First call: headers only. Returns MHD_YES to read the body, or the queued reply. */
static enum MHD_Result on_headers(call *c, const char *method, const char *url)
{
        server *srv = c->srv;
        bool is_exec_route = c->route == ROUTE_EXEC || c->route == ROUTE_EXECUTE;
        bool is_get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                      strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        /* MHD has checked the header's syntax; chunked bodies have none: length 0 */
        const char *cl = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        uint64_t length = cl ? strtoull(cl, NULL, 10) : 0;
        bool chunked = false;

        /* Probes and scrapes keep coming after a load balancer took the instance out;
         * anything else says one still sends here (admission_done). */
        if (c->route != ROUTE_HEALTH && c->route != ROUTE_METRICS)
                srv->last_request_ms = now_ms();

        if (check_framing(c, &chunked) < 0) {
                /* nothing more is read from this connection: what follows is not ours */
                c->close = true;
                conn_linger(c->conn);
                return send_reply(c);
        }

        /* Everything but /health needs an allowed caller, when callers are identified:
         * a prober need not hold an identity, nothing else is answered without one. */
        if (c->route != ROUTE_HEALTH && auth_check(c) < 0) {
                c->is_exec = is_exec_route; /* logged: who was turned away */
        } else if (c->route == ROUTE_OTHER) {
                call_set_error(c, 404, "not_found",
                               "no such path; the API is POST /api/v1/exec (alias POST /execute), GET /api/v1/executions/{id}, /api/v1/sessions, GET /api/v1/runtimes, GET /health, GET /metrics and POST /mcp (MCP)");
        } else if (c->route == ROUTE_SESSIONS) {
                int r = session_call_headers(c, method, url, length);
                if (r == 0)
                        return MHD_YES; /* read the body (or none), then session_call_complete */
                if (r > 0) {
                        c->state = CALL_REPLY; /* sent once the (empty) body is read */
                        return MHD_YES;
                }
        } else if (c->route == ROUTE_MCP) {
                if (mcp_route_headers(c, method, length) == 0)
                        return MHD_YES; /* read the body */
        } else if (is_exec_route && strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
                c->allow = ALLOW_EXEC;
                call_set_error(c, 405, "method_not_allowed", "this path accepts POST only");
        } else if (!is_exec_route && !is_get) {
                c->allow = ALLOW_GET;
                call_set_error(c, 405, "method_not_allowed", "this path accepts GET and HEAD only");
        } else if (c->route == ROUTE_METRICS && auth_check_metrics(c) < 0) {
                /* refused: the 403 is prepared */
        } else if (is_exec_route) {
                c->is_exec = true;
                c->wants_stream = stream_wanted(c->conn);
                if (check_exec_headers(c, length) == 0)
                        return MHD_YES; /* read the body */
        } else {
                /* Replied to in the last call: queued now, MHD would close the
                 * connection instead of keeping it alive. */
                if (c->route == ROUTE_HEALTH)
                        reply_health(c);
                else if (c->route == ROUTE_EXECUTIONS)
                        reply_execution(c, url);
                else if (c->route == ROUTE_RUNTIMES)
                        reply_runtimes(c);
                else
                        reply_metrics(c);
                c->state = CALL_REPLY;
                return MHD_YES;
        }

        /* An error. A body of at most MAX_BODY_BYTES is read and dropped first, and the
         * connection stays open; a bigger or chunked one is not worth reading: reply
         * now, MHD then closes the connection, and conn.c drains what the client is
         * still sending so that it reads this reply rather than a reset. */
        if (!chunked && length <= srv->cfg.max_body_bytes) {
                c->state = CALL_REPLY; /* prepared: send when the body has been read */
                return MHD_YES;
        }
        c->close = true;
        conn_linger(c->conn);
        return send_reply(c);
}

/* Body bytes: kept up to MAX_BODY_BYTES, then counted and dropped. */
static enum MHD_Result on_body(call *c, const char *data, size_t size)
{
        server *srv = c->srv;
        uint64_t max = body_max(c);

        c->body_seen += size;
        if (c->body_seen > (DISCARD_FACTOR * max > DISCARD_MIN ? DISCARD_FACTOR * max : DISCARD_MIN)) {
                /* Enough of a body we will not use: close the connection (lingering). */
                srv->closing_on_purpose = true;
                conn_linger(c->conn);
                return MHD_NO;
        }
        if (c->state != CALL_READING || c->body_too_large)
                return MHD_YES;
        if (c->upload) {
                hxs_error err = { 0 };
                int r = c->body_seen > max ?
                        err_fail_field(&err, HXS_ERR_INVALID, -E2BIG, "body",
                                       "body: more than %llu bytes (MAX_BODY_BYTES and MAX_FILES_BYTES)",
                                       (unsigned long long)max) :
                        upload_feed(c->upload, data, size, &err);
                if (r < 0)
                        upload_failed(c, r, &err);
                return MHD_YES;
        }
        if (c->body_seen > max) {
                c->body_too_large = true;
                free(c->body);
                c->body = NULL;
                c->body_len = c->body_cap = 0;
                return MHD_YES;
        }
        if (c->body_len + size > c->body_cap) {
                size_t cap = c->body_cap ? c->body_cap : 4096;
                while (cap < c->body_len + size)
                        cap *= 2;
                if (cap > max)
                        cap = max;
                char *p = realloc(c->body, cap);
                if (!p)
                        return MHD_NO;
                c->body = p;
                c->body_cap = cap;
        }
        memcpy(c->body + c->body_len, data, size);
        c->body_len += size;
        return MHD_YES;
}

/* The body is complete: parse it and hand the execution to admission. */
static enum MHD_Result on_complete(call *c)
{
        server *srv = c->srv;
        hxs_error err = { 0 };
        char msg[200];

        if (c->route == ROUTE_SESSIONS) {
                session_call_complete(c);
                free(c->body);
                c->body = NULL;
                if (c->state == CALL_REPLY)
                        return send_reply(c);
                if (c->stream)
                        return stream_queue(c);
                return MHD_YES; /* suspended: the session answers */
        }
        if (c->body_too_large) {
                metrics_reject(&srv->m, REJECT_TOO_LARGE);
                snprintf(msg, sizeof(msg), "body: more than %u bytes", srv->cfg.max_body_bytes);
                call_set_error(c, 413, "too_large", msg);
                return send_reply(c);
        }
        if (c->route == ROUTE_MCP) {
                mcp_route_body(c);
                if (c->state == CALL_REPLY)
                        return send_reply(c);
                return c->stream ? stream_queue(c) : MHD_YES;
        }
        int r = c->upload ? upload_finish(c->upload, &c->req, &err) :
                            hxs_request_from_json(c->body ? c->body : "", c->body_len, &srv->cfg, &c->req, &err);
        free(c->body);
        c->body = NULL;
        /* c->upload stays until the request ends (http_completed): its staged bytes
         * count against UPLOAD_STAGING_BYTES while the request's copies of the files
         * wait and run. */
        if (is_too_large(r, &err)) {
                upload_failed(c, r, &err);
                return send_reply(c);
        }
        if (r < 0) {
                metrics_reject(&srv->m, REJECT_INVALID);
                call_set_engine_error(c, &err, "");
                return send_reply(c);
        }
        c->parsed = true;
        c->language = hxs_request_language(c->req);
        c->timeout_s = hxs_request_timeout_s(c->req);
        c->memory_mb = hxs_request_memory_mb(c->req);
        c->code_bytes = hxs_request_code_len(c->req);
        c->received_ms = now_ms();

        admission_submit(c);
        if (c->state == CALL_REPLY)
                return send_reply(c);
        if (c->stream)
                return stream_queue(c); /* running, its events follow */
        return MHD_YES; /* suspended: queued or running */
}

enum MHD_Result http_handler(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **req_cls)
{
        server *srv = cls;
        call *c = *req_cls;

        if (!c) {
                c = call_new(srv, conn, url);
                if (!c)
                        return MHD_NO;
                *req_cls = c;
                enum MHD_Result ret = on_headers(c, method, url);
                if (c->state != CALL_READING)
                        conn_request_read(conn); /* answered from the headers alone */
                return ret;
        }
        if (*upload_data_size) {
                size_t size = *upload_data_size;
                *upload_data_size = 0;
                return on_body(c, upload_data, size);
        }
        conn_request_read(conn); /* the whole body is in */
        switch (c->state) {
        case CALL_READING:
                return on_complete(c);
        case CALL_REPLY:
                return send_reply(c);
        case CALL_GONE:
                /* The client left while suspended: nothing to send, close. */
                metrics_http(&srv->m, c->route, 499);
                c->state = CALL_DONE;
                srv->closing_on_purpose = true;
                return MHD_NO;
        case CALL_RUNNING:
        case CALL_STREAMING:
                /* started after a wait: its stream is queued now (once) */
                return c->stream ? stream_queue(c) : MHD_YES;
        case CALL_QUEUED:
        case CALL_DONE:
        case CALL_STATE_MAX:
        default:
                return MHD_YES;
        }
}

void http_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                    enum MHD_RequestTerminationCode toe)
{
        server *srv = cls;
        call *c = *req_cls;

        conn_request_done(conn);
        if (!c)
                return;
        *req_cls = NULL;
        if (c->state == CALL_GONE)
                metrics_http(&srv->m, c->route, 499); /* MHD saw the hang-up before asking us */
        session_call_forget(c);
        admission_forget(c);
        stream_free(c);
        mcp_route_forget(c);
        if (c->held) {
                c->held = false;
                srv->n_held--;
        }
        if (c->is_exec && !c->logged)
                log_call(c, NULL,
                         toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "client_timeout" :
                         toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "shutdown" :
                                                                          "client_disconnected",
                         NULL);
        free(c->body);
        free(c->reply);
        upload_free(c->upload);
        hxs_request_free(c->req);
        free(c);
}
