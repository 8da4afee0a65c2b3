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
 * The supervisor's side is the engine's too (ns_spawn, src/ns/ns-spawn.c: pipes,
 * payload, uid maps, the hand-shake). What differs is only how the child is born and
 * what the engine does around it, done here by the agent: a clone into the guest's
 * cgroup (memory.max, no swap, pids.max), the kill and the figures.
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
#include "ns/ns-spawn.h"
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
                return err_fail(err, HXS_ERR_SETUP, r, "enabling the memory and pids controllers: %s", strerror(-r));
        if (mkdir(CG_DIR, 0755) < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "creating the sandbox's cgroup: %s", strerror(errno));
        snprintf(v, sizeof(v), "%llu", (unsigned long long)run->memory_mb << 20);
        if ((r = cg_write("memory.max", v, false)) < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "setting memory.max: %s", strerror(-r));
        if ((r = cg_write("memory.swap.max", "0", true)) < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "setting memory.swap.max: %s", strerror(-r));
        snprintf(v, sizeof(v), "%u", run->pids_max);
        if ((r = cg_write("pids.max", v, false)) < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "setting pids.max: %s", strerror(-r));
        int fd = open(CG_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "opening the sandbox's cgroup: %s", strerror(errno));
        return fd;
}

/* The request's environment as NAME=VALUE strings (free with strv_free). */
static int make_env(const hxp_run *run, char ***ret)
{
        char **envp = calloc(run->n_env + 1, sizeof(char *));
        if (!envp)
                return -ENOMEM;
        for (size_t i = 0; i < run->n_env; i++)
                if (!(envp[i] = strndup((const char *)run->env[i], run->env_len[i]))) {
                        strv_free(envp);
                        return -ENOMEM;
                }
        *ret = envp;
        return 0;
}

/* A session's argv from RUN (free with strv_free); *ret NULL without one. */
static int make_argv(const hxp_run *run, char ***ret)
{
        *ret = NULL;
        if (run->n_argv == 0)
                return 0;
        char **argv = calloc(run->n_argv + 1, sizeof(char *));
        if (!argv)
                return -ENOMEM;
        for (size_t i = 0; i < run->n_argv; i++)
                if (!(argv[i] = strndup((const char *)run->argv[i], run->argv_len[i]))) {
                        strv_free(argv);
                        return -ENOMEM;
                }
        *ret = argv;
        return 0;
}

/* Born in the sandbox's cgroup: nothing to move afterwards. */
static int clone_into_cgroup(void *ctx, const ns_child_args *child, ns_born *ret, hxs_error *err)
{
        int cg_fd = *(const int *)ctx;
        struct clone_args ca = {
                .flags = NS_CLONE_FLAGS | CLONE_INTO_CGROUP | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)&ret->pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = (uint64_t)cg_fd,
        };
        long pid = syscall(SYS_clone3, &ca, sizeof(ca));
        if (pid < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "cloning the sandbox: %s", strerror(errno));
        if (pid == 0) {
                ns_program prog;
                ns_child_main(child, &prog);
                _exit(127); /* cold: not reached */
        }
        ret->pid = (pid_t)pid;
        return 0;
}


int run_start(const hxp_run *run, const uint8_t *code, int files_fd, agent_job *job, hxs_error *err)
{
        static sandbox_filter seccomp;
        static bool have_seccomp;
        static ns_limits limits;
        int r;

        *job = (agent_job){ .pid = -1, .pidfd = -1, .stdin_fd = -1, .stdout_fd = -1,
                            .stderr_fd = -1, .report_fd = -1, .sync_fd = -1, .cg_fd = -1,
                            .psi_fd = -1 };
        if (run->language >= HXS_LANG_MAX)
                return err_fail(err, HXS_ERR_SETUP, -EIO, "unknown language");
        if (!have_seccomp) {
                if ((r = sandbox_filter_build(&seccomp, err)) < 0)
                        return err_wrap(err, r, "building the seccomp filter");
                have_seccomp = true;
        }
        limits = (ns_limits){ .tmpfs_mb = run->tmpfs_mb, .nofile = run->nofile };

        _cleanup_close_ int cg_fd = cg_create(run, err);
        if (cg_fd < 0)
                return cg_fd;
        _cleanup_close_ int psi_fd = open(CG_DIR "/memory.pressure", O_RDWR | O_NONBLOCK | O_CLOEXEC);
        char **envp = NULL, **argv = NULL;
        if (psi_fd < 0 || write(psi_fd, PSI_TRIGGER, strlen(PSI_TRIGGER) + 1) < 0)
                r = err_fail(err, HXS_ERR_SETUP, -errno, "setting the memory pressure trigger: %s", strerror(errno));
        else if ((r = make_env(run, &envp)) < 0 || (r = make_argv(run, &argv)) < 0)
                err_fail(err, HXS_ERR_SETUP, r, "writing the payload: %s", strerror(-r));
        else if (mkdir(MOUNTPOINT, 0700) < 0 && errno != EEXIST)
                r = err_fail(err, HXS_ERR_SETUP, -errno, "creating the sandbox's mount point: %s", strerror(errno));
        if (r < 0) {
                strv_free(envp);
                (void)rmdir(CG_DIR);
                return r;
        }
        const ns_python_site site = ns_python_site_builtin(); /* the namespace backend's */
        ns_spawn_args sa = {
                .child = {
                        .limits = &limits, .seccomp = &seccomp, .mountpoint = MOUNTPOINT,
                        .interpreter = argv ? argv[0] : runtime_table[run->language].path,
                        .argv = argv,
                        /* a session's drivers, as the namespace backend gives them */
                        .drivers = run->interactive ? driver_files : NULL,
                        .drivers_bytes = run->interactive ? ns_drivers_bytes(driver_files) : 0,
                        .code_name = runtime_table[run->language].file,
                        .memory_mb = run->memory_mb,
                        .init_fd = -1, /* PID 1 stays this agent's copy: nothing in it to hide */
                        .site = &site,
                        .has_files = files_fd >= 0, .files_fd = files_fd,
                },
                .code = (const char *)code, .code_len = run->code_len, .envp = envp,
                .with_stdin = run->stdin_len > 0 || run->interactive, .uid_base = AGENT_UID_BASE,
                .clone = clone_into_cgroup, .ctx = &cg_fd,
        };
        uint64_t started = agent_now_ns();
        ns_child c;
        r = ns_spawn(&sa, &c, err);
        strv_free(envp);
        strv_free(argv);
        *job = (agent_job){ .pid = c.pid, .pidfd = c.pidfd, .stdin_fd = c.stdin_fd,
                            .stdout_fd = c.stdout_fd, .stderr_fd = c.stderr_fd,
                            .report_fd = c.report_fd, .sync_fd = c.sync_fd, .cg_fd = TAKE_FD(cg_fd),
                            .psi_fd = TAKE_FD(psi_fd), .started_ns = started };
        /* 'g': it is in its cgroup (it was born there). The write end stays open while
         * the sandbox lives: a hang-up would tell it the agent is gone. */
        if (r == 0)
                r = ns_child_go(&c, err);
        if (r < 0) {
                bool cloned = job->pid > 0;
                if (cloned)
                        run_kill(job);
                run_close(job);
                if (!cloned)
                        (void)rmdir(CG_DIR);
        }
        return r;
}

void run_kill(agent_job *job)
{
        (void)write_file(CG_DIR "/cgroup.kill", "1");
}

void run_freeze(agent_job *job)
{
        char ev[512];
        if (write_file(CG_DIR "/cgroup.freeze", "1") < 0)
                return;
        /* frozen once every task stopped; a task in the kernel takes a moment */
        for (int i = 0; i < 200; i++) {
                if (read_file(CG_DIR "/cgroup.events", ev, sizeof(ev)) > 0 && strstr(ev, "frozen 1"))
                        return;
                (void)nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
        }
        agent_log("the sandbox did not freeze in 200 ms: its files are taken as they are");
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
