/* SPDX-License-Identifier: Apache-2.0 */
/* The framed protocol between the host and the guest agent of a microVM.
 *
 * One byte stream (virtio-serial under QEMU, vsock under Firecracker) carries
 * frames. Both ends treat every byte from the other side as hostile: the host
 * because the guest runs untrusted code, the guest because it must survive a host
 * that reconnects half-way through a frame. This file is compiled into both the
 * service and the static guest agent; it allocates nothing and has no I/O.
 *
 * A frame is an 8-byte header and a payload:
 *
 *      offset 0   u8   magic 'H' (0x48)
 *             1   u8   version (HXP_VERSION)
 *             2   u8   type (hxp_type)
 *             3   u8   flags, must be 0
 *             4   u32  payload length, little endian, <= HXP_PAYLOAD_MAX
 *
 * Structured payloads (RUN, EXIT) are sequences of TLV records:
 *
 *             0   u16  tag, little endian
 *             2   u32  value length, little endian
 *             6   ...  value
 *
 * Unknown tags are skipped (a newer peer may add some); a record that runs past
 * the payload, or a known tag with a value of the wrong size, is malformed.
 *
 * A conversation: the host sends HELLO with a nonce; the agent answers READY with
 * the same nonce (stale bytes from an earlier connection are skipped until a valid
 * header is found: the agent resynchronises on HELLO). The host sends RUN, then
 * the code in CODE frames and stdin in STDIN frames (an empty STDIN frame is the
 * end of stdin), then each file in: a FILE frame (path and size) and its bytes in
 * FILE_DATA frames, as many files and bytes as RUN announced; then START. The agent
 * streams STDOUT and STDERR frames; once the program has ended, each file out: a
 * FILE_OUT frame (path, size in the sandbox, truncated, bytes that follow) and those
 * bytes in FILE_DATA frames, within the return budgets RUN gave; it ends with EXIT,
 * or with ERROR if the sandbox could not be set up, and then powers the VM off: a VM
 * runs one execution. KILL from the host ends the execution at once.
 *
 * Version 2 added the files (FILE, FILE_DATA, FILE_OUT and RUN's file fields): a
 * version 1 peer would skip those frames and run without the files, so the two do
 * not talk to each other.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HXP_MAGIC        0x48u
#define HXP_VERSION      2u
#define HXP_HEADER_SIZE  8u
#define HXP_PAYLOAD_MAX  (256u * 1024u)           /* per frame */
#define HXP_FRAME_MAX    (HXP_HEADER_SIZE + HXP_PAYLOAD_MAX)
#define HXP_TLV_HEADER   6u
#define HXP_KILL_KEEP_FILES 1u  /* KILL's payload: the files out are still wanted */

typedef enum hxp_type {
        HXP_HELLO = 1,  /* host -> guest: u32 nonce */
        HXP_READY,      /* guest -> host: u32 nonce, then the agent's version text */
        HXP_RUN,        /* host -> guest: TLV hxp_run_tag */
        HXP_CODE,       /* host -> guest: next bytes of the program */
        HXP_STDIN,      /* host -> guest: next bytes of stdin; empty = end of stdin */
        HXP_START,      /* host -> guest: empty; everything has been sent */
        HXP_STDOUT,     /* guest -> host: output bytes */
        HXP_STDERR,     /* guest -> host: output bytes */
        HXP_EXIT,       /* guest -> host: TLV hxp_exit_tag */
        HXP_ERROR,      /* guest -> host: set-up failure, one sentence of text */
        HXP_KILL,       /* host -> guest: empty, kill the program now; or a u32
                         * HXP_KILL_KEEP_FILES: stop it, take its files out, kill it */
        HXP_FILE,       /* host -> guest: TLV hxp_file_tag (path, size): a file in begins */
        HXP_FILE_DATA,  /* either way: next bytes of the file that FILE or FILE_OUT began */
        HXP_FILE_OUT,   /* guest -> host: TLV hxp_file_tag: a file out begins */
        HXP_TYPE_MAX,
} hxp_type;

typedef enum hxp_run_tag {
        HXP_RUN_LANGUAGE = 1,   /* u32: hxs_language */
        HXP_RUN_TIMEOUT_MS,     /* u32 */
        HXP_RUN_MEMORY_MB,      /* u32: the program's memory limit (cgroup) */
        HXP_RUN_PIDS_MAX,       /* u32 */
        HXP_RUN_NOFILE,         /* u32 */
        HXP_RUN_TMPFS_MB,       /* u32: /tmp and home, each */
        HXP_RUN_OUTPUT_MAX,     /* u32: bytes per stream the host keeps */
        HXP_RUN_CODE_LEN,       /* u32: total bytes that CODE frames will carry */
        HXP_RUN_STDIN_LEN,      /* u32: total bytes that STDIN frames will carry */
        HXP_RUN_ENV,            /* "NAME=value" (no NUL); repeated */
        /* optional, 0 (or none) when absent */
        HXP_RUN_FILES,          /* u32: files in that FILE frames will carry */
        HXP_RUN_FILES_BYTES,    /* u64: their bytes in all */
        HXP_RUN_RETURN_GLOB,    /* a return_files glob (no NUL); repeated */
        HXP_RUN_RETURN_FILES,   /* u32: MAX_RETURN_FILES */
        HXP_RUN_RETURN_BYTES,   /* u64: MAX_RETURN_BYTES */
        HXP_RUN_INTERACTIVE,    /* u32 0/1: STDIN frames go on after START (a session) */
        HXP_RUN_ARGV,           /* the program's argv, in order (no NUL); repeated; none:
                                 * the language's interpreter and the code */
        HXP_RUN_TAG_MAX,
} hxp_run_tag;

typedef enum hxp_exit_tag {
        HXP_EXIT_WAIT_STATUS = 1, /* u32: the program's wait status */
        HXP_EXIT_TIMED_OUT,       /* u32: 0/1 */
        HXP_EXIT_OOM_KILLED,      /* u32: 0/1 */
        HXP_EXIT_TIME_MS,         /* u32: wall time of the program */
        HXP_EXIT_MEMORY_KB,       /* u32: peak memory of the program's cgroup */
        HXP_EXIT_TAG_MAX,
} hxp_exit_tag;

typedef enum hxp_file_tag {
        HXP_FILE_PATH = 1,      /* the path in the working directory, normalised, no NUL */
        HXP_FILE_SIZE,          /* u64: its size (in the sandbox, for FILE_OUT) */
        HXP_FILE_TRUNCATED,     /* u32 0/1, FILE_OUT only: over the budget, no bytes follow */
        HXP_FILE_LEN,           /* u64, FILE_OUT only: the bytes FILE_DATA will carry */
        HXP_FILE_TAG_MAX,
} hxp_file_tag;

typedef struct hxp_frame {
        uint8_t type;
        uint32_t len;
        const uint8_t *payload; /* points into the parsed buffer */
} hxp_frame;

/* Parses the frame at the start of buf[0..len). Returns the bytes it takes (> 0)
 * and fills *ret; 0 when more bytes are needed; -EBADMSG when buf does not start
 * with a valid header (bad magic, version, type, flags or length). */
long hxp_parse(const uint8_t *buf, size_t len, hxp_frame *ret);

/* Bytes to drop from the start of buf to reach the next place a header could
 * start (at least 1 when buf is not empty). For resynchronising after -EBADMSG. */
size_t hxp_resync(const uint8_t *buf, size_t len);

/* Writes a header for a payload of payload_len bytes into out[HXP_HEADER_SIZE].
 * -EINVAL for an unknown type or a payload over HXP_PAYLOAD_MAX. */
int hxp_header(uint8_t out[HXP_HEADER_SIZE], hxp_type type, size_t payload_len);

/* A payload under construction: fixed storage, never reallocates. */
typedef struct hxp_builder {
        uint8_t *buf;
        size_t len, size;
        bool overflow;          /* something did not fit; the payload is unusable */
} hxp_builder;

void hxp_builder_init(hxp_builder *b, uint8_t *buf, size_t size);
void hxp_put_u32(hxp_builder *b, uint16_t tag, uint32_t value);
void hxp_put_bytes(hxp_builder *b, uint16_t tag, const void *value, size_t len);

/* Walks the TLV records of a payload. */
typedef struct hxp_tlv_iter {
        const uint8_t *p;
        size_t left;
} hxp_tlv_iter;

void hxp_tlv_begin(hxp_tlv_iter *it, const uint8_t *payload, size_t len);
/* 1 with the next record, 0 at the end, -EBADMSG when a record runs past the end. */
int hxp_tlv_next(hxp_tlv_iter *it, uint16_t *ret_tag, const uint8_t **ret_value,
                 uint32_t *ret_len);
/* A u32 value: -EBADMSG unless len is exactly 4. */
int hxp_tlv_u32(const uint8_t *value, uint32_t len, uint32_t *ret);
/* A u64 value: -EBADMSG unless len is exactly 8. */
int hxp_tlv_u64(const uint8_t *value, uint32_t len, uint64_t *ret);
void hxp_put_u64(hxp_builder *b, uint16_t tag, uint64_t value);

static inline void hxp_store_u32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
        p[2] = (uint8_t)(v >> 16);
        p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t hxp_load_u32(const uint8_t *p) {
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- the RUN request, decoded (used by the agent and by tests) ---------------- */

#define HXP_ENV_MAX 4096
#define HXP_GLOBS_MAX 64        /* return_files globs (REQUEST_GLOBS_MAX) */
#define HXP_PATH_MAX 255        /* bytes of a file's path (REQUEST_PATH_MAX) */
#define HXP_ARGV_MAX 64         /* argv entries */
#define HXP_ARG_MAX 4096        /* bytes of one */

typedef struct hxp_run {
        uint32_t language, timeout_ms, memory_mb, pids_max, nofile, tmpfs_mb, output_max;
        uint32_t code_len, stdin_len;
        size_t n_env;
        /* each points into the payload: "NAME=value", not NUL-terminated */
        const uint8_t *env[HXP_ENV_MAX];
        uint32_t env_len[HXP_ENV_MAX];
        /* files: optional fields, 0 when absent */
        uint32_t files, return_files;
        uint64_t files_bytes, return_bytes;
        size_t n_globs;
        const uint8_t *glob[HXP_GLOBS_MAX];     /* into the payload, not NUL-terminated */
        uint32_t glob_len[HXP_GLOBS_MAX];
        /* sessions: optional, 0 (none) when absent */
        uint32_t interactive;
        size_t n_argv;
        const uint8_t *argv[HXP_ARGV_MAX];      /* into the payload, not NUL-terminated */
        uint32_t argv_len[HXP_ARGV_MAX];
} hxp_run;

/* Decodes and checks a RUN payload: every required u32 field present exactly once,
 * the optional ones at most once, env entries of the form NAME=value without NUL,
 * globs non-empty, without NUL, at most HXP_PATH_MAX bytes, interactive 0 or 1, argv
 * entries without NUL, at most HXP_ARG_MAX bytes, the first one absolute. -EBADMSG
 * otherwise. */
int hxp_run_decode(const uint8_t *payload, size_t len, hxp_run *ret);

typedef struct hxp_exit {
        uint32_t wait_status, timed_out, oom_killed, time_ms, memory_kb;
} hxp_exit;

/* Decodes an EXIT payload: wait_status required, the rest default to 0. */
int hxp_exit_decode(const uint8_t *payload, size_t len, hxp_exit *ret);

/* FILE and FILE_OUT, decoded. */
typedef struct hxp_file {
        const uint8_t *path;    /* into the payload, not NUL-terminated */
        uint32_t path_len;
        uint64_t size;
        uint32_t truncated;
        uint64_t len;           /* bytes that follow in FILE_DATA (FILE: size) */
} hxp_file;

/* Decodes a FILE or FILE_OUT payload: a path of 1..HXP_PATH_MAX bytes without NUL
 * and a size, each exactly once; truncated and len default to 0 and size; a
 * truncated file carries no bytes, len is never over size. -EBADMSG otherwise. The
 * path rule itself (relative, normalised) is the caller's: request_path_normalize. */
int hxp_file_decode(const uint8_t *payload, size_t len, hxp_file *ret);
