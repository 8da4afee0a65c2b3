/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers used everywhere: cleanup attributes, hand-offs, array sizes. */
#pragma once

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
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
/* Both ends of a pipe or socketpair (an int[2], -1 where closed or handed off). */
static inline void close_pairp(int (*pair)[2])
{
        closep(&(*pair)[0]);
        closep(&(*pair)[1]);
}
/* A child process not handed off yet: killed and reaped (crun's cleanup_pid). */
static inline void kill_reapp(pid_t *pid)
{
        if (*pid > 0) {
                int saved = errno;
                (void)kill(*pid, SIGKILL);
                while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                errno = saved;
        }
}
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_pipe_ _cleanup_(close_pairp)
#define _cleanup_child_ _cleanup_(kill_reapp)

/* Hand ownership out of a cleanup variable. */
#define TAKE_PTR(p) ({ typeof(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })
#define TAKE_PID(pid) ({ pid_t _pid = (pid); (pid) = -1; _pid; })

static inline int negative_errno(void) { return errno > 0 ? -errno : -EIO; }

/* Closes *fd if open and marks it closed. */
static inline void close_fd(int *fd)
{
        if (*fd >= 0) {
                close(*fd);
                *fd = -1;
        }
}
