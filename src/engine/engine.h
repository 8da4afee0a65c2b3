/* SPDX-License-Identifier: Apache-2.0 */
/* Engine internals shared by the engine and its backends. */
#pragma once

#include "hexr-sandbox/sandbox.h"
#include "engine/packages.h"
#include "engine/pkgcache.h"
#include "engine/request.h"
#include "ns/cgroup.h"
#include "ns/seccomp.h"

/* A backend runs executions; the engine, the service and the tests do not know which. */
typedef struct hxs_backend_ops {
        const char *name;
        int (*init)(hxs_engine *e, hxs_error *err);
        void (*fini)(hxs_engine *e);
        int (*check)(hxs_engine *e, hxs_error *err);
        int (*start)(hxs_engine *e, hxs_exec *x, hxs_error *err);
        int (*process)(hxs_exec *x);
        void (*kill)(hxs_exec *x);
        void (*release)(hxs_exec *x); /* kill, reap, remove; never fails */
} hxs_backend_ops;

extern const hxs_backend_ops hxs_ns_backend;
extern const hxs_backend_ops hxs_qemu_backend;
extern const hxs_backend_ops hxs_firecracker_backend;

/* The microVM backend's part of the engine's stats (pool, accelerator). */
void hxs_vm_stats(hxs_engine *e, hxs_engine_stats *st);

#define HXS_GRAVEYARD_MAX 256

struct hxs_engine {
        hxs_config cfg;
        const hxs_backend_ops *ops;
        hxs_backend_kind kind;
        /* namespace backend */
        cg_layout cg;
        hxs_seccomp seccomp;
        char mountpoint[300];
        /* Python distributions the image provides (packages=) */
        hxs_pkg_index pkgs;
        pkgcache pkgcache;              /* installed sets, when a wheelhouse is configured */
        /* the runtime manifest and the root's versions of it, read at start */
        hxs_runtime_info runtimes;
        /* warm Python templates (NULL: everything runs cold) */
        struct hxs_templates *templates;
        int init_fd;                    /* the sandbox's init, a sealed memfd (ns-init.h) */
        struct ns_owners *owners;       /* owner uids of user namespaces (ns/owners.h) */
        char template_error[200];       /* why there are none, when asked for */
        /* microVM backends (NULL for namespaces) */
        struct vm_backend *vm;
        char backend_note[240];         /* why auto picked what it picked */
        /* cgroups whose processes were still exiting when their execution ended */
        cg_exec graveyard[HXS_GRAVEYARD_MAX];
        size_t n_graveyard;
};

/* Tries to remove cgroups left in the graveyard. With wait, retries for a while. */
void hxs_engine_bury(hxs_engine *e, bool wait);
/* Hands a cgroup that could not be removed yet to the graveyard. */
void hxs_engine_defer_cgroup(hxs_engine *e, const cg_exec *c);
