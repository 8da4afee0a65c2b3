/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/macro.h"

int write_file(const char *path, const char *value)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        size_t len = strlen(value);
        ssize_t n = write(fd, value, len);
        if (n < 0)
                return -errno;
        return (size_t)n == len ? 0 : -EIO;
}

ssize_t read_file(const char *path, char *buf, size_t size)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        size_t got = 0;
        while (got + 1 < size) {
                ssize_t n = read(fd, buf + got, size - 1 - got);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                got += (size_t)n;
        }
        buf[got] = '\0';
        return (ssize_t)got;
}

int proc_start_time(pid_t pid, unsigned long long *ret)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        ssize_t n = read_file(path, buf, sizeof(buf));
        if (n < 0)
                return (int)n;
        /* comm may hold spaces and parentheses: fields start after the last ')' */
        char *p = strrchr(buf, ')');
        if (!p)
                return -EINVAL;
        p++;
        /* p is at the space before field 3; step to the one before field 22 */
        for (int field = 3; field < 22; field++) {
                p = strchr(p + 1, ' ');
                if (!p)
                        return -EINVAL;
        }
        return sscanf(p, " %llu", ret) == 1 ? 0 : -EINVAL;
}

int timerfd_arm_ms(int tfd, uint64_t ms)
{
        struct itimerspec its = { .it_value = { .tv_sec = (time_t)(ms / 1000),
                                                .tv_nsec = (long)(ms % 1000) * 1000000 } };
        if (ms == 0)
                its.it_value.tv_nsec = 1; /* all zero would disarm it */
        return timerfd_settime(tfd, 0, &its, NULL) < 0 ? -errno : 0;
}

int fd_set_nonblock(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}
