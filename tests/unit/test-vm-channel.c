/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host's reader of the agent's byte stream (vm_read_frame, src/vm/vm-instance.c)
 * on what a guest can send: every frame comes out whole and in order however the
 * bytes are cut, and the cost of a frame is its own size, not the buffer's. The work
 * is counted, not timed: this binary is linked with --wrap=memmove, and every byte the
 * reader moves inside its buffer is counted against the bytes that came in.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "vm/vm.h"

void *__real_memmove(void *dst, const void *src, size_t n);
void *__wrap_memmove(void *dst, const void *src, size_t n);

static bool counting;
static size_t moved;

void *__wrap_memmove(void *dst, const void *src, size_t n)
{
        if (counting)
                moved += n;
        return __real_memmove(dst, src, n);
}

typedef struct channel {
        int sv[2];              /* [0] the guest writes, [1] the host reads */
        vm_instance v;
} channel;

static void channel_open(channel *c)
{
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c->sv), 0);
        assert_int_equal(fcntl(c->sv[0], F_SETFL, O_NONBLOCK), 0);
        assert_int_equal(fcntl(c->sv[1], F_SETFL, O_NONBLOCK), 0);
        memset(&c->v, 0, sizeof(c->v));
        c->v.chan = c->sv[1];
        c->v.rbuf = malloc(HXP_FRAME_MAX);
        assert_non_null(c->v.rbuf);
}

static void channel_close(channel *c)
{
        free(c->v.rbuf);
        close(c->sv[0]);
        close(c->sv[1]);
}

/* Writes as much of buf[*off..len) as the socket takes, at most chunk bytes. */
static void feed(channel *c, const uint8_t *buf, size_t len, size_t *off, size_t chunk)
{
        if (*off >= len)
                return;
        size_t n = len - *off < chunk ? len - *off : chunk;
        ssize_t w = write(c->sv[0], buf + *off, n);
        if (w < 0)
                assert_int_equal(errno, EAGAIN);
        else
                *off += (size_t)w;
}

/* Writes the frames sizes[0..n) in pieces of chunk bytes and checks that each comes
 * out whole and in order, then the end of the stream, and that the reader moved no
 * more bytes in its buffer than it was given. */
static void check_stream(const size_t *sizes, size_t n, size_t chunk)
{
        size_t len = 0;
        for (size_t i = 0; i < n; i++)
                len += HXP_HEADER_SIZE + sizes[i];
        uint8_t *buf = malloc(len);
        assert_non_null(buf);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(hxp_header(buf + o, i % 2 ? HXP_STDERR : HXP_STDOUT, sizes[i]), 0);
                for (size_t k = 0; k < sizes[i]; k++)
                        buf[o + HXP_HEADER_SIZE + k] = (uint8_t)(i * 31 + k * 7);
                o += HXP_HEADER_SIZE + sizes[i];
        }
        channel c;
        channel_open(&c);
        size_t off = 0, got = 0;
        moved = 0;
        counting = true;
        while (got < n) {
                feed(&c, buf, len, &off, chunk);
                hxp_frame f;
                int r;
                while ((r = vm_read_frame(&c.v, &f)) > 0) {
                        assert_true(got < n);
                        assert_int_equal(f.type, got % 2 ? HXP_STDERR : HXP_STDOUT);
                        assert_int_equal(f.len, sizes[got]);
                        for (size_t k = 0; k < f.len; k++)
                                if (f.payload[k] != (uint8_t)(got * 31 + k * 7))
                                        fail_msg("chunk %zu: frame %zu byte %zu differs", chunk, got, k);
                        got++;
                }
                assert_int_equal(r, 0);
        }
        counting = false;
        assert_true(moved <= len);
        /* then the end of the stream */
        close(c.sv[0]);
        c.sv[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        hxp_frame f;
        assert_int_equal(vm_read_frame(&c.v, &f), -EPIPE);
        channel_close(&c);
        free(buf);
}

/* A stream of empty frames, as a flooding guest sends them: each byte is moved at most
 * once (the incomplete rest before a read); moving the buffer per frame would be
 * thousands of times the stream. */
static void test_tiny_frames_cost_their_own_size(void **state)
{
        (void)state;
        enum { FRAMES = 262144 }; /* 2 MiB of headers */
        static size_t zeros[FRAMES];
        check_stream(zeros, FRAMES, 1 << 20);
        check_stream(zeros, FRAMES, 65533); /* cut inside headers */
        print_message("%d empty frames: %zu bytes moved in the buffer\n", FRAMES, moved);
}

/* Frames of every size, cut anywhere: each comes out whole, in order. */
static void test_any_cut_gives_the_same_frames(void **state)
{
        (void)state;
        static const size_t small[] = { 0, 1, 7, 8, 9, 0, 3, 200, 0, 0, 1000 };
        static const size_t big[] = { 0, 1, 4095, 65536, HXP_PAYLOAD_MAX, 0, 3, HXP_PAYLOAD_MAX - 1,
                                      HXP_PAYLOAD_MAX, 100000, 0, 0, 12345, HXP_PAYLOAD_MAX };
        static const size_t small_chunks[] = { 1, 5, 8, 13 };
        static const size_t big_chunks[] = { 4093, 65536, 300000, 1 << 22 };
        for (size_t i = 0; i < sizeof(small_chunks) / sizeof(small_chunks[0]); i++)
                check_stream(small, sizeof(small) / sizeof(small[0]), small_chunks[i]);
        for (size_t i = 0; i < sizeof(big_chunks) / sizeof(big_chunks[0]); i++)
                check_stream(big, sizeof(big) / sizeof(big[0]), big_chunks[i]);
}

/* One read() per call: a caller that stops after a budget of frames leaves the rest in
 * the socket, where its event loop sees it again. */
static void test_one_read_per_call(void **state)
{
        (void)state;
        channel c;
        channel_open(&c);
        uint8_t hdr[HXP_HEADER_SIZE + 3];
        assert_int_equal(hxp_header(hdr, HXP_STDOUT, 3), 0);
        memcpy(hdr + HXP_HEADER_SIZE, "abc", 3);
        /* a frame cut after its header: one call reads it, finds it incomplete, returns */
        assert_int_equal(write(c.sv[0], hdr, HXP_HEADER_SIZE), HXP_HEADER_SIZE);
        hxp_frame f;
        assert_int_equal(vm_read_frame(&c.v, &f), 0);
        assert_int_equal(write(c.sv[0], hdr + HXP_HEADER_SIZE, 3), 3);
        assert_int_equal(vm_read_frame(&c.v, &f), 1);
        assert_int_equal(f.len, 3);
        assert_memory_equal(f.payload, "abc", 3);
        assert_int_equal(vm_read_frame(&c.v, &f), 0);
        /* garbage is malformed, not skipped: the host does not resynchronise with a guest */
        assert_int_equal(write(c.sv[0], "xxxxxxxx", 8), 8);
        assert_int_equal(vm_read_frame(&c.v, &f), -EBADMSG);
        channel_close(&c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tiny_frames_cost_their_own_size),
                cmocka_unit_test(test_any_cut_gives_the_same_frames),
                cmocka_unit_test(test_one_read_per_call),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
