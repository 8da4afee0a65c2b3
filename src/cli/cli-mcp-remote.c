/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hexr-sandbox mcp --url URL`: the MCP server over stdio that forwards every message to
 * a service's /mcp instead of running sandboxes itself. A small HTTP/1.1 client: one
 * connection per message (Connection: close), over TCP (http://), TLS (https://, with
 * the SDKs' options: a CA bundle, a client certificate and key for mTLS) or a unix socket
 * (unix:/path). The answer is relayed to stdout as it comes: a JSON body as one line,
 * an event stream (progress, then the response) event by event; 202 relays nothing;
 * an HTTP refusal (403, 429, 5xx) becomes a JSON-RPC error for the request's id. The
 * service's Mcp-Session-Id from initialize goes with every later message, so a
 * notifications/cancelled reaches the call it names. Connecting and the TLS handshake
 * block (for at most CONNECT_TIMEOUT_S); reading is done from the poll loop, so calls
 * run at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <jansson.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli-mcp.h"
#include "core/macro.h"

#define CONNECT_TIMEOUT_S 10
/* An answer's head (status line and headers) and a body: bounded like the service's. */
#define HEAD_MAX (64u << 10)
#define BODY_MAX ((size_t)256 << 20)

struct mcp_remote {
        bool tls, unix_socket;
        char host[256], port[8], base[512]; /* base: the URL's path, "" or "/prefix" */
        char unix_path[108];
        gnutls_certificate_credentials_t cred;
        char session_id[128];           /* the service's Mcp-Session-Id, "" until initialize */
};

typedef struct mcp_fwd {
        int fd;
        gnutls_session_t tls;
        char *id;                       /* the message's id as JSON, NULL for a notification */
        bool is_initialize;
        bool cancelled;                 /* the client cancelled it: its end is not answered */
        char *in;                       /* the answer as received */
        size_t in_len, in_cap;
        size_t head_len;                /* bytes of the head, once complete (0: not yet) */
        unsigned status;
        bool chunked, events;
        size_t chunk_left;              /* chunked: bytes of the current chunk still to come */
        size_t body_off;                /* chunked: where the undecoded part begins in in */
        char *body;                     /* decoded body */
        size_t body_len, body_cap, relayed; /* events: what of body was relayed */
        struct mcp_fwd *next;
} mcp_fwd;

/* ---- the address -------------------------------------------------------------------- */

static int parse_url(mcp_remote *rm, const char *url, char *why, size_t why_size)
{
        const char *rest;
        if (strncmp(url, "unix:", 5) == 0) {
                const char *p = url + 5;
                if (strncmp(p, "//", 2) == 0)
                        p += 2;
                if (p[0] != '/' || strlen(p) >= sizeof(rm->unix_path)) {
                        snprintf(why, why_size, "--url: \"%s\": unix: needs an absolute socket path", url);
                        return -EINVAL;
                }
                rm->unix_socket = true;
                snprintf(rm->unix_path, sizeof(rm->unix_path), "%s", p);
                snprintf(rm->host, sizeof(rm->host), "localhost");
                return 0;
        }
        if (strncmp(url, "http://", 7) == 0)
                rest = url + 7;
        else if (strncmp(url, "https://", 8) == 0) {
                rest = url + 8;
                rm->tls = true;
        } else {
                snprintf(why, why_size, "--url: \"%s\" is not http://host:port, https://host:port or unix:/path", url);
                return -EINVAL;
        }
        size_t hl = strcspn(rest, "/");
        const char *path = rest + hl;
        char hostport[300];
        if (hl == 0 || hl >= sizeof(hostport)) {
                snprintf(why, why_size, "--url: \"%s\" names no host", url);
                return -EINVAL;
        }
        memcpy(hostport, rest, hl);
        hostport[hl] = '\0';
        char *colon = hostport[0] == '[' ? strstr(hostport, "]:") : strrchr(hostport, ':');
        if (colon && hostport[0] == '[')
                colon++;
        snprintf(rm->port, sizeof(rm->port), "%s", colon ? colon + 1 : rm->tls ? "443" : "80");
        if (colon)
                *colon = '\0';
        char *h = hostport;
        if (h[0] == '[') {
                h++;
                h[strcspn(h, "]")] = '\0';
        }
        snprintf(rm->host, sizeof(rm->host), "%s", h);
        snprintf(rm->base, sizeof(rm->base), "%s", path);
        size_t bl = strlen(rm->base);
        while (bl && rm->base[bl - 1] == '/')
                rm->base[--bl] = '\0';
        /* the service's address, or its /mcp itself */
        if (bl >= 4 && strcmp(rm->base + bl - 4, "/mcp") == 0)
                rm->base[bl - 4] = '\0';
        return 0;
}

int mcp_remote_open(mcp_stdio *m, const char *url, const char *ca, const char *cert, const char *key, char *why,
                    size_t why_size)
{
        mcp_remote *rm = calloc(1, sizeof(*rm));
        int r;
        if (!rm)
                return -ENOMEM;
        if ((r = parse_url(rm, url, why, why_size)) < 0) {
                free(rm);
                return r;
        }
        if (rm->tls) {
                r = gnutls_certificate_allocate_credentials(&rm->cred);
                if (r >= 0)
                        r = ca ? gnutls_certificate_set_x509_trust_file(rm->cred, ca, GNUTLS_X509_FMT_PEM) :
                                 gnutls_certificate_set_x509_system_trust(rm->cred);
                if (r < 0)
                        snprintf(why, why_size, "CA bundle %s: %s", ca ? ca : "(the system's)", gnutls_strerror(r));
                else if ((cert != NULL) != (key != NULL)) {
                        snprintf(why, why_size, "a client certificate needs its key, and a key its certificate");
                        r = -EINVAL;
                } else if (cert && (r = gnutls_certificate_set_x509_key_file(rm->cred, cert, key, GNUTLS_X509_FMT_PEM)) < 0)
                        snprintf(why, why_size, "client certificate %s, key %s: %s", cert, key, gnutls_strerror(r));
                if (r < 0) {
                        if (rm->cred)
                                gnutls_certificate_free_credentials(rm->cred);
                        free(rm);
                        return -EINVAL;
                }
        }
        m->remote = rm;
        return 0;
}

/* ---- one exchange ------------------------------------------------------------------- */

static int connect_socket(const mcp_remote *rm, char *why, size_t why_size)
{
        struct timeval tv = { .tv_sec = CONNECT_TIMEOUT_S };
        if (rm->unix_socket) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", rm->unix_path);
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                        snprintf(why, why_size, "connecting to unix:%s: %s", rm->unix_path, strerror(errno));
                        if (fd >= 0)
                                close(fd);
                        return -ECONNREFUSED;
                }
                return fd;
        }
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *a;
        int g = getaddrinfo(rm->host, rm->port, &hints, &res);
        if (g != 0) {
                snprintf(why, why_size, "resolving %s: %s", rm->host, gai_strerror(g));
                return -EHOSTUNREACH;
        }
        int fd = -1, err = 0;
        for (a = res; a; a = a->ai_next) {
                fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
                if (fd < 0)
                        continue;
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
                        break;
                err = errno;
                close(fd);
                fd = -1;
        }
        freeaddrinfo(res);
        if (fd < 0)
                snprintf(why, why_size, "connecting to %s:%s: %s", rm->host, rm->port, strerror(err ? err : EHOSTUNREACH));
        return fd < 0 ? -ECONNREFUSED : fd;
}

static int tls_start(const mcp_remote *rm, mcp_fwd *f, char *why, size_t why_size)
{
        int r = gnutls_init(&f->tls, GNUTLS_CLIENT);
        if (r >= 0)
                r = gnutls_set_default_priority(f->tls);
        if (r >= 0)
                r = gnutls_credentials_set(f->tls, GNUTLS_CRD_CERTIFICATE, rm->cred);
        /* SNI names hosts, not addresses (RFC 6066) */
        unsigned char addr[16];
        if (r >= 0 && inet_pton(AF_INET, rm->host, addr) != 1 && inet_pton(AF_INET6, rm->host, addr) != 1)
                r = gnutls_server_name_set(f->tls, GNUTLS_NAME_DNS, rm->host, strlen(rm->host));
        if (r >= 0) {
                gnutls_session_set_verify_cert(f->tls, rm->host, 0);
                gnutls_transport_set_int(f->tls, f->fd);
                gnutls_handshake_set_timeout(f->tls, CONNECT_TIMEOUT_S * 1000);
                do
                        r = gnutls_handshake(f->tls);
                while (r < 0 && !gnutls_error_is_fatal(r));
        }
        if (r < 0)
                snprintf(why, why_size, "TLS with %s:%s: %s", rm->host, rm->port, gnutls_strerror(r));
        return r < 0 ? -EPROTO : 0;
}

static int send_all(mcp_fwd *f, const char *p, size_t n)
{
        while (n) {
                ssize_t w = f->tls ? gnutls_record_send(f->tls, p, n) : write(f->fd, p, n);
                if (w < 0 && (errno == EINTR || (f->tls && (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED))))
                        continue;
                if (w <= 0)
                        return -EIO;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

static void fwd_free(mcp_fwd *f)
{
        if (f->tls) {
                gnutls_deinit(f->tls);
        }
        if (f->fd >= 0)
                close(f->fd);
        free(f->id);
        free(f->in);
        free(f->body);
        free(f);
}

/* A JSON-RPC error for the forwarded request (a notification gets none). */
static void relay_error(mcp_stdio *m, const mcp_fwd *f, const char *message)
{
        mcp_note("%s", message);
        if (!f->id)
                return;
        size_t n = 0;
        char *text = mcp_error_text(f->id, MCP_INTERNAL_ERROR, message, &n);
        mcp_send(m, text, &n);
}

/* One JSON-RPC message from the service: to stdout as one line. */
static void relay_message(mcp_stdio *m, const char *data, size_t len)
{
        json_t *v = json_loadb(data, len, 0, NULL);
        char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
        size_t n = text ? strlen(text) : 0;
        json_decref(v);
        if (text)
                mcp_send(m, text, &n);
}

void mcp_remote_forward(mcp_stdio *m, const char *msg, size_t len)
{
        mcp_remote *rm = m->remote;
        char why[400], head[1200];
        mcp_fwd *f = calloc(1, sizeof(*f));
        if (!f) {
                mcp_note("out of memory");
                return;
        }
        f->fd = -1;
        /* the id and method, for an error of our own and the session id */
        json_t *j = json_loadb(msg, len, 0, NULL);
        json_t *id = json_object_get(j, "id");
        if (json_is_string(id) || json_is_integer(id))
                f->id = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
        const char *method = json_string_value(json_object_get(j, "method"));
        f->is_initialize = method && strcmp(method, "initialize") == 0;
        if (method && strcmp(method, "notifications/cancelled") == 0) {
                /* the service ends the call; its cut-off answer is not an error to relay */
                char *rid = json_dumps(json_object_get(json_object_get(j, "params"), "requestId"),
                                       JSON_COMPACT | JSON_ENCODE_ANY);
                for (mcp_fwd *o = m->fwds; rid && o; o = o->next)
                        if (o->id && strcmp(o->id, rid) == 0)
                                o->cancelled = true;
                free(rid);
        }
        json_decref(j);

        f->fd = connect_socket(rm, why, sizeof(why));
        if (f->fd < 0 || (rm->tls && tls_start(rm, f, why, sizeof(why)) < 0)) {
                relay_error(m, f, why);
                fwd_free(f);
                return;
        }
        int hn = snprintf(head, sizeof(head),
                          "POST %s/mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                          "Accept: application/json, text/event-stream\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n%s%s%s\r\n",
                          rm->base, rm->host, len, rm->session_id[0] ? "Mcp-Session-Id: " : "", rm->session_id,
                          rm->session_id[0] ? "\r\n" : "");
        if (send_all(f, head, (size_t)hn) < 0 || send_all(f, msg, len) < 0) {
                snprintf(why, sizeof(why), "sending to %s: the connection broke", rm->host);
                relay_error(m, f, why);
                fwd_free(f);
                return;
        }
        int fl = fcntl(f->fd, F_GETFL);
        fcntl(f->fd, F_SETFL, fl | O_NONBLOCK);
        f->next = m->fwds;
        m->fwds = f;
}

/* ---- the answer --------------------------------------------------------------------- */

static const char *header_value(const mcp_fwd *f, const char *name, size_t *ret_len)
{
        size_t nl = strlen(name);
        for (const char *p = memchr(f->in, '\n', f->head_len); p && p < f->in + f->head_len; p = memchr(p, '\n', (size_t)(f->in + f->head_len - p))) {
                p++;
                if ((size_t)(f->in + f->head_len - p) > nl + 1 && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
                        const char *v = p + nl + 1;
                        v += strspn(v, " \t");
                        *ret_len = strcspn(v, "\r\n");
                        return v;
                }
        }
        return NULL;
}

static int parse_head(mcp_stdio *m, mcp_fwd *f)
{
        char *end = memmem(f->in, f->in_len, "\r\n\r\n", 4);
        if (!end)
                return f->in_len > HEAD_MAX ? -EPROTO : 0;
        f->head_len = (size_t)(end - f->in) + 4;
        if (sscanf(f->in, "HTTP/1.%*d %u", &f->status) != 1)
                return -EPROTO;
        size_t n;
        const char *v = header_value(f, "Transfer-Encoding", &n);
        f->chunked = v && n >= 7 && strncasecmp(v, "chunked", 7) == 0;
        v = header_value(f, "Content-Type", &n);
        f->events = v && n >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
        v = header_value(f, "Mcp-Session-Id", &n);
        if (v && f->is_initialize && n < sizeof(m->remote->session_id)) {
                memcpy(m->remote->session_id, v, n);
                m->remote->session_id[n] = '\0';
        }
        f->body_off = f->head_len;
        return 0;
}

static int body_add(mcp_fwd *f, const char *p, size_t n)
{
        if (f->body_len + n + 1 > f->body_cap) {
                size_t cap = f->body_cap ? f->body_cap : 16384;
                while (cap < f->body_len + n + 1)
                        cap *= 2;
                if (cap > BODY_MAX)
                        return -E2BIG;
                char *b = realloc(f->body, cap);
                if (!b)
                        return -ENOMEM;
                f->body = b;
                f->body_cap = cap;
        }
        memcpy(f->body + f->body_len, p, n);
        f->body_len += n;
        f->body[f->body_len] = '\0';
        return 0;
}

/* What of in past the head is body: as is, or de-chunked. */
static int decode_body(mcp_fwd *f)
{
        int r = 0;
        while (r == 0 && f->body_off < f->in_len) {
                const char *p = f->in + f->body_off;
                size_t avail = f->in_len - f->body_off;
                if (!f->chunked) {
                        r = body_add(f, p, avail);
                        f->body_off += avail;
                } else if (f->chunk_left) {
                        size_t take = avail < f->chunk_left ? avail : f->chunk_left;
                        r = body_add(f, p, take);
                        f->body_off += take;
                        f->chunk_left -= take;
                } else {
                        /* [CRLF] size[;ext] CRLF */
                        const char *s = p;
                        if (avail >= 2 && s[0] == '\r' && s[1] == '\n')
                                s += 2;
                        const char *eol = memmem(s, (size_t)(f->in + f->in_len - s), "\r\n", 2);
                        if (!eol)
                                break;
                        unsigned long size = strtoul(s, NULL, 16);
                        f->body_off = (size_t)(eol + 2 - f->in);
                        if (size == 0) {
                                f->body_off = f->in_len; /* the end (trailers ignored) */
                                break;
                        }
                        f->chunk_left = size;
                }
        }
        return r;
}

/* Each complete event's data: one JSON-RPC message. */
static void relay_events(mcp_stdio *m, mcp_fwd *f)
{
        for (;;) {
                char *start = f->body + f->relayed;
                char *end = strstr(start, "\n\n");
                if (!end)
                        return;
                *end = '\0';
                /* data: lines, joined (ours are one each); comments and event names skipped */
                for (char *line = start; line && *line;) {
                        char *nl = strchr(line, '\n');
                        if (nl)
                                *nl = '\0';
                        if (strncmp(line, "data:", 5) == 0) {
                                char *d = line + 5 + (line[5] == ' ');
                                relay_message(m, d, strlen(d));
                        }
                        line = nl ? nl + 1 : NULL;
                }
                f->relayed = (size_t)(end + 2 - f->body);
        }
}

/* The connection ended: what is left of the answer goes out. */
static void finish(mcp_stdio *m, mcp_fwd *f)
{
        char why[600];
        if (f->cancelled)
                return;
        if (!f->head_len) {
                snprintf(why, sizeof(why), "the service closed the connection without an answer");
                return relay_error(m, f, why);
        }
        if (f->events)
                return relay_events(m, f);
        if (f->status == 202)
                return;
        json_t *v = f->body ? json_loads(f->body, 0, NULL) : NULL;
        bool rpc = json_is_object(v) && json_object_get(v, "jsonrpc");
        if (rpc) {
                json_decref(v);
                return relay_message(m, f->body, f->body_len);
        }
        const char *msg = json_string_value(json_object_get(json_object_get(v, "error"), "message"));
        snprintf(why, sizeof(why), "the service answered HTTP %u: %s", f->status, msg ? msg : "(no message)");
        json_decref(v);
        relay_error(m, f, why);
}

static void unlink_fwd(mcp_stdio *m, mcp_fwd *f)
{
        for (mcp_fwd **p = &m->fwds; *p; p = &(*p)->next)
                if (*p == f) {
                        *p = f->next;
                        return;
                }
}

void mcp_remote_process(mcp_stdio *m, mcp_fwd *f)
{
        char buf[65536];
        for (;;) {
                ssize_t got = f->tls ? gnutls_record_recv(f->tls, buf, sizeof(buf)) : read(f->fd, buf, sizeof(buf));
                if (got < 0 && (f->tls ? got == GNUTLS_E_AGAIN || got == GNUTLS_E_INTERRUPTED :
                                         errno == EAGAIN || errno == EINTR))
                        return; /* more later */
                if (got <= 0)
                        break; /* the end (or an error: what came is relayed) */
                if (f->in_len + (size_t)got > f->in_cap) {
                        size_t cap = f->in_cap ? f->in_cap * 2 : 65536;
                        while (cap < f->in_len + (size_t)got)
                                cap *= 2;
                        char *p = cap <= BODY_MAX ? realloc(f->in, cap) : NULL;
                        if (!p)
                                break;
                        f->in = p;
                        f->in_cap = cap;
                }
                memcpy(f->in + f->in_len, buf, (size_t)got);
                f->in_len += (size_t)got;
                if (!f->head_len && parse_head(m, f) < 0)
                        break;
                if (f->head_len && decode_body(f) < 0)
                        break;
                if (f->head_len && f->events && f->body)
                        relay_events(m, f);
        }
        finish(m, f);
        unlink_fwd(m, f);
        fwd_free(f);
}

size_t mcp_remote_poll(mcp_stdio *m, struct pollfd *fds, mcp_fwd **by, size_t max)
{
        size_t n = 0;
        for (mcp_fwd *f = m->fwds; f && n < max; f = f->next) {
                fds[n] = (struct pollfd){ .fd = f->fd, .events = POLLIN };
                by[n++] = f;
        }
        return n;
}

size_t mcp_remote_count(const mcp_stdio *m)
{
        size_t n = 0;
        for (const mcp_fwd *f = m->fwds; f; f = f->next)
                n++;
        return n;
}

void mcp_remote_close(mcp_stdio *m)
{
        while (m->fwds) {
                mcp_fwd *f = m->fwds;
                m->fwds = f->next;
                fwd_free(f); /* the service sees the hang-up and ends the call */
        }
        if (m->remote && m->remote->cred)
                gnutls_certificate_free_credentials(m->remote->cred);
        free(m->remote);
        m->remote = NULL;
}
