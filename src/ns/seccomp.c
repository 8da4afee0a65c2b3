/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The policy is a deny list: default allow, and an errno for what a program run to
 * compute something never needs and an escape usually does (mounts, namespaces, ptrace,
 * keyrings, bpf, perf, userfaultfd, io_uring, kernel modules, kexec, ...). It is built
 * for x86_64, i386 and x32 so compat entry points carry the same rules.
 *
 * The policy is data (the tables below): the filter is compiled from it, and so are
 * docs/seccomp.md (sandbox_filter_describe) and the check that every rule is really in
 * the compiled program (sandbox_filter_verify: building fails otherwise, so no rule can be
 * dropped silently, whatever the libseccomp release).
 *
 * Traps handled here:
 *  - clone3 passes flags in memory the filter cannot read: answer ENOSYS so libc falls
 *    back to clone, whose flags we can check;
 *  - ioctl request numbers are compared on their low 32 bits (TIOCSTI with junk in the
 *    high bits is CVE-2019-10063); so are socket families (the kernel reads an int);
 *  - socketpair creates its sockets through the family's own code (loading its module
 *    first) before it asks whether the family can pair: it gets the family rules of
 *    socket;
 *  - system calls newer than the libseccomp release we build with have no name there:
 *    they are denied by number, in a few instructions put before libseccomp's program;
 *  - denial is an errno, not a kill, so programs see an ordinary error.
 *
 * The build compiles the policy once (hxs-seccomp-bpf, seccomp-gen.c) into the array
 * seccomp-bpf.c loads: a sandbox's start pays neither libseccomp nor the check.
 *
 * personality(2) stays allowed: its flags only change the caller's own address space
 * (mmap_min_addr still holds), and libseccomp cannot express "any value but these"
 * under a default-allow policy (two comparisons of one argument are refused).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include "core/error.h"
#include "ns/seccomp.h"

#define X32_SYSCALL_BIT 0x40000000u
#define MAX_INSNS 4096

/* ---- the policy ---------------------------------------------------------------------- */

/* Denied outright with EPERM, by group. A name an ABI does not have is skipped there
 * (vm86 exists only on i386); a name libseccomp does not know at all must be in
 * unified_nrs, or building fails. */
static const char *const g_mounts[] = {
        "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
        "fspick", "move_mount", "open_tree", "open_tree_attr", "mount_setattr", "statmount",
        "listmount", "open_by_handle_at", "name_to_handle_at", "quotactl", "quotactl_fd",
        "swapon", "swapoff", "nfsservctl", NULL,
};
static const char *const g_namespaces[] = { "unshare", "setns", NULL };
static const char *const g_processes[] = {
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
        "process_madvise", NULL,
};
static const char *const g_kernel[] = {
        "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
        "io_uring_register", "keyctl", "add_key", "request_key", "lookup_dcookie",
        "fanotify_init", "vm86", "vm86old", "modify_ldt", "uselib", "ustat", "sysfs",
        "_sysctl", "iopl", "ioperm", "syslog", NULL,
};
static const char *const g_machine[] = {
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
        "create_module", "reboot", "acct", "settimeofday", "clock_settime", "clock_adjtime",
        "adjtimex", "stime", "sethostname", "setdomainname", "vhangup", NULL,
};
static const char *const g_mempolicy[] = {
        "mbind", "migrate_pages", "move_pages", "set_mempolicy_home_node", NULL,
};

static const struct {
        const char *title;
        const char *const *calls;
} denied_groups[] = {
        { "filesystems and mounts", g_mounts },
        { "namespaces", g_namespaces },
        { "other processes", g_processes },
        { "kernel attack surface", g_kernel },
        { "the machine itself", g_machine },
        { "memory policy across processes", g_mempolicy },
};

/* System calls some libseccomp releases cannot name, by number. From 424 on, x86_64,
 * i386 and x32 share one numbering (x32 with its usual bit), so one number covers all
 * three ABIs. */
static const struct {
        const char *name;
        int nr;
} unified_nrs[] = {
        { "statmount", 457 },
        { "listmount", 458 },
        { "open_tree_attr", 467 },
};

/* clone: no new namespaces. Argument 0 holds the flags on all three ABIs. On clone,
 * CLONE_NEWTIME's bit is part of the exit signal (a new time namespace needs unshare or
 * clone3, both denied): its rule refuses exit signals of 128 and more, which no
 * program uses. */
static const struct {
        const char *name;
        unsigned long flag;
} ns_flags[] = {
        { "CLONE_NEWNS", CLONE_NEWNS },     { "CLONE_NEWUTS", CLONE_NEWUTS },
        { "CLONE_NEWIPC", CLONE_NEWIPC },   { "CLONE_NEWUSER", CLONE_NEWUSER },
        { "CLONE_NEWPID", CLONE_NEWPID },   { "CLONE_NEWNET", CLONE_NEWNET },
        { "CLONE_NEWCGROUP", CLONE_NEWCGROUP }, { "CLONE_NEWTIME", CLONE_NEWTIME },
};

/* ioctl: no faking terminal input, no console tricks, no line disciplines (the
 * sandbox's ptys would reach the kernel's rarely used ones, n_gsm, n_hdlc, ...); low 32
 * bits only. */
static const struct {
        const char *name;
        unsigned long req;
} bad_ioctls[] = { { "TIOCSTI", TIOCSTI }, { "TIOCLINUX", TIOCLINUX }, { "TIOCSETD", TIOCSETD } };

/* socket and socketpair: these families only; every other one below FAMILY_LIMIT (the
 * kernel has 46, and refuses any at or above its own count) gets EAFNOSUPPORT. */
static const struct {
        const char *name;
        int family;
} allowed_families[] = {
        { "AF_UNIX", AF_UNIX }, { "AF_INET", AF_INET }, { "AF_INET6", AF_INET6 },
        { "AF_NETLINK", AF_NETLINK },
};
#define FAMILY_LIMIT 64
static const char *const socket_calls[] = { "socket", "socketpair" };

static const struct {
        uint32_t scmp;          /* libseccomp's token */
        uint32_t audit;         /* seccomp_data.arch */
        uint32_t nr_bit;        /* ored into seccomp_data.nr */
        const char *name;
} arches[] = {
        { SCMP_ARCH_X86_64, AUDIT_ARCH_X86_64, 0, "x86_64" },
        { SCMP_ARCH_X86, AUDIT_ARCH_I386, 0, "i386" },
        { SCMP_ARCH_X32, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT, "x32" },
};
#define N_ARCHES (sizeof(arches) / sizeof(arches[0]))

static bool family_allowed(int family)
{
        for (size_t i = 0; i < ARRAY_SIZE(allowed_families); i++)
                if (allowed_families[i].family == family)
                        return true;
        return false;
}

static int unified_nr(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(unified_nrs); i++)
                if (strcmp(unified_nrs[i].name, name) == 0)
                        return unified_nrs[i].nr;
        return -1;
}

/* The number `name` has on ABI a, as seccomp_data.nr shows it: >= 0; -ENOENT when the
 * ABI has no such call; -EINVAL when neither libseccomp nor unified_nrs knows it. */
static long resolve(size_t a, const char *name, bool *ret_by_number)
{
        int nr = seccomp_syscall_resolve_name_arch(arches[a].scmp, name);
        if (ret_by_number)
                *ret_by_number = false;
        if (nr >= 0)
                return nr; /* libseccomp's x32 numbers carry the bit already */
        if (nr != __NR_SCMP_ERROR)
                return -ENOENT; /* a pseudo number: not on this ABI */
        int u = unified_nr(name);
        if (u < 0)
                return -EINVAL;
        if (ret_by_number)
                *ret_by_number = true;
        return (long)(arches[a].nr_bit | (uint32_t)u);
}

/* ---- building --------------------------------------------------------------------- */

static int add_rules(scmp_filter_ctx ctx, hxs_error *err)
{
        int r;
        for (size_t g = 0; g < ARRAY_SIZE(denied_groups); g++)
                for (const char *const *c = denied_groups[g].calls; *c; c++) {
                        /* libseccomp translates a native number (or its pseudo number
                         * for a call x86_64 lacks) to every ABI of the filter */
                        int nr = seccomp_syscall_resolve_name(*c);
                        if (nr == __NR_SCMP_ERROR) {
                                if (unified_nr(*c) < 0)
                                        return err_fail(err, HXS_ERR_UNSUPPORTED, -EINVAL,
                                                        "building the seccomp filter: no number for %s", *c);
                                continue; /* denied by number, before libseccomp's program */
                        }
                        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
                        if (r < 0 && r != -EEXIST)
                                return err_fail(err, HXS_ERR_UNSUPPORTED, r, "building the seccomp filter: %s: %s",
                                                *c, strerror(-r));
                }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                return err_fail(err, HXS_ERR_UNSUPPORTED, r, "building the seccomp filter: clone3: %s", strerror(-r));
        for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i].flag, ns_flags[i].flag));
                if (r < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, r, "building the seccomp filter: clone %s: %s",
                                        ns_flags[i].name, strerror(-r));
        }
        for (size_t i = 0; i < ARRAY_SIZE(bad_ioctls); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, bad_ioctls[i].req));
                if (r < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, r, "building the seccomp filter: ioctl %s: %s",
                                        bad_ioctls[i].name, strerror(-r));
        }
        for (size_t s = 0; s < ARRAY_SIZE(socket_calls); s++) {
                int nr = seccomp_syscall_resolve_name(socket_calls[s]);
                for (int fam = 0; fam < FAMILY_LIMIT; fam++) {
                        if (family_allowed(fam))
                                continue;
                        /* the kernel reads the family as an int: compare the low 32 bits */
                        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, 1,
                                             SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, (scmp_datum_t)fam));
                        if (r < 0)
                                return err_fail(err, HXS_ERR_UNSUPPORTED, r,
                                                "building the seccomp filter: %s family %d: %s",
                                                socket_calls[s], fam, strerror(-r));
                }
        }
        return 0;
}

/* The calls libseccomp could not name, as instructions run before its program: for
 * each ABI, compare the number and answer EPERM; otherwise fall through (libseccomp's
 * program loads what it needs itself). */
static int number_prologue(struct sock_filter *out, size_t room, size_t *ret_len)
{
        size_t n = 0;
#define EMIT(...)                                       \
        do {                                            \
                if (n >= room)                          \
                        return -E2BIG;                  \
                out[n++] = (struct sock_filter)__VA_ARGS__; \
        } while (0)
        for (size_t a = 0; a < N_ARCHES; a++) {
                uint32_t nrs[ARRAY_SIZE(unified_nrs)];
                size_t k = 0;
                for (size_t i = 0; i < ARRAY_SIZE(unified_nrs); i++) {
                        bool by_number;
                        long nr = resolve(a, unified_nrs[i].name, &by_number);
                        if (nr >= 0 && by_number)
                                nrs[k++] = (uint32_t)nr;
                }
                if (k == 0)
                        continue;
                /* if (arch != this) skip the block; for each number: if (nr == it) EPERM */
                EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
                EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arches[a].audit, 0, (uint8_t)(1 + 2 * k)));
                EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
                for (size_t i = 0; i < k; i++) {
                        EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[i], 0, 1));
                        EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)));
                }
        }
#undef EMIT
        *ret_len = n;
        return 0;
}

/* ---- checking the compiled program ---------------------------------------------------- */

/* The classic BPF that libseccomp and number_prologue emit. Unknown instructions, or
 * running off the end, evaluate to 0 (SECCOMP_RET_KILL_THREAD), which no check expects. */
static uint32_t bpf_run(const struct sock_filter *f, size_t n, const struct seccomp_data *d, size_t *steps)
{
        uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = { 0 };
        for (size_t pc = 0; pc < n; pc++) {
                const struct sock_filter *i = &f[pc];
                ++*steps;
                switch (i->code) {
                case BPF_LD | BPF_W | BPF_ABS:
                        if (i->k > sizeof(*d) - sizeof(uint32_t) || i->k % 4)
                                return 0;
                        memcpy(&A, (const char *)d + i->k, sizeof(A));
                        break;
                case BPF_LD | BPF_IMM: A = i->k; break;
                case BPF_LDX | BPF_IMM: X = i->k; break;
                case BPF_LD | BPF_MEM: if (i->k >= BPF_MEMWORDS) return 0; A = M[i->k]; break;
                case BPF_LDX | BPF_MEM: if (i->k >= BPF_MEMWORDS) return 0; X = M[i->k]; break;
                case BPF_ST: if (i->k >= BPF_MEMWORDS) return 0; M[i->k] = A; break;
                case BPF_STX: if (i->k >= BPF_MEMWORDS) return 0; M[i->k] = X; break;
                case BPF_MISC | BPF_TAX: X = A; break;
                case BPF_MISC | BPF_TXA: A = X; break;
                case BPF_ALU | BPF_AND | BPF_K: A &= i->k; break;
                case BPF_ALU | BPF_OR | BPF_K: A |= i->k; break;
                case BPF_ALU | BPF_ADD | BPF_K: A += i->k; break;
                case BPF_ALU | BPF_SUB | BPF_K: A -= i->k; break;
                case BPF_JMP | BPF_JA: pc += i->k; break;
                case BPF_JMP | BPF_JEQ | BPF_K: pc += (A == i->k) ? i->jt : i->jf; break;
                case BPF_JMP | BPF_JGT | BPF_K: pc += (A > i->k) ? i->jt : i->jf; break;
                case BPF_JMP | BPF_JGE | BPF_K: pc += (A >= i->k) ? i->jt : i->jf; break;
                case BPF_JMP | BPF_JSET | BPF_K: pc += (A & i->k) ? i->jt : i->jf; break;
                case BPF_RET | BPF_K: return i->k;
                default: return 0;
                }
        }
        return 0;
}

uint32_t sandbox_filter_eval(const sandbox_filter *s, uint32_t arch, uint32_t nr, const uint64_t args[6])
{
        struct seccomp_data d = { .nr = (int)nr, .arch = arch };
        size_t steps = 0;
        if (args)
                memcpy(d.args, args, sizeof(d.args));
        return bpf_run(s->insns, s->len, &d, &steps);
}

size_t sandbox_filter_steps(const sandbox_filter *s, uint32_t arch, uint32_t nr)
{
        struct seccomp_data d = { .nr = (int)nr, .arch = arch };
        size_t steps = 0;
        (void)bpf_run(s->insns, s->len, &d, &steps);
        return steps;
}

static uint32_t errno_action(int e)
{
        return SECCOMP_RET_ERRNO | ((uint32_t)e & SECCOMP_RET_DATA);
}

/* One expectation: on ABI a, call nr with args answers `want`. */
static int expect(const sandbox_filter *s, size_t a, long nr, uint64_t a0, uint64_t a1, uint32_t want,
                  const char *what, hxs_error *err)
{
        uint64_t args[6] = { a0, a1 };
        uint32_t got = sandbox_filter_eval(s, arches[a].audit, (uint32_t)nr, args);
        if (got == want)
                return 0;
        return err_fail(err, HXS_ERR_UNSUPPORTED, -EINVAL,
                        "building the seccomp filter: %s %s (number %ld) answers %#x, not %#x",
                        arches[a].name, what, nr, got, want);
}

/* Every rule of the policy, evaluated on the compiled program for every ABI, and a
 * few calls that must stay allowed. */
int sandbox_filter_verify(const sandbox_filter *s, hxs_error *err)
{
        int r;
        for (size_t a = 0; a < N_ARCHES; a++) {
                for (size_t g = 0; g < ARRAY_SIZE(denied_groups); g++)
                        for (const char *const *c = denied_groups[g].calls; *c; c++) {
                                long nr = resolve(a, *c, NULL);
                                if (nr == -ENOENT)
                                        continue;
                                if (nr < 0)
                                        return err_fail(err, HXS_ERR_UNSUPPORTED, -EINVAL,
                                                        "building the seccomp filter: no number for %s", *c);
                                if ((r = expect(s, a, nr, 0, 0, errno_action(EPERM), *c, err)) < 0)
                                        return r;
                        }
                long clone3 = resolve(a, "clone3", NULL), clone = resolve(a, "clone", NULL),
                     ioctl = resolve(a, "ioctl", NULL), read = resolve(a, "read", NULL);
                if (clone3 < 0 || clone < 0 || ioctl < 0 || read < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, -EINVAL,
                                        "building the seccomp filter: %s lacks clone, clone3, ioctl or read",
                                        arches[a].name);
                if ((r = expect(s, a, clone3, 0, 0, errno_action(ENOSYS), "clone3", err)) < 0 ||
                    (r = expect(s, a, clone, 17 /* SIGCHLD */, 0, SECCOMP_RET_ALLOW, "clone (fork)", err)) < 0 ||
                    (r = expect(s, a, read, 0, 0, SECCOMP_RET_ALLOW, "read", err)) < 0 ||
                    (r = expect(s, a, ioctl, 0, 0x5401 /* TCGETS */, SECCOMP_RET_ALLOW, "ioctl TCGETS", err)) < 0)
                        return r;
                for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++)
                        if ((r = expect(s, a, clone, ns_flags[i].flag | 17, 0, errno_action(EPERM),
                                        ns_flags[i].name, err)) < 0)
                                return r;
                for (size_t i = 0; i < ARRAY_SIZE(bad_ioctls); i++)
                        if ((r = expect(s, a, ioctl, 0, bad_ioctls[i].req | (1ULL << 32), errno_action(EPERM),
                                        bad_ioctls[i].name, err)) < 0)
                                return r;
                for (size_t c = 0; c < ARRAY_SIZE(socket_calls); c++) {
                        /* libseccomp names i386's direct calls (359, 360) by the
                         * multiplexer's pseudo numbers; socketcall is checked below */
                        long nr = arches[a].scmp == SCMP_ARCH_X86 ? (long)(359 + c) : resolve(a, socket_calls[c], NULL);
                        if (nr < 0)
                                return err_fail(err, HXS_ERR_UNSUPPORTED, -EINVAL,
                                                "building the seccomp filter: %s lacks %s", arches[a].name,
                                                socket_calls[c]);
                        for (int fam = 0; fam < FAMILY_LIMIT; fam++) {
                                uint32_t want = family_allowed(fam) ? SECCOMP_RET_ALLOW : errno_action(EAFNOSUPPORT);
                                if ((r = expect(s, a, nr, (uint64_t)fam, 1, want, socket_calls[c], err)) < 0 ||
                                    (r = expect(s, a, nr, (uint64_t)fam | (1ULL << 32), 1, want, socket_calls[c],
                                                err)) < 0)
                                        return r;
                        }
                }
        }
        /* i386 socketcall(SYS_SOCKET / SYS_SOCKETPAIR, args): the family is in memory */
        long socketcall = resolve(1, "socketcall", NULL);
        if (socketcall < 0)
                return err_fail(err, HXS_ERR_UNSUPPORTED, -EINVAL, "building the seccomp filter: no i386 socketcall");
        if ((r = expect(s, 1, socketcall, 1 /* SYS_SOCKET */, 0, errno_action(EAFNOSUPPORT), "socketcall(SYS_SOCKET)",
                        err)) < 0 ||
            (r = expect(s, 1, socketcall, 8 /* SYS_SOCKETPAIR */, 0, errno_action(EAFNOSUPPORT),
                        "socketcall(SYS_SOCKETPAIR)", err)) < 0)
                return r;
        return 0;
}

int sandbox_filter_compile(sandbox_filter *ret, hxs_error *err)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        int r, memfd = -1;
        struct sock_filter *insns = NULL;
        if (!ctx)
                return err_fail(err, HXS_ERR_UNSUPPORTED, -ENOMEM, "seccomp_init failed");
        /* The same rules for the compat ABIs, or int 0x80 / x32 calls would bypass them. */
        if ((r = seccomp_arch_add(ctx, SCMP_ARCH_X86)) < 0 && r != -EEXIST)
                goto fail;
        if ((r = seccomp_arch_add(ctx, SCMP_ARCH_X32)) < 0 && r != -EEXIST)
                goto fail;
        if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
                goto fail;
        /* A binary tree of system call numbers rather than a list: attaching the filter
         * runs it once for every number of every ABI (the kernel's cache of calls it may
         * allow without running it), with interrupts off, and every call the cache
         * cannot answer runs it again. Through a list that costs each sandbox's start
         * about 0.3 ms more (345 instructions, of which a late number walks most). */
        if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
                goto fail;
        if ((r = add_rules(ctx, err)) < 0) {
                seccomp_release(ctx);
                return r;
        }
        memfd = memfd_create("hxs-seccomp", MFD_CLOEXEC);
        if (memfd < 0) {
                r = -errno;
                goto fail;
        }
        if ((r = seccomp_export_bpf(ctx, memfd)) < 0)
                goto fail;
        off_t size = lseek(memfd, 0, SEEK_END);
        if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
            size / (off_t)sizeof(struct sock_filter) > MAX_INSNS) {
                r = -EINVAL;
                goto fail;
        }
        size_t n_lib = (size_t)(size / (off_t)sizeof(struct sock_filter)), n_pro = 0;
        insns = calloc(MAX_INSNS, sizeof(*insns));
        if (!insns) {
                r = -ENOMEM;
                goto fail;
        }
        if ((r = number_prologue(insns, MAX_INSNS - n_lib, &n_pro)) < 0)
                goto fail;
        if (pread(memfd, insns + n_pro, (size_t)size, 0) != size) {
                r = -EIO;
                goto fail;
        }
        close(memfd);
        seccomp_release(ctx);
        sandbox_filter s = { .insns = insns, .len = (unsigned short)(n_pro + n_lib) };
        if ((r = sandbox_filter_verify(&s, err)) < 0) {
                free(insns);
                return r;
        }
        *ret = s;
        return 0;
fail:
        free(insns);
        if (memfd >= 0)
                close(memfd);
        seccomp_release(ctx);
        return err_fail(err, HXS_ERR_UNSUPPORTED, r, "building the seccomp filter: %s", strerror(-r));
}

/* ---- the policy as Markdown ------------------------------------------------------------ */

static void describe_numbers(FILE *f, const char *name)
{
        for (size_t a = 0; a < N_ARCHES; a++) {
                long nr = resolve(a, name, NULL);
                if (nr >= 0)
                        fprintf(f, " %ld |", nr & ~(long)X32_SYSCALL_BIT);
                else
                        fprintf(f, " – |");
        }
}

int sandbox_filter_describe(FILE *f)
{
        fprintf(f, "# The sandbox's seccomp policy\n\n"
                   "<!-- generated by `hxs-seccomp-doc` from the tables in src/ns/seccomp.c; "
                   "the build checks that this file matches: do not edit it by hand -->\n\n"
                   "Every program in a namespace sandbox (and in a microVM's sandbox) runs under this\n"
                   "filter, and so does the sandbox's init. Anything not listed is allowed. The same\n"
                   "rules apply to the three x86 entry points: x86_64, i386 (`int $0x80`) and x32\n"
                   "(x86_64 numbers with bit 30 set; the table gives the number without it). A\n"
                   "denied call returns an error, it does not kill the program. Building the filter\n"
                   "evaluates the compiled program against every rule below and fails if one is\n"
                   "missing.\n\n"
                   "## Denied, whatever the arguments\n\n"
                   "| system call | group | x86_64 | i386 | x32 | answer |\n"
                   "| --- | --- | --- | --- | --- | --- |\n");
        for (size_t g = 0; g < ARRAY_SIZE(denied_groups); g++)
                for (const char *const *c = denied_groups[g].calls; *c; c++) {
                        fprintf(f, "| `%s` | %s |", *c, denied_groups[g].title);
                        describe_numbers(f, *c);
                        fprintf(f, " EPERM |\n");
                }
        fprintf(f, "| `clone3` | flags in memory the filter cannot read: libc falls back to `clone` |");
        describe_numbers(f, "clone3");
        fprintf(f, " ENOSYS |\n\n");

        fprintf(f, "## Denied for some arguments\n\n"
                   "| system call | denied when | answer |\n"
                   "| --- | --- | --- |\n"
                   "| `clone` | the flags (argument 0) contain any of");
        for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++)
                fprintf(f, "%s `%s`", i ? "," : "", ns_flags[i].name);
        fprintf(f, " | EPERM |\n| `ioctl` | the request's low 32 bits are");
        for (size_t i = 0; i < ARRAY_SIZE(bad_ioctls); i++)
                fprintf(f, "%s `%s` (%#lx)", i == 0 ? "" : i + 1 < ARRAY_SIZE(bad_ioctls) ? "," : " or",
                        bad_ioctls[i].name, bad_ioctls[i].req);
        fprintf(f, " | EPERM |\n| `socket`, `socketpair` | the family's low 32 bits are anything but");
        for (size_t i = 0; i < ARRAY_SIZE(allowed_families); i++)
                fprintf(f, "%s `%s` (%d)", i ? "," : "", allowed_families[i].name, allowed_families[i].family);
        fprintf(f, " | EAFNOSUPPORT |\n"
                   "| `socketcall` (i386) | `SYS_SOCKET` or `SYS_SOCKETPAIR`, whatever the family (its "
                   "arguments are in memory; i386 programs use the direct `socket` and `socketpair` calls) "
                   "| EAFNOSUPPORT |\n\n"
                   "Not filtered, on purpose: `personality` (its flags change only the caller's own address\n"
                   "space; Python and Node call it), `prctl`, `chmod`, `listen`, and the netlink protocols\n"
                   "of `AF_NETLINK` (the sandbox has no capabilities in its network namespace, and\n"
                   "`getaddrinfo` and interface listing need `NETLINK_ROUTE`). `sysinfo` is allowed and\n"
                   "shows the host's load and memory (see the security model, docs/security.md).\n");
        return ferror(f) ? -EIO : 0;
}
