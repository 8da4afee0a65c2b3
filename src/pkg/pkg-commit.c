/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=: committing an install to the cache, on a worker thread (pkg-jobs.h). What
 * it costs grows with what the caller chose (the size of the wheels, the number of
 * files in the set), so none of it runs on the service's event loop: the execution
 * waits for the job's eventfd like for any other of its fds. Layout in pkgcache.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/sha256.h"
#include "core/tree.h"
#include "pkg/pkgcache.h"

#define HASH_CHUNK (1 << 20)

struct pkg_commit {
        pkg_job job;
        pkgcache *cache;
        char stage[64];         /* in tmp/<engine>/ */
        char fetch[64];         /* "": none */
        char wheel_dir[512];
        char request_key[65];
        char **wheels;
        size_t n_wheels;
        /* the outcome */
        int r;
        hxs_error err;
        pkg_use use;
};

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

static int cmp_digest(const void *a, const void *b)
{
        return strcmp((const char *)a, (const char *)b);
}

static long long ns_of(struct timespec t)
{
        return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* ---- wheel digests ------------------------------------------------------------------- */

static bool digest_cached(pkgcache *c, const struct stat *st, char hex[65])
{
        bool hit = false;
        pthread_mutex_lock(&c->digest_mu);
        for (size_t i = 0; i < PKG_DIGESTS_CACHED && !hit; i++) {
                const pkg_digest *d = &c->digests[i];
                if (d->hex[0] && d->dev == st->st_dev && d->ino == st->st_ino && d->size == (long long)st->st_size &&
                    d->mtime_ns == ns_of(st->st_mtim) && d->ctime_ns == ns_of(st->st_ctim)) {
                        memcpy(hex, d->hex, 65);
                        hit = true;
                }
        }
        pthread_mutex_unlock(&c->digest_mu);
        return hit;
}

static void digest_remember(pkgcache *c, const struct stat *st, const char hex[65])
{
        pthread_mutex_lock(&c->digest_mu);
        pkg_digest *d = &c->digests[c->next_digest++ % PKG_DIGESTS_CACHED];
        *d = (pkg_digest){ st->st_dev, st->st_ino, (long long)st->st_size, ns_of(st->st_mtim), ns_of(st->st_ctim), "" };
        memcpy(d->hex, hex, 65);
        pthread_mutex_unlock(&c->digest_mu);
}

/* The digest of a regular file (never a link, a FIFO or a device: what the installer
 * named may be the downloader's), remembered by inode, size, mtime and ctime. */
static int hash_wheel(pkg_commit *p, int dirfd, const char *name, char hex[65])
{
        pkgcache *c = p->cache;
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return err_fail(&p->err, HXS_ERR_SETUP, -errno, "packages: reading %.80s: %s", name, strerror(errno));
        struct stat st;
        int r = 0;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                r = err_fail(&p->err, HXS_ERR_SETUP, -EINVAL, "packages: %.80s is not a regular file", name);
        } else if ((uint64_t)st.st_size > c->limit_bytes) {
                r = err_fail_field(&p->err, HXS_ERR_NOT_FOUND, -EFBIG, "packages",
                                   "packages: %.80s is %llu MiB, larger than the cache (PACKAGES_CACHE_MB %llu)", name,
                                   (unsigned long long)st.st_size >> 20, (unsigned long long)c->limit_bytes >> 20);
        } else if (!digest_cached(c, &st, hex)) {
                uint8_t *buf = malloc(HASH_CHUNK);
                sha256_ctx h;
                sha256_init(&h);
                while (r == 0) {
                        if (!buf) {
                                r = err_fail(&p->err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
                                break;
                        }
                        if (atomic_load(&p->job.cancel)) {
                                r = err_fail(&p->err, HXS_ERR_SETUP, -ECANCELED, "packages: cancelled");
                                break;
                        }
                        ssize_t n = read(fd, buf, HASH_CHUNK);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                r = err_fail(&p->err, HXS_ERR_SETUP, -errno, "packages: reading %.80s: %s", name,
                                             strerror(errno));
                        else if (n == 0)
                                break;
                        else
                                sha256_update(&h, buf, (size_t)n);
                }
                free(buf);
                if (r == 0) {
                        uint8_t dg[32];
                        sha256_final(&h, dg);
                        sha256_hex(dg, hex);
                        digest_remember(c, &st, hex);
                }
        }
        close(fd);
        return r;
}

/* The content key: the wheels' own digests (computed here rather than taken from the
 * installer), sorted, and the image (what it provides is left out of a set, and the
 * set is byte-compiled by the image's interpreter). */
static int content_key(pkg_commit *p, char key[65])
{
        int whfd = open(p->wheel_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (whfd < 0)
                return err_fail(&p->err, HXS_ERR_SETUP, -errno, "packages: %s: %s", p->wheel_dir, strerror(errno));
        char (*digests)[65] = calloc(p->n_wheels + 1, 65);
        int r = digests ? 0 : err_fail(&p->err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        for (size_t i = 0; r == 0 && i < p->n_wheels; i++) {
                const char *w = p->wheels[i];
                size_t len = strlen(w);
                if (len < 5 || strchr(w, '/') || w[0] == '.' || strcmp(w + len - 4, ".whl") != 0)
                        r = err_fail(&p->err, HXS_ERR_SETUP, -EINVAL,
                                     "packages: the installer named \"%.80s\", not a wheel of the wheelhouse", w);
                else
                        r = hash_wheel(p, whfd, w, digests[i]);
        }
        close(whfd);
        if (r == 0) {
                if (p->n_wheels > 1)
                        qsort(digests, p->n_wheels, 65, cmp_digest);
                sha256_ctx h;
                sha256_init(&h);
                sha256_update(&h, p->cache->image_key, 65);
                for (size_t i = 0; i < p->n_wheels; i++)
                        sha256_update(&h, digests[i], 65);
                uint8_t dg[32];
                sha256_final(&h, dg);
                sha256_hex(dg, key);
        }
        free(digests);
        return r;
}

/* ---- sizes and eviction -------------------------------------------------------------- */

typedef struct set_info {
        char key[65];
        long long mtime_ns;
        tree_usage use;
} set_info;

static int cmp_age(const void *a, const void *b)
{
        long long x = ((const set_info *)a)->mtime_ns, y = ((const set_info *)b)->mtime_ns;
        return x < y ? -1 : x > y;
}

/* meta/<key>: "<bytes> <inodes>\n", written under a temporary name and renamed. */
static void write_usage(pkgcache *c, const char *key, const tree_usage *u)
{
        char tmp[96], buf[64];
        snprintf(tmp, sizeof(tmp), ".%s.%lu", key, atomic_fetch_add(&c->seq, 1) + 1);
        int fd = openat(c->meta_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        int len = snprintf(buf, sizeof(buf), "%llu %llu\n", (unsigned long long)u->bytes,
                           (unsigned long long)u->inodes);
        bool ok = write(fd, buf, (size_t)len) == len;
        close(fd);
        if (!ok || renameat(c->meta_fd, tmp, c->meta_fd, key) < 0)
                (void)unlinkat(c->meta_fd, tmp, 0);
}

static tree_usage set_usage(pkgcache *c, const char *key)
{
        char buf[64];
        tree_usage u = { 0, 0 };
        int fd = openat(c->meta_fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                unsigned long long b, i;
                if (n > 0) {
                        buf[n] = '\0';
                        if (sscanf(buf, "%llu %llu", &b, &i) == 2)
                                return (tree_usage){ b, i };
                }
        }
        /* a set recorded by an older version (bytes only), or not at all */
        if (tree_measure_at(c->sets_fd, key, UINT64_MAX, &u) == 0)
                write_usage(c, key, &u);
        return u;
}

/* Request keys whose set is gone are dropped, and any beyond ALIAS_MAX (they only save
 * an install step), so req/ cannot grow without bound. */
#define ALIAS_MAX 20000
static void prune_aliases(pkgcache *c)
{
        DIR *d = pkgcache_opendir_at(c->req_fd, ".", 0);
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
                        if (pkgcache_is_key(key) && fstatat(c->sets_fd, key, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            ++kept <= ALIAS_MAX)
                                continue;
                }
                (void)unlinkat(c->req_fd, de->d_name, 0);
        }
        closedir(d);
}

/* Least recently used first, until the cache is within both of its limits; sets in
 * use are skipped. Evicted sets go to the trash. */
static void evict(pkgcache *c)
{
        DIR *d = pkgcache_opendir_at(c->sets_fd, ".", 0);
        if (!d)
                return;
        set_info *sets = NULL;
        size_t n = 0, cap = 0;
        tree_usage total = { 0, 0 };
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!pkgcache_is_key(de->d_name))
                        continue;
                struct stat st;
                if (fstatat(c->sets_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (n == cap) {
                        size_t nc = cap ? cap * 2 : 32;
                        set_info *q = realloc(sets, nc * sizeof(*q));
                        if (!q)
                                break;
                        sets = q;
                        cap = nc;
                }
                snprintf(sets[n].key, sizeof(sets[n].key), "%s", de->d_name);
                sets[n].mtime_ns = ns_of(st.st_mtim);
                sets[n].use = set_usage(c, de->d_name);
                total.bytes += sets[n].use.bytes;
                total.inodes += sets[n].use.inodes;
                n++;
        }
        closedir(d);
        if (n > 1)
                qsort(sets, n, sizeof(*sets), cmp_age);
        for (size_t i = 0; i < n && (total.bytes > c->limit_bytes || total.inodes > c->limit_inodes); i++) {
                int sfd = openat(c->sets_fd, sets[i].key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sfd < 0)
                        continue;
                if (flock(sfd, LOCK_EX | LOCK_NB) < 0) { /* in use */
                        close(sfd);
                        continue;
                }
                if (pkgcache_trash(c, c->sets_fd, sets[i].key) == 0) {
                        (void)unlinkat(c->meta_fd, sets[i].key, 0);
                        total.bytes -= sets[i].use.bytes;
                        total.inodes -= sets[i].use.inodes;
                }
                close(sfd);
        }
        free(sets);
}

/* ---- the job --------------------------------------------------------------------------- */

static void remove_own(pkg_commit *p)
{
        pkgcache *c = p->cache;
        if (p->stage[0])
                (void)tree_remove_at(c->work_fd, p->stage);
        if (p->fetch[0])
                (void)tree_remove_at(c->work_fd, p->fetch);
        p->stage[0] = p->fetch[0] = '\0';
}

static int commit(pkg_commit *p)
{
        pkgcache *c = p->cache;
        char key[65];
        int r = content_key(p, key);
        if (r < 0)
                return r;
        if (p->fetch[0]) { /* the downloads served their purpose */
                (void)tree_remove_at(c->work_fd, p->fetch);
                p->fetch[0] = '\0';
        }
        if (atomic_load(&p->job.cancel))
                return err_fail(&p->err, HXS_ERR_SETUP, -ECANCELED, "packages: cancelled");
        /* the set is read-only from now on: its top directory becomes ours */
        (void)!fchownat(c->work_fd, p->stage, 0, 0, AT_SYMLINK_NOFOLLOW);
        (void)!fchmodat(c->work_fd, p->stage, 0755, 0);
        tree_usage u;
        r = tree_measure_at(c->work_fd, p->stage, c->limit_inodes, &u);
        if (r == -E2BIG)
                return err_fail_field(&p->err, HXS_ERR_NOT_FOUND, r, "packages",
                                      "packages: the installed set has more than %llu files and directories (PACKAGES_CACHE_INODES)",
                                      (unsigned long long)c->limit_inodes);
        if (r < 0)
                return err_fail(&p->err, HXS_ERR_SETUP, r, "packages: measuring the installed set: %s", strerror(-r));
        if (u.bytes > c->limit_bytes)
                return err_fail_field(&p->err, HXS_ERR_NOT_FOUND, -EFBIG, "packages",
                                      "packages: the installed set takes %llu MiB on disk, more than the cache holds (PACKAGES_CACHE_MB %llu)",
                                      (unsigned long long)u.bytes >> 20, (unsigned long long)c->limit_bytes >> 20);
        if (atomic_load(&p->job.cancel))
                return err_fail(&p->err, HXS_ERR_SETUP, -ECANCELED, "packages: cancelled");
        if (renameat(c->work_fd, p->stage, c->sets_fd, key) < 0) {
                /* EEXIST / ENOTEMPTY: the same set was installed meanwhile; keep that */
                (void)pkgcache_trash(c, c->work_fd, p->stage);
        } else {
                write_usage(c, key, &u);
        }
        p->stage[0] = '\0';
        /* the request's alias, replaced atomically */
        char tmpl[96];
        snprintf(tmpl, sizeof(tmpl), ".%s.%lu", p->request_key, atomic_fetch_add(&c->seq, 1) + 1);
        if (symlinkat(key, c->req_fd, tmpl) == 0 && renameat(c->req_fd, tmpl, c->req_fd, p->request_key) < 0)
                (void)unlinkat(c->req_fd, tmpl, 0);
        r = pkgcache_hold(c, key, &p->use);
        if (r < 0)
                return err_fail(&p->err, HXS_ERR_SETUP, r, "packages: the installed set %s is gone: %s", key,
                                strerror(-r));
        pthread_mutex_lock(&c->evict_mu);
        evict(c);
        prune_aliases(c);
        pthread_mutex_unlock(&c->evict_mu);
        return 0;
}

static void commit_run(pkg_job *j)
{
        pkg_commit *p = (pkg_commit *)j;
        p->r = commit(p);
        remove_own(p); /* what was not committed */
}

static void commit_free(pkg_job *j)
{
        pkg_commit *p = (pkg_commit *)j;
        pkg_use_release(&p->use);
        remove_own(p); /* never run (the workers stopped first) */
        for (size_t i = 0; i < p->n_wheels; i++)
                free(p->wheels[i]);
        free(p->wheels);
        if (p->job.efd >= 0)
                close(p->job.efd);
        free(p);
}

int pkgcache_commit_submit(pkgcache *c, const char *stage, const char *fetch_dir, const char *wheel_dir,
                           const char *request_key, char *const *wheels, size_t n_wheels, pkg_commit **ret,
                           hxs_error *err)
{
        pkg_commit *p = calloc(1, sizeof(*p));
        if (!p || !(p->wheels = calloc(n_wheels + 1, sizeof(char *)))) {
                free(p);
                pkgcache_discard(c, stage);
                if (fetch_dir[0])
                        pkgcache_discard(c, fetch_dir);
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        }
        p->job.run = commit_run;
        p->job.free = commit_free;
        p->job.efd = -1;
        p->cache = c;
        p->use.lock_fd = -1;
        snprintf(p->stage, sizeof(p->stage), "%s", base_name(stage));
        if (fetch_dir[0])
                snprintf(p->fetch, sizeof(p->fetch), "%s", base_name(fetch_dir));
        snprintf(p->wheel_dir, sizeof(p->wheel_dir), "%s", wheel_dir);
        snprintf(p->request_key, sizeof(p->request_key), "%s", request_key);
        int r = 0;
        for (size_t i = 0; i < n_wheels && r == 0; i++, p->n_wheels++)
                if (!(p->wheels[i] = strdup(wheels[i])))
                        r = -ENOMEM;
        if (r == 0)
                r = pkg_jobs_submit(c->jobs, &p->job, true);
        if (r < 0) {
                /* the stage and downloads go to the trash, not through a job */
                pkgcache_discard(c, stage);
                if (fetch_dir[0])
                        pkgcache_discard(c, fetch_dir);
                p->stage[0] = p->fetch[0] = '\0';
                commit_free(&p->job);
                return err_fail(err, HXS_ERR_SETUP, r, "packages: handing the install to a worker: %s",
                                strerror(-r));
        }
        *ret = p;
        return 0;
}

int pkg_commit_fd(const pkg_commit *p)
{
        return p->job.efd;
}

bool pkg_commit_done(const pkg_commit *p)
{
        return pkg_job_done(&p->job);
}

void pkg_commit_cancel(pkg_commit *p)
{
        atomic_store(&p->job.cancel, true);
        (void)eventfd_write(p->job.efd, 1);
}

int pkg_commit_take(pkgcache *c, pkg_commit *p, pkg_use *ret, hxs_error *err)
{
        int r = p->r;
        if (r < 0) {
                *err = p->err;
        } else {
                *ret = p->use;
                p->use.lock_fd = -1;
        }
        pkg_job_drop(c->jobs, &p->job);
        return r;
}

void pkg_commit_drop(pkgcache *c, pkg_commit *p)
{
        if (p)
                pkg_job_drop(c->jobs, &p->job);
}
