/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Caller identity, the pure parts (no I/O, no MHD): SPIFFE ID syntax, Envoy's
 * X-Forwarded-Client-Cert header, the AUTH_ALLOW allowlist and TRUSTED_PROXIES.
 * Everything here takes untrusted bytes and is fuzzed (tests/fuzz/fuzz-xfcc.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hexr-sandbox/sandbox.h"

/* Longest SPIFFE ID we accept (the spec's SHOULD is 2048 bytes). */
#define SPIFFE_ID_MAX 2048
/* Longest trust domain (a DNS name). */
#define SPIFFE_TD_MAX 255

/* 0 when td (len bytes) is a trust domain as SPIFFE IDs name it: 1 to 255 bytes of
 * [a-z0-9._-] (no scheme, no path). Else -EINVAL and *ret_rule. */
int trust_domain_check(const char *td, size_t len, const char **ret_rule);

/* The trust domain of a valid SPIFFE ID ("spiffe://td/x" -> "td") into ret (cap bytes
 * with NUL, at least SPIFFE_TD_MAX + 1): 0, or -EINVAL when id is not a SPIFFE ID. */
int spiffe_trust_domain(const char *id, size_t len, char *ret, size_t cap);

/* 0 when s (len bytes, no NUL needed) is a valid SPIFFE ID: "spiffe://" + a trust
 * domain of [a-z0-9._-] + optional path of "/" segments of [a-zA-Z0-9._-], none
 * empty, "." or "..", no trailing "/", no query, fragment, port, userinfo or
 * percent-encoding. Else -EINVAL and *ret_rule (static text) says which rule broke. */
int spiffe_id_check(const char *s, size_t len, const char **ret_rule);

/* What X-Forwarded-Client-Cert says about the nearest proxy's client: the pairs of
 * the header's last element. */
#define XFCC_CERT_MAX ((size_t)48 * 1024)
typedef struct xfcc_client {
        char id[SPIFFE_ID_MAX + 1];     /* URI=, a checked SPIFFE ID; "" when absent */
        char *cert;                     /* Cert=, URL-decoded (PEM), NUL-terminated; NULL when absent */
        size_t cert_len;
        char *chain;                    /* Chain=, likewise */
        size_t chain_len;
} xfcc_client;

/* Parses the header's last element into *ret (freed with xfcc_client_free, also on
 * failure). 0 when it has a URI or a certificate; -ENOENT when it has neither (the
 * client had no URI SAN); -EINVAL for a malformed header, two URI, Cert or Chain
 * values, an ID that is not a SPIFFE ID, a Cert or Chain that does not URL-decode or
 * is longer than XFCC_CERT_MAX; *ret_rule then says why. */
int xfcc_parse(const char *header, size_t len, xfcc_client *ret, const char **ret_rule);
void xfcc_client_free(xfcc_client *x);

/* The SPIFFE ID in X-Forwarded-Client-Cert: the URI= value of the header's last
 * element (the one the nearest proxy added for its direct client), quotes and
 * escapes undone, syntax checked. Returns 0 with the ID in ret (cap bytes with NUL),
 * -ENOENT when the last element has no URI (the client had no URI SAN), -EINVAL for
 * a malformed header, two URI values or an ID that is not a SPIFFE ID; *ret_rule
 * then says why. */
int xfcc_caller(const char *header, size_t len, char *ret, size_t cap, const char **ret_rule);

/* AUTH_ALLOW, parsed. Entries: "spiffe://td" (any ID of the trust domain),
 * "spiffe://td/path" (exactly that ID), "spiffe://td/path/" followed by "*" (IDs below path). */
#define AUTH_ALLOW_MAX 256
typedef enum allow_kind {
        ALLOW_TRUST_DOMAIN,
        ALLOW_EXACT,
        ALLOW_PREFIX,
        ALLOW_KIND_MAX,
} allow_kind;

typedef struct allow_entry {
        allow_kind kind;
        char *text;             /* the entry; a prefix without its trailing slash and star */
        size_t len;
} allow_entry;

typedef struct allowlist {
        allow_entry *entries;
        size_t n;
} allowlist;

/* Parses a comma list into *ret (freed with allowlist_free; nothing to free on
 * failure). -EINVAL with err naming setting (AUTH_ALLOW, METRICS_ALLOW), the entry
 * and the rule; -ENOMEM. */
int allowlist_parse(const char *text, const char *setting, allowlist *ret, hxs_error *err);
bool allowlist_match(const allowlist *al, const char *id);
void allowlist_free(allowlist *al);

/* TRUSTED_PROXIES, parsed: "unix", numeric IPv4/IPv6 addresses and the proxies' own
 * SPIFFE IDs (exact IDs; they need mTLS to be verified). A peer is a trusted proxy
 * when it satisfies both kinds that are listed: its address (or unix) is listed, and
 * its verified SPIFFE ID is listed. */
#define TRUSTED_PROXIES_MAX 64
typedef struct proxy_list {
        bool unix_peers;
        size_t n;
        struct {
                int family;     /* AF_INET or AF_INET6 */
                uint8_t addr[16];
        } addrs[TRUSTED_PROXIES_MAX];
        size_t n_ids;
        char *ids[TRUSTED_PROXIES_MAX]; /* malloc'ed, freed by proxies_free */
} proxy_list;

/* Parses into *ret (free with proxies_free; nothing to free on failure); -EINVAL with
 * err naming the entry and the rule. */
int proxies_parse(const char *text, proxy_list *ret, hxs_error *err);
void proxies_free(proxy_list *pl);
/* Does TRUSTED_PROXIES name addresses (or unix), SPIFFE IDs? */
bool proxies_by_address(const proxy_list *pl);
bool proxies_by_id(const proxy_list *pl);
/* Is a peer at sa (AF_UNIX: a unix socket peer; NULL: unknown, never) listed by address?
 * IPv4-mapped IPv6 addresses count as their IPv4 address. */
bool proxies_match(const proxy_list *pl, const struct sockaddr *sa);
/* Is id (a verified SPIFFE ID; NULL or "": none) one of the listed proxy IDs? */
bool proxies_match_id(const proxy_list *pl, const char *id);

/* SPIFFE_TRUST_BUNDLES, parsed: "trust-domain=/absolute/file.pem", comma list. */
#define TRUST_BUNDLES_MAX 64
typedef struct bundle_list {
        size_t n;
        struct {
                char td[SPIFFE_TD_MAX + 1];
                char *path;             /* malloc'ed */
        } e[TRUST_BUNDLES_MAX];
} bundle_list;

/* Parses into *ret (free with bundles_free; nothing to free on failure); -EINVAL with
 * a message naming the entry and the rule. */
int bundles_parse(const char *text, bundle_list *ret, hxs_error *err);
void bundles_free(bundle_list *bl);

/* Which trust domain a CA certificate of a trust bundle belongs to (X509-SVID: a CA
 * may name its trust domain in a spiffe:// URI SAN):
 *   - from a SPIFFE_TRUST_BUNDLES file (bundle_td set): that file's trust domain;
 *     a CA naming another one is refused;
 *   - from TLS_CLIENT_CA_FILE (bundle_td NULL): the trust domain its SPIFFE URI
 *     names; without one, that of its issuer when the issuer is a CA of the same file
 *     (issuer_td), else the service's own (own_td); when that is unknown too, or a CA
 *     names a trust domain other than its issuer's, or two, it is refused.
 * Non-SPIFFE URIs are ignored; a spiffe:// URI that is not a valid SPIFFE ID is
 * refused. 0 with the trust domain in ret (cap >= SPIFFE_TD_MAX + 1), or -EINVAL with
 * err saying what is wrong and what to set. */
typedef struct ca_facts {
        const char *const *uris;        /* its URI SANs, uri_lens[i] bytes each */
        const size_t *uri_lens;
        size_t n_uris;
        const char *bundle_td;
        const char *issuer_td;
        const char *own_td;
} ca_facts;
int ca_trust_domain(const ca_facts *f, char *ret, size_t cap, hxs_error *err);
