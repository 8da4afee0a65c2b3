/* SPDX-License-Identifier: Apache-2.0 */
/* Iterative tree walks of unbounded depth; see tree.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/macro.h"
#include "core/tree.h"

typedef struct dir_id {
        dev_t dev;
        ino_t ino;
} dir_id;

static int id_of(int fd, dir_id *ret)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        *ret = (dir_id){ st.st_dev, st.st_ino };
        return 0;
}

static bool same_id(dir_id a, dir_id b)
{
        return a.dev == b.dev && a.ino == b.ino;
}

static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
        if (n < *cap)
                return 0;
        size_t nc = *cap ? *cap * 2 : 64;
        void *p = realloc(*arr, nc * size);
        if (!p)
                return -ENOMEM;
        *arr = p;
        *cap = nc;
        return 0;
}

static int open_dir(int dirfd, const char *name)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* The parent of cur, which must be `want`. Consumes cur. */
static int climb(int cur, dir_id want)
{
        int parent = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r = parent < 0 ? -errno : 0;
        dir_id got;
        if (r == 0 && (r = id_of(parent, &got)) == 0 && !same_id(got, want))
                r = -ESTALE; /* moved while we were inside: never touch what is above now */
        close(cur);
        if (r < 0) {
                if (parent >= 0)
                        close(parent);
                return r;
        }
        return parent;
}

/* ---- removing ------------------------------------------------------------------------ */

/* Unlinks what it can in the directory fd. 0 when fd is empty now; 1 with *ret_child
 * open on a subdirectory that is not empty (to be emptied first); -errno. */
static int empty_dir(int fd, dev_t dev, uint64_t *removed, int *ret_child)
{
        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
        if (!d) {
                int r = -errno;
                if (dfd >= 0)
                        close(dfd);
                return r;
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (errno = 0, de = readdir(d))) {
                const char *n = de->d_name;
                if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
                        continue;
                if (unlinkat(fd, n, 0) == 0 || errno == ENOENT) {
                        (*removed)++;
                        continue;
                }
                if (errno != EISDIR && errno != EPERM) {
                        r = -errno;
                        break;
                }
                if (unlinkat(fd, n, AT_REMOVEDIR) == 0 || errno == ENOENT) {
                        (*removed)++;
                        continue;
                }
                if (errno != ENOTEMPTY && errno != EEXIST) {
                        r = -errno;
                        break;
                }
                int child = open_dir(fd, n);
                struct stat st;
                if (child < 0) {
                        r = child;
                } else if (fstat(child, &st) < 0 || st.st_dev != dev) {
                        r = st.st_dev != dev ? -EXDEV : -errno;
                        close(child);
                } else {
                        *ret_child = child;
                        r = 1;
                }
        }
        if (r == 0 && errno)
                r = -errno;
        closedir(d);
        return r;
}

int tree_remove_at(int dirfd, const char *name)
{
        if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                return 0;
        if (errno != ENOTEMPTY && errno != EEXIST)
                return -errno;

        int cur = open_dir(dirfd, name);
        if (cur < 0)
                return cur;
        dir_id top = { 0, 0 };
        int r = id_of(cur, &top);
        dir_id *above = NULL;   /* the directories between top and cur */
        size_t depth = 0, cap = 0;
        uint64_t removed = 0, removed_at_descent = UINT64_MAX;
        dir_id last_descent = { 0, 0 };
        while (r == 0) {
                int child = -1;
                r = empty_dir(cur, top.dev, &removed, &child);
                if (r == 1) {
                        dir_id cid = { 0, 0 };
                        r = id_of(child, &cid);
                        /* the same directory again with nothing removed since: it says
                         * it is not empty but lists nothing we can remove */
                        if (r == 0 && same_id(cid, last_descent) && removed == removed_at_descent)
                                r = -ENOTEMPTY;
                        if (r == 0)
                                r = grow((void **)&above, &cap, depth, sizeof(*above));
                        if (r == 0)
                                r = id_of(cur, &above[depth]);
                        if (r < 0) {
                                close(child);
                                break;
                        }
                        depth++;
                        last_descent = cid;
                        removed_at_descent = removed;
                        close(cur);
                        cur = child;
                        continue;
                }
                if (r < 0 || depth == 0)
                        break;
                /* cur is empty: back up; the parent's next pass removes it */
                cur = climb(cur, above[--depth]);
                if (cur < 0)
                        r = cur;
        }
        if (cur >= 0)
                close(cur);
        free(above);
        if (r == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                r = -errno;
        return r;
}

/* ---- measuring ----------------------------------------------------------------------- */

typedef struct frame {
        dir_id parent;          /* the directory this frame's child was found in */
        long pos;               /* where, for seekdir */
        char *name;             /* the child's name there */
} frame;

static DIR *dir_of(int fd)
{
        DIR *d = fdopendir(fd);
        if (!d)
                close(fd);
        return d;
}

/* Positions d just after the entry `name` (found at pos when the tree was read). */
static int resume_after(DIR *d, long pos, const char *name)
{
        struct dirent *de;
        seekdir(d, pos);
        if ((de = readdir(d)) && strcmp(de->d_name, name) == 0)
                return 0;
        /* positions that do not survive reopening the directory: find it by name */
        rewinddir(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, name) == 0)
                        return 0;
        return -ESTALE;
}

int tree_measure_at(int at, const char *name, uint64_t max_inodes, tree_usage *ret)
{
        struct stat st;
        if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        tree_usage u = { (uint64_t)st.st_blocks * 512, 1 };
        if (u.inodes > max_inodes)
                return -E2BIG;
        if (!S_ISDIR(st.st_mode)) {
                *ret = u;
                return 0;
        }
        dev_t dev = st.st_dev;
        int fd = open_dir(at, name);
        if (fd < 0)
                return fd;
        DIR *d = dir_of(fd);
        if (!d)
                return -ENOMEM;
        frame *stack = NULL;
        size_t depth = 0, cap = 0;
        int r = 0;
        while (r == 0) {
                long pos = telldir(d);
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        if (errno) {
                                r = -errno;
                                break;
                        }
                        if (depth == 0)
                                break;
                        frame f = stack[--depth];
                        int parent = climb(dup(dirfd(d)), f.parent);
                        closedir(d);
                        d = NULL;
                        if (parent < 0) {
                                r = parent;
                        } else if (!(d = dir_of(parent))) {
                                r = -ENOMEM;
                        } else {
                                r = resume_after(d, f.pos, f.name);
                        }
                        free(f.name);
                        continue;
                }
                const char *n = de->d_name;
                if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT)
                                r = -errno;
                        continue;
                }
                u.bytes += (uint64_t)st.st_blocks * 512;
                if (++u.inodes > max_inodes) {
                        r = -E2BIG;
                        break;
                }
                if (!S_ISDIR(st.st_mode) || st.st_dev != dev)
                        continue;
                /* down into it, keeping only the way back */
                dir_id here;
                char *copy = strdup(n);
                int child = copy ? open_dir(dirfd(d), n) : -ENOMEM;
                if (child >= 0 && (r = id_of(dirfd(d), &here)) == 0)
                        r = grow((void **)&stack, &cap, depth, sizeof(*stack));
                if (child < 0 || r < 0) {
                        r = child < 0 ? child : r;
                        if (child >= 0)
                                close(child);
                        free(copy);
                        break;
                }
                stack[depth++] = (frame){ here, pos, copy };
                closedir(d);
                if (!(d = dir_of(child)))
                        r = -ENOMEM;
        }
        if (d)
                closedir(d);
        while (depth > 0)
                free(stack[--depth].name);
        free(stack);
        if (r == 0)
                *ret = u;
        return r;
}
