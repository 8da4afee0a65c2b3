/* SPDX-License-Identifier: Apache-2.0 */
/* Head and tail of untrusted output within a hard cap (capbuf.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/capbuf.h"

void capbuf_init(capbuf *b, size_t limit)
{
        memset(b, 0, sizeof(*b));
        b->limit = limit;
}

void capbuf_free(capbuf *b)
{
        free(b->data);
        free(b->tail);
        b->data = b->tail = NULL;
        b->len = b->alloc = 0;
        b->tail_len = b->tail_alloc = b->tail_start = 0;
}

static size_t head_limit(const capbuf *b) { return b->limit - b->limit / 2; }
static size_t tail_limit(const capbuf *b) { return b->limit / 2; }

/* Grows *buf to hold need bytes (+ a NUL), doubling, never past cap (+ the NUL). */
static int grow(char **buf, size_t *alloc, size_t need, size_t cap)
{
        if (need + 1 <= *alloc)
                return 0;
        size_t na = *alloc ? *alloc : 4096;
        while (na < need + 1)
                na *= 2;
        if (na > cap + 1)
                na = cap + 1;
        char *d = realloc(*buf, na);
        if (!d)
                return -ENOMEM;
        *buf = d;
        *alloc = na;
        return 0;
}

static int append_head(capbuf *b, const char *p, size_t n)
{
        if (grow(&b->data, &b->alloc, b->len + n, head_limit(b)) < 0)
                return -ENOMEM;
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

/* The tail keeps the last tail_limit bytes: linear while it fills, a ring after. */
static int append_tail(capbuf *b, const char *p, size_t n)
{
        size_t cap = tail_limit(b);
        if (cap == 0) {
                b->dropped += n;
                return 0;
        }
        if (n >= cap) {
                /* only the last cap bytes of this piece survive */
                b->dropped += b->tail_len + (n - cap);
                if (grow(&b->tail, &b->tail_alloc, cap, cap) < 0)
                        return -ENOMEM;
                memcpy(b->tail, p + (n - cap), cap);
                b->tail_len = cap;
                b->tail_start = 0;
                return 0;
        }
        if (b->tail_len + n <= cap) {
                if (grow(&b->tail, &b->tail_alloc, b->tail_len + n, cap) < 0)
                        return -ENOMEM;
                /* not yet wrapped: tail_start is 0 */
                memcpy(b->tail + b->tail_len, p, n);
                b->tail_len += n;
                return 0;
        }
        if (grow(&b->tail, &b->tail_alloc, cap, cap) < 0)
                return -ENOMEM;
        /* fill up to the cap, then overwrite the oldest bytes */
        size_t fill = cap - b->tail_len;
        size_t pos = (b->tail_start + b->tail_len) % cap;
        for (size_t done = 0; done < n;) {
                size_t run = cap - pos < n - done ? cap - pos : n - done;
                memcpy(b->tail + pos, p + done, run);
                done += run;
                pos = (pos + run) % cap;
        }
        size_t overwritten = n - fill;
        b->tail_len = cap;
        b->tail_start = (b->tail_start + overwritten) % cap;
        b->dropped += overwritten;
        return 0;
}

/* Until the output passes the cap, the head holds all of it, so an output the cap does
 * not cut is one buffer from its first byte and capbuf_steal hands it out as it is
 * (no join of head and tail: for a 10 MB output that was a copy of every byte). */
static bool linear(const capbuf *b) { return b->tail_len == 0 && b->dropped == 0; }

/* The output just went past the cap: what the head holds beyond its half moves to
 * the tail, and the head gives back the memory it no longer needs. */
static int split(capbuf *b)
{
        size_t hl = head_limit(b);
        if (b->len > hl) {
                if (append_tail(b, b->data + hl, b->len - hl) < 0)
                        return -ENOMEM;
                b->len = hl;
                b->data[hl] = '\0';
        }
        if (b->alloc <= hl + 1)
                return 0;
        char *d = realloc(b->data, hl + 1);
        if (d) {
                b->data = d;
                b->alloc = hl + 1;
        }
        return 0;
}

int capbuf_append(capbuf *b, const void *p, size_t n)
{
        const char *c = p;
        if (linear(b)) {
                if (n <= b->limit - b->len) {
                        if (n == 0)
                                return 0;
                        if (grow(&b->data, &b->alloc, b->len + n, b->limit) < 0)
                                return -ENOMEM;
                        memcpy(b->data + b->len, c, n);
                        b->len += n;
                        b->data[b->len] = '\0';
                        return 0;
                }
                if (split(b) < 0)
                        return -ENOMEM;
        }
        size_t room = head_limit(b) - b->len;
        size_t take = n < room ? n : room;
        if (take > 0 && append_head(b, c, take) < 0)
                return -ENOMEM;
        if (n > take)
                return append_tail(b, c + take, n - take);
        return 0;
}

char *capbuf_reserve(capbuf *b, size_t want, size_t *ret_room)
{
        if (!linear(b) || b->len >= b->limit)
                return NULL;
        size_t need = b->limit - b->len < want ? b->limit : b->len + want;
        if (grow(&b->data, &b->alloc, need, b->limit) < 0)
                return NULL;
        *ret_room = b->alloc - 1 - b->len; /* alloc is at most the cap + the NUL */
        return b->data + b->len;
}

void capbuf_commit(capbuf *b, size_t n)
{
        b->len += n;
        b->data[b->len] = '\0';
}

ssize_t capbuf_read_fd(capbuf *b, int fd)
{
        char chunk[65536];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0)
                return errno == EINTR ? -EAGAIN : -errno;
        if (n > 0 && capbuf_append(b, chunk, (size_t)n) < 0)
                return -ENOMEM;
        return n;
}

char *capbuf_steal(capbuf *b, size_t *ret_len)
{
        char marker[64] = "";
        if (b->dropped > 0)
                snprintf(marker, sizeof(marker), "\n[hexr-sandbox: %zu bytes left out]\n", b->dropped);
        size_t ml = strlen(marker);
        size_t len = b->len + ml + b->tail_len;
        char *d;
        if (ml == 0 && b->tail_len == 0 && b->data) {
                d = b->data;    /* the common case: the head is the whole output */
                b->data = NULL;
        } else {
                /* the head grown in place (a large one is moved by remapping its pages,
                 * not copied), the marker and the tail after it */
                d = realloc(b->data, len + 1);
                if (!d) {
                        *ret_len = 0;
                        return NULL;
                }
                b->data = NULL;
                memcpy(d + b->len, marker, ml);
                /* the ring from its oldest byte: tail_start .. end, then 0 .. tail_start */
                size_t first = b->tail_len - b->tail_start;
                if (b->tail_len) {
                        memcpy(d + b->len + ml, b->tail + b->tail_start, first);
                        memcpy(d + b->len + ml + first, b->tail, b->tail_len - first);
                }
                d[len] = '\0';
        }
        size_t dropped = b->dropped;
        capbuf_free(b);
        b->dropped = dropped;
        *ret_len = len;
        return d;
}
