/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's own state: what it keeps whatever the backend (backend.h is the
 * backend's view of it). */
#pragma once

#include <pthread.h>

#include "hexr-sandbox/sandbox.h"
#include "engine/backend.h"
#include "pkg/packages.h"
#include "pkg/pkgcache.h"
#include "engine/request.h"
#include "core/cgroup.h"

struct hxs_engine {
        hxs_config cfg;
        const backend_ops *ops;
        hxs_backend_kind kind;
        void *state;                    /* the backend's (ops->init) */
        backend_env env;                /* what the backend was handed */
        /* host-wide cgroups: the layout every execution's cgroup lives in, and those
         * whose processes were still exiting when their execution ended */
        cg_layout cg;
        cg_graveyard graveyard;
        /* Python distributions the image provides (packages=) */
        pkg_index pkgs;
        pkgcache pkgcache;              /* installed sets, when a wheelhouse is configured */
        /* the runtime manifest, parsed at start, and the root's versions of it, read
         * once something asks (runtime_info_versions_once) */
        hxs_runtime_info runtimes;
        pthread_once_t runtimes_once;
        char backend_note[240];         /* why auto picked what it picked */
};
