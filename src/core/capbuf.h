/* SPDX-License-Identifier: Apache-2.0 */
/* A growable byte buffer with a hard cap: what goes past the cap is dropped and
 * counted, never buffered. Holds untrusted program output. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct capbuf {
        char *data;
        size_t len, alloc, limit;
        size_t dropped;         /* bytes seen past the limit */
} capbuf;

void capbuf_init(capbuf *b, size_t limit);
void capbuf_free(capbuf *b);
/* Appends what fits; counts the rest as dropped. -ENOMEM only. */
int capbuf_append(capbuf *b, const void *p, size_t n);
/* Reads once from a non-blocking fd into the buffer. Returns bytes read (>0),
 * 0 at EOF, -EAGAIN when nothing is ready, other -errno on error. */
ssize_t capbuf_read_fd(capbuf *b, int fd);
static inline bool capbuf_truncated(const capbuf *b) { return b->dropped > 0; }
/* Hands the bytes out as a NUL-terminated string (never NULL); resets the buffer. */
char *capbuf_steal(capbuf *b, size_t *ret_len);
