/* SPDX-License-Identifier: Apache-2.0 */
/* What the host can give the service's executions (budget.c): the settings whose 0
 * means "derived from this host", made concrete once at start. */
#pragma once

#include <stdint.h>

#include "hexr-sandbox/sandbox.h"

/* What budget_settle derives from; 0 for what could not be read. */
typedef struct host_facts {
        uint64_t mem_available_mb;      /* /proc/meminfo MemAvailable */
        uint64_t cgroup_limit_mb;       /* the service's cgroup's memory limit (a container's) */
        uint64_t pid_max;               /* /proc/sys/kernel/pid_max */
        uint64_t threads_max;           /* /proc/sys/kernel/threads-max */
        unsigned cores;                 /* online CPUs */
        uint64_t nofile;                /* the service's RLIMIT_NOFILE (soft, once raised) */
} host_facts;

/* Execution slots MAX_CONCURRENT 0 gives, at most (the floor is 2). */
#define BUDGET_SLOTS_MAX 1024u
/* Warm slots SANDBOX_WARM_SLOTS 0 gives, at most (each kind forks that many templates). */
#define BUDGET_WARM_SLOTS_MAX 32u
/* Descriptors the service holds for one running execution, with room to spare (its
 * pipes, pidfd, report and epoll fds, cgroup files), and those it keeps for itself. */
#define BUDGET_FDS_PER_EXEC 16u
#define BUDGET_FDS_RESERVED 64u

/* Raises the soft RLIMIT_NOFILE to the hard one first (sandboxes set their own). */
void host_facts_read(host_facts *ret);
/* Fills MAX_CONCURRENT, MEMORY_BUDGET_MB and SANDBOX_WARM_SLOTS where they are 0:
 *  - slots: half of the smaller of pid_max and threads-max, over SANDBOX_PIDS_MAX (each
 *    running sandbox may hold that many), and no more than the service's descriptors
 *    allow besides MAX_CONNECTIONS, 2 to BUDGET_SLOTS_MAX;
 *  - memory: half of MemAvailable, or of the service's cgroup memory limit when that
 *    is smaller (in a container); unknown: MAX_MEMORY_MB per core; never below
 *    MAX_MEMORY_MB, so the largest request can run;
 *  - warm slots: as many as the slots, at most BUDGET_WARM_SLOTS_MAX. */
void budget_settle(hxs_config *cfg, const host_facts *h);
