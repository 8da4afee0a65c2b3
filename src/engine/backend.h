/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend interface: all a backend sees of the engine, and what it must answer.
 * A backend runs executions; the engine, the service and the tests do not know which.
 *
 * A backend keeps its own state: per engine, what init returns (handed back to
 * fini, check, stats and start); per execution, exec_size bytes the engine allocates
 * zeroed at x->priv just before start (every per-execution op finds it there; release
 * is called exactly when start was, whether start succeeded or not, and frees nothing
 * the engine allocated). It says what it can do (features), whether it can run on
 * this host (usable: for `auto` and for `doctor`) and its statistics (stats).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hexr-sandbox/sandbox.h"
#include "core/cgroup.h"
#include "core/macro.h"
#include "engine/exec.h"

/* What a backend can do, beyond running a program. */
enum {
        BACKEND_INSTALLS_PACKAGES = 1u << 0,    /* runs the packages= install step, mounts the set */
        BACKEND_WARM              = 1u << 1,    /* may start executions from warm templates */
        BACKEND_BUILT_IMAGE       = 1u << 2,    /* runs a root built beforehand (a guest image):
                                                 * what it lacks is reported, not required */
        BACKEND_FILES             = 1u << 3,    /* files in, files out (output/, return_files) */
        BACKEND_INTERACTIVE       = 1u << 4,    /* interactive stdin (sessions): has stdin_more */
};

/* What the engine hands a backend when it starts; every pointer outlives the backend. */
typedef struct backend_env {
        const hxs_config *cfg;                  /* the engine's, resolved */
        hxs_backend_kind kind;                  /* which entry of the table (backends.c) */
        cg_layout *cg;                          /* the engine's cgroup layout (safe from any thread) */
        cg_graveyard *graveyard;                /* the engine's (the engine's thread only) */
        hxs_runtime_info *runtimes;             /* the root's runtimes, loaded right after init (check updates their versions) */
} backend_env;

typedef struct backend_ops {
        const char *name;
        unsigned features;                      /* BACKEND_* */
        size_t exec_size;                       /* per-execution state at x->priv */
        /* Could it run here with cfg? 0, or a negative errno and err naming the first
         * thing missing. Nothing is kept. */
        int (*usable)(const hxs_config *cfg, hxs_error *err);
        /* Appends doctor's lines about what this host offers it, from n; returns the
         * new count. NULL: another entry's lines cover it. */
        size_t (*probe)(const hxs_config *cfg, hxs_probe_item *items, size_t max, size_t n);
        /* *ret_state is set even on failure when there is something for fini to undo. */
        int (*init)(const backend_env *env, void **ret_state, hxs_error *err);
        void (*fini)(void *state);              /* NULL and half-built state are fine */
        int (*check)(void *state, hxs_error *err);
        /* Adds the backend's own figures to st (zeroed by the engine). */
        void (*stats)(void *state, hxs_engine_stats *st);
        int (*start)(void *state, hxs_exec *x, hxs_error *err);
        int (*process)(hxs_exec *x);
        void (*kill)(hxs_exec *x);
        void (*release)(hxs_exec *x);           /* kill, reap, remove; never fails */
        /* BACKEND_INTERACTIVE: bytes were queued on x's stdin or it is to close
         * (exec.h, exec_stdin_*): write what the fd takes now, the rest when it is
         * writable again. Called only between a successful start and the end. */
        void (*stdin_more)(hxs_exec *x);
        /* hxs_engine_background: work off the executions' paths (NULL: none); true:
         * more to do soon */
        bool (*background)(void *state);
        /* hxs_engine_memory_room: what it may hold outside executions (NULL: nothing) */
        void (*memory_room)(void *state, uint64_t mb);
} backend_ops;

extern const backend_ops ns_backend;
extern const backend_ops qemu_backend;
extern const backend_ops firecracker_backend;

/* The table and the auto rule (backends.c). */
typedef enum backend_auto {
        BACKEND_AUTO_NEVER = 0,
        BACKEND_AUTO_CANDIDATE,                 /* auto takes it, with KVM, when it is usable */
        BACKEND_AUTO_FALLBACK,                  /* auto takes it when no candidate is usable */
} backend_auto;

typedef struct backend_entry {
        hxs_backend_kind kind;
        const backend_ops *ops;
        backend_auto for_auto;
} backend_entry;

/* The table, in doctor's order. */
const backend_entry *backends_table(size_t *ret_n);
/* Resolves cfg->backend on this host. auto takes the first candidate usable with KVM
 * (setting cfg->vm_accel to it), else the fallback (namespaces); note says why. */
const backend_entry *backend_pick(hxs_config *cfg, char *note, size_t note_size);
/* The same rule over another table (one fallback in it), for tests. */
const backend_entry *backend_pick_in(const backend_entry *table, size_t n, hxs_config *cfg, char *note,
                                     size_t note_size);

/* Fills items[n] (when n < max) and returns the new count: for the probe ops. */
size_t probe_add(hxs_probe_item *items, size_t max, size_t n, const char *name, hxs_probe_status st,
                 const char *fmt, ...) _printf_(6, 7);
