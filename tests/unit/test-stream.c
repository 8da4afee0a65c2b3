/* SPDX-License-Identifier: Apache-2.0 */
/* Server-Sent Events (stream.c): an event is "event:" and one line of "data:", output
 * that is UTF-8 goes as text with a sequence split across chunks held back to the next
 * one, and anything else goes as base64 of all of it. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/stream.h"

static void test_event_framing(void **state)
{
        sse_buf b = { 0 };

        assert_int_equal(sse_append_event(&b, "stdout", "{\"text\":\"a\"}"), 0);
        assert_int_equal(sse_append_comment(&b, "keep-alive"), 0);
        const char want[] = "event: stdout\ndata: {\"text\":\"a\"}\n\n: keep-alive\n\n";
        assert_int_equal(b.len, strlen(want));
        assert_memory_equal(b.data, want, b.len);
        sse_buf_free(&b);
}

/* The value of key in the one-object JSON text, or NULL when it has none. */
static char *field(const char *json, const char *key)
{
        json_t *o = json_loads(json, 0, NULL);
        assert_non_null(o);
        const char *v = json_string_value(json_object_get(o, key));
        char *copy = v ? strdup(v) : NULL;
        json_decref(o);
        return copy;
}

static void test_text_and_split_sequences(void **state)
{
        sse_utf8 u = { 0 };
        char *json = NULL, *text;

        /* "é" is c3 a9: the first chunk ends after c3, which waits for the next */
        assert_int_equal(sse_output_json(&u, "caf\xc3", 4, false, &json), 0);
        text = field(json, "text");
        assert_string_equal(text, "caf");
        assert_int_equal(u.n_held, 1);
        free(text);
        free(json);
        assert_int_equal(sse_output_json(&u, "\xa9!", 2, false, &json), 0);
        text = field(json, "text");
        assert_string_equal(text, "\xc3\xa9!");
        assert_int_equal(u.n_held, 0);
        free(text);
        free(json);
        /* a chunk that is only the start of a sequence sends nothing yet */
        assert_int_equal(sse_output_json(&u, "\xe2\x82", 2, false, &json), 0);
        assert_null(json);
        assert_int_equal(u.n_held, 2);
        /* the end of the stream flushes what was held: not UTF-8, so base64 */
        assert_int_equal(sse_output_json(&u, NULL, 0, true, &json), 0);
        text = field(json, "base64");
        assert_string_equal(text, "4oI=");
        assert_null(field(json, "text"));
        free(text);
        free(json);
        /* nothing held, nothing to flush */
        assert_int_equal(sse_output_json(&u, NULL, 0, true, &json), 0);
        assert_null(json);
}

static void test_not_utf8_goes_as_base64(void **state)
{
        static const struct {
                const char *in;
                size_t len;
                const char *b64;
        } cases[] = {
                { "\xff", 1, "/w==" },
                { "ab\xc0\x80", 4, "YWLAgA==" },        /* overlong */
                { "\xed\xa0\x80", 3, "7aCA" },          /* a surrogate */
                { "a\0b\xfe", 4, "YQBi/g==" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                sse_utf8 u = { 0 };
                char *json = NULL;
                assert_int_equal(sse_output_json(&u, cases[i].in, cases[i].len, false, &json), 0);
                char *b64 = field(json, "base64");
                assert_non_null(b64);
                assert_string_equal(b64, cases[i].b64);
                assert_int_equal(u.n_held, 0);
                free(b64);
                free(json);
        }
        /* U+0000 is UTF-8: text, escaped in the JSON */
        sse_utf8 u = { 0 };
        char *json = NULL;
        assert_int_equal(sse_output_json(&u, "a\0b", 3, false, &json), 0);
        assert_non_null(strstr(json, "\\u0000"));
        free(json);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_event_framing),
                cmocka_unit_test(test_text_and_split_sequences),
                cmocka_unit_test(test_not_utf8_goes_as_base64),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
