/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v1 and v2 handling for the namespace backend (see cgroup.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "core/error.h"
#include "core/cgroup.h"
#include "core/fileio.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CG_DIRNAME "hexr-sandbox"

static const char *const v1_names[] = { [CG_MEMORY] = "memory", [CG_PIDS] = "pids", [CG_CPU] = "cpu" };

static bool is_fs(const char *path, long magic)
{
        struct statfs s;
        return statfs(path, &s) == 0 && s.f_type == magic;
}

/* Our own cgroup path in the hierarchy that lists `controller` ("" for v2's "0::"). */
static int own_cgroup(const char *controller, char *buf, size_t size)
{
        FILE *f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return -errno;
        char line[1024];
        int r = -ENOENT;
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                char *c1 = strchr(line, ':');
                char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c2 = '\0';
                const char *ctrls = c1 + 1, *path = c2 + 1;
                bool match = false;
                if (controller[0] == '\0') {
                        match = ctrls[0] == '\0';
                } else {
                        char tmp[256];
                        snprintf(tmp, sizeof(tmp), "%s", ctrls);
                        for (char *save, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save))
                                if (strcmp(t, controller) == 0)
                                        match = true;
                }
                if (match) {
                        snprintf(buf, size, "%s", strcmp(path, "/") == 0 ? "" : path);
                        r = 0;
                        break;
                }
        }
        fclose(f);
        return r;
}

static int mkdir_p_cg(const char *path)
{
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* Pure v2: the service's own cgroup holds processes, and v2 forbids controllers in a
 * cgroup with processes of its own, so the engine moves itself into a leaf
 * ("<own>/hexr-sandbox/supervisor-<pid>") and enables controllers on the way down. */
static int v2_prepare(const char *own, cg_layout *l, hxs_error *err)
{
        char p[600];
        int r;
        snprintf(l->base[CG_MEMORY], sizeof(l->base[CG_MEMORY]), "%s%s/%s", CG_ROOT, own, CG_DIRNAME);
        r = mkdir_p_cg(l->base[CG_MEMORY]);
        if (r < 0)
                return err_fail(err, HXS_ERR_UNSUPPORTED, r, "cannot create %s: %s",
                                l->base[CG_MEMORY], strerror(-r));
        /* Move ourselves out of the way if our cgroup has processes (it does: us). */
        snprintf(p, sizeof(p), "%s/supervisor-%d", l->base[CG_MEMORY], (int)getpid());
        if (mkdir_p_cg(p) == 0) {
                char procs[700];
                snprintf(procs, sizeof(procs), "%s/cgroup.procs", p);
                (void)write_file(procs, "0");
        }
        snprintf(p, sizeof(p), "%s%s/cgroup.subtree_control", CG_ROOT, own);
        (void)write_file(p, "+memory +pids +cpu");
        snprintf(p, sizeof(p), "%s/cgroup.subtree_control", l->base[CG_MEMORY]);
        r = write_file(p, "+memory +pids +cpu");
        if (r < 0)
                r = write_file(p, "+memory +pids");
        if (r < 0)
                return err_fail(err, HXS_ERR_UNSUPPORTED, r,
                                "cannot enable the memory and pids controllers in %s: %s",
                                l->base[CG_MEMORY], strerror(-r));
        return 0;
}

/* Called again in a process that v2_prepare moved already (doctor probes, then starts
 * an engine): the cgroup it was in is the one above its own leaf. Else the layout
 * would nest below the leaf, which no sweep could then remove. */
static void leave_own_leaf(char *own)
{
        char leaf[64];
        snprintf(leaf, sizeof(leaf), "/%s/supervisor-%d", CG_DIRNAME, (int)getpid());
        size_t n = strlen(own), m = strlen(leaf);
        if (n >= m && strcmp(own + n - m, leaf) == 0)
                own[n - m] = '\0';
}

static int instance_name(char *buf, size_t size)
{
        unsigned long long start = 0;
        int r = proc_start_time(getpid(), &start);
        if (r < 0)
                return r;
        snprintf(buf, size, "s%d.%llu", (int)getpid(), start);
        return 0;
}

int cg_layout_init(cg_layout *ret, hxs_error *err)
{
        cg_layout l = { 0 };
        char own[512];
        int r = instance_name(l.instance, sizeof(l.instance));
        if (r < 0)
                return err_fail(err, HXS_ERR_UNSUPPORTED, r, "cannot read our own start time");

        if (is_fs(CG_ROOT, CGROUP2_SUPER_MAGIC)) {
                l.pure_v2 = true;
                if (own_cgroup("", own, sizeof(own)) < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, -ENOENT, "no cgroup v2 entry in /proc/self/cgroup");
                leave_own_leaf(own);
                r = v2_prepare(own, &l, err);
                if (r < 0)
                        return r;
                l.have[CG_MEMORY] = true;
                *ret = l;
                return 0;
        }

        for (cg_hier h = CG_MEMORY; h <= CG_CPU; h++) {
                char mnt[256];
                snprintf(mnt, sizeof(mnt), CG_ROOT "/%s", v1_names[h]);
                if (!is_fs(mnt, CGROUP_SUPER_MAGIC))
                        continue;
                if (own_cgroup(v1_names[h], own, sizeof(own)) < 0)
                        continue;
                snprintf(l.base[h], sizeof(l.base[h]), "%s%s/%s", mnt, own, CG_DIRNAME);
                r = mkdir_p_cg(l.base[h]);
                if (r < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, r, "cannot create %s: %s",
                                        l.base[h], strerror(-r));
                l.have[h] = true;
        }
        if (is_fs(CG_ROOT "/unified", CGROUP2_SUPER_MAGIC) && own_cgroup("", own, sizeof(own)) == 0) {
                snprintf(l.base[CG_UNIFIED], sizeof(l.base[CG_UNIFIED]), "%s/unified%s/%s",
                         CG_ROOT, own, CG_DIRNAME);
                if (mkdir_p_cg(l.base[CG_UNIFIED]) == 0)
                        l.have[CG_UNIFIED] = true;
        }
        if (!l.have[CG_MEMORY] || !l.have[CG_PIDS])
                return err_fail(err, HXS_ERR_UNSUPPORTED, -ENOTSUP,
                                "need the memory and pids cgroup controllers (v1 under %s or v2)", CG_ROOT);
        *ret = l;
        return 0;
}

void cg_layout_describe(const cg_layout *l, char *buf, size_t size)
{
        if (l->pure_v2)
                snprintf(buf, size, "cgroup v2 at %s", l->base[CG_MEMORY]);
        else
                snprintf(buf, size, "cgroup v1 (memory%s%s)%s", l->have[CG_PIDS] ? ", pids" : "",
                         l->have[CG_CPU] ? ", cpu" : "",
                         l->have[CG_UNIFIED] ? " with a v2 hierarchy for kill" : "");
}

static int cg_file(const char *dir, const char *file, const char *value)
{
        char p[700];
        snprintf(p, sizeof(p), "%s/%s", dir, file);
        return write_file(p, value);
}

static uint64_t cg_read_u64(const char *dir, const char *file)
{
        char p[700], buf[64];
        snprintf(p, sizeof(p), "%s/%s", dir, file);
        if (read_file(p, buf, sizeof(buf)) < 0)
                return 0;
        return strtoull(buf, NULL, 10);
}

/* "key N" lines (memory.events, memory.oom_control). */
static uint64_t cg_read_key(const char *dir, const char *file, const char *key)
{
        char p[700], buf[2048];
        snprintf(p, sizeof(p), "%s/%s", dir, file);
        if (read_file(p, buf, sizeof(buf)) < 0)
                return 0;
        size_t kl = strlen(key);
        for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
                        return strtoull(line + kl + 1, NULL, 10);
        return 0;
}

/* The process's one sequence: layouts share the instance name. */
static uint64_t cg_seq;

int cg_exec_create(const cg_layout *l, const cg_limits *lim, cg_exec *ret, hxs_error *err)
{
        cg_exec c = { .pure_v2 = l->pure_v2 };
        char val[64];
        uint64_t seq = __atomic_add_fetch(&cg_seq, 1, __ATOMIC_RELAXED);
        int r;

        for (cg_hier h = 0; h < CG_HIER_MAX; h++) {
                if (!l->have[h])
                        continue;
                snprintf(c.path[h], sizeof(c.path[h]), "%s/%s-%" PRIu64, l->base[h], l->instance, seq);
                if (mkdir(c.path[h], 0755) < 0) {
                        r = -errno;
                        c.path[h][0] = '\0';
                        cg_exec_remove(&c);
                        return err_fail(err, HXS_ERR_SETUP, r, "creating cgroup %s: %s",
                                        l->base[h], strerror(-r));
                }
        }

        const char *what = NULL;
        if (l->pure_v2) {
                const char *d = c.path[CG_MEMORY];
                snprintf(val, sizeof(val), "%" PRIu64, lim->memory_bytes);
                if ((r = cg_file(d, "memory.max", val)) < 0) { what = "memory.max"; goto fail; }
                (void)cg_file(d, "memory.swap.max", "0"); /* absent without swap accounting */
                (void)cg_file(d, "memory.oom.group", "0");
                snprintf(val, sizeof(val), "%u", lim->pids_max);
                if ((r = cg_file(d, "pids.max", val)) < 0) { what = "pids.max"; goto fail; }
                snprintf(val, sizeof(val), "%u 100000", lim->cpus_milli * 100);
                (void)cg_file(d, "cpu.max", val); /* cpu is optional */
        } else {
                const char *d = c.path[CG_MEMORY];
                snprintf(val, sizeof(val), "%" PRIu64, lim->memory_bytes);
                if ((r = cg_file(d, "memory.limit_in_bytes", val)) < 0) { what = "memory.limit_in_bytes"; goto fail; }
                /* memory+swap equal to memory: no swap at all (absent without swapaccount) */
                (void)cg_file(d, "memory.memsw.limit_in_bytes", val);
                (void)cg_file(d, "memory.swappiness", "0");
                snprintf(val, sizeof(val), "%u", lim->pids_max);
                if ((r = cg_file(c.path[CG_PIDS], "pids.max", val)) < 0) { what = "pids.max"; goto fail; }
                if (c.path[CG_CPU][0]) {
                        (void)cg_file(c.path[CG_CPU], "cpu.cfs_period_us", "100000");
                        snprintf(val, sizeof(val), "%u", lim->cpus_milli * 100);
                        (void)cg_file(c.path[CG_CPU], "cpu.cfs_quota_us", val);
                }
        }
        *ret = c;
        return 0;
fail:
        cg_exec_remove(&c);
        return err_fail(err, HXS_ERR_SETUP, r, "setting cgroup %s: %s", what, strerror(-r));
}

void cg_exec_name(const cg_exec *c, char *buf, size_t size)
{
        buf[0] = '\0';
        for (cg_hier h = 0; h < CG_HIER_MAX; h++)
                if (c->path[h][0]) {
                        const char *slash = strrchr(c->path[h], '/');
                        snprintf(buf, size, "%s", slash ? slash + 1 : c->path[h]);
                        return;
                }
}

int cg_exec_attach(const cg_exec *c, pid_t pid, unsigned joined, hxs_error *err)
{
        char val[32];
        snprintf(val, sizeof(val), "%d", (int)pid);
        for (cg_hier h = 0; h < CG_HIER_MAX; h++) {
                if (!c->path[h][0] || (joined & (1u << h)))
                        continue;
                int r = cg_file(c->path[h], "cgroup.procs", val);
                if (r < 0)
                        return err_fail(err, HXS_ERR_SETUP, r, "moving the sandbox into %s: %s",
                                        c->path[h], strerror(-r));
        }
        return 0;
}

void cg_join_close(cg_join *j)
{
        if (j->v2_dirfd >= 0)
                close(j->v2_dirfd);
        j->v2_dirfd = -1;
        for (cg_hier h = 0; h < CG_HIER_MAX; h++) {
                if (j->v1_tasks[h] >= 0)
                        close(j->v1_tasks[h]);
                j->v1_tasks[h] = -1;
        }
}

int cg_join_open(const cg_exec *c, cg_join *ret, hxs_error *err)
{
        cg_join j = { .v2_dirfd = -1 };
        for (cg_hier h = 0; h < CG_HIER_MAX; h++)
                j.v1_tasks[h] = -1;
        for (cg_hier h = 0; h < CG_HIER_MAX; h++) {
                if (!c->path[h][0])
                        continue;
                bool v2 = c->pure_v2 || h == CG_UNIFIED;
                char p[700];
                int fd;
                if (v2) {
                        fd = open(c->path[h], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                } else {
                        snprintf(p, sizeof(p), "%s/tasks", c->path[h]);
                        fd = open(p, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                }
                if (fd < 0) {
                        int r = -errno;
                        cg_join_close(&j);
                        return err_fail(err, HXS_ERR_SETUP, r, "opening %s: %s", c->path[h], strerror(-r));
                }
                if (v2) {
                        if (j.v2_dirfd >= 0)
                                close(j.v2_dirfd); /* one v2 hierarchy at most */
                        j.v2_dirfd = fd;
                        j.v2_hier = h;
                } else {
                        j.v1_tasks[h] = fd;
                }
        }
        *ret = j;
        return 0;
}

uint64_t cg_exec_peak_memory(const cg_exec *c)
{
        if (!c->path[CG_MEMORY][0])
                return 0;
        return cg_read_u64(c->path[CG_MEMORY], c->pure_v2 ? "memory.peak" : "memory.max_usage_in_bytes");
}

uint64_t cg_exec_oom_kills(const cg_exec *c)
{
        if (!c->path[CG_MEMORY][0])
                return 0;
        if (c->pure_v2)
                return cg_read_key(c->path[CG_MEMORY], "memory.events", "oom_kill");
        return cg_read_key(c->path[CG_MEMORY], "memory.oom_control", "oom_kill");
}

/* SIGKILLs every pid listed in <dir>/cgroup.procs; returns how many were listed. */
static int kill_procs(const char *dir)
{
        char p[700], buf[8192];
        snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
        if (read_file(p, buf, sizeof(buf)) < 0)
                return 0;
        int n = 0;
        for (char *s = buf; *s;) {
                char *end;
                long pid = strtol(s, &end, 10);
                if (end == s)
                        break;
                if (pid > 1) {
                        kill((pid_t)pid, SIGKILL);
                        n++;
                }
                s = end;
                while (*s == '\n')
                        s++;
        }
        return n;
}

static void kill_dir(const char *dir, bool v2)
{
        if (v2 && cg_file(dir, "cgroup.kill", "1") == 0)
                return;
        /* v1 has no cgroup.kill: freeze would need the freezer; SIGKILL until empty
         * (a fork racing us lands in the same cgroup and is caught next round). */
        for (int round = 0; round < 32 && kill_procs(dir) > 0; round++)
                ;
}

int cg_exec_freeze(const cg_exec *c)
{
        const char *dir = c->pure_v2 ? c->path[CG_MEMORY] : c->path[CG_UNIFIED];
        if (!dir[0])
                return -EOPNOTSUPP;
        int r = cg_file(dir, "cgroup.freeze", "1");
        if (r < 0)
                return r;
        char path[700], ev[512];
        snprintf(path, sizeof(path), "%s/cgroup.events", dir);
        /* frozen once every task has stopped; one in the kernel takes a moment */
        for (int i = 0; i < 200; i++) {
                if (read_file(path, ev, sizeof(ev)) > 0 && strstr(ev, "frozen 1"))
                        return 0;
                (void)nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
        }
        return -ETIMEDOUT;
}

void cg_exec_kill(const cg_exec *c)
{
        if (c->pure_v2) {
                if (c->path[CG_MEMORY][0])
                        kill_dir(c->path[CG_MEMORY], true);
                return;
        }
        if (c->path[CG_UNIFIED][0])
                kill_dir(c->path[CG_UNIFIED], true);
        for (cg_hier h = CG_MEMORY; h <= CG_CPU; h++)
                if (c->path[h][0])
                        kill_dir(c->path[h], false);
}

int cg_exec_remove(cg_exec *c)
{
        int ret = 0;
        for (cg_hier h = 0; h < CG_HIER_MAX; h++) {
                if (!c->path[h][0])
                        continue;
                if (rmdir(c->path[h]) < 0 && errno != ENOENT) {
                        ret = -errno;
                        continue;
                }
                c->path[h][0] = '\0';
        }
        return ret;
}

/* The engines a sweep has asked about: every hierarchy holds the same names, and an
 * engine running many sandboxes names many, so each owner's /proc entry is read once
 * per sweep rather than once per cgroup (an exec sweeps at every start). */
#define SWEEP_OWNERS_MAX 32
typedef struct sweep_owners {
        struct {
                int pid;
                unsigned long long start;
                bool alive;
        } seen[SWEEP_OWNERS_MAX];
        size_t n;
} sweep_owners;

/* Is the engine that named this cgroup "s<pid>.<start>-<seq>" still running? */
static bool owner_alive(sweep_owners *o, const char *name)
{
        int pid;
        unsigned long long start, now;
        if (sscanf(name, "s%d.%llu-", &pid, &start) != 2)
                return true; /* not ours to judge */
        for (size_t i = 0; i < o->n; i++)
                if (o->seen[i].pid == pid && o->seen[i].start == start)
                        return o->seen[i].alive;
        bool alive = proc_start_time(pid, &now) == 0 && now == start;
        if (o->n < SWEEP_OWNERS_MAX)
                o->seen[o->n++] = (typeof(o->seen[0])){ .pid = pid, .start = start, .alive = alive };
        return alive;
}

int cg_sweep(const cg_layout *l)
{
        sweep_owners owners = { .n = 0 };
        int removed = 0;
        for (cg_hier h = 0; h < CG_HIER_MAX; h++) {
                if (!l->have[h])
                        continue;
                DIR *d = opendir(l->base[h]);
                if (!d)
                        continue;
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_type != DT_DIR || de->d_name[0] == '.')
                                continue;
                        char p[1100];
                        snprintf(p, sizeof(p), "%s/%s", l->base[h], de->d_name);
                        if (strncmp(de->d_name, "supervisor-", 11) == 0) {
                                int pid = atoi(de->d_name + 11);
                                if (pid > 0 && kill(pid, 0) < 0 && errno == ESRCH)
                                        (void)rmdir(p);
                                continue;
                        }
                        if (owner_alive(&owners, de->d_name))
                                continue;
                        kill_dir(p, l->pure_v2 || h == CG_UNIFIED);
                        for (int i = 0; i < 50 && rmdir(p) < 0 && errno == EBUSY; i++)
                                usleep(10000);
                        removed++;
                }
                closedir(d);
        }
        return removed;
}

void cg_graveyard_add(cg_graveyard *g, const cg_exec *c)
{
        if (g->n < CG_GRAVEYARD_MAX) {
                g->graves[g->n++] = *c;
                return;
        }
        /* full: wait for this one now rather than forget it */
        cg_exec tmp = *c;
        for (int i = 0; i < 200 && cg_exec_remove(&tmp) == -EBUSY; i++)
                usleep(5000);
}

void cg_graveyard_bury(cg_graveyard *g, bool wait)
{
        for (int round = 0; round < (wait ? 400 : 1) && g->n > 0; round++) {
                size_t kept = 0;
                for (size_t i = 0; i < g->n; i++) {
                        cg_exec_kill(&g->graves[i]);
                        if (cg_exec_remove(&g->graves[i]) < 0)
                                g->graves[kept++] = g->graves[i];
                }
                g->n = kept;
                if (kept && wait)
                        usleep(5000);
        }
}
