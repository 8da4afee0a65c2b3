/* SPDX-License-Identifier: Apache-2.0 */
/* packages=: name normalization, canonical requirements, version comparison, checks
 * against an index, and the package cache's tree walks. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "core/tree.h"
#include "pkg/packages.h"
#include "engine/request.h"

static void test_normalize(void **state)
{
        char out[64];
        static const char *const cases[][2] = { { "NumPy", "numpy" }, { "a_b.c-d", "a-b-c-d" },
                                                { "Foo__Bar", "foo-bar" }, { "x", "x" } };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                pkg_normalize(cases[i][0], strlen(cases[i][0]), out, sizeof(out));
                assert_string_equal(out, cases[i][1]);
        }
}

static void test_versions(void **state)
{
        assert_true(pkg_version_cmp("1.10", "1.9") > 0);
        assert_true(pkg_version_cmp("1.5.3", "1.5.3") == 0);
        assert_true(pkg_version_cmp("2", "2.0") == 0);
        assert_true(pkg_version_cmp("1.24.2", "2") < 0);
        assert_true(pkg_version_cmp("1.0", "1.0rc1") > 0);
}

static pkg_index index_of_two(void)
{
        static pkg_req pkgs[2] = { { "pandas", "1.5.3" }, { "numpy", "1.24.2" } };
        return (pkg_index){ pkgs, 2 };
}

static int check(const char *req_s, hxs_language lang, hxs_error *err)
{
        pkg_index idx = index_of_two();
        hxs_request *r = hxs_request_new();
        hxs_request_set_language(r, lang);
        hxs_request_set_code(r, "x", 1);
        hxs_request_add_package(r, req_s);
        int ret = pkg_check(&idx, r, err);
        hxs_request_free(r);
        return ret;
}

static void test_check(void **state)
{
        hxs_error err = { 0 };
        static const char *const ok[] = { "pandas", "Pandas", "numpy>=1.20,<2", "pandas==1.5.3", "pandas~=1.5",
                                          "numpy==1.24.*", "pandas!=2.0", "pandas[excel]" };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
                if (check(ok[i], HXS_LANG_PYTHON, &err) != 0)
                        fail_msg("%s: %s", ok[i], err.message);
        static const char *const missing[] = { "scipy", "pandas>=3", "numpy<1.0", "pandas==1.5.2", "numpy~=1.25" };
        for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
                memset(&err, 0, sizeof(err));
                assert_true(check(missing[i], HXS_LANG_PYTHON, &err) < 0);
                assert_int_equal(err.kind, HXS_ERR_NOT_FOUND);
                assert_string_equal(err.field, "packages");
                assert_non_null(strstr(err.message, missing[i]));
        }
        assert_true(check("pandas", HXS_LANG_BASH, &err) < 0);
        assert_int_equal(err.kind, HXS_ERR_INVALID);
}

static void test_real_image(void **state)
{
        pkg_index idx;
        assert_int_equal(pkg_index_load(&idx, ""), 0);
        bool numpy = false, pandas = false, scipy = false;
        for (size_t i = 0; i < idx.n; i++) {
                numpy |= strcmp(idx.pkgs[i].name, "numpy") == 0;
                pandas |= strcmp(idx.pkgs[i].name, "pandas") == 0;
                scipy |= strcmp(idx.pkgs[i].name, "scipy") == 0;
        }
        assert_true(numpy && pandas && scipy);
        pkg_index_free(&idx);
}


static void canon(const char *in, char *out, size_t size)
{
        const char *why = NULL;
        if (pkg_canonical(in, out, size, &why) != 0)
                fail_msg("\"%s\" refused: %s", in, why);
}

static void test_canonical_spellings(void **state)
{
        /* each row: spellings of one requirement, the canonical one first */
        static const char *const same[][5] = {
                { "numpy", "NumPy", " numpy ", "numpy\t", NULL },
                { "a-b-c", "A_B.C", "a__b--c", "a.-_b-c", NULL },
                { "pandas<3,>=1.5", "pandas>=1.5,<3", "Pandas >= 1.5 , < 3", "pandas<3,>=1.5,>=1.5", NULL },
                { "requests[security,socks]", "requests[socks,security]", "Requests [ SOCKS , Security ]",
                  "requests[socks,security,socks]", NULL },
                { "x[a-b]==1.0", "x[A_B]==1.0", "x [a.b] == 1.0", NULL, NULL },
                { "x", "x[]", "x [ ]", NULL, NULL },
        };
        char a[256], b[256];
        for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
                canon(same[i][0], a, sizeof(a));
                assert_string_equal(a, same[i][0]);
                for (size_t k = 1; k < 5 && same[i][k]; k++) {
                        canon(same[i][k], b, sizeof(b));
                        if (strcmp(a, b) != 0)
                                fail_msg("\"%s\" -> \"%s\", \"%s\" -> \"%s\"", same[i][0], a, same[i][k], b);
                }
        }
        /* and what asks for something else stays apart */
        static const char *const differ[][2] = {
                { "x", "x>=0" }, { "x[a]", "x" }, { "x==1", "x!=1" }, { "ab", "a-b" }, { "x<2", "x<=2" },
        };
        for (size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++) {
                canon(differ[i][0], a, sizeof(a));
                canon(differ[i][1], b, sizeof(b));
                assert_string_not_equal(a, b);
        }
}

static void test_refusals_name_the_rule(void **state)
{
        static const struct {
                const char *req, *rule;
        } cases[] = {
                { "./x", "looks like a path" },        { "/x", "looks like a path" },
                { "~/x", "looks like a path" },        { "a\\b", "looks like a path" },
                { "x.tar.gz", "archive file" },        { "x.zip", "archive file" },
                { "x.whl", "archive file" },           { "x.TAR.BZ2", "archive file" },
                { "x.tgz>=1", "archive file" },        { "x.tar", "archive file" },
                { "file:x", "looks like a URL" },      { "file:///etc/passwd", "looks like a URL" },
                { "git+https://h/x", "looks like a URL" }, { "x @ https://h/x.whl", "looks like a URL" },
                { "x@https://h", "looks like a URL" }, { "hg+ssh:h/x", "looks like a URL" },
                { "-e .", "option" },                  { "--index-url=x", "option" },
                { "x; python_version>'3'", "markers" }, { "", "empty" },
                { "a b", "a requirement is" },         { "x===1", "a requirement is" },
                { "x-", "a requirement is" },          { "x>=1,", "a requirement is" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char out[256];
                const char *why = NULL;
                assert_int_equal(pkg_canonical(cases[i].req, out, sizeof(out), &why), -EINVAL);
                assert_non_null(why);
                if (!strstr(why, cases[i].rule))
                        fail_msg("\"%s\": \"%s\" lacks \"%s\"", cases[i].req, why, cases[i].rule);
        }
}

static void test_canonicalize_a_list(void **state)
{
        hxs_request *r = hxs_request_new();
        static const char *const in[] = { "hxs-other", " HXS_Alpha <2, >=1", "hxs.other", "hxs-alpha>=1,<2" };
        for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
                assert_int_equal(hxs_request_add_package(r, in[i]), 0);
        assert_int_equal(pkg_canonicalize(r), 0);
        assert_int_equal(r->n_packages, 2);
        assert_string_equal(r->packages[0], "hxs-alpha<2,>=1");
        assert_string_equal(r->packages[1], "hxs-other");
        hxs_request_free(r);
}

/* ---- tree walks -------------------------------------------------------------------- */

static char scratch[64];

static int make_scratch(void **state)
{
        snprintf(scratch, sizeof(scratch), "/tmp/hxs-tree-XXXXXX");
        assert_non_null(mkdtemp(scratch));
        return 0;
}

static int drop_scratch(void **state)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
        return system(cmd) == 0 ? 0 : -1;
}

/* depth directories "d", one file and one link in each; returns the inodes made */
static uint64_t make_deep(int top, int depth)
{
        int fd = dup(top);
        uint64_t n = 0;
        for (int i = 0; i < depth; i++) {
                assert_int_equal(mkdirat(fd, "d", 0755), 0);
                int f = openat(fd, "f", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
                assert_true(f >= 0);
                assert_int_equal(write(f, "x", 1), 1);
                close(f);
                assert_int_equal(symlinkat("/etc/passwd", fd, "l"), 0); /* never followed */
                int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(next >= 0);
                close(fd);
                fd = next;
                n += 3;
        }
        close(fd);
        return n;
}

static void test_tree_walks_have_no_depth_limit(void **state)
{
        int top = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(top >= 0);
        assert_int_equal(mkdirat(top, "t", 0755), 0);
        int t = openat(top, "t", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        /* deeper than 64 levels, and than the descriptor limit (lowered to 64 for the
         * walks): a recursive walk holding one descriptor per level stops there */
        uint64_t made = make_deep(t, 400) + 1;
        /* and wide: many subdirectories in one directory */
        for (int i = 0; i < 300; i++) {
                char n[16];
                snprintf(n, sizeof(n), "w%03d", i);
                assert_int_equal(mkdirat(t, n, 0755), 0);
                made++;
        }
        close(t);
        struct rlimit old, low;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
        low = (struct rlimit){ 64, old.rlim_max };
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
        tree_usage u;
        assert_int_equal(tree_measure_at(top, "t", UINT64_MAX, &u), 0);
        assert_int_equal(u.inodes, made);
        assert_true(u.bytes >= 400 * 4096ULL); /* each directory takes a block at least */
        /* a limit stops the walk, and says so */
        assert_int_equal(tree_measure_at(top, "t", made - 1, &u), -E2BIG);
        assert_int_equal(tree_remove_at(top, "t"), 0);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
        struct stat st;
        assert_int_equal(fstatat(top, "t", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(fstatat(AT_FDCWD, "/etc/passwd", &st, 0), 0); /* the links' targets stay */
        /* a file, and nothing at all */
        int f = openat(top, "file", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        close(f);
        assert_int_equal(tree_measure_at(top, "file", 10, &u), 0);
        assert_int_equal(u.inodes, 1);
        assert_int_equal(tree_remove_at(top, "file"), 0);
        assert_int_equal(tree_remove_at(top, "file"), 0);
        close(top);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_normalize), cmocka_unit_test(test_versions),
                cmocka_unit_test(test_check), cmocka_unit_test(test_real_image),
                cmocka_unit_test(test_canonical_spellings), cmocka_unit_test(test_refusals_name_the_rule),
                cmocka_unit_test(test_canonicalize_a_list),
                cmocka_unit_test_setup_teardown(test_tree_walks_have_no_depth_limit, make_scratch, drop_scratch),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
