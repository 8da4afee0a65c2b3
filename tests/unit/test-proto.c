/* SPDX-License-Identifier: Apache-2.0 */
/* The host <-> guest agent protocol (src/proto): framing, resynchronisation, TLVs,
 * and the RUN, EXIT and FILE decoders, against everything a hostile peer can send. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto/proto.h"

static uint8_t payload_buf[HXP_PAYLOAD_MAX];
static hxp_run run;

/* A frame into out; returns its size. */
static size_t make_frame(uint8_t *out, hxp_type type, const void *payload, size_t len)
{
        assert_int_equal(hxp_header(out, type, len), 0);
        if (len)
                memcpy(out + HXP_HEADER_SIZE, payload, len);
        return HXP_HEADER_SIZE + len;
}

static size_t make_run(uint8_t *buf, size_t size, const char *const *env, size_t n_env)
{
        hxp_builder b;
        hxp_builder_init(&b, buf, size);
        /* env first: any cut of the payload then lacks a required field */
        for (size_t i = 0; i < n_env; i++)
                hxp_put_bytes(&b, HXP_RUN_ENV, env[i], strlen(env[i]));
        for (uint16_t t = HXP_RUN_LANGUAGE; t < HXP_RUN_ENV; t++)
                hxp_put_u32(&b, t, 100u + t);
        assert_false(b.overflow);
        return b.len;
}

/* ---- frames ------------------------------------------------------------------- */

static void test_round_trip_every_type(void **state)
{
        static uint8_t frame[HXP_FRAME_MAX];
        for (int t = HXP_HELLO; t < HXP_TYPE_MAX; t++) {
                size_t lens[] = { 0, 1, 4, 1000, HXP_PAYLOAD_MAX };
                for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
                        for (size_t j = 0; j < lens[i]; j++)
                                payload_buf[j] = (uint8_t)(j * 7 + (size_t)t);
                        size_t n = make_frame(frame, (hxp_type)t, payload_buf, lens[i]);
                        hxp_frame f;
                        assert_int_equal(hxp_parse(frame, n, &f), (long)n);
                        assert_int_equal(f.type, t);
                        assert_int_equal(f.len, lens[i]);
                        assert_ptr_equal(f.payload, frame + HXP_HEADER_SIZE);
                        assert_memory_equal(f.payload, payload_buf, lens[i] ? lens[i] : 1);
                }
        }
}

static void test_header_refuses_what_it_cannot_encode(void **state)
{
        uint8_t h[HXP_HEADER_SIZE];
        assert_int_equal(hxp_header(h, (hxp_type)0, 0), -EINVAL);
        assert_int_equal(hxp_header(h, HXP_TYPE_MAX, 0), -EINVAL);
        assert_int_equal(hxp_header(h, (hxp_type)255, 0), -EINVAL);
        assert_int_equal(hxp_header(h, HXP_CODE, HXP_PAYLOAD_MAX + 1), -EINVAL);
        assert_int_equal(hxp_header(h, HXP_CODE, HXP_PAYLOAD_MAX), 0);
}

/* Every value of every header byte: valid or -EBADMSG, and a bad byte among the
 * first four is refused as soon as it arrives, without waiting for the rest. */
static void test_every_malformed_header_byte(void **state)
{
        uint8_t frame[HXP_HEADER_SIZE + 4];
        for (size_t pos = 0; pos < HXP_HEADER_SIZE; pos++) {
                for (int v = 0; v < 256; v++) {
                        make_frame(frame, HXP_HELLO, "abcd", 4);
                        frame[pos] = (uint8_t)v;
                        uint32_t len = hxp_load_u32(frame + 4);
                        bool valid = frame[0] == HXP_MAGIC && frame[1] == HXP_VERSION &&
                                     frame[2] >= HXP_HELLO && frame[2] < HXP_TYPE_MAX &&
                                     frame[3] == 0 && len <= HXP_PAYLOAD_MAX;
                        hxp_frame f;
                        long r = hxp_parse(frame, sizeof(frame), &f);
                        if (!valid) {
                                assert_int_equal(r, -EBADMSG);
                                if (pos < 4) /* known bad with pos+1 bytes */
                                        assert_int_equal(hxp_parse(frame, pos + 1, &f), -EBADMSG);
                                continue;
                        }
                        if (len <= 4) {
                                assert_int_equal(r, (long)(HXP_HEADER_SIZE + len));
                                assert_int_equal(f.type, frame[2]);
                        } else {
                                assert_int_equal(r, 0); /* valid, waiting for payload */
                        }
                }
        }
}

static void test_split_at_every_byte_boundary(void **state)
{
        static uint8_t stream[4096];
        size_t n = 0;
        uint32_t nonce = 0x01020304;
        uint8_t nb[4];
        hxp_store_u32(nb, nonce);
        n += make_frame(stream + n, HXP_HELLO, nb, 4);
        static const char *const env[] = { "A=1", "HOME=/home/sandbox" };
        size_t rl = make_run(payload_buf, sizeof(payload_buf), env, 2);
        n += make_frame(stream + n, HXP_RUN, payload_buf, rl);
        n += make_frame(stream + n, HXP_CODE, "print(1)", 8);
        n += make_frame(stream + n, HXP_STDIN, NULL, 0);
        n += make_frame(stream + n, HXP_START, NULL, 0);
        const uint8_t want[] = { HXP_HELLO, HXP_RUN, HXP_CODE, HXP_STDIN, HXP_START };

        /* For every split of the stream into two writes, a reader that appends and
         * parses sees the same frames, in order, none early. */
        for (size_t split = 0; split <= n; split++) {
                uint8_t buf[4096];
                size_t have = 0, got = 0, fed = 0;
                size_t chunks[2] = { split, n - split };
                for (int c = 0; c < 2; c++) {
                        memcpy(buf + have, stream + fed, chunks[c]);
                        have += chunks[c];
                        fed += chunks[c];
                        for (;;) {
                                hxp_frame f;
                                long r = hxp_parse(buf, have, &f);
                                assert_true(r >= 0);
                                if (r == 0)
                                        break;
                                assert_true(got < sizeof(want));
                                assert_int_equal(f.type, want[got]);
                                got++;
                                memmove(buf, buf + r, have - (size_t)r);
                                have -= (size_t)r;
                        }
                }
                assert_int_equal(got, sizeof(want));
                assert_int_equal(have, 0);
        }
        /* and every prefix of one frame is "need more", never a frame or an error */
        for (size_t k = 0; k < HXP_HEADER_SIZE + rl; k++) {
                hxp_frame f;
                assert_int_equal(hxp_parse(stream + HXP_HEADER_SIZE + 4, k, &f), 0);
        }
}

/* Garbage, then a valid frame: dropping hxp_resync() bytes after each -EBADMSG finds
 * the frame; resync always makes progress. */
static void test_resync_after_garbage(void **state)
{
        uint8_t buf[600];
        uint32_t seed = 12345;
        for (int round = 0; round < 200; round++) {
                size_t g = (size_t)(round * 2 + 1);
                for (size_t i = 0; i < g; i++) {
                        seed = seed * 1103515245u + 12345u;
                        buf[i] = (uint8_t)(seed >> 16);
                }
                /* some garbage starts like a header: magic and version */
                if (round % 3 == 0 && g > 2) {
                        buf[0] = HXP_MAGIC;
                        buf[1] = HXP_VERSION;
                        buf[2] = 0xee;
                }
                uint8_t nb[4];
                hxp_store_u32(nb, 0xabcdef00u + (uint32_t)round);
                size_t n = g + make_frame(buf + g, HXP_HELLO, nb, 4);
                size_t off = 0;
                bool found = false;
                while (off < n) {
                        hxp_frame f;
                        long r = hxp_parse(buf + off, n - off, &f);
                        if (r < 0) {
                                size_t skip = hxp_resync(buf + off, n - off);
                                assert_true(skip >= 1 && skip <= n - off);
                                off += skip;
                                continue;
                        }
                        if (r == 0)
                                break; /* garbage that looks like a header of a big frame */
                        if (f.type == HXP_HELLO && f.len == 4 &&
                            hxp_load_u32(f.payload) == 0xabcdef00u + (uint32_t)round && off == g)
                                found = true;
                        off += (size_t)r;
                }
                /* the only way to miss it: random garbage forming a valid header whose
                 * payload swallows the frame; the agent handles that with its stall rule */
                if (!found) {
                        hxp_frame f;
                        assert_int_equal(hxp_parse(buf + off, n - off, &f), 0);
                }
        }
        assert_int_equal(hxp_resync(buf, 0), 0);
        buf[0] = HXP_MAGIC;
        assert_int_equal(hxp_resync(buf, 1), 1);
        buf[1] = 'x';
        buf[2] = HXP_MAGIC;
        assert_int_equal(hxp_resync(buf, 3), 2);
}

/* ---- TLVs ----------------------------------------------------------------------- */

static void test_builder_never_overflows(void **state)
{
        uint8_t buf[20];
        hxp_builder b;
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_u32(&b, 1, 7);            /* 10 bytes */
        assert_false(b.overflow);
        hxp_put_bytes(&b, 2, "abcde", 5); /* 11 more: does not fit */
        assert_true(b.overflow);
        assert_int_equal(b.len, 10);
        hxp_put_u32(&b, 3, 1);            /* stays failed */
        assert_true(b.overflow);
        assert_int_equal(b.len, 10);
        hxp_builder_init(&b, buf, 5);     /* less than a TLV header */
        hxp_put_bytes(&b, 1, NULL, 0);
        assert_true(b.overflow);
}

static void test_truncated_tlv(void **state)
{
        static const char *const env[] = { "X=y" };
        size_t n = make_run(payload_buf, sizeof(payload_buf), env, 1);
        for (size_t cut = 0; cut < n; cut++) {
                hxp_tlv_iter it;
                uint16_t tag;
                const uint8_t *v;
                uint32_t len;
                int r;
                size_t seen = 0;
                hxp_tlv_begin(&it, payload_buf, cut);
                while ((r = hxp_tlv_next(&it, &tag, &v, &len)) > 0) {
                        assert_true(v + len <= payload_buf + cut);
                        seen += HXP_TLV_HEADER + len;
                }
                /* a clean end only exactly on a record boundary */
                if (r == 0)
                        assert_int_equal(seen, cut);
                else
                        assert_int_equal(r, -EBADMSG);
                assert_int_equal(hxp_run_decode(payload_buf, cut, &run), -EBADMSG);
        }
        assert_int_equal(hxp_run_decode(payload_buf, n, &run), 0);
        /* a length that points past the end, even by a lot */
        uint8_t bad[] = { 1, 0, 0xff, 0xff, 0xff, 0xff, 0, 0 };
        hxp_tlv_iter it;
        uint16_t tag;
        const uint8_t *v;
        uint32_t len;
        hxp_tlv_begin(&it, bad, sizeof(bad));
        assert_int_equal(hxp_tlv_next(&it, &tag, &v, &len), -EBADMSG);
        uint32_t u;
        assert_int_equal(hxp_tlv_u32(bad, 3, &u), -EBADMSG);
        assert_int_equal(hxp_tlv_u32(bad, 5, &u), -EBADMSG);
}

/* ---- RUN -------------------------------------------------------------------------- */

static void test_run_round_trip(void **state)
{
        static const char *const env[] = { "PATH=/usr/bin", "EMPTY=", "EQ=a=b" };
        size_t n = make_run(payload_buf, sizeof(payload_buf), env, 3);
        assert_int_equal(hxp_run_decode(payload_buf, n, &run), 0);
        assert_int_equal(run.language, 100 + HXP_RUN_LANGUAGE);
        assert_int_equal(run.timeout_ms, 100 + HXP_RUN_TIMEOUT_MS);
        assert_int_equal(run.memory_mb, 100 + HXP_RUN_MEMORY_MB);
        assert_int_equal(run.pids_max, 100 + HXP_RUN_PIDS_MAX);
        assert_int_equal(run.nofile, 100 + HXP_RUN_NOFILE);
        assert_int_equal(run.tmpfs_mb, 100 + HXP_RUN_TMPFS_MB);
        assert_int_equal(run.output_max, 100 + HXP_RUN_OUTPUT_MAX);
        assert_int_equal(run.code_len, 100 + HXP_RUN_CODE_LEN);
        assert_int_equal(run.stdin_len, 100 + HXP_RUN_STDIN_LEN);
        assert_int_equal(run.n_env, 3);
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(run.env_len[i], strlen(env[i]));
                assert_memory_equal(run.env[i], env[i], strlen(env[i]));
        }
        /* unknown tags (a newer host) and tag 0 are skipped */
        hxp_builder b;
        hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
        hxp_put_u32(&b, 0, 1);
        hxp_put_bytes(&b, 999, "whatever", 8);
        hxp_put_bytes(&b, HXP_RUN_TAG_MAX, "x", 1);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), 0);
}

static void test_run_missing_and_duplicate_fields(void **state)
{
        for (uint16_t skip = HXP_RUN_LANGUAGE; skip < HXP_RUN_ENV; skip++) {
                hxp_builder b;
                hxp_builder_init(&b, payload_buf, sizeof(payload_buf));
                for (uint16_t t = HXP_RUN_LANGUAGE; t < HXP_RUN_ENV; t++)
                        if (t != skip)
                                hxp_put_u32(&b, t, 1);
                assert_int_equal(hxp_run_decode(payload_buf, b.len, &run), -EBADMSG);
                hxp_put_u32(&b, skip, 1);
                assert_int_equal(hxp_run_decode(payload_buf, b.len, &run), 0);
                hxp_put_u32(&b, skip, 2); /* twice */
                assert_int_equal(hxp_run_decode(payload_buf, b.len, &run), -EBADMSG);
        }
        /* a u32 field of the wrong size */
        for (uint16_t bad = HXP_RUN_LANGUAGE; bad < HXP_RUN_ENV; bad++) {
                hxp_builder b;
                hxp_builder_init(&b, payload_buf, sizeof(payload_buf));
                for (uint16_t t = HXP_RUN_LANGUAGE; t < HXP_RUN_ENV; t++) {
                        if (t == bad)
                                hxp_put_bytes(&b, t, "12345", t % 2 ? 5 : 3);
                        else
                                hxp_put_u32(&b, t, 1);
                }
                assert_int_equal(hxp_run_decode(payload_buf, b.len, &run), -EBADMSG);
        }
        assert_int_equal(hxp_run_decode(payload_buf, 0, &run), -EBADMSG);
}

static void test_run_bad_env(void **state)
{
        static const struct {
                const char *bytes;
                size_t len;
        } bad[] = {
                { "NOEQUALS", 8 }, { "=value", 6 }, { "", 0 }, { "A=b\0c", 5 }, { "A\0=b", 4 },
                { "\0", 1 },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                size_t n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
                hxp_builder b;
                hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
                hxp_put_bytes(&b, HXP_RUN_ENV, "OK=1", 4);
                hxp_put_bytes(&b, HXP_RUN_ENV, bad[i].bytes, bad[i].len);
                assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), -EBADMSG);
        }
        /* at most HXP_ENV_MAX entries */
        size_t n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
        hxp_builder b;
        hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
        for (size_t i = 0; i < HXP_ENV_MAX; i++)
                hxp_put_bytes(&b, HXP_RUN_ENV, "A=1", 3);
        assert_false(b.overflow);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), 0);
        assert_int_equal(run.n_env, HXP_ENV_MAX);
        hxp_put_bytes(&b, HXP_RUN_ENV, "A=1", 3);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), -EBADMSG);
}

/* The files' fields of RUN: optional, each at most once, globs bounded. */
static void test_run_files_fields(void **state)
{
        size_t n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
        assert_int_equal(hxp_run_decode(payload_buf, n, &run), 0);
        assert_int_equal(run.files, 0);
        assert_int_equal(run.files_bytes, 0);
        assert_int_equal(run.return_files, 0);
        assert_int_equal(run.return_bytes, 0);
        assert_int_equal(run.n_globs, 0);

        hxp_builder b;
        hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
        hxp_put_u32(&b, HXP_RUN_FILES, 3);
        hxp_put_u64(&b, HXP_RUN_FILES_BYTES, 5ull << 32);
        hxp_put_u32(&b, HXP_RUN_RETURN_FILES, 100);
        hxp_put_u64(&b, HXP_RUN_RETURN_BYTES, 32u << 20);
        hxp_put_bytes(&b, HXP_RUN_RETURN_GLOB, "*.csv", 5);
        hxp_put_bytes(&b, HXP_RUN_RETURN_GLOB, "**/x", 4);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), 0);
        assert_int_equal(run.files, 3);
        assert_true(run.files_bytes == 5ull << 32);
        assert_int_equal(run.return_files, 100);
        assert_int_equal(run.return_bytes, 32u << 20);
        assert_int_equal(run.n_globs, 2);
        assert_int_equal(run.glob_len[1], 4);
        assert_memory_equal(run.glob[1], "**/x", 4);
        size_t good = n + b.len;

        /* twice, or of the wrong size */
        for (uint16_t t = HXP_RUN_FILES; t <= HXP_RUN_RETURN_BYTES; t++) {
                if (t == HXP_RUN_RETURN_GLOB)
                        continue;
                bool wide = t == HXP_RUN_FILES_BYTES || t == HXP_RUN_RETURN_BYTES;
                hxp_builder_init(&b, payload_buf + good, sizeof(payload_buf) - good);
                if (wide)
                        hxp_put_u64(&b, t, 1);
                else
                        hxp_put_u32(&b, t, 1);
                assert_int_equal(hxp_run_decode(payload_buf, good + b.len, &run), -EBADMSG);
                n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
                hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
                if (wide)
                        hxp_put_u32(&b, t, 1);
                else
                        hxp_put_u64(&b, t, 1);
                assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), -EBADMSG);
                /* rebuild the good one for the next round */
                hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
                hxp_put_u32(&b, HXP_RUN_FILES, 3);
                hxp_put_u64(&b, HXP_RUN_FILES_BYTES, 5ull << 32);
                hxp_put_u32(&b, HXP_RUN_RETURN_FILES, 100);
                hxp_put_u64(&b, HXP_RUN_RETURN_BYTES, 32u << 20);
                good = n + b.len;
        }

        /* globs: not empty, no NUL, at most HXP_PATH_MAX bytes, at most HXP_GLOBS_MAX */
        static char long_glob[HXP_PATH_MAX + 1];
        memset(long_glob, 'a', sizeof(long_glob));
        static const struct {
                const char *bytes;
                size_t len;
        } bad[] = { { "", 0 }, { "a\0b", 3 }, { long_glob, HXP_PATH_MAX + 1 } };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
                hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
                hxp_put_bytes(&b, HXP_RUN_RETURN_GLOB, bad[i].bytes, bad[i].len);
                assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), -EBADMSG);
        }
        n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
        hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
        hxp_put_bytes(&b, HXP_RUN_RETURN_GLOB, long_glob, HXP_PATH_MAX);
        for (size_t i = 1; i < HXP_GLOBS_MAX; i++)
                hxp_put_bytes(&b, HXP_RUN_RETURN_GLOB, "*", 1);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), 0);
        assert_int_equal(run.n_globs, HXP_GLOBS_MAX);
        hxp_put_bytes(&b, HXP_RUN_RETURN_GLOB, "*", 1);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), -EBADMSG);
}

/* A session's fields: interactive 0/1, once; argv bounded, its first entry absolute. */
static void test_run_interactive(void **state)
{
        size_t n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
        hxp_builder b;
        hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
        hxp_put_u32(&b, HXP_RUN_INTERACTIVE, 1);
        hxp_put_bytes(&b, HXP_RUN_ARGV, "/usr/bin/python3", 16);
        hxp_put_bytes(&b, HXP_RUN_ARGV, "", 0);
        hxp_put_bytes(&b, HXP_RUN_ARGV, "--language", 10);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), 0);
        assert_int_equal(run.interactive, 1);
        assert_int_equal(run.n_argv, 3);
        assert_int_equal(run.argv_len[1], 0);
        assert_memory_equal(run.argv[2], "--language", 10);
        size_t good = n + b.len;
        hxp_builder_init(&b, payload_buf + good, sizeof(payload_buf) - good);
        hxp_put_u32(&b, HXP_RUN_INTERACTIVE, 1); /* twice */
        assert_int_equal(hxp_run_decode(payload_buf, good + b.len, &run), -EBADMSG);

        static char long_arg[HXP_ARG_MAX + 1];
        memset(long_arg, 'a', sizeof(long_arg));
        long_arg[0] = '/';
        static const struct {
                const char *bytes;
                size_t len;
        } bad_first[] = { { "python3", 7 }, { "", 0 }, { "/a\0b", 4 }, { long_arg, HXP_ARG_MAX + 1 } };
        for (size_t i = 0; i < sizeof(bad_first) / sizeof(bad_first[0]); i++) {
                n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
                hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
                hxp_put_bytes(&b, HXP_RUN_ARGV, bad_first[i].bytes, bad_first[i].len);
                assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), -EBADMSG);
        }
        n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
        hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
        hxp_put_u32(&b, HXP_RUN_INTERACTIVE, 2);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), -EBADMSG);
        n = make_run(payload_buf, sizeof(payload_buf), NULL, 0);
        hxp_builder_init(&b, payload_buf + n, sizeof(payload_buf) - n);
        for (size_t i = 0; i < HXP_ARGV_MAX; i++)
                hxp_put_bytes(&b, HXP_RUN_ARGV, "/x", 2);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), 0);
        hxp_put_bytes(&b, HXP_RUN_ARGV, "/x", 2);
        assert_int_equal(hxp_run_decode(payload_buf, n + b.len, &run), -EBADMSG);
}

/* ---- FILE, FILE_OUT ---------------------------------------------------------------- */

static void test_file(void **state)
{
        uint8_t buf[512];
        hxp_builder b;
        hxp_file f;

        /* FILE: path and size; len follows size */
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_bytes(&b, HXP_FILE_PATH, "data/x.csv", 10);
        hxp_put_u64(&b, HXP_FILE_SIZE, 6ull << 30);
        hxp_put_u32(&b, 99, 1); /* unknown: skipped */
        assert_int_equal(hxp_file_decode(buf, b.len, &f), 0);
        assert_int_equal(f.path_len, 10);
        assert_memory_equal(f.path, "data/x.csv", 10);
        assert_true(f.size == 6ull << 30 && f.len == f.size && !f.truncated);
        assert_int_equal(hxp_file_decode(buf, 3, &f), -EBADMSG); /* cut */

        /* FILE_OUT truncated: no bytes follow */
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_bytes(&b, HXP_FILE_PATH, "output/a.png", 12);
        hxp_put_u64(&b, HXP_FILE_SIZE, 1000);
        hxp_put_u32(&b, HXP_FILE_TRUNCATED, 1);
        assert_int_equal(hxp_file_decode(buf, b.len, &f), 0);
        assert_true(f.truncated && f.len == 0 && f.size == 1000);
        hxp_put_u64(&b, HXP_FILE_LEN, 1); /* truncated, yet with bytes */
        assert_int_equal(hxp_file_decode(buf, b.len, &f), -EBADMSG);

        /* a file taken while it grew: fewer bytes than its size, never more */
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_bytes(&b, HXP_FILE_PATH, "a", 1);
        hxp_put_u64(&b, HXP_FILE_SIZE, 10);
        hxp_put_u64(&b, HXP_FILE_LEN, 4);
        assert_int_equal(hxp_file_decode(buf, b.len, &f), 0);
        assert_true(f.len == 4);
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_bytes(&b, HXP_FILE_PATH, "a", 1);
        hxp_put_u64(&b, HXP_FILE_SIZE, 10);
        hxp_put_u64(&b, HXP_FILE_LEN, 11);
        assert_int_equal(hxp_file_decode(buf, b.len, &f), -EBADMSG);

        /* required fields, duplicates, sizes, bad paths, truncated other than 0/1 */
        static char long_path[HXP_PATH_MAX + 1];
        memset(long_path, 'p', sizeof(long_path));
        for (int c = 0; c < 8; c++) {
                hxp_builder_init(&b, buf, sizeof(buf));
                if (c != 0)
                        hxp_put_bytes(&b, HXP_FILE_PATH, c == 3 ? "a\0" : c == 4 ? "" : c == 5 ? long_path : "a",
                                      c == 3 ? 2 : c == 4 ? 0 : c == 5 ? HXP_PATH_MAX + 1 : 1);
                if (c != 1)
                        hxp_put_u64(&b, HXP_FILE_SIZE, 1);
                if (c == 2)
                        hxp_put_u64(&b, HXP_FILE_SIZE, 1);
                if (c == 6)
                        hxp_put_u32(&b, HXP_FILE_SIZE + 10, 1), hxp_put_u32(&b, HXP_FILE_LEN, 1);
                if (c == 7)
                        hxp_put_u32(&b, HXP_FILE_TRUNCATED, 2);
                assert_int_equal(hxp_file_decode(buf, b.len, &f), -EBADMSG);
        }
}

/* ---- EXIT ------------------------------------------------------------------------ */

static void test_exit(void **state)
{
        uint8_t buf[128];
        hxp_builder b;
        hxp_exit e;
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_u32(&b, HXP_EXIT_WAIT_STATUS, 9);
        hxp_put_u32(&b, HXP_EXIT_TIMED_OUT, 1);
        hxp_put_u32(&b, HXP_EXIT_OOM_KILLED, 0);
        hxp_put_u32(&b, HXP_EXIT_TIME_MS, 1234);
        hxp_put_u32(&b, HXP_EXIT_MEMORY_KB, 5678);
        hxp_put_u32(&b, 77, 1); /* unknown: skipped */
        assert_int_equal(hxp_exit_decode(buf, b.len, &e), 0);
        assert_int_equal(e.wait_status, 9);
        assert_int_equal(e.timed_out, 1);
        assert_int_equal(e.time_ms, 1234);
        assert_int_equal(e.memory_kb, 5678);

        /* only the status is required; the rest default to 0 */
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_u32(&b, HXP_EXIT_TIME_MS, 5);
        assert_int_equal(hxp_exit_decode(buf, b.len, &e), -EBADMSG);
        hxp_put_u32(&b, HXP_EXIT_WAIT_STATUS, 0x300);
        assert_int_equal(hxp_exit_decode(buf, b.len, &e), 0);
        assert_int_equal(e.wait_status, 0x300);
        assert_int_equal(e.oom_killed, 0);
        hxp_put_u32(&b, HXP_EXIT_WAIT_STATUS, 0); /* duplicate */
        assert_int_equal(hxp_exit_decode(buf, b.len, &e), -EBADMSG);
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_bytes(&b, HXP_EXIT_WAIT_STATUS, "12", 2); /* wrong size */
        assert_int_equal(hxp_exit_decode(buf, b.len, &e), -EBADMSG);
        assert_int_equal(hxp_exit_decode(buf, 3, &e), -EBADMSG); /* truncated */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip_every_type),
                cmocka_unit_test(test_header_refuses_what_it_cannot_encode),
                cmocka_unit_test(test_every_malformed_header_byte),
                cmocka_unit_test(test_split_at_every_byte_boundary),
                cmocka_unit_test(test_resync_after_garbage),
                cmocka_unit_test(test_builder_never_overflows),
                cmocka_unit_test(test_truncated_tlv),
                cmocka_unit_test(test_run_round_trip),
                cmocka_unit_test(test_run_missing_and_duplicate_fields),
                cmocka_unit_test(test_run_bad_env),
                cmocka_unit_test(test_run_files_fields),
                cmocka_unit_test(test_run_interactive),
                cmocka_unit_test(test_file),
                cmocka_unit_test(test_exit),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
