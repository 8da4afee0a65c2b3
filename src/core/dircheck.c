/* SPDX-License-Identifier: Apache-2.0 */
/* Directory ownership and reachability checks; see dircheck.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/dircheck.h"
#include "core/error.h"

int dir_check_private(const char *path, const char *setting, char *ret_real, size_t size, hxs_error *err)
{
        char real[PATH_MAX];
        if (!realpath(path, real))
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, setting, "%s: %s: %s", setting, path,
                                      strerror(errno));
        if (strlen(real) >= size)
                return err_fail_field(err, HXS_ERR_INVALID, -ENAMETOOLONG, setting,
                                      "%s: %s is longer than %zu characters", setting, real, size - 1);
        /* from the directory itself up to / (every prefix of the resolved path) */
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s", real);
        size_t len = strlen(p);
        for (bool self = true;; self = false) {
                struct stat st;
                const char *shown = len ? p : "/";
                if (lstat(shown, &st) < 0)
                        return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, setting, "%s: %s: %s", setting,
                                              shown, strerror(errno));
                const char *what = self ? "" : "the directory above it, ";
                if (!S_ISDIR(st.st_mode))
                        return err_fail_field(err, HXS_ERR_UNSUPPORTED, -ENOTDIR, setting,
                                              "%s: %s%s is not a directory", setting, what, shown);
                if (st.st_uid != 0 && st.st_uid != geteuid())
                        return err_fail_field(err, HXS_ERR_UNSUPPORTED, -EPERM, setting,
                                              "%s: %s%s belongs to uid %u: whoever owns it can replace what the service keeps there; it and every directory above it must belong to root (chown root %s)",
                                              setting, what, shown, (unsigned)st.st_uid, shown);
                if ((st.st_mode & 022) && (self || !(st.st_mode & S_ISVTX)))
                        return err_fail_field(err, HXS_ERR_UNSUPPORTED, -EPERM, setting,
                                              "%s: %s%s (mode %04o) is writable by %s: it and every directory above it must be writable by root only (chmod go-w %s)%s",
                                              setting, what, shown, (unsigned)(st.st_mode & 07777),
                                              (st.st_mode & 002) ? "others" : "its group", shown,
                                              self ? "" : ", or sticky as /tmp is");
                if (len == 0) {
                        snprintf(ret_real, size, "%s", real);
                        return 0;
                }
                while (len > 0 && p[len] != '/')
                        len--;
                p[len] = '\0';
        }
}

/* The child: becomes uid and tries; writes the path that failed and exits with errno. */
static _Noreturn void try_child(int out, uid_t uid, const char *dir, bool list, const char *suffix,
                                unsigned max_entries)
{
        const char *bad = dir;
        int e = 0;
        if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0) {
                e = errno;
        } else if (!list) {
                int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        e = errno;
        } else {
                DIR *d = opendir(dir);
                struct dirent *de;
                size_t sl = strlen(suffix);
                unsigned seen = 0;
                if (!d)
                        e = errno;
                while (d && !e && seen < max_entries && (de = readdir(d))) {
                        size_t n = strlen(de->d_name);
                        if (n < sl || strcmp(de->d_name + n - sl, suffix) != 0)
                                continue;
                        seen++;
                        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0) {
                                e = errno;
                                bad = de->d_name;
                        } else {
                                close(fd);
                        }
                }
                if (e && bad != dir) {
                        char p[PATH_MAX];
                        snprintf(p, sizeof(p), "%s/%s", dir, bad);
                        (void)!write(out, p, strlen(p));
                        _exit(e);
                }
        }
        if (e)
                (void)!write(out, bad, strlen(bad));
        _exit(e);
}

int dir_try_as(uid_t uid, const char *dir, bool list, const char *suffix, unsigned max_entries,
               char *bad, size_t bad_size)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        if (pid == 0) {
                close(p[0]);
                try_child(p[1], uid, dir, list, suffix ? suffix : "", max_entries);
        }
        close(p[1]);
        size_t got = 0;
        for (;;) {
                ssize_t n = read(p[0], bad + got, bad_size - 1 - got);
                if (n > 0 && got + (size_t)n < bad_size - 1) {
                        got += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n > 0)
                        got += (size_t)n;
                break;
        }
        bad[got] = '\0';
        close(p[0]);
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status))
                return -EIO;
        return -WEXITSTATUS(status);
}
