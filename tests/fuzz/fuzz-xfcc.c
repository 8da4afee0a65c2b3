/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the caller identity parsers of src/server/identity.c, which read what
 * a proxy (X-Forwarded-Client-Cert) and an operator (AUTH_ALLOW, TRUSTED_PROXIES)
 * wrote.
 *
 * Input: the header value, optionally followed by a NUL byte and an AUTH_ALLOW text
 * (then used for TRUSTED_PROXIES too).
 *
 * Invariants: xfcc_caller never writes past its buffer and answers 0, -ENOENT or
 * -EINVAL; on 0 the ID is a NUL-terminated valid SPIFFE ID that fits the buffer,
 * printable, without quotes or backslashes, and with a small buffer it is refused
 * rather than cut; an allowlist that parses matches only valid SPIFFE IDs, matches
 * every exact entry's own text, and never matches a trust domain's look-alike
 * ("spiffe://td" must not match "spiffe://tdx").
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
        char msg[400];
        if (allowlist_parse(a, &al, msg, sizeof(msg)) == 0) {
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
        if (proxies_parse(a, &pl, msg, sizeof(msg)) == 0) {
                CHECK(pl.n <= TRUSTED_PROXIES_MAX);
                CHECK(!proxies_match(&pl, NULL));
                struct sockaddr_un un = { .sun_family = AF_UNIX };
                CHECK(proxies_match(&pl, (struct sockaddr *)&un) == pl.unix_peers);
        } else {
                CHECK(strncmp(msg, "TRUSTED_PROXIES", 15) == 0);
        }
        free(a);
        return 0;
}
