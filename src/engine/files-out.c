/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Files out: what a program left in its working directory, read from a directory fd of
 * it once the program has ended. Regular files under output/ and those matching the
 * request's return globs, in path order, each at most once; nothing is read through a
 * symlink (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
 * RESOLVE_NO_XDEV), special files are skipped, a file still being written is taken as
 * it is. At most MAX_RETURN_FILES files; their bytes within MAX_RETURN_BYTES in all,
 * the files past it listed with truncated set and no content.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/macro.h"
#include "engine/files-out.h"

#define WALK_DEPTH_MAX 32       /* directories below the working directory */
#define WALK_ENTRIES_MAX 100000 /* entries looked at: a program may make millions */

static int open_beneath(int dirfd, const char *name, int flags)
{
        struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                           RESOLVE_NO_XDEV };
        long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
        return fd < 0 ? -errno : (int)fd;
}

/* One path segment of a pattern against one of the path; "**" takes any number. */
static bool match_segments(const char *pat, const char *path)
{
        const char *ps = strchr(pat, '/');
        size_t pl = ps ? (size_t)(ps - pat) : strlen(pat);
        if (pl == 2 && pat[0] == '*' && pat[1] == '*') {
                const char *rest = ps ? ps + 1 : "";
                if (!*rest)
                        return true; /* a trailing "**": everything below */
                for (const char *p = path;; p++) {
                        if (match_segments(rest, p))
                                return true;
                        p = strchr(p, '/');
                        if (!p)
                                return false;
                }
        }
        const char *qs = strchr(path, '/');
        size_t ql = qs ? (size_t)(qs - path) : strlen(path);
        char seg_p[256], seg_q[256];
        if (pl >= sizeof(seg_p) || ql >= sizeof(seg_q))
                return false;
        memcpy(seg_p, pat, pl);
        seg_p[pl] = '\0';
        memcpy(seg_q, path, ql);
        seg_q[ql] = '\0';
        if (fnmatch(seg_p, seg_q, FNM_PERIOD) != 0)
                return false;
        if (!ps && !qs)
                return true;
        if (!ps || !qs)
                return false;
        return match_segments(ps + 1, qs + 1);
}

bool files_glob_match(const char *pattern, const char *path)
{
        return match_segments(pattern, path);
}

typedef struct walk {
        const hxs_request *req;
        char **paths;
        size_t n, cap;
        size_t seen;
        bool all;               /* globs given: the whole tree, not only output/ */
} walk;

static bool wanted(const walk *w, const char *rel)
{
        if (strncmp(rel, "output/", 7) == 0)
                return true;
        for (size_t i = 0; i < w->req->n_globs; i++)
                if (files_glob_match(w->req->return_globs[i], rel))
                        return true;
        return false;
}

static int add_path(walk *w, const char *rel)
{
        if (w->n == w->cap) {
                size_t nc = w->cap ? w->cap * 2 : 32;
                char **p = realloc(w->paths, nc * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                w->paths = p;
                w->cap = nc;
        }
        if (!(w->paths[w->n] = strdup(rel)))
                return -ENOMEM;
        w->n++;
        return 0;
}

/* The regular files below dirfd (at rel), depth first; dirfd is closed. */
static int walk_dir(walk *w, int dirfd, const char *rel, unsigned depth)
{
        DIR *d = fdopendir(dirfd);
        if (!d) {
                close(dirfd);
                return 0;
        }
        int r = 0;
        struct dirent *e;
        while (r == 0 && (e = readdir(d)) && w->seen++ < WALK_ENTRIES_MAX) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                char path[512];
                int n = snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
                if (n < 0 || (size_t)n >= sizeof(path))
                        continue;
                struct stat st;
                if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode) && depth < WALK_DEPTH_MAX) {
                        int sub = open_beneath(dirfd, e->d_name, O_RDONLY | O_DIRECTORY);
                        if (sub >= 0)
                                r = walk_dir(w, sub, path, depth + 1);
                } else if (S_ISREG(st.st_mode) && wanted(w, path)) {
                        r = add_path(w, path);
                }
        }
        closedir(d);
        return r;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static const struct {
        const char *ext, *mime;
} mime_table[] = {
        { "png", "image/png" },       { "jpg", "image/jpeg" },         { "jpeg", "image/jpeg" },
        { "gif", "image/gif" },       { "svg", "image/svg+xml" },      { "webp", "image/webp" },
        { "pdf", "application/pdf" }, { "json", "application/json" }, { "csv", "text/csv" },
        { "tsv", "text/tab-separated-values" }, { "txt", "text/plain" }, { "md", "text/markdown" },
        { "log", "text/plain" },      { "py", "text/x-python" },       { "js", "text/javascript" },
        { "sh", "text/x-shellscript" }, { "html", "text/html" },       { "htm", "text/html" },
        { "xml", "application/xml" }, { "yaml", "application/yaml" },  { "yml", "application/yaml" },
        { "zip", "application/zip" }, { "gz", "application/gzip" },    { "tar", "application/x-tar" },
        { "xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" },
        { "parquet", "application/vnd.apache.parquet" }, { "npy", "application/octet-stream" },
};

const char *files_mime(const char *path)
{
        const char *base = strrchr(path, '/');
        const char *dot = strrchr(base ? base + 1 : path, '.');
        if (dot && dot[1])
                for (size_t i = 0; i < ARRAY_SIZE(mime_table); i++)
                        if (strcasecmp(dot + 1, mime_table[i].ext) == 0)
                                return mime_table[i].mime;
        return "application/octet-stream";
}

/* Reads what the file holds now, up to max bytes. */
static int read_file(int fd, size_t max, unsigned char **ret, size_t *ret_len)
{
        unsigned char *buf = malloc(max ? max : 1);
        if (!buf)
                return -ENOMEM;
        size_t got = 0;
        while (got < max) {
                ssize_t n = read(fd, buf + got, max - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        *ret = buf;
        *ret_len = got;
        return 0;
}

/* Opens and reads one listed file into f; false when it is not (or no longer) a
 * regular file. */
static int take_file(int home, const char *rel, uint64_t *budget, hxs_file *f)
{
        int fd = open_beneath(home, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return 0;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return 0;
        }
        memset(f, 0, sizeof(*f));
        f->path = strdup(rel);
        if (!f->path) {
                close(fd);
                return -ENOMEM;
        }
        f->size = (uint64_t)st.st_size;
        f->mime = files_mime(rel);
        if (f->size > *budget) {
                f->truncated = true;
        } else {
                int r = read_file(fd, (size_t)f->size, &f->data, &f->len);
                if (r < 0) {
                        close(fd);
                        free(f->path);
                        return r;
                }
                *budget -= f->len;
        }
        close(fd);
        return 1;
}

int files_collect(int home_fd, const hxs_request *req, const hxs_config *cfg, hxs_result *res)
{
        walk w = { .req = req, .all = req->n_globs > 0 };
        int r = 0;
        if (w.all) {
                int d = fcntl(home_fd, F_DUPFD_CLOEXEC, 3);
                if (d >= 0)
                        r = walk_dir(&w, d, "", 0);
        } else {
                int d = open_beneath(home_fd, "output", O_RDONLY | O_DIRECTORY);
                if (d >= 0)
                        r = walk_dir(&w, d, "output", 1);
        }
        if (r == 0 && w.n > 0) {
                qsort(w.paths, w.n, sizeof(*w.paths), cmp_str);
                size_t max = w.n < cfg->max_return_files ? w.n : cfg->max_return_files;
                res->files = calloc(max ? max : 1, sizeof(*res->files));
                if (!res->files)
                        r = -ENOMEM;
                uint64_t budget = cfg->max_return_bytes;
                for (size_t i = 0; r == 0 && i < w.n && res->n_files < max; i++) {
                        int t = take_file(home_fd, w.paths[i], &budget, &res->files[res->n_files]);
                        if (t < 0)
                                r = t;
                        else if (t > 0)
                                res->n_files++;
                }
        }
        for (size_t i = 0; i < w.n; i++)
                free(w.paths[i]);
        free(w.paths);
        return r;
}
