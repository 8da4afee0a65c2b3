/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the host <-> guest agent protocol (src/proto/proto.c), as the agent
 * and the host driver read it: a byte stream cut into frames with hxp_parse, skipped
 * with hxp_resync after -EBADMSG, and each frame's payload put through the TLV walker
 * and the RUN, EXIT and FILE/FILE_OUT decoders.
 *
 * Input: byte 0 picks the size of the chunks the stream arrives in (1..256); the rest
 * is the stream.
 *
 * Invariants:
 *  - hxp_parse returns -EBADMSG, 0, or the size of a frame that fits the buffer, with
 *    a known type and a payload within HXP_PAYLOAD_MAX; re-encoding its header with
 *    hxp_header gives the same 8 bytes; hxp_resync always makes progress;
 *  - the stream read in chunks gives exactly the frames read from it whole;
 *  - a decoded RUN has every env entry inside its payload, with a non-empty name, an
 *    '=' and no NUL; encoding the decoded RUN again and decoding that gives the same
 *    values (the files' fields and globs too: globs inside the payload, non-empty,
 *    without NUL, at most HXP_PATH_MAX bytes); likewise for EXIT;
 *  - a decoded FILE/FILE_OUT has its path inside the payload, 1..HXP_PATH_MAX bytes
 *    without NUL, len <= size, no bytes when truncated, and encodes back to the same;
 *  - the TLV walker never points past the payload and ends cleanly only on a record
 *    boundary;
 *  - the host's reader (vm_read_frame, src/vm/vm-instance.c), fed the stream in the
 *    same chunks through a socket, gives the frames up to the first malformed one (the
 *    host does not resynchronise: it ends the VM) and then -EBADMSG, and moves at most
 *    as many bytes in its buffer as it was fed (memmove is wrapped and counted): a
 *    frame costs its own size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/proto.h"
#include "vm/vm.h"
#include "fuzz.h"

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

#define MAX_FRAMES 4096

typedef struct seen {
        uint8_t type;
        uint32_t len;
        uint32_t hash;
} seen;

static uint32_t fnv(const uint8_t *p, size_t n)
{
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 16777619u;
        return h;
}

static hxp_run run, run2;
static uint8_t reencoded[HXP_PAYLOAD_MAX];

static void check_tlvs(const uint8_t *p, uint32_t len)
{
        hxp_tlv_iter it;
        uint16_t tag;
        const uint8_t *v;
        uint32_t vlen;
        size_t walked = 0;
        int r;
        hxp_tlv_begin(&it, p, len);
        while ((r = hxp_tlv_next(&it, &tag, &v, &vlen)) > 0) {
                CHECK(v >= p + HXP_TLV_HEADER && v + vlen <= p + len);
                walked += HXP_TLV_HEADER + vlen;
                uint32_t u;
                CHECK((hxp_tlv_u32(v, vlen, &u) == 0) == (vlen == 4));
        }
        CHECK(r == 0 || r == -EBADMSG);
        if (r == 0)
                CHECK(walked == len);
}

static void check_run(const uint8_t *p, uint32_t len)
{
        if (hxp_run_decode(p, len, &run) < 0)
                return;
        CHECK(run.n_env <= HXP_ENV_MAX);
        hxp_builder b;
        hxp_builder_init(&b, reencoded, sizeof(reencoded));
        const uint32_t vals[] = { run.language, run.timeout_ms, run.memory_mb, run.pids_max,
                                  run.nofile, run.tmpfs_mb, run.output_max, run.code_len,
                                  run.stdin_len };
        for (uint16_t t = HXP_RUN_LANGUAGE; t < HXP_RUN_ENV; t++)
                hxp_put_u32(&b, t, vals[t - 1]);
        for (size_t i = 0; i < run.n_env; i++) {
                const uint8_t *e = run.env[i];
                uint32_t el = run.env_len[i];
                CHECK(e >= p && e + el <= p + len);
                const uint8_t *eq = memchr(e, '=', el);
                CHECK(eq != NULL && eq != e);
                CHECK(memchr(e, '\0', el) == NULL);
                hxp_put_bytes(&b, HXP_RUN_ENV, e, el);
        }
        CHECK(run.n_globs <= HXP_GLOBS_MAX);
        for (size_t i = 0; i < run.n_globs; i++) {
                const uint8_t *g = run.glob[i];
                uint32_t gl = run.glob_len[i];
                CHECK(g >= p && g + gl <= p + len);
                CHECK(gl > 0 && gl <= HXP_PATH_MAX && memchr(g, '\0', gl) == NULL);
                hxp_put_bytes(&b, HXP_RUN_RETURN_GLOB, g, gl);
        }
        /* the optional fields only when they were there (nonzero is enough to compare) */
        if (run.files)
                hxp_put_u32(&b, HXP_RUN_FILES, run.files);
        if (run.files_bytes)
                hxp_put_u64(&b, HXP_RUN_FILES_BYTES, run.files_bytes);
        if (run.return_files)
                hxp_put_u32(&b, HXP_RUN_RETURN_FILES, run.return_files);
        if (run.return_bytes)
                hxp_put_u64(&b, HXP_RUN_RETURN_BYTES, run.return_bytes);
        if (run.interactive)
                hxp_put_u32(&b, HXP_RUN_INTERACTIVE, run.interactive);
        CHECK(run.interactive <= 1 && run.n_argv <= HXP_ARGV_MAX);
        for (size_t i = 0; i < run.n_argv; i++) {
                const uint8_t *a = run.argv[i];
                uint32_t al = run.argv_len[i];
                CHECK(a >= p && a + al <= p + len && al <= HXP_ARG_MAX && memchr(a, '\0', al) == NULL);
                CHECK(i > 0 || (al > 0 && a[0] == '/'));
                hxp_put_bytes(&b, HXP_RUN_ARGV, a, al);
        }
        CHECK(!b.overflow); /* the original was at most as long */
        CHECK(hxp_run_decode(reencoded, b.len, &run2) == 0);
        const uint32_t vals2[] = { run2.language, run2.timeout_ms, run2.memory_mb, run2.pids_max,
                                   run2.nofile, run2.tmpfs_mb, run2.output_max, run2.code_len,
                                   run2.stdin_len };
        CHECK(memcmp(vals, vals2, sizeof(vals)) == 0);
        CHECK(run2.n_env == run.n_env);
        for (size_t i = 0; i < run.n_env; i++)
                CHECK(run2.env_len[i] == run.env_len[i] &&
                      memcmp(run2.env[i], run.env[i], run.env_len[i]) == 0);
        CHECK(run2.files == run.files && run2.files_bytes == run.files_bytes &&
              run2.return_files == run.return_files && run2.return_bytes == run.return_bytes);
        CHECK(run2.n_globs == run.n_globs && run2.interactive == run.interactive && run2.n_argv == run.n_argv);
        for (size_t i = 0; i < run.n_argv; i++)
                CHECK(run2.argv_len[i] == run.argv_len[i] &&
                      memcmp(run2.argv[i], run.argv[i], run.argv_len[i]) == 0);
        for (size_t i = 0; i < run.n_globs; i++)
                CHECK(run2.glob_len[i] == run.glob_len[i] &&
                      memcmp(run2.glob[i], run.glob[i], run.glob_len[i]) == 0);
}

static void check_file(const uint8_t *p, uint32_t len)
{
        hxp_file f, f2;
        if (hxp_file_decode(p, len, &f) < 0)
                return;
        CHECK(f.path >= p && f.path + f.path_len <= p + len);
        CHECK(f.path_len > 0 && f.path_len <= HXP_PATH_MAX && memchr(f.path, '\0', f.path_len) == NULL);
        CHECK(f.len <= f.size && (!f.truncated || f.len == 0) && f.truncated <= 1);
        uint8_t buf[HXP_PATH_MAX + 64];
        hxp_builder b;
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_bytes(&b, HXP_FILE_PATH, f.path, f.path_len);
        hxp_put_u64(&b, HXP_FILE_SIZE, f.size);
        hxp_put_u32(&b, HXP_FILE_TRUNCATED, f.truncated);
        hxp_put_u64(&b, HXP_FILE_LEN, f.len);
        CHECK(!b.overflow);
        CHECK(hxp_file_decode(buf, b.len, &f2) == 0);
        CHECK(f2.path_len == f.path_len && memcmp(f2.path, f.path, f.path_len) == 0 && f2.size == f.size &&
              f2.truncated == f.truncated && f2.len == f.len);
}

static void check_exit(const uint8_t *p, uint32_t len)
{
        hxp_exit e, e2;
        if (hxp_exit_decode(p, len, &e) < 0)
                return;
        uint8_t buf[64];
        hxp_builder b;
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_u32(&b, HXP_EXIT_WAIT_STATUS, e.wait_status);
        hxp_put_u32(&b, HXP_EXIT_TIMED_OUT, e.timed_out);
        hxp_put_u32(&b, HXP_EXIT_OOM_KILLED, e.oom_killed);
        hxp_put_u32(&b, HXP_EXIT_TIME_MS, e.time_ms);
        hxp_put_u32(&b, HXP_EXIT_MEMORY_KB, e.memory_kb);
        CHECK(!b.overflow);
        CHECK(hxp_exit_decode(buf, b.len, &e2) == 0);
        CHECK(memcmp(&e, &e2, sizeof(e)) == 0);
}

/* Reads buf[0..len) as a reader would: frames and resyncs. Returns the bytes used
 * (what is left is an incomplete frame). */
static size_t consume(const uint8_t *buf, size_t len, seen *out, size_t *n_out, bool deep)
{
        size_t off = 0;
        while (off < len) {
                hxp_frame f;
                long r = hxp_parse(buf + off, len - off, &f);
                if (r < 0) {
                        CHECK(r == -EBADMSG);
                        size_t skip = hxp_resync(buf + off, len - off);
                        CHECK(skip >= 1 && skip <= len - off);
                        off += skip;
                        continue;
                }
                if (r == 0)
                        break;
                CHECK((size_t)r == HXP_HEADER_SIZE + f.len && (size_t)r <= len - off);
                CHECK(f.type >= HXP_HELLO && f.type < HXP_TYPE_MAX && f.len <= HXP_PAYLOAD_MAX);
                CHECK(f.payload == buf + off + HXP_HEADER_SIZE);
                uint8_t h[HXP_HEADER_SIZE];
                CHECK(hxp_header(h, (hxp_type)f.type, f.len) == 0);
                CHECK(memcmp(h, buf + off, HXP_HEADER_SIZE) == 0);
                if (*n_out < MAX_FRAMES)
                        out[(*n_out)++] = (seen){ f.type, f.len, fnv(f.payload, f.len) };
                if (deep) {
                        check_tlvs(f.payload, f.len);
                        check_run(f.payload, f.len);
                        check_exit(f.payload, f.len);
                        check_file(f.payload, f.len);
                }
                off += (size_t)r;
        }
        return off;
}

static seen whole[MAX_FRAMES], chunked[MAX_FRAMES], want[MAX_FRAMES], host[MAX_FRAMES];
static uint8_t window[HXP_FRAME_MAX + 256];
static uint8_t rbuf[HXP_FRAME_MAX];

/* The frames at the start of the stream up to the first malformed one, as the host
 * takes them; *ret_bad: whether one is malformed (rather than incomplete). */
static size_t host_frames(const uint8_t *buf, size_t len, seen *out, bool *ret_bad)
{
        size_t off = 0, n = 0;
        *ret_bad = false;
        for (;;) {
                hxp_frame f;
                long r = hxp_parse(buf + off, len - off, &f);
                if (r <= 0) {
                        *ret_bad = r < 0;
                        return n;
                }
                if (n < MAX_FRAMES)
                        out[n++] = (seen){ f.type, f.len, fnv(f.payload, f.len) };
                off += (size_t)r;
        }
}

/* The stream through vm_read_frame, chunk by chunk. */
static void check_host_reader(const uint8_t *stream, size_t len, size_t chunk)
{
        bool bad;
        size_t n_want = host_frames(stream, len, want, &bad);
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
        vm_instance v = { .chan = sv[1], .rbuf = rbuf };
        size_t fed = 0, n_got = 0;
        int r = 0;
        moved = 0;
        while (r >= 0) {
                if (fed < len) {
                        size_t n = len - fed < chunk ? len - fed : chunk;
                        CHECK(write(sv[0], stream + fed, n) == (ssize_t)n);
                        fed += n;
                } else if (r == 0) {
                        break;
                }
                hxp_frame f;
                counting = true;
                while ((r = vm_read_frame(&v, &f)) > 0) {
                        CHECK(n_got < n_want || n_want == MAX_FRAMES);
                        if (n_got < MAX_FRAMES)
                                host[n_got] = (seen){ f.type, f.len, fnv(f.payload, f.len) };
                        n_got++;
                }
                counting = false;
                CHECK(r == 0 || r == -EBADMSG);
        }
        CHECK(moved <= fed);
        CHECK((r == -EBADMSG) == bad);
        CHECK(n_got == n_want || n_want == MAX_FRAMES);
        for (size_t i = 0; i < n_want && i < n_got; i++)
                CHECK(host[i].type == want[i].type && host[i].len == want[i].len && host[i].hash == want[i].hash);
        close(sv[0]);
        close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t chunk = (size_t)data[0] + 1;
        const uint8_t *stream = data + 1;
        size_t len = size - 1;

        size_t n_whole = 0, n_chunked = 0;
        consume(stream, len, whole, &n_whole, true);

        /* the same stream through a reader's buffer, chunk by chunk */
        size_t have = 0, fed = 0;
        while (fed < len) {
                size_t n = len - fed < chunk ? len - fed : chunk;
                CHECK(have + n <= sizeof(window));
                memcpy(window + have, stream + fed, n);
                have += n;
                fed += n;
                size_t used = consume(window, have, chunked, &n_chunked, false);
                memmove(window, window + used, have - used);
                have -= used;
        }
        CHECK(n_chunked == n_whole);
        for (size_t i = 0; i < n_whole; i++)
                CHECK(whole[i].type == chunked[i].type && whole[i].len == chunked[i].len &&
                      whole[i].hash == chunked[i].hash);

        check_host_reader(stream, len, chunk);
        return 0;
}
