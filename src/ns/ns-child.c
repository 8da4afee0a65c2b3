/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the sandbox. The cloned child is PID 1 of a new pid namespace and root of a
 * new user namespace (mapped to an unprivileged host uid). ns_child_main is the list
 * of steps, in the order the security argument needs; the root filesystem is a table
 * of steps run by one loop (ns-root.c). It pivots into the root, then forks the
 * program under an empty bounding set, no_new_privs and the seccomp filter, which both
 * inherit: the program drops to the "sandbox" user with no capabilities (the steps of
 * jail.h), and execs the interpreter. PID 1 then becomes the init (ns-init.h): with no
 * capabilities, no_new_privs and the same filter it execs a small static program that reaps, and when the program exits reports the
 * status and exits, which makes the kernel kill every other process of the namespace
 * (daemons included). So PID 1 holds
 * nothing of the process it was cloned from (the service, or a template).
 *
 * Everything here runs between clone and exec in a copy of the supervisor: no locks,
 * no logging; failures are written to the report pipe and end the child.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/macro.h"
#include "ns/ns-files.h"
#include "ns/ns-init.h"
#include "core/jail.h"
#include "ns/ns-report.h"
#include "ns/ns-root.h"
#include "ns/ns.h"

_Static_assert(NS_INIT_REPORT_STATUS == NS_REPORT_STATUS, "the init reports as PID 1 does");

static void loopback_up(void)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                ns_child_die("socket for lo");
        struct ifreq ifr = { 0 };
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                ns_child_die("reading lo flags");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                ns_child_die("bringing lo up");
        close(s);
}

/* ---- dropping privileges (the steps are jail.c's) ----------------------------------- */

/* A jail step's failure, named, ends the child. */
static void step(jail_step which, int r)
{
        if (r < 0) {
                errno = -r;
                ns_child_die("%s", jail_step_text(which));
        }
}

/* The program process: stdio, limits, the sandbox user, no capabilities; then exec
 * (cold) or return (warm). It was forked under PID 1's empty bounding set,
 * no_new_privs and seccomp filter (lock_down), which fork keeps. */
static void run_program(const ns_child_args *a, const payload_view *pl, ns_program *ret)
{
        const ns_limits *lim = a->limits;

        /* stdio: the supervisor's pipes; stdin /dev/null unless the request has one */
        int fds[3] = { a->stdin_fd, a->stdout_fd, a->stderr_fd };
        if (fds[0] < 0 && (fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
                ns_child_die("opening /dev/null");
        step(JAIL_FDS, jail_arrange_fds(fds, 3, 3));
        /* every other descriptor closes at exec; the report pipe stays open until then */
        step(JAIL_CLOSE, jail_close_from(3, true));

        /* PID 1 is shielded from the OOM killer; the program must not be */
        (void)write_file("/proc/self/oom_score_adj", "0");

        const jail_rlimit limits[] = {
                { RLIMIT_NOFILE, lim->nofile }, { RLIMIT_FSIZE, (rlim_t)lim->tmpfs_mb << 20 },
                { RLIMIT_CORE, 0 }, { RLIMIT_MEMLOCK, 64 << 10 },
        };
        step(JAIL_RLIMITS, jail_rlimits(limits, ARRAY_SIZE(limits)));

        if (chdir(NS_SANDBOX_HOME) < 0)
                ns_child_die("chdir %s", NS_SANDBOX_HOME);
        step(JAIL_SETID, jail_become(NS_SANDBOX_UID, NS_SANDBOX_UID, false));
        step(JAIL_CAPS, jail_set_caps(0));
        /* the uid change made it undumpable (its /proc files root's): undo that, after it */
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
                ns_child_die("dumpable");
        snprintf(ret->code_path, sizeof(ret->code_path), "/code/%s", a->code_name);
        ret->env = pl->env;
        if (a->warm) {
                /* no exec will close them: the program keeps stdio and nothing else
                 * (the report pipe would let it forge its own result) */
                step(JAIL_CLOSE, jail_close_from(3, false));
                return;
        }
        char *argv[] = { (char *)a->interpreter, ret->code_path, NULL };
        execve(a->interpreter, a->argv ? a->argv : argv, pl->env);
        ns_child_die("executing %s", a->interpreter);
}

/* ---- the user namespace's own limits ------------------------------------------------ */

/* The counters the kernel keeps per user and charges at every level of the user
 * namespace chain: in the sandbox's own namespace they are capped here (PID 1 has
 * CAP_SYS_RESOURCE there until it drops it), so that one sandbox cannot take all of
 * its owner's share either. The filter denies fanotify_init and every way to a new
 * namespace, so those get 0. Opened before the root is built (the sandbox's /proc is
 * not the place to write them), written once the last namespace PID 1 makes is there. */
static const struct {
        const char *name;
        size_t offset;          /* a uint32_t of ns_limits; SIZE_MAX: 0 */
} userns_counters[] = {
        { "max_inotify_instances", offsetof(ns_limits, inotify_instances) },
        { "max_inotify_watches", offsetof(ns_limits, inotify_watches) },
        { "max_fanotify_groups", SIZE_MAX },
        { "max_fanotify_marks", SIZE_MAX },
        { "max_user_namespaces", SIZE_MAX },
        { "max_pid_namespaces", SIZE_MAX },
        { "max_net_namespaces", SIZE_MAX },
        { "max_mnt_namespaces", SIZE_MAX },
        { "max_ipc_namespaces", SIZE_MAX },
        { "max_uts_namespaces", SIZE_MAX },
        { "max_cgroup_namespaces", SIZE_MAX },
        { "max_time_namespaces", SIZE_MAX },
};

/* fds[i] < 0 where the kernel has no such counter, or where /proc/sys is read-only
 * (a container runtime mounts it so; the owner uid of the namespace is the sandbox's
 * own all the same). Nothing to do when the limits are not configured (the microVM's
 * agent: a guest kernel of its own). */
static void open_userns_counters(const ns_limits *lim, int fds[ARRAY_SIZE(userns_counters)])
{
        for (size_t i = 0; i < ARRAY_SIZE(userns_counters); i++) {
                char p[80];
                fds[i] = -1;
                if (!lim->inotify_instances)
                        continue;
                snprintf(p, sizeof(p), "/proc/sys/user/%s", userns_counters[i].name);
                fds[i] = open(p, O_WRONLY | O_CLOEXEC);
                if (fds[i] < 0 && errno != ENOENT && errno != EROFS)
                        ns_child_die("opening %s", p);
        }
}

static void write_userns_counters(const ns_limits *lim, int fds[ARRAY_SIZE(userns_counters)])
{
        for (size_t i = 0; i < ARRAY_SIZE(userns_counters); i++) {
                if (fds[i] < 0)
                        continue;
                uint32_t v = 0;
                if (userns_counters[i].offset != SIZE_MAX)
                        memcpy(&v, (const char *)lim + userns_counters[i].offset, sizeof(v));
                char num[16];
                int len = snprintf(num, sizeof(num), "%u", v);
                if (write(fds[i], num, (size_t)len) != len)
                        ns_child_die("setting the user namespace's %s", userns_counters[i].name);
                close(fds[i]);
        }
}

/* ---- PID 1 ------------------------------------------------------------------------ */

/* PID 1 without a static init to exec (the microVM's agent passes none): the same
 * loop, in this copy of the agent. */
static _Noreturn void init_loop(pid_t program, int hold_fd)
{
        /* Only our own signal handling matters: the kernel already ignores signals from
         * inside the namespace that PID 1 has no handler for. It holds on the sync pipe
         * as the static init does: the supervisor takes the files out meanwhile. */
        ns_init_reap(program, ns_report_fd(), hold_fd);
}

/* Becomes the static init: the report pipe at NS_INIT_REPORT_FD, nothing else open,
 * no environment. Failing here fails the sandbox (it must not run on as a copy). */
static _Noreturn void exec_init(int init_fd, int hold_fd, pid_t program)
{
        /* out of the way first, so that no dup2 below clobbers another */
        int rep = fcntl(ns_report_fd(), F_DUPFD_CLOEXEC, 10), ini = fcntl(init_fd, F_DUPFD_CLOEXEC, 10);
        int hold = fcntl(hold_fd, F_DUPFD_CLOEXEC, 10);
        if (rep < 0 || ini < 0 || hold < 0 || dup2(rep, NS_INIT_REPORT_FD) < 0 || /* dup2: not CLOEXEC */
            dup3(ini, NS_INIT_REPORT_FD + 1, O_CLOEXEC) < 0 || dup2(hold, NS_INIT_HOLD_FD) < 0)
                ns_child_die("setting up the init's descriptors");
        ns_report_to(NS_INIT_REPORT_FD);
        init_fd = NS_INIT_REPORT_FD + 1;
        if (jail_close_from(NS_INIT_HOLD_FD + 1, false) < 0)
                ns_child_die("closing the init's other descriptors");
        char pid_arg[16], fd_arg[16], hold_arg[16];
        snprintf(pid_arg, sizeof(pid_arg), "%d", (int)program);
        snprintf(fd_arg, sizeof(fd_arg), "%d", NS_INIT_REPORT_FD);
        snprintf(hold_arg, sizeof(hold_arg), "%d", NS_INIT_HOLD_FD);
        char *argv[] = { "hxs-init", fd_arg, pid_arg, hold_arg, NULL };
        char *envp[] = { NULL };
        syscall(SYS_execveat, init_fd, "", argv, envp, AT_EMPTY_PATH);
        ns_child_die("executing the sandbox's init");
}

void ns_reset_signal_dispositions(void)
{
        /* the kernel's struct sigaction: handler, flags, restorer, mask */
        struct {
                void (*handler)(int);
                unsigned long flags;
                void (*restorer)(void);
                uint64_t mask;
        } dfl = { SIG_DFL, 0, NULL, 0 };
        for (int sig = 1; sig < _NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void)syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
}

/* ---- ns_child_main's steps ---------------------------------------------------------- */

/* The child is a copy of the supervisor, with all of its descriptors: listening
 * sockets, other sandboxes' pipes. Close everything but our own, now: CLOEXEC only
 * helps at exec, and PID 1 never execs. Then into the sandbox's v1 cgroups, before
 * anything else: "0" is this process (one thread), allowed by the engine's
 * credentials on the descriptor. */
static void keep_own_descriptors(const ns_child_args *a)
{
        int keep[8 + ARRAY_SIZE(a->cg_self)] = { a->sync_fd, a->report_fd, a->stdin_fd, a->stdout_fd,
                                                 a->stderr_fd, a->payload_fd, a->init_fd,
                                                 a->has_files ? a->files_fd : -1 };
        unsigned n_cg = a->n_cg_self < ARRAY_SIZE(a->cg_self) ? a->n_cg_self : ARRAY_SIZE(a->cg_self);
        for (unsigned i = 0; i < n_cg; i++)
                keep[8 + i] = a->cg_self[i];
        ns_report_to(a->report_fd);
        step(JAIL_CLOSE, jail_close_all_except(keep, 8 + n_cg));
        step(JAIL_CGROUP, jail_join_v1(a->cg_self, n_cg));
        for (unsigned i = 0; i < n_cg; i++)
                close(a->cg_self[i]);
}

static void reset_signals(const ns_child_args *a)
{
        /* a template may ignore SIGCHLD or block signals: PID 1 must not */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGCHLD, SIG_DFL);
        /* The service ignores SIGPIPE (and exec keeps ignored signals ignored): the
         * program must start with default dispositions. A warm template is a fresh
         * interpreter whose own dispositions are the ones a cold run would have. */
        if (!a->warm)
                ns_reset_signal_dispositions();
}

/* Two bytes from the supervisor: 'm' once our uid/gid maps are written, 'g' once this
 * process is in all the sandbox's cgroups. The root is built in between, while the
 * supervisor moves a warm PID 1 by pid (on cgroup v1 that can wait for an RCU grace
 * period); nothing of the request's runs before 'g'. Anything else: the supervisor
 * is gone, or it gave up on us. */
static void await_supervisor(const ns_child_args *a, char want)
{
        char go;
        if (read(a->sync_fd, &go, 1) != 1 || go != want)
                _exit(127);
}

/* The supervisor has written our uid/gid maps: become the namespace's root. If the
 * supervisor dies, so does the sandbox (and with PID 1, all of it): set after the uid
 * change, which clears it. The supervisor holds the sync pipe's write end while we
 * run: a hang-up means it died before this. */
static void become_namespace_root(const ns_child_args *a)
{
        step(JAIL_SETID, jail_become(0, 0, false));
        if (jail_pdeathsig(0, a->sync_fd) < 0)
                _exit(127);
}

static void set_hostname(void)
{
        if (sethostname("sandbox", 7) < 0)
                ns_child_die("sethostname");
}

static void read_payload(const ns_child_args *a, payload_view *ret)
{
        int r = payload_map(a->payload_fd, ret);
        if (r < 0) {
                errno = -r;
                ns_child_die("reading the payload");
        }
        close(a->payload_fd);
}

/* cgroup namespace now, so the sandbox's own cgroup is its root. The sync pipe stays
 * open: PID 1 holds on it (NS_INIT_HOLD_FD, or init_loop without the static init). */
static void enter_cgroup_namespace(const ns_child_args *a)
{
        if (unshare(CLONE_NEWCGROUP) < 0)
                ns_child_die("unsharing the cgroup namespace");
}

static void write_files(const ns_child_args *a)
{
        if (!a->has_files)
                return;
        char why[400];
        int r = ns_files_unpack(a->files_fd, NS_SANDBOX_HOME, NS_SANDBOX_UID, NS_SANDBOX_UID, why, sizeof(why));
        if (r < 0) {
                errno = -r;
                ns_child_die("%s", why);
        }
        close(a->files_fd);
}

/* The cold program's process, as posix_spawn makes one: CLONE_VM | CLONE_VFORK, on a
 * stack of its own. PID 1 is a copy of the service (or of the CLI), and a fork would
 * copy that whole address space again, to fault in its pages copy by copy and tear
 * it down at the exec a moment later; sharing it, PID 1 waits (CLONE_VFORK) until the
 * program has exec'd or died. Not glibc's fork(), which takes malloc's arena locks
 * around the fork: one that another of the service's threads held at the moment PID 1
 * was cloned is held for ever in this copy, where that thread does not exist (the
 * sandbox then hung until its time limit). Until its execve the program only calls
 * the kernel, on its own stack, and touches nothing of PID 1's memory but that stack,
 * errno and ret->code_path (its fds, root directory, limits and credentials are its
 * own: no CLONE_FILES, CLONE_FS or CLONE_THREAD). */
#define PROGRAM_STACK_BYTES (256 << 10)

typedef struct program_start {
        const ns_child_args *a;
        const payload_view *pl;
        ns_program *ret;
} program_start;

static int program_main(void *arg)
{
        const program_start *p = arg;
        run_program(p->a, p->pl, p->ret); /* cold: execs or dies */
        return 127;
}

static pid_t spawn_cold_program(const ns_child_args *a, const payload_view *pl, ns_program *ret)
{
        void *stack = mmap(NULL, PROGRAM_STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                           -1, 0);
        if (stack == MAP_FAILED)
                ns_child_die("a stack for the program");
        program_start p = { .a = a, .pl = pl, .ret = ret };
        pid_t program = clone(program_main, (char *)stack + PROGRAM_STACK_BYTES, CLONE_VM | CLONE_VFORK | SIGCHLD, &p);
        if (program < 0 && errno == EINVAL) {
                /* Kernels before 6.3 refuse CLONE_VM to a child bound for another time
                 * namespace (PID 1 made the sandbox's, see ns_time_start): Debian 12's
                 * 6.1, the microVM guest's among them. A copy of PID 1 then, as before:
                 * the raw system call, for the reason above. */
                program = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
                if (program == 0) {
                        run_program(a, pl, ret); /* cold: execs or dies */
                        _exit(127);
                }
        }
        if (program < 0)
                ns_child_die("starting the program");
        /* PID 1 execs its init next, which unmaps it */
        return program;
}

/* Once the root is built and the last namespace made: the bounding set emptied,
 * no_new_privs and the seccomp filter, once, in PID 1 before it forks the program,
 * which inherits the three (fork keeps them; the filter is the same object, not a
 * second copy to compile and run at every call). Nothing either process does after
 * this is a call the filter denies; the capabilities PID 1 still holds are dropped
 * by each process after the fork. */
static void lock_down(const ns_child_args *a)
{
        step(JAIL_BOUNDING, jail_drop_bounding(0, false));
        step(JAIL_NNP, jail_no_new_privs());
        int r = sandbox_filter_load(a->seccomp);
        if (r < 0) {
                errno = -r;
                ns_child_die("loading the seccomp filter");
        }
}

/* PID 1 keeps only the report pipe: the program's end of stdio must be the only
 * writer, so the supervisor sees EOF when the sandbox is gone. Then no capabilities,
 * and the init. */
static _Noreturn void become_init(const ns_child_args *a, pid_t program)
{
        if (a->stdin_fd >= 0)
                close(a->stdin_fd);
        close(a->stdout_fd);
        close(a->stderr_fd);
        step(JAIL_CAPS, jail_set_caps(0));
        if (a->init_fd < 0)
                init_loop(program, a->sync_fd);
        exec_init(a->init_fd, a->sync_fd, program);
}

/* The recipe, in the order the security argument needs (nsjail's containProc): a
 * failing step ends the child. */
void ns_child_main(const ns_child_args *a, ns_program *ret)
{
        payload_view own, *pl = a->warm_payload ? a->warm_payload : &own;
        int counter_fds[ARRAY_SIZE(userns_counters)];

        keep_own_descriptors(a);        /* and into the v1 cgroups, first */
        reset_signals(a);
        await_supervisor(a, 'm');       /* our uid/gid maps are written */
        become_namespace_root(a);       /* and die with the supervisor */
        set_hostname();
        read_payload(a, pl);
        open_userns_counters(a->limits, counter_fds);
        loopback_up();
        ns_root_build(a, pl);
        await_supervisor(a, 'g');       /* in every cgroup of the sandbox */
        enter_cgroup_namespace(a);
        write_userns_counters(a->limits, counter_fds);
        write_files(a);                 /* into the working directory, charged to the sandbox */
        lock_down(a);                   /* for PID 1 and the program it forks */
        if (!a->warm)
                become_init(a, spawn_cold_program(a, pl, ret));
        /* A warm template is single-threaded, and its program goes on in Python, which
         * needs glibc's fork (the new process's cached thread id). A warm PID 1 shares
         * the template's memory while the template is stopped (CLONE_VFORK, see
         * zygote-module.c), so this fork is the template's own, as if it had forked
         * there: the one copy of it an execution makes. */
        pid_t program = fork();
        if (program < 0)
                ns_child_die("fork");
        if (program == 0) {
                run_program(a, pl, ret);
                return;                 /* warm: the caller runs the program */
        }
        become_init(a, program);
}
