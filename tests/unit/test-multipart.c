/* SPDX-License-Identifier: Apache-2.0 */
/* The streaming multipart/form-data parser (multipart.c): the same parts whatever the
 * body's cut into feeds (down to one byte at a time), delimiter look-alikes inside a
 * body kept, the boundary from Content-Type, and bodies that break the syntax refused
 * with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/multipart.h"

/* What the callbacks saw: "name|filename|type=body;" per part. */
typedef struct seen {
        char text[4096];
        size_t len;
        int parts;
} seen;

static void add(seen *s, const char *data, size_t n)
{
        assert_true(s->len + n < sizeof(s->text));
        memcpy(s->text + s->len, data, n);
        s->len += n;
        s->text[s->len] = '\0';
}

static int on_begin(void *ud, const mp_part *part, hxs_error *err)
{
        seen *s = ud;
        char head[3 * MP_NAME_MAX + 200];
        int n = snprintf(head, sizeof(head), "%s|%s%s|%s=", part->name, part->has_filename ? "F:" : "",
                         part->filename, part->content_type);
        add(s, head, (size_t)n);
        s->parts++;
        return 0;
}

static int on_data(void *ud, const char *data, size_t len, hxs_error *err)
{
        add(ud, data, len);
        return 0;
}

static int on_end(void *ud, hxs_error *err)
{
        add(ud, ";", 1);
        return 0;
}

static const mp_callbacks cb = { on_begin, on_data, on_end };

static int parse(const char *body, size_t len, size_t step, seen *s, hxs_error *err)
{
        mp_parser *p = NULL;
        *s = (seen){ 0 };
        assert_int_equal(mp_new("XyZ", &cb, s, &p), 0);
        int r = 0;
        for (size_t at = 0; at < len && r == 0; at += step)
                r = mp_feed(p, body + at, len - at < step ? len - at : step, err);
        if (r == 0)
                r = mp_finish(p, err);
        mp_free(p);
        return r;
}

static const char body[] =
        "preamble\r\n"
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"request\"\r\n"
        "Content-Type: application/json\r\n"
        "\r\n"
        "{\"code\":\"print(1)\"}\r\n"
        "--XyZ  \r\n"
        "content-disposition: form-data; name=files; filename=\"data/a \\\"b\\\".csv\"\r\n"
        "\r\n"
        "x,y\r\n--XyNot a boundary\r\n--Xy\r\n"
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"files\"; filename=\"\"\r\n"
        "\r\n"
        "\r\n"
        "--XyZ--\r\n"
        "epilogue --XyZ\r\n";

static void test_parts_whatever_the_feeds(void **state)
{
        static const char want[] =
                "request||application/json={\"code\":\"print(1)\"};"
                "files|F:data/a \"b\".csv|=x,y\r\n--XyNot a boundary\r\n--Xy;"
                "files|F:|=;";
        size_t steps[] = { 1, 2, 3, 7, 64, sizeof(body) };
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
                seen s;
                hxs_error err = { 0 };
                assert_int_equal(parse(body, sizeof(body) - 1, steps[i], &s, &err), 0);
                assert_int_equal(s.parts, 3);
                assert_string_equal(s.text, want);
        }
}

static void test_refused_bodies(void **state)
{
        static const char *const cases[] = {
                "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end",
                "--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--",
                "--XyZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nx\r\n--XyZ--",
                "--XyZ\r\nContent-Disposition: form-data; filename=\"x\"\r\n\r\nx\r\n--XyZ--",
                "--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--XyZ--",
                "--XyZjunk\r\n",
                "",
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                seen s;
                hxs_error err = { 0 };
                assert_int_equal(parse(cases[i], strlen(cases[i]), 5, &s, &err), -EINVAL);
                assert_non_null(strstr(err.message, "multipart body: "));
        }
}

static void test_headers_are_capped(void **state)
{
        size_t n = MP_HEADERS_MAX + 100;
        char *big = malloc(n + 16);
        memcpy(big, "--XyZ\r\nX: ", 10);
        memset(big + 10, 'a', n);
        seen s;
        hxs_error err = { 0 };
        assert_int_equal(parse(big, n + 10, 4096, &s, &err), -EINVAL);
        assert_non_null(strstr(err.message, "16 KiB"));
        free(big);
}

static void test_boundary_of(void **state)
{
        char b[MP_BOUNDARY_MAX + 1];
        hxs_error err = { 0 };

        assert_int_equal(mp_boundary_of("multipart/form-data; boundary=abc", b, &err), 0);
        assert_string_equal(b, "abc");
        assert_int_equal(mp_boundary_of("Multipart/Form-Data;charset=x; boundary=\"a b;c\"", b, &err), 0);
        assert_string_equal(b, "a b;c");
        assert_int_equal(mp_boundary_of("multipart/form-data", b, &err), -EINVAL);
        assert_int_equal(mp_boundary_of("application/json; boundary=x", b, &err), -EINVAL);
        assert_int_equal(mp_boundary_of("multipart/form-data; boundary=", b, &err), -EINVAL);
        assert_int_equal(mp_boundary_of(NULL, b, &err), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parts_whatever_the_feeds),
                cmocka_unit_test(test_refused_bodies),
                cmocka_unit_test(test_headers_are_capped),
                cmocka_unit_test(test_boundary_of),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
