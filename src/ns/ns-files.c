/* SPDX-License-Identifier: Apache-2.0 */
/* The files a request sends, from the supervisor into the sandbox's working directory
 * (ns-files.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ns/ns-files.h"

static int write_full(int fd, const void *p, size_t n)
{
        const char *c = p;
        while (n > 0) {
                ssize_t w = write(fd, c, n);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                c += w;
                n -= (size_t)w;
        }
        return 0;
}

/* size bytes of src from offset 0 to the end of dst */
static int copy_fd(int src, int dst, uint64_t size)
{
        off_t in = 0;
        while ((uint64_t)in < size) {
                size_t want = size - (uint64_t)in > (1u << 30) ? (1u << 30) : (size_t)(size - (uint64_t)in);
                ssize_t n = copy_file_range(src, &in, dst, NULL, want, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS)) {
                        /* no kernel copy between these two: through a buffer */
                        char buf[65536];
                        ssize_t r = pread(src, buf, want < sizeof(buf) ? want : sizeof(buf), in);
                        if (r < 0 && errno == EINTR)
                                continue;
                        if (r <= 0)
                                return r < 0 ? -errno : -EIO;
                        int w = write_full(dst, buf, (size_t)r);
                        if (w < 0)
                                return w;
                        in += r;
                        continue;
                }
                if (n <= 0)
                        return n < 0 ? -errno : -EIO; /* shorter than it said */
        }
        return 0;
}

int ns_files_new(void)
{
        int fd = memfd_create("hxs-files", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        return fd < 0 ? -errno : fd;
}

int ns_files_add(int fd, const char *path, uint64_t size)
{
        uint32_t pl = (uint32_t)strlen(path);
        int r;
        if ((r = write_full(fd, &pl, sizeof(pl))) < 0 || (r = write_full(fd, path, pl)) < 0)
                return r;
        return write_full(fd, &size, sizeof(size));
}

int ns_files_append(int fd, const void *p, size_t n)
{
        return write_full(fd, p, n);
}

int ns_files_seal(int fd)
{
        if (lseek(fd, 0, SEEK_SET) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        return 0;
}

int ns_files_bundle(const hxs_request *req)
{
        int fd = ns_files_new();
        if (fd < 0)
                return fd;
        int r = 0;
        for (size_t i = 0; r == 0 && i < req->n_files; i++) {
                const request_file *f = &req->files[i];
                if ((r = ns_files_add(fd, f->path, f->size)) < 0)
                        break;
                r = f->fd >= 0 ? copy_fd(f->fd, fd, f->size) : write_full(fd, f->data, f->len);
        }
        if (r == 0)
                r = ns_files_seal(fd);
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

/* ---- the sandbox's side: no malloc ------------------------------------------------- */

static int read_full(int fd, void *p, size_t n)
{
        char *c = p;
        while (n > 0) {
                ssize_t r = read(fd, c, n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : -EIO;
                c += r;
                n -= (size_t)r;
        }
        return 0;
}

/* The directories on the way to path (relative to dirfd), made as needed. */
static int make_parents(int dirfd, char *path, uid_t uid, gid_t gid)
{
        for (char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                int r = mkdirat(dirfd, path, 0755);
                if (r == 0 && fchownat(dirfd, path, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        r = -1;
                int e = errno;
                *s = '/';
                if (r < 0 && e != EEXIST)
                        return -e;
        }
        return 0;
}

static int unpack_one(int fd, int dirfd, char *path, uint64_t size, uid_t uid, gid_t gid)
{
        int r = make_parents(dirfd, path, uid, gid);
        if (r < 0)
                return r;
        int out = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (out < 0)
                return -errno;
        if (fchown(out, uid, gid) < 0 || fchmod(out, 0644) < 0)
                r = -errno;
        /* by the kernel, with no buffer of ours: a warm PID 1 runs in the template's own
         * memory, where no request's bytes may stay behind */
        while (r == 0 && size > 0) {
                ssize_t n = sendfile(out, fd, NULL, size < (1 << 30) ? (size_t)size : (size_t)1 << 30);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        r = n < 0 ? -errno : -EIO;
                else
                        size -= (uint64_t)n;
        }
        close(out);
        return r;
}

int ns_files_unpack(int fd, const char *dir, uid_t uid, gid_t gid, char *why, size_t why_size)
{
        int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0) {
                int r = -errno;
                snprintf(why, why_size, "opening %s", dir);
                return r;
        }
        for (;;) {
                uint32_t pl;
                uint64_t size;
                char path[300];
                ssize_t got = read(fd, &pl, sizeof(pl));
                if (got == 0)
                        break; /* the end of the list */
                int r = got == sizeof(pl) ? 0 : -EIO;
                if (r == 0 && pl >= sizeof(path))
                        r = -EINVAL;
                if (r == 0)
                        r = read_full(fd, path, pl);
                path[r == 0 ? pl : 0] = '\0';
                if (r == 0)
                        r = read_full(fd, &size, sizeof(size));
                if (r == 0)
                        r = unpack_one(fd, dirfd, path, size, uid, gid);
                if (r < 0) {
                        snprintf(why, why_size, "writing the file %s into %s", path, dir);
                        close(dirfd);
                        return r;
                }
        }
        close(dirfd);
        return 0;
}
