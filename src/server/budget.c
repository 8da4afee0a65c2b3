/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host's budgets for running executions (budget.h). Admission counts what an
 * execution uses, not how many cores there are: a sleeping execution costs a pid
 * budget and its memory_mb, not a core (the CPU is shared by cgroup weight), so the
 * limits are the pids every sandbox may hold together and a memory budget. Read once
 * at start: the budget is what running executions may hold, and must not shrink under
 * them as they take the memory it was derived from.
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "server/budget.h"

static uint64_t read_u64_file(const char *path)
{
        unsigned long long v = 0;
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        if (fscanf(f, "%llu", &v) != 1)
                v = 0;
        fclose(f);
        return v;
}

static uint64_t mem_available_mb(void)
{
        char line[128];
        unsigned long long kb = 0;
        FILE *f = fopen("/proc/meminfo", "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
                        break;
        fclose(f);
        return kb / 1024;
}

/* The tightest memory limit over the service's own cgroup and its ancestors (a
 * container's limit: MemAvailable is the host's), in MB; 0 when there is none. */
static uint64_t cgroup_limit_mb(void)
{
        char line[1024], path[1200];
        const char *rel = NULL, *file = NULL, *mount = NULL;
        uint64_t best = 0;
        FILE *f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                if (strncmp(line, "0::", 3) == 0 && !rel) {
                        rel = line + 3, file = "memory.max", mount = "/sys/fs/cgroup";
                } else if (strstr(line, ":memory:")) {
                        rel = strstr(line, ":memory:") + 8, file = "memory.limit_in_bytes",
                        mount = "/sys/fs/cgroup/memory";
                        break;
                }
        }
        fclose(f);
        if (!rel)
                return 0;
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s", rel);
        for (;;) {
                snprintf(path, sizeof(path), "%s%s/%s", mount, dir, file);
                uint64_t b = read_u64_file(path); /* "max" reads as 0 */
                if (b && b < (1ull << 60) && (!best || b / (1024 * 1024) < best))
                        best = b / (1024 * 1024);
                char *slash = strrchr(dir, '/');
                if (!slash || dir[0] == '\0')
                        break;
                *slash = '\0';
        }
        return best;
}

/* Every running execution holds descriptors of the service: the soft limit (often
 * 1024) goes up to the hard one, the kernel's bound for us anyway. */
static uint64_t raise_nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        if (rl.rlim_cur < rl.rlim_max) {
                struct rlimit want = { .rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max };
                if (setrlimit(RLIMIT_NOFILE, &want) == 0)
                        rl.rlim_cur = rl.rlim_max;
        }
        return rl.rlim_cur == RLIM_INFINITY ? 0 : (uint64_t)rl.rlim_cur;
}

void host_facts_read(host_facts *ret)
{
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        uint64_t nofile = raise_nofile();

        *ret = (host_facts){
                .mem_available_mb = mem_available_mb(),
                .cgroup_limit_mb = cgroup_limit_mb(),
                .pid_max = read_u64_file("/proc/sys/kernel/pid_max"),
                .threads_max = read_u64_file("/proc/sys/kernel/threads-max"),
                .cores = cores > 0 ? (unsigned)cores : 1,
                .nofile = nofile,
        };
}

static uint32_t derive_slots(const hxs_config *cfg, const host_facts *h)
{
        uint64_t pids = h->pid_max;
        if (h->threads_max && (!pids || h->threads_max < pids))
                pids = h->threads_max;
        if (!pids)
                pids = 32768; /* the kernel's own default pid_max */
        uint64_t n = pids / 2 / (cfg->pids_max ? cfg->pids_max : 1);
        if (h->nofile) {
                uint64_t kept = (uint64_t)cfg->max_connections + BUDGET_FDS_RESERVED;
                uint64_t fds = h->nofile > kept ? (h->nofile - kept) / BUDGET_FDS_PER_EXEC : 0;
                if (fds < n)
                        n = fds;
        }
        if (n > BUDGET_SLOTS_MAX)
                n = BUDGET_SLOTS_MAX;
        return n < 2 ? 2 : (uint32_t)n;
}

void budget_settle(hxs_config *cfg, const host_facts *h)
{
        unsigned per_core = h->cores > 2 ? h->cores : 2;
        if (cfg->max_concurrent == 0)
                cfg->max_concurrent = derive_slots(cfg, h);
        /* A slot template is a fork of its kind's first one and shares its pages (about
         * 0.7 MiB of its own, measured); an execution that finds none free starts cold,
         * which costs tens of milliseconds of CPU: one for every execution that may run,
         * up to BUDGET_WARM_SLOTS_MAX, so that a burst of mostly idle executions (sleeps,
         * waits on files) starts warm too. */
        if (cfg->warm_slots == 0)
                cfg->warm_slots = cfg->max_concurrent < BUDGET_WARM_SLOTS_MAX ? cfg->max_concurrent
                                                                             : BUDGET_WARM_SLOTS_MAX;
        if (cfg->warm_slots > cfg->max_concurrent)
                cfg->warm_slots = cfg->max_concurrent;
        if (cfg->memory_budget_mb == 0) {
                uint64_t avail = h->mem_available_mb;
                if (h->cgroup_limit_mb && (!avail || h->cgroup_limit_mb < avail))
                        avail = h->cgroup_limit_mb;
                uint64_t mb = avail ? avail / 2 : (uint64_t)per_core * cfg->max_memory_mb;
                cfg->memory_budget_mb = mb > UINT32_MAX ? UINT32_MAX : (uint32_t)mb;
        }
        if (cfg->memory_budget_mb < cfg->max_memory_mb)
                cfg->memory_budget_mb = cfg->max_memory_mb;
}
