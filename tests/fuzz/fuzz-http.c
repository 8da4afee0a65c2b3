/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the service's HTTP front (src/server/http.c), everything that reads
 * client bytes there: routing, methods, X-Forwarded-Client-Cert (SPIFFE ID),
 * Content-Length, Content-Type, Transfer-Encoding, the body in chunks, the request
 * JSON, error replies and the log line.
 *
 * http_handler is driven the way MHD drives it (headers call, one call per body chunk,
 * the final call, a resume for suspended requests, then http_completed) without a
 * daemon: the link wraps (-Wl,--wrap) the few MHD functions that need a real
 * connection, the engine health check, and log_call (to capture its line). The
 * admission and loop functions are stubs defined here.
 *
 * Input, text, like a request:
 *   METHOD URL\n                  (no space: URL is /api/v1/exec)
 *   Name: value\n ...              headers, until an empty line
 *   \n
 *   body
 * Pseudo-headers steer the harness: X-Fuzz-Chunk (body chunk size, 0 = whole),
 * X-Fuzz-Max-Body (MAX_BODY_BYTES), X-Fuzz-Draining, X-Fuzz-Unhealthy, X-Fuzz-Admit
 * (0 reply now, 1 overloaded, 2 suspend then reply, 3 suspend then the client leaves),
 * X-Fuzz-Identity (callers identified: the peer is a trusted proxy, AUTH_ALLOW is
 * FUZZ_ALLOW; without it there are no identities and X-Forwarded-Client-Cert is
 * ignored). The body reaches the handler as MHD would hand it over: with
 * Transfer-Encoding, all of it (as decoded chunks); with Content-Length, that many
 * bytes, and when fewer follow the client leaves before the body ends; with neither,
 * none. A Content-Length that MHD itself refuses (not digits) ends the input.
 *
 * Invariants: at most one response per request and exactly one unless the connection
 * was closed or the client left; a known status; every JSON reply parses and error
 * replies carry error.code and error.message; framing that could be read two ways
 * (Content-Length or Transfer-Encoding twice, a coding other than chunked, both) is a
 * 400 at once on any route, with Connection: close; a reply sent before an unread
 * body (chunked, or longer than MAX_BODY_BYTES) is queued from the headers call and
 * the connection is marked to close lingering; without identities the caller is
 * always anonymous; with them every route but /health answers exactly one 403 (unless
 * the client left first) unless X-Forwarded-Client-Cert names a valid SPIFFE ID that
 * AUTH_ALLOW lists and forwards no certificate (this harness has no trust bundles),
 * and that ID is the caller; a request is refused with 415 exactly when its
 * Content-Type is neither application/json nor multipart/form-data (whose file parts
 * are staged in unlinked files under /tmp here); each execution request is logged
 * once, as one valid JSON line.
 */
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/json.h"
#include "engine/request.h"
#include "server/admission.h"
#include "server/call.h"
#include "server/http.h"
#include "server/log.h"
#include "mcp/mcp.h"
#include "server/mcp-sessions.h"
#include "server/session-call.h"
#include "server/sessions.h"
#include "server/loop.h"
#include "server/state.h"
#include "server/upload.h"
#include "fuzz.h"


#define MAX_HEADERS 24
#define FUZZ_ALLOW "spiffe://example.org/agents/*, spiffe://other.test, spiffe://x.y/exact"

static struct {
        struct {
                char *name, *value;
        } h[MAX_HEADERS];
        size_t nh;
        int admit;              /* X-Fuzz-Admit */
        bool unhealthy;
        bool draining;          /* X-Fuzz-Draining */
        int queued;             /* responses queued */
        unsigned status;
        char *reply;            /* copy of the last response body */
        size_t reply_len;
        int logs;               /* log_call lines */
        call *pending;          /* suspended by the admission stub */
        int queued_at;          /* the handler call (0: headers) that queued the response */
        int calls;              /* handler calls so far */
        bool linger;            /* conn_linger was called */
        bool close_header;      /* the response says Connection: close */
} fx;

static int fake_connection;
#define CONN ((struct MHD_Connection *)&fake_connection)

/* ---- wrapped functions (-Wl,--wrap=NAME) ------------------------------------------ */

const char *__wrap_MHD_lookup_connection_value(struct MHD_Connection *conn,
                                               enum MHD_ValueKind kind, const char *key);
enum MHD_Result __wrap_MHD_queue_response(struct MHD_Connection *conn, unsigned int status,
                                          struct MHD_Response *resp);
void __wrap_MHD_resume_connection(struct MHD_Connection *conn);
struct MHD_Response *__wrap_MHD_create_response_from_buffer(size_t size, void *buffer,
                                                            enum MHD_ResponseMemoryMode mode);
struct MHD_Response *__real_MHD_create_response_from_buffer(size_t size, void *buffer,
                                                            enum MHD_ResponseMemoryMode mode);
int __wrap_hxs_engine_check(hxs_engine *engine, hxs_error *err);
const char *__wrap_hxs_engine_backend_name(const hxs_engine *engine);
void __wrap_hxs_engine_stats_get(hxs_engine *engine, hxs_engine_stats *ret);
const hxs_runtime_info *__wrap_hxs_engine_runtime_info(hxs_engine *engine);
void __wrap_conn_request_read(struct MHD_Connection *conn);
void __wrap_conn_request_done(struct MHD_Connection *conn);
void __wrap_log_call(const call *c, const hxs_result *res, const char *outcome_text,
                     const char *error_code);
void __real_log_call(const call *c, const hxs_result *res, const char *outcome_text,
                     const char *error_code);
enum MHD_Result __wrap_MHD_lookup_connection_value_n(struct MHD_Connection *conn,
                                                     enum MHD_ValueKind kind, const char *key,
                                                     size_t key_size, const char **value_ptr,
                                                     size_t *value_size_ptr);
int __wrap_MHD_get_connection_values(struct MHD_Connection *conn, enum MHD_ValueKind kind,
                                     MHD_KeyValueIterator iterator, void *iterator_cls);
const union MHD_ConnectionInfo *__wrap_MHD_get_connection_info(struct MHD_Connection *conn,
                                                               enum MHD_ConnectionInfoType info_type,
                                                               ...);

enum MHD_Result __wrap_MHD_lookup_connection_value_n(struct MHD_Connection *conn,
                                                     enum MHD_ValueKind kind, const char *key,
                                                     size_t key_size, const char **value_ptr,
                                                     size_t *value_size_ptr)
{
        CHECK(conn == CONN);
        for (size_t i = 0; kind == MHD_HEADER_KIND && i < fx.nh; i++)
                if (strlen(fx.h[i].name) == key_size && strncasecmp(fx.h[i].name, key, key_size) == 0) {
                        *value_ptr = fx.h[i].value;
                        if (value_size_ptr)
                                *value_size_ptr = strlen(fx.h[i].value);
                        return MHD_YES;
                }
        return MHD_NO;
}

int __wrap_MHD_get_connection_values(struct MHD_Connection *conn, enum MHD_ValueKind kind,
                                     MHD_KeyValueIterator iterator, void *iterator_cls)
{
        CHECK(conn == CONN);
        int n = 0;
        for (size_t i = 0; kind == MHD_HEADER_KIND && i < fx.nh; i++, n++)
                if (iterator && iterator(iterator_cls, kind, fx.h[i].name, fx.h[i].value) != MHD_YES)
                        break;
        return n;
}

/* No socket, no TLS session: the peer is the unix socket (see X-Fuzz-Identity). */
const union MHD_ConnectionInfo *__wrap_MHD_get_connection_info(struct MHD_Connection *conn,
                                                               enum MHD_ConnectionInfoType info_type,
                                                               ...)
{
        CHECK(conn == CONN);
        return NULL;
}

/* tls.c needs a handshake: this harness has no mTLS (tls_peer_id is never reached)
 * and no trust bundles (a forwarded certificate is refused). */
bool tls_mutual(const server *srv)
{
        return false;
}

bool tls_has_bundles(const server *srv)
{
        return false;
}

bool tls_has_bundle(const server *srv, const char *td)
{
        return false;
}

int tls_peer_id(server *srv, struct MHD_Connection *conn, char *ret, size_t cap, hxs_error *err)
{
        CHECK(false);
        return -EACCES;
}

int tls_verify_forwarded(server *srv, const xfcc_client *x, char *ret, size_t cap, hxs_error *err)
{
        CHECK(x->cert || x->chain);
        CHECK(x->cert == NULL || strlen(x->cert) == x->cert_len);
        CHECK(x->chain == NULL || strlen(x->chain) == x->chain_len);
        ret[0] = '\0';
        snprintf(err->message, sizeof(err->message), "no trust bundles are configured to verify it");
        return -EACCES;
}

/* conn.c needs real connections. */
void conn_linger(struct MHD_Connection *conn)
{
        CHECK(conn == CONN);
        fx.linger = true;
}

void conn_stats(const server *srv, uint32_t *ret_fresh, uint32_t *ret_established,
                uint32_t *ret_lingering)
{
        *ret_fresh = 1;
        *ret_established = 2;
        *ret_lingering = 0;
}

const char *__wrap_MHD_lookup_connection_value(struct MHD_Connection *conn,
                                               enum MHD_ValueKind kind, const char *key)
{
        CHECK(conn == CONN);
        if (kind != MHD_HEADER_KIND)
                return NULL;
        for (size_t i = 0; i < fx.nh; i++)
                if (strcasecmp(fx.h[i].name, key) == 0)
                        return fx.h[i].value;
        return NULL;
}

enum MHD_Result __wrap_MHD_queue_response(struct MHD_Connection *conn, unsigned int status,
                                          struct MHD_Response *resp)
{
        CHECK(conn == CONN);
        CHECK(resp != NULL);
        fx.queued++;
        fx.status = status;
        fx.queued_at = fx.calls;
        const char *conn_hdr = MHD_get_response_header(resp, MHD_HTTP_HEADER_CONNECTION);
        fx.close_header = conn_hdr && strcasecmp(conn_hdr, "close") == 0;
        return MHD_YES;
}

void __wrap_MHD_resume_connection(struct MHD_Connection *conn)
{
        CHECK(conn == CONN);
}

struct MHD_Response *__wrap_MHD_create_response_from_buffer(size_t size, void *buffer,
                                                            enum MHD_ResponseMemoryMode mode)
{
        free(fx.reply);
        fx.reply = malloc(size + 1);
        CHECK(fx.reply != NULL);
        memcpy(fx.reply, buffer, size);
        fx.reply[size] = '\0';
        fx.reply_len = size;
        return __real_MHD_create_response_from_buffer(size, buffer, mode);
}

int __wrap_hxs_engine_check(hxs_engine *engine, hxs_error *err)
{
        if (!fx.unhealthy)
                return 0;
        err->kind = HXS_ERR_UNSUPPORTED;
        snprintf(err->message, sizeof(err->message), "cgroup \xff\xfe not writable");
        return -EACCES;
}

const char *__wrap_hxs_engine_backend_name(const hxs_engine *engine)
{
        return "namespaces";
}

/* The request-read deadline needs a real connection; here it only checks the handle. */
void __wrap_conn_request_read(struct MHD_Connection *conn)
{
        CHECK(conn == CONN);
}

void __wrap_conn_request_done(struct MHD_Connection *conn)
{
        CHECK(conn == CONN);
}

/* Warm templates: half ready, with a reason that needs escaping in JSON. */
void __wrap_hxs_engine_stats_get(hxs_engine *engine, hxs_engine_stats *ret)
{
        *ret = (hxs_engine_stats){ .warm_enabled = !fx.unhealthy, .templates_ready = 1,
                                   .templates_total = 2, .template_restarts = 3 };
        snprintf(ret->warm_error, sizeof(ret->warm_error), "template \"sci\" \xff exited");
}

/* Runtimes: one package per language, one absent, versions that need escaping. */
const hxs_runtime_info *__wrap_hxs_engine_runtime_info(hxs_engine *engine)
{
        static hxs_runtime_info ri = {
                .pkgs = { { .language = HXS_LANG_PYTHON, .interpreter = true, .debian = "python3",
                            .debian_version = "3.11.2-1\xff" },
                          { .language = HXS_LANG_PYTHON, .debian = "python3-x", .distribution = "x",
                            .import_name = "x", .version = "1.0\"" },
                          { .language = HXS_LANG_JAVASCRIPT, .interpreter = true, .debian = "nodejs" },
                          { .language = HXS_LANG_MAX, .debian = "tzdata", .debian_version = "2024a" } },
                .n = 4,
                .version = { "3.11.2", "", "5\xfe" },
                .interpreter = { "/usr/bin/python3", "/usr/bin/node", "/usr/bin/bash" },
                .source = "root \xff",
        };
        return &ri;
}

void __wrap_log_call(const call *c, const hxs_result *res, const char *outcome_text,
                     const char *error_code)
{
        char *line = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&line, &len), *saved = stderr;
        CHECK(mem != NULL);
        stderr = mem;
        __real_log_call(c, res, outcome_text, error_code);
        stderr = saved;
        CHECK(fclose(mem) == 0);

        CHECK(len > 0 && line[len - 1] == '\n' && memchr(line, '\n', len) == line + len - 1);
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        if (!o)
                fprintf(stderr, "log line is not JSON (%s): %s", jerr.text, line);
        CHECK(json_is_object(o));
        CHECK(strcmp(json_string_value(json_object_get(o, "event")), "exec") == 0);
        CHECK(strcmp(json_string_value(json_object_get(o, "id")), c->id) == 0);
        json_t *caller = json_object_get(o, "caller");
        if (c->caller[0])
                CHECK(caller && strcmp(json_string_value(caller), c->caller) == 0);
        else
                CHECK(caller == NULL);
        json_decref(o);
        free(line);
        fx.logs++;
}

/* ---- the rest of the service, stubbed ------------------------------------------- */

uint64_t now_ms(void)
{
        static uint64_t t = 1000000;
        return t += 7;
}

int loop_add(loop *l, watch *w, int fd, uint32_t events, watch_ready_fn ready)
{
        w->fd = fd;
        w->ready = ready;
        return 0;
}

void loop_del(loop *l, watch *w)
{
        w->fd = -1;
}

void loop_hook_add(loop *l, loop_hook *h)
{
}

static void reply_result(call *c)
{
        hxs_result res = { 0 };
        res.stdout_data = strdup("hello \xff\n");
        res.stdout_len = strlen(res.stdout_data);
        res.exit_code = 0;
        json_t *o = result_to_json(&res, c->id);
        CHECK(o != NULL);
        free(c->reply);
        c->reply = json_dumps(o, JSON_COMPACT);
        CHECK(c->reply != NULL);
        c->reply_len = strlen(c->reply);
        c->status = 200;
        json_decref(o);
        hxs_result_clear(&res);
}

void admission_submit(call *c)
{
        hxs_error err = { 0 };

        CHECK(c->parsed && c->req != NULL && c->is_exec);
        CHECK(hxs_request_validate(c->req, &c->srv->cfg, &err) == 0);
        CHECK(c->timeout_s >= 1 && c->timeout_s <= c->srv->cfg.max_timeout_s);
        CHECK(c->memory_mb >= 16 && c->memory_mb <= c->srv->cfg.max_memory_mb);
        switch (fx.admit) {
        case 1:
                call_set_error(c, 429, "overloaded", "no execution slot is free; retry later");
                c->retry_after_s = 1;
                c->state = CALL_REPLY;
                break;
        case 2:
        case 3:
                c->suspended = true;
                c->state = CALL_RUNNING;
                fx.pending = c;
                break;
        default:
                reply_result(c);
                c->state = CALL_REPLY;
                break;
        }
}

void admission_hangup(watch *w, uint32_t events)
{
        /* streams never start here: admission is stubbed */
}

void admission_cancel(call *c, const char *why)
{
        /* nothing runs here (admission is stubbed): nothing to cancel */
}

void admission_forget(call *c)
{
        c->state = CALL_DONE;
}

bool admission_draining(const server *s)
{
        return fx.draining;
}

unsigned admission_retry_after(const server *s)
{
        return 1;
}

void admission_load_get(const server *s, admission_load *ret)
{
        *ret = (admission_load){ 0 }; /* admission is stubbed: nothing runs or waits */
}

/* Sessions are stubbed too: their routes answer 404 here (tests/integration covers them). */
int session_call_headers(call *c, const char *method, const char *url, uint64_t length)
{
        call_set_error(c, 404, "not_found", "sessions are stubbed");
        return -1;
}

void session_call_complete(call *c)
{
        c->state = CALL_REPLY;
}

/* The MCP session tools are stubbed as the sessions are: answered at once. */
void mcp_sessions_route(call *c)
{
        size_t n = 0;
        free(c->reply);
        c->reply = mcp_run_error(c->mcp, "sessions are stubbed", &n);
        CHECK(c->reply != NULL);
        c->reply_len = n;
        c->status = 200;
        c->state = CALL_REPLY;
}

void mcp_sessions_cancel_call(call *c)
{
        /* nothing waits here */
}

void session_call_forget(call *c)
{
}

void sessions_health(server *s, uint32_t *ret_live, uint64_t *ret_cells)
{
        *ret_live = 0;
        *ret_cells = 0;
}

void sessions_metrics(server *s, FILE *f)
{
}

/* ---- the harness ------------------------------------------------------------------ */

static const char *header(const char *name)
{
        return __wrap_MHD_lookup_connection_value(CONN, MHD_HEADER_KIND, name);
}

/* The most body this request may send: MAX_BODY_BYTES, or with files that and them. */
static uint64_t body_max_of(const hxs_config *cfg)
{
        return upload_is_multipart(header("Content-Type")) ? upload_body_max(cfg) : cfg->max_body_bytes;
}

static bool is_json_content_type(const char *ct)
{
        if (!ct)
                return false;
        ct += strspn(ct, " \t");
        if (strncasecmp(ct, "application/json", 16) != 0)
                return false;
        ct += 16;
        ct += strspn(ct, " \t");
        return *ct == '\0' || *ct == ';';
}

static unsigned count_headers(const char *name)
{
        unsigned n = 0;
        for (size_t i = 0; i < fx.nh; i++)
                n += strcasecmp(fx.h[i].name, name) == 0;
        return n;
}

/* Could the body's length be read two ways (see http.c)? */
static bool bad_framing(void)
{
        const char *te = header("Transfer-Encoding");
        unsigned n_cl = count_headers("Content-Length"), n_te = count_headers("Transfer-Encoding");
        return n_cl > 1 || n_te > 1 || (n_te && strcasecmp(te, "chunked") != 0) || (n_te && n_cl);
}

/* Who the request is from, and whether it was let in. */
static void check_caller(const call *c, const server *s, bool left)
{
        CHECK(memchr(c->caller, '\0', sizeof(c->caller)) != NULL);
        if (bad_framing()) {
                CHECK(fx.queued == 1 && fx.status == 400 && fx.queued_at == 0 && fx.close_header);
                return;
        }
        if (!s->auth.identity_on) {
                CHECK(c->caller[0] == '\0'); /* the header is ignored */
                CHECK(fx.status != 403);
                return;
        }
        if (c->route == ROUTE_HEALTH) {
                CHECK(fx.status != 403);
                return;
        }
        const char *x = header("X-Forwarded-Client-Cert");
        char id[SPIFFE_ID_MAX + 1] = "";
        xfcc_client xc;
        bool parsed = x && count_headers("X-Forwarded-Client-Cert") == 1 &&
                      xfcc_parse(x, strlen(x), &xc, NULL) == 0;
        bool ok = parsed && xc.id[0] && !xc.cert && !xc.chain && allowlist_match(&s->auth.allow, xc.id);
        if (parsed) {
                memcpy(id, xc.id, sizeof(id));
                xfcc_client_free(&xc);
        }
        if (!ok) {
                /* refused, and told so: never a close without the 403 */
                if (left)
                        CHECK(fx.queued <= 1 && (!fx.queued || fx.status == 403));
                else
                        CHECK(fx.queued == 1 && fx.status == 403);
                return;
        }
        CHECK(fx.status != 403);
        CHECK(strcmp(c->caller, id) == 0);
        CHECK(spiffe_id_check(c->caller, strlen(c->caller), NULL) == 0);
        CHECK(strncmp(c->caller, "spiffe://", 9) == 0);
        for (const char *p = c->caller; *p; p++)
                CHECK((unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f && *p != '"' && *p != '\\');
}

static void check_reply(route rt, bool closed)
{
        static const unsigned known[] = { 200, 202, 400, 403, 404, 405, 413, 415, 422, 429, 500, 503 };

        CHECK(fx.queued <= 1);
        if (!closed)
                CHECK(fx.queued == 1);
        if (!fx.queued)
                return;
        bool ok = false;
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
                ok |= fx.status == known[i];
        if (!ok)
                fprintf(stderr, "unexpected status %u\n", fx.status);
        CHECK(ok);
        CHECK(fx.reply != NULL);
        if (rt == ROUTE_METRICS && fx.status == 200) {
                CHECK(strlen(fx.reply) == fx.reply_len);
                return;
        }
        if (rt == ROUTE_MCP && fx.status == 202) {
                CHECK(fx.reply_len == 0); /* a notification or response: accepted, no body */
                return;
        }
        json_error_t jerr;
        json_t *o = json_loadb(fx.reply, fx.reply_len, JSON_ALLOW_NUL, &jerr);
        if (!o)
                fprintf(stderr, "reply is not JSON (%s): %.*s\n", jerr.text, (int)fx.reply_len,
                        fx.reply);
        CHECK(json_is_object(o));
        if (rt == ROUTE_MCP && json_object_get(o, "jsonrpc")) {
                /* a JSON-RPC message: a response, or an error (400: no message could be read) */
                CHECK(json_is_object(json_object_get(o, "result")) || json_is_object(json_object_get(o, "error")));
                CHECK(fx.status == 200 || fx.status == 400);
        } else if (fx.status != 200 && !(rt == ROUTE_HEALTH && fx.status == 503)) {
                json_t *e = json_object_get(o, "error");
                CHECK(json_is_object(e));
                CHECK(json_is_string(json_object_get(e, "code")));
                CHECK(json_is_string(json_object_get(e, "message")));
        }
        json_decref(o);
}

static void reset(void)
{
        for (size_t i = 0; i < fx.nh; i++) {
                free(fx.h[i].name);
                free(fx.h[i].value);
        }
        free(fx.reply);
        memset(&fx, 0, sizeof(fx));
}

static char *copy(const char *s, size_t n)
{
        char *p = malloc(n + 1);
        CHECK(p != NULL);
        memcpy(p, s, n);
        p[n] = '\0';
        return p;
}

static server srv;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *in = (const char *)data, *end = in + size;
        char method[32] = "POST", *url;

        reset();
        memset(&srv, 0, sizeof(srv));
        hxs_config_defaults(&srv.cfg);
        srv.cfg.max_concurrent = 2;
        snprintf(srv.cfg.state_dir, sizeof(srv.cfg.state_dir), "/tmp"); /* multipart's staged files */
        srv.listen.fd = srv.sigfd = -1;
        TAILQ_INIT(&srv.mcp_calls);

        /* Request line. */
        const char *nl = memchr(in, '\n', size);
        const char *line_end = nl ? nl : end;
        const char *sp = memchr(in, ' ', (size_t)(line_end - in));
        if (sp) {
                size_t ml = (size_t)(sp - in);
                snprintf(method, sizeof(method), "%.*s", (int)ml, in);
                url = copy(sp + 1, (size_t)(line_end - sp - 1));
        } else {
                if (line_end > in)
                        snprintf(method, sizeof(method), "%.*s", (int)(line_end - in), in);
                url = copy("/api/v1/exec", 12);
        }
        /* C strings, as MHD hands them over. */
        method[strcspn(method, "\r")] = '\0';
        url[strcspn(url, "\r")] = '\0';
        const char *p = nl ? nl + 1 : end;

        /* Headers until an empty line. */
        size_t chunk = 0;
        while (p < end) {
                nl = memchr(p, '\n', (size_t)(end - p));
                line_end = nl ? nl : end;
                size_t ll = (size_t)(line_end - p);
                if (ll && p[ll - 1] == '\r')
                        ll--;
                if (ll == 0) {
                        p = nl ? nl + 1 : end;
                        break;
                }
                const char *colon = memchr(p, ':', ll);
                if (colon && fx.nh < MAX_HEADERS) {
                        const char *v = colon + 1;
                        while (v < p + ll && (*v == ' ' || *v == '\t'))
                                v++;
                        char *name = copy(p, (size_t)(colon - p));
                        char *value = copy(v, (size_t)(p + ll - v));
                        /* MHD never hands over a NUL inside a header. */
                        fx.h[fx.nh].name = name;
                        fx.h[fx.nh].value = value;
                        fx.nh++;
                        if (strcasecmp(name, "X-Fuzz-Chunk") == 0)
                                chunk = strtoul(value, NULL, 10);
                        else if (strcasecmp(name, "X-Fuzz-Max-Body") == 0)
                                (void)hxs_config_set(&srv.cfg, "MAX_BODY_BYTES", value, NULL);
                        else if (strcasecmp(name, "X-Fuzz-Draining") == 0)
                                fx.draining = true;
                        else if (strcasecmp(name, "X-Fuzz-Unhealthy") == 0)
                                fx.unhealthy = true;
                        else if (strcasecmp(name, "X-Fuzz-Admit") == 0)
                                fx.admit = atoi(value) & 3;
                        else if (strcasecmp(name, "X-Fuzz-Identity") == 0)
                                srv.auth.identity_on = true;
                }
                p = nl ? nl + 1 : end;
        }
        const char *body = p;
        size_t body_len = (size_t)(end - p);
        /* What MHD hands over (see the header comment). */
        bool left = false;
        const char *cl = header("Content-Length");
        if (header("Transfer-Encoding")) {
                /* chunked (or refused): the body as it comes */
        } else if (cl) {
                char *e = NULL;
                errno = 0;
                unsigned long long n = strtoull(cl, &e, 10);
                if (!cl[0] || *e || errno || cl[strspn(cl, "0123456789")] || !strspn(cl, "0123456789")) {
                        free(url);
                        reset();
                        return 0; /* MHD answers such a request itself */
                }
                if (n < body_len)
                        body_len = (size_t)n;
                else if (n > body_len)
                        left = true; /* the client stops short and goes */
        } else {
                body_len = 0;
        }
        if (chunk == 0 || chunk > body_len)
                chunk = body_len ? body_len : 1;

        if (srv.auth.identity_on) {
                static allowlist allow;
                static bool parsed;
                hxs_error err = { 0 };
                if (!parsed) {
                        CHECK(allowlist_parse(FUZZ_ALLOW, "AUTH_ALLOW", &allow, &err) == 0);
                        parsed = true;
                }
                srv.auth.allow = allow;
                srv.auth.proxies.unix_peers = true;
                snprintf(srv.listen.unix_path, sizeof(srv.listen.unix_path), "/fuzz.sock");
        }

        /* The headers call. */
        void *req_cls = NULL;
        size_t zero = 0;
        bool closed = false;
        enum MHD_Result r = http_handler(&srv, CONN, url, method, "HTTP/1.1", NULL, &zero,
                                         &req_cls);
        fx.calls++;
        call *c = req_cls;
        CHECK(c != NULL);
        route rt = c->route;
        bool is_exec = c->is_exec;
        if (r == MHD_NO)
                closed = true;

        /* The body, in chunks, until a response is queued or the connection closes. */
        for (size_t off = 0; !closed && !fx.queued && off < body_len; off += chunk) {
                size_t n = body_len - off < chunk ? body_len - off : chunk;
                char *piece = copy(body + off, n);
                size_t unread = n;
                r = http_handler(&srv, CONN, url, method, "HTTP/1.1", piece, &unread, &req_cls);
                fx.calls++;
                free(piece);
                CHECK(unread == 0);
                CHECK(req_cls == c);
                if (r == MHD_NO)
                        closed = true;
        }
        /* The final call (unless the client left), and the resume of a suspended request. */
        if (!closed && !fx.queued && !left) {
                zero = 0;
                r = http_handler(&srv, CONN, url, method, "HTTP/1.1", NULL, &zero, &req_cls);
                fx.calls++;
                if (r == MHD_NO)
                        closed = true;
        }
        if (!closed && fx.pending) {
                CHECK(fx.pending == c && c->suspended && !fx.queued);
                if (fx.admit == 3) {
                        c->state = CALL_GONE;
                        c->logged = true;
                        call_resume(c);
                } else {
                        reply_result(c);
                        c->state = CALL_REPLY;
                        call_resume(c);
                }
                CHECK(!c->suspended);
                zero = 0;
                r = http_handler(&srv, CONN, url, method, "HTTP/1.1", NULL, &zero, &req_cls);
                if (r == MHD_NO)
                        closed = true;
        }
        if (!closed && !(left && !fx.queued))
                CHECK(c->state == CALL_DONE);

        /* 415 exactly when an execution request that got that far is not JSON. */
        bool framing = bad_framing();
        if (is_exec && fx.queued && !fx.draining && fx.status != 403 && !framing) {
                bool small = !cl || strtoull(cl, NULL, 10) <= body_max_of(&srv.cfg);
                const char *ct = header("Content-Type");
                if (small)
                        CHECK((fx.status == 415) == !(is_json_content_type(ct) || upload_is_multipart(ct)));
        }
        /* A body the service does not read is never met with a bare close: a refusal of a
         * body above MAX_BODY_BYTES goes out from the headers, and whenever the reply
         * leaves a body unread, or the service closes, the connection lingers. */
        uint64_t length = cl ? strtoull(cl, NULL, 10) : 0;
        bool has_body = header("Transfer-Encoding") || length > 0;
        if (fx.queued && fx.status != 200 && length > body_max_of(&srv.cfg))
                CHECK(fx.queued_at == 0);
        if (fx.queued && fx.queued_at == 0 && has_body)
                CHECK(fx.linger && fx.close_header);
        if (closed && !fx.queued)
                CHECK(fx.linger);
        check_caller(c, &srv, left);
        check_reply(rt, closed || (left && !fx.queued));

        http_completed(&srv, CONN, &req_cls,
                       closed ? MHD_REQUEST_TERMINATED_WITH_ERROR :
                       left && !fx.queued ? MHD_REQUEST_TERMINATED_CLIENT_ABORT :
                                            MHD_REQUEST_TERMINATED_COMPLETED_OK);
        CHECK(req_cls == NULL);
        CHECK(fx.logs == (is_exec && !(fx.admit == 3 && fx.pending) ? 1 : 0));
        (void)r;
        CHECK(srv.n_held == 0);
        CHECK(srv.upload_staged == 0); /* every way a request ends gives its staged bytes back */

        free(url);
        reset();
        return 0;
}
