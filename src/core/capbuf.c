/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
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
        b->data = NULL;
        b->len = b->alloc = 0;
}

int capbuf_append(capbuf *b, const void *p, size_t n)
{
        size_t room = b->limit - b->len;
        size_t take = n < room ? n : room;
        if (take > 0) {
                if (b->len + take + 1 > b->alloc) {
                        size_t na = b->alloc ? b->alloc : 4096;
                        while (na < b->len + take + 1)
                                na *= 2;
                        if (na > b->limit + 1)
                                na = b->limit + 1;
                        char *d = realloc(b->data, na);
                        if (!d)
                                return -ENOMEM;
                        b->data = d;
                        b->alloc = na;
                }
                memcpy(b->data + b->len, p, take);
                b->len += take;
                b->data[b->len] = '\0';
        }
        b->dropped += n - take;
        return 0;
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
        char *d = b->data;
        size_t len = b->len;
        if (!d) {
                d = calloc(1, 1);
                len = 0;
        }
        b->data = NULL;
        b->len = b->alloc = 0;
        *ret_len = len;
        return d;
}
