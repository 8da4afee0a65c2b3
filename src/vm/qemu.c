/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The QEMU microvm driver. QEMU gets no network device, the root image read-only,
 * the guest memory the execution needs, and one end of a socketpair as the agent's
 * virtio-serial port (no socket path on disk). The image files are opened here and
 * handed over as descriptors, so QEMU needs no access to the image directory.
 *
 * QEMU itself is the attack surface a guest escape would reach first, so it runs in a
 * jail: its own pid, mount, net, ipc and uts namespaces; a root of its own, an empty
 * tmpfs (mounted over /dev in the child's private mount namespace, then pivot_root
 * into it, the host's tree detached, the root made read-only) that holds only
 * QEMU's own files bound read-only (the binary, its libraries, modules and firmware:
 * qemu-jail.c lists them), a /proc of its own pid namespace (pids only: no other
 * QEMU's memory in reach), and dev/ with null, zero, random, urandom and, with KVM, a
 * kvm node owned by QEMU's uid (as Firecracker's jailer does). No other host file,
 * directory or unix socket is in its reach. It runs as an unprivileged uid of its own
 * (SANDBOX_UID_BASE + VM_QEMU_UID), no capabilities, no_new_privs, QEMU's own seccomp
 * sandbox (-sandbox), no core dumps, death with its parent, and cgroups of its own
 * (guest RAM + QEMU_MEM_OVERHEAD_MB, pids, a CPU share) joined at birth.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/macro.h"
#include "core/jail.h"
#include "vm/vm.h"

/* Descriptor numbers inside QEMU. */
enum { FD_CHAN = 3, FD_KERNEL, FD_INITRD, FD_ROOTFS, FD_COUNT };

/* QEMU's own memory beside guest RAM: the TCG translation cache (tb-size), its
 * threads' stacks, device state. */
#define QEMU_MEM_OVERHEAD_MB 256u
/* main loop, vCPU, RCU, and QEMU's I/O worker pool, which grows on demand */
#define QEMU_PIDS_MAX        128u
/* one vCPU plus device emulation */
#define QEMU_CPUS_MILLI      1500u

typedef struct child_plan {
        const char *bin;        /* the path executed, inside the jail */
        char *const *argv;
        int fds[FD_COUNT];      /* what becomes 0..FD_COUNT-1 */
        bool kvm;               /* give it a /dev/kvm node */
        uint32_t uid;
        const int *v1_tasks;    /* [CG_HIER_MAX]: v1 cgroups to join first, -1: none */
        const char *jail;       /* vm_host.jail: what to bind */
} child_plan;

/* What the child says on its stderr (QEMU's, which the service reads when a VM dies
 * before its agent is ready) when a step fails. */
static void jail_failed(const char *step, const char *path)
{
        jail_say(2, "QEMU's jail", step, path, errno);
}

/* mkdir -p of the directories above rel (a path relative to the jail's root). */
static int make_parents(const char *rel)
{
        char buf[PATH_MAX];
        size_t n = strlen(rel);
        if (n >= sizeof(buf))
                return -1;
        memcpy(buf, rel, n + 1);
        for (char *p = buf; (p = strchr(p, '/')); p++) {
                *p = '\0';
                if (buf[0] && mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -1;
                *p = '/';
        }
        return 0;
}

/* One host file or directory, bound read-only at the same path in the jail. */
static int bind_in(char type, const char *path)
{
        const char *rel = path + 1;
        if (make_parents(rel) < 0)
                return -1;
        if (type == 'd') {
                if (mkdir(rel, 0755) < 0 && errno != EEXIST)
                        return -1;
        } else {
                int fd = open(rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
                if (fd < 0 && errno != EEXIST)
                        return -1;
                if (fd >= 0)
                        close(fd);
        }
        if (mount(path, rel, NULL, MS_BIND, NULL) < 0)
                return -1;
        unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | (type == 'd' ? MS_NOEXEC : 0);
        return mount(NULL, rel, NULL, flags, NULL);
}

/* The jail's root (we are PID 1 of a new pid namespace, in a new mount namespace). */
static int jail_mounts(const child_plan *p)
{
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                jail_failed("making its mounts private", NULL);
                return -1;
        }
        /* any directory serves as the mount point: this namespace is the child's alone,
         * and /dev holds none of what is bound below */
        if (mount("hexr-qemu", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=256k,nr_inodes=1024") < 0 ||
            chdir("/dev") < 0) {
                jail_failed("mounting its root", NULL);
                return -1;
        }
        static const struct { const char *path; unsigned major, minor; } nodes[] = {
                { "dev/null", 1, 3 }, { "dev/zero", 1, 5 }, { "dev/random", 1, 8 }, { "dev/urandom", 1, 9 },
        };
        if (mkdir("dev", 0755) < 0 || mkdir("proc", 0555) < 0) {
                jail_failed("creating dev and proc", NULL);
                return -1;
        }
        for (size_t i = 0; i < ARRAY_SIZE(nodes); i++)
                if (mknod(nodes[i].path, S_IFCHR | 0666, makedev(nodes[i].major, nodes[i].minor)) < 0 ||
                    chmod(nodes[i].path, 0666) < 0) {
                        jail_failed("creating", nodes[i].path);
                        return -1;
                }
        if (p->kvm && (mknod("dev/kvm", S_IFCHR | 0600, makedev(10, 232)) < 0 ||
                       chown("dev/kvm", p->uid, p->uid) < 0)) {
                jail_failed("creating", "dev/kvm");
                return -1;
        }
        for (const char *e = p->jail; *e; e += strlen(e) + 1)
                if (bind_in(e[0], e + 1) < 0) {
                        jail_failed("binding", e + 1);
                        return -1;
                }
        if (mount("proc", "proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "subset=pid,hidepid=invisible") < 0) {
                jail_failed("mounting", "/proc");
                return -1;
        }
        /* the old root stacks on "." and is then detached: nothing of the host remains */
        if (syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
                jail_failed("pivot_root into its root", NULL);
                return -1;
        }
        /* nothing is writable: the root goes read-only too (device nodes still work) */
        if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) < 0) {
                jail_failed("making its root read-only", NULL);
                return -1;
        }
        return 0;
}

/* A jail step failed: named on QEMU's stderr. */
static bool failed(jail_step step, int r)
{
        if (r >= 0)
                return false;
        errno = -r;
        jail_failed(jail_step_text(step), NULL);
        return true;
}

/* After clone, before exec: async-signal-safe calls only (the pool thread may be
 * the parent). Returns only on failure. */
static void child_exec(const child_plan *p)
{
        static char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
        static const jail_rlimit limits[] = { { RLIMIT_CORE, 0 } };
        /* v1 cgroups: join them itself, first ("0" is the writer; v2 was at birth).
         * Silent: fd 2 is not QEMU's yet. */
        if (jail_join_v1(p->v1_tasks, CG_HIER_MAX) < 0 || jail_arrange_fds(p->fds, FD_COUNT, FD_COUNT) < 0)
                return;
        /* the death signal while it builds its root; the uid change clears it, so again below */
        if (failed(JAIL_CLOSE, jail_close_from(FD_COUNT, false)) || failed(JAIL_PDEATHSIG, jail_pdeathsig(0, -1)))
                return;
        if (jail_mounts(p) < 0)
                return;
        /* a uid change from root clears every capability; the ambient set goes too */
        if (failed(JAIL_RLIMITS, jail_rlimits(limits, ARRAY_SIZE(limits))) ||
            failed(JAIL_BOUNDING, jail_drop_bounding(0, false)) ||
            failed(JAIL_SETID, jail_become(p->uid, p->uid, false)) ||
            failed(JAIL_CAPS, jail_set_caps(0)) ||
            failed(JAIL_NNP, jail_no_new_privs()) ||
            /* fd 2 is the pipe the service reads: hung up if it died before this */
            failed(JAIL_PDEATHSIG, jail_pdeathsig(0, 2)))
                return;
        execve(p->bin, p->argv, envp);
        jail_failed("executing", p->bin);
}

/* clone3 with a pidfd and the jail's namespaces, born into the v2 cgroup if any. */
static pid_t spawn(const child_plan *plan, int cg_dirfd, int *ret_pidfd)
{
        int pidfd = -1;
        struct clone_args ca = { .flags = CLONE_PIDFD | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET |
                                          CLONE_NEWIPC | CLONE_NEWUTS |
                                          (cg_dirfd >= 0 ? CLONE_INTO_CGROUP : 0),
                                 .pidfd = (uint64_t)(uintptr_t)&pidfd, .exit_signal = SIGCHLD,
                                 .cgroup = cg_dirfd >= 0 ? (uint64_t)cg_dirfd : 0 };
        long pid = syscall(SYS_clone3, &ca, sizeof(ca));
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                child_exec(plan);
                _exit(127);
        }
        *ret_pidfd = pidfd;
        return (pid_t)pid;
}

static int open_ro(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        return fd < 0 ? -errno : fd;
}

int vm_qemu_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *v, hxs_error *err)
{
        int sp[2] = { -1, -1 }, ep[2] = { -1, -1 }, devnull = -1, files[3] = { -1, -1, -1 };
        cg_join join = { .v2_dirfd = -1 };
        for (int i = 0; i < CG_HIER_MAX; i++)
                join.v1_tasks[i] = -1;
        int r;
        const char *paths[3] = { h->kernel, h->initrd, h->rootfs };
        for (int i = 0; i < 3; i++)
                if ((files[i] = open_ro(paths[i])) < 0) {
                        r = err_fail(err, HXS_ERR_SETUP, files[i], "starting the microVM: %s: %s",
                                     paths[i], strerror(-files[i]));
                        goto out;
                }
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ||
            pipe2(ep, O_CLOEXEC | O_NONBLOCK) < 0 ||
            (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
                r = err_fail(err, HXS_ERR_SETUP, -errno, "starting the microVM: %s", strerror(errno));
                goto out;
        }

        char mem[32], append[512], kernel[32], initrd[32], drive[96], chardev[64];
        snprintf(mem, sizeof(mem), "%u", ram_mb);
        snprintf(kernel, sizeof(kernel), "/proc/self/fd/%d", FD_KERNEL);
        snprintf(initrd, sizeof(initrd), "/proc/self/fd/%d", FD_INITRD);
        snprintf(drive, sizeof(drive), "if=none,id=root,file=/proc/self/fd/%d,format=raw,readonly=on",
                 FD_ROOTFS);
        snprintf(chardev, sizeof(chardev), "socket,id=agent,fd=%d", FD_CHAN);
        char tsc[48] = "";
        if (!h->kvm && h->tsc_khz)
                snprintf(tsc, sizeof(tsc), " tsc_early_khz=%lu tsc=reliable", h->tsc_khz);
        snprintf(append, sizeof(append),
                 "console=ttyS0%s quiet cryptomgr.notests 8250.nr_uarts=1 audit=0 panic=-1 "
                 /* as on a big host: an allocation past memory_mb is an OOM kill, not ENOMEM */
                 "sysctl.vm.overcommit_memory=1 "
                 "reboot=t hexr.port=" VM_PORT_NAME, tsc);
        char *argv[] = {
                (char *)h->hypervisor,
                "-M", "microvm",
                /* TCG's translation cache defaults to 1 GiB per VM; 64 MiB holds a
                 * Python or Node.js working set */
                "-accel", h->kvm ? "kvm" : "tcg,tb-size=64",
                "-cpu", h->kvm ? "host" : "max",
                "-m", mem, "-smp", "1",
                "-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none",
                "-no-reboot", "-nic", "none",
                "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
                "-kernel", kernel, "-initrd", initrd, "-append", append,
                "-chardev", "null,id=console", "-serial", "chardev:console",
                "-drive", drive, "-device", "virtio-blk-device,drive=root",
                "-device", "virtio-serial-device",
                "-chardev", chardev,
                "-device", "virtserialport,chardev=agent,name=" VM_PORT_NAME,
                NULL,
        };
        cg_limits lim = { .memory_bytes = ((uint64_t)ram_mb + QEMU_MEM_OVERHEAD_MB) << 20,
                          .pids_max = QEMU_PIDS_MAX, .cpus_milli = QEMU_CPUS_MILLI };
        if ((r = vm_cgroup_create(h, &lim, &v->cg, NULL, 0, err)) < 0)
                goto out;
        v->have_cg = true;
        if ((r = cg_join_open(&v->cg, &join, err)) < 0)
                goto out;
        child_plan plan = {
                .bin = h->exec_path, .argv = argv,
                .fds = { devnull, devnull, ep[1], sp[1], files[0], files[1], files[2] },
                .kvm = h->kvm, .uid = h->vmm_uid, .v1_tasks = join.v1_tasks, .jail = h->jail,
        };
        pid_t pid = spawn(&plan, join.v2_dirfd, &v->pidfd);
        if (pid < 0) {
                r = err_fail(err, HXS_ERR_SETUP, pid, "starting %s: %s", h->hypervisor, strerror(-pid));
                goto out;
        }
        v->pid = pid;
        v->chan = sp[0];
        v->err_fd = ep[0];
        sp[0] = ep[0] = -1;
        if ((r = fd_set_nonblock(v->chan)) < 0) {
                r = err_fail(err, HXS_ERR_SETUP, r, "starting the microVM: %s", strerror(-r));
                goto out;
        }
        r = 0;
out:
        cg_join_close(&join);
        for (int i = 0; i < 3; i++)
                if (files[i] >= 0)
                        close(files[i]);
        int *fds[] = { &sp[0], &sp[1], &ep[0], &ep[1], &devnull };
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                if (*fds[i] >= 0)
                        close(*fds[i]);
        return r;
}
