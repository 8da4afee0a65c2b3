/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The policy is a deny list: default allow, and EPERM for what a program run to
 * compute something never needs and an escape usually does (mounts, namespaces, ptrace,
 * keyrings, bpf, perf, userfaultfd, io_uring, kernel modules, kexec, ...). It is built
 * for x86_64, i386 and x32 so compat entry points carry the same rules.
 *
 * Traps handled here:
 *  - clone3 passes flags in memory the filter cannot read: answer ENOSYS so libc falls
 *    back to clone, whose flags we can check;
 *  - ioctl request numbers are compared on their low 32 bits (TIOCSTI with junk in the
 *    high bits is CVE-2019-10063);
 *  - denial is an errno, not a kill, so programs see an ordinary error.
 *
 * personality(2) stays allowed: its flags only change the caller's own address space
 * (mmap_min_addr still holds), and libseccomp cannot express "any value but these"
 * under a default-allow policy (two comparisons of one argument are refused).
 */
#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include "core/error.h"
#include "ns/seccomp.h"

/* Denied outright with EPERM. Names unknown to an architecture are skipped. */
static const char *const denied[] = {
        /* filesystems and mounts */
        "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
        "fspick", "move_mount", "open_tree", "mount_setattr", "open_by_handle_at",
        "name_to_handle_at", "quotactl", "quotactl_fd", "swapon", "swapoff", "nfsservctl",
        /* namespaces */
        "unshare", "setns",
        /* other processes */
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
        "process_madvise",
        /* kernel attack surface */
        "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
        "io_uring_register", "keyctl", "add_key", "request_key", "lookup_dcookie",
        "fanotify_init", "vm86", "vm86old", "modify_ldt", "uselib", "ustat", "sysfs",
        "_sysctl", "iopl", "ioperm", "syslog",
        /* the machine itself */
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
        "create_module", "reboot", "acct", "settimeofday", "clock_settime", "clock_adjtime",
        "adjtimex", "stime", "sethostname", "setdomainname", "vhangup",
        /* memory policy across processes */
        "mbind", "migrate_pages", "move_pages", "set_mempolicy_home_node",
};

static int add_rules(scmp_filter_ctx ctx)
{
        int r;
        for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
                int nr = seccomp_syscall_resolve_name(denied[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        /* Mount-related calls newer than this libseccomp's syscall table, by their
         * x86_64 numbers (statmount, listmount, open_tree_attr). */
        static const int newer[] = { 457, 458, 467 };
        for (size_t i = 0; i < ARRAY_SIZE(newer); i++)
                if (seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, newer[i]) == NULL)
                        (void)seccomp_rule_add_exact(ctx, SCMP_ACT_ERRNO(EPERM), newer[i], 0);
        /* clone3: flags are in memory, so make libc fall back to clone */
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                return r;
        /* clone: no new namespaces. Argument 0 holds the flags on all three x86 ABIs. */
        static const unsigned long ns_flags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC,
                                                  CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                                                  CLONE_NEWCGROUP, CLONE_NEWTIME };
        for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
                if (r < 0)
                        return r;
        }
        /* ioctl: no faking terminal input, no console tricks, no line disciplines (the
         * sandbox's ptys would reach the kernel's rarely used ones, n_gsm, n_hdlc, ...);
         * low 32 bits only */
        static const unsigned long bad_ioctls[] = { TIOCSTI, TIOCLINUX, TIOCSETD };
        for (size_t i = 0; i < ARRAY_SIZE(bad_ioctls); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, bad_ioctls[i]));
                if (r < 0)
                        return r;
        }
        /* sockets: no raw packet access, no obscure families */
        static const int bad_domains[] = { AF_PACKET, AF_KEY, AF_BLUETOOTH, AF_VSOCK,
                                           AF_ALG, AF_XDP, AF_TIPC, AF_RDS, AF_LLC, AF_CAN,
                                           AF_NFC, AF_ATMPVC, AF_ATMSVC, AF_X25, AF_AX25,
                                           AF_NETROM, AF_ROSE, AF_APPLETALK, AF_IPX, AF_DECnet };
        for (size_t i = 0; i < ARRAY_SIZE(bad_domains); i++) {
                /* the kernel reads the family as an int: compare the low 32 bits only */
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, (scmp_datum_t)bad_domains[i]));
                if (r < 0)
                        return r;
        }
        return 0;
}

int hxs_seccomp_build(hxs_seccomp *ret, hxs_error *err)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        int r, memfd = -1;
        if (!ctx)
                return hxs_fail(err, HXS_ERR_UNSUPPORTED, -ENOMEM, "seccomp_init failed");
        /* The same rules for the compat ABIs, or int 0x80 / x32 calls would bypass them. */
        if ((r = seccomp_arch_add(ctx, SCMP_ARCH_X86)) < 0 && r != -EEXIST)
                goto fail;
        if ((r = seccomp_arch_add(ctx, SCMP_ARCH_X32)) < 0 && r != -EEXIST)
                goto fail;
        if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
                goto fail;
        if ((r = add_rules(ctx)) < 0)
                goto fail;
        memfd = memfd_create("hxs-seccomp", MFD_CLOEXEC);
        if (memfd < 0) {
                r = -errno;
                goto fail;
        }
        if ((r = seccomp_export_bpf(ctx, memfd)) < 0)
                goto fail;
        off_t size = lseek(memfd, 0, SEEK_END);
        if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
            size / (off_t)sizeof(struct sock_filter) > 4096) {
                r = -EINVAL;
                goto fail;
        }
        struct sock_filter *insns = malloc((size_t)size);
        if (!insns) {
                r = -ENOMEM;
                goto fail;
        }
        if (pread(memfd, insns, (size_t)size, 0) != size) {
                free(insns);
                r = -EIO;
                goto fail;
        }
        close(memfd);
        seccomp_release(ctx);
        ret->insns = insns;
        ret->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
        return 0;
fail:
        if (memfd >= 0)
                close(memfd);
        seccomp_release(ctx);
        return hxs_fail(err, HXS_ERR_UNSUPPORTED, r, "building the seccomp filter: %s", strerror(-r));
}

void hxs_seccomp_free(hxs_seccomp *s)
{
        free(s->insns);
        s->insns = NULL;
        s->len = 0;
}

int hxs_seccomp_load(const hxs_seccomp *s)
{
        struct sock_fprog prog = { .len = s->len, .filter = s->insns };
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
                return -errno;
        return 0;
}
