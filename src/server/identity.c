/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Caller identity, the pure parts: SPIFFE ID syntax (the SPIFFE-ID specification,
 * section 2), X-Forwarded-Client-Cert as Envoy writes it, the AUTH_ALLOW allowlist
 * and TRUSTED_PROXIES. When in doubt these refuse: a header we do not fully
 * understand names nobody.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "server/identity.h"

#define SCHEME "spiffe://"
#define SCHEME_LEN (sizeof(SCHEME) - 1)

static bool td_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
               c == '_';
}

static bool path_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '-' || c == '_';
}

int spiffe_id_check(const char *s, size_t len, const char **ret_rule)
{
        const char *rule = NULL;
        size_t i;

        if (len > SPIFFE_ID_MAX)
                rule = "longer than 2048 bytes";
        else if (len < SCHEME_LEN || memcmp(s, SCHEME, SCHEME_LEN) != 0)
                rule = "does not start with spiffe://";
        if (rule)
                goto bad;
        for (i = SCHEME_LEN; i < len && s[i] != '/'; i++)
                if (!td_char(s[i])) {
                        rule = "trust domain has a character outside a-z 0-9 . - _";
                        goto bad;
                }
        if (i == SCHEME_LEN) {
                rule = "empty trust domain";
                goto bad;
        }
        if (i - SCHEME_LEN > SPIFFE_TD_MAX) {
                rule = "trust domain longer than 255 bytes";
                goto bad;
        }
        /* path: ("/" segment)* */
        while (i < len) {
                size_t start = ++i; /* past the '/' */
                while (i < len && s[i] != '/') {
                        if (!path_char(s[i])) {
                                rule = "path has a character outside a-z A-Z 0-9 . - _";
                                goto bad;
                        }
                        i++;
                }
                size_t seg = i - start;
                if (seg == 0) {
                        rule = i == len ? "trailing /" : "empty path segment";
                        goto bad;
                }
                if ((seg == 1 && s[start] == '.') || (seg == 2 && s[start] == '.' && s[start + 1] == '.')) {
                        rule = "path segment . or ..";
                        goto bad;
                }
        }
        return 0;
bad:
        if (ret_rule)
                *ret_rule = rule;
        return -EINVAL;
}

/* ---- X-Forwarded-Client-Cert ------------------------------------------------- */

/*
 * Grammar (Envoy's documentation): element *("," element); element = pair *(";" pair);
 * pair = key "=" value; value = token / quoted; quoted = DQUOTE *(char / "\" char)
 * DQUOTE. Keys: By, Hash, Cert, Chain, Subject, URI, DNS (case-insensitive). A client
 * certificate with several URI SANs gives several URI pairs: that is not one caller.
 */
int xfcc_caller(const char *h, size_t len, char *ret, size_t cap, const char **ret_rule)
{
        char uri[SPIFFE_ID_MAX + 1];
        size_t uri_len = 0, n_uri = 0;
        const char *rule = NULL;
        size_t i = 0;

        if (cap)
                ret[0] = '\0';
        if (len == 0) {
                rule = "empty";
                goto bad;
        }
        for (;;) {
                /* a pair */
                while (i < len && (h[i] == ' ' || h[i] == '\t'))
                        i++;
                size_t key = i;
                while (i < len && ((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z')))
                        i++;
                size_t key_len = i - key;
                if (key_len == 0 || i >= len || h[i] != '=') {
                        rule = "expected key=value";
                        goto bad;
                }
                i++;
                bool is_uri = key_len == 3 && strncasecmp(h + key, "URI", 3) == 0;
                char *out = is_uri ? uri : NULL;
                size_t o = 0;
                bool too_long = false;
                if (i < len && h[i] == '"') {
                        i++;
                        for (;;) {
                                if (i >= len) {
                                        rule = "unterminated quoted value";
                                        goto bad;
                                }
                                char c = h[i++];
                                if (c == '"')
                                        break;
                                if (c == '\\') {
                                        if (i >= len) {
                                                rule = "unterminated quoted value";
                                                goto bad;
                                        }
                                        c = h[i++];
                                }
                                if (out) {
                                        if (o < SPIFFE_ID_MAX)
                                                out[o++] = c;
                                        else
                                                too_long = true;
                                }
                        }
                } else {
                        while (i < len && h[i] != ';' && h[i] != ',') {
                                char c = h[i++];
                                if (c == '"' || c == '\\') {
                                        rule = "quote or backslash inside an unquoted value";
                                        goto bad;
                                }
                                if (out) {
                                        if (o < SPIFFE_ID_MAX)
                                                out[o++] = c;
                                        else
                                                too_long = true;
                                }
                        }
                }
                if (is_uri) {
                        if (too_long) {
                                rule = "URI longer than 2048 bytes";
                                goto bad;
                        }
                        n_uri++;
                        uri_len = o;
                }
                while (i < len && (h[i] == ' ' || h[i] == '\t'))
                        i++;
                if (i >= len)
                        break;
                if (h[i] == ';') {
                        i++;
                        continue;
                }
                if (h[i] == ',') {
                        /* the next element: what counts is the last one */
                        i++;
                        n_uri = 0;
                        uri_len = 0;
                        continue;
                }
                rule = "expected ; or , after a value";
                goto bad;
        }
        if (n_uri > 1) {
                rule = "more than one URI in the last element";
                goto bad;
        }
        if (n_uri == 0 || uri_len == 0) {
                if (ret_rule)
                        *ret_rule = "no URI in the last element";
                return -ENOENT;
        }
        if (memchr(uri, '\0', uri_len)) {
                rule = "NUL byte in URI";
                goto bad;
        }
        if (spiffe_id_check(uri, uri_len, &rule) < 0)
                goto bad;
        if (uri_len >= cap) {
                rule = "URI too long";
                goto bad;
        }
        memcpy(ret, uri, uri_len);
        ret[uri_len] = '\0';
        return 0;
bad:
        if (ret_rule)
                *ret_rule = rule;
        return -EINVAL;
}

/* ---- AUTH_ALLOW ----------------------------------------------------------------- */

void allowlist_free(allowlist *al)
{
        if (!al)
                return;
        for (size_t i = 0; i < al->n; i++)
                free(al->entries[i].text);
        free(al->entries);
        al->entries = NULL;
        al->n = 0;
}

/* The next item of a comma-separated list, blanks around it trimmed (may be empty:
 * "a,,b"). false at the end of the text. */
static bool next_item(const char **p, const char **ret, size_t *ret_len)
{
        if (!**p)
                return false;
        const char *end = strchr(*p, ',');
        if (!end)
                end = *p + strlen(*p);
        const char *a = *p, *b = end;
        while (a < b && (*a == ' ' || *a == '\t'))
                a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
        *p = *end ? end + 1 : end;
        *ret = a;
        *ret_len = (size_t)(b - a);
        return true;
}

int allowlist_parse(const char *text, allowlist *ret, char *msg, size_t msg_cap)
{
        allowlist al = { 0 };
        const char *p = text;

        al.entries = calloc(AUTH_ALLOW_MAX, sizeof(*al.entries));
        if (!al.entries) {
                snprintf(msg, msg_cap, "AUTH_ALLOW: out of memory");
                return -ENOMEM;
        }
        const char *a;
        size_t n;
        while (next_item(&p, &a, &n)) {
                if (n == 0)
                        continue; /* "a,,b" or a trailing comma */
                if (al.n == AUTH_ALLOW_MAX) {
                        snprintf(msg, msg_cap, "AUTH_ALLOW: more than %d entries", AUTH_ALLOW_MAX);
                        goto fail;
                }
                size_t item_len = n; /* as written, for messages */
                allow_kind kind = ALLOW_EXACT;
                if (n >= 2 && a[n - 2] == '/' && a[n - 1] == '*') {
                        kind = ALLOW_PREFIX;
                        n -= 2;
                }
                const char *rule = NULL;
                if (spiffe_id_check(a, n, &rule) < 0) {
                        snprintf(msg, msg_cap,
                                 "AUTH_ALLOW: \"%.*s\" is not a SPIFFE ID, trust domain or prefix/* (%s)",
                                 (int)(item_len > 200 ? 200 : item_len), a, rule);
                        goto fail;
                }
                bool has_path = memchr(a + SCHEME_LEN, '/', n - SCHEME_LEN) != NULL;
                if (!has_path) {
                        if (kind == ALLOW_PREFIX) {
                                snprintf(msg, msg_cap,
                                         "AUTH_ALLOW: \"%.*s\": write a whole trust domain as spiffe://domain, without /*",
                                         (int)(item_len > 200 ? 200 : item_len), a);
                                goto fail;
                        }
                        kind = ALLOW_TRUST_DOMAIN;
                }
                allow_entry *e = &al.entries[al.n];
                e->text = strndup(a, n);
                if (!e->text) {
                        snprintf(msg, msg_cap, "AUTH_ALLOW: out of memory");
                        goto fail;
                }
                e->kind = kind;
                e->len = n;
                al.n++;
        }
        *ret = al;
        return 0;
fail:
        allowlist_free(&al);
        return -EINVAL;
}

bool allowlist_match(const allowlist *al, const char *id)
{
        size_t len = strlen(id);

        if (spiffe_id_check(id, len, NULL) < 0)
                return false;
        for (size_t i = 0; i < al->n; i++) {
                const allow_entry *e = &al->entries[i];
                switch (e->kind) {
                case ALLOW_EXACT:
                        if (len == e->len && memcmp(id, e->text, len) == 0)
                                return true;
                        break;
                case ALLOW_TRUST_DOMAIN:
                case ALLOW_PREFIX:
                        /* whole segments: the prefix spiffe://td/a matches td/a/b, not td/ab or td/a;
                         * spiffe://td matches td and td/anything, not tdx */
                        if (len > e->len && memcmp(id, e->text, e->len) == 0 && id[e->len] == '/')
                                return true;
                        if (e->kind == ALLOW_TRUST_DOMAIN && len == e->len &&
                            memcmp(id, e->text, len) == 0)
                                return true;
                        break;
                case ALLOW_KIND_MAX:
                default:
                        break;
                }
        }
        return false;
}

/* ---- TRUSTED_PROXIES ------------------------------------------------------------ */

int proxies_parse(const char *text, proxy_list *ret, char *msg, size_t msg_cap)
{
        proxy_list pl = { 0 };
        const char *p = text;

        const char *a;
        size_t n;
        while (next_item(&p, &a, &n)) {
                char item[64];
                if (n == 0)
                        continue;
                if (n >= sizeof(item)) {
                        snprintf(msg, msg_cap, "TRUSTED_PROXIES: \"%.40s...\" is not unix or an IP address", a);
                        return -EINVAL;
                }
                memcpy(item, a, n);
                item[n] = '\0';
                if (strcmp(item, "unix") == 0) {
                        pl.unix_peers = true;
                        continue;
                }
                if (pl.n == TRUSTED_PROXIES_MAX) {
                        snprintf(msg, msg_cap, "TRUSTED_PROXIES: more than %d addresses", TRUSTED_PROXIES_MAX);
                        return -EINVAL;
                }
                if (inet_pton(AF_INET, item, pl.addrs[pl.n].addr) == 1) {
                        pl.addrs[pl.n++].family = AF_INET;
                } else if (inet_pton(AF_INET6, item, pl.addrs[pl.n].addr) == 1) {
                        pl.addrs[pl.n++].family = AF_INET6;
                } else {
                        snprintf(msg, msg_cap,
                                 "TRUSTED_PROXIES: \"%s\" is not unix or a numeric IP address (no names, no networks)",
                                 item);
                        return -EINVAL;
                }
        }
        *ret = pl;
        return 0;
}

bool proxies_match(const proxy_list *pl, const struct sockaddr *sa)
{
        const uint8_t *addr;
        int family;

        if (!sa)
                return false; /* unknown peer: not trusted */
        if (sa->sa_family == AF_UNIX)
                return pl->unix_peers;
        if (sa->sa_family == AF_INET) {
                family = AF_INET;
                addr = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
        } else if (sa->sa_family == AF_INET6) {
                const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
                if (IN6_IS_ADDR_V4MAPPED(a6)) {
                        family = AF_INET;
                        addr = a6->s6_addr + 12;
                } else {
                        family = AF_INET6;
                        addr = a6->s6_addr;
                }
        } else {
                return false;
        }
        for (size_t i = 0; i < pl->n; i++)
                if (pl->addrs[i].family == family &&
                    memcmp(pl->addrs[i].addr, addr, family == AF_INET ? 4 : 16) == 0)
                        return true;
        return false;
}
