/* SPDX-License-Identifier: Apache-2.0 */
/* packages=: the cache of installed package sets; layout and locking in pkgcache.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/sha256.h"
#include "engine/pkgcache.h"
#include "engine/request.h"
#include "ns/ns.h"

#define WHEELHOUSE_MAX_ENTRIES 100000
#define TREE_MAX_DEPTH 64

static int open_subdir(int dirfd, const char *name, mode_t mode)
{
        if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* qsort, except for an empty array, whose pointer may be NULL (undefined for qsort). */
static void sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
        if (n > 1)
                qsort(base, n, size, cmp);
}

static int cmp_digest(const void *a, const void *b)
{
        return strcmp((const char *)a, (const char *)b);
}

/* A DIR stream of its own on name below dirfd ("." for dirfd itself: a dup would share
 * the read offset with every other reader of dirfd). NULL with errno on failure. */
static DIR *opendir_at(int dirfd, const char *name, int flags)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | flags);
        if (fd < 0)
                return NULL;
        DIR *d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                errno = e;
        }
        return d;
}

/* dirfd(3), for functions whose parameter is named dirfd */
static int dir_fd(DIR *d)
{
        return dirfd(d);
}

static bool is_key(const char *s)
{
        if (strlen(s) != 64)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

static int rm_tree_depth(int dirfd, const char *name, int depth)
{
        if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        if (depth > TREE_MAX_DEPTH)
                return -ELOOP;
        DIR *d = opendir_at(dirfd, name, O_NOFOLLOW);
        if (!d)
                return -errno;
        int fd = dir_fd(d);
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int q = rm_tree_depth(fd, de->d_name, depth + 1);
                if (q < 0 && r == 0)
                        r = q;
        }
        closedir(d);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int rm_tree_at(int dirfd, const char *name)
{
        return rm_tree_depth(dirfd, name, 0);
}

/* Bytes a tree occupies (allocated blocks), without following links. */
static uint64_t tree_bytes(int dirfd, const char *name, int depth)
{
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        uint64_t total = (uint64_t)st.st_blocks * 512;
        if (!S_ISDIR(st.st_mode) || depth > TREE_MAX_DEPTH)
                return total;
        DIR *d = opendir_at(dirfd, name, O_NOFOLLOW);
        if (!d)
                return total;
        int fd = dir_fd(d);
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        total += tree_bytes(fd, de->d_name, depth + 1);
        closedir(d);
        return total;
}

/* ---- module names, for warm starts ---------------------------------------------- */

/* The module a top-level entry of a sys.path directory provides: "foo" for foo/,
 * foo.py and foo.cpython-311-x86_64-linux-gnu.so; 0 for anything else. */
static size_t module_name(int dirfd, const char *entry, char *out, size_t size)
{
        size_t len = strlen(entry), dot = strcspn(entry, ".");
        bool ok = false;
        if (dot == len) {
                struct stat st;
                ok = fstatat(dirfd, entry, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        } else if (len > 3 && (strcmp(entry + len - 3, ".py") == 0 || strcmp(entry + len - 3, ".so") == 0)) {
                ok = true;
        }
        if (!ok || dot == 0 || dot >= size || strcmp(entry, "__pycache__") == 0)
                return 0;
        memcpy(out, entry, dot);
        out[dot] = '\0';
        return dot;
}

static int cmp_name(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends the module names of the directory rootfs+path to *names. */
static void add_names(const char *rootfs, const char *path, char ***names, size_t *n, size_t *cap)
{
        char p[512];
        snprintf(p, sizeof(p), "%s%s", rootfs, path);
        DIR *d = opendir_at(AT_FDCWD, p, 0);
        if (!d)
                return;
        int fd = dir_fd(d);
        struct dirent *de;
        char name[128];
        while ((de = readdir(d))) {
                if (!module_name(fd, de->d_name, name, sizeof(name)))
                        continue;
                if (*n == *cap) {
                        size_t nc = *cap ? *cap * 2 : 256;
                        char **q = nc <= 100000 ? realloc(*names, nc * sizeof(char *)) : NULL;
                        if (!q)
                                break;
                        *names = q;
                        *cap = nc;
                }
                if (((*names)[*n] = strdup(name)))
                        (*n)++;
        }
        closedir(d);
}

static void free_names(char **names, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

static bool has_name(char *const *names, size_t n, const char *name)
{
        const char *key = name;
        return n && bsearch(&key, names, n, sizeof(char *), cmp_name) != NULL;
}

/* Which template may run with a set: one whose already-imported modules the set does
 * not shadow. The plain template has imported only standard-library modules; the
 * scientific one also modules of the image's dist-packages (numpy, pandas and their
 * dependencies). A set providing a module of the same name would be the one a cold
 * start imports, but a template would keep its own copy. */
static pkg_warm set_warmth(pkgcache *c, int setfd)
{
        DIR *d = opendir_at(setfd, ".", 0);
        if (!d)
                return PKG_WARM_NONE;
        int fd = dir_fd(d);
        pkg_warm w = PKG_WARM_ANY;
        struct dirent *de;
        char name[128];
        unsigned seen = 0;
        while ((de = readdir(d)) && w != PKG_WARM_NONE) {
                if (++seen > 10000) { /* not worth listing: cold */
                        w = PKG_WARM_NONE;
                        break;
                }
                if (!module_name(fd, de->d_name, name, sizeof(name)))
                        continue;
                if (has_name(c->stdlib_names, c->n_stdlib, name))
                        w = PKG_WARM_NONE;
                else if (has_name(c->dist_names, c->n_dist, name))
                        w = PKG_WARM_PLAIN;
        }
        closedir(d);
        return w;
}

/* Leftovers of an engine that died: stages named <pid>.<n> whose pid is gone. */
static void sweep_tmp(pkgcache *c)
{
        DIR *d = opendir_at(c->tmp_fd, ".", 0);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (n[0] == '.')
                        continue;
                if (strncmp(n, "evict.", 6) == 0)
                        n += 6;
                long pid = strtol(n, NULL, 10);
                if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
                        continue;
                (void)rm_tree_at(c->tmp_fd, de->d_name);
        }
        closedir(d);
}

int pkgcache_init(pkgcache *c, const hxs_config *cfg, const hxs_pkg_index *image, hxs_error *err)
{
        memset(c, 0, sizeof(*c));
        c->dirfd = c->sets_fd = c->meta_fd = c->req_fd = c->tmp_fd = -1;
        if (!cfg->packages_wheelhouse[0] && !cfg->packages_index_url[0])
                return 0;
        snprintf(c->dir, sizeof(c->dir), "%s", cfg->packages_cache_dir);
        snprintf(c->wheelhouse, sizeof(c->wheelhouse), "%s", cfg->packages_wheelhouse);
        snprintf(c->index_url, sizeof(c->index_url), "%s", cfg->packages_index_url);
        c->fetch_uid = cfg->uid_base + NS_FETCH_UID;
        c->limit_bytes = (uint64_t)cfg->packages_cache_mb << 20;
        c->owner_uid = cfg->uid_base + NS_SANDBOX_UID;

        /* 0711: the sandbox's unprivileged root must reach a set to bind it */
        char parent[256];
        snprintf(parent, sizeof(parent), "%s", c->dir);
        for (char *s = strchr(parent + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                (void)mkdir(parent, 0755);
                *s = '/';
        }
        if (mkdir(c->dir, 0711) < 0 && errno != EEXIST)
                return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: %s: %s", c->dir, strerror(errno));
        c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (c->dirfd < 0)
                return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: %s: %s", c->dir, strerror(errno));
        struct stat st;
        if (fstat(c->dirfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022))
                return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, -EPERM, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: %s must belong to the service's user and not be writable by others",
                                      c->dir);
        (void)fchmod(c->dirfd, 0711);
        if ((c->sets_fd = open_subdir(c->dirfd, "sets", 0711)) < 0 ||
            (c->meta_fd = open_subdir(c->dirfd, "meta", 0700)) < 0 ||
            (c->req_fd = open_subdir(c->dirfd, "req", 0700)) < 0 ||
            (c->tmp_fd = open_subdir(c->dirfd, "tmp", 0711)) < 0) {
                int r = c->sets_fd < 0 ? c->sets_fd : c->meta_fd < 0 ? c->meta_fd : c->req_fd < 0 ? c->req_fd : c->tmp_fd;
                return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, r, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: creating its directories in %s: %s", c->dir, strerror(-r));
        }
        sweep_tmp(c);

        size_t cap = 0;
        add_names(cfg->rootfs, "/usr/lib/python3.11", &c->stdlib_names, &c->n_stdlib, &cap);
        add_names(cfg->rootfs, "/usr/lib/python3.11/lib-dynload", &c->stdlib_names, &c->n_stdlib, &cap);
        sort(c->stdlib_names, c->n_stdlib, sizeof(char *), cmp_name);
        cap = 0;
        add_names(cfg->rootfs, "/usr/lib/python3/dist-packages", &c->dist_names, &c->n_dist, &cap);
        add_names(cfg->rootfs, "/usr/local/lib/python3.11/dist-packages", &c->dist_names, &c->n_dist, &cap);
        sort(c->dist_names, c->n_dist, sizeof(char *), cmp_name);

        sha256_ctx h;
        sha256_init(&h);
        sha256_update(&h, cfg->rootfs, strlen(cfg->rootfs) + 1);
        for (size_t i = 0; i < image->n; i++) {
                sha256_update(&h, image->pkgs[i].name, strlen(image->pkgs[i].name) + 1);
                sha256_update(&h, image->pkgs[i].version, strlen(image->pkgs[i].version) + 1);
        }
        uint8_t d[32];
        sha256_final(&h, d);
        sha256_hex(d, c->image_key);
        c->enabled = true;
        return 0;
}

void pkgcache_fini(pkgcache *c)
{
        close_fd(&c->sets_fd);
        close_fd(&c->meta_fd);
        close_fd(&c->req_fd);
        close_fd(&c->tmp_fd);
        close_fd(&c->dirfd);
        free_names(c->stdlib_names, c->n_stdlib);
        free_names(c->dist_names, c->n_dist);
        c->stdlib_names = c->dist_names = NULL;
        c->n_stdlib = c->n_dist = 0;
        c->enabled = false;
}

/* ---- request keys ----------------------------------------------------------------- */

typedef struct whl_entry {
        char name[256];
        long long size, mtime_ns;
} whl_entry;

static int cmp_whl(const void *a, const void *b)
{
        return strcmp(((const whl_entry *)a)->name, ((const whl_entry *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int pkgcache_request_key(pkgcache *c, const hxs_request *req, char ret[65], hxs_error *err)
{
        /* without a wheelhouse, the listing is that of an empty directory */
        DIR *d = opendir_at(AT_FDCWD, c->wheelhouse[0] ? c->wheelhouse : c->dir, 0);
        if (!d)
                return hxs_fail(err, HXS_ERR_SETUP, -errno, "PACKAGES_WHEELHOUSE: %s: %s", c->wheelhouse,
                                strerror(errno));
        int fd = dir_fd(d);
        whl_entry *ents = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (!c->wheelhouse[0] || len < 5 || len >= sizeof(ents->name) ||
                    strcmp(de->d_name + len - 4, ".whl") != 0)
                        continue;
                struct stat st;
                if (fstatat(fd, de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (n == cap) {
                        size_t nc = cap ? cap * 2 : 64;
                        whl_entry *p = nc <= WHEELHOUSE_MAX_ENTRIES ? realloc(ents, nc * sizeof(*p)) : NULL;
                        if (!p) {
                                r = -E2BIG;
                                break;
                        }
                        ents = p;
                        cap = nc;
                }
                snprintf(ents[n].name, sizeof(ents[n].name), "%s", de->d_name);
                ents[n].size = (long long)st.st_size;
                ents[n].mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
                n++;
        }
        closedir(d);
        if (r < 0) {
                free(ents);
                return hxs_fail(err, HXS_ERR_SETUP, r, "PACKAGES_WHEELHOUSE: more than %d wheels",
                                WHEELHOUSE_MAX_ENTRIES);
        }
        sort(ents, n, sizeof(*ents), cmp_whl);

        /* requirements, normalized name first, sorted: order and spelling do not matter */
        char **reqs = calloc(req->n_packages + 1, sizeof(char *));
        if (!reqs) {
                free(ents);
                return hxs_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < req->n_packages; i++) {
                const char *s = req->packages[i];
                size_t nl = strcspn(s, "[=!<>~");
                char name[64];
                hxs_pkg_normalize(s, nl, name, sizeof(name));
                if (asprintf(&reqs[i], "%s%s", name, s + nl) < 0) {
                        reqs[i] = NULL;
                        r = -ENOMEM;
                        break;
                }
        }
        if (r == 0) {
                sort(reqs, req->n_packages, sizeof(char *), cmp_str);
                sha256_ctx h;
                sha256_init(&h);
                sha256_update(&h, "hxs-pkg-v1", 11);
                sha256_update(&h, c->image_key, 65);
                sha256_update(&h, c->index_url, strlen(c->index_url) + 1);
                for (size_t i = 0; i < req->n_packages; i++)
                        sha256_update(&h, reqs[i], strlen(reqs[i]) + 1);
                sha256_update(&h, "\n", 1);
                for (size_t i = 0; i < n; i++) {
                        sha256_update(&h, ents[i].name, strlen(ents[i].name) + 1);
                        sha256_update(&h, &ents[i].size, sizeof(ents[i].size));
                        sha256_update(&h, &ents[i].mtime_ns, sizeof(ents[i].mtime_ns));
                }
                uint8_t dg[32];
                sha256_final(&h, dg);
                sha256_hex(dg, ret);
        }
        for (size_t i = 0; i < req->n_packages; i++)
                free(reqs[i]);
        free(reqs);
        free(ents);
        return r < 0 ? hxs_fail(err, HXS_ERR_INTERNAL, r, "out of memory") : 0;
}

/* ---- using a set ------------------------------------------------------------------- */

void pkg_use_release(pkg_use *u)
{
        close_fd(&u->lock_fd); /* drops the flock */
        u->path[0] = '\0';
}

/* Holds sets/<key> shared and marks it recently used. 0, or -ENOENT when it is gone. */
static int hold(pkgcache *c, const char *key, pkg_use *ret)
{
        int fd = openat(c->sets_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_SH) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        /* an evictor may have renamed it away between the open and the lock */
        struct stat a, b;
        if (fstat(fd, &a) < 0 || fstatat(c->sets_fd, key, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
            a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
                close(fd);
                return -ENOENT;
        }
        (void)futimens(fd, NULL); /* least recently used goes first */
        ret->warm = set_warmth(c, fd);
        ret->lock_fd = fd;
        snprintf(ret->path, sizeof(ret->path), "%s/sets/%s", c->dir, key);
        return 0;
}

int pkgcache_lookup(pkgcache *c, const char *request_key, pkg_use *ret)
{
        char key[80];
        ssize_t n = readlinkat(c->req_fd, request_key, key, sizeof(key) - 1);
        if (n <= 0)
                return 0;
        key[n] = '\0';
        if (!is_key(key))
                return 0;
        return hold(c, key, ret) == 0 ? 1 : 0;
}

int pkgcache_stage(pkgcache *c, uint32_t owner, char ret_path[512], hxs_error *err)
{
        char name[64];
        snprintf(name, sizeof(name), "%d.%lu", (int)getpid(), ++c->seq);
        if (mkdirat(c->tmp_fd, name, 0755) < 0)
                return hxs_fail(err, HXS_ERR_SETUP, -errno, "packages: creating %s/tmp/%s: %s", c->dir, name,
                                strerror(errno));
        /* only the unprivileged user that fills it may write there */
        if (fchownat(c->tmp_fd, name, owner, owner, AT_SYMLINK_NOFOLLOW) < 0) {
                int r = -errno;
                (void)unlinkat(c->tmp_fd, name, AT_REMOVEDIR);
                return hxs_fail(err, HXS_ERR_SETUP, r, "packages: chown of the install directory: %s",
                                strerror(-r));
        }
        snprintf(ret_path, 512, "%s/tmp/%s", c->dir, name);
        return 0;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

void pkgcache_discard(pkgcache *c, const char *stage)
{
        if (stage[0])
                (void)rm_tree_at(c->tmp_fd, base_name(stage));
}

typedef struct set_info {
        char key[65];
        long long mtime_ns;
        uint64_t bytes;
} set_info;

static int cmp_age(const void *a, const void *b)
{
        long long x = ((const set_info *)a)->mtime_ns, y = ((const set_info *)b)->mtime_ns;
        return x < y ? -1 : x > y;
}

static uint64_t set_bytes(pkgcache *c, const char *key)
{
        char buf[32];
        int fd = openat(c->meta_fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (n > 0) {
                        buf[n] = '\0';
                        return strtoull(buf, NULL, 10);
                }
        }
        return tree_bytes(c->sets_fd, key, 0);
}

/* Request keys whose set is gone are dropped, and any beyond ALIAS_MAX (they only save
 * an install step), so req/ cannot grow without bound. */
#define ALIAS_MAX 20000
static void prune_aliases(pkgcache *c)
{
        DIR *d = opendir_at(c->req_fd, ".", 0);
        if (!d)
                return;
        size_t kept = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char key[80];
                struct stat st;
                ssize_t n = readlinkat(c->req_fd, de->d_name, key, sizeof(key) - 1);
                if (n > 0) {
                        key[n] = '\0';
                        if (is_key(key) && fstatat(c->sets_fd, key, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            ++kept <= ALIAS_MAX)
                                continue;
                }
                (void)unlinkat(c->req_fd, de->d_name, 0);
        }
        closedir(d);
}

/* Least recently used first, until the cache fits; sets in use are skipped. */
static void evict(pkgcache *c)
{
        DIR *d = opendir_at(c->sets_fd, ".", 0);
        if (!d)
                return;
        set_info *sets = NULL;
        size_t n = 0, cap = 0;
        uint64_t total = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!is_key(de->d_name))
                        continue;
                struct stat st;
                if (fstatat(c->sets_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (n == cap) {
                        size_t nc = cap ? cap * 2 : 32;
                        set_info *p = realloc(sets, nc * sizeof(*p));
                        if (!p)
                                break;
                        sets = p;
                        cap = nc;
                }
                snprintf(sets[n].key, sizeof(sets[n].key), "%s", de->d_name);
                sets[n].mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
                sets[n].bytes = set_bytes(c, de->d_name);
                total += sets[n].bytes;
                n++;
        }
        closedir(d);
        sort(sets, n, sizeof(*sets), cmp_age);
        for (size_t i = 0; i < n && total > c->limit_bytes; i++) {
                int sfd = openat(c->sets_fd, sets[i].key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sfd < 0)
                        continue;
                if (flock(sfd, LOCK_EX | LOCK_NB) < 0) { /* in use */
                        close(sfd);
                        continue;
                }
                char trash[64];
                snprintf(trash, sizeof(trash), "evict.%d.%lu", (int)getpid(), ++c->seq);
                if (renameat(c->sets_fd, sets[i].key, c->tmp_fd, trash) == 0) {
                        (void)unlinkat(c->meta_fd, sets[i].key, 0);
                        (void)rm_tree_at(c->tmp_fd, trash);
                        total -= sets[i].bytes;
                }
                close(sfd);
        }
        free(sets);
}

int pkgcache_commit(pkgcache *c, const char *stage, const char *wheel_dir, const char *request_key,
                    char *const *wheels, size_t n_wheels, pkg_use *ret, hxs_error *err)
{
        const char *stage_name = base_name(stage);
        int whfd = open(wheel_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (whfd < 0) {
                int r = hxs_fail(err, HXS_ERR_SETUP, -errno, "packages: %s: %s", wheel_dir, strerror(errno));
                pkgcache_discard(c, stage);
                return r;
        }
        /* content key: the wheels' own digests, computed here rather than taken from
         * the installer, sorted */
        char (*digests)[65] = calloc(n_wheels + 1, 65);
        int r = digests ? 0 : -ENOMEM;
        for (size_t i = 0; r == 0 && i < n_wheels; i++) {
                const char *w = wheels[i];
                size_t len = strlen(w);
                uint8_t dg[32];
                if (len < 5 || strchr(w, '/') || w[0] == '.' || strcmp(w + len - 4, ".whl") != 0) {
                        r = hxs_fail(err, HXS_ERR_SETUP, -EINVAL, "packages: the installer named \"%.80s\", not a wheel of the wheelhouse", w);
                        break;
                }
                if ((r = sha256_file(whfd, w, dg)) < 0) {
                        hxs_fail(err, HXS_ERR_SETUP, r, "packages: reading %.80s: %s", w, strerror(-r));
                        break;
                }
                sha256_hex(dg, digests[i]);
        }
        close(whfd);
        if (r < 0) {
                if (r == -ENOMEM)
                        hxs_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
                free(digests);
                pkgcache_discard(c, stage);
                return r;
        }
        sort(digests, n_wheels, 65, cmp_digest);
        sha256_ctx h;
        sha256_init(&h);
        /* the image too: what it provides is left out of a set, and the set is
         * byte-compiled by the image's interpreter */
        sha256_update(&h, c->image_key, 65);
        for (size_t i = 0; i < n_wheels; i++)
                sha256_update(&h, digests[i], 65);
        free(digests);
        uint8_t dg[32];
        char key[65];
        sha256_final(&h, dg);
        sha256_hex(dg, key);

        /* the set is read-only from now on: its top directory becomes ours */
        (void)!fchownat(c->tmp_fd, stage_name, 0, 0, AT_SYMLINK_NOFOLLOW);
        (void)!fchmodat(c->tmp_fd, stage_name, 0755, 0);
        uint64_t bytes = tree_bytes(c->tmp_fd, stage_name, 0);
        if (renameat(c->tmp_fd, stage_name, c->sets_fd, key) < 0) {
                /* EEXIST / ENOTEMPTY: the same set was installed meanwhile; keep that */
                pkgcache_discard(c, stage);
        } else {
                char buf[32];
                int mfd = openat(c->meta_fd, key, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (mfd >= 0) {
                        int len = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)bytes);
                        (void)!write(mfd, buf, (size_t)len);
                        close(mfd);
                }
        }
        /* the request's alias, replaced atomically */
        char tmpl[96];
        snprintf(tmpl, sizeof(tmpl), ".%s.%d.%lu", request_key, (int)getpid(), ++c->seq);
        if (symlinkat(key, c->req_fd, tmpl) == 0 && renameat(c->req_fd, tmpl, c->req_fd, request_key) < 0)
                (void)unlinkat(c->req_fd, tmpl, 0);
        r = hold(c, key, ret);
        if (r < 0)
                return hxs_fail(err, HXS_ERR_SETUP, r, "packages: the installed set %s is gone: %s", key, strerror(-r));
        evict(c);
        prune_aliases(c);
        return 0;
}
