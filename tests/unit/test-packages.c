/* SPDX-License-Identifier: Apache-2.0 */
/* packages=: name normalization, version comparison, and checks against an index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/packages.h"
#include "engine/request.h"

static void test_normalize(void **state)
{
        char out[64];
        static const char *const cases[][2] = { { "NumPy", "numpy" }, { "a_b.c-d", "a-b-c-d" },
                                                { "Foo__Bar", "foo-bar" }, { "x", "x" } };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                hxs_pkg_normalize(cases[i][0], strlen(cases[i][0]), out, sizeof(out));
                assert_string_equal(out, cases[i][1]);
        }
}

static void test_versions(void **state)
{
        assert_true(hxs_pkg_version_cmp("1.10", "1.9") > 0);
        assert_true(hxs_pkg_version_cmp("1.5.3", "1.5.3") == 0);
        assert_true(hxs_pkg_version_cmp("2", "2.0") == 0);
        assert_true(hxs_pkg_version_cmp("1.24.2", "2") < 0);
        assert_true(hxs_pkg_version_cmp("1.0", "1.0rc1") > 0);
}

static hxs_pkg_index index_of_two(void)
{
        static hxs_pkg pkgs[2] = { { "pandas", "1.5.3" }, { "numpy", "1.24.2" } };
        return (hxs_pkg_index){ pkgs, 2 };
}

static int check(const char *req_s, hxs_language lang, hxs_error *err)
{
        hxs_pkg_index idx = index_of_two();
        hxs_request *r = hxs_request_new();
        hxs_request_set_language(r, lang);
        hxs_request_set_code(r, "x", 1);
        hxs_request_add_package(r, req_s);
        int ret = hxs_pkg_check(&idx, r, err);
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
        hxs_pkg_index idx;
        assert_int_equal(hxs_pkg_index_load(&idx, ""), 0);
        bool numpy = false, pandas = false, scipy = false;
        for (size_t i = 0; i < idx.n; i++) {
                numpy |= strcmp(idx.pkgs[i].name, "numpy") == 0;
                pandas |= strcmp(idx.pkgs[i].name, "pandas") == 0;
                scipy |= strcmp(idx.pkgs[i].name, "scipy") == 0;
        }
        assert_true(numpy && pandas && scipy);
        hxs_pkg_index_free(&idx);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_normalize), cmocka_unit_test(test_versions),
                cmocka_unit_test(test_check), cmocka_unit_test(test_real_image),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
