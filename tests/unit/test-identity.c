/* SPDX-License-Identifier: Apache-2.0 */
/* Caller identity parsers: SPIFFE ID syntax, X-Forwarded-Client-Cert (including the
 * nasty inputs a client or a confused proxy may send, and the certificates it forwards),
 * AUTH_ALLOW, TRUSTED_PROXIES, SPIFFE_TRUST_BUNDLES, and which trust domain a CA of a
 * bundle belongs to. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <cmocka.h>

#include "server/identity.h"

static int check(const char *s)
{
        return spiffe_id_check(s, strlen(s), NULL);
}

static void test_spiffe_ids(void **state)
{
        static const char *const good[] = {
                "spiffe://example.org",
                "spiffe://example.org/a",
                "spiffe://example.org/ns/prod/sa/agent-1",
                "spiffe://a-b_c.d9/A.b-C_d/x...y",
                "spiffe://td/..a/a..",
        };
        static const char *const bad[] = {
                "", "spiffe:", "spiffe://", "spiffe:///a", "SPIFFE://example.org/a",
                "spiffe://Example.org/a", "spiffe://example.org/", "spiffe://example.org//a",
                "spiffe://example.org/a/", "spiffe://example.org/./a", "spiffe://example.org/a/..",
                "spiffe://example.org:8443/a", "spiffe://user@example.org/a",
                "spiffe://example.org/a?b", "spiffe://example.org/a#b", "spiffe://example.org/a%20b",
                "spiffe://example.org/a b", "https://example.org/a", "spiffe:/example.org/a",
                "spiffe://exa mple.org", "spiffe://example.org/\xc3\xa9",
        };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                assert_int_equal(check(good[i]), 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *rule = NULL;
                assert_int_equal(spiffe_id_check(bad[i], strlen(bad[i]), &rule), -EINVAL);
                assert_non_null(rule);
        }
        /* embedded NUL: the length counts, not the C string */
        assert_int_equal(spiffe_id_check("spiffe://a/b\0c", 14, NULL), -EINVAL);

        /* lengths: 2048 in all is fine, one more is not; trust domain at most 255 */
        char id[2100];
        memcpy(id, "spiffe://td/", 12);
        memset(id + 12, 'a', sizeof(id) - 12);
        assert_int_equal(spiffe_id_check(id, 2048, NULL), 0);
        assert_int_equal(spiffe_id_check(id, 2049, NULL), -EINVAL);
        char td[300] = "spiffe://";
        memset(td + 9, 'a', 256);
        td[9 + 256] = '\0';
        assert_int_equal(check(td), -EINVAL);
        td[9 + 255] = '\0';
        assert_int_equal(check(td), 0);
}

static int xf(const char *h, char *out, size_t cap)
{
        return xfcc_caller(h, strlen(h), out, cap, NULL);
}

static void test_xfcc_good(void **state)
{
        char id[SPIFFE_ID_MAX + 1];

        assert_int_equal(xf("By=spiffe://e/envoy;Hash=abc;URI=spiffe://td/a", id, sizeof(id)), 0);
        assert_string_equal(id, "spiffe://td/a");
        /* quoted values with separators and escapes around it */
        assert_int_equal(xf("Hash=1;Subject=\"CN=x,O=\\\"y;z\\\"\";URI=\"spiffe://td/b\";DNS=a", id, sizeof(id)), 0);
        assert_string_equal(id, "spiffe://td/b");
        /* several hops: the last element wins */
        assert_int_equal(xf("URI=spiffe://td/first,By=x;URI=spiffe://td/second", id, sizeof(id)), 0);
        assert_string_equal(id, "spiffe://td/second");
        /* a comma inside quotes is not an element boundary */
        assert_int_equal(xf("URI=spiffe://td/c;Subject=\"a,URI=spiffe://td/evil\"", id, sizeof(id)), 0);
        assert_string_equal(id, "spiffe://td/c");
        /* key case, spaces after separators */
        assert_int_equal(xf("by=x; uri=spiffe://td/d", id, sizeof(id)), 0);
        assert_string_equal(id, "spiffe://td/d");
}

static void test_xfcc_bad(void **state)
{
        char id[SPIFFE_ID_MAX + 1];
        static const char *const malformed[] = {
                "",                                     /* empty */
                "URI",                                  /* no = */
                "=spiffe://td/a",                       /* no key */
                "URI=\"spiffe://td/a",                  /* unterminated */
                "URI=\"spiffe://td/a\\",                /* escape at the end */
                "URI=\"spiffe://td/a\"x",               /* junk after the quote */
                "URI=spi\"ffe://td/a",                  /* quote inside a token */
                "URI=spiffe://td/a\\b",                 /* backslash inside a token */
                "URI=spiffe://td/a;URI=spiffe://td/b",  /* two identities */
                "URI=spiffe://TD/a",                    /* not a SPIFFE ID */
                "URI=spiffe://td/a/../b",
                "URI=https://td/a",
                "URI=spiffe://td/a b",
                "URI=\"spiffe://td/a\\\"b\"",           /* unescapes to a quote */
                "URI=spiffe://td/a,,",                  /* empty element */
                "URI=spiffe://td/a;;Hash=1",
                "URI-x=1",
                "Hash=1;;",
        };
        for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
                const char *rule = NULL;
                int r = xfcc_caller(malformed[i], strlen(malformed[i]), id, sizeof(id), &rule);
                if (r != -EINVAL)
                        fail_msg("accepted \"%s\" (%d, %s)", malformed[i], r, id);
                assert_non_null(rule);
                assert_string_equal(id, "");
        }
        /* no URI in the last element: nobody, even if an earlier hop had one */
        assert_int_equal(xf("URI=spiffe://td/a,By=x;Hash=1", id, sizeof(id)), -ENOENT);
        assert_int_equal(xf("By=x;URI=", id, sizeof(id)), -ENOENT);
        assert_int_equal(xf("By=x;URI=\"\"", id, sizeof(id)), -ENOENT);
        /* a NUL byte inside the header's bytes */
        assert_int_equal(xfcc_caller("URI=spiffe://td/a\0b", 19, id, sizeof(id), NULL), -EINVAL);
        /* an over-long URI is refused, not cut */
        size_t n = 4 + 9 + 3000;
        char *h = malloc(n + 1);
        assert_non_null(h);
        memcpy(h, "URI=spiffe://td/", 16);
        memset(h + 16, 'a', n - 16);
        h[n] = '\0';
        assert_int_equal(xf(h, id, sizeof(id)), -EINVAL);
        free(h);
        /* a buffer too small: refused, not truncated */
        char small[8];
        assert_int_equal(xf("URI=spiffe://td/abc", small, sizeof(small)), -EINVAL);
        /* the header's length is respected: no read past it */
        const char *full = "URI=spiffe://td/abcdef";
        assert_int_equal(xfcc_caller(full, 19, id, sizeof(id), NULL), 0);
        assert_string_equal(id, "spiffe://td/abc");
        /* thousands of elements and quotes do not blow anything up */
        size_t big = 200000;
        char *many = malloc(big + 32);
        assert_non_null(many);
        size_t o = 0;
        while (o + 8 < big) {
                memcpy(many + o, "A=\"\\\"\",", 7);
                o += 7;
        }
        memcpy(many + o, "URI=spiffe://td/z", 18);
        assert_int_equal(xf(many, id, sizeof(id)), 0);
        assert_string_equal(id, "spiffe://td/z");
        free(many);
}

static void test_allowlist(void **state)
{
        allowlist al = { 0 };
        hxs_error err = { 0 };
        char *msg = err.message;

        assert_int_equal(allowlist_parse(" spiffe://prod.example/agents/* , spiffe://partner.test,"
                                         "spiffe://prod.example/ops/admin,", "AUTH_ALLOW", &al, &err), 0);
        assert_int_equal(al.n, 3);
        assert_true(allowlist_match(&al, "spiffe://prod.example/agents/a"));
        assert_true(allowlist_match(&al, "spiffe://prod.example/agents/a/b"));
        assert_false(allowlist_match(&al, "spiffe://prod.example/agents"));
        assert_false(allowlist_match(&al, "spiffe://prod.example/agentsX/a"));
        assert_true(allowlist_match(&al, "spiffe://partner.test"));
        assert_true(allowlist_match(&al, "spiffe://partner.test/anything/at/all"));
        assert_false(allowlist_match(&al, "spiffe://partner.testx/a"));
        assert_false(allowlist_match(&al, "spiffe://xpartner.test/a"));
        assert_true(allowlist_match(&al, "spiffe://prod.example/ops/admin"));
        assert_false(allowlist_match(&al, "spiffe://prod.example/ops/admin/x"));
        assert_false(allowlist_match(&al, "spiffe://prod.example/ops"));
        assert_false(allowlist_match(&al, ""));
        assert_false(allowlist_match(&al, "spiffe://prod.example/agents/../ops/admin"));
        assert_false(allowlist_match(&al, "spiffe://prod.example/agents/"));
        allowlist_free(&al);
        allowlist_free(&al); /* twice is harmless */

        static const char *const bad[] = {
                "example.org", "spiffe://example.org/*", "spiffe://Example.org",
                "spiffe://example.org/a/*/b", "spiffe://example.org/a*", "spiffe://e/a/../b",
                "*", "spiffe://e/a, nope",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                msg[0] = '\0';
                assert_int_equal(allowlist_parse(bad[i], "AUTH_ALLOW", &al, &err), -EINVAL);
                assert_non_null(strstr(msg, "AUTH_ALLOW"));
        }
        /* empty: nobody */
        assert_int_equal(allowlist_parse("", "AUTH_ALLOW", &al, &err), 0);
        assert_int_equal(al.n, 0);
        assert_false(allowlist_match(&al, "spiffe://a/b"));
        allowlist_free(&al);
}

static void test_proxies(void **state)
{
        proxy_list pl;
        hxs_error err = { 0 };
        char *msg = err.message;
        struct sockaddr_in in = { .sin_family = AF_INET };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
        struct sockaddr_un un = { .sun_family = AF_UNIX };

        assert_int_equal(proxies_parse("unix, 10.1.2.3 ,fd00::1", &pl, &err), 0);
        assert_true(pl.unix_peers);
        assert_int_equal(pl.n, 2);
        assert_true(proxies_match(&pl, (struct sockaddr *)&un));
        assert_false(proxies_match(&pl, NULL));
        inet_pton(AF_INET, "10.1.2.3", &in.sin_addr);
        assert_true(proxies_match(&pl, (struct sockaddr *)&in));
        inet_pton(AF_INET, "10.1.2.4", &in.sin_addr);
        assert_false(proxies_match(&pl, (struct sockaddr *)&in));
        inet_pton(AF_INET6, "::ffff:10.1.2.3", &in6.sin6_addr); /* dual-stack socket */
        assert_true(proxies_match(&pl, (struct sockaddr *)&in6));
        inet_pton(AF_INET6, "fd00::1", &in6.sin6_addr);
        assert_true(proxies_match(&pl, (struct sockaddr *)&in6));
        inet_pton(AF_INET6, "fd00::2", &in6.sin6_addr);
        assert_false(proxies_match(&pl, (struct sockaddr *)&in6));

        assert_int_equal(proxies_parse("10.1.2.3", &pl, &err), 0);
        assert_false(proxies_match(&pl, (struct sockaddr *)&un)); /* unix not listed */

        static const char *const bad[] = { "localhost", "10.0.0.0/8", "10.1.2.3:80", "unix:/x", "*",
                                           "[::1]", "spiffe://td/envoy/", "spiffe://TD/envoy",
                                           "10.1.2.3, spiffe://td/a/../b" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(proxies_parse(bad[i], &pl, &err), -EINVAL);
                assert_non_null(strstr(msg, "TRUSTED_PROXIES"));
        }

        /* the proxy's own SPIFFE ID, exact */
        assert_int_equal(proxies_parse("127.0.0.1, spiffe://prod.example/envoy", &pl, &err), 0);
        assert_true(proxies_by_address(&pl) && proxies_by_id(&pl));
        assert_true(proxies_match_id(&pl, "spiffe://prod.example/envoy"));
        assert_false(proxies_match_id(&pl, "spiffe://prod.example/envoy/x"));
        assert_false(proxies_match_id(&pl, "spiffe://prod.example"));
        assert_false(proxies_match_id(&pl, ""));
        assert_false(proxies_match_id(&pl, NULL));
        proxies_free(&pl);
        assert_int_equal(proxies_parse("spiffe://prod.example/envoy", &pl, &err), 0);
        assert_false(proxies_by_address(&pl));
        assert_false(proxies_match(&pl, (struct sockaddr *)&un));
        proxies_free(&pl);
        proxies_free(&pl); /* twice is harmless */
}

static void test_trust_domains(void **state)
{
        char td[SPIFFE_TD_MAX + 1];

        assert_int_equal(trust_domain_check("prod.example", 12, NULL), 0);
        assert_int_equal(trust_domain_check("Prod.example", 12, NULL), -EINVAL);
        assert_int_equal(trust_domain_check("", 0, NULL), -EINVAL);
        assert_int_equal(trust_domain_check("a/b", 3, NULL), -EINVAL);
        assert_int_equal(spiffe_trust_domain("spiffe://prod.example/agents/a", 30, td, sizeof(td)), 0);
        assert_string_equal(td, "prod.example");
        assert_int_equal(spiffe_trust_domain("spiffe://prod.example", 21, td, sizeof(td)), 0);
        assert_string_equal(td, "prod.example");
        assert_int_equal(spiffe_trust_domain("spiffe://prod.example/", 22, td, sizeof(td)), -EINVAL);
        assert_int_equal(spiffe_trust_domain("https://prod.example/a", 22, td, sizeof(td)), -EINVAL);
        assert_int_equal(spiffe_trust_domain("spiffe://prod.example/a", 23, td, 5), -EINVAL);
}

static void test_bundles(void **state)
{
        bundle_list bl;
        hxs_error err = { 0 };
        char *msg = err.message;

        assert_int_equal(bundles_parse(" prod.example=/etc/b/prod.pem , partner.example=/etc/b/p.pem,", &bl, &err), 0);
        assert_int_equal(bl.n, 2);
        assert_string_equal(bl.e[0].td, "prod.example");
        assert_string_equal(bl.e[0].path, "/etc/b/prod.pem");
        assert_string_equal(bl.e[1].td, "partner.example");
        bundles_free(&bl);
        assert_int_equal(bundles_parse("", &bl, &err), 0);
        assert_int_equal(bl.n, 0);

        static const struct { const char *text, *needle; } bad[] = {
                { "prod.example", "trust-domain=/path" },
                { "=/x.pem", "empty trust domain" },
                { "Prod.example=/x.pem", "character outside" },
                { "spiffe://prod.example=/x.pem", "without spiffe://" },
                { "prod.example/x=/x.pem", "character outside" },
                { "prod.example=x.pem", "absolute path" },
                { "prod.example=", "absolute path" },
                { "prod.example=/a.pem,prod.example=/b.pem", "listed twice" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                msg[0] = '\0';
                assert_int_equal(bundles_parse(bad[i].text, &bl, &err), -EINVAL);
                assert_non_null(strstr(msg, "SPIFFE_TRUST_BUNDLES"));
                if (!strstr(msg, bad[i].needle))
                        fail_msg("%s: %s", bad[i].text, msg);
        }
        /* at most TRUST_BUNDLES_MAX */
        char many[TRUST_BUNDLES_MAX * 24 + 64] = "";
        for (int i = 0; i <= TRUST_BUNDLES_MAX; i++)
                snprintf(many + strlen(many), sizeof(many) - strlen(many), "t%d=/b.pem,", i);
        assert_int_equal(bundles_parse(many, &bl, &err), -EINVAL);
        assert_non_null(strstr(msg, "more than 64"));
}

/* ca_trust_domain for one CA with the given URI SANs. */
static int attribute(const char *bundle_td, const char *issuer_td, const char *own_td, char *td,
                     char *msg, size_t n, ...)
{
        const char *uris[8];
        size_t lens[8];
        va_list ap;

        va_start(ap, n);
        for (size_t i = 0; i < n; i++) {
                uris[i] = va_arg(ap, const char *);
                lens[i] = strlen(uris[i]);
        }
        va_end(ap);
        ca_facts f = { .uris = uris, .uri_lens = lens, .n_uris = n, .bundle_td = bundle_td,
                       .issuer_td = issuer_td, .own_td = own_td };
        td[0] = '\0';
        hxs_error err = { 0 };
        int r = ca_trust_domain(&f, td, SPIFFE_TD_MAX + 1, &err);
        snprintf(msg, 600, "%s", err.message);
        return r;
}

static void test_ca_attribution(void **state)
{
        char td[SPIFFE_TD_MAX + 1], msg[600];

        /* TLS_CLIENT_CA_FILE: the CA's own SPIFFE URI decides... */
        assert_int_equal(attribute(NULL, NULL, "own.example", td, msg, 1, "spiffe://partner.example"), 0);
        assert_string_equal(td, "partner.example");
        assert_int_equal(attribute(NULL, NULL, NULL, td, msg, 2, "https://ca.example/about",
                                   "spiffe://partner.example/ca/1"), 0);
        assert_string_equal(td, "partner.example");
        assert_int_equal(attribute(NULL, NULL, NULL, td, msg, 2, "spiffe://partner.example",
                                   "spiffe://partner.example/x"), 0);
        assert_string_equal(td, "partner.example");
        /* ...else its issuer's, when the issuer is in the file (an intermediate)... */
        assert_int_equal(attribute(NULL, "partner.example", "own.example", td, msg, 0), 0);
        assert_string_equal(td, "partner.example");
        assert_int_equal(attribute(NULL, "partner.example", NULL, td, msg, 1, "spiffe://partner.example"), 0);
        assert_string_equal(td, "partner.example");
        /* ...else the service's own */
        assert_int_equal(attribute(NULL, NULL, "own.example", td, msg, 0), 0);
        assert_string_equal(td, "own.example");
        assert_int_equal(attribute(NULL, NULL, "own.example", td, msg, 1, "urn:x:y"), 0);
        assert_string_equal(td, "own.example");
        /* nothing says: refused, saying what to set */
        assert_int_equal(attribute(NULL, NULL, NULL, td, msg, 0), -EINVAL);
        assert_non_null(strstr(msg, "SPIFFE_TRUST_DOMAIN"));
        assert_non_null(strstr(msg, "SPIFFE_TRUST_BUNDLES"));
        assert_int_equal(attribute(NULL, NULL, "", td, msg, 0), -EINVAL);
        /* ambiguous or wrong */
        assert_int_equal(attribute(NULL, NULL, "own.example", td, msg, 2, "spiffe://a.example",
                                   "spiffe://b.example"), -EINVAL);
        assert_non_null(strstr(msg, "two trust domains"));
        assert_int_equal(attribute(NULL, "prod.example", "prod.example", td, msg, 1, "spiffe://partner.example"),
                         -EINVAL);
        assert_non_null(strstr(msg, "issued by a CA of trust domain prod.example"));
        assert_int_equal(attribute(NULL, NULL, "own.example", td, msg, 1, "spiffe://Partner.example"), -EINVAL);
        assert_non_null(strstr(msg, "not a valid SPIFFE ID"));
        assert_int_equal(attribute(NULL, NULL, "own.example", td, msg, 1, "SPIFFE://partner.example"), -EINVAL);
        assert_int_equal(attribute(NULL, NULL, "own.example", td, msg, 1, "spiffe://partner.example/"), -EINVAL);
        assert_int_equal(td[0], '\0'); /* nothing written on failure */

        /* a SPIFFE_TRUST_BUNDLES file: its trust domain, whatever the issuer and own */
        assert_int_equal(attribute("partner.example", "prod.example", "prod.example", td, msg, 0), 0);
        assert_string_equal(td, "partner.example");
        assert_int_equal(attribute("partner.example", NULL, NULL, td, msg, 1, "spiffe://partner.example"), 0);
        assert_string_equal(td, "partner.example");
        assert_int_equal(attribute("partner.example", NULL, NULL, td, msg, 1, "spiffe://prod.example"), -EINVAL);
        assert_non_null(strstr(msg, "names trust domain prod.example, but this is the bundle of partner.example"));
}

static void test_xfcc_certificates(void **state)
{
        xfcc_client x;
        const char *rule = NULL;
        char h[512];

        /* Envoy's Cert= and Chain=: URL-encoded PEM, in the last element only */
        snprintf(h, sizeof(h), "By=spiffe://td/envoy;Hash=ab;Cert=\"%s\";Chain=\"%s\";URI=spiffe://td/a",
                 "-----BEGIN%20CERTIFICATE-----%0AMIIB%2Bab%2F%3D%3D%0A-----END%20CERTIFICATE-----%0A",
                 "AAA%0ABBB");
        assert_int_equal(xfcc_parse(h, strlen(h), &x, &rule), 0);
        assert_string_equal(x.id, "spiffe://td/a");
        assert_string_equal(x.cert, "-----BEGIN CERTIFICATE-----\nMIIB+ab/==\n-----END CERTIFICATE-----\n");
        assert_int_equal(x.cert_len, strlen(x.cert));
        assert_string_equal(x.chain, "AAA\nBBB");
        xfcc_client_free(&x);
        xfcc_client_free(&x);

        /* a certificate without URI=: the certificate will name the caller */
        assert_int_equal(xfcc_parse("Cert=abc+def", 12, &x, &rule), 0);
        assert_string_equal(x.id, "");
        assert_string_equal(x.cert, "abc+def"); /* '+' is itself (base64), not a space */
        assert_null(x.chain);
        xfcc_client_free(&x);

        /* an earlier hop's certificate is not this client's */
        const char *two = "Cert=first;URI=spiffe://td/a,By=x;URI=spiffe://td/b";
        assert_int_equal(xfcc_parse(two, strlen(two), &x, &rule), 0);
        assert_string_equal(x.id, "spiffe://td/b");
        assert_null(x.cert);
        xfcc_client_free(&x);
        const char *none = "Cert=first;URI=spiffe://td/a,By=x;Hash=1";
        assert_int_equal(xfcc_parse(none, strlen(none), &x, &rule), -ENOENT);

        static const struct { const char *h, *needle; } bad[] = {
                { "Cert=a;Cert=b;URI=spiffe://td/a", "more than one Cert" },
                { "Chain=a;chain=b", "more than one Chain" },
                { "Cert=%4;URI=spiffe://td/a", "URL-encoded" },
                { "Cert=%zz", "URL-encoded" },
                { "Cert=a%00b", "URL-encoded" },
                { "Cert=;URI=spiffe://td/a", "empty" },
                { "Cert=\"a;URI=spiffe://td/a", "unterminated" },
                { "Cert=x;URI=spiffe://td/a/../b", "path segment" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                rule = NULL;
                assert_int_equal(xfcc_parse(bad[i].h, strlen(bad[i].h), &x, &rule), -EINVAL);
                assert_non_null(rule);
                if (!strstr(rule, bad[i].needle))
                        fail_msg("%s: %s", bad[i].h, rule);
                assert_null(x.cert);
                assert_null(x.chain);
        }
        /* longer than XFCC_CERT_MAX decoded: refused, not cut */
        size_t n = XFCC_CERT_MAX + 16;
        char *big = malloc(n + 8);
        assert_non_null(big);
        memcpy(big, "Cert=", 5);
        memset(big + 5, 'A', n);
        assert_int_equal(xfcc_parse(big, n + 5, &x, &rule), -EINVAL);
        assert_non_null(strstr(rule, "48 KiB"));
        free(big);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_spiffe_ids),
                cmocka_unit_test(test_xfcc_good),
                cmocka_unit_test(test_xfcc_bad),
                cmocka_unit_test(test_allowlist),
                cmocka_unit_test(test_proxies),
                cmocka_unit_test(test_trust_domains),
                cmocka_unit_test(test_bundles),
                cmocka_unit_test(test_ca_attribution),
                cmocka_unit_test(test_xfcc_certificates),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
