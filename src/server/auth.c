/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is calling, and may they. Per request:
 *
 *   1. With mTLS, the client certificate is verified against the bundle of the trust
 *      domain its SPIFFE ID names (tls.c); no valid certificate, no caller.
 *   2. A trusted proxy (TRUSTED_PROXIES: a unix socket peer or a listed address, and,
 *      when SPIFFE IDs are listed, a peer whose verified ID is one of them) names its
 *      client in X-Forwarded-Client-Cert; that ID replaces the proxy's own, and a
 *      proxy's request without the header names nobody. When the proxy forwards the
 *      client's certificate (Cert=, Chain=), it is verified like a direct client's
 *      and must carry the ID of URI=; with URI= alone the proxy is the one that
 *      verified it. From anyone else the header is ignored, and logged.
 *   3. The caller must match AUTH_ALLOW (and METRICS_ALLOW for /metrics).
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
#include "server/auth.h"
#include "server/call.h"
#include "server/identity.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/state.h"
#include "server/tls.h"

#define XFCC "X-Forwarded-Client-Cert"

int auth_setup(server *srv, hxs_error *err)
{
        const hxs_config *cfg = &srv->cfg;
        int r;

        if ((r = proxies_parse(cfg->trusted_proxies, &srv->auth.proxies, err)) < 0 ||
            (r = allowlist_parse(cfg->auth_allow, "AUTH_ALLOW", &srv->auth.allow, err)) < 0 ||
            (r = allowlist_parse(cfg->metrics_allow, "METRICS_ALLOW", &srv->auth.metrics_allow, err)) < 0)
                return r;
        bool proxies = proxies_by_address(&srv->auth.proxies) || proxies_by_id(&srv->auth.proxies);
        srv->auth.identity_on = tls_mutual(srv) || proxies;
        if (tls_has_bundles(srv) && !tls_mutual(srv) && !proxies)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_BUNDLES",
                                      "SPIFFE_TRUST_BUNDLES: nothing would be verified against them: they need mTLS "
                                      "(TLS_CERT_FILE, TLS_KEY_FILE) or TRUSTED_PROXIES that forward client "
                                      "certificates");
        if (srv->auth.identity_on && srv->auth.allow.n == 0)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "AUTH_ALLOW",
                                      "AUTH_ALLOW: callers are identified (TLS_CLIENT_CA_FILE or TRUSTED_PROXIES) "
                                      "but no caller is allowed: list SPIFFE IDs, trust domains or prefixes");
        if (!srv->auth.identity_on && srv->auth.allow.n > 0)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "AUTH_ALLOW",
                                      "AUTH_ALLOW: needs caller identities (TLS_CLIENT_CA_FILE or TRUSTED_PROXIES); "
                                      "without them nobody could be recognised");
        if (!srv->auth.identity_on && srv->auth.metrics_allow.n > 0)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "METRICS_ALLOW",
                                      "METRICS_ALLOW: needs caller identities (TLS_CLIENT_CA_FILE or TRUSTED_PROXIES)");
        if (srv->auth.proxies.unix_peers && !srv->listen.unix_path[0])
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES",
                                      "TRUSTED_PROXIES: \"unix\" needs LISTEN_ADDRESS=unix:/path");
        if (proxies_by_id(&srv->auth.proxies) && !tls_mutual(srv))
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES",
                                      "TRUSTED_PROXIES: a proxy named by its SPIFFE ID must present it over mTLS: "
                                      "set TLS_CERT_FILE, TLS_KEY_FILE and TLS_CLIENT_CA_FILE or SPIFFE_TRUST_BUNDLES");
        if (tls_mutual(srv) && proxies_by_address(&srv->auth.proxies) && !proxies_by_id(&srv->auth.proxies))
                log_line("warning", "TRUSTED_PROXIES names addresses only: any client with a valid certificate "
                         "that connects from there may name any caller; add the proxy's SPIFFE ID");
        /* An allowed trust domain nobody can be verified in is a configuration mistake. */
        for (size_t i = 0; tls_mutual(srv) && !proxies && i < srv->auth.allow.n; i++) {
                char td[SPIFFE_TD_MAX + 1];
                if (spiffe_trust_domain(srv->auth.allow.entries[i].text, srv->auth.allow.entries[i].len, td,
                                        sizeof(td)) == 0 && !tls_has_bundle(srv, td))
                        log_line("warning", "AUTH_ALLOW allows %s, but trust domain %s has no trust bundle: "
                                 "no caller of it can be verified", srv->auth.allow.entries[i].text, td);
        }
        return 0;
}

void auth_cleanup(server *srv)
{
        allowlist_free(&srv->auth.allow);
        allowlist_free(&srv->auth.metrics_allow);
        proxies_free(&srv->auth.proxies);
}

static void deny(call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void deny(call *c, const char *fmt, ...)
{
        char msg[2 * SPIFFE_ID_MAX + 800];
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

/* Is the peer a trusted proxy: every kind of entry TRUSTED_PROXIES lists holds
 * (its address, and its verified SPIFFE ID peer_id). */
static bool peer_is_trusted_proxy(call *c, const char *peer_id)
{
        server *srv = c->srv;
        const proxy_list *pl = &srv->auth.proxies;

        if (!proxies_by_address(pl) && !proxies_by_id(pl))
                return false;
        if (proxies_by_id(pl) && !proxies_match_id(pl, peer_id))
                return false;
        if (!proxies_by_address(pl))
                return true;
        if (srv->listen.unix_path[0]) {
                struct sockaddr_un un = { .sun_family = AF_UNIX };
                return proxies_match(pl, (struct sockaddr *)&un);
        }
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        return ci && ci->client_addr && proxies_match(pl, ci->client_addr);
}

static void peer_text(call *c, char *buf, size_t cap)
{
        const union MHD_ConnectionInfo *ci;
        char host[INET6_ADDRSTRLEN] = "?";

        if (c->srv->listen.unix_path[0]) {
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

/* The caller a trusted proxy names, into c->caller: 0, or -EACCES with a 403. */
static int forwarded_caller(call *c, const char *h, size_t len, unsigned n)
{
        xfcc_client x;
        const char *rule = NULL;
        hxs_error why = { 0 };

        c->caller[0] = '\0';
        if (n == 0) {
                deny(c, "no caller identity: a trusted proxy names its client in X-Forwarded-Client-Cert, "
                     "and this request has none (the proxy is not a caller itself)");
                return -EACCES;
        }
        if (n > 1 || !h) {
                deny(c, "X-Forwarded-Client-Cert: sent %u times; a proxy sends one", n);
                return -EACCES;
        }
        int r = xfcc_parse(h, len, &x, &rule);
        if (r == -ENOENT) {
                deny(c, "X-Forwarded-Client-Cert: the proxy's client has no SPIFFE ID (%s)", rule);
                return -EACCES;
        }
        if (r < 0) {
                deny(c, "X-Forwarded-Client-Cert: malformed: %s", rule ? rule : "unreadable");
                return -EACCES;
        }
        if (x.cert || x.chain) {
                char id[SPIFFE_ID_MAX + 1];
                if (tls_verify_forwarded(c->srv, &x, id, sizeof(id), &why) < 0) {
                        deny(c, "X-Forwarded-Client-Cert: the forwarded certificate is refused: %s", why.message);
                        r = -EACCES;
                } else if (x.id[0] && strcmp(x.id, id) != 0) {
                        deny(c, "X-Forwarded-Client-Cert: URI %s is not the SPIFFE ID of the forwarded certificate (%s)",
                             x.id, id);
                        r = -EACCES;
                } else {
                        memcpy(c->caller, id, strlen(id) + 1);
                }
        } else {
                memcpy(c->caller, x.id, strlen(x.id) + 1);
        }
        xfcc_client_free(&x);
        return r < 0 ? -EACCES : 0;
}

int auth_check(call *c)
{
        server *srv = c->srv;
        const char *xfcc = NULL;
        size_t xfcc_len = 0;
        unsigned n_xfcc = 0;
        char peer[INET6_ADDRSTRLEN + 16];
        hxs_error why = { 0 };

        c->caller[0] = '\0';
        (void)MHD_get_connection_values(c->conn, MHD_HEADER_KIND, count_xfcc, &n_xfcc);
        if (n_xfcc)
                (void)MHD_lookup_connection_value_n(c->conn, MHD_HEADER_KIND, XFCC, strlen(XFCC),
                                                    &xfcc, &xfcc_len);
        if (!srv->auth.identity_on) {
                if (n_xfcc) {
                        peer_text(c, peer, sizeof(peer));
                        log_line("auth", "request %s: X-Forwarded-Client-Cert from %s ignored: not a trusted proxy",
                                 c->id, peer);
                }
                return 0; /* anonymous */
        }

        if (tls_mutual(srv) && tls_peer_id(srv, c->conn, c->caller, sizeof(c->caller), &why) < 0) {
                deny(c, "client certificate refused: %s", why.message);
                c->caller[0] = '\0';
                return -EACCES;
        }
        bool trusted = peer_is_trusted_proxy(c, c->caller);
        if (n_xfcc && !trusted) {
                peer_text(c, peer, sizeof(peer));
                log_line("auth", "request %s: X-Forwarded-Client-Cert from %s ignored: not a trusted proxy",
                         c->id, peer);
        }
        if (trusted && forwarded_caller(c, xfcc, xfcc_len, n_xfcc) < 0)
                return -EACCES;
        if (!c->caller[0]) {
                deny(c, "no caller identity: %s",
                     tls_mutual(srv) ? "present a client certificate with a SPIFFE ID" :
                     "this service identifies callers by X-Forwarded-Client-Cert from a trusted proxy only");
                return -EACCES;
        }
        if (!allowlist_match(&srv->auth.allow, c->caller)) {
                deny(c, "caller %s is not allowed (AUTH_ALLOW)", c->caller);
                return -EACCES;
        }
        return 0;
}

int auth_check_metrics(call *c)
{
        const server *srv = c->srv;

        if (!srv->auth.metrics_allow.n || allowlist_match(&srv->auth.metrics_allow, c->caller))
                return 0;
        deny(c, "caller %s may not read /metrics (METRICS_ALLOW)", c->caller);
        return -EACCES;
}
