/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=: the cache of installed package sets (PACKAGES_CACHE_DIR).
 *
 *   sets/<content key>/   an installed set: the unpacked wheels, bound read-only into
 *                         the sandboxes that use it. Content key: sha256 of the sorted
 *                         sha256 digests of the wheels it was installed from.
 *   meta/<content key>    its size: "<bytes> <inodes>" (for the cache's limits)
 *   req/<request key>     symlink to a content key: which set a request resolved to.
 *                         Request key: sha256 of the canonical requirements (sorted,
 *                         without duplicates, see pkg_canonical), the image's
 *                         distributions, the index URL and the wheelhouse listing
 *                         (name, size, mtime).
 *   tmp/<engine>/         one engine's work, flock(2)ed by it while it runs:
 *       <n>/              a set being installed (renamed into sets/ when complete), or
 *                         the wheels downloaded for it from the index
 *       trash/            what is being removed (failed installs, evicted sets)
 *
 * The work that grows with what a caller chose (hashing wheels, measuring a set,
 * removing trees) runs on the cache's worker threads (pkg-jobs.h), never on the
 * caller's thread; what pkgcache_* functions called on the loop do is bounded: a
 * listing of the wheelhouse (at most WHEELHOUSE_MAX_ENTRIES), a readlink, an flock
 * and a listing of a set's top level, a mkdir, a rename.
 *
 * A set in use is held with a shared flock on its directory; eviction (least recently
 * used first, once the cache is over PACKAGES_CACHE_MB or PACKAGES_CACHE_INODES) takes
 * the lock exclusively and skips sets it cannot get, so a set is never removed under a
 * sandbox. Concurrent installs of the same set both complete; the first rename wins
 * and the other copy is removed. A dead engine's tmp/<engine>/ (its lock is free) is
 * removed by the next engine that starts.
 */
#pragma once

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hexr-sandbox/sandbox.h"
#include "pkg/packages.h"
#include "pkg/pkg-jobs.h"

#define PKG_DIGESTS_CACHED 64

/* A wheel's digest, remembered by what identifies its content on the host. */
typedef struct pkg_digest {
        dev_t dev;
        ino_t ino;
        long long size, mtime_ns, ctime_ns;
        char hex[65];
} pkg_digest;

typedef struct pkgcache {
        bool enabled;           /* PACKAGES_WHEELHOUSE or PACKAGES_INDEX_URL is set */
        int dirfd, sets_fd, meta_fd, req_fd, tmp_fd;
        int work_fd, trash_fd;  /* tmp/<engine>/ (flocked) and its trash/ */
        char dir[256];
        char work[64];          /* <engine> */
        char wheelhouse[256];   /* "" = none */
        char index_url[256];    /* "" = none */
        uint32_t fetch_uid;     /* host uid of the downloader (pip, on the host, with network) */
        uint64_t limit_bytes, limit_inodes;
        uint32_t owner_uid;     /* host uid of the sandbox user: writes a set being installed */
        char image_key[65];     /* digest of the image's distribution list */
        char **stdlib_names;    /* top-level modules of the image's standard library, sorted */
        size_t n_stdlib;
        char **dist_names;      /* ... and of its dist-packages (a template may import them) */
        size_t n_dist;
        atomic_ulong seq;
        /* shared with the workers */
        pkg_jobs *jobs;
        atomic_bool trash_queued;
        bool locks;             /* the mutexes below are initialised */
        pthread_mutex_t evict_mu;
        pthread_mutex_t digest_mu;
        pkg_digest digests[PKG_DIGESTS_CACHED];
        unsigned next_digest;
} pkgcache;

/* A set held by one execution. */
typedef enum pkg_warm {
        PKG_WARM_NONE = 0,      /* shadows a standard-library module: cold only */
        PKG_WARM_PLAIN,         /* shadows a module of the image's dist-packages: plain template */
        PKG_WARM_ANY,           /* shadows nothing a template may have imported */
} pkg_warm;

typedef struct pkg_use {
        int lock_fd;            /* LOCK_SH on sets/<key>; -1 = none */
        char path[512];         /* host path of the set */
        pkg_warm warm;          /* which warm template may run with it */
} pkg_use;

#define PKG_USE_INIT { .lock_fd = -1 }

/* A cache that pkgcache_fini may be called on before (or without) pkgcache_init. */
#define PKGCACHE_INIT { .dirfd = -1, .sets_fd = -1, .meta_fd = -1, .req_fd = -1, .tmp_fd = -1, \
                        .work_fd = -1, .trash_fd = -1 }

/* installs: this engine's backend runs the install step (namespaces); only then must
 * the wheelhouse be readable by the installer's users. */
int pkgcache_init(pkgcache *c, const hxs_config *cfg, const pkg_index *image, bool installs, hxs_error *err);
/* Stops the workers and removes this engine's tmp/<engine>/. */
void pkgcache_fini(pkgcache *c);

/* Whether the installer's users can read PACKAGES_WHEELHOUSE (with an index, the
 * downloader too): 0, or an error that names the directory or wheel and what to change.
 * Forks (a child becomes each user); for start-up and doctor. */
int pkgcache_check_wheelhouse(const hxs_config *cfg, hxs_error *err);

/* The request key of req's requirements, which must be canonical already (reads the
 * wheelhouse listing). */
int pkgcache_request_key(pkgcache *c, const hxs_request *req, char ret[65], hxs_error *err);

/* 1 and *ret held when the request key names a complete set; 0 when it must be installed. */
int pkgcache_lookup(pkgcache *c, const char *request_key, pkg_use *ret);

/* A fresh empty directory in tmp/<engine>/, writable by owner (a host uid) only. */
int pkgcache_stage(pkgcache *c, uint32_t owner, char ret_path[512], hxs_error *err);

/* Moves a stage that will not be committed to the trash (the workers remove it). */
void pkgcache_discard(pkgcache *c, const char *stage);

/* ---- committing an install, on a worker ----------------------------------------------
 * The worker hashes `wheels` (file names in wheel_dir) itself, measures the stage,
 * refuses a set over the cache's limits, moves it into sets/ under its content key,
 * records the request key, holds the set and evicts older sets if the cache is over a
 * limit. The stage (and fetch_dir, the downloads, when given) belong to the commit from
 * submission on; whatever happens they are gone or committed when it ends. */
typedef struct pkg_commit pkg_commit;

int pkgcache_commit_submit(pkgcache *c, const char *stage, const char *fetch_dir, const char *wheel_dir,
                           const char *request_key, char *const *wheels, size_t n_wheels, pkg_commit **ret,
                           hxs_error *err);
/* Readable once the commit is done. */
int pkg_commit_fd(const pkg_commit *p);
bool pkg_commit_done(const pkg_commit *p);
/* Asks a running commit to stop (it then fails with -ECANCELED); makes its fd readable. */
void pkg_commit_cancel(pkg_commit *p);
/* The outcome of a done commit: 0 with *ret held, or -errno with err. Frees p. */
int pkg_commit_take(pkgcache *c, pkg_commit *p, pkg_use *ret, hxs_error *err);
/* Gives up p, done or not (what it holds is released, its stage removed). */
void pkg_commit_drop(pkgcache *c, pkg_commit *p);

void pkg_use_release(pkg_use *u);

/* ---- shared by pkgcache.c and pkg-commit.c ------------------------------------------ */
DIR *pkgcache_opendir_at(int dirfd, const char *name, int flags);
bool pkgcache_is_key(const char *s);
/* Holds sets/<key> shared and marks it recently used. 0, or -ENOENT when it is gone. */
int pkgcache_hold(pkgcache *c, const char *key, pkg_use *ret);
/* Moves name (below dirfd) into the trash and makes sure a worker empties it. */
int pkgcache_trash(pkgcache *c, int dirfd, const char *name);
