/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One execution inside the VM, set up by the namespace backend's own code: the agent
 * clones a child into fresh user, pid, mount, net, ipc and uts namespaces and a cgroup
 * of the guest, and the child runs ns_child_main (src/ns/ns-child.c) exactly as a
 * cold sandbox on the host does: a tmpfs root with the root image's /usr read-only,
 * the same synthesized /etc and minimal /dev, fresh /tmp and home, the code under
 * /code, then the program as the sandbox user with no capabilities, no_new_privs,
 * the same seccomp filter and the same rlimits. So the two backends cannot drift.
 *
 * What differs is only what the host engine does around it, done here by the agent:
 * the uid maps, the cgroup (memory.max, no swap, pids.max), the kill and the figures.
 *
 * One difference the VM forces: on the host, the interpreter's file pages are already
 * in the page cache, charged to someone else; in a fresh VM the sandbox is the first to
 * read them, so they are charged to its cgroup. A program at its memory limit then
 * makes the kernel evict and re-read its own code instead of invoking the OOM killer,
 * and it thrashes until its time runs out. A memory pressure trigger (PSI) catches
 * that: when the program stalls on memory for more than half of 2 s, the agent ends
 * it as the OOM killer would have (SIGKILL, oom_killed).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/macro.h"
#include "engine/runtime.h"
#include "guest/agent.h"
#include "ns/ns.h"
#include "ns/payload.h"
#include "ns/seccomp.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CG_DIR CG_ROOT "/sandbox"
#define MOUNTPOINT "/run/sandbox"
/* guest uid of the sandbox's root (the sandbox user is +1000), as SANDBOX_UID_BASE */
#define AGENT_UID_BASE 1000000u
#define PSI_TRIGGER "full 1000000 2000000"

uint64_t agent_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cg_write(const char *file, const char *value, bool optional)
{
        char path[128];
        snprintf(path, sizeof(path), CG_DIR "/%s", file);
        int r = write_file(path, value);
        return r == -ENOENT && optional ? 0 : r;
}

/* The program's cgroup: memory.max with no swap, pids.max. Returns an fd on it for
 * CLONE_INTO_CGROUP, so that the sandbox is inside before it runs anything. */
static int cg_create(const hxp_run *run, hxs_error *err)
{
        char v[32];
        int r = write_file(CG_ROOT "/cgroup.subtree_control", "+memory +pids");
        if (r < 0)
                return hxs_fail(err, HXS_ERR_SETUP, r, "enabling the memory and pids controllers: %s", strerror(-r));
        if (mkdir(CG_DIR, 0755) < 0)
                return hxs_fail(err, HXS_ERR_SETUP, -errno, "creating the sandbox's cgroup: %s", strerror(errno));
        snprintf(v, sizeof(v), "%llu", (unsigned long long)run->memory_mb << 20);
        if ((r = cg_write("memory.max", v, false)) < 0)
                return hxs_fail(err, HXS_ERR_SETUP, r, "setting memory.max: %s", strerror(-r));
        if ((r = cg_write("memory.swap.max", "0", true)) < 0)
                return hxs_fail(err, HXS_ERR_SETUP, r, "setting memory.swap.max: %s", strerror(-r));
        snprintf(v, sizeof(v), "%u", run->pids_max);
        if ((r = cg_write("pids.max", v, false)) < 0)
                return hxs_fail(err, HXS_ERR_SETUP, r, "setting pids.max: %s", strerror(-r));
        int fd = open(CG_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return hxs_fail(err, HXS_ERR_SETUP, -errno, "opening the sandbox's cgroup: %s", strerror(errno));
        return fd;
}

static int write_maps(pid_t pid)
{
        char path[64], map[128];
        snprintf(map, sizeof(map), "0 %u 1\n%d %u 1\n", AGENT_UID_BASE, NS_SANDBOX_UID,
                 AGENT_UID_BASE + NS_SANDBOX_UID);
        snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
        int r = write_file(path, map);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
        return write_file(path, map);
}

static int set_nonblock(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* The request's code and environment in the payload format ns_child_main reads. */
static int make_payload(const hxp_run *run, const uint8_t *code)
{
        char **envp = calloc(run->n_env + 1, sizeof(char *));
        if (!envp)
                return -ENOMEM;
        int r = 0;
        for (size_t i = 0; i < run->n_env && r == 0; i++)
                if (!(envp[i] = strndup((const char *)run->env[i], run->env_len[i])))
                        r = -ENOMEM;
        if (r == 0)
                r = payload_create((const char *)code, run->code_len, envp);
        for (size_t i = 0; i < run->n_env; i++)
                free(envp[i]);
        free(envp);
        return r;
}

static void close_pipe(int p[2])
{
        close_fd(&p[0]);
        close_fd(&p[1]);
}

int run_start(const hxp_run *run, const uint8_t *code, agent_job *job, hxs_error *err)
{
        static hxs_seccomp seccomp;
        static bool have_seccomp;
        static ns_limits limits;
        int r, payload_fd = -1, cg_fd = -1, pidfd = -1;
        int sync_p[2] = { -1, -1 }, report_p[2] = { -1, -1 }, out_p[2] = { -1, -1 },
            err_p[2] = { -1, -1 }, in_p[2] = { -1, -1 };

        *job = (agent_job){ .pid = -1, .pidfd = -1, .stdin_fd = -1, .stdout_fd = -1,
                            .stderr_fd = -1, .report_fd = -1, .sync_fd = -1, .cg_fd = -1,
                            .psi_fd = -1 };
        if (run->language >= HXS_LANG_MAX)
                return hxs_fail(err, HXS_ERR_SETUP, -EIO, "unknown language");
        if (!have_seccomp) {
                if ((r = hxs_seccomp_build(&seccomp, err)) < 0)
                        return hxs_wrap(err, r, "building the seccomp filter");
                have_seccomp = true;
        }
        limits = (ns_limits){ .tmpfs_mb = run->tmpfs_mb, .nofile = run->nofile };

        if ((cg_fd = cg_create(run, err)) < 0)
                return cg_fd;
        int psi_fd = open(CG_DIR "/memory.pressure", O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (psi_fd < 0 || write(psi_fd, PSI_TRIGGER, strlen(PSI_TRIGGER) + 1) < 0) {
                r = hxs_fail(err, HXS_ERR_SETUP, -errno, "setting the memory pressure trigger: %s", strerror(errno));
                close_fd(&psi_fd);
                goto fail;
        }
        if ((payload_fd = make_payload(run, code)) < 0) {
                r = hxs_fail(err, HXS_ERR_SETUP, payload_fd, "writing the payload: %s", strerror(-payload_fd));
                goto fail;
        }
        if (pipe2(sync_p, O_CLOEXEC) < 0 || pipe2(report_p, O_CLOEXEC) < 0 ||
            pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 ||
            (run->stdin_len > 0 && pipe2(in_p, O_CLOEXEC) < 0)) {
                r = hxs_fail(err, HXS_ERR_SETUP, -errno, "creating pipes: %s", strerror(errno));
                goto fail;
        }
        if (mkdir(MOUNTPOINT, 0700) < 0 && errno != EEXIST) {
                r = hxs_fail(err, HXS_ERR_SETUP, -errno, "creating the sandbox's mount point: %s", strerror(errno));
                goto fail;
        }
        ns_child_args a = {
                .limits = &limits, .seccomp = &seccomp, .mountpoint = MOUNTPOINT,
                .interpreter = hxs_runtimes[run->language].path,
                .code_name = hxs_runtimes[run->language].file,
                .payload_fd = payload_fd, .sync_fd = sync_p[0], .report_fd = report_p[1],
                .stdin_fd = in_p[0], .stdout_fd = out_p[1], .stderr_fd = err_p[1],
                .memory_mb = run->memory_mb,
                .init_fd = -1, /* PID 1 stays this agent's copy: nothing in it to hide */
        };
        struct clone_args ca = {
                .flags = NS_CLONE_FLAGS | CLONE_INTO_CGROUP | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)&pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = (uint64_t)cg_fd,
        };
        uint64_t started = agent_now_ns();
        long pid = syscall(SYS_clone3, &ca, sizeof(ca));
        if (pid < 0) {
                r = hxs_fail(err, HXS_ERR_SETUP, -errno, "cloning the sandbox: %s", strerror(errno));
                goto fail;
        }
        if (pid == 0) {
                ns_program prog;
                ns_child_main(&a, &prog);
                _exit(127); /* cold: not reached */
        }
        close_fd(&payload_fd);
        close_fd(&sync_p[0]);
        close_fd(&report_p[1]);
        close_fd(&out_p[1]);
        close_fd(&err_p[1]);
        close_fd(&in_p[0]);
        *job = (agent_job){ .pid = (pid_t)pid, .pidfd = pidfd, .stdin_fd = in_p[1],
                            .stdout_fd = out_p[0], .stderr_fd = err_p[0],
                            .report_fd = report_p[0], .sync_fd = sync_p[1], .cg_fd = cg_fd,
                            .psi_fd = psi_fd, .started_ns = started };
        /* PID 1 of the sandbox must outlive the program under memory pressure, so that
         * the status is reported; the program resets its own score. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
        (void)write_file(path, "-1000");
        if ((r = write_maps(job->pid)) < 0) {
                hxs_fail(err, HXS_ERR_SETUP, r, "writing the sandbox's uid and gid maps: %s", strerror(-r));
                goto kill;
        }
        if ((r = set_nonblock(job->stdout_fd)) < 0 || (r = set_nonblock(job->stderr_fd)) < 0 ||
            (r = set_nonblock(job->report_fd)) < 0 ||
            (job->stdin_fd >= 0 && (r = set_nonblock(job->stdin_fd)) < 0)) {
                hxs_fail(err, HXS_ERR_SETUP, r, "pipes: %s", strerror(-r));
                goto kill;
        }
        /* 'm': the maps are written; 'g': it is in its cgroup (it was born there).
         * The write end stays open while the sandbox lives: a hang-up would tell it
         * the agent is gone. */
        if (write(job->sync_fd, "mg", 2) != 2) {
                r = hxs_fail(err, HXS_ERR_SETUP, -errno, "starting the sandbox: %s", strerror(errno));
                goto kill;
        }
        return 0;
kill:
        run_kill(job);
        run_close(job);
        return r;
fail:
        close_fd(&psi_fd);
        close_fd(&payload_fd);
        close_fd(&pidfd);
        close_pipe(sync_p);
        close_pipe(report_p);
        close_pipe(out_p);
        close_pipe(err_p);
        close_pipe(in_p);
        close_fd(&cg_fd);
        (void)rmdir(CG_DIR);
        return r;
}

void run_kill(agent_job *job)
{
        (void)write_file(CG_DIR "/cgroup.kill", "1");
}

static unsigned long long stat_field(const char *stat, const char *name)
{
        size_t n = strlen(name);
        for (const char *p = stat; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, name, n) == 0 && p[n] == ' ')
                        return strtoull(p + n + 1, NULL, 10);
        return 0;
}

/* Peak memory, without the page cache of the root image's files: on the host those
 * pages are already cached and charged elsewhere, so the namespace backend does not
 * count them; here the program is the first to read them. (tmpfs pages, "shmem",
 * are the program's own and stay counted.) */
void run_stats(agent_job *job, uint32_t *ret_peak_kb, bool *ret_oom)
{
        char buf[4096];
        unsigned long long peak = 0, cache = 0;
        *ret_peak_kb = 0;
        *ret_oom = false;
        if (read_file(CG_DIR "/memory.peak", buf, sizeof(buf)) > 0)
                peak = strtoull(buf, NULL, 10);
        if (read_file(CG_DIR "/memory.stat", buf, sizeof(buf)) > 0) {
                unsigned long long file = stat_field(buf, "file"), shmem = stat_field(buf, "shmem");
                cache = file > shmem ? file - shmem : 0;
        }
        peak = peak > cache ? peak - cache : 0;
        *ret_peak_kb = peak / 1024 > UINT32_MAX ? UINT32_MAX : (uint32_t)(peak / 1024);
        if (read_file(CG_DIR "/memory.events", buf, sizeof(buf)) > 0) {
                const char *p = strstr(buf, "oom_kill ");
                *ret_oom = p && strtoull(p + 9, NULL, 10) > 0;
        }
}

void run_close(agent_job *job)
{
        if (job->pidfd >= 0 && job->pid > 0) {
                siginfo_t si;
                (void)waitid(P_PIDFD, (id_t)job->pidfd, &si, WEXITED);
        }
        close_fd(&job->pidfd);
        close_fd(&job->stdin_fd);
        close_fd(&job->stdout_fd);
        close_fd(&job->stderr_fd);
        close_fd(&job->report_fd);
        close_fd(&job->sync_fd);
        close_fd(&job->cg_fd);
        close_fd(&job->psi_fd);
}
