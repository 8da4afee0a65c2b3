/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Firecracker driver: starts Firecracker in a jail, configures the VM through
 * the API socket, starts it, and connects the agent's byte stream through
 * Firecracker's host-initiated vsock. Everything after that (HELLO, READY, the
 * frames) is vm-instance.c's, as for QEMU.
 *
 * The jail does what Firecracker's jailer does, in the clone3 child before exec:
 *  - its own cgroups (memory: guest RAM + FC_MEM_OVERHEAD_MB, pids, cpu), joined
 *    at birth (CLONE_INTO_CGROUP for v2, the tasks file for v1), see core/cgroup.h;
 *  - new mount, pid, net, ipc and uts namespaces: Firecracker is PID 1 of its own
 *    pid namespace and has no network interface but a down loopback;
 *  - a root of its own: a small tmpfs mounted (in the child's private mount
 *    namespace only) on STATE_DIR/fc/<name>, holding dev/kvm (mknod, owned by
 *    Firecracker's uid, as the jailer does), dev/urandom, no dev/net/tun, the three
 *    image files bind-mounted read-only, and run/, a tmpfs of its own owned by
 *    Firecracker's uid for the two sockets; pivot_root into it, then the root made
 *    read-only. Nothing of it is ever visible on the host, so nothing can be left
 *    behind on disk but the empty mount point, which cleanup (or the next start's
 *    sweep, after a crash) removes;
 *  - the host's fds closed, no environment, RLIMIT_CORE 0, RLIMIT_NOFILE 2048,
 *    setgroups/setresgid/setresuid to h->vmm_uid (SANDBOX_UID_BASE +
 *    VM_FIRECRACKER_UID, a uid of its own), no capabilities (bounding set
 *    emptied), no_new_privs, death with its parent; Firecracker applies its own
 *    seccomp filters (no flag turns them off).
 * The binary is executed from an fd opened on the host (execveat), so it is not in
 * the jail; like the jailer, this needs a statically linked Firecracker (the
 * official releases are).
 *
 * The host reaches the sockets through /proc/<pid>/root, resolved with openat2
 * RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS and connected through /proc/self/fd/N: a
 * Firecracker under a guest's control could plant a symlink in run/, and the host
 * must never follow it to one of its own sockets.
 *
 * Blocking: vm_firecracker_spawn waits for the jail (up to FC_JAIL_TIMEOUT_MS), the
 * API (FC_API_TIMEOUT_MS) and the guest agent's vsock listener (FC_BOOT_TIMEOUT_MS,
 * retried every FC_RETRY_MS): ~0.2-1 s under KVM, at worst 15 s. It is only ever
 * called from a thread, the pool's or the spawner's (vm-spawner.c), never from the
 * event loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/macro.h"
#include "core/cgroup.h"
#include "core/jail.h"
#include "vm/fc-api.h"
#include "vm/vm.h"

#define FC_VSOCK_PORT        1024u
#define FC_GUEST_CID         3u
#define FC_API_SOCK          "/run/api.sock"
#define FC_VSOCK_UDS         "/run/v.sock"
/* as QEMU's (qemu.c), with Firecracker's reboot method and the vsock port */
#define FC_BOOT_ARGS         "console=ttyS0 quiet cryptomgr.notests 8250.nr_uarts=1 audit=0 " \
                             "sysctl.vm.overcommit_memory=1 " \
                             "reboot=k panic=-1 pci=off hexr.vsock=1024"
/* The VMM itself (~5 MiB), KVM's page tables and the jail's tmpfs on top of guest RAM. */
#define FC_MEM_OVERHEAD_MB   64u
/* fc_main, fc_api, one vCPU thread and a few spares; Firecracker forks nothing. */
#define FC_PIDS_MAX          16u
/* one vCPU plus the VMM's device emulation */
#define FC_CPUS_MILLI        1500u
#define FC_NOFILE            2048u
#define FC_JAIL_TIMEOUT_MS   2000
#define FC_API_TIMEOUT_MS    3000
#define FC_BOOT_TIMEOUT_MS   10000
#define FC_RETRY_MS          10

/* Descriptors in the child: 0 /dev/null, 1 and 2 the log pipe, then these. */
enum { CFD_BIN = 3, CFD_REPORT, CFD_COUNT };

static const char *const jail_image_names[3] = { "vmlinux", "initramfs.img", "rootfs.ext4" };

/* What the child reports when a step of its own fails (jail.h's steps come first). */
typedef enum fc_step {
        STEP_PRIVATE = JAIL_STEP_MAX, STEP_TMPFS, STEP_DEV, STEP_KVM, STEP_URANDOM, STEP_RUN, STEP_IMAGE,
        STEP_PIVOT, STEP_READONLY, STEP_MAX,
} fc_step;

static const char *const fc_step_text[STEP_MAX - JAIL_STEP_MAX] = {
        [STEP_PRIVATE - JAIL_STEP_MAX] = "making its mounts private",
        [STEP_TMPFS - JAIL_STEP_MAX] = "mounting the jail's tmpfs",
        [STEP_DEV - JAIL_STEP_MAX] = "creating /dev in the jail",
        [STEP_KVM - JAIL_STEP_MAX] = "creating /dev/kvm in the jail",
        [STEP_URANDOM - JAIL_STEP_MAX] = "creating /dev/urandom in the jail",
        [STEP_RUN - JAIL_STEP_MAX] = "mounting /run in the jail",
        [STEP_IMAGE - JAIL_STEP_MAX] = "binding the image files into the jail",
        [STEP_PIVOT - JAIL_STEP_MAX] = "pivot_root into the jail",
        [STEP_READONLY - JAIL_STEP_MAX] = "making the jail's root read-only",
};

static const char *step_text(int step)
{
        if (step >= JAIL_STEP_MAX && step < STEP_MAX)
                return fc_step_text[step - JAIL_STEP_MAX];
        return jail_step_text(step);
}

typedef struct jail_plan {
        const char *jail;               /* the mount point, host path */
        const char *images[3];          /* host paths, bound to jail_image_names */
        uint32_t uid;
        int fds[CFD_COUNT];             /* what becomes 0..CFD_COUNT-1 */
        const int *v1_tasks;            /* [CG_HIER_MAX], -1: none */
        char *const *argv;
        char root_opts[64], run_opts[96];
} jail_plan;

/* ---- the child, between clone and exec: async-signal-safe calls only ------------------ */

static _Noreturn void child_fail(int fd, int step)
{
        jail_fail(fd, step, negative_errno(), 127);
}

/* A jail.h step: on failure, reported as the others. */
static void child_step(int fd, jail_step step, int r)
{
        if (r < 0)
                jail_fail(fd, step, r, 127);
}

static void child_jail(const jail_plan *p)
{
        static char *const envp[] = { NULL };
        static const jail_rlimit limits[] = { { RLIMIT_CORE, 0 }, { RLIMIT_NOFILE, FC_NOFILE } };
        int rep = p->fds[CFD_REPORT];
        /* v1 cgroups: the child writes "0" (itself) into tasks files the parent opened */
        child_step(rep, JAIL_CGROUP, jail_join_v1(p->v1_tasks, CG_HIER_MAX));
        child_step(rep, JAIL_FDS, jail_arrange_fds(p->fds, CFD_COUNT, CFD_BIN));
        rep = CFD_REPORT;
        child_step(rep, JAIL_CLOSE, jail_close_from(CFD_COUNT, false));
        /* while it builds its root; the uid change clears it, so again below */
        child_step(rep, JAIL_PDEATHSIG, jail_pdeathsig(0, -1));

        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                child_fail(rep, STEP_PRIVATE);
        if (mount("hexr-fc", p->jail, "tmpfs", MS_NOSUID | MS_NOEXEC, p->root_opts) < 0 ||
            chdir(p->jail) < 0)
                child_fail(rep, STEP_TMPFS);
        if (mkdir("dev", 0755) < 0)
                child_fail(rep, STEP_DEV);
        if (mknod("dev/kvm", S_IFCHR | 0600, makedev(10, 232)) < 0 ||
            chown("dev/kvm", p->uid, p->uid) < 0)
                child_fail(rep, STEP_KVM);
        if (mknod("dev/urandom", S_IFCHR | 0444, makedev(1, 9)) < 0)
                child_fail(rep, STEP_URANDOM);
        if (mkdir("run", 0700) < 0 ||
            mount("hexr-fc-run", "run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, p->run_opts) < 0)
                child_fail(rep, STEP_RUN);
        for (int i = 0; i < 3; i++) {
                const char *name = jail_image_names[i];
                int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
                if (fd < 0 || close(fd) < 0 ||
                    mount(p->images[i], name, NULL, MS_BIND, NULL) < 0 ||
                    mount(NULL, name, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          NULL) < 0)
                        child_fail(rep, STEP_IMAGE);
        }
        /* the old root stacks on "." and is then detached: nothing of the host remains */
        if (syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
                child_fail(rep, STEP_PIVOT);
        if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) < 0)
                child_fail(rep, STEP_READONLY);

        child_step(rep, JAIL_RLIMITS, jail_rlimits(limits, ARRAY_SIZE(limits)));
        child_step(rep, JAIL_BOUNDING, jail_drop_bounding(0, false));
        child_step(rep, JAIL_SETID, jail_become(p->uid, p->uid, false));
        child_step(rep, JAIL_CAPS, jail_set_caps(0));
        child_step(rep, JAIL_NNP, jail_no_new_privs());
        /* the service holds the report pipe's read end: an error there means it died */
        child_step(rep, JAIL_PDEATHSIG, jail_pdeathsig(0, rep));
        syscall(SYS_execveat, CFD_BIN, "", p->argv, envp, AT_EMPTY_PATH);
        child_fail(rep, JAIL_EXEC);
}

static pid_t spawn_jailed(const jail_plan *plan, int cg_dirfd, int *ret_pidfd)
{
        int pidfd = -1;
        struct clone_args ca = {
                .flags = CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                         (cg_dirfd >= 0 ? CLONE_INTO_CGROUP : 0),
                .pidfd = (uint64_t)(uintptr_t)&pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = cg_dirfd >= 0 ? (uint64_t)cg_dirfd : 0,
        };
        long pid = syscall(SYS_clone3, &ca, sizeof(ca));
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                child_jail(plan);
                _exit(127);
        }
        *ret_pidfd = pidfd;
        return (pid_t)pid;
}

/* ---- cgroups and jails, shared by every VM of the process ------------------------------ */

static pthread_mutex_t fc_mu = PTHREAD_MUTEX_INITIALIZER;
static char fc_swept[256];

static bool owner_dead(const char *name)
{
        int pid;
        unsigned long long start, now;
        if (sscanf(name, "s%d.%llu-", &pid, &start) != 2 || pid <= 0)
                return false; /* not ours to judge */
        return proc_start_time(pid, &now) < 0 || now != start;
}

/* Jails of a process that is gone: the mount points are empty once its VMs died
 * (the jail's tmpfs lived in their mount namespaces). Once per state directory. */
static void sweep_jails(const char *state_dir)
{
        pthread_mutex_lock(&fc_mu);
        if (strcmp(fc_swept, state_dir) == 0) {
                pthread_mutex_unlock(&fc_mu);
                return;
        }
        snprintf(fc_swept, sizeof(fc_swept), "%s", state_dir);
        char dir[300];
        snprintf(dir, sizeof(dir), "%s/fc", state_dir);
        DIR *d = opendir(dir);
        if (d) {
                struct dirent *de;
                while ((de = readdir(d)))
                        if (de->d_name[0] == 's' && owner_dead(de->d_name))
                                (void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
                closedir(d);
        }
        pthread_mutex_unlock(&fc_mu);
}

void vm_firecracker_cleanup(vm_instance *v)
{
        if (!v->jail[0])
                return;
        vm_cgroup_destroy(v); /* its processes hold the jail's mounts */
        (void)rmdir(v->jail);
        v->jail[0] = '\0';
}

/* ---- the host side ------------------------------------------------------------------------- */

static bool exited(int pidfd, int wait_ms)
{
        struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
        return poll(&pfd, 1, wait_ms) > 0;
}

/* Connects to a socket inside the jail, never following a link the jail planted. */
static int connect_in_jail(int rootfd, const char *rel)
{
        struct open_how how = { .flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int pfd = (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
        if (pfd < 0)
                return -errno;
        struct stat st;
        if (fstat(pfd, &st) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", pfd);
        _cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0)
                return -errno;
        if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        return TAKE_FD(s);
}

static bool image_readable(const struct stat *st, uint32_t uid)
{
        if (st->st_uid == uid)
                return st->st_mode & S_IRUSR;
        if (st->st_gid == uid)
                return st->st_mode & S_IRGRP;
        return st->st_mode & S_IROTH;
}

/* "firecracker: <what>: <why>[: what it printed]" */
static int fail_dead(vm_instance *v, hxs_error *err, int r, const char *what)
{
        char said[200] = "";
        vm_stderr_text(v, said, sizeof(said));
        for (size_t n = strlen(said); n > 0 && said[n - 1] == ' '; n--)
                said[n - 1] = '\0';
        return err_fail(err, HXS_ERR_SETUP, r, "firecracker: %s%s%s", what, said[0] ? ": " : "", said);
}

static int api_put(int fd, const char *path, char *body, const struct timespec *deadline, hxs_error *err)
{
        if (!body)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        int status = 0;
        char fault[200];
        int r = fc_api_call(fd, "PUT", path, body, deadline, &status, fault, sizeof(fault));
        free(body);
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "firecracker: PUT %s: %s", path,
                                r == -EBADMSG ? "the answer is not HTTP we accept" : strerror(-r));
        if (status != 204)
                return err_fail(err, HXS_ERR_SETUP, -EPROTO, "firecracker: PUT %s answered %d: %s", path, status,
                                fault[0] ? fault : "(no fault message)");
        return 0;
}

/* Configures and starts the VM through the API socket. */
static int configure(vm_instance *v, int rootfd, uint32_t ram_mb, hxs_error *err)
{
        struct timespec deadline;
        fc_deadline_in(&deadline, FC_API_TIMEOUT_MS);
        _cleanup_close_ int api = -1;
        for (;;) {
                api = connect_in_jail(rootfd, &FC_API_SOCK[1]);
                if (api >= 0)
                        break;
                if (api != -ENOENT && api != -ECONNREFUSED && api != -EAGAIN)
                        return err_fail(err, HXS_ERR_SETUP, api, "firecracker: connecting to its API socket (%s): %s",
                                        FC_API_SOCK, strerror(-api));
                if (exited(v->pidfd, 0))
                        return fail_dead(v, err, -EPIPE, "it exited before opening its API socket");
                if (fc_ms_left(&deadline) == 0)
                        return fail_dead(v, err, -ETIMEDOUT, "its API socket did not appear within 3 s");
                (void)exited(v->pidfd, FC_RETRY_MS);
        }
        int r;
        if ((r = api_put(api, "/boot-source",
                         fc_body_boot_source("/vmlinux", "/initramfs.img", FC_BOOT_ARGS), &deadline, err)) < 0 ||
            /* not the root device: the guest boots from the initramfs, the agent mounts /dev/vda */
            (r = api_put(api, "/drives/root", fc_body_drive("root", "/rootfs.ext4", false, true), &deadline,
                         err)) < 0 ||
            (r = api_put(api, "/machine-config", fc_body_machine_config(1, ram_mb), &deadline, err)) < 0 ||
            (r = api_put(api, "/vsock", fc_body_vsock(FC_GUEST_CID, FC_VSOCK_UDS), &deadline, err)) < 0 ||
            (r = api_put(api, "/actions", fc_body_action("InstanceStart"), &deadline, err)) < 0)
                return r;
        return 0;
}

/* Retries the vsock handshake until the agent listens. The connected stream. */
static int connect_agent(vm_instance *v, int rootfd, hxs_error *err)
{
        struct timespec deadline;
        fc_deadline_in(&deadline, FC_BOOT_TIMEOUT_MS);
        for (;;) {
                int fd = connect_in_jail(rootfd, &FC_VSOCK_UDS[1]);
                int r = fd;
                if (fd >= 0) {
                        r = fc_vsock_handshake(fd, FC_VSOCK_PORT, &deadline);
                        if (r == 0)
                                return fd;
                        close(fd);
                }
                if (r == -EPROTO)
                        return err_fail(err, HXS_ERR_SETUP, r,
                                        "firecracker: its vsock answered CONNECT with something other than OK");
                if (r != -ENOENT && r != -ECONNREFUSED && r != -ECONNRESET && r != -EAGAIN && r != -ETIMEDOUT &&
                    r != -EPIPE)
                        return err_fail(err, HXS_ERR_SETUP, r, "firecracker: connecting to the guest's vsock (%s): %s",
                                        FC_VSOCK_UDS, strerror(-r));
                if (exited(v->pidfd, 0))
                        return fail_dead(v, err, -EPIPE, "it exited before the guest agent listened");
                if (fc_ms_left(&deadline) == 0)
                        return fail_dead(v, err, -ETIMEDOUT,
                                         "the guest agent did not listen on vsock port 1024 within 10 s");
                (void)exited(v->pidfd, FC_RETRY_MS);
        }
}

/* Waits until the child has exec'd (its CLOEXEC report pipe closes) or reported a step. */
static int wait_jail(vm_instance *v, int report_fd, hxs_error *err)
{
        struct timespec deadline;
        fc_deadline_in(&deadline, FC_JAIL_TIMEOUT_MS);
        jail_report rep;
        size_t got = 0;
        while (got < sizeof(rep)) {
                struct pollfd pfd = { .fd = report_fd, .events = POLLIN };
                int left = fc_ms_left(&deadline);
                if (left == 0)
                        return err_fail(err, HXS_ERR_SETUP, -ETIMEDOUT, "firecracker: its jail was not ready in 2 s");
                if (poll(&pfd, 1, left) < 0 && errno != EINTR)
                        return err_fail(err, HXS_ERR_SETUP, -errno, "firecracker: poll: %s", strerror(errno));
                ssize_t n = read(report_fd, (char *)&rep + got, sizeof(rep) - got);
                if (n == 0)
                        break;
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return err_fail(err, HXS_ERR_SETUP, -errno, "firecracker: %s", strerror(errno));
                }
                got += (size_t)n;
        }
        if (got == 0)
                return 0; /* exec'd */
        if (got < sizeof(rep) || rep.step < 0 || rep.step >= STEP_MAX)
                return fail_dead(v, err, -EIO, "its jail failed");
        return err_fail(err, HXS_ERR_SETUP, rep.err > 0 ? -rep.err : -EIO, "firecracker: setting up its jail: %s: %s",
                        step_text(rep.step), strerror(rep.err));
}

static void undo(vm_instance *v)
{
        if (v->pidfd >= 0) {
                (void)pidfd_send_signal(v->pidfd, SIGKILL, NULL, 0);
                siginfo_t si;
                while (waitid(P_PIDFD, (id_t)v->pidfd, &si, WEXITED) < 0 && errno == EINTR)
                        ;
        }
        close_fd(&v->pidfd);
        close_fd(&v->chan);
        close_fd(&v->err_fd);
        v->pid = -1;
        vm_cgroup_destroy(v);
        vm_firecracker_cleanup(v);
}

int vm_firecracker_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *v, hxs_error *err)
{
        v->pid = -1;
        v->pidfd = v->chan = v->err_fd = -1;
        v->jail[0] = '\0';
        const char *images[3] = { h->kernel, h->initrd, h->rootfs };
        for (int i = 0; i < 3; i++) {
                struct stat st;
                if (stat(images[i], &st) < 0)
                        return err_fail(err, HXS_ERR_SETUP, -errno, "firecracker: %s: %s", images[i], strerror(errno));
                if (!S_ISREG(st.st_mode))
                        return err_fail(err, HXS_ERR_SETUP, -EINVAL, "firecracker: %s is not a regular file", images[i]);
                if (!image_readable(&st, h->vmm_uid))
                        return err_fail(err, HXS_ERR_SETUP, -EACCES,
                                        "firecracker: %s (mode %04o) is not readable by uid %u, which Firecracker "
                                        "runs as", images[i], (unsigned)(st.st_mode & 07777), h->vmm_uid);
        }

        cg_limits lim = { .memory_bytes = ((uint64_t)ram_mb + FC_MEM_OVERHEAD_MB) << 20,
                          .pids_max = FC_PIDS_MAX, .cpus_milli = FC_CPUS_MILLI };
        char name[96];
        sweep_jails(h->state_dir);
        int r = vm_cgroup_create(h, &lim, &v->cg, name, sizeof(name), err);
        if (r < 0)
                return err_wrap(err, r, "firecracker");
        v->have_cg = true;

        char fcdir[300];
        snprintf(fcdir, sizeof(fcdir), "%s/fc", h->state_dir);
        int n = snprintf(v->jail, sizeof(v->jail), "%s/%s", fcdir, name);
        if (n < 0 || (size_t)n >= sizeof(v->jail)) {
                v->jail[0] = '\0';
                vm_cgroup_destroy(v);
                return err_fail_field(err, HXS_ERR_SETUP, -ENAMETOOLONG, "STATE_DIR", "STATE_DIR: path too long");
        }
        /* from here on undo() removes the cgroup and the jail */
        int ep[2] = { -1, -1 }, rp[2] = { -1, -1 }, devnull = -1, bin = -1, rootfd = -1;
        cg_join join = { .v2_dirfd = -1 };
        for (int i = 0; i < CG_HIER_MAX; i++)
                join.v1_tasks[i] = -1;
        if ((mkdir(h->state_dir, 0711) < 0 && errno != EEXIST) || (mkdir(fcdir, 0700) < 0 && errno != EEXIST) ||
            mkdir(v->jail, 0700) < 0) {
                int e = errno;
                r = err_fail(err, HXS_ERR_SETUP, -e, "firecracker: creating its jail %s: %s", v->jail, strerror(e));
                if (e == EEXIST)
                        v->jail[0] = '\0'; /* not ours to remove */
                goto fail;
        }
        if ((r = cg_join_open(&v->cg, &join, err)) < 0)
                goto fail;
        if (pipe2(ep, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(rp, O_CLOEXEC) < 0 ||
            (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
                r = err_fail(err, HXS_ERR_SETUP, -errno, "firecracker: %s", strerror(errno));
                goto fail;
        }
        if ((bin = open(h->hypervisor, O_PATH | O_CLOEXEC)) < 0) {
                r = err_fail_field(err, HXS_ERR_SETUP, -errno, "FIRECRACKER_BIN", "FIRECRACKER_BIN: %s: %s",
                                   h->hypervisor, strerror(errno));
                goto fail;
        }

        char id[80];
        snprintf(id, sizeof(id), "hexr-%s", name);
        for (char *p = id; *p; p++)
                if (*p == '.')
                        *p = '-'; /* Firecracker ids: letters, digits, hyphens */
        char *argv[] = { "firecracker", "--api-sock", FC_API_SOCK, "--id", id, NULL };
        jail_plan plan = {
                .jail = v->jail, .images = { h->kernel, h->initrd, h->rootfs }, .uid = h->vmm_uid,
                .fds = { devnull, ep[1], ep[1], bin, rp[1] }, .v1_tasks = join.v1_tasks, .argv = argv,
        };
        snprintf(plan.root_opts, sizeof(plan.root_opts), "size=64k,nr_inodes=32,mode=0755");
        snprintf(plan.run_opts, sizeof(plan.run_opts), "size=64k,nr_inodes=16,mode=0700,uid=%u,gid=%u",
                 h->vmm_uid, h->vmm_uid);
        pid_t pid = spawn_jailed(&plan, join.v2_dirfd, &v->pidfd);
        if (pid < 0) {
                r = err_fail(err, HXS_ERR_SETUP, pid, "firecracker: clone3: %s", strerror(-pid));
                goto fail;
        }
        v->pid = pid;
        v->err_fd = TAKE_FD(ep[0]);
        close_fd(&ep[1]);
        close_fd(&rp[1]);
        if ((r = wait_jail(v, rp[0], err)) < 0)
                goto fail;

        char root[64];
        snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
        rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0) {
                r = fail_dead(v, err, -errno, "it is gone after exec");
                goto fail;
        }
        if ((r = configure(v, rootfd, ram_mb, err)) < 0)
                goto fail;
        int chan = connect_agent(v, rootfd, err);
        if (chan < 0) {
                r = chan;
                goto fail;
        }
        v->chan = chan;
        r = 0;
        goto out;
fail:
        undo(v);
out:
        cg_join_close(&join);
        int *fds[] = { &ep[0], &ep[1], &rp[0], &rp[1], &devnull, &bin, &rootfd };
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                close_fd(fds[i]);
        return r;
}
