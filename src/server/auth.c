/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is calling, and may they. Per request:
 *
 *   1. With mTLS (TLS_CLIENT_CA_FILE), the client certificate is verified (tls.c); no
 *      valid certificate, no caller.
 *   2. A trusted proxy (TRUSTED_PROXIES: a unix socket peer, or a listed address)
 *      names its client in X-Forwarded-Client-Cert; that ID replaces the proxy's own.
 *      From anyone else the header is ignored, and logged.
 *   3. The caller must match AUTH_ALLOW.
 *
 * Without mTLS and trusted proxies there are no identities: every caller is
 * "anonymous", and serve.c only listens on loopback or a unix socket unless told
 * otherwise (ALLOW_NON_LOOPBACK).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "core/error.h"
#include "server/server.h"

#define XFCC "X-Forwarded-Client-Cert"

int auth_setup(hxs_server *srv, hxs_error *err)
{
        char msg[400];
        const hxs_config *cfg = &srv->cfg;

        if (proxies_parse(cfg->trusted_proxies, &srv->proxies, msg, sizeof(msg)) < 0)
                return hxs_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES", "%s", msg);
        if (allowlist_parse(cfg->auth_allow, &srv->allow, msg, sizeof(msg)) < 0)
                return hxs_fail_field(err, HXS_ERR_INVALID, -EINVAL, "AUTH_ALLOW", "%s", msg);
        srv->identity_on = tls_mutual(srv) || srv->proxies.unix_peers || srv->proxies.n > 0;
        if (srv->identity_on && srv->allow.n == 0)
                return hxs_fail_field(err, HXS_ERR_INVALID, -EINVAL, "AUTH_ALLOW",
                                      "AUTH_ALLOW: callers are identified (TLS_CLIENT_CA_FILE or TRUSTED_PROXIES) "
                                      "but no caller is allowed: list SPIFFE IDs, trust domains or prefixes");
        if (!srv->identity_on && srv->allow.n > 0)
                return hxs_fail_field(err, HXS_ERR_INVALID, -EINVAL, "AUTH_ALLOW",
                                      "AUTH_ALLOW: needs caller identities (TLS_CLIENT_CA_FILE or TRUSTED_PROXIES); "
                                      "without them nobody could be recognised");
        if (srv->proxies.unix_peers && !srv->unix_path[0])
                return hxs_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES",
                                      "TRUSTED_PROXIES: \"unix\" needs LISTEN_ADDRESS=unix:/path");
        return 0;
}

void auth_cleanup(hxs_server *srv)
{
        allowlist_free(&srv->allow);
}

static void deny(call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void deny(call *c, const char *fmt, ...)
{
        char msg[SPIFFE_ID_MAX + 300];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        metrics_reject(&c->srv->m, REJECT_FORBIDDEN);
        call_set_error(c, 403, "forbidden", msg);
}

static enum MHD_Result count_xfcc(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
        if (key && strcasecmp(key, XFCC) == 0)
                (*(unsigned *)cls)++;
        return MHD_YES;
}

static bool peer_is_trusted_proxy(call *c)
{
        hxs_server *srv = c->srv;

        if (srv->unix_path[0]) {
                struct sockaddr_un un = { .sun_family = AF_UNIX };
                return proxies_match(&srv->proxies, (struct sockaddr *)&un);
        }
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        return ci && ci->client_addr && proxies_match(&srv->proxies, ci->client_addr);
}

static void peer_text(call *c, char *buf, size_t cap)
{
        const union MHD_ConnectionInfo *ci;
        char host[INET6_ADDRSTRLEN] = "?";

        if (c->srv->unix_path[0]) {
                snprintf(buf, cap, "unix socket");
                return;
        }
        ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
                if (ci->client_addr->sa_family == AF_INET)
                        inet_ntop(AF_INET, &((struct sockaddr_in *)ci->client_addr)->sin_addr, host,
                                  sizeof(host));
                else if (ci->client_addr->sa_family == AF_INET6)
                        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ci->client_addr)->sin6_addr,
                                  host, sizeof(host));
        }
        snprintf(buf, cap, "%s", host);
}

int auth_check(call *c)
{
        hxs_server *srv = c->srv;
        const char *why = NULL;
        const char *xfcc = NULL;
        size_t xfcc_len = 0;
        unsigned n_xfcc = 0;
        char peer[INET6_ADDRSTRLEN + 16];

        c->caller[0] = '\0';
        (void)MHD_get_connection_values(c->conn, MHD_HEADER_KIND, count_xfcc, &n_xfcc);
        if (n_xfcc)
                (void)MHD_lookup_connection_value_n(c->conn, MHD_HEADER_KIND, XFCC, strlen(XFCC),
                                                    &xfcc, &xfcc_len);
        bool trusted = srv->identity_on && peer_is_trusted_proxy(c);

        if (n_xfcc && !trusted) {
                peer_text(c, peer, sizeof(peer));
                log_line("auth", "request %s: X-Forwarded-Client-Cert from %s ignored: not a trusted proxy",
                         c->id, peer);
        }
        if (!srv->identity_on)
                return 0; /* anonymous */

        if (tls_mutual(srv) && tls_peer_id(srv, c->conn, c->caller, sizeof(c->caller), &why) < 0) {
                deny(c, "client certificate refused: %s", why ? why : "does not verify");
                c->caller[0] = '\0';
                return -EACCES;
        }
        if (trusted && n_xfcc) {
                char id[SPIFFE_ID_MAX + 1];
                if (n_xfcc > 1 || !xfcc) {
                        deny(c, "X-Forwarded-Client-Cert: sent %u times; a proxy sends one", n_xfcc);
                        return -EACCES;
                }
                int r = xfcc_caller(xfcc, xfcc_len, id, sizeof(id), &why);
                if (r == -ENOENT) {
                        deny(c, "X-Forwarded-Client-Cert: the proxy's client has no SPIFFE ID (%s)", why);
                        return -EACCES;
                }
                if (r < 0) {
                        deny(c, "X-Forwarded-Client-Cert: malformed: %s", why ? why : "unreadable");
                        return -EACCES;
                }
                memcpy(c->caller, id, strlen(id) + 1);
        }
        if (!c->caller[0]) {
                deny(c, "no caller identity: %s",
                     tls_mutual(srv) ? "present a client certificate with a SPIFFE ID" :
                     "this service identifies callers by X-Forwarded-Client-Cert from a trusted proxy only");
                return -EACCES;
        }
        if (!allowlist_match(&srv->allow, c->caller)) {
                deny(c, "caller %s is not allowed (AUTH_ALLOW)", c->caller);
                return -EACCES;
        }
        return 0;
}
