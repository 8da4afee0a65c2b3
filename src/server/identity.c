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

#include "core/error.h"
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

int trust_domain_check(const char *td, size_t len, const char **ret_rule)
{
        const char *rule = NULL;

        if (len == 0)
                rule = "empty trust domain";
        else if (len > SPIFFE_TD_MAX)
                rule = "trust domain longer than 255 bytes";
        for (size_t i = 0; !rule && i < len; i++)
                if (!td_char(td[i]))
                        rule = "trust domain has a character outside a-z 0-9 . - _";
        if (!rule)
                return 0;
        if (ret_rule)
                *ret_rule = rule;
        return -EINVAL;
}

int spiffe_trust_domain(const char *id, size_t len, char *ret, size_t cap)
{
        if (spiffe_id_check(id, len, NULL) < 0)
                return -EINVAL;
        const char *td = id + SCHEME_LEN;
        const char *slash = memchr(td, '/', len - SCHEME_LEN);
        size_t n = slash ? (size_t)(slash - td) : len - SCHEME_LEN;
        if (n >= cap)
                return -EINVAL;
        memcpy(ret, td, n);
        ret[n] = '\0';
        return 0;
}

void xfcc_client_free(xfcc_client *x)
{
        if (!x)
                return;
        free(x->cert);
        free(x->chain);
        x->cert = x->chain = NULL;
        x->cert_len = x->chain_len = 0;
        x->id[0] = '\0';
}

static int hex_value(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Envoy URL-encodes the PEM of Cert= and Chain= (%XX; '+' is itself, as in base64).
 * In place; NUL bytes and bad escapes are refused. */
static int url_decode(char *s, size_t *len)
{
        size_t o = 0;
        for (size_t i = 0; i < *len; i++) {
                char c = s[i];
                if (c == '%') {
                        if (i + 2 >= *len || hex_value(s[i + 1]) < 0 || hex_value(s[i + 2]) < 0)
                                return -EINVAL;
                        c = (char)(hex_value(s[i + 1]) << 4 | hex_value(s[i + 2]));
                        i += 2;
                }
                if (c == '\0')
                        return -EINVAL;
                s[o++] = c;
        }
        s[o] = '\0';
        *len = o;
        return 0;
}

/*
 * Grammar (Envoy's documentation): element *("," element); element = pair *(";" pair);
 * pair = key "=" value; value = token / quoted; quoted = DQUOTE *(char / "\" char)
 * DQUOTE. Keys: By, Hash, Cert, Chain, Subject, URI, DNS (case-insensitive). A client
 * certificate with several URI SANs gives several URI pairs: that is not one caller.
 */
enum xfcc_key { KEY_OTHER, KEY_URI, KEY_CERT, KEY_CHAIN };

int xfcc_parse(const char *h, size_t len, xfcc_client *ret, const char **ret_rule)
{
        char uri[SPIFFE_ID_MAX + 1];
        size_t uri_len = 0, n_uri = 0, n_cert = 0, n_chain = 0;
        const char *rule = NULL;
        size_t i = 0;
        /* Cert and Chain of the current element: never longer than the header */
        char *vals[2] = { NULL, NULL };
        size_t val_lens[2] = { 0, 0 };

        memset(ret, 0, sizeof(*ret));
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
                enum xfcc_key k = KEY_OTHER;
                if (key_len == 3 && strncasecmp(h + key, "URI", 3) == 0)
                        k = KEY_URI;
                else if (key_len == 4 && strncasecmp(h + key, "Cert", 4) == 0)
                        k = KEY_CERT;
                else if (key_len == 5 && strncasecmp(h + key, "Chain", 5) == 0)
                        k = KEY_CHAIN;
                char *out = NULL;
                size_t cap = 0, o = 0;
                bool too_long = false;
                if (k == KEY_URI) {
                        out = uri;
                        cap = SPIFFE_ID_MAX;
                } else if (k == KEY_CERT || k == KEY_CHAIN) {
                        int v = k == KEY_CERT ? 0 : 1;
                        if ((v == 0 ? ++n_cert : ++n_chain) > 1) {
                                rule = v == 0 ? "more than one Cert in the last element" :
                                                "more than one Chain in the last element";
                                goto bad;
                        }
                        if (!vals[v]) {
                                vals[v] = malloc(len + 1);
                                if (!vals[v]) {
                                        rule = "out of memory";
                                        goto bad;
                                }
                        }
                        out = vals[v];
                        cap = XFCC_CERT_MAX * 3; /* URL-encoded; checked decoded below */
                }
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
                                        if (o < cap)
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
                                        if (o < cap)
                                                out[o++] = c;
                                        else
                                                too_long = true;
                                }
                        }
                }
                if (k == KEY_URI) {
                        if (too_long) {
                                rule = "URI longer than 2048 bytes";
                                goto bad;
                        }
                        n_uri++;
                        uri_len = o;
                } else if (k == KEY_CERT || k == KEY_CHAIN) {
                        if (too_long) {
                                rule = "Cert or Chain longer than 48 KiB";
                                goto bad;
                        }
                        val_lens[k == KEY_CERT ? 0 : 1] = o;
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
                        n_uri = n_cert = n_chain = 0;
                        uri_len = 0;
                        val_lens[0] = val_lens[1] = 0;
                        continue;
                }
                rule = "expected ; or , after a value";
                goto bad;
        }
        if (n_uri > 1) {
                rule = "more than one URI in the last element";
                goto bad;
        }
        if (n_uri == 1 && uri_len > 0) {
                if (memchr(uri, '\0', uri_len)) {
                        rule = "NUL byte in URI";
                        goto bad;
                }
                if (spiffe_id_check(uri, uri_len, &rule) < 0)
                        goto bad;
                memcpy(ret->id, uri, uri_len);
                ret->id[uri_len] = '\0';
        }
        for (int v = 0; v < 2; v++) {
                if (!(v == 0 ? n_cert : n_chain))
                        continue;
                if (val_lens[v] == 0 || url_decode(vals[v], &val_lens[v]) < 0) {
                        rule = v == 0 ? "Cert is empty or not URL-encoded PEM" :
                                        "Chain is empty or not URL-encoded PEM";
                        goto bad;
                }
                if (val_lens[v] > XFCC_CERT_MAX) {
                        rule = "Cert or Chain longer than 48 KiB";
                        goto bad;
                }
                if (v == 0) {
                        ret->cert = vals[0];
                        ret->cert_len = val_lens[0];
                } else {
                        ret->chain = vals[1];
                        ret->chain_len = val_lens[1];
                }
                vals[v] = NULL;
        }
        free(vals[0]);
        free(vals[1]);
        if (!ret->id[0] && !ret->cert && !ret->chain) {
                if (ret_rule)
                        *ret_rule = "no URI in the last element";
                return -ENOENT;
        }
        return 0;
bad:
        free(vals[0]);
        free(vals[1]);
        xfcc_client_free(ret);
        if (ret_rule)
                *ret_rule = rule;
        return -EINVAL;
}

int xfcc_caller(const char *h, size_t len, char *ret, size_t cap, const char **ret_rule)
{
        xfcc_client x;

        if (cap)
                ret[0] = '\0';
        int r = xfcc_parse(h, len, &x, ret_rule);
        if (r < 0)
                return r;
        size_t n = strlen(x.id);
        if (n == 0) {
                if (ret_rule)
                        *ret_rule = "no URI in the last element";
                r = -ENOENT;
        } else if (n >= cap) {
                if (ret_rule)
                        *ret_rule = "URI too long";
                r = -EINVAL;
        } else {
                memcpy(ret, x.id, n + 1);
        }
        xfcc_client_free(&x);
        return r;
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

int allowlist_parse(const char *text, const char *setting, allowlist *ret, hxs_error *err)
{
        allowlist al = { 0 };
        const char *p = text;

        al.entries = calloc(AUTH_ALLOW_MAX, sizeof(*al.entries));
        if (!al.entries) {
                err_fail_field(err, HXS_ERR_INTERNAL, -ENOMEM, setting, "%s: out of memory", setting);
                return -ENOMEM;
        }
        const char *a;
        size_t n;
        while (next_item(&p, &a, &n)) {
                if (n == 0)
                        continue; /* "a,,b" or a trailing comma */
                if (al.n == AUTH_ALLOW_MAX) {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, setting, "%s: more than %d entries", setting, AUTH_ALLOW_MAX);
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
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, setting,
                                 "%s: \"%.*s\" is not a SPIFFE ID, trust domain or prefix/* (%s)",
                                 setting, (int)(item_len > 200 ? 200 : item_len), a, rule);
                        goto fail;
                }
                bool has_path = memchr(a + SCHEME_LEN, '/', n - SCHEME_LEN) != NULL;
                if (!has_path) {
                        if (kind == ALLOW_PREFIX) {
                                err_fail_field(err, HXS_ERR_INVALID, -EINVAL, setting,
                                         "%s: \"%.*s\": write a whole trust domain as spiffe://domain, without /*",
                                         setting, (int)(item_len > 200 ? 200 : item_len), a);
                                goto fail;
                        }
                        kind = ALLOW_TRUST_DOMAIN;
                }
                allow_entry *e = &al.entries[al.n];
                e->text = strndup(a, n);
                if (!e->text) {
                        err_fail_field(err, HXS_ERR_INTERNAL, -ENOMEM, setting, "%s: out of memory", setting);
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

void proxies_free(proxy_list *pl)
{
        if (!pl)
                return;
        for (size_t i = 0; i < pl->n_ids; i++)
                free(pl->ids[i]);
        pl->n_ids = 0;
}

int proxies_parse(const char *text, proxy_list *ret, hxs_error *err)
{
        proxy_list pl = { 0 };
        const char *p = text;

        const char *a;
        size_t n;
        while (next_item(&p, &a, &n)) {
                char item[64];
                if (n == 0)
                        continue;
                if (n >= SCHEME_LEN && memcmp(a, SCHEME, SCHEME_LEN) == 0) {
                        const char *rule = NULL;
                        if (spiffe_id_check(a, n, &rule) < 0) {
                                err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES", "TRUSTED_PROXIES: \"%.*s\" is not a SPIFFE ID (%s)",
                                         (int)(n > 200 ? 200 : n), a, rule);
                                goto fail;
                        }
                        if (pl.n_ids == TRUSTED_PROXIES_MAX) {
                                err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES", "TRUSTED_PROXIES: more than %d SPIFFE IDs",
                                         TRUSTED_PROXIES_MAX);
                                goto fail;
                        }
                        pl.ids[pl.n_ids] = strndup(a, n);
                        if (!pl.ids[pl.n_ids]) {
                                err_fail_field(err, HXS_ERR_INTERNAL, -ENOMEM, "TRUSTED_PROXIES", "TRUSTED_PROXIES: out of memory");
                                goto fail;
                        }
                        pl.n_ids++;
                        continue;
                }
                if (n >= sizeof(item)) {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES",
                                 "TRUSTED_PROXIES: \"%.40s...\" is not unix, an IP address or a SPIFFE ID", a);
                        goto fail;
                }
                memcpy(item, a, n);
                item[n] = '\0';
                if (strcmp(item, "unix") == 0) {
                        pl.unix_peers = true;
                        continue;
                }
                if (pl.n == TRUSTED_PROXIES_MAX) {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES", "TRUSTED_PROXIES: more than %d addresses", TRUSTED_PROXIES_MAX);
                        goto fail;
                }
                if (inet_pton(AF_INET, item, pl.addrs[pl.n].addr) == 1) {
                        pl.addrs[pl.n++].family = AF_INET;
                } else if (inet_pton(AF_INET6, item, pl.addrs[pl.n].addr) == 1) {
                        pl.addrs[pl.n++].family = AF_INET6;
                } else {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TRUSTED_PROXIES",
                                 "TRUSTED_PROXIES: \"%s\" is not unix, a numeric IP address (no names, no networks) "
                                 "or a SPIFFE ID",
                                 item);
                        goto fail;
                }
        }
        *ret = pl;
        return 0;
fail:
        proxies_free(&pl);
        return -EINVAL;
}

bool proxies_by_address(const proxy_list *pl)
{
        return pl->unix_peers || pl->n > 0;
}

bool proxies_by_id(const proxy_list *pl)
{
        return pl->n_ids > 0;
}

bool proxies_match_id(const proxy_list *pl, const char *id)
{
        if (!id || !id[0])
                return false;
        for (size_t i = 0; i < pl->n_ids; i++)
                if (strcmp(pl->ids[i], id) == 0)
                        return true;
        return false;
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

/* ---- SPIFFE_TRUST_BUNDLES and whose CA is whose ---------------------------------- */

void bundles_free(bundle_list *bl)
{
        if (!bl)
                return;
        for (size_t i = 0; i < bl->n; i++)
                free(bl->e[i].path);
        bl->n = 0;
}

int bundles_parse(const char *text, bundle_list *ret, hxs_error *err)
{
        bundle_list bl;
        const char *p = text;
        const char *a;
        size_t n;

        bl.n = 0;
        while (next_item(&p, &a, &n)) {
                if (n == 0)
                        continue;
                int shown = (int)(n > 200 ? 200 : n);
                const char *eq = memchr(a, '=', n);
                if (!eq) {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_BUNDLES",
                                 "SPIFFE_TRUST_BUNDLES: \"%.*s\" is not trust-domain=/path/to/bundle.pem", shown, a);
                        goto fail;
                }
                size_t td_len = (size_t)(eq - a);
                const char *path = eq + 1;
                size_t path_len = n - td_len - 1;
                const char *rule = NULL;
                if (td_len >= SCHEME_LEN && memcmp(a, SCHEME, SCHEME_LEN) == 0) {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_BUNDLES",
                                 "SPIFFE_TRUST_BUNDLES: \"%.*s\": write the trust domain without spiffe:// (prod.example=/path)",
                                 shown, a);
                        goto fail;
                }
                if (trust_domain_check(a, td_len, &rule) < 0) {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_BUNDLES", "SPIFFE_TRUST_BUNDLES: \"%.*s\": %s", shown, a, rule);
                        goto fail;
                }
                if (path_len == 0 || path[0] != '/' || path_len > 255 || memchr(path, '\0', path_len)) {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_BUNDLES",
                                 "SPIFFE_TRUST_BUNDLES: \"%.*s\": the bundle must be an absolute path of at most 255 bytes",
                                 shown, a);
                        goto fail;
                }
                for (size_t i = 0; i < bl.n; i++)
                        if (strlen(bl.e[i].td) == td_len && memcmp(bl.e[i].td, a, td_len) == 0) {
                                err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_BUNDLES",
                                         "SPIFFE_TRUST_BUNDLES: trust domain %.*s is listed twice; put all its CAs in one file",
                                         (int)td_len, a);
                                goto fail;
                        }
                if (bl.n == TRUST_BUNDLES_MAX) {
                        err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_BUNDLES", "SPIFFE_TRUST_BUNDLES: more than %d trust domains", TRUST_BUNDLES_MAX);
                        goto fail;
                }
                memcpy(bl.e[bl.n].td, a, td_len);
                bl.e[bl.n].td[td_len] = '\0';
                bl.e[bl.n].path = strndup(path, path_len);
                if (!bl.e[bl.n].path) {
                        err_fail_field(err, HXS_ERR_INTERNAL, -ENOMEM, "SPIFFE_TRUST_BUNDLES", "SPIFFE_TRUST_BUNDLES: out of memory");
                        goto fail;
                }
                bl.n++;
        }
        *ret = bl;
        return 0;
fail:
        bundles_free(&bl);
        return -EINVAL;
}

int ca_trust_domain(const ca_facts *f, char *ret, size_t cap, hxs_error *err)
{
        char named[SPIFFE_TD_MAX + 1] = "";

        for (size_t i = 0; i < f->n_uris; i++) {
                const char *u = f->uris[i];
                size_t n = f->uri_lens[i];
                char td[SPIFFE_TD_MAX + 1];
                if (n < SCHEME_LEN || strncasecmp(u, SCHEME, SCHEME_LEN) != 0)
                        continue; /* another kind of URI says nothing about SPIFFE */
                const char *rule = NULL;
                if (memchr(u, '\0', n) || spiffe_id_check(u, n, &rule) < 0 ||
                    spiffe_trust_domain(u, n, td, sizeof(td)) < 0) {
                        return err_fail(err, HXS_ERR_INVALID, -EINVAL, "its URI SAN \"%.*s\" is not a valid SPIFFE ID (%s)",
                                 (int)(n > 200 ? 200 : n), u, rule ? rule : "NUL byte");
                }
                if (named[0] && strcmp(named, td) != 0) {
                        return err_fail(err, HXS_ERR_INVALID, -EINVAL, "it names two trust domains, %s and %s", named, td);
                }
                memcpy(named, td, strlen(td) + 1);
        }
        const char *td;
        if (f->bundle_td) {
                if (named[0] && strcmp(named, f->bundle_td) != 0) {
                        return err_fail(err, HXS_ERR_INVALID, -EINVAL,
                                 "it names trust domain %s, but this is the bundle of %s (SPIFFE_TRUST_BUNDLES)",
                                 named, f->bundle_td);
                }
                td = f->bundle_td;
        } else if (named[0]) {
                if (f->issuer_td && strcmp(f->issuer_td, named) != 0) {
                        err_fail(err, HXS_ERR_INVALID, -EINVAL,
                                 "it names trust domain %s but was issued by a CA of trust domain %s; "
                                 "list each trust domain's CAs in SPIFFE_TRUST_BUNDLES",
                                 named, f->issuer_td);
                        return -EINVAL;
                }
                td = named;
        } else if (f->issuer_td) {
                td = f->issuer_td;
        } else if (f->own_td && f->own_td[0]) {
                td = f->own_td;
        } else {
                return err_fail(err, HXS_ERR_INVALID, -EINVAL,
                         "it names no trust domain (no spiffe:// URI SAN) and the service's own trust domain "
                         "is unknown (TLS_CERT_FILE has no SPIFFE ID): set SPIFFE_TRUST_DOMAIN, or list the "
                         "CA under its trust domain in SPIFFE_TRUST_BUNDLES");
        }
        if (strlen(td) >= cap || trust_domain_check(td, strlen(td), NULL) < 0) {
                return err_fail(err, HXS_ERR_INVALID, -EINVAL, "trust domain \"%.*s\" is not valid", 200, td);
        }
        memcpy(ret, td, strlen(td) + 1);
        return 0;
}
