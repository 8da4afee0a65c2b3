/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP side of sessions (routes in session-call.h): bodies checked field by field
 * as exec's are (400 naming the field), the session looked up for its caller (another
 * caller's is a 404, as records are), the work handed to the library's session, the
 * connection suspended until its answer (a cell's result, a file's bytes) and resumed
 * then. A cell streams as an execution does (stdout, stderr, display, file events,
 * then result) when asked for with Accept: text/event-stream.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/macro.h"
#include "engine/files-out.h"
#include "engine/json.h"
#include "engine/request.h"
#include "server/admission.h"
#include "server/call.h"
#include "server/metrics.h"
#include "server/session-call.h"
#include "server/sessions.h"
#include "server/state.h"
#include "server/stream.h"
#include "server/upload.h"
#include "session/session-json.h"

enum {
        SR_COLLECTION,  /* /api/v1/sessions */
        SR_ONE,         /* /api/v1/sessions/{id} */
        SR_EXEC,        /* /api/v1/sessions/{id}/exec */
        SR_LIST,        /* /api/v1/sessions/{id}/files */
        SR_FILE,        /* /api/v1/sessions/{id}/files/{path} */
        SR_INTERRUPT,   /* /api/v1/sessions/{id}/interrupt */
        SR_UNKNOWN,
};

#define ALLOW_COLLECTION "GET, HEAD, POST"
#define ALLOW_ONE "GET, HEAD, DELETE"
#define ALLOW_FILE "GET, HEAD, PUT"

static const char *const session_fields[] = { "language", "memory_mb", "env_vars", "packages", "files",
                                               "idle_timeout", "lifetime" };
static const char *const cell_fields[] = { "code", "timeout", "files", "return_files" };

/* ---- the route ------------------------------------------------------------------- */

/* Which route, the id in id (33 bytes) and the file's path in c->session_path. */
static int route_of(call *c, const char *url, char *id)
{
        const char *p = url + strlen(SESSIONS_PREFIX);
        id[0] = '\0';
        if (*p == '\0' || strcmp(p, "/") == 0)
                return SR_COLLECTION;
        p++;
        size_t n = strcspn(p, "/");
        if (n != 32 || strspn(p, "0123456789abcdef") < 32)
                return SR_UNKNOWN; /* no such id: 404 below */
        memcpy(id, p, 32);
        id[32] = '\0';
        p += n;
        if (*p == '\0')
                return SR_ONE;
        if (strcmp(p, "/exec") == 0)
                return SR_EXEC;
        if (strcmp(p, "/interrupt") == 0)
                return SR_INTERRUPT;
        if (strcmp(p, "/files") == 0 || strcmp(p, "/files/") == 0)
                return SR_LIST;
        if (strncmp(p, "/files/", 7) == 0 && strlen(p + 7) < sizeof(c->session_path)) {
                snprintf(c->session_path, sizeof(c->session_path), "%s", p + 7);
                return SR_FILE;
        }
        return SR_UNKNOWN;
}

/* An id that is not one of the caller's sessions: its own code, so that a client tells
 * it from a file missing in a live session (not_found). */
static void not_found(call *c)
{
        call_set_error(c, 404, "session_not_found",
                       "no session with this id for this caller (an ended session is kept for a while, a deleted one is not)");
}

/* 410, with the reason the session ended as a field of its own (ended_reason's values). */
static void session_ended(call *c, live_session *ls)
{
        hxs_session_info in;
        hxs_session_get_info(ls->s, &in);
        const char *reason = hxs_session_end_name(in.end) ?: "unknown";
        char msg[300];
        snprintf(msg, sizeof(msg), "the session has ended (%s): %s", reason, in.end_message);
        call_set_error(c, 410, "session_ended", msg);
        json_t *o = json_pack("{s:{s:s, s:o*, s:s}}", "error", "code", "session_ended", "message",
                              json_string_lossy(msg, strlen(msg)), "reason", reason);
        if (o) {
                free(c->reply);
                c->reply = json_dumps(o, JSON_COMPACT);
                c->reply_len = c->reply ? strlen(c->reply) : 0;
                json_decref(o);
        }
}

static void reply_json(call *c, unsigned status, json_t *o)
{
        free(c->reply);
        c->reply = o ? json_dumps(o, JSON_COMPACT) : NULL;
        c->reply_len = c->reply ? strlen(c->reply) : 0;
        c->status = status;
        json_decref(o);
}

static bool is_json(const char *ct)
{
        if (!ct)
                return false;
        ct += strspn(ct, " \t");
        size_t n = strlen("application/json");
        return strncasecmp(ct, "application/json", n) == 0 && strchr("; \t", ct[n] ? ct[n] : ' ');
}

/* What a JSON body needs before it is read. */
static int check_json_body(call *c, uint64_t length)
{
        const char *ct = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (length > c->srv->cfg.max_body_bytes) {
                call_set_error(c, 413, "too_large", "body: larger than MAX_BODY_BYTES");
                return -1;
        }
        if (!is_json(ct)) {
                call_set_error(c, 415, "unsupported_media_type", "Content-Type: must be application/json");
                return -1;
        }
        return 0;
}

/* A cell's body: JSON, or multipart/form-data as exec's (its "request" part and files). */
static int check_cell_body(call *c, uint64_t length)
{
        server *srv = c->srv;
        const char *ct = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (!upload_is_multipart(ct))
                return check_json_body(c, length);
        if (length > upload_body_max(&srv->cfg)) {
                call_set_error(c, 413, "too_large", "body: larger than MAX_BODY_BYTES and MAX_FILES_BYTES");
                return -1;
        }
        hxs_error err = { 0 };
        if (upload_new(&srv->cfg, &srv->upload_staged, ct, &c->upload, &err) < 0) {
                call_set_engine_error(c, &err, "multipart body: cannot be read");
                return -1;
        }
        return 0;
}

static int method_not_allowed(call *c, const char *allow)
{
        c->allow = allow;
        call_set_error(c, 405, "method_not_allowed", "this path does not take this method");
        return -1;
}

int session_call_headers(call *c, const char *method, const char *url, uint64_t length)
{
        server *srv = c->srv;
        char id[33];
        bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
        bool post = strcmp(method, "POST") == 0, put = strcmp(method, "PUT") == 0;
        c->session_route = route_of(c, url, id);
        live_session *ls = NULL;
        if (c->session_route == SR_UNKNOWN || (c->session_route != SR_COLLECTION &&
                                               !(ls = sessions_find(srv, id, c->caller)))) {
                not_found(c);
                return -1;
        }
        snprintf(c->session_id, sizeof(c->session_id), "%s", id);
        /* an interrupt is no new work: it helps a drain along */
        if ((post || put) && c->session_route != SR_INTERRUPT && admission_draining(srv)) {
                call_set_error(c, 503, "draining", "the service is shutting down and takes no new work; retry on another instance");
                return -1;
        }
        switch (c->session_route) {
        case SR_COLLECTION:
                if (post)
                        return check_json_body(c, length);
                if (!get)
                        return method_not_allowed(c, ALLOW_COLLECTION);
                free(c->reply);
                c->reply = sessions_list_json(srv, c->caller, &c->reply_len);
                c->status = 200;
                return 1;
        case SR_ONE:
                if (get) {
                        reply_json(c, 200, session_to_json(ls->s, ls->id));
                        return 1;
                }
                if (strcmp(method, "DELETE") != 0)
                        return method_not_allowed(c, ALLOW_ONE);
                sessions_delete(ls);
                free(c->reply);
                c->reply = strdup("");
                c->reply_len = 0;
                c->status = 204;
                return 1;
        case SR_EXEC:
                if (!post)
                        return method_not_allowed(c, "POST");
                if (hxs_session_get_state(ls->s) == HXS_SESSION_ENDED) {
                        session_ended(c, ls);
                        return -1;
                }
                c->wants_stream = stream_wanted(c->conn);
                return check_cell_body(c, length);
        case SR_INTERRUPT:
                if (!post)
                        return method_not_allowed(c, "POST");
                if (hxs_session_get_state(ls->s) == HXS_SESSION_ENDED) {
                        session_ended(c, ls);
                        return -1;
                }
                /* "interrupt kernel": the running cell stops, the session and its state stay;
                 * its own caller gets its result (status and error "cancelled") */
                reply_json(c, 202, json_pack("{s:b}", "interrupted", hxs_session_interrupt(ls->s, 0) == 0));
                return 1;
        case SR_LIST:
                if (!get)
                        return method_not_allowed(c, "GET, HEAD");
                return 0;
        case SR_FILE:
                if (put) {
                        if (length > srv->cfg.max_file_bytes) {
                                call_set_error(c, 413, "too_large", "body: larger than MAX_FILE_BYTES");
                                return -1;
                        }
                        c->body_limit = srv->cfg.max_file_bytes ? srv->cfg.max_file_bytes : 1;
                        return 0;
                }
                if (!get)
                        return method_not_allowed(c, ALLOW_FILE);
                return 0;
        default:
                not_found(c);
                return -1;
        }
}

/* ---- waiting for the session ------------------------------------------------------- */

/* The client of a suspended request went away: nothing more is asked for it. */
static void hangup(watch *w, uint32_t events)
{
        (void)events;
        call *c = loop_owner(w, call, client_watch);
        session_call_forget(c);
        c->state = CALL_GONE;
        call_resume(c);
}

static void wait_for_session(call *c)
{
        c->state = CALL_RUNNING;
        call_suspend(c, hangup);
}

/* ---- create ---------------------------------------------------------------------- */

static int invalid(call *c, const char *field, const char *fmt, ...) _printf_(3, 4);
static int invalid(call *c, const char *field, const char *fmt, ...)
{
        char msg[300];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        hxs_error err = { 0 };
        err_fail_field(&err, HXS_ERR_INVALID, -EINVAL, field, "%s", msg);
        call_set_engine_error(c, &err, msg);
        metrics_reject(&c->srv->m, REJECT_INVALID);
        return -EINVAL;
}

/* The body's object, every field one of fields (else 400 naming it). */
static json_t *body_object(call *c, const char *const *fields, size_t n_fields, const char *list)
{
        json_error_t jerr;
        json_t *o = json_loadb(c->body ? c->body : "", c->body_len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(o)) {
                json_decref(o);
                invalid(c, "body", "body: must be one JSON object (%s)", jerr.text);
                return NULL;
        }
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
                bool known = false;
                for (size_t i = 0; i < n_fields; i++)
                        known = known || strcmp(key, fields[i]) == 0;
                if (!known) {
                        invalid(c, strlen(key) < 40 ? key : "body", "%s: unknown field (the fields are %s)", key,
                                list);
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}

/* idle_timeout or lifetime: a whole number of seconds, at least 1 (null: the default). */
static int get_seconds(call *c, json_t *o, const char *field, uint32_t *ret)
{
        json_t *v = json_object_get(o, field);
        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > UINT32_MAX)
                return invalid(c, field, "%s: must be a whole number of seconds, at least 1", field);
        *ret = (uint32_t)json_integer_value(v);
        json_object_del(o, field);
        return 0;
}

static void started(live_session *ls, call *c)
{
        c->session = NULL;
        if (hxs_session_get_state(ls->s) == HXS_SESSION_ENDED) {
                hxs_session_info in;
                hxs_session_get_info(ls->s, &in);
                call_set_error(c, 500, "sandbox_setup_failed", in.end_message);
        } else {
                reply_json(c, 201, session_to_json(ls->s, ls->id));
        }
        call_reply_ready(c);
}

static void create(call *c)
{
        json_t *o = body_object(c, session_fields, sizeof(session_fields) / sizeof(session_fields[0]),
                                "language, memory_mb, env_vars, packages, files, idle_timeout, lifetime");
        hxs_session_limits lim = { 0 };
        if (!o || get_seconds(c, o, "idle_timeout", &lim.idle_timeout_s) < 0 ||
            get_seconds(c, o, "lifetime", &lim.lifetime_s) < 0) {
                json_decref(o);
                c->state = CALL_REPLY;
                return;
        }
        json_object_set_new(o, "code", json_string(""));
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        hxs_request *req = NULL;
        hxs_error err = { 0 };
        int r = text ? hxs_request_from_json(text, strlen(text), &c->srv->cfg, &req, &err) : -ENOMEM;
        free(text);
        live_session *ls;
        if (r < 0) {
                metrics_reject(&c->srv->m, REJECT_INVALID);
                call_set_engine_error(c, &err, "out of memory");
        } else if (sessions_create(c, req, &lim, &ls) == 0) {
                c->session = ls;
                ls->on_started = started;
                ls->start_call = c;
                wait_for_session(c);
        }
        hxs_request_free(req);
        if (c->state != CALL_RUNNING)
                c->state = CALL_REPLY;
}

/* ---- a cell ---------------------------------------------------------------------- */

static void cell_output(void *userdata, int stream, const void *data, size_t len)
{
        call *c = userdata;
        if (c->stream)
                stream_output(c, stream, data, len);
}

static void cell_display(void *userdata, const char *json, size_t len)
{
        (void)len;
        call *c = userdata;
        if (!c->stream)
                return;
        char *ev = NULL;
        json_t *data = json_loads(json, 0, NULL);
        json_t *o = data ? json_pack("{s:o}", "data", data) : NULL;
        ev = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (ev)
                stream_event(c, "display", ev);
        free(ev);
}

static void cell_done(void *userdata, hxs_cell_result *res)
{
        call *c = userdata;
        live_session *ls = c->session;
        c->session = NULL;
        reply_json(c, 200, cell_result_to_json(res, ls ? ls->s : NULL, ls ? ls->id : NULL));
        hxs_cell_result_clear(res);
        if (c->stream) {
                stream_end(c);
                return;
        }
        call_reply_ready(c);
}

/* A multipart cell's request part may name only a cell's fields. */
static bool cell_only(call *c, const hxs_request *req)
{
        const char *field = req->stdin_data ? "stdin" : req->n_env ? "env_vars" : req->n_packages ? "packages" : NULL;
        if (!field)
                return true;
        invalid(c, field, "%s: not a field of a cell (the fields are code, timeout, files, return_files)", field);
        return false;
}

static void exec_cell(call *c)
{
        server *srv = c->srv;
        live_session *ls = c->session;
        hxs_request *req = NULL;
        hxs_error err = { 0 };
        int r;
        c->state = CALL_REPLY;
        if (c->upload) {
                r = upload_finish(c->upload, &req, &err);
        } else {
                json_t *o = body_object(c, cell_fields, sizeof(cell_fields) / sizeof(cell_fields[0]),
                                        "code, timeout, files, return_files");
                if (!o)
                        return;
                json_decref(o);
                r = hxs_request_from_json(c->body, c->body_len, &srv->cfg, &req, &err);
        }
        if (r < 0) {
                metrics_reject(&srv->m, r == -E2BIG && strncmp(err.field, "files", 5) == 0 ? REJECT_TOO_LARGE : REJECT_INVALID);
                call_set_engine_error(c, &err, "the cell could not be read");
                if (r == -E2BIG && strncmp(err.field, "files", 5) == 0)
                        c->status = 413;
                return;
        }
        if (!cell_only(c, req)) {
                hxs_request_free(req);
                return;
        }
        hxs_cell_callbacks cb = { .output = cell_output, .display = cell_display, .done = cell_done,
                                  .userdata = c };
        if (c->wants_stream && stream_begin(c) < 0) {
                hxs_request_free(req);
                call_set_error(c, 500, "internal", "out of memory");
                return;
        }
        r = hxs_session_exec(ls->s, req, &cb, &c->session_op, &err);
        hxs_request_free(req);
        if (r == -EBUSY) {
                call_set_error(c, 429, "overloaded", err.message);
                c->retry_after_s = 1;
        } else if (r == -ESHUTDOWN) {
                session_ended(c, ls);
        } else if (r < 0) {
                call_set_engine_error(c, &err, "the cell could not be queued");
        }
        if (r < 0) {
                stream_free(c);
                return;
        }
        sessions_count_cell(srv);
        if (c->stream) {
                c->state = CALL_STREAMING; /* http.c queues the stream */
                return;
        }
        wait_for_session(c);
}

/* ---- files ------------------------------------------------------------------------- */

static void file_failed(call *c, live_session *ls, const hxs_session_file_result *res)
{
        const char *msg = res->error_message[0] ? res->error_message : "the file operation failed";
        switch (res->status) {
        case -ENOENT:
                call_set_error(c, 404, "not_found", msg);
                break;
        case -ESHUTDOWN:
                session_ended(c, ls);
                break;
        case -EISDIR:
        case -ENOTDIR:
        case -EINVAL:
        case -EACCES:
                call_set_error(c, 400, "invalid_request", msg);
                break;
        default:
                call_set_error(c, 500, "internal", msg);
                break;
        }
}

static json_t *entries_json(const hxs_session_file_result *res)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < res->n_entries; i++)
                json_array_append_new(a, json_pack("{s:o, s:s, s:I}", "path",
                                                   json_string_lossy(res->entries[i].path, strlen(res->entries[i].path)),
                                                   "type", res->entries[i].type, "size",
                                                   (json_int_t)res->entries[i].size));
        return a ? json_pack("{s:o}", "files", a) : NULL;
}

static void file_done(void *userdata, hxs_session_file_result *res)
{
        call *c = userdata;
        int which = c->session_route;
        live_session *ls = c->session; /* alive: this is its session's callback */
        c->session = NULL;
        if (res->status < 0) {
                file_failed(c, ls, res);
        } else if (which == SR_LIST) {
                reply_json(c, 200, entries_json(res));
        } else if (c->body_limit) { /* put */
                reply_json(c, 201, json_pack("{s:s, s:I}", "path", res->path, "size", (json_int_t)res->size));
        } else if (res->truncated) {
                call_set_error(c, 413, "too_large", "the file is larger than MAX_FILE_BYTES");
        } else {
                free(c->reply);
                c->reply = res->data ? (char *)res->data : malloc(1);
                res->data = NULL;
                c->reply_len = res->len;
                c->status = c->reply ? 200 : 500;
                c->content_type = files_mime(res->path);
        }
        hxs_session_file_result_clear(res);
        call_reply_ready(c);
}

static void file_op(call *c)
{
        live_session *ls = c->session;
        hxs_error err = { 0 };
        int r;
        c->state = CALL_REPLY;
        if (c->session_route == SR_LIST) {
                const char *dir = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "path");
                r = hxs_session_list_files(ls->s, dir ? dir : "", file_done, c, &c->session_op, &err);
        } else if (c->body_limit) {
                r = hxs_session_put_file(ls->s, c->session_path, c->body ? c->body : "", c->body_len, file_done, c,
                                         &c->session_op, &err);
        } else {
                r = hxs_session_get_file(ls->s, c->session_path, file_done, c, &c->session_op, &err);
        }
        if (r == -EBUSY) {
                call_set_error(c, 429, "overloaded", err.message);
                c->retry_after_s = 1;
        } else if (r == -ESHUTDOWN) {
                session_ended(c, ls);
        } else if (r == -E2BIG) {
                call_set_error(c, 413, "too_large", err.message);
        } else if (r < 0) {
                call_set_engine_error(c, &err, "the file operation could not be queued");
        } else {
                wait_for_session(c);
        }
}

void session_call_complete(call *c)
{
        if (c->session_route != SR_COLLECTION) {
                /* found again: it may have been deleted while the body came */
                c->session = sessions_find(c->srv, c->session_id, c->caller);
                if (!c->session) {
                        not_found(c);
                        c->state = CALL_REPLY;
                        return;
                }
        }
        if (c->body_too_large) {
                call_set_error(c, 413, "too_large", "body: larger than its limit");
                c->state = CALL_REPLY;
                return;
        }
        switch (c->session_route) {
        case SR_COLLECTION:
                create(c);
                break;
        case SR_EXEC:
                exec_cell(c);
                break;
        case SR_LIST:
        case SR_FILE:
                file_op(c);
                break;
        default:
                not_found(c);
                c->state = CALL_REPLY;
                break;
        }
        if (c->state == CALL_REPLY)
                c->session = NULL; /* answered now: nothing waits */
}

void session_call_forget(call *c)
{
        live_session *ls = c->session;
        if (!ls)
                return;
        c->session = NULL;
        if (ls->start_call == c && ls->on_started) {
                /* nobody learnt its id: it goes */
                ls->on_started = NULL;
                ls->start_call = NULL;
                sessions_delete(ls);
        } else if (c->session_op) {
                hxs_session_cancel(ls->s, c->session_op);
        }
}
