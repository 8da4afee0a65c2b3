/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-file reads and writes for /proc and /sys style files, and small fd helpers. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writes the whole string (one write(2), as kernel files want). 0 or -errno. */
int write_file(const char *path, const char *value);
/* Reads up to size-1 bytes, NUL-terminates. Returns length or -errno. */
ssize_t read_file(const char *path, char *buf, size_t size);
/* Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. */
int proc_start_time(pid_t pid, unsigned long long *ret);
/* Arms a timerfd to fire once, ms from now (0: at once). 0 or -errno. */
int timerfd_arm_ms(int tfd, uint64_t ms);
/* Adds O_NONBLOCK to fd's status flags. 0 or -errno. */
int fd_set_nonblock(int fd);
