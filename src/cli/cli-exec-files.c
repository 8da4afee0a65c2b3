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

int hxs_cli_add_file(hxs_request *req, const char *arg, char *why, size_t why_size)
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

static int write_one(int dirfd, const hxs_file *f)
{
        char path[512];
        snprintf(path, sizeof(path), "%s", f->path);
        for (char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                if (mkdirat(dirfd, path, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        int fd = open_beneath(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
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

int hxs_cli_write_files(const char *dir, const hxs_result *res, char *why, size_t why_size)
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
