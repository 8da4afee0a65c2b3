/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest agent as the stand-in hypervisors (tests/fake-firecracker, tests/fake-qemu)
 * play it on the stream the driver connects: READY to HELLO; RUN, CODE, STDIN and the
 * files in (FILE, FILE_DATA) collected; at START the fake's own on_start decides what the "guest" does. And the
 * one line both print first about the jail they run in. Static, no allocation.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "proto/proto.h"

/* A file in, as it came (its first FAKE_FILE_BYTES bytes). */
#define FAKE_FILES_MAX 16
#define FAKE_FILE_BYTES 4096
typedef struct fake_file {
        char path[HXP_PATH_MAX + 1];
        uint64_t size;
        char data[FAKE_FILE_BYTES];
        size_t len;
} fake_file;

/* What came before START: the decoded RUN (valid only when have_run) and the files. */
const hxp_run *fake_run(void);
const fake_file *fake_files(size_t *ret_n);

/* The next frame from the host (valid until the next call); exits 0 when the host has
 * gone, 1 on a malformed frame. For on_start, to go on with the conversation. */
void fake_next_frame(int fd, hxp_frame *ret);

/* Writes all of it; exits 0 when the host has gone (so does the VM). */
void fake_write_all(int fd, const void *p, size_t n);
void fake_send_frame(int fd, hxp_type type, const void *p, size_t n);

/* Called at START with the code received and whether a valid RUN came; does not
 * return (the VM powers off). */
typedef void (*fake_start_fn)(int fd, const char *code, size_t code_len, bool have_run);

/* Serves the stream on fd until START (then on_start); ready_text follows the nonce
 * in READY. Exits 0 when the host goes, 1 on a malformed frame. */
_Noreturn void fake_agent(int fd, const char *ready_text, fake_start_fn on_start);

/* "pid=P uid=R,E,S gid=R,E,S groups=N nnp=N caps=E,P,I bounding=N pdeathsig=N": who it
 * runs as, and that it dies with the service. */
void fake_ids(char *out, size_t size);

/* Sends STDOUT text, then EXIT with status 0, and exits: the VM powers off. */
_Noreturn void fake_report_and_exit(int fd, const char *text, size_t len);
