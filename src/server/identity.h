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

/* Longest SPIFFE ID we accept (the spec's SHOULD is 2048 bytes). */
#define SPIFFE_ID_MAX 2048
/* Longest trust domain (a DNS name). */
#define SPIFFE_TD_MAX 255

/* 0 when s (len bytes, no NUL needed) is a valid SPIFFE ID: "spiffe://" + a trust
 * domain of [a-z0-9._-] + optional path of "/" segments of [a-zA-Z0-9._-], none
 * empty, "." or "..", no trailing "/", no query, fragment, port, userinfo or
 * percent-encoding. Else -EINVAL and *ret_rule (static text) says which rule broke. */
int spiffe_id_check(const char *s, size_t len, const char **ret_rule);

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

/* Parses a comma list into *ret (freed with allowlist_free). -EINVAL with a message
 * naming the entry and the rule in msg. */
int allowlist_parse(const char *text, allowlist *ret, char *msg, size_t msg_cap);
bool allowlist_match(const allowlist *al, const char *id);
void allowlist_free(allowlist *al);

/* TRUSTED_PROXIES, parsed: "unix" and numeric IPv4/IPv6 addresses. */
#define TRUSTED_PROXIES_MAX 64
typedef struct proxy_list {
        bool unix_peers;
        size_t n;
        struct {
                int family;     /* AF_INET or AF_INET6 */
                uint8_t addr[16];
        } addrs[TRUSTED_PROXIES_MAX];
} proxy_list;

int proxies_parse(const char *text, proxy_list *ret, char *msg, size_t msg_cap);
/* Is a peer at sa (AF_UNIX: a unix socket peer; NULL: unknown, never) a trusted proxy? IPv4-mapped
 * IPv6 addresses count as their IPv4 address. */
bool proxies_match(const proxy_list *pl, const struct sockaddr *sa);
