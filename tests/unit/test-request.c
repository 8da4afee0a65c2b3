/* SPDX-License-Identifier: Apache-2.0 */
/* Request validation: defaults, maxima, and messages that name field and rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "hexr-sandbox/sandbox.h"

static hxs_config cfg;

static hxs_request *make(const char *code)
{
        hxs_request *r = hxs_request_new();
        assert_non_null(r);
        assert_int_equal(hxs_request_set_code(r, code, strlen(code)), 0);
        return r;
}

static void expect_invalid(hxs_request *r, const char *field, const char *fragment)
{
        hxs_error err = { 0 };
        assert_true(hxs_request_validate(r, &cfg, &err) < 0);
        assert_int_equal(err.kind, HXS_ERR_INVALID);
        assert_string_equal(err.field, field);
        if (!strstr(err.message, fragment))
                fail_msg("message \"%s\" lacks \"%s\"", err.message, fragment);
        hxs_request_free(r);
}

static void test_languages(void **state)
{
        hxs_language l;
        static const char *const names[][2] = { { "python", "python" }, { "javascript", "javascript" },
                                                { "js", "javascript" },  { "node", "javascript" },
                                                { "bash", "bash" },      { "shell", "bash" },
                                                { "sh", "bash" } };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                assert_int_equal(hxs_language_parse(names[i][0], &l), 0);
                assert_string_equal(hxs_language_name(l), names[i][1]);
        }
        assert_true(hxs_language_parse("cobol", &l) < 0);
        assert_true(hxs_language_parse("Python", &l) < 0);
        assert_true(hxs_language_parse("", &l) < 0);
}

static void test_defaults_applied(void **state)
{
        hxs_request *r = make("print(1)");
        hxs_error err = { 0 };
        assert_int_equal(hxs_request_validate(r, &cfg, &err), 0);
        assert_int_equal(hxs_request_timeout_s(r), 30);
        assert_int_equal(hxs_request_memory_mb(r), 256);
        assert_int_equal(hxs_request_language(r), HXS_LANG_PYTHON);
        hxs_request_free(r);
}

static void test_limits(void **state)
{
        hxs_request *r = make("x");
        hxs_request_set_memory_mb(r, 4096);
        expect_invalid(r, "memory_mb", "memory_mb: 4096 exceeds the maximum 512");
        r = make("x");
        hxs_request_set_memory_mb(r, 8);
        expect_invalid(r, "memory_mb", "below the minimum");
        r = make("x");
        hxs_request_set_timeout_s(r, 31);
        expect_invalid(r, "timeout", "timeout: 31 exceeds the maximum 30");
        /* exactly the maximum is fine, and never clamped */
        r = make("x");
        hxs_request_set_timeout_s(r, 30);
        hxs_request_set_memory_mb(r, 512);
        hxs_error err = { 0 };
        assert_int_equal(hxs_request_validate(r, &cfg, &err), 0);
        assert_int_equal(hxs_request_memory_mb(r), 512);
        hxs_request_free(r);
}

static void test_code(void **state)
{
        hxs_request *r = hxs_request_new();
        expect_invalid(r, "code", "required");
        /* binary code with NUL bytes is kept whole */
        r = hxs_request_new();
        assert_int_equal(hxs_request_set_code(r, "a\0b\xff", 4), 0);
        hxs_error err = { 0 };
        assert_int_equal(hxs_request_validate(r, &cfg, &err), 0);
        hxs_request_free(r);
        hxs_config small = cfg;
        small.max_code_bytes = 3;
        r = make("abcd");
        assert_true(hxs_request_validate(r, &small, &err) < 0);
        assert_string_equal(err.field, "code");
        assert_non_null(strstr(err.message, "exceeds the maximum 3"));
        hxs_request_free(r);
}

static void test_env(void **state)
{
        static const char *const bad_names[] = { "", "1ABC", "A-B", "A=B", "A B", "\xc3\xa9" };
        for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
                hxs_request *r = make("x");
                assert_int_equal(hxs_request_add_env(r, bad_names[i], "v"), 0);
                expect_invalid(r, "env_vars", "must match");
        }
        hxs_request *r = make("x");
        hxs_request_add_env(r, "A", "1");
        hxs_request_add_env(r, "A", "2");
        expect_invalid(r, "env_vars", "set twice");

        hxs_config few = cfg;
        few.max_env_vars = 2;
        r = make("x");
        for (int i = 0; i < 3; i++) {
                char n[8];
                snprintf(n, sizeof(n), "V%d", i);
                hxs_request_add_env(r, n, "x");
        }
        hxs_error err = { 0 };
        assert_true(hxs_request_validate(r, &few, &err) < 0);
        assert_non_null(strstr(err.message, "exceeds the maximum 2"));
        hxs_request_free(r);

        r = make("x");
        assert_int_equal(hxs_request_add_env(r, "_OK_1", "any value = fine"), 0);
        assert_int_equal(hxs_request_validate(r, &cfg, &err), 0);
        hxs_request_free(r);
}

static void test_packages(void **state)
{
        static const char *const good[] = { "numpy", "pandas>=1.5", "scipy==1.10.1", "a-b_c.d",
                                            "requests[socks]", "x>=1,<2", "pkg~=1.4", "x!=1.0.*",
                                            "x==1!2.0", "x<v2", " pandas >= 1.5 , < 3 ", "x [a, b]" };
        static const char *const bad[] = { "", "-r req.txt", "--index-url=http://x", "git+https://x/y",
                                           "./local", "/abs/path", "pkg @ https://x", "pkg; python_version<'3'",
                                           "numpy==", "a b", "x=<1", "x~1", "x===1", "x==>1", "x>=1,",
                                           "x>=1 --hash=sha256:00", "x==a1",
                                           "a123456789012345678901234567890123456789012345678901234567890123" };
        hxs_error err = { 0 };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                hxs_request *r = make("x");
                hxs_request_add_package(r, good[i]);
                if (hxs_request_validate(r, &cfg, &err) < 0)
                        fail_msg("%s rejected: %s", good[i], err.message);
                hxs_request_free(r);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                hxs_request *r = make("x");
                hxs_request_add_package(r, bad[i]);
                expect_invalid(r, "packages", "is not a requirement");
        }
        /* what pip would take for a file or a URL: the message says which rule */
        static const char *const like[][2] = {
                { "./x", "looks like a path" },       { "/x", "looks like a path" },
                { "x.tar.gz", "looks like an archive file" }, { "x.zip", "looks like an archive file" },
                { "x.whl", "looks like an archive file" }, { "file:x", "looks like a URL" },
                { "git+https://h/x", "looks like a URL" }, { "x @ https://h/x", "looks like a URL" },
        };
        for (size_t i = 0; i < sizeof(like) / sizeof(like[0]); i++) {
                hxs_request *r = make("x");
                hxs_request_add_package(r, like[i][0]);
                expect_invalid(r, "packages", like[i][1]);
        }
}

static void test_exit_codes(void **state)
{
        hxs_result r = { 0 };
        hxs_result_set_status(&r, 3 << 8, true, false, false); /* exited 3 */
        assert_int_equal(r.exit_code, 3);
        assert_int_equal(r.signal, 0);
        hxs_result_set_status(&r, 15, true, false, false); /* killed by SIGTERM */
        assert_int_equal(r.exit_code, 143);
        assert_int_equal(r.signal, 15);
        assert_false(r.timed_out);
        hxs_result_set_status(&r, 0, true, true, false);
        assert_int_equal(r.exit_code, 124);
        assert_true(r.timed_out);
        assert_false(r.oom_killed);
        hxs_result_set_status(&r, 9, true, false, true);
        assert_int_equal(r.exit_code, 137);
        assert_true(r.oom_killed);
        assert_int_equal(r.signal, 9);
        hxs_result_set_status(&r, 0, false, false, false); /* died without a status */
        assert_int_equal(r.exit_code, 137);
        /* a timeout wins over an OOM seen while being killed */
        hxs_result_set_status(&r, 9, true, true, true);
        assert_int_equal(r.exit_code, 124);
        assert_false(r.oom_killed);
}

static int setup(void **state)
{
        hxs_config_defaults(&cfg);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_languages), cmocka_unit_test(test_defaults_applied),
                cmocka_unit_test(test_limits),    cmocka_unit_test(test_code),
                cmocka_unit_test(test_env),       cmocka_unit_test(test_packages),
                cmocka_unit_test(test_exit_codes),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
