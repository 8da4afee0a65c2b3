/* SPDX-License-Identifier: Apache-2.0 */
/* exec's files: --file LOCAL[:PATH] into the request, --out DIR for what comes back
 * (never written outside DIR, nor through a symlink in it). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/macro.h"

int cli_add_file(hxs_request *req, const char *arg, char *why, size_t why_size)
{
        char local[4096];
        snprintf(local, sizeof(local), "%s", arg);
        /* PATH after the last colon; without one, the local file's name */
        char *colon = strrchr(local, ':');
        const char *path;
        if (colon && colon[1]) {
                *colon = '\0';
                path = colon + 1;
        } else {
                if (colon)
                        *colon = '\0';
                const char *slash = strrchr(local, '/');
                path = slash ? slash + 1 : local;
        }
        _cleanup_close_ int fd = open(local, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                snprintf(why, why_size, "--file: %s: %s", local, fd < 0 ? strerror(errno) : "not a regular file");
                return -EINVAL;
        }
        int r = hxs_request_add_file_fd(req, path, fd, (uint64_t)st.st_size);
        if (r < 0)
                snprintf(why, why_size, "--file: %s: %s", local, strerror(-r));
        return r;
}

static int open_beneath(int dirfd, const char *name, int flags, mode_t mode)
{
        struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), .mode = mode,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
        return fd < 0 ? -errno : (int)fd;
}

/* The directory of path's parent beneath dirfd, made one component at a time: each is
 * created in its parent's own fd and opened beneath it, so a symlink already in DIR
 * (out -> /elsewhere) can neither be followed nor have a directory made through it. */
static int open_parent(int dirfd, char *path, char **ret_name)
{
        int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        char *name = path, *s;

        if (cur < 0)
                return -errno;
        for (; (s = strchr(name, '/')); name = s + 1) {
                *s = '\0';
                if (mkdirat(cur, name, 0755) < 0 && errno != EEXIST) {
                        int r = -errno;
                        close(cur);
                        return r;
                }
                int next = open_beneath(cur, name, O_RDONLY | O_DIRECTORY, 0);
                close(cur);
                if (next < 0)
                        return next;
                cur = next;
        }
        *ret_name = name;
        return cur;
}

static int write_one(int dirfd, const hxs_file *f)
{
        char path[512], *name = NULL;
        snprintf(path, sizeof(path), "%s", f->path);
        _cleanup_close_ int parent = open_parent(dirfd, path, &name);
        if (parent < 0)
                return parent;
        int fd = open_beneath(parent, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
                return fd;
        size_t off = 0;
        int r = 0;
        while (off < f->len) {
                ssize_t n = write(fd, f->data + off, f->len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        break;
                }
                off += (size_t)n;
        }
        close(fd);
        return r;
}

int cli_write_files(const char *dir, const hxs_result *res, char *why, size_t why_size)
{
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                snprintf(why, why_size, "--out: %s: %s", dir, strerror(errno));
                return -errno;
        }
        _cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0) {
                snprintf(why, why_size, "--out: %s: %s", dir, strerror(errno));
                return -errno;
        }
        for (size_t i = 0; i < res->n_files; i++) {
                const hxs_file *f = &res->files[i];
                if (f->truncated || f->path[0] == '/' || strstr(f->path, "..")) {
                        continue; /* nothing to write, or not below dir */
                }
                int r = write_one(dirfd, f);
                if (r < 0) {
                        snprintf(why, why_size, "--out: %s/%s: %s", dir, f->path, strerror(-r));
                        return r;
                }
        }
        return 0;
}
