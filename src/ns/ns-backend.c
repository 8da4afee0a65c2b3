/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The namespace backend, supervisor side: creates the cgroup, starts the child
 * through ns_spawn (ns-spawn.h: pipes, clone into new user/pid/mount/net/ipc/uts
 * namespaces, uid/gid maps, the move into its cgroup), lets it go, then collects
 * output, enforces the time limit and reads the result. Everything it waits on sits in
 * the execution's own epoll fd.
 *
 * Every sandbox's user namespace is owned by a host uid of its own (owners.h): the
 * service clones a cold sandbox with that effective uid, a warm one comes from the
 * template of a warm slot, which runs as it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/capbuf.h"
#include "engine/files-out.h"
#include "engine/output.h"
#include "core/error.h"
#include "core/fileio.h"
#include "engine/backend.h"
#include "engine/runtime-info.h"
#include "engine/runtime.h"
#include "ns/ns-files.h"
#include "ns/ns-init.h"
#include "ns/ns-probe.h"
#include "ns/ns-spawn.h"
#include "ns/ns.h"
#include "ns/owners.h"
#include "ns/pool.h"
#include "ns/remains.h"
#include "ns/template.h"

/* After PID 1 is gone, how long to wait for the pipes to close. */
#define DRAIN_GRACE_MS 2000
/* At the time limit the program gets SIGTERM first, and this long to go by itself (a
 * Python program flushes what it printed: charts.py) before the sandbox is killed. */
#define TERM_GRACE_MS 150

/* The backend's state, per engine. */
struct ns_backend {
        const backend_env *env;         /* the engine's: config, cgroups, graveyard, runtimes */
        sandbox_filter seccomp;
        char mountpoint[300];
        struct ns_templates *templates; /* warm Python templates (NULL: everything runs cold) */
        char template_error[200];       /* why there are none, when asked for */
        int init_fd;                    /* the sandbox's init, a sealed memfd (ns-init.h) */
        struct ns_owners *owners;       /* owner uids of user namespaces (owners.h) */
        ns_pool *pool;                  /* pre-started JS/Bash sandboxes (NULL: none) */
        unsigned running;               /* executions started and not yet released */
        uint64_t last_start_ms;         /* when the latest of them started (monotonic) */
        ns_remains remains;             /* of ended sandboxes, removed after the replies */
};

/* One execution's sandbox, from clone to reaping (at x->priv). */
struct ns_exec {
        struct ns_backend *b;
        pid_t pid;
        int pidfd, sync_fd, report_fd, stdout_fd, stderr_fd, stdin_fd, timer_fd;
        size_t stdin_off;
        char report[512];
        size_t report_len;
        char **envp;
        cg_exec cg;
        bool have_cg;
        bool warm;
        uid_t owner_uid;                /* owner of its user namespace it holds (owners.h), 0: none */
        int warm_slot;                  /* the warm slot it holds, -1: none (cold) */
        bool reaped, draining, drain_expired;
        bool term_sent;                 /* the time limit's SIGTERM */
        bool files_taken;               /* the files out are in the result */
        bool pooled;                    /* pre-started: the code goes into its FIFO */
        int code_fd;                    /* that FIFO's write end, until the code is in */
        size_t code_off;
        bool counted;                   /* in the backend's running */
        bool ended;                     /* answered with PID 1 let go, before its reaping */
};

enum { TAG_STDOUT = 1, TAG_STDERR, TAG_STDIN, TAG_REPORT, TAG_PIDFD, TAG_TIMER, TAG_CODE };

static int epoll_add(int epfd, int fd, uint32_t events, uint64_t tag)
{
        struct epoll_event ev = { .events = events, .data.u64 = tag };
        return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* Removes from epoll before closing, or epoll keeps reporting a dead fd. */
static void epoll_close(int epfd, int *fd)
{
        if (*fd < 0)
                return;
        if (epfd >= 0)
                (void)epoll_ctl(epfd, EPOLL_CTL_DEL, *fd, NULL);
        close(*fd);
        *fd = -1;
}

/* clone3 as `owner`: the user namespace it creates belongs to its creator's effective
 * uid. Only this thread, only for the call (and for opening PID 1's files as owner,
 * see ns_pid1_files in ns-spawn.h). The child gets full capabilities in its new user
 * namespace and none outside it, whatever this thread's. */
static long clone3_as(uid_t owner, struct clone_args *ca, ns_pid1_files *files)
{
        int dumpable = ns_owner_become(owner);
        if (dumpable < 0)
                return dumpable;
        long pid = syscall(SYS_clone3, ca, sizeof(*ca));
        if (pid == 0)
                return 0;
        int saved = errno;
        if (pid > 0)
                ns_pid1_files_open((pid_t)pid, files);
        ns_owner_unbecome(dumpable);
        return pid < 0 ? -saved : pid;
}

/* A signal from the owner of the sandbox's user namespace, which may send it there
 * without CAP_KILL: for a service that does not hold it. */
static int signal_as(uid_t owner, int pidfd, int sig)
{
        int dumpable = ns_owner_become(owner);
        if (dumpable < 0)
                return dumpable;
        int r = pidfd_send_signal(pidfd, sig, NULL, 0) < 0 ? -errno : 0;
        ns_owner_unbecome(dumpable);
        return r;
}

/* The cold path: the service itself clones the sandbox's PID 1, born into the v2
 * cgroup when there is one (CLONE_INTO_CGROUP; *ret_joined gets its bit), its user
 * namespace owned by `owner`. */
static int spawn_cold(const ns_child_args *args, const cg_join *join, uid_t owner, ns_pid1_files *files,
                      pid_t *ret_pid, int *ret_pidfd, unsigned *ret_joined)
{
        int pidfd = -1;
        struct clone_args ca = {
                .flags = NS_CLONE_FLAGS | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)&pidfd,
                .exit_signal = SIGCHLD,
        };
        if (join->v2_dirfd >= 0) {
                ca.flags |= CLONE_INTO_CGROUP;
                ca.cgroup = (uint64_t)join->v2_dirfd;
        }
        long pid = clone3_as(owner, &ca, files);
        if (pid < 0 && (ca.flags & CLONE_INTO_CGROUP) &&
            (pid == -EINVAL || pid == -E2BIG || pid == -EACCES || pid == -EPERM)) {
                /* a kernel without CLONE_INTO_CGROUP (before 5.7), or a service without
                 * CAP_DAC_OVERRIDE (the owner may not write the cgroup): moved by pid */
                ca.flags &= ~(uint64_t)CLONE_INTO_CGROUP;
                ca.cgroup = 0;
                pid = clone3_as(owner, &ca, files);
        }
        if (pid < 0)
                return (int)pid;
        if (ca.flags & CLONE_INTO_CGROUP)
                *ret_joined |= 1u << join->v2_hier;
        if (pid == 0) {
                ns_program prog;
                ns_child_main(args, &prog); /* cold: never returns */
                _exit(127);
        }
        *ret_pid = (pid_t)pid;
        *ret_pidfd = pidfd;
        return 0;
}

/* A spawned sandbox's process and descriptors become nx's (its stdin is the caller's
 * to take or close). */
static void take_child(struct ns_exec *nx, const ns_child *c)
{
        nx->pid = c->pid;
        nx->pidfd = c->pidfd;
        nx->sync_fd = c->sync_fd;
        nx->report_fd = c->report_fd;
        nx->stdout_fd = c->stdout_fd;
        nx->stderr_fd = c->stderr_fd;
}

/* What the clone and place hooks of ns_start share. */
typedef struct start_ctx {
        struct ns_backend *b;
        hxs_exec *x;
        struct ns_exec *nx;
        unsigned joined;                /* hierarchies PID 1 joins by itself: no move by pid */
        template_kind pool_template;    /* a pre-started Python sandbox's (clone_pooled_warm) */
} start_ctx;

static int clone_cold(void *ctx, const ns_child_args *child, ns_born *ret, hxs_error *err);
static int pool_serves(const struct ns_backend *b, const hxs_request *req);

/* Warm from a template when one may serve the request, else cold: the service clones
 * as an owner uid of the pool. */
static int clone_sandbox(void *ctx, const ns_child_args *child, ns_born *ret, hxs_error *err)
{
        start_ctx *c = ctx;
        struct ns_backend *b = c->b;
        struct ns_exec *nx = c->nx;
        const hxs_request *req = c->x->req;
        int r;
        /* An installed package set runs warm from a template that has imported none of
         * the modules it provides (see pkgcache.c, set_warmth); the installer, cold. */
        if (!child->target_dir && !req->interactive && (!child->pkgs_dir || c->x->pkgs.warm != PKG_WARM_NONE) &&
            template_eligible(b->templates, req)) {
                template_kind kind = template_pick(req, child->pkgs_dir != NULL);
                if (child->pkgs_dir && c->x->pkgs.warm == PKG_WARM_PLAIN)
                        kind = TEMPLATE_PYTHON;
                r = template_spawn(b->templates, kind, child, &ret->pid, &ret->pidfd, &nx->warm_slot,
                                   &nx->owner_uid);
                if (r == 0 && ret->pid > 0) {
                        nx->warm = true;
                        /* as a cold one's, as the owner (a template made it dumpable) */
                        int dumpable = ns_owner_become(nx->owner_uid);
                        if (dumpable >= 0) {
                                ns_pid1_files_open(ret->pid, &ret->files);
                                ns_owner_unbecome(dumpable);
                        }
                        return 0;
                }
                ret->pid = -1;
                ret->pidfd = -1;
        }
        return clone_cold(c, child, ret, err);
}

/* Cold: the service clones as an owner uid of the pool, into the cgroup. */
static int clone_cold(void *ctx, const ns_child_args *child, ns_born *ret, hxs_error *err)
{
        start_ctx *c = ctx;
        struct ns_backend *b = c->b;
        struct ns_exec *nx = c->nx;
        int r;
        if (ns_owner_take(b->owners, &nx->owner_uid) < 0) {
                nx->owner_uid = 0;
                return err_fail(err, HXS_ERR_SETUP, -EBUSY,
                                "every owner uid of the pool (SANDBOX_UID_BASE+%d onwards, %u) is in use by "
                                "this service or another with the same SANDBOX_UID_BASE",
                                NS_OWNER_UID, ns_owner_pool(b->env->cfg));
        }
        cg_join join;
        r = cg_join_open(&nx->cg, &join, err);
        if (r < 0)
                return r;
        ns_child_args cold = *child;
        for (cg_hier h = 0; h < CG_HIER_MAX && cold.n_cg_self < ARRAY_SIZE(cold.cg_self); h++)
                if (join.v1_tasks[h] >= 0) {
                        cold.cg_self[cold.n_cg_self++] = join.v1_tasks[h];
                        c->joined |= 1u << h;
                }
        r = spawn_cold(&cold, &join, nx->owner_uid, &ret->files, &ret->pid, &ret->pidfd, &c->joined);
        cg_join_close(&join);
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "creating the sandbox namespaces: %s", strerror(-r));
        return 0;
}

static int place_sandbox(void *ctx, pid_t pid, hxs_error *err)
{
        start_ctx *c = ctx;
        return cg_exec_attach(&c->nx->cg, pid, c->joined, err);
}

/* What the stdin pipe is watched for: a request's stdin until it is written; an
 * interactive one only while bytes (or a close) are queued, else a writable pipe would
 * wake the loop forever (its hang-up is still reported). */
static uint32_t stdin_events(const hxs_exec *x)
{
        const char *data;
        if (!x->req->interactive || exec_stdin_pending(x, &data) > 0 || x->stdin_closing)
                return EPOLLOUT;
        return 0;
}

/* The timer and every descriptor of the sandbox in the execution's epoll fd. */
static int watch(hxs_exec *x, struct ns_exec *nx, const ns_child *c, hxs_error *err)
{
        int r = 0;
        nx->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (nx->timer_fd < 0 || (r = timerfd_arm_ms(nx->timer_fd, x->budget_ms ? x->budget_ms : (uint64_t)x->req->timeout_s * 1000)) < 0) {
                r = nx->timer_fd < 0 ? -errno : r;
                return err_fail(err, HXS_ERR_SETUP, r, "timerfd: %s", strerror(-r));
        }
        if ((r = epoll_add(x->epfd, c->stdout_fd, EPOLLIN, TAG_STDOUT)) < 0 ||
            (r = epoll_add(x->epfd, c->stderr_fd, EPOLLIN, TAG_STDERR)) < 0 ||
            (r = epoll_add(x->epfd, c->report_fd, EPOLLIN, TAG_REPORT)) < 0 ||
            (r = epoll_add(x->epfd, c->pidfd, EPOLLIN, TAG_PIDFD)) < 0 ||
            (r = epoll_add(x->epfd, nx->timer_fd, EPOLLIN, TAG_TIMER)) < 0 ||
            (c->stdin_fd >= 0 && (r = epoll_add(x->epfd, c->stdin_fd, stdin_events(x), TAG_STDIN)) < 0))
                return err_fail(err, HXS_ERR_SETUP, r, "epoll: %s", strerror(-r));
        return 0;
}

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* An execution of the engine's from its start to its release (ns_background). */
static void count_start(struct ns_exec *nx)
{
        nx->counted = true;
        nx->b->running++;
        nx->b->last_start_ms = mono_ms();
}

static void exec_state_init(struct ns_backend *b, struct ns_exec *nx)
{
        nx->b = b;
        nx->pid = -1;
        nx->pidfd = nx->sync_fd = nx->report_fd = nx->stdout_fd = nx->stderr_fd = nx->stdin_fd = nx->timer_fd = -1;
        nx->code_fd = -1;
        nx->warm_slot = -1;
}

/* The code into a pre-started sandbox's FIFO as the pipe takes it, then closed: the
 * interpreter reads it to its end, as it would the cold path's file. */
static void write_code(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        const hxs_request *req = x->req;
        while (nx->code_off < req->code_len) {
                ssize_t n = write(nx->code_fd, req->code + nx->code_off, req->code_len - nx->code_off);
                if (n > 0) {
                        nx->code_off += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                break; /* EPIPE: the interpreter is gone */
        }
        epoll_close(x->epfd, &nx->code_fd);
}

/* A pre-started sandbox is nx's now (pool_claim), its interpreter waiting on the code
 * FIFO, opened: the clock and the time limit start, then the code goes in. */
static int start_pooled(hxs_exec *x, struct ns_exec *nx, hxs_error *err)
{
        if (x->started.tv_sec == 0 && x->started.tv_nsec == 0)
                clock_gettime(CLOCK_MONOTONIC, &x->started);
        /* most code in one write (best effort: pipe-max-size may be lower) */
        (void)fcntl(nx->code_fd, F_SETPIPE_SZ, 1 << 20);
        ns_child c = { .pid = nx->pid, .pidfd = nx->pidfd, .sync_fd = nx->sync_fd, .report_fd = nx->report_fd,
                       .stdout_fd = nx->stdout_fd, .stderr_fd = nx->stderr_fd, .stdin_fd = -1 };
        int r = watch(x, nx, &c, err);
        if (r == 0 && (r = epoll_add(x->epfd, nx->code_fd, EPOLLOUT, TAG_CODE)) < 0)
                err_fail(err, HXS_ERR_SETUP, r, "epoll: %s", strerror(-r));
        if (r == 0)
                write_code(x);
        return r;
}

static int ns_start(void *state, hxs_exec *x, hxs_error *err)
{
        struct ns_backend *b = state;
        struct ns_exec *nx = x->priv;
        const hxs_config *cfg = b->env->cfg;
        const hxs_request *req = x->req;
        int r;

        exec_state_init(b, nx);
        cg_graveyard_bury(b->env->graveyard, false);
        int kind = pool_serves(b, req);
        if (kind >= 0) {
                void *sb = ns_pool_take(b->pool, (ns_pool_kind)kind, x);
                if (sb) {
                        free(sb); /* its state is nx's now (pool_claim) */
                        count_start(nx);
                        return start_pooled(x, nx, err);
                }
        }
        count_start(nx);

        cg_limits lim = { .memory_bytes = (uint64_t)req->memory_mb << 20,
                          .pids_max = cfg->pids_max, .cpus_milli = cfg->cpus_milli };
        r = cg_exec_create(b->env->cg, &lim, &nx->cg, err);
        if (r < 0)
                return r;
        nx->have_cg = true;

        r = exec_env(req, x->pkgs.path[0] ? NS_PACKAGES_DIR : NULL, &nx->envp);
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "out of memory");
        /* the files in: one sealed memfd the set-up writes out (ns-files.h) */
        _cleanup_close_ int files_fd = -1;
        if (req->n_files > 0 && (files_fd = ns_files_bundle(req)) < 0)
                return err_fail(err, HXS_ERR_SETUP, files_fd, "staging the files: %s", strerror(-files_fd));
        ns_limits limits;
        ns_limits_of(cfg, &limits);
        const ns_python_site python_site = ns_python_site_builtin();
        start_ctx ctx = { .b = b, .x = x, .nx = nx };
        ns_spawn_args sa = {
                .child = {
                        .limits = &limits, .seccomp = &b->seccomp, .mountpoint = b->mountpoint,
                        .interpreter = req->argv ? req->argv[0] : runtime_table[req->language].path,
                        .argv = req->argv,
                        .drivers = req->interactive ? driver_files : NULL,
                        .drivers_bytes = req->interactive ? ns_drivers_bytes(driver_files) : 0,
                        .code_name = runtime_table[req->language].file, .init_fd = b->init_fd,
                        .site = &python_site,
                        .memory_mb = req->memory_mb,
                        .pkgs_dir = x->pkgs.path[0] ? x->pkgs.path : NULL,
                        .wheelhouse_dir = x->wheelhouse_dir[0] ? x->wheelhouse_dir : NULL,
                        .target_dir = x->target_dir[0] ? x->target_dir : NULL,
                        .has_files = files_fd >= 0, .files_fd = files_fd,
                },
                .code = req->code, .code_len = req->code_len, .envp = nx->envp,
                .with_stdin = req->stdin_data != NULL || req->interactive, .uid_base = cfg->uid_base,
                .clone = clone_sandbox, .place = place_sandbox, .ctx = &ctx,
        };

        if (x->started.tv_sec == 0 && x->started.tv_nsec == 0) /* the engine's clock may have started */
                clock_gettime(CLOCK_MONOTONIC, &x->started);
        ns_child c;
        r = ns_spawn(&sa, &c, err);
        if (r == 0 && (r = watch(x, nx, &c, err)) < 0)
                ns_child_abort(&c, err);
        /* go; the sync pipe stays open while the sandbox runs: the child checks it for
         * a hang-up */
        if (r == 0)
                r = ns_child_go(&c, err);
        /* ours from here on, started or not: ns_release kills, reaps and closes */
        take_child(nx, &c);
        nx->stdin_fd = c.stdin_fd;
        return r;
}

static void kill_sandbox(struct ns_exec *nx)
{
        if (nx->pidfd >= 0 && !nx->reaped && pidfd_send_signal(nx->pidfd, SIGKILL, NULL, 0) < 0 &&
            errno == EPERM && nx->owner_uid)
                (void)signal_as(nx->owner_uid, nx->pidfd, SIGKILL);
        if (nx->have_cg)
                cg_exec_kill(&nx->cg);
}

static void ns_kill(hxs_exec *x)
{
        kill_sandbox(x->priv);
}

/* PID 1's status record is in: first in the pipe, or after the program's set-up error
 * (a NUL-terminated record). */
static bool report_has_status(const struct ns_exec *nx, bool *ret_setup_error)
{
        size_t off = 0;
        *ret_setup_error = nx->report_len >= 1 && nx->report[0] == NS_REPORT_ERROR;
        if (*ret_setup_error) {
                const char *nul = memchr(nx->report, '\0', nx->report_len);
                if (!nul)
                        return false;
                off = (size_t)(nul - nx->report) + 1;
        }
        return nx->report_len - off >= 1 + sizeof(int) && nx->report[off] == NS_REPORT_STATUS;
}

/* The program has ended and PID 1, having reported, holds on the sync pipe: the
 * working directory is still there. The files out are taken now, through the root of
 * PID 1 (never a symlink: files-out.c), then PID 1 is let go and the sandbox ends. */
static void take_files(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        if (nx->files_taken)
                return;
        nx->files_taken = true;
        /* through PID 1's root, as the owner of its user namespace: a service without
         * CAP_SYS_PTRACE (the systemd unit's, a container's) may not look there as
         * itself, and would find no files */
        int dumpable = ns_owner_become(nx->owner_uid);
        if (dumpable < 0)
                return;
        int home = ns_home_open(nx->pid);
        ns_owner_unbecome(dumpable);
        if (home >= 0) {
                (void)files_collect(home, x->req, nx->b->env->cfg, &x->result);
                close(home);
        }
}

static void take_files_and_release(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        bool setup_error;
        if (nx->sync_fd < 0 || !report_has_status(nx, &setup_error))
                return;
        if (!setup_error) /* else nothing ran: nothing to take */
                take_files(x);
        close_fd(&nx->sync_fd);
}

/* The sandbox ends the program (its output limit, or still running after the time
 * limit's SIGTERM): every process is stopped where it is, the files are taken as they
 * are then through PID 1 (frozen with the rest), and the whole sandbox is killed.
 * Without a v2 hierarchy to freeze (pure v1) there are no files. */
static void stop_sandbox(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        bool setup_error;
        if (!nx->reaped && nx->sync_fd >= 0 && nx->have_cg && !nx->files_taken &&
            !(report_has_status(nx, &setup_error) && setup_error) && cg_exec_freeze(&nx->cg) == 0)
                take_files(x);
        ns_kill(x);
}

/* Reads what the report pipe holds: a status or a set-up error. */
static void read_report(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        for (;;) {
                size_t room = sizeof(nx->report) - 1 - nx->report_len;
                if (room == 0) {
                        char sink[256];
                        ssize_t n = read(nx->report_fd, sink, sizeof(sink));
                        if (n > 0)
                                continue;
                        if (n == 0)
                                break;
                        return;
                }
                ssize_t n = read(nx->report_fd, nx->report + nx->report_len, room);
                if (n > 0) {
                        nx->report_len += (size_t)n;
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                break; /* EOF or error: PID 1 and the program have both let go */
        }
        epoll_close(x->epfd, &nx->report_fd);
}

static void read_output(hxs_exec *x, int *fd, int stream)
{
        /* bounded per call (16 reads, 1 MiB) so one flooding sandbox cannot starve the loop */
        size_t left = 1u << 20;
        for (int i = 0; i < 16 && left > 0; i++) {
                bool over;
                ssize_t n = exec_output_read(x, stream, *fd, left, &over);
                if (over)
                        stop_sandbox(x); /* past MAX_STREAM_BYTES */
                if (n > 0) {
                        left -= (size_t)n;
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                epoll_close(x->epfd, fd);
                return;
        }
}

/* An interactive program's stdin: the queue written as the pipe takes it; closed once
 * drained after exec_stdin_close, or when the program no longer reads it. */
static void write_stdin_queue(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        const char *data;
        size_t len;
        while ((len = exec_stdin_pending(x, &data)) > 0) {
                ssize_t n = write(nx->stdin_fd, data, len);
                if (n > 0) {
                        exec_stdin_consumed(x, (size_t)n);
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = TAG_STDIN };
                        (void)epoll_ctl(x->epfd, EPOLL_CTL_MOD, nx->stdin_fd, &ev);
                        return;
                }
                goto gone; /* EPIPE: the program closed its stdin */
        }
        if (!x->stdin_closing) {
                struct epoll_event ev = { .events = 0, .data.u64 = TAG_STDIN };
                (void)epoll_ctl(x->epfd, EPOLL_CTL_MOD, nx->stdin_fd, &ev);
                return;
        }
gone:
        epoll_close(x->epfd, &nx->stdin_fd);
        exec_stdin_gone(x);
}

static void ns_stdin_more(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        if (nx->stdin_fd >= 0)
                write_stdin_queue(x);
        else
                exec_stdin_gone(x);
}

static void write_stdin(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        const hxs_request *req = x->req;
        if (req->interactive) {
                write_stdin_queue(x);
                return;
        }
        while (nx->stdin_off < req->stdin_len) {
                ssize_t n = write(nx->stdin_fd, req->stdin_data + nx->stdin_off, req->stdin_len - nx->stdin_off);
                if (n > 0) {
                        nx->stdin_off += (size_t)n;
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                break; /* EPIPE: the program does not read stdin */
        }
        epoll_close(x->epfd, &nx->stdin_fd);
}

static void finish(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        hxs_result *res = &x->result;
        res->execution_time_ms = (uint64_t)((now.tv_sec - x->started.tv_sec) * 1000 +
                                            (now.tv_nsec - x->started.tv_nsec) / 1000000);

        /* parse the report: an 'S' status, or an 'E' set-up error */
        int status = 0;
        bool have_status = false;
        if (nx->report_len >= 1 + sizeof(int) && nx->report[0] == NS_REPORT_STATUS) {
                memcpy(&status, nx->report + 1, sizeof(int));
                have_status = true;
        } else if (nx->report_len >= 1 && nx->report[0] == NS_REPORT_ERROR && !x->timed_out && !x->killed) {
                nx->report[nx->report_len] = '\0';
                x->setup_failed = true;
                err_fail(&x->setup_error, HXS_ERR_SETUP, -EIO, "setting up the sandbox: %s", nx->report + 1);
        }
        bool oom = false;
        if (nx->have_cg) {
                res->memory_used_mb = (cg_exec_peak_memory(&nx->cg) + (1 << 20) - 1) >> 20;
                bool sigkilled = !have_status || (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
                oom = sigkilled && cg_exec_oom_kills(&nx->cg) > 0;
        }
        hxs_result_set_status(res, status, have_status, x->timed_out, oom && !x->timed_out);
        res->warm = nx->warm;
        res->pooled = nx->pooled;
        res->packages = x->packages;
        exec_result_output(x);
        x->done = true;
        /* the namespace is gone; make sure the cgroup is too. A PID 1 answered on its
         * way out takes the rest of the sandbox with it (its pid namespace); its cgroup
         * is emptied with the remains, after the reply (waiting for it to empty here
         * would wait for PID 1's end). */
        if (nx->ended)
                (void)pidfd_send_signal(nx->pidfd, SIGKILL, NULL, 0);
        else
                ns_kill(x);
        epoll_close(x->epfd, &nx->timer_fd);
}

/* The program has ended and said so: its status is in, the files out are taken and
 * PID 1 let go (it exits by itself, tearing down the sandbox's namespaces), and its
 * output pipes are closed, so nothing more can come. The answer need not wait for
 * PID 1's end; its reaping goes with the rest of the sandbox (ns_release). */
static bool answer_complete(const struct ns_exec *nx)
{
        bool setup_error;
        return !nx->reaped && nx->sync_fd < 0 && nx->stdout_fd < 0 && nx->stderr_fd < 0 &&
               report_has_status(nx, &setup_error) && !setup_error;
}

static int ns_process(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        struct epoll_event evs[8];
        int n = epoll_wait(x->epfd, evs, ARRAY_SIZE(evs), 0);
        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        for (int i = 0; i < n && !x->done; i++) {
                switch (evs[i].data.u64) {
                case TAG_STDOUT:
                        read_output(x, &nx->stdout_fd, 1);
                        break;
                case TAG_STDERR:
                        read_output(x, &nx->stderr_fd, 2);
                        break;
                case TAG_STDIN:
                        if (x->req->interactive && (evs[i].events & (EPOLLERR | EPOLLHUP))) {
                                /* the program closed its stdin: nothing queued can go */
                                epoll_close(x->epfd, &nx->stdin_fd);
                                exec_stdin_gone(x);
                        } else {
                                write_stdin(x);
                        }
                        break;
                case TAG_CODE:
                        write_code(x);
                        break;
                case TAG_REPORT:
                        read_report(x);
                        take_files_and_release(x);
                        break;
                case TAG_PIDFD: {
                        siginfo_t si = { 0 };
                        if (waitid((idtype_t)P_PIDFD, (id_t)nx->pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid) {
                                nx->reaped = true;
                                epoll_close(x->epfd, &nx->pidfd);
                        } else if (errno == ECHILD) {
                                nx->reaped = true;
                                epoll_close(x->epfd, &nx->pidfd);
                        }
                        break;
                }
                case TAG_TIMER: {
                        uint64_t ticks;
                        (void)!read(nx->timer_fd, &ticks, sizeof(ticks));
                        if (!nx->reaped && !nx->term_sent && !x->output_limited) {
                                /* time is up: a moment to flush, then the whole sandbox goes */
                                nx->term_sent = true;
                                x->timed_out = true;
                                ns_term_program(nx->pid);
                                timerfd_arm_ms(nx->timer_fd, TERM_GRACE_MS);
                        } else if (!nx->reaped || nx->report_fd >= 0) {
                                /* the whole sandbox goes; an output-limit kill already under
                                 * way stays what it is */
                                x->timed_out = x->timed_out || (!nx->reaped && !x->output_limited);
                                stop_sandbox(x);
                                if (x->timed_out)
                                        timerfd_arm_ms(nx->timer_fd, DRAIN_GRACE_MS);
                        } else {
                                nx->drain_expired = true;
                        }
                        break;
                }
                default:
                        break;
                }
        }
        if (x->done)
                return 0;
        if (answer_complete(nx)) {
                nx->ended = true;
                finish(x);
                return 0;
        }
        if (nx->reaped && nx->report_fd < 0) {
                bool pipes_closed = nx->stdout_fd < 0 && nx->stderr_fd < 0;
                if (pipes_closed || nx->drain_expired) {
                        finish(x);
                } else if (!nx->draining) {
                        nx->draining = true;
                        timerfd_arm_ms(nx->timer_fd, DRAIN_GRACE_MS);
                }
        }
        return 0;
}

/* Kills, reaps and closes everything of the sandbox; epfd < 0: it is in none. What is
 * left of a sandbox that ended by itself (PID 1 reaped, or answered and on its way out:
 * finish killed it) goes after the reply (remains.h), warm or cold: a warm slot serves
 * again at once, its template having no part in the teardown of a PID 1 that is the
 * engine's child (CLONE_PARENT) and holds the owner uid for itself (ns_owner_hold). */
static void release_sandbox(struct ns_exec *nx, int epfd)
{
        struct ns_backend *b = nx->b;
        bool later = nx->reaped || nx->ended;
        int pidfd = -1;
        if (later && !nx->reaped && nx->pidfd >= 0) {
                if (epfd >= 0)
                        (void)epoll_ctl(epfd, EPOLL_CTL_DEL, nx->pidfd, NULL);
                pidfd = TAKE_FD(nx->pidfd);
        }
        if (!nx->reaped && nx->pidfd >= 0) {
                kill_sandbox(nx);
                siginfo_t si;
                /* PID 1 was SIGKILLed: reaping it is prompt */
                (void)waitid((idtype_t)P_PIDFD, (id_t)nx->pidfd, &si, WEXITED);
                nx->reaped = true;
        }
        epoll_close(epfd, &nx->pidfd);
        epoll_close(epfd, &nx->stdout_fd);
        epoll_close(epfd, &nx->stderr_fd);
        epoll_close(epfd, &nx->stdin_fd);
        epoll_close(epfd, &nx->report_fd);
        epoll_close(epfd, &nx->timer_fd);
        epoll_close(epfd, &nx->code_fd);
        close_fd(&nx->sync_fd);
        strv_free(nx->envp);
        nx->envp = NULL;
        if (nx->counted) {
                nx->b->running--;
                nx->counted = false;
        }
        if (later) {
                ns_remains_add(&b->remains, b->env->graveyard, b->owners, pidfd, &nx->cg, nx->have_cg,
                               nx->owner_uid);
                nx->have_cg = false;
                nx->owner_uid = 0;
                if (nx->warm_slot >= 0)
                        templates_release(b->templates, nx->warm_slot);
                nx->warm_slot = -1;
                return;
        }
        if (nx->have_cg) {
                cg_exec_kill(&nx->cg);
                if (cg_exec_remove(&nx->cg) < 0)
                        cg_graveyard_add(b->env->graveyard, &nx->cg);
                nx->have_cg = false;
        }
        /* the owner uid goes back once nothing of the sandbox is left; a warm slot
         * serves another */
        if (nx->warm_slot >= 0)
                templates_release(b->templates, nx->warm_slot);
        nx->warm_slot = -1;
        if (nx->owner_uid) {
                ns_owner_put(b->owners, nx->owner_uid);
                nx->owner_uid = 0;
        }
}

static void ns_release(hxs_exec *x)
{
        struct ns_exec *nx = x->priv;
        release_sandbox(nx, x->epfd);
}

/* A refill is a clone on the service's loop and a sandbox building its root on the
 * same cores: while an execution that started less than this ago runs, it would slow
 * that execution and its reply, so the refill waits for the executions to end (a long
 * one holds it up no longer than this). */
#define REFILL_QUIET_MS 100
/* ... and a language that still has one ready waits until no execution has started for
 * this long: requests that come back to back (a client's loop) take the ready ones
 * while a refill would compete with them for the cores and the loop. */
#ifndef REFILL_PAUSE_MS
#define REFILL_PAUSE_MS 5
#endif

/* Once results are out (hxs_engine_background): what is left of ended sandboxes is
 * released, then the pools are refilled when no short execution is still running,
 * one sandbox per call: a clone holds up the caller's loop for about a millisecond,
 * and requests that came meanwhile go first. */
static bool ns_background(void *state)
{
        struct ns_backend *b = state;
        bool more = ns_remains_sweep(&b->remains, b->env->graveyard, b->owners);
        uint64_t since = mono_ms() - b->last_start_ms;
        if (b->running == 0 || since >= REFILL_QUIET_MS)
                more = ns_pool_fill(b->pool, 1, since < REFILL_PAUSE_MS) || more;
        return more;
}

static void ns_memory_room(void *state, uint64_t mb)
{
        struct ns_backend *b = state;
        ns_pool_room(b->pool, mb);
}

/* ---- pre-started sandboxes (pool.h) ------------------------------------------------ */

/* A pre-started Python sandbox is cloned by a template of its kind, as a warm one is,
 * and holds no slot: the template's part ends once PID 1 has exec'd its init. */
static int clone_pooled_warm(void *ctx, const ns_child_args *child, ns_born *ret, hxs_error *err)
{
        start_ctx *c = ctx;
        struct ns_backend *b = c->b;
        struct ns_exec *nx = c->nx;
        int slot = -1;
        int r = template_spawn(b->templates, c->pool_template, child, &ret->pid, &ret->pidfd, &slot,
                               &nx->owner_uid);
        if (r == 0 && ret->pid <= 0)
                r = -EIO;
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "no warm Python template to start from: %s", strerror(-r));
        templates_release(b->templates, slot);
        int dumpable = ns_owner_become(nx->owner_uid);
        if (dumpable >= 0) {
                ns_pid1_files_open(ret->pid, &ret->files);
                ns_owner_unbecome(dumpable);
        }
        return 0;
}

/* Which kind of pre-started sandbox may serve the request (pool.h; Python: what a warm
 * template would run, and the template it would pick, see template.h), or -1. */
static int pool_serves(const struct ns_backend *b, const hxs_request *req)
{
        if (!ns_pool_eligible(b->pool, req))
                return -1;
        switch (req->language) {
        case HXS_LANG_JAVASCRIPT:
                return NS_POOL_JAVASCRIPT;
        case HXS_LANG_BASH:
                return NS_POOL_BASH;
        default:
                if (!template_eligible(b->templates, req))
                        return -1;
                return template_pick(req, false) == TEMPLATE_PYTHON_SCI ? NS_POOL_PYTHON_SCI : NS_POOL_PYTHON;
        }
}

/* A sandbox in every respect as a request's would be (ns_start's cold path: its own
 * cgroup, owner uid, namespaces, tmpfs root and home; Python from a warm template), for
 * no request yet: the environment of a request without env_vars, stdin /dev/null, and
 * instead of the code a FIFO its interpreter waits on. It has never seen a request, and
 * serves one. -EAGAIN: Python's templates are not ready (yet). */
static int pool_start(void *ctx, ns_pool_kind kind, uint32_t memory_mb, void **ret, hxs_error *err)
{
        struct ns_backend *b = ctx;
        const hxs_config *cfg = b->env->cfg;
        hxs_language lang = ns_pool_language(kind);
        bool warm = lang == HXS_LANG_PYTHON;
        template_kind tk = kind == NS_POOL_PYTHON_SCI ? TEMPLATE_PYTHON_SCI : TEMPLATE_PYTHON;
        if (warm && !template_ready(b->templates, tk))
                return err_fail(err, HXS_ERR_SETUP, -EAGAIN, "the warm Python templates are not ready");
        struct ns_exec *nx = calloc(1, sizeof(*nx));
        if (!nx)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        exec_state_init(b, nx);
        cg_limits lim = { .memory_bytes = (uint64_t)memory_mb << 20, .pids_max = cfg->pids_max,
                          .cpus_milli = cfg->cpus_milli };
        int r = cg_exec_create(b->env->cg, &lim, &nx->cg, err);
        nx->have_cg = r == 0;
        hxs_request none = { .language = lang, .memory_mb = memory_mb };
        if (r == 0 && (r = exec_env(&none, NULL, &nx->envp)) < 0)
                err_fail(err, HXS_ERR_SETUP, r, "out of memory");
        ns_limits limits;
        ns_limits_of(cfg, &limits);
        start_ctx sctx = { .b = b, .nx = nx, .pool_template = tk };
        ns_spawn_args sa = {
                .child = {
                        .limits = &limits, .seccomp = &b->seccomp, .mountpoint = b->mountpoint,
                        .interpreter = runtime_table[lang].path, .code_name = runtime_table[lang].file,
                        .init_fd = b->init_fd, .memory_mb = memory_mb, .files_fd = -1, .code_fifo = true,
                },
                .code = "", .code_len = 0, .envp = nx->envp, .uid_base = cfg->uid_base,
                .clone = warm ? clone_pooled_warm : clone_cold, .place = place_sandbox, .ctx = &sctx,
        };
        ns_child c = { .pid = -1, .pidfd = -1, .sync_fd = -1, .report_fd = -1, .stdout_fd = -1,
                       .stderr_fd = -1, .stdin_fd = -1 };
        if (r == 0 && (r = ns_spawn(&sa, &c, err)) == 0)
                r = ns_child_go(&c, err);
        take_child(nx, &c);
        close_fd(&c.stdin_fd);
        if (r < 0) {
                release_sandbox(nx, -1);
                free(nx);
                return r;
        }
        *ret = nx;
        return 0;
}

static int host_ready(struct ns_backend *b, bool distributions, hxs_error *err);

/* Ready once its interpreter has opened the FIFO (it waits in that open); a sandbox
 * whose PID 1 has ended, or that wrote anything before it had code, is not used. Nor
 * is one while the host could not start a cold sandbox (STATE_DIR, the root, the
 * cgroups as /health checks them): the request fails as a cold one would, and says
 * why. */
static int pool_claim(void *ctx, void *sb, void *arg)
{
        struct ns_backend *b = ctx;
        struct ns_exec *p = sb;
        hxs_exec *x = arg;
        hxs_error err = { 0 };
        if (host_ready(b, false, &err) < 0)
                return 0;
        struct pollfd pf[3] = { { .fd = p->pidfd, .events = POLLIN }, { .fd = p->stdout_fd, .events = POLLIN },
                                { .fd = p->stderr_fd, .events = POLLIN } };
        if (poll(pf, 3, 0) != 0)
                return -ESRCH;
        /* as the owner of its user namespace, who may reach PID 1's root without
         * CAP_SYS_PTRACE (a warm PID 1 is not the service's own clone) */
        int dumpable = ns_owner_become(p->owner_uid);
        if (dumpable < 0)
                return dumpable;
        int fd = ns_code_fifo_open(p->pid, runtime_table[x->req->language].file);
        ns_owner_unbecome(dumpable);
        if (fd == -ENXIO)
                return 0;
        if (fd < 0)
                return fd;
        struct ns_exec *nx = x->priv;
        *nx = *p;
        nx->code_fd = fd;
        nx->pooled = true;
        return 1;
}

static bool pool_alive(void *ctx, void *sb)
{
        (void)ctx;
        struct ns_exec *p = sb;
        struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };
        return poll(&pf, 1, 0) == 0;
}

static void pool_destroy(void *ctx, void *sb)
{
        (void)ctx;
        release_sandbox(sb, -1);
        free(sb);
}

static const ns_pool_ops pool_ops = { .start = pool_start, .claim = pool_claim, .alive = pool_alive,
                                      .destroy = pool_destroy };

/* The sandbox's root (an unprivileged host uid) must be able to walk to the mount
 * point: every directory on the way needs search permission for others. */
static int check_searchable(const char *path, hxs_error *err)
{
        char p[300];
        snprintf(p, sizeof(p), "%s", path);
        for (char *slash = p + strlen(p); slash > p; slash = strrchr(p, '/')) {
                struct stat st;
                if (stat(p, &st) < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, -errno, "STATE_DIR: %s: %s", p, strerror(errno));
                if (!(st.st_mode & S_IXOTH))
                        return err_fail_field(err, HXS_ERR_UNSUPPORTED, -EACCES, "STATE_DIR",
                                              "STATE_DIR: %s (mode %04o) is not searchable by other users; the sandbox's unprivileged root must reach %s",
                                              p, (unsigned)(st.st_mode & 07777), path);
                *slash = '\0';
        }
        return 0;
}

static int ns_init(const backend_env *env, void **ret_state, hxs_error *err)
{
        struct ns_backend *b = calloc(1, sizeof(*b));
        if (!b)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        *ret_state = b;
        b->env = env;
        b->init_fd = -1;
        const hxs_config *cfg = env->cfg;
        int r;
        if ((r = ns_owners_new(cfg, NULL, &b->owners, err)) < 0)
                return r;
        b->init_fd = ns_init_memfd();
        if (b->init_fd < 0) {
                r = b->init_fd;
                return err_fail(err, HXS_ERR_UNSUPPORTED, r, "the sandbox's init: cannot make its memfd: %s",
                                strerror(-r));
        }
        r = sandbox_filter_build(&b->seccomp, err);
        if (r < 0)
                return r;
        /* The mount point for new roots: one shared empty directory, used only inside
         * each sandbox's private mount namespace. */
        if (mkdir(cfg->state_dir, 0711) < 0 && errno != EEXIST)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "STATE_DIR",
                                      "STATE_DIR: %s: %s", cfg->state_dir, strerror(errno));
        snprintf(b->mountpoint, sizeof(b->mountpoint), "%s/root", cfg->state_dir);
        if (mkdir(b->mountpoint, 0755) < 0 && errno != EEXIST)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "STATE_DIR",
                                      "STATE_DIR: creating %s: %s", b->mountpoint, strerror(errno));
        r = check_searchable(b->mountpoint, err);
        if (r < 0)
                return r;
        if (cfg->warm && cfg->rootfs[0]) {
                /* a template is the host's interpreter: it would not be the root's */
                snprintf(b->template_error, sizeof(b->template_error),
                         "SANDBOX_ROOTFS is set: warm templates run the host's Python, so every "
                         "execution starts cold from the configured root");
        } else if (cfg->warm) {
                hxs_error terr = { 0 };
                if (templates_new(cfg, env->cg, b->init_fd, b->owners, &b->templates, &terr) < 0)
                        snprintf(b->template_error, sizeof(b->template_error), "%s", terr.message);
        }
        /* pre-started JavaScript and Bash sandboxes: cold ones, their interpreter the
         * root's (the configured one too) */
        b->pool = ns_pool_new(cfg, &pool_ops, b);
        (void)ns_pool_fill(b->pool, UINT_MAX, false);
        return 0;
}

static void ns_fini(void *state)
{
        struct ns_backend *b = state;
        if (!b)
                return;
        ns_pool_free(b->pool);
        b->pool = NULL;
        ns_remains_flush(&b->remains, b->env->graveyard, b->owners);
        templates_free(b->templates);
        b->templates = NULL;
        sandbox_filter_free(&b->seccomp);
        /* after the templates, which hold some */
        ns_owners_free(b->owners);
        b->owners = NULL;
        close_fd(&b->init_fd);
        free(b);
}

/* What /health checks (ns_check); the Python distributions only when asked (a
 * readdir: a pre-started sandbox's hand-off does without). */
static int host_ready(struct ns_backend *b, bool distributions, hxs_error *err)
{
        const hxs_config *cfg = b->env->cfg;
        const cg_layout *cgl = b->env->cg;
        if (access(b->mountpoint, F_OK) < 0)
                return err_fail(err, HXS_ERR_UNSUPPORTED, -errno, "mount point %s is gone", b->mountpoint);
        int r = check_searchable(b->mountpoint, err);
        if (r < 0)
                return r;
        static const char *const runtimes_needed[] = { "/usr", "/usr/bin/python3", "/usr/bin/node", "/usr/bin/bash" };
        for (size_t i = 0; i < ARRAY_SIZE(runtimes_needed); i++) {
                char p[600];
                snprintf(p, sizeof(p), "%s%s", cfg->rootfs, runtimes_needed[i]);
                if (access(p, F_OK) < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, -errno, "the sandbox root lacks %s: %s", p,
                                        strerror(errno));
        }
        /* the Python distributions the runtime manifest promises (a readdir of the
         * root's dist-packages; /health asks at most once a second) */
        if (distributions && (r = runtime_check_distributions(b->env->runtimes, cfg->rootfs, err)) < 0)
                return r;
        for (cg_hier h = 0; h < CG_HIER_MAX; h++)
                if (cgl->have[h] && access(cgl->base[h], W_OK) < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, -errno, "cgroup %s is not writable",
                                        cgl->base[h]);
        return 0;
}

static int ns_check(void *state, hxs_error *err)
{
        return host_ready(state, true, err);
}

static void ns_stats(void *state, hxs_engine_stats *st)
{
        struct ns_backend *b = state;
        st->warm_enabled = b->templates != NULL;
        templates_state(b->templates, &st->templates_ready, &st->templates_total, &st->template_restarts);
        snprintf(st->warm_error, sizeof(st->warm_error), "%s", b->template_error);
        ns_pool_stats(b->pool, st);
}

const backend_ops ns_backend = {
        .name = "namespaces",
        .features = BACKEND_INSTALLS_PACKAGES | BACKEND_WARM | BACKEND_FILES | BACKEND_INTERACTIVE,
        .exec_size = sizeof(struct ns_exec),
        .usable = ns_usable,
        .probe = ns_probe,
        .init = ns_init,
        .fini = ns_fini,
        .check = ns_check,
        .stats = ns_stats,
        .start = ns_start,
        .process = ns_process,
        .kill = ns_kill,
        .release = ns_release,
        .stdin_more = ns_stdin_more,
        .background = ns_background,
        .memory_room = ns_memory_room,
};
