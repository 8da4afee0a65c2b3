/* SPDX-License-Identifier: Apache-2.0 */
/* Request JSON to hxs_request and results to JSON (src/engine/json.c): every field and
 * type error names the field; duplicate keys and unknown fields are rejected; output
 * bytes become valid JSON through lossy UTF-8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

/* json.c is part of the binary, not of the library: compile it in. */
#include "../../src/engine/json.c"

#include "engine/request.h"

static hxs_config cfg;

static hxs_request *parse_ok(const char *body, size_t len)
{
        hxs_request *req = NULL;
        hxs_error err = { 0 };
        int r = hxs_request_from_json(body, len, &cfg, &req, &err);
        if (r < 0)
                fail_msg("%.*s: unexpected error: %s", (int)len, body, err.message);
        assert_non_null(req);
        return req;
}

/* The body must be rejected with kind INVALID, err.field == field and a message that
 * names the field and contains fragment. */
static void expect_400(const char *body, const char *field, const char *fragment)
{
        hxs_request *req = NULL;
        hxs_error err = { 0 };
        int r = hxs_request_from_json(body, strlen(body), &cfg, &req, &err);
        if (r >= 0)
                fail_msg("%s: accepted", body);
        assert_null(req);
        assert_int_equal(err.kind, HXS_ERR_INVALID);
        if (strcmp(err.field, field) != 0)
                fail_msg("%s: field \"%s\", expected \"%s\" (%s)", body, err.field, field, err.message);
        if (!strstr(err.message, field) && strcmp(field, "body") != 0)
                fail_msg("%s: message \"%s\" does not name %s", body, err.message, field);
        if (fragment && !strstr(err.message, fragment))
                fail_msg("%s: message \"%s\" lacks \"%s\"", body, err.message, fragment);
}

static void test_full_request(void **state)
{
        static const char body[] =
                "{\"code\":\"print(1)\\u0000#\",\"language\":\"js\",\"timeout\":7,\"memory_mb\":64,"
                "\"env_vars\":{\"A\":\"1\",\"B_2\":\"x=y \\u00e9\"},\"packages\":[\"numpy\",\"pandas>=2,<3\"],"
                "\"stdin\":\"in\\u0000put\"}";
        hxs_request *req = parse_ok(body, strlen(body));
        assert_int_equal(req->code_len, 10);
        assert_memory_equal(req->code, "print(1)\0#", 10);
        assert_int_equal(hxs_request_language(req), HXS_LANG_JAVASCRIPT);
        assert_int_equal(hxs_request_timeout_s(req), 7);
        assert_int_equal(hxs_request_memory_mb(req), 64);
        assert_int_equal(req->n_env, 2);
        assert_string_equal(req->env[1].name, "B_2");
        assert_string_equal(req->env[1].value, "x=y \xc3\xa9");
        assert_int_equal(req->n_packages, 2);
        assert_string_equal(req->packages[1], "pandas>=2,<3");
        assert_int_equal(req->stdin_len, 6);
        assert_memory_equal(req->stdin_data, "in\0put", 6);
        hxs_request_free(req);
}

static void test_defaults_and_nulls(void **state)
{
        static const char body[] = "{\"code\":\"x\",\"language\":null,\"timeout\":null,\"memory_mb\":null,"
                                   "\"env_vars\":null,\"packages\":null,\"stdin\":null}";
        hxs_request *req = parse_ok(body, strlen(body));
        assert_int_equal(hxs_request_language(req), HXS_LANG_PYTHON);
        assert_int_equal(hxs_request_timeout_s(req), cfg.default_timeout_s);
        assert_int_equal(hxs_request_memory_mb(req), cfg.default_memory_mb);
        assert_int_equal(req->n_env, 0);
        assert_int_equal(req->n_packages, 0);
        assert_null(req->stdin_data);
        hxs_request_free(req);
}

static void test_code(void **state)
{
        expect_400("{}", "code", "required");
        expect_400("{\"code\":null}", "code", "required");
        expect_400("{\"code\":1}", "code", "string");
        expect_400("{\"code\":true}", "code", "string");
        expect_400("{\"code\":[\"x\"]}", "code", "string");
        expect_400("{\"code\":{}}", "code", "string");
}

static void test_language(void **state)
{
        expect_400("{\"code\":\"x\",\"language\":1}", "language", "string");
        expect_400("{\"code\":\"x\",\"language\":\"cobol\"}", "language", "cobol");
        expect_400("{\"code\":\"x\",\"language\":\"\"}", "language", "not supported");
        expect_400("{\"code\":\"x\",\"language\":\"py\\u0000thon\"}", "language", "NUL");
        expect_400("{\"code\":\"x\",\"language\":[\"python\"]}", "language", "string");
}

static void test_numbers(void **state)
{
        static const char *const fields[] = { "timeout", "memory_mb" };
        char body[128];
        for (size_t i = 0; i < 2; i++) {
                const char *f = fields[i];
#define CASE(value, fragment)                                                         \
        snprintf(body, sizeof(body), "{\"code\":\"x\",\"%s\":%s}", f, value);        \
        expect_400(body, f, fragment)
                CASE("1.5", "must be an integer number");
                CASE("1.0", "(got 1.0)");
                CASE("1e1", "(got 10.0)");
                CASE("2.5e-1", "(got 0.25)");
                CASE("\"5\"", "a string");
                CASE("true", "a boolean");
                CASE("false", "a boolean");
                CASE("[5]", "an array");
                CASE("{}", "an object");
                CASE("0", "greater than 0");
                CASE("-1", "greater than 0");
                CASE("-9223372036854775808", "greater than 0");
                CASE("9223372036854775807", "exceeds the maximum");
                CASE("4294967297", "exceeds the maximum");
#undef CASE
        }
        expect_400("{\"code\":\"x\",\"timeout\":31}", "timeout", "maximum 30");
        expect_400("{\"code\":\"x\",\"memory_mb\":513}", "memory_mb", "maximum 512");
        expect_400("{\"code\":\"x\",\"memory_mb\":15}", "memory_mb", "minimum 16");
        hxs_request *req = parse_ok("{\"code\":\"x\",\"timeout\":30,\"memory_mb\":512}", 41);
        assert_int_equal(hxs_request_timeout_s(req), 30);
        assert_int_equal(hxs_request_memory_mb(req), 512);
        hxs_request_free(req);
}

static void test_env_vars(void **state)
{
        expect_400("{\"code\":\"x\",\"env_vars\":[]}", "env_vars", "object");
        expect_400("{\"code\":\"x\",\"env_vars\":\"A=1\"}", "env_vars", "object");
        expect_400("{\"code\":\"x\",\"env_vars\":{\"A\":1}}", "env_vars", "\"A\" must be a string");
        expect_400("{\"code\":\"x\",\"env_vars\":{\"A\":null}}", "env_vars", "must be a string");
        expect_400("{\"code\":\"x\",\"env_vars\":{\"A\":{}}}", "env_vars", "must be a string");
        expect_400("{\"code\":\"x\",\"env_vars\":{\"A\":\"a\\u0000b\"}}", "env_vars", "NUL");
        expect_400("{\"code\":\"x\",\"env_vars\":{\"1A\":\"x\"}}", "env_vars", "1A");
        expect_400("{\"code\":\"x\",\"env_vars\":{\"A-B\":\"x\"}}", "env_vars", "A-B");
        expect_400("{\"code\":\"x\",\"env_vars\":{\"\":\"x\"}}", "env_vars", NULL);
}

static void test_packages(void **state)
{
        expect_400("{\"code\":\"x\",\"packages\":\"numpy\"}", "packages", "array");
        expect_400("{\"code\":\"x\",\"packages\":{}}", "packages", "array");
        expect_400("{\"code\":\"x\",\"packages\":[\"numpy\",1]}", "packages", "packages[1]");
        expect_400("{\"code\":\"x\",\"packages\":[null]}", "packages", "packages[0]");
        expect_400("{\"code\":\"x\",\"packages\":[\"a\\u0000b\"]}", "packages", "NUL");
        expect_400("{\"code\":\"x\",\"packages\":[\"-e .\"]}", "packages", "requirement");
}

static void test_stdin(void **state)
{
        expect_400("{\"code\":\"x\",\"stdin\":1}", "stdin", "string");
        expect_400("{\"code\":\"x\",\"stdin\":[]}", "stdin", "string");
}

static void test_unknown_fields(void **state)
{
        expect_400("{\"code\":\"x\",\"tiemout\":3}", "tiemout", "unknown field");
        expect_400("{\"code\":\"x\",\"Code\":\"y\"}", "Code", "unknown field");
        /* the unknown field wins over a missing code: typos are reported as typos */
        expect_400("{\"cdoe\":\"x\"}", "cdoe", "unknown field");
        /* a weird name is quoted safely */
        hxs_request *req = NULL;
        hxs_error err = { 0 };
        static const char weird[] = "{\"code\":\"x\",\"a\\n\\\"b\":1}";
        assert_true(hxs_request_from_json(weird, strlen(weird), &cfg, &req, &err) < 0);
        assert_non_null(strstr(err.message, "a\\x0a\\x22b"));
}

static void test_duplicates(void **state)
{
        expect_400("{\"code\":\"a\",\"code\":\"b\"}", "code", "more than once");
        expect_400("{\"code\":\"a\",\"timeout\":1,\"timeout\":1}", "timeout", "more than once");
        expect_400("{\"code\":\"a\",\"env_vars\":{\"A\":\"1\",\"A\":\"2\"}}", "A", "more than once");
}

static void test_malformed(void **state)
{
        expect_400("", "body", "empty");
        expect_400("   ", "body", "invalid JSON");
        expect_400("[]", "body", "object");
        expect_400("\"x\"", "body", "object");
        expect_400("1", "body", "object");
        expect_400("null", "body", "object");
        expect_400("{\"code\":\"x\"} x", "body", "invalid JSON");
        expect_400("{\"code\":\"x\"}{}", "body", "invalid JSON");
        expect_400("{\"code\":", "body", "invalid JSON");
        expect_400("{'code':'x'}", "body", "invalid JSON");
        expect_400("{\"code\":\"\xff\"}", "body", "invalid JSON");
        expect_400("{\"code\":\"\\ud800\"}", "body", "invalid JSON");
        expect_400("{\"co\\u0000de\":\"x\"}", "body", "NUL");
        /* a body with an embedded NUL byte (not the escape) is trailing garbage */
        hxs_request *req = NULL;
        hxs_error err = { 0 };
        assert_true(hxs_request_from_json("{\"code\":\"x\"}\0", 13, &cfg, &req, &err) < 0);
        /* the error text quotes input bytes: it must be valid UTF-8 */
        json_t *s = json_string(err.message);
        assert_non_null(s);
        json_decref(s);
        assert_true(hxs_request_from_json("{\"code\":\xff}", 10, &cfg, &req, &err) < 0);
        s = json_string(err.message);
        assert_non_null(s);
        json_decref(s);
}

static void test_validate_runs(void **state)
{
        /* rules of hxs_request_validate come back through the same path */
        hxs_config small = cfg;
        small.max_code_bytes = 4;
        hxs_request *req = NULL;
        hxs_error err = { 0 };
        static const char body[] = "{\"code\":\"12345\"}";
        assert_true(hxs_request_from_json(body, strlen(body), &small, &req, &err) < 0);
        assert_string_equal(err.field, "code");
        assert_non_null(strstr(err.message, "code"));
}

/* ---- lossy UTF-8 ---- */

static void expect_lossy(const char *in, size_t len, const char *want, size_t want_len)
{
        json_t *s = json_string_lossy(in, len);
        assert_non_null(s);
        if (json_string_length(s) != want_len || memcmp(json_string_value(s), want, want_len) != 0)
                fail_msg("lossy(%zu bytes) gave %zu bytes", len, json_string_length(s));
        /* and it survives a round trip through text */
        char *text = json_dumps(s, JSON_ENCODE_ANY);
        assert_non_null(text);
        json_error_t jerr;
        json_t *back = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        assert_non_null(back);
        assert_true(json_equal(s, back));
        json_decref(back);
        free(text);
        json_decref(s);
}

#define R "\xef\xbf\xbd"
#define LOSSY(in, want) expect_lossy(in, sizeof(in) - 1, want, sizeof(want) - 1)

static void test_lossy_utf8(void **state)
{
        LOSSY("", "");
        LOSSY("plain", "plain");
        LOSSY("h\xc3\xa9llo \xe2\x98\x83 \xf0\x9f\x98\x80", "h\xc3\xa9llo \xe2\x98\x83 \xf0\x9f\x98\x80");
        LOSSY("a\0b", "a\0b");
        LOSSY("\xff", R);
        LOSSY("a\xe2\x82", "a" R);
        LOSSY("\xe2\x82" "a", R "a");
        LOSSY("\xed\xa0\x80", R R R);          /* surrogate */
        LOSSY("\xc0\xaf", R R);                /* overlong */
        LOSSY("\xe0\x80\x80", R R R);          /* overlong */
        LOSSY("\xf0\x80\x80\x80", R R R R);    /* overlong */
        LOSSY("\xf0\x9f\x98", R);              /* truncated */
        LOSSY("\xf4\x90\x80\x80", R R R R);    /* above U+10FFFF */
        LOSSY("\xe1\x80\xe2\xf0\x91\x92\xf1\xbf" "A", R R R R "A");
        LOSSY("\xc2", R);
        LOSSY("ok\x80\x80ok", "ok" R R "ok");
}

static void test_lossy_copy(void **state)
{
        char buf[8];
        assert_int_equal(utf8_lossy_copy(buf, sizeof(buf), "abc", 3), 3);
        assert_string_equal(buf, "abc");
        /* NUL cannot live in a C string: replaced */
        assert_int_equal(utf8_lossy_copy(buf, sizeof(buf), "a\0b", 3), 5);
        assert_string_equal(buf, "a" R "b");
        /* cut at a character boundary, always terminated */
        assert_int_equal(utf8_lossy_copy(buf, sizeof(buf), "\xff\xff\xff", 3), 6);
        assert_string_equal(buf, R R);
        assert_int_equal(utf8_lossy_copy(buf, 4, "\xe2\x98\x83\xe2\x98\x83", 6), 3);
        assert_string_equal(buf, "\xe2\x98\x83");
        assert_int_equal(utf8_lossy_copy(buf, 1, "abc", 3), 0);
        assert_string_equal(buf, "");
}

/* ---- results ---- */

static void test_result_fields(void **state)
{
        hxs_result res = { 0 };
        res.stdout_data = strdup("out\xff");
        res.stdout_len = 4;
        res.stderr_data = strdup("");
        res.stderr_len = 0;
        res.exit_code = 137;
        res.signal = 9;
        res.execution_time_ms = 1234;
        res.memory_used_mb = 45;
        res.oom_killed = true;
        res.stdout_truncated = true;
        res.stdout_omitted = 4096;
        res.end = HXS_END_MEMORY_LIMIT;
        snprintf(res.end_message, sizeof(res.end_message), "killed: memory limit of 256 MB exceeded");

        json_t *o = result_to_json(&res, "0123456789abcdef0123456789abcdef");
        assert_non_null(o);
        static const char *const keys[] = { "stdout", "stderr", "exit_code", "execution_time_ms",
                                            "memory_used_mb", "timed_out", "oom_killed", "signal",
                                            "stdout_truncated", "stderr_truncated", "stdout_omitted_bytes",
                                            "stderr_omitted_bytes", "error", "files", "id" };
        assert_int_equal(json_object_size(o), sizeof(keys) / sizeof(keys[0]));
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (!json_object_get(o, keys[i]))
                        fail_msg("missing %s", keys[i]);
        assert_string_equal(json_string_value(json_object_get(o, "stdout")), "out" R);
        assert_int_equal(json_integer_value(json_object_get(o, "exit_code")), 137);
        assert_int_equal(json_integer_value(json_object_get(o, "signal")), 9);
        assert_int_equal(json_integer_value(json_object_get(o, "execution_time_ms")), 1234);
        assert_int_equal(json_integer_value(json_object_get(o, "memory_used_mb")), 45);
        assert_true(json_is_true(json_object_get(o, "oom_killed")));
        assert_true(json_is_false(json_object_get(o, "timed_out")));
        assert_true(json_is_true(json_object_get(o, "stdout_truncated")));
        assert_true(json_is_false(json_object_get(o, "stderr_truncated")));
        assert_int_equal(json_integer_value(json_object_get(o, "stdout_omitted_bytes")), 4096);
        assert_int_equal(json_integer_value(json_object_get(o, "stderr_omitted_bytes")), 0);
        json_t *e = json_object_get(o, "error");
        assert_string_equal(json_string_value(json_object_get(e, "type")), "memory_limit");
        assert_string_equal(json_string_value(json_object_get(e, "message")),
                            "killed: memory limit of 256 MB exceeded");
        json_decref(o);

        /* signal 0 is null; no id, no "id" field; NULL buffers are empty strings */
        hxs_result_clear(&res);
        res.exit_code = 3;
        o = result_to_json(&res, NULL);
        assert_non_null(o);
        assert_true(json_is_null(json_object_get(o, "signal")));
        assert_null(json_object_get(o, "id"));
        assert_true(json_is_null(json_object_get(o, "error"))); /* ended by itself */
        assert_int_equal(json_object_size(o), 14);
        assert_int_equal(json_array_size(json_object_get(o, "files")), 0);
        assert_string_equal(json_string_value(json_object_get(o, "stdout")), "");
        json_decref(o);
}

/* The reply text is converted sixteen or eight bytes at a time where it can: every byte
 * that needs care (controls, the quote, the backslash, DEL, UTF-8 and broken UTF-8), at
 * every place in and around a block, must still come out as jansson dumps the lossy string. */
static void test_result_text_is_jansson_dump(void **state)
{
        static const char *const specials[] = { "\n", "\"", "\\", "\x01", "\x1f", " ", "\x7f",
                                                "\xc3\xa9", "\xe2\x98\x83", "\xff", "\xc3", "/" };
        char in[64];

        for (size_t k = 0; k < sizeof(specials) / sizeof(specials[0]); k++) {
                for (size_t at = 0; at < 40; at++) {
                        size_t sl = strlen(specials[k]), len = at + sl + (at % 11);
                        memset(in, 'a' + (int)(at % 26), sizeof(in));
                        memcpy(in + at, specials[k], sl);
                        hxs_result res = { 0 };
                        res.stdout_data = malloc(len + 1);
                        memcpy(res.stdout_data, in, len);
                        res.stdout_data[len] = '\0';
                        res.stdout_len = len;
                        size_t tl = 0;
                        char *text = hxs_result_to_text(&res, NULL, &tl);
                        json_t *o = result_to_json(&res, NULL);
                        char *want = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
                        assert_non_null(text);
                        assert_non_null(want);
                        if (strcmp(text, want) != 0)
                                fail_msg("special %zu at %zu:\n%s\n%s", k, at, text, want);
                        assert_int_equal(tl, strlen(want));
                        free(text);
                        free(want);
                        json_decref(o);
                        hxs_result_clear(&res);
                }
        }
}

/* An output made of escapes only (six bytes out for each byte in) grows the reply past
 * its first size: still the same text as jansson's. */
static void test_result_text_grows_for_escapes(void **state)
{
        static const char pieces[] = "\x01\"\\\n\xff\xe2\x98";
        hxs_result res = { 0 };
        res.stdout_len = 20000;
        res.stdout_data = malloc(res.stdout_len + 1);
        for (size_t i = 0; i < res.stdout_len; i++)
                res.stdout_data[i] = pieces[i % (sizeof(pieces) - 1)];
        res.stdout_data[res.stdout_len] = '\0';
        res.end = HXS_END_OUTPUT_LIMIT;
        snprintf(res.end_message, sizeof(res.end_message), "killed: \"quoted\"");
        size_t tl = 0;
        char *text = hxs_result_to_text(&res, "0123abcd", &tl);
        json_t *o = result_to_json(&res, "0123abcd");
        char *want = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_non_null(text);
        assert_non_null(want);
        assert_string_equal(text, want);
        assert_int_equal(tl, strlen(want));
        free(text);
        free(want);
        json_decref(o);
        hxs_result_clear(&res);
}

static int setup(void **state)
{
        hxs_config_defaults(&cfg);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_full_request),  cmocka_unit_test(test_defaults_and_nulls),
                cmocka_unit_test(test_code),          cmocka_unit_test(test_language),
                cmocka_unit_test(test_numbers),       cmocka_unit_test(test_env_vars),
                cmocka_unit_test(test_packages),      cmocka_unit_test(test_stdin),
                cmocka_unit_test(test_unknown_fields), cmocka_unit_test(test_duplicates),
                cmocka_unit_test(test_malformed),     cmocka_unit_test(test_validate_runs),
                cmocka_unit_test(test_lossy_utf8),    cmocka_unit_test(test_lossy_copy),
                cmocka_unit_test(test_result_fields), cmocka_unit_test(test_result_text_is_jansson_dump),
                cmocka_unit_test(test_result_text_grows_for_escapes),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
