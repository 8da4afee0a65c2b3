/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the Firecracker driver says to Firecracker and how it reads the answers: the
 * JSON bodies of the API requests, HTTP/1.1 over the API's unix socket, and the text
 * handshake of Firecracker's host-initiated vsock ("CONNECT <port>\n" / "OK <n>\n").
 *
 * The parsers are pure (no I/O) so the unit tests can feed them hostile bytes: once
 * a guest has run, Firecracker may be under the guest's control, so every answer is
 * read with a hard cap and checked byte by byte. The I/O helpers block, each bounded
 * by an absolute CLOCK_MONOTONIC deadline.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* An API answer is a status line, a few headers and at most a short JSON error. */
#define FC_HTTP_RESPONSE_MAX  8192u
/* "OK 4294967295\n" with room to spare; a longer line is not Firecracker's. */
#define FC_VSOCK_LINE_MAX     32u

/* ---- request bodies (malloc'd NUL-terminated JSON; NULL when out of memory) ----- */

char *fc_body_boot_source(const char *kernel, const char *initrd, const char *boot_args);
char *fc_body_drive(const char *drive_id, const char *path, bool is_root_device, bool read_only);
char *fc_body_machine_config(uint32_t vcpu_count, uint32_t mem_size_mib);
char *fc_body_vsock(uint32_t guest_cid, const char *uds_path);
char *fc_body_action(const char *action_type);

/* ---- HTTP ------------------------------------------------------------------------- */

/* The request head for a body of body_len bytes. Length written (< size), or
 * -ENAMETOOLONG when it does not fit, -EINVAL for a path with bytes HTTP forbids. */
int fc_http_head(char *buf, size_t size, const char *method, const char *path, size_t body_len);

typedef struct fc_http_response {
        int status;             /* 100..599 */
        const char *body;       /* into the parsed buffer; not NUL-terminated */
        size_t body_len;
} fc_http_response;

/* Parses one response at the start of buf[0..len). Returns the bytes it spans (> 0)
 * with *ret filled, 0 when more bytes are needed, -EBADMSG when it is not a valid
 * HTTP/1.x response we accept (no Content-Length for a body, chunked encoding, a
 * head or body over FC_HTTP_RESPONSE_MAX, control bytes in the head). */
long fc_http_parse(const char *buf, size_t len, fc_http_response *ret);

/* Firecracker's error body {"fault_message": "..."} as one printable line in out
 * (the raw body, made printable, when it is not that JSON). */
void fc_fault_message(const char *body, size_t len, char *out, size_t size);

/* ---- vsock handshake ---------------------------------------------------------------- */

/* The reply to CONNECT as read so far, buf[0..len). 1 with the port Firecracker gave
 * the connection, 0 while no newline has arrived (and len < FC_VSOCK_LINE_MAX),
 * -EPROTO for anything but "OK <decimal u32>\n" (-EPROTO too for a line too long). */
int fc_vsock_parse_ok(const char *buf, size_t len, uint32_t *ret_port);

/* ---- blocking I/O, bounded by a CLOCK_MONOTONIC deadline -------------------------------- */

/* Sends one request on a connected stream socket and reads its answer. 0 with the
 * status in *ret_status; on a status other than 2xx, fault (if not NULL) gets the
 * fault message. -ETIMEDOUT, -EPIPE (closed), -EBADMSG, or another -errno. */
int fc_api_call(int fd, const char *method, const char *path, const char *body,
                const struct timespec *deadline, int *ret_status, char *fault, size_t fault_size);

/* Sends "CONNECT <port>\n" and reads the reply line one byte at a time, so that not a
 * byte of the agent's stream is consumed. 0 when it was OK; -ECONNRESET when
 * Firecracker closed the connection (nobody listens in the guest yet), -EPROTO,
 * -ETIMEDOUT, or another -errno. */
int fc_vsock_handshake(int fd, uint32_t port, const struct timespec *deadline);

/* Milliseconds left until deadline (0 when past, capped at INT_MAX). */
int fc_ms_left(const struct timespec *deadline);
void fc_deadline_in(struct timespec *ret, long ms);
