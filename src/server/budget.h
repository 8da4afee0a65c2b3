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
} host_facts;

/* Execution slots MAX_CONCURRENT 0 gives, at most (the floor is 2). */
#define BUDGET_SLOTS_MAX 1024u

void host_facts_read(host_facts *ret);
/* Fills MAX_CONCURRENT, MEMORY_BUDGET_MB and SANDBOX_WARM_SLOTS where they are 0:
 *  - slots: half of the smaller of pid_max and threads-max, over SANDBOX_PIDS_MAX (each
 *    running sandbox may hold that many), 2 to BUDGET_SLOTS_MAX;
 *  - memory: half of MemAvailable, or of the service's cgroup memory limit when that
 *    is smaller (in a container); unknown: MAX_MEMORY_MB per core; never below
 *    MAX_MEMORY_MB, so the largest request can run;
 *  - warm slots: MAX_CONCURRENT when it was set, else one per core, at least 2, and no
 *    more than the slots. */
void budget_settle(hxs_config *cfg, const host_facts *h);
