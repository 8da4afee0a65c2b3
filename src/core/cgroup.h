/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-execution cgroups on either layout:
 *  - v1 controllers (memory, pids, cpu each mounted on its own), optionally with a v2
 *    hierarchy beside them (used for cgroup.kill);
 *  - a pure v2 host (/sys/fs/cgroup is cgroup2 with the controllers enabled).
 * Every cgroup lives under the engine's own cgroup, in a "hexr-sandbox" directory, and
 * is named "<instance>-<seq>", the instance naming the engine process (pid and start
 * time) so that a later engine can tell a dead predecessor's leftovers from a live
 * neighbour's. Cgroups are host-wide state: the engine makes one layout and hands it
 * to whichever backend runs, with a graveyard for cgroups whose processes are still
 * exiting when their execution ends. Names never repeat within a process, whatever
 * the layouts and threads that make them.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hexr-sandbox/sandbox.h"

typedef enum cg_hier {
        CG_MEMORY = 0,  /* v1 memory controller, or the v2 hierarchy on pure v2 */
        CG_PIDS,        /* v1 only */
        CG_CPU,         /* v1 only */
        CG_UNIFIED,     /* v2 hierarchy beside v1 (kill/freeze), unused on pure v2 */
        CG_HIER_MAX,
} cg_hier;

typedef struct cg_layout {
        bool pure_v2;
        bool have[CG_HIER_MAX];
        char base[CG_HIER_MAX][512];  /* <mount>/<own cgroup>/hexr-sandbox */
        char instance[64];            /* s<pid>.<starttime> */
} cg_layout;

typedef struct cg_limits {
        uint64_t memory_bytes;
        uint32_t pids_max;
        uint32_t cpus_milli;
} cg_limits;

typedef struct cg_exec {
        char path[CG_HIER_MAX][600];  /* "" where the hierarchy is not used */
        bool pure_v2;
} cg_exec;

/* Finds the layout and our own cgroup, creates the hexr-sandbox parents. */
int cg_layout_init(cg_layout *ret, hxs_error *err);
/* Removes leftovers of dead engines. Returns how many cgroups it removed. */
int cg_sweep(const cg_layout *l);
/* Describes what was found, for doctor. */
void cg_layout_describe(const cg_layout *l, char *buf, size_t size);

/* A new cgroup with those limits; safe from any thread. */
int cg_exec_create(const cg_layout *l, const cg_limits *lim, cg_exec *ret, hxs_error *err);
/* Its name, "<instance>-<seq>". */
void cg_exec_name(const cg_exec *c, char *buf, size_t size);
/* Moves pid into every hierarchy not in `joined` (a mask of 1 << cg_hier). */
int cg_exec_attach(const cg_exec *c, pid_t pid, unsigned joined, hxs_error *err);

/* Joining at birth instead of being moved by pid (a move by pid takes the kernel's
 * global threadgroup lock, which on cgroup v1 waits for an RCU grace period): the v2
 * hierarchy (pure v2, or the one beside v1) through CLONE_INTO_CGROUP with v2_dirfd,
 * and each v1 hierarchy by the child writing "0" (itself, one thread: no global lock)
 * into its `tasks` file through v1_tasks[], which the engine opened (the kernel checks
 * the opener's credentials, not the writer's). All descriptors O_CLOEXEC. */
typedef struct cg_join {
        int v2_dirfd;                   /* -1: none */
        unsigned v2_hier;               /* which hierarchy v2_dirfd is */
        int v1_tasks[CG_HIER_MAX];      /* -1: none */
} cg_join;

int cg_join_open(const cg_exec *c, cg_join *ret, hxs_error *err);
void cg_join_close(cg_join *j);
/* Peak memory in bytes (0 if unknown) and the OOM kill count. */
uint64_t cg_exec_peak_memory(const cg_exec *c);
uint64_t cg_exec_oom_kills(const cg_exec *c);
/* SIGKILLs every process in it. */
void cg_exec_kill(const cg_exec *c);
/* Stops every process of c where it is (cgroup.freeze of its v2 hierarchy), waiting
 * up to 200 ms for the kernel to say so: 0 once frozen; -EOPNOTSUPP without a v2
 * hierarchy (pure v1), -ETIMEDOUT, or -errno. cg_exec_kill works on a frozen c. */
int cg_exec_freeze(const cg_exec *c);
/* Removes the cgroups; -EBUSY while processes are still exiting. */
int cg_exec_remove(cg_exec *c);

/* Cgroups that could not be removed yet (their last processes were still exiting),
 * tried again later. One thread's: the engine's. */
#define CG_GRAVEYARD_MAX 256
typedef struct cg_graveyard {
        cg_exec graves[CG_GRAVEYARD_MAX];
        size_t n;
} cg_graveyard;

/* Takes c (killed already) for later removal; when full, waits for it now. */
void cg_graveyard_add(cg_graveyard *g, const cg_exec *c);
/* Kills and removes what is there; with wait, retries for a while. */
void cg_graveyard_bury(cg_graveyard *g, bool wait);
