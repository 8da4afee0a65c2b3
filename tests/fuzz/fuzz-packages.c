/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: packages= matching (src/pkg/packages.c): pkg_version_cmp,
 * pkg_normalize and pkg_check with fuzzed requirement strings that have not
 * been through hxs_request_validate.
 *
 * Input: newline-separated fields A, B, C, then requirement strings R... (up to 8).
 *   A, B, C   versions for the comparison; A is also the name and B the version of an
 *             extra distribution put first in the image index.
 *
 * Invariants:
 *  - pkg_version_cmp answers -1, 0 or 1, is reflexive and antisymmetric;
 *  - pkg_normalize is idempotent, NUL-terminates within the buffer, and yields
 *    lower case runs separated by single '-' (nothing else from -_.);
 *  - pkg_check answers 0 or -ENOENT (HXS_ERR_NOT_FOUND, field "packages");
 *  - for a plain name A and version B: "A", "A==B", "A>=B", "A<=B" and "A~=B" are
 *    satisfied by the extra distribution, "A!=B", "A<B" and "A>B" are not;
 *  - pkg_canonical accepts a requirement R exactly when request validation does,
 *    and then yields a spelling without spaces, no longer than R, that is its own
 *    canonical spelling, that the image check treats as R, and that spaces around
 *    R's commas do not change; when it refuses, it says why (-EINVAL and a reason);
 *    nothing it accepts ends in an archive extension or holds '/', ':' or '@'.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "pkg/packages.h"
#include "engine/request.h"
#include "fuzz.h"


#define MAX_FIELDS 11

static const pkg_req fixed[] = {
        { "numpy", "1.24.2" }, { "pandas", "1.5.3" }, { "requests", "2.28.1" },
        { "six", "1.16.0" },   { "pyyaml", "6.0" },   { "zope-interface", "5.5.2" },
        { "pre", "1.0rc1" },   { "post", "2.0.post1" }, { "empty", "" },
};

static void check_cmp(const char *a, const char *b)
{
        int ab = pkg_version_cmp(a, b), ba = pkg_version_cmp(b, a);
        CHECK(ab >= -1 && ab <= 1);
        if (ab != -ba)
                fprintf(stderr, "cmp(\"%s\", \"%s\") = %d but cmp(b, a) = %d\n", a, b, ab, ba);
        CHECK(ab == -ba);
}

static void check_normalize(const char *s)
{
        char out[64], again[64], small[4];
        size_t len = strlen(s);

        pkg_normalize(s, len, out, sizeof(out));
        CHECK(memchr(out, '\0', sizeof(out)) != NULL);
        size_t olen = strlen(out);
        for (const char *p = out; *p; p++) {
                CHECK(*p != '_' && *p != '.');
                CHECK(!isupper((unsigned char)*p));
                /* A '-' may end the name only where the buffer cut it. */
                if (*p == '-')
                        CHECK(p > out && p[-1] != '-' && (p[1] != '\0' || olen == sizeof(out) - 1));
        }
        if (olen < sizeof(out) - 2) {
                pkg_normalize(out, olen, again, sizeof(again));
                CHECK(strcmp(out, again) == 0);
        }
        /* A smaller buffer gets a prefix of the same name. */
        pkg_normalize(s, len, small, sizeof(small));
        CHECK(memchr(small, '\0', sizeof(small)) != NULL);
        CHECK(strncmp(out, small, strlen(small)) == 0);
}

/* A python request for one requirement, not validated. */
static hxs_request *request_of(const char *requirement)
{
        hxs_request *req = hxs_request_new();
        CHECK(req != NULL);
        CHECK(hxs_request_set_code(req, "", 0) == 0);
        CHECK(hxs_request_add_package(req, requirement) == 0);
        return req;
}

static int check_req(const pkg_index *idx, const char *requirement)
{
        hxs_request *req = request_of(requirement);
        hxs_error err;
        memset(&err, 0, sizeof(err));
        int r = pkg_check(idx, req, &err);
        if (r < 0) {
                CHECK(r == -ENOENT);
                CHECK(err.kind == HXS_ERR_NOT_FOUND);
                CHECK(strcmp(err.field, "packages") == 0);
                CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
        } else
                CHECK(r == 0);

        /* Other languages never get packages. */
        hxs_request_set_language(req, HXS_LANG_BASH);
        CHECK(pkg_check(idx, req, &err) == -EINVAL);
        hxs_request_free(req);
        return r;
}

static void check_canonical(const pkg_index *idx, const char *requirement)
{
        char out[256], again[256];
        const char *why = NULL;
        int r = pkg_canonical(requirement, out, sizeof(out), &why);

        /* the same answer as request validation gives */
        hxs_config cfg;
        hxs_config_defaults(&cfg);
        hxs_request *req = request_of(requirement);
        hxs_error err;
        memset(&err, 0, sizeof(err));
        int v = hxs_request_validate(req, &cfg, &err);
        CHECK((v == 0) == (r == 0));
        hxs_request_free(req);
        if (r < 0) {
                CHECK(r == -EINVAL);
                CHECK(why != NULL && why[0]);
                return;
        }
        CHECK(why == NULL);
        CHECK(strlen(out) <= strlen(requirement));
        CHECK(!strpbrk(out, " \t/:@\\;"));
        size_t ol = strlen(out);
        CHECK(!(ol >= 4 && (strcasecmp(out + ol - 4, ".whl") == 0 || strcasecmp(out + ol - 4, ".zip") == 0 ||
                            strcasecmp(out + ol - 4, ".tar") == 0)));
        CHECK(pkg_canonical(out, again, sizeof(again), &why) == 0);
        CHECK(strcmp(out, again) == 0);
        /* the image check reads both alike */
        CHECK((check_req(idx, requirement) == 0) == (check_req(idx, out) == 0));
        /* spaces around commas and at the ends change nothing */
        char spaced[512];
        size_t o = 0;
        spaced[o++] = ' ';
        for (const char *p = requirement; *p && o + 4 < sizeof(spaced); p++) {
                if (*p == ',')
                        spaced[o++] = ' ';
                spaced[o++] = *p;
                if (*p == ',')
                        spaced[o++] = ' ';
        }
        spaced[o++] = ' ';
        spaced[o] = '\0';
        if (strlen(requirement) + 2 * 8 < sizeof(spaced) && strlen(spaced) <= 200 &&
            pkg_canonical(spaced, again, sizeof(again), &why) == 0)
                CHECK(strcmp(out, again) == 0);
}

/* Only name characters, and a name that normalizes to itself minus case and runs. */
static bool plain(const char *s, const char *extra)
{
        if (!*s)
                return false;
        for (const char *p = s; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr(extra, *p))
                        return false;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *buf = malloc(size + 1);
        CHECK(buf != NULL);
        memcpy(buf, data, size);
        buf[size] = '\0';

        const char *f[MAX_FIELDS];
        size_t nf = 0;
        for (char *p = buf; nf < MAX_FIELDS;) {
                char *nl = strchr(p, '\n');
                if (nl)
                        *nl = '\0';
                f[nf++] = p;
                if (!nl)
                        break;
                p = nl + 1;
        }
        while (nf < 3)
                f[nf++] = "";
        const char *a = f[0], *b = f[1], *c = f[2];

        check_cmp(a, a);
        CHECK(pkg_version_cmp(a, a) == 0);
        check_cmp(a, b);
        check_cmp(b, c);
        check_cmp(a, c);

        check_normalize(a);
        check_normalize(b);

        /* The image: the extra distribution A B first, then the fixed ones. */
        pkg_req pkgs[sizeof(fixed) / sizeof(fixed[0]) + 1];
        pkg_normalize(a, strlen(a), pkgs[0].name, sizeof(pkgs[0].name));
        snprintf(pkgs[0].version, sizeof(pkgs[0].version), "%s", b);
        memcpy(pkgs + 1, fixed, sizeof(fixed));
        pkg_index idx = { pkgs, sizeof(pkgs) / sizeof(pkgs[0]) };

        for (size_t i = 3; i < nf; i++) {
                check_req(&idx, f[i]);
                check_canonical(&idx, f[i]);
        }

        /* What the extra distribution must and must not satisfy. */
        if (plain(a, "-_.") && isalnum((unsigned char)a[0]) && strlen(a) < 60 &&
            plain(b, ".") && strlen(b) < sizeof(pkgs[0].version) && pkgs[0].name[0]) {
                static const char *const yes[] = { "", "==", ">=", "<=", "~=" };
                static const char *const no[] = { "!=", "<", ">" };
                char r[160];
                for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                        snprintf(r, sizeof(r), "%s%s%s", a, yes[i], yes[i][0] ? b : "");
                        if (check_req(&idx, r) != 0)
                                fprintf(stderr, "\"%s\" not satisfied by %s %s\n", r,
                                        pkgs[0].name, pkgs[0].version);
                        CHECK(check_req(&idx, r) == 0);
                }
                for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
                        snprintf(r, sizeof(r), "%s%s%s", a, no[i], b);
                        if (check_req(&idx, r) != -ENOENT)
                                fprintf(stderr, "\"%s\" satisfied by %s %s\n", r,
                                        pkgs[0].name, pkgs[0].version);
                        CHECK(check_req(&idx, r) == -ENOENT);
                }
        }
        free(buf);
        return 0;
}
