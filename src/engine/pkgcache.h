/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=: the cache of installed package sets (PACKAGES_CACHE_DIR).
 *
 *   sets/<content key>/   an installed set: the unpacked wheels, bound read-only into
 *                         the sandboxes that use it. Content key: sha256 of the sorted
 *                         sha256 digests of the wheels it was installed from.
 *   meta/<content key>    its size in bytes (for the size limit)
 *   req/<request key>     symlink to a content key: which set a request resolved to.
 *                         Request key: sha256 of the sorted requirements, the image's
 *                         distributions, the index URL and the wheelhouse listing
 *                         (name, size, mtime).
 *   tmp/<pid>.<n>/        a set being installed, renamed into sets/ when complete, or
 *                         the wheels downloaded for it from the index
 *
 * A set in use is held with a shared flock(2) on its directory; eviction (least
 * recently used first, once the cache is over PACKAGES_CACHE_MB) takes the lock
 * exclusively and skips sets it cannot get, so a set is never removed under a sandbox.
 * Concurrent installs of the same set both complete; the first rename wins and the
 * other copy is removed.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hexr-sandbox/sandbox.h"
#include "engine/packages.h"

typedef struct pkgcache {
        bool enabled;           /* PACKAGES_WHEELHOUSE is set */
        int dirfd, sets_fd, meta_fd, req_fd, tmp_fd;
        char dir[256];
        char wheelhouse[256];   /* "" = none */
        char index_url[256];    /* "" = none */
        uint32_t fetch_uid;     /* host uid of the downloader (pip, on the host, with network) */
        uint64_t limit_bytes;
        uint32_t owner_uid;     /* host uid of the sandbox user: writes a set being installed */
        char image_key[65];     /* digest of the image's distribution list */
        char **stdlib_names;    /* top-level modules of the image's standard library, sorted */
        size_t n_stdlib;
        char **dist_names;      /* ... and of its dist-packages (a template may import them) */
        size_t n_dist;
        unsigned long seq;
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

int pkgcache_init(pkgcache *c, const hxs_config *cfg, const hxs_pkg_index *image, hxs_error *err);
void pkgcache_fini(pkgcache *c);

/* The request key of req's requirements (reads the wheelhouse listing). */
int pkgcache_request_key(pkgcache *c, const hxs_request *req, char ret[65], hxs_error *err);

/* 1 and *ret held when the request key names a complete set; 0 when it must be installed. */
int pkgcache_lookup(pkgcache *c, const char *request_key, pkg_use *ret);

/* A fresh empty directory under tmp/, writable by owner (a host uid) only. */
int pkgcache_stage(pkgcache *c, uint32_t owner, char ret_path[512], hxs_error *err);

/* Moves a completed install into sets/ under the content key of `wheels` (file names
 * in wheel_dir, hashed here), records the request key, holds the set in *ret and
 * evicts older sets if the cache is over its limit. The stage is gone afterwards. */
int pkgcache_commit(pkgcache *c, const char *stage, const char *wheel_dir, const char *request_key,
                    char *const *wheels, size_t n_wheels, pkg_use *ret, hxs_error *err);

/* Removes a stage that will not be committed. */
void pkgcache_discard(pkgcache *c, const char *stage);

void pkg_use_release(pkg_use *u);

/* Removes a directory tree without following symbolic links; 0 or -errno. */
int rm_tree_at(int dirfd, const char *name);
