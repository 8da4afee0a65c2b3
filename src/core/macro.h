/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers used everywhere: cleanup attributes, hand-offs, array sizes. */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _fallthrough_ __attribute__((fallthrough))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Hand ownership out of a cleanup variable. */
#define TAKE_PTR(p) ({ typeof(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })

static inline int negative_errno(void) { return errno > 0 ? -errno : -EIO; }

/* Closes *fd if open and marks it closed. */
static inline void close_fd(int *fd)
{
        if (*fd >= 0) {
                close(*fd);
                *fd = -1;
        }
}
