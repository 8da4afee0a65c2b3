/* SPDX-License-Identifier: Apache-2.0 */
/* Output capping: head and tail kept, what falls between them counted, never stored. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
        /* the first half of the cap as it came, the last half as it ended, the marker
         * between them counting what fell out */
        capbuf b;
        capbuf_init(&b, 10);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(capbuf_append(&b, "abcdefg", 7), 0);
        assert_true(capbuf_truncated(&b));
        assert_int_equal(b.len + b.tail_len, 10);
        assert_int_equal(b.dropped, 7000 - 10);
        assert_true(b.alloc + b.tail_alloc <= 12); /* never more than the cap (+NULs) is held */
        size_t len;
        char *s = capbuf_steal(&b, &len);
        const char *want = "abcde\n[hexr-sandbox: 6990 bytes left out]\ncdefg";
        assert_int_equal(len, strlen(want));
        assert_string_equal(s, want);
        assert_int_equal(b.dropped, 6990); /* kept for the caller to report */
        free(s);
        capbuf_free(&b);
}

static void test_exactly_the_cap_is_whole(void **state)
{
        /* up to the cap nothing is left out, however it arrives */
        capbuf b;
        capbuf_init(&b, 10);
        assert_int_equal(capbuf_append(&b, "0123", 4), 0);
        assert_int_equal(capbuf_append(&b, "45678", 5), 0);
        assert_int_equal(capbuf_append(&b, "9", 1), 0);
        assert_false(capbuf_truncated(&b));
        size_t len;
        char *s = capbuf_steal(&b, &len);
        assert_int_equal(len, 10);
        assert_string_equal(s, "0123456789");
        free(s);
        capbuf_free(&b);
}

static void test_tail_ring_wraps_in_order(void **state)
{
        /* pieces of every size against the ring: the tail is always the last bytes, in order */
        char all[5000];
        size_t total = 0;
        capbuf b;
        capbuf_init(&b, 64);
        for (size_t piece = 1; total + piece < sizeof(all); piece = piece % 37 + 3) {
                char buf[64];
                for (size_t i = 0; i < piece; i++)
                        buf[i] = (char)('!' + (total + i) % 90);
                memcpy(all + total, buf, piece);
                total += piece;
                assert_int_equal(capbuf_append(&b, buf, piece), 0);
        }
        size_t len;
        char *s = capbuf_steal(&b, &len);
        char marker[64];
        int ml = snprintf(marker, sizeof(marker), "\n[hexr-sandbox: %zu bytes left out]\n", total - 64);
        assert_int_equal(len, 64 + (size_t)ml);
        assert_memory_equal(s, all, 32);
        assert_memory_equal(s + 32, marker, (size_t)ml);
        assert_memory_equal(s + 32 + ml, all + total - 32, 32);
        free(s);
        capbuf_free(&b);
}

static void test_one_huge_piece(void **state)
{
        capbuf b;
        capbuf_init(&b, 8);
        char big[100];
        for (int i = 0; i < 100; i++)
                big[i] = (char)('a' + i % 26);
        assert_int_equal(capbuf_append(&b, big, sizeof(big)), 0);
        assert_int_equal(capbuf_append(&b, "XY", 2), 0);
        size_t len;
        char *s = capbuf_steal(&b, &len);
        assert_string_equal(s, "abcd\n[hexr-sandbox: 94 bytes left out]\nuvXY");
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
        assert_int_equal(b.len + b.tail_len, 4);
        assert_int_equal(b.dropped, 2);
        close(p[1]);
        assert_int_equal(capbuf_read_fd(&b, p[0]), 0); /* EOF */
        close(p[0]);
        capbuf_free(&b);
}

static void test_uncut_output_is_one_buffer(void **state)
{
        /* past half the cap but not past the cap: all of it in the head, handed out as
         * it is (no join), the same buffer the bytes were written into */
        capbuf b;
        capbuf_init(&b, 10);
        assert_int_equal(capbuf_append(&b, "012345", 6), 0);
        assert_int_equal(capbuf_append(&b, "678", 3), 0);
        assert_int_equal(b.tail_len, 0);
        assert_int_equal(b.len, 9);
        char *head = b.data;
        size_t len;
        char *s = capbuf_steal(&b, &len);
        assert_ptr_equal(s, head);
        assert_int_equal(len, 9);
        assert_string_equal(s, "012345678");
        free(s);
        capbuf_free(&b);
}

/* What any way of keeping the head and tail must give for a stream: its first
 * limit - limit/2 bytes, the marker, its last limit/2 bytes; all of it when it fits. */
static size_t reference(char *out, const char *all, size_t total, size_t limit)
{
        if (total <= limit) {
                memcpy(out, all, total);
                return total;
        }
        size_t hl = limit - limit / 2, tl = limit / 2;
        int ml = sprintf(out + hl, "\n[hexr-sandbox: %zu bytes left out]\n", total - limit);
        memcpy(out, all, hl);
        memcpy(out + hl + (size_t)ml, all + total - tl, tl);
        return hl + (size_t)ml + tl;
}

static void test_every_split_matches_the_reference(void **state)
{
        /* every cap from 0 to 24 against pieces of every size: the same bytes as the
         * reference, and never more than the cap (+ a NUL each) held once past it */
        char all[400], want[512];
        for (size_t limit = 0; limit <= 24; limit++) {
                for (size_t step = 1; step <= 13; step++) {
                        capbuf b;
                        capbuf_init(&b, limit);
                        size_t total = 0;
                        for (size_t piece = step; total + piece <= sizeof(all); piece = piece % 17 + step) {
                                char buf[64];
                                for (size_t i = 0; i < piece; i++)
                                        buf[i] = (char)('A' + (total + i) % 53);
                                memcpy(all + total, buf, piece);
                                total += piece;
                                assert_int_equal(capbuf_append(&b, buf, piece), 0);
                                if (total > limit)
                                        assert_true(b.alloc + b.tail_alloc <= limit + 2);
                        }
                        size_t wl = reference(want, all, total, limit), len;
                        char *s = capbuf_steal(&b, &len);
                        assert_int_equal(len, wl);
                        assert_memory_equal(s, want, wl);
                        free(s);
                        capbuf_free(&b);
                }
        }
}

static void test_reserve_reads_in_place_up_to_the_cap(void **state)
{
        /* room is offered after an uncut output, never past the cap; at the cap there is
         * none, and what is appended then is cut as usual */
        capbuf b;
        capbuf_init(&b, 10);
        size_t room = 0;
        char *p = capbuf_reserve(&b, 4, &room);
        assert_non_null(p);
        assert_true(room >= 4 && room <= 10);
        memcpy(p, "0123", 4);
        capbuf_commit(&b, 4);
        p = capbuf_reserve(&b, 100, &room);
        assert_non_null(p);
        assert_int_equal(room, 6); /* only up to the cap */
        memcpy(p, "456789", 6);
        capbuf_commit(&b, 6);
        assert_null(capbuf_reserve(&b, 1, &room));
        assert_int_equal(capbuf_append(&b, "AB", 2), 0);
        assert_null(capbuf_reserve(&b, 1, &room)); /* cut: no more in place */
        size_t len;
        char *s = capbuf_steal(&b, &len);
        assert_string_equal(s, "01234\n[hexr-sandbox: 2 bytes left out]\n789AB");
        free(s);
        capbuf_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_under_cap), cmocka_unit_test(test_over_cap),
                cmocka_unit_test(test_exactly_the_cap_is_whole), cmocka_unit_test(test_tail_ring_wraps_in_order),
                cmocka_unit_test(test_one_huge_piece),
                cmocka_unit_test(test_binary_and_empty), cmocka_unit_test(test_read_fd),
                cmocka_unit_test(test_uncut_output_is_one_buffer),
                cmocka_unit_test(test_every_split_matches_the_reference),
                cmocka_unit_test(test_reserve_reads_in_place_up_to_the_cap),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
