/* SPDX-License-Identifier: Apache-2.0 */
/* packages=: the cache of installed package sets; layout and locking in pkgcache.h.
 * Committing an install (on the workers) is pkg-commit.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/dircheck.h"
#include "core/error.h"
#include "core/sha256.h"
#include "core/tree.h"
#include "pkg/pkgcache.h"
#include "engine/request.h"
#include "core/uids.h"

#define WHEELHOUSE_MAX_ENTRIES 100000

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

/* A DIR stream of its own on name below dirfd ("." for dirfd itself: a dup would share
 * the read offset with every other reader of dirfd). NULL with errno on failure. */
DIR *pkgcache_opendir_at(int dirfd, const char *name, int flags)
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
#define opendir_at pkgcache_opendir_at

/* dirfd(3), for functions whose parameter is named dirfd */
static int dir_fd(DIR *d)
{
        return dirfd(d);
}

bool pkgcache_is_key(const char *s)
{
        if (strlen(s) != 64)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
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

/* ---- request keys ----------------------------------------------------------------- */

typedef struct whl_entry {
        char name[256];
        long long size, mtime_ns;
} whl_entry;

static int cmp_whl(const void *a, const void *b)
{
        return strcmp(((const whl_entry *)a)->name, ((const whl_entry *)b)->name);
}


int pkgcache_request_key(pkgcache *c, const hxs_request *req, char ret[65], hxs_error *err)
{
        /* without a wheelhouse, the listing is that of an empty directory */
        DIR *d = opendir_at(AT_FDCWD, c->wheelhouse[0] ? c->wheelhouse : c->dir, 0);
        if (!d)
                return err_fail(err, HXS_ERR_SETUP, -errno, "PACKAGES_WHEELHOUSE: %s: %s", c->wheelhouse,
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
                return err_fail(err, HXS_ERR_SETUP, r, "PACKAGES_WHEELHOUSE: more than %d wheels",
                                WHEELHOUSE_MAX_ENTRIES);
        }
        sort(ents, n, sizeof(*ents), cmp_whl);

        /* the requirements are canonical (pkg-step.c): one spelling, sorted, each once */
        sha256_ctx h;
        sha256_init(&h);
        sha256_update(&h, "hxs-pkg-v2", 11);
        sha256_update(&h, c->image_key, 65);
        sha256_update(&h, c->index_url, strlen(c->index_url) + 1);
        for (size_t i = 0; i < req->n_packages; i++)
                sha256_update(&h, req->packages[i], strlen(req->packages[i]) + 1);
        sha256_update(&h, "\n", 1);
        for (size_t i = 0; i < n; i++) {
                sha256_update(&h, ents[i].name, strlen(ents[i].name) + 1);
                sha256_update(&h, &ents[i].size, sizeof(ents[i].size));
                sha256_update(&h, &ents[i].mtime_ns, sizeof(ents[i].mtime_ns));
        }
        uint8_t dg[32];
        sha256_final(&h, dg);
        sha256_hex(dg, ret);
        free(ents);
        return 0;
}

/* ---- using a set ------------------------------------------------------------------- */

void pkg_use_release(pkg_use *u)
{
        close_fd(&u->lock_fd); /* drops the flock */
        u->path[0] = '\0';
}

int pkgcache_hold(pkgcache *c, const char *key, pkg_use *ret)
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
        if (!pkgcache_is_key(key))
                return 0;
        return pkgcache_hold(c, key, ret) == 0 ? 1 : 0;
}

/* ---- install directories and the trash --------------------------------------------- */

int pkgcache_stage(pkgcache *c, uint32_t owner, char ret_path[512], hxs_error *err)
{
        char name[32];
        snprintf(name, sizeof(name), "%lu", atomic_fetch_add(&c->seq, 1) + 1);
        if (mkdirat(c->work_fd, name, 0755) < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "packages: creating %s/tmp/%s/%s: %s", c->dir, c->work,
                                name, strerror(errno));
        /* only the unprivileged user that fills it may write there */
        if (fchownat(c->work_fd, name, owner, owner, AT_SYMLINK_NOFOLLOW) < 0) {
                int r = -errno;
                (void)unlinkat(c->work_fd, name, AT_REMOVEDIR);
                return err_fail(err, HXS_ERR_SETUP, r, "packages: chown of the install directory: %s",
                                strerror(-r));
        }
        snprintf(ret_path, 512, "%s/tmp/%s/%s", c->dir, c->work, name);
        return 0;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

typedef struct trash_job {
        pkg_job job;
        pkgcache *cache;
} trash_job;

/* Empties the trash. A new arrival while it runs queues another pass. */
static void trash_run(pkg_job *j)
{
        pkgcache *c = ((trash_job *)j)->cache;
        atomic_store(&c->trash_queued, false);
        DIR *d = opendir_at(c->trash_fd, ".", 0);
        if (!d)
                return;
        struct dirent *de;
        while (!atomic_load(&j->cancel) && (de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        (void)tree_remove_at(c->trash_fd, de->d_name);
        closedir(d);
}

static void trash_free(pkg_job *j)
{
        free(j);
}

static void trash_wake(pkgcache *c)
{
        if (!c->jobs || atomic_exchange(&c->trash_queued, true))
                return;
        trash_job *t = calloc(1, sizeof(*t));
        if (t) {
                t->job.run = trash_run;
                t->job.free = trash_free;
                t->cache = c;
                if (pkg_jobs_submit_detached(c->jobs, &t->job) == 0)
                        return;
                free(t);
        }
        atomic_store(&c->trash_queued, false); /* the next discard tries again */
}

int pkgcache_trash(pkgcache *c, int dirfd, const char *name)
{
        char t[64];
        snprintf(t, sizeof(t), "%lu", atomic_fetch_add(&c->seq, 1) + 1);
        if (renameat(dirfd, name, c->trash_fd, t) < 0)
                return -errno;
        trash_wake(c);
        return 0;
}

void pkgcache_discard(pkgcache *c, const char *stage)
{
        if (stage[0])
                (void)pkgcache_trash(c, c->work_fd, base_name(stage));
}

/* Leftovers of engines that died: their tmp/<engine>/ is not locked any more (and
 * whatever else is there: stages of older versions of this service, stray files). A
 * directory being created is named .new.<pid>.* until it is locked. */
static void sweep_tmp(pkgcache *c)
{
        DIR *d = opendir_at(c->tmp_fd, ".", 0);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, c->work) == 0)
                        continue;
                if (strncmp(n, ".new.", 5) == 0) {
                        long pid = strtol(n + 5, NULL, 10);
                        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
                                continue;
                } else {
                        int fd = openat(c->tmp_fd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) { /* a live engine's */
                                close(fd);
                                continue;
                        }
                        if (fd >= 0)
                                close(fd);
                }
                (void)pkgcache_trash(c, c->tmp_fd, n);
        }
        closedir(d);
}

/* tmp/<engine>/, locked for as long as this engine lives: created under a name the
 * sweep leaves alone while we live, locked, then given its name. */
static int make_work_dir(pkgcache *c)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        char tmp[80];
        snprintf(c->work, sizeof(c->work), "%d.%llx", (int)getpid(),
                 (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
        snprintf(tmp, sizeof(tmp), ".new.%s", c->work);
        if (mkdirat(c->tmp_fd, tmp, 0711) < 0)
                return -errno;
        int fd = openat(c->tmp_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r = fd < 0 ? -errno : 0;
        if (r == 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
                r = -errno;
        if (r == 0 && (c->trash_fd = open_subdir(fd, "trash", 0700)) < 0)
                r = c->trash_fd;
        if (r == 0 && renameat(c->tmp_fd, tmp, c->tmp_fd, c->work) < 0)
                r = -errno;
        if (r < 0) {
                close_fd(&c->trash_fd);
                if (fd >= 0)
                        close(fd);
                (void)tree_remove_at(c->tmp_fd, tmp);
                return r;
        }
        c->work_fd = fd;
        return 0;
}

/* ---- start and stop ------------------------------------------------------------------ */

int pkgcache_check_wheelhouse(const hxs_config *cfg, hxs_error *err)
{
        const char *wh = cfg->packages_wheelhouse;
        if (!wh[0])
                return 0;
        /* the sandbox's root binds it (it must reach it); the installer, the sandbox
         * user, lists it and reads the wheels; with an index, pip (the downloader) too */
        const struct {
                uint32_t uid;
                bool list;
                const char *who;
        } users[] = {
                { cfg->uid_base, false, "the sandbox's root" },
                { cfg->uid_base + NS_SANDBOX_UID, true, "the installer" },
                { cfg->uid_base + PKG_FETCH_UID, true, "the downloader" },
        };
        size_t n = cfg->packages_index_url[0] ? 3 : 2;
        for (size_t i = 0; i < n; i++) {
                char bad[300];
                int r = dir_try_as(users[i].uid, wh, users[i].list, ".whl", WHEELHOUSE_MAX_ENTRIES, bad, sizeof(bad));
                if (r == 0)
                        continue;
                bool wheel = strcmp(bad, wh) != 0;
                return err_fail_field(err, HXS_ERR_INVALID, r, "PACKAGES_WHEELHOUSE",
                                      "PACKAGES_WHEELHOUSE: %s cannot %s %s (uid %u): %s; make %s (%s)",
                                      users[i].who, wheel ? "read" : users[i].list ? "list" : "reach", bad,
                                      (unsigned)users[i].uid, strerror(-r),
                                      wheel ? "the wheels readable by others" : "the directory readable and searchable by others, and its parents searchable",
                                      wheel ? "chmod o+r on each wheel" : "chmod o+rx on it, o+x on each directory above it");
        }
        return 0;
}

int pkgcache_init(pkgcache *c, const hxs_config *cfg, const pkg_index *image, bool installs, hxs_error *err)
{
        memset(c, 0, sizeof(*c));
        c->dirfd = c->sets_fd = c->meta_fd = c->req_fd = c->tmp_fd = c->work_fd = c->trash_fd = -1;
        if (!cfg->packages_wheelhouse[0] && !cfg->packages_index_url[0])
                return 0;
        snprintf(c->dir, sizeof(c->dir), "%s", cfg->packages_cache_dir);
        snprintf(c->wheelhouse, sizeof(c->wheelhouse), "%s", cfg->packages_wheelhouse);
        snprintf(c->index_url, sizeof(c->index_url), "%s", cfg->packages_index_url);
        c->fetch_uid = cfg->uid_base + PKG_FETCH_UID;
        c->limit_bytes = (uint64_t)cfg->packages_cache_mb << 20;
        c->limit_inodes = cfg->packages_cache_inodes;
        c->owner_uid = cfg->uid_base + NS_SANDBOX_UID;
        int r = installs ? pkgcache_check_wheelhouse(cfg, err) : 0;
        if (r < 0)
                return r;

        /* 0711: the sandbox's unprivileged root must reach a set to bind it */
        char parent[256];
        snprintf(parent, sizeof(parent), "%s", c->dir);
        for (char *s = strchr(parent + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                (void)mkdir(parent, 0755);
                *s = '/';
        }
        if (mkdir(c->dir, 0711) < 0 && errno != EEXIST)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: %s: %s", c->dir, strerror(errno));
        char real[PATH_MAX];
        r = dir_check_private(c->dir, "PACKAGES_CACHE_DIR", real, sizeof(real), err);
        if (r < 0)
                return r;
        if (strlen(real) >= sizeof(c->dir) - 60)
                return err_fail_field(err, HXS_ERR_INVALID, -ENAMETOOLONG, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: %s is longer than %zu characters", real,
                                      sizeof(c->dir) - 60);
        snprintf(c->dir, sizeof(c->dir), "%s", real); /* no link on the way can move it later */
        c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (c->dirfd < 0)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: %s: %s", c->dir, strerror(errno));
        (void)fchmod(c->dirfd, 0711);
        if ((c->sets_fd = open_subdir(c->dirfd, "sets", 0711)) < 0 ||
            (c->meta_fd = open_subdir(c->dirfd, "meta", 0700)) < 0 ||
            (c->req_fd = open_subdir(c->dirfd, "req", 0700)) < 0 ||
            (c->tmp_fd = open_subdir(c->dirfd, "tmp", 0711)) < 0 || (r = make_work_dir(c)) < 0) {
                r = c->sets_fd < 0 ? c->sets_fd : c->meta_fd < 0 ? c->meta_fd : c->req_fd < 0 ? c->req_fd
                  : c->tmp_fd < 0 ? c->tmp_fd : r;
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, r, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: creating its directories in %s: %s", c->dir, strerror(-r));
        }
        pthread_mutex_init(&c->evict_mu, NULL);
        pthread_mutex_init(&c->digest_mu, NULL);
        c->locks = true;
        r = pkg_jobs_new(cfg->packages_jobs, &c->jobs, err);
        if (r < 0)
                return r;
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
        pkg_jobs_free(c->jobs); /* what they were doing is cancelled, the trash is ours again */
        c->jobs = NULL;
        if (c->work_fd >= 0)
                (void)tree_remove_at(c->tmp_fd, c->work);
        close_fd(&c->trash_fd);
        close_fd(&c->work_fd); /* drops the lock */
        close_fd(&c->sets_fd);
        close_fd(&c->meta_fd);
        close_fd(&c->req_fd);
        close_fd(&c->tmp_fd);
        close_fd(&c->dirfd);
        if (c->locks) {
                pthread_mutex_destroy(&c->evict_mu);
                pthread_mutex_destroy(&c->digest_mu);
                c->locks = false;
        }
        free_names(c->stdlib_names, c->n_stdlib);
        free_names(c->dist_names, c->n_dist);
        c->stdlib_names = c->dist_names = NULL;
        c->n_stdlib = c->n_dist = 0;
        c->enabled = false;
}
