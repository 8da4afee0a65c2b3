/* SPDX-License-Identifier: Apache-2.0 */
/* Output capping: what passes the cap is dropped and counted, never stored. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/capbuf.h"

static void test_under_cap(void **state)
{
        capbuf b;
        capbuf_init(&b, 16);
        assert_int_equal(capbuf_append(&b, "hello", 5), 0);
        assert_false(capbuf_truncated(&b));
        size_t len;
        char *s = capbuf_steal(&b, &len);
        assert_int_equal(len, 5);
        assert_string_equal(s, "hello");
        free(s);
        capbuf_free(&b);
}

static void test_over_cap(void **state)
{
        capbuf b;
        capbuf_init(&b, 10);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(capbuf_append(&b, "abcdefg", 7), 0);
        assert_true(capbuf_truncated(&b));
        assert_int_equal(b.len, 10);
        assert_int_equal(b.dropped, 7000 - 10);
        assert_true(b.alloc <= 11); /* never more than the cap (+NUL) is held */
        size_t len;
        char *s = capbuf_steal(&b, &len);
        assert_int_equal(len, 10);
        assert_memory_equal(s, "abcdefgabc", 10);
        free(s);
        capbuf_free(&b);
}

static void test_binary_and_empty(void **state)
{
        capbuf b;
        capbuf_init(&b, 8);
        assert_int_equal(capbuf_append(&b, "\0\xff\0", 3), 0);
        size_t len;
        char *s = capbuf_steal(&b, &len);
        assert_int_equal(len, 3);
        assert_memory_equal(s, "\0\xff\0", 3);
        free(s);
        s = capbuf_steal(&b, &len); /* empty: a valid empty string, never NULL */
        assert_non_null(s);
        assert_int_equal(len, 0);
        assert_string_equal(s, "");
        free(s);
        capbuf_free(&b);
}

static void test_read_fd(void **state)
{
        int p[2];
        assert_int_equal(pipe2(p, O_NONBLOCK), 0);
        capbuf b;
        capbuf_init(&b, 4);
        assert_int_equal(capbuf_read_fd(&b, p[0]), -EAGAIN);
        assert_int_equal(write(p[1], "123456", 6), 6);
        assert_int_equal(capbuf_read_fd(&b, p[0]), 6);
        assert_int_equal(b.len, 4);
        assert_int_equal(b.dropped, 2);
        close(p[1]);
        assert_int_equal(capbuf_read_fd(&b, p[0]), 0); /* EOF */
        close(p[0]);
        capbuf_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_under_cap), cmocka_unit_test(test_over_cap),
                cmocka_unit_test(test_binary_and_empty), cmocka_unit_test(test_read_fd),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
