/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the caller identity parsers of src/server/identity.c, which read what
 * a proxy (X-Forwarded-Client-Cert) and an operator (AUTH_ALLOW, TRUSTED_PROXIES)
 * wrote.
 *
 * Input: the header value, optionally followed by a NUL byte and an AUTH_ALLOW text
 * (then used for TRUSTED_PROXIES and SPIFFE_TRUST_BUNDLES too, and, split at commas,
 * as the URI SANs of a CA whose bundle, issuer and own trust domains the first bytes
 * pick).
 *
 * Invariants: xfcc_caller never writes past its buffer and answers 0, -ENOENT or
 * -EINVAL; on 0 the ID is a NUL-terminated valid SPIFFE ID that fits the buffer,
 * printable, without quotes or backslashes, and with a small buffer it is refused
 * rather than cut; xfcc_parse agrees with it on the ID, and its Cert and Chain are
 * NUL-terminated, without NUL inside, at most XFCC_CERT_MAX bytes; an allowlist that
 * parses matches only valid SPIFFE IDs, matches every exact entry's own text, and never
 * matches a trust domain's look-alike ("spiffe://td" must not match "spiffe://tdx");
 * proxy IDs are valid SPIFFE IDs and match themselves; trust bundles name valid,
 * distinct trust domains and absolute paths; a CA is given the bundle's trust domain,
 * else the one its SPIFFE URI names, else its issuer's, else the service's own, and
 * never one that is not a valid trust domain.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "server/identity.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *in = (const char *)data;
        const char *nul = memchr(in, '\0', size);
        size_t hlen = nul ? (size_t)(nul - in) : size;
        char id[SPIFFE_ID_MAX + 1];
        const char *rule = NULL;

        /* The header, from a copy of exactly its bytes (ASan sees any overread). */
        char *h = malloc(hlen ? hlen : 1);
        CHECK(h != NULL);
        memcpy(h, in, hlen);
        int r = xfcc_caller(h, hlen, id, sizeof(id), &rule);
        CHECK(r == 0 || r == -ENOENT || r == -EINVAL);
        if (r == 0) {
                size_t n = strnlen(id, sizeof(id));
                CHECK(n < sizeof(id));
                CHECK(spiffe_id_check(id, n, NULL) == 0);
                for (size_t i = 0; i < n; i++)
                        CHECK(id[i] > 0x20 && id[i] < 0x7f && id[i] != '"' && id[i] != '\\');
                /* too small a buffer: refused, never truncated */
                char small[16];
                int r2 = xfcc_caller(h, hlen, small, sizeof(small), NULL);
                if (n < sizeof(small))
                        CHECK(r2 == 0 && strcmp(small, id) == 0);
                else
                        CHECK(r2 == -EINVAL);
        } else {
                CHECK(rule != NULL);
        }
        xfcc_client xc;
        const char *rule2 = NULL;
        int rp = xfcc_parse(h, hlen, &xc, &rule2);
        CHECK(rp == 0 || rp == -ENOENT || rp == -EINVAL);
        if (rp == 0) {
                CHECK(xc.id[0] || xc.cert || xc.chain);
                if (xc.id[0])
                        CHECK(spiffe_id_check(xc.id, strlen(xc.id), NULL) == 0);
                CHECK(r == 0 ? strcmp(xc.id, id) == 0 : (r == -ENOENT && !xc.id[0]));
                if (xc.cert)
                        CHECK(xc.cert_len && xc.cert_len <= XFCC_CERT_MAX && strlen(xc.cert) == xc.cert_len);
                if (xc.chain)
                        CHECK(xc.chain_len && xc.chain_len <= XFCC_CERT_MAX && strlen(xc.chain) == xc.chain_len);
        } else {
                CHECK(rule2 != NULL && !xc.cert && !xc.chain && !xc.id[0]);
                CHECK(r == rp || r == -EINVAL);
        }
        xfcc_client_free(&xc);
        free(h);

        if (!nul)
                return 0;
        /* AUTH_ALLOW and TRUSTED_PROXIES from the rest, as a C string. */
        size_t alen = size - hlen - 1;
        char *a = malloc(alen + 1);
        CHECK(a != NULL);
        memcpy(a, nul + 1, alen);
        a[alen] = '\0';
        allowlist al = { 0 };
        hxs_error err = { 0 };
        char *msg = err.message;
        if (allowlist_parse(a, "AUTH_ALLOW", &al, &err) == 0) {
                for (size_t i = 0; i < al.n; i++) {
                        const allow_entry *e = &al.entries[i];
                        CHECK(spiffe_id_check(e->text, e->len, NULL) == 0);
                        if (e->kind == ALLOW_EXACT || e->kind == ALLOW_TRUST_DOMAIN)
                                CHECK(allowlist_match(&al, e->text));
                        if (e->kind == ALLOW_TRUST_DOMAIN && e->len < SPIFFE_ID_MAX) {
                                /* a look-alike trust domain */
                                char x[SPIFFE_ID_MAX + 2];
                                memcpy(x, e->text, e->len);
                                x[e->len] = 'x';
                                x[e->len + 1] = '\0';
                                bool listed = false;
                                for (size_t j = 0; j < al.n; j++)
                                        listed |= al.entries[j].kind == ALLOW_TRUST_DOMAIN &&
                                                  strcmp(al.entries[j].text, x) == 0;
                                if (!listed)
                                        CHECK(!allowlist_match(&al, x));
                        }
                }
                if (r == 0 && allowlist_match(&al, id))
                        CHECK(spiffe_id_check(id, strlen(id), NULL) == 0);
                CHECK(!allowlist_match(&al, ""));
                allowlist_free(&al);
        } else {
                CHECK(strncmp(msg, "AUTH_ALLOW", 10) == 0);
        }
        proxy_list pl;
        if (proxies_parse(a, &pl, &err) == 0) {
                CHECK(pl.n <= TRUSTED_PROXIES_MAX && pl.n_ids <= TRUSTED_PROXIES_MAX);
                CHECK(!proxies_match(&pl, NULL));
                struct sockaddr_un un = { .sun_family = AF_UNIX };
                CHECK(proxies_match(&pl, (struct sockaddr *)&un) == pl.unix_peers);
                for (size_t i = 0; i < pl.n_ids; i++) {
                        CHECK(spiffe_id_check(pl.ids[i], strlen(pl.ids[i]), NULL) == 0);
                        CHECK(proxies_match_id(&pl, pl.ids[i]));
                }
                CHECK(!proxies_match_id(&pl, ""));
                CHECK(proxies_by_address(&pl) == (pl.unix_peers || pl.n > 0));
                proxies_free(&pl);
        } else {
                CHECK(strncmp(msg, "TRUSTED_PROXIES", 15) == 0);
        }

        bundle_list *bl = malloc(sizeof(*bl));
        CHECK(bl != NULL);
        if (bundles_parse(a, bl, &err) == 0) {
                CHECK(bl->n <= TRUST_BUNDLES_MAX);
                for (size_t i = 0; i < bl->n; i++) {
                        CHECK(trust_domain_check(bl->e[i].td, strlen(bl->e[i].td), NULL) == 0);
                        CHECK(bl->e[i].path[0] == '/' && strlen(bl->e[i].path) <= 255);
                        for (size_t j = 0; j < i; j++)
                                CHECK(strcmp(bl->e[i].td, bl->e[j].td) != 0);
                }
                bundles_free(bl);
        } else {
                CHECK(strncmp(msg, "SPIFFE_TRUST_BUNDLES", 20) == 0);
        }
        free(bl);

        /* The rest as a CA's URI SANs; its first bytes pick the other trust domains. */
        static const char *const tds[] = { NULL, "prod.example", "partner.example", "", "Bad.TD" };
        const char *uris[8];
        size_t lens[8], n_uris = 0;
        for (char *p = a; *p && n_uris < 8;) {
                char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                uris[n_uris] = p;
                lens[n_uris++] = n;
                p += n + (comma ? 1 : 0);
        }
        unsigned pick = alen ? (unsigned char)a[0] : 0;
        ca_facts f = { .uris = uris, .uri_lens = lens, .n_uris = n_uris,
                       .bundle_td = tds[pick % 5], .issuer_td = tds[(pick / 5) % 5],
                       .own_td = tds[(pick / 25) % 5] };
        if (f.bundle_td && trust_domain_check(f.bundle_td, strlen(f.bundle_td), NULL) < 0)
                f.bundle_td = NULL; /* the callers only pass checked ones */
        if (f.issuer_td && trust_domain_check(f.issuer_td, strlen(f.issuer_td), NULL) < 0)
                f.issuer_td = NULL;
        char td[SPIFFE_TD_MAX + 1];
        msg[0] = '\0';
        if (ca_trust_domain(&f, td, sizeof(td), &err) == 0) {
                CHECK(trust_domain_check(td, strlen(td), NULL) == 0);
                if (f.bundle_td)
                        CHECK(strcmp(td, f.bundle_td) == 0);
                else if (f.issuer_td)
                        CHECK(strcmp(td, f.issuer_td) == 0); /* named or inherited, never another */
                /* a valid SPIFFE URI among the SANs names the result */
                for (size_t i = 0; i < n_uris; i++) {
                        char named[SPIFFE_TD_MAX + 1];
                        if (spiffe_trust_domain(uris[i], lens[i], named, sizeof(named)) == 0)
                                CHECK(strcmp(td, named) == 0);
                }
        } else {
                CHECK(msg[0] != '\0');
        }
        free(a);
        return 0;
}
