/* SPDX-License-Identifier: Apache-2.0 */
/* A byte buffer with a hard cap that keeps the head and the tail: the first half of
 * the cap as it came, the last half as a ring, and what fell between them counted,
 * never buffered. Holds untrusted program output; the end of a long output (the
 * answer, the traceback) is what a reader needs most. Until the output passes the
 * cap, data holds all of it (tail empty): an uncut output is never joined or copied. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct capbuf {
        char *data;             /* the head, as it came (all of it, until past the cap) */
        size_t len, alloc, limit;
        char *tail;             /* the tail: linear until full, then a ring from tail_start */
        size_t tail_len, tail_alloc, tail_start;
        size_t dropped;         /* bytes left out between head and tail */
} capbuf;

void capbuf_init(capbuf *b, size_t limit);
void capbuf_free(capbuf *b);
/* Keeps what the head and tail hold; counts what falls out. -ENOMEM only. */
int capbuf_append(capbuf *b, const void *p, size_t n);
/* Room for at least `want` more bytes right after what an uncut output holds (fewer
 * only near the cap), so a reader can read straight into the buffer; *ret_room is how
 * much. NULL once the output reached the cap (append then cuts it) or on ENOMEM. */
char *capbuf_reserve(capbuf *b, size_t want, size_t *ret_room);
/* The first n (<= room) bytes of the room now hold output. */
void capbuf_commit(capbuf *b, size_t n);
/* Reads once from a non-blocking fd into the buffer. Returns bytes read (>0),
 * 0 at EOF, -EAGAIN when nothing is ready, other -errno on error. */
ssize_t capbuf_read_fd(capbuf *b, int fd);
static inline bool capbuf_truncated(const capbuf *b) { return b->dropped > 0; }
/* Hands the bytes out as a NUL-terminated string (never NULL): the head, then, when
 * something was left out, the line "\n[hexr-sandbox: N bytes left out]\n", then the
 * tail. Resets the buffer (dropped stays, for the caller to report). NULL on ENOMEM. */
char *capbuf_steal(capbuf *b, size_t *ret_len);
