/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hxs-probe: run INSIDE a sandbox (never on the host; it refuses to run without a
 * seccomp filter and no_new_privs). It calls every syscall the sandbox's seccomp
 * filter denies, with harmless arguments, and checks that the answer is the filter's
 * errno (EPERM; ENOSYS for clone3; EAFNOSUPPORT for denied socket families) rather than
 * the kernel's own (EBADF, EFAULT, EINVAL, ENOSYS, ESRCH, success...). Arguments are
 * chosen so that, where the kernel validates them before checking capabilities, it
 * would answer something else than EPERM: a filter hole then shows as a FAIL. (A
 * socket family the kernel lacks answers EAFNOSUPPORT by itself: there only the
 * families it has tell, and the engine's own build-time check of the filter covers
 * the rest.) Where
 * the kernel checks a capability first (pivot_root, fsopen, ...) the answer cannot be
 * told apart; those lines say so.
 *
 * The same checks run through the three x86 entry points:
 *   x86_64  syscall()
 *   i386    int $0x80 with i386 numbers (compat entry; pointers must fit 32 bits, so
 *           only NULL, small bad pointers and integers are passed)
 *   x32     x86_64 numbers | 0x40000000 (x32 numbering for the few that differ). A
 *           kernel without x32 answers ENOSYS; EPERM means the filter answered first.
 *
 * Output: one line per check, "ok NAME [(note)]" or "FAIL NAME got ERRNO [(note)]",
 * plus "# ..." information lines. Exit status 1 if any check failed, 2 on usage
 * problems, 3 if not inside a sandbox.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

#define X32_BIT 0x40000000L
#define NONE (-1L)

static int checks, failures;
static int have_i386; /* does int $0x80 reach the kernel here? */

static const char *ename(int e)
{
        const char *n = strerrorname_np(e);
        return n ? n : "E???";
}

/* rc: >= 0 success, < 0 minus an errno. `alt` is a second acceptable errno (0: none). */
static void verdict(const char *name, long rc, int want, int alt, const char *note)
{
        checks++;
        if (rc < 0 && (-rc == want || (alt && -rc == alt))) {
                if (note && note[0])
                        printf("ok %s (%s; %s)\n", name, ename((int)-rc), note);
                else if (alt)
                        printf("ok %s (%s)\n", name, ename((int)-rc));
                else
                        printf("ok %s\n", name);
                return;
        }
        failures++;
        if (rc >= 0)
                printf("FAIL %s got success (rc=%ld)%s%s\n", name, rc, note && note[0] ? "; " : "",
                       note ? note : "");
        else
                printf("FAIL %s got %s (wanted %s)%s%s\n", name, ename((int)-rc), ename(want),
                       note && note[0] ? "; " : "", note ? note : "");
}

static long sys64(long nr, long a, long b, long c, long d, long e)
{
        long r = syscall(nr, a, b, c, d, e, 0L);
        return r < 0 ? -(long)errno : r;
}

/* The i386 compat entry from a 64-bit process. r8-r11 are clobbered by the kernel. */
static long sys32(long nr, long a, long b, long c, long d, long e)
{
        long ret;
        __asm__ volatile("int $0x80"
                         : "=a"(ret)
                         : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e)
                         : "memory", "cc", "r8", "r9", "r10", "r11");
        return (long)(int)ret;
}

/* The syscall table. Numbers per ABI (NONE: the ABI has no such call), five harmless
 * arguments (small integers, -1 fds, NULL or a bad pointer 1, invalid flags), the
 * filter's errno, and a note where the kernel's own answer would look the same. The
 * comments say what the kernel answers without the filter. */
struct denied_call {
        const char *name;
        long n64, n32, nx32;
        long a[5];
        int want;
        const char *note;
};

#define KERNEL_EPERM "kernel checks a capability first: its EPERM looks the same"

static const struct denied_call calls[] = {
        /* filesystems and mounts */
        { "mount", 165, 21, 165, { 1, 1, 1, 0, 0 }, EPERM, NULL /* EFAULT */ },
        { "umount", NONE, 22, NONE, { 0, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "umount2", 166, 52, 166, { 0, 0x7fff0000, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "pivot_root", 155, 217, 155, { 0, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "chroot", 161, 61, 161, { 1, 0, 0, 0, 0 }, EPERM, NULL /* EFAULT */ },
        { "fsopen", 430, 430, 430, { 0, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "fsconfig", 431, 431, 431, { -1, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL/EBADF */ },
        { "fsmount", 432, 432, 432, { -1, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "fspick", 433, 433, 433, { -1, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "move_mount", 429, 429, 429, { -1, 0, -1, 0, 0xffffffff }, EPERM, KERNEL_EPERM },
        { "open_tree", 428, 428, 428, { -1, 0, 0xffffffff, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "mount_setattr", 442, 442, 442, { -1, 0, 0xffffffff, 0, 0 }, EPERM, NULL /* EINVAL */ },
        /* newer than some libseccomp releases: denied by number (one numbering since 424) */
        { "open_tree_attr", 467, 467, 467, { -1, 0, 0xffffffff, 0, 0 }, EPERM, NULL /* EINVAL/EBADF */ },
        { "statmount", 457, 457, 457, { 0, 0, 0, 0xffffffff, 0 }, EPERM, NULL /* EINVAL/EFAULT */ },
        { "listmount", 458, 458, 458, { 0, 0, 0, 0xffffffff, 0 }, EPERM, NULL /* EINVAL/EFAULT */ },
        { "open_by_handle_at", 304, 342, 304, { -1, 0, 0, 0, 0 }, EPERM, NULL /* EBADF */ },
        { "name_to_handle_at", 303, 341, 303, { -1, 0, 0, 0, 0xffffffff }, EPERM, NULL /* EINVAL */ },
        { "quotactl", 179, 131, 179, { 0xff, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "quotactl_fd", 443, 443, 443, { -1, 0xff, 0, 0, 0 }, EPERM, NULL /* EBADF */ },
        { "swapon", 167, 87, 167, { 0, 0xffffffff, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "swapoff", 168, 115, 168, { 1, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "nfsservctl", 180, 169, NONE, { 0, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS */ },
        /* namespaces: unshare(0x1) is an invalid flag (kernel: EINVAL) */
        { "unshare", 272, 310, 272, { 0x1, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "setns", 308, 346, 308, { -1, 0, 0, 0, 0 }, EPERM, NULL /* EBADF */ },
        /* other processes: PTRACE_PEEKDATA on pid 1, which we do not trace (ESRCH) */
        { "ptrace", 101, 26, 521, { 2 /* PTRACE_PEEKDATA */, 1, 0, 0, 0 }, EPERM, NULL /* ESRCH */ },
        { "process_vm_readv", 310, 347, 539, { 1, 0, 0x7fffffff, 0, 0 }, EPERM, NULL /* EINVAL: > UIO_MAXIOV */ },
        { "process_vm_writev", 311, 348, 540, { 1, 0, 0x7fffffff, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "kcmp", 312, 349, 312, { 0x7fffffff, 0x7fffffff, 99, 0, 0 }, EPERM, NULL /* ESRCH */ },
        { "pidfd_getfd", 438, 438, 438, { -1, 0, 0, 0, 0 }, EPERM, NULL /* EBADF */ },
        { "process_madvise", 440, 440, 440, { -1, 0, 0, 0, 1 }, EPERM, NULL /* EINVAL/EBADF */ },
        /* kernel attack surface */
        { "bpf", 321, 357, 321, { 0x7fff, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "perf_event_open", 298, 336, 298, { 0, 0, -1, -1, 0xffffffff }, EPERM, NULL /* EINVAL */ },
        { "userfaultfd", 323, 374, 323, { 1 | 0x10, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "io_uring_setup", 425, 425, 425, { 1, 0, 0, 0, 0 }, EPERM, NULL /* EFAULT */ },
        { "io_uring_enter", 426, 426, 426, { -1, 0, 0, 0, 0 }, EPERM, NULL /* EBADF */ },
        { "io_uring_register", 427, 427, 427, { -1, 0, 0, 0, 0 }, EPERM, NULL /* EBADF */ },
        { "keyctl", 250, 288, 250, { 0x7fff, 0, 0, 0, 0 }, EPERM, NULL /* EOPNOTSUPP */ },
        { "add_key", 248, 286, 248, { 0, 0, 0, 0, 0 }, EPERM, NULL /* EFAULT */ },
        { "request_key", 249, 287, 249, { 0, 0, 0, 0, 0 }, EPERM, NULL /* EFAULT */ },
        { "lookup_dcookie", 212, 253, 212, { 0, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS */ },
        { "fanotify_init", 300, 338, 300, { 0x80000000, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "vm86old", NONE, 113, NONE, { 0, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS in compat */ },
        { "vm86", NONE, 166, NONE, { 0, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS in compat */ },
        { "modify_ldt", 154, 123, 154, { 99, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS */ },
        { "uselib", 134, 86, NONE, { 1, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS/EFAULT */ },
        { "ustat", 136, 62, 136, { 0, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "sysfs", 139, 135, 139, { 99, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "_sysctl", 156, 149, NONE, { 0, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS */ },
        { "iopl", 172, 110, 172, { 99, 0, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "ioperm", 173, 101, 173, { 0, 0, 1, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "syslog", 103, 103, 103, { 3, 0, -1, 0, 0 }, EPERM,
          "with dmesg_restrict=1 the kernel's EPERM looks the same" },
        /* the machine itself */
        { "kexec_load", 246, 283, 528, { 0, 0, 0, 0xffff0000, 0 }, EPERM, NULL /* EINVAL/ENOSYS */ },
        { "kexec_file_load", 320, NONE, 320, { -1, -1, 0, 0, 0xffffffff }, EPERM, NULL },
        { "init_module", 175, 128, 175, { 0, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS w/o modules */ },
        { "finit_module", 313, 350, 313, { -1, 0, 0xffffffff, 0, 0 }, EPERM, NULL },
        { "delete_module", 176, 129, 176, { 0, 0, 0, 0, 0 }, EPERM, NULL },
        { "create_module", 174, 127, NONE, { 0, 0, 0, 0, 0 }, EPERM, NULL /* ENOSYS */ },
        { "reboot", 169, 88, 169, { 0, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM /* bad magic anyway */ },
        { "acct", 163, 51, 163, { 1, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "settimeofday", 164, 79, 164, { 1, 0, 0, 0, 0 }, EPERM, NULL /* EFAULT */ },
        { "clock_settime", 227, 264, 227, { 99, 1, 0, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "clock_adjtime", 305, 343, 305, { 99, 0, 0, 0, 0 }, EPERM, NULL /* EFAULT/EINVAL */ },
        { "adjtimex", 159, 124, 159, { 0, 0, 0, 0, 0 }, EPERM, NULL /* EFAULT */ },
        { "stime", NONE, 25, NONE, { 0, 0, 0, 0, 0 }, EPERM, NULL /* EFAULT */ },
        { "sethostname", 170, 74, 170, { 0, 99999, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "setdomainname", 171, 121, 171, { 0, 99999, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        { "vhangup", 153, 111, 153, { 0, 0, 0, 0, 0 }, EPERM, KERNEL_EPERM },
        /* memory policy across processes */
        { "mbind", 237, 274, 237, { 0, 0, 99, 0, 0 }, EPERM, NULL /* EINVAL */ },
        { "migrate_pages", 256, 294, 256, { 0x7fffffff, 0, 0, 0, 0 }, EPERM, NULL /* ESRCH */ },
        { "move_pages", 279, 317, 533, { 0x7fffffff, 0, 0, 0, 0 }, EPERM, NULL /* ESRCH */ },
        { "set_mempolicy_home_node", 450, 450, 450, { 0, 0, 0, 99, 0 }, EPERM, NULL /* EINVAL */ },
        /* clone3 hides its flags in memory: the filter answers ENOSYS (kernel: EINVAL) */
        { "clone3", 435, 435, 435, { 0, 0, 0, 0, 0 }, ENOSYS, NULL },
};

/* ---- clone with namespace flags: on success the child leaves at once ---------------- */

static long clone_ns(int abi, unsigned long flags)
{
        long r;
        fflush(stdout);
        if (abi == 32)
                r = sys32(120, (long)(flags | SIGCHLD), 0, 0, 0, 0);
        else if (abi == 0x32)
                r = sys64(X32_BIT | 56, (long)(flags | SIGCHLD), 0, 0, 0, 0);
        else
                r = sys64(SYS_clone, (long)(flags | SIGCHLD), 0, 0, 0, 0);
        if (r == 0)
                _exit(0);
        if (r > 0)
                (void)waitpid((pid_t)r, NULL, 0);
        return r;
}

static const struct {
        const char *name;
        unsigned long flag;
} ns_flags[] = {
        { "CLONE_NEWUSER", CLONE_NEWUSER }, { "CLONE_NEWNS", CLONE_NEWNS },
        { "CLONE_NEWPID", CLONE_NEWPID },   { "CLONE_NEWNET", CLONE_NEWNET },
        { "CLONE_NEWUTS", CLONE_NEWUTS },   { "CLONE_NEWIPC", CLONE_NEWIPC },
        { "CLONE_NEWCGROUP", CLONE_NEWCGROUP },
};

static const struct {
        const char *name;
        int family;
        int type;
} families[] = {
        { "AF_PACKET", AF_PACKET, SOCK_RAW },     { "AF_KEY", AF_KEY, SOCK_RAW },
        { "AF_BLUETOOTH", AF_BLUETOOTH, SOCK_STREAM }, { "AF_VSOCK", AF_VSOCK, SOCK_STREAM },
        { "AF_ALG", AF_ALG, SOCK_SEQPACKET },      { "AF_XDP", AF_XDP, SOCK_RAW },
        { "AF_TIPC", AF_TIPC, SOCK_RDM },          { "AF_RDS", AF_RDS, SOCK_SEQPACKET },
        { "AF_LLC", AF_LLC, SOCK_DGRAM },          { "AF_CAN", AF_CAN, SOCK_RAW },
        { "AF_NFC", AF_NFC, SOCK_SEQPACKET },      { "AF_ATMPVC", AF_ATMPVC, SOCK_DGRAM },
        { "AF_ATMSVC", AF_ATMSVC, SOCK_DGRAM },    { "AF_X25", AF_X25, SOCK_SEQPACKET },
        { "AF_AX25", AF_AX25, SOCK_SEQPACKET },    { "AF_NETROM", AF_NETROM, SOCK_SEQPACKET },
        { "AF_ROSE", AF_ROSE, SOCK_SEQPACKET },    { "AF_APPLETALK", AF_APPLETALK, SOCK_DGRAM },
        { "AF_IPX", AF_IPX, SOCK_DGRAM },          { "AF_DECnet", AF_DECnet, SOCK_SEQPACKET },
        /* families with a record of kernel bugs, auto-loadable on distribution kernels */
        { "AF_RXRPC", 33, SOCK_DGRAM },            { "AF_KCM", 41, SOCK_DGRAM },
        { "AF_SMC", 43, SOCK_STREAM },             { "AF_PPPOX", 24, SOCK_STREAM },
        { "AF_PHONET", 35, SOCK_DGRAM },           { "AF_IEEE802154", 36, SOCK_DGRAM },
        { "AF_CAIF", 37, SOCK_STREAM },            { "AF_MCTP", 45, SOCK_DGRAM },
        { "AF_QIPCRTR", 42, SOCK_DGRAM },          { "AF_ISDN", 34, SOCK_RAW },
};

static void close_if_fd(long rc)
{
        if (rc >= 0)
                close((int)rc);
}

/* Memory below 4 GiB for the i386 socketcall argument block. */
static uint32_t *low_page(void)
{
        static uint32_t *page;
        if (!page) {
                void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
                if (p == MAP_FAILED || (uintptr_t)p > 0xfffff000u)
                        return NULL;
                page = p;
        }
        return page;
}

/* ---- the groups of checks ----------------------------------------------------------- */

static void check_table(void)
{
        char name[128];
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
                const struct denied_call *c = &calls[i];
                const long *a = c->a;
                long r;
                if (c->n64 != NONE) {
                        snprintf(name, sizeof(name), "x86_64.%s", c->name);
                        r = sys64(c->n64, a[0], a[1], a[2], a[3], a[4]);
                        close_if_fd(r);
                        verdict(name, r, c->want, 0, c->note);
                }
                if (c->n32 != NONE && have_i386) {
                        snprintf(name, sizeof(name), "i386.%s", c->name);
                        r = sys32(c->n32, a[0], a[1], a[2], a[3], a[4]);
                        close_if_fd(r);
                        verdict(name, r, c->want, 0, c->note);
                }
                if (c->nx32 != NONE) {
                        snprintf(name, sizeof(name), "x32.%s", c->name);
                        r = sys64(X32_BIT | c->nx32, a[0], a[1], a[2], a[3], a[4]);
                        close_if_fd(r);
                        /* ENOSYS: x32 is disabled in the kernel (the call went nowhere) */
                        const char *note = NULL;
                        if (c->want == ENOSYS)
                                note = "the filter and a kernel without x32 both answer ENOSYS";
                        else if (r == -ENOSYS)
                                note = "x32 disabled in the kernel";
                        else if (r == -(long)c->want)
                                note = "the filter answered";
                        verdict(name, r, c->want, c->want == ENOSYS ? 0 : ENOSYS, note);
                }
        }
}

static void check_namespaces(void)
{
        char name[128];
        /* unshare with a real namespace flag, beyond the invalid-flag call in the table */
        long r = sys64(SYS_unshare, CLONE_NEWUSER, 0, 0, 0, 0);
        verdict("x86_64.unshare.CLONE_NEWUSER", r, EPERM, 0, NULL);
        if (have_i386) {
                r = sys32(310, CLONE_NEWUSER, 0, 0, 0, 0);
                verdict("i386.unshare.CLONE_NEWUSER", r, EPERM, 0, NULL);
        }
        r = sys64(SYS_unshare, CLONE_NEWNS, 0, 0, 0, 0);
        verdict("x86_64.unshare.CLONE_NEWNS", r, EPERM, 0, NULL);

        for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
                snprintf(name, sizeof(name), "x86_64.clone.%s", ns_flags[i].name);
                verdict(name, clone_ns(64, ns_flags[i].flag), EPERM, 0, NULL);
                if (!have_i386)
                        continue;
                snprintf(name, sizeof(name), "i386.clone.%s", ns_flags[i].name);
                verdict(name, clone_ns(32, ns_flags[i].flag), EPERM, 0, NULL);
        }
        r = clone_ns(0x32, CLONE_NEWUSER);
        verdict("x32.clone.CLONE_NEWUSER", r, EPERM, ENOSYS,
                r == -ENOSYS ? "x32 disabled in the kernel" : NULL);
        /* junk in the upper half of the flags must not hide CLONE_NEWUSER */
        verdict("x86_64.clone.CLONE_NEWUSER|hibits", clone_ns(64, CLONE_NEWUSER | (1UL << 40)), EPERM,
                0, NULL);
        /* CLONE_NEWTIME (0x80) is part of clone's exit-signal byte: only unshare and clone3
         * (ENOSYS, above) take it. With CLONE_NEWUSER alongside, the kernel would grant it
         * (the new user namespace holds the capability), so EPERM is the filter's. */
        r = sys64(SYS_unshare, CLONE_NEWUSER | CLONE_NEWTIME, 0, 0, 0, 0);
        verdict("x86_64.unshare.CLONE_NEWTIME", r, EPERM, 0, NULL);
        r = sys64(X32_BIT | 272, CLONE_NEWUSER | CLONE_NEWTIME, 0, 0, 0, 0);
        verdict("x32.unshare.CLONE_NEWTIME", r, EPERM, 0, NULL);
        if (have_i386) {
                r = sys32(310, CLONE_NEWUSER | CLONE_NEWTIME, 0, 0, 0, 0);
                verdict("i386.unshare.CLONE_NEWTIME", r, EPERM, 0, NULL);
        }
}

static void check_ioctls(void)
{
        char c = 'x';
        /* stdin is /dev/null: the kernel would answer ENOTTY */
        long r = sys64(SYS_ioctl, 0, TIOCSTI, (long)&c, 0, 0);
        verdict("x86_64.ioctl.TIOCSTI", r, EPERM, 0, NULL);
        r = sys64(SYS_ioctl, 0, (long)(TIOCSTI | (1UL << 32)), (long)&c, 0, 0);
        verdict("x86_64.ioctl.TIOCSTI|hibits", r, EPERM, 0, "CVE-2019-10063");
        r = sys64(SYS_ioctl, 0, (long)(TIOCSTI | (0xdeadUL << 40)), (long)&c, 0, 0);
        verdict("x86_64.ioctl.TIOCSTI|hibits2", r, EPERM, 0, NULL);
        r = sys64(SYS_ioctl, 0, TIOCLINUX, (long)&c, 0, 0);
        verdict("x86_64.ioctl.TIOCLINUX", r, EPERM, 0, NULL);
        r = sys64(SYS_ioctl, 0, (long)(TIOCLINUX | (1UL << 32)), (long)&c, 0, 0);
        verdict("x86_64.ioctl.TIOCLINUX|hibits", r, EPERM, 0, NULL);
        if (have_i386) {
                r = sys32(54, 0, TIOCSTI, 0, 0, 0);
                verdict("i386.ioctl.TIOCSTI", r, EPERM, 0, NULL);
                r = sys32(54, 0, TIOCLINUX, 0, 0, 0);
                verdict("i386.ioctl.TIOCLINUX", r, EPERM, 0, NULL);
        }
        r = sys64(X32_BIT | 514, 0, TIOCSTI, (long)&c, 0, 0);
        verdict("x32.ioctl.TIOCSTI", r, EPERM, ENOSYS, r == -ENOSYS ? "x32 disabled in the kernel" : NULL);
}

static void check_sockets(void)
{
        char name[128];
        uint32_t *blk = low_page();
        for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
                long fam = families[i].family, type = families[i].type, r;
                snprintf(name, sizeof(name), "x86_64.socket.%s", families[i].name);
                r = sys64(SYS_socket, fam, type, 0, 0, 0);
                close_if_fd(r);
                verdict(name, r, EAFNOSUPPORT, 0, NULL);

                /* socket() takes an int: the kernel ignores the upper 32 bits of the
                 * register, so the filter must too */
                snprintf(name, sizeof(name), "x86_64.socket.%s|hibits", families[i].name);
                r = sys64(SYS_socket, (long)((1UL << 32) | (unsigned long)fam), type, 0, 0, 0);
                close_if_fd(r);
                verdict(name, r, EAFNOSUPPORT, 0, r >= 0 ? "the socket was created: filter bypassed" : NULL);

                if (have_i386) {
                        snprintf(name, sizeof(name), "i386.socket.%s", families[i].name);
                        r = sys32(359, fam, type, 0, 0, 0);
                        close_if_fd(r);
                        verdict(name, r, EAFNOSUPPORT, 0, NULL);
                }

                /* socketcall(SYS_SOCKET, {family, type, 0}): the arguments are in memory */
                snprintf(name, sizeof(name), "i386.socketcall.%s", families[i].name);
                if (blk && have_i386) {
                        blk[0] = (uint32_t)fam;
                        blk[1] = (uint32_t)type;
                        blk[2] = 0;
                        r = sys32(102, 1 /* SYS_SOCKET */, (long)(uintptr_t)blk, 0, 0, 0);
                        close_if_fd(r);
                        verdict(name, r, EAFNOSUPPORT, 0, NULL);
                }

                snprintf(name, sizeof(name), "x32.socket.%s", families[i].name);
                r = sys64(X32_BIT | 41, fam, type, 0, 0, 0);
                close_if_fd(r);
                verdict(name, r, EAFNOSUPPORT, ENOSYS, r == -ENOSYS ? "x32 disabled in the kernel" : NULL);

                /* socketpair makes its sockets through the family's own code (and loads
                 * its module) before it asks whether the family can pair: the same rules */
                int sv[2] = { -1, -1 };
                snprintf(name, sizeof(name), "x86_64.socketpair.%s", families[i].name);
                r = sys64(SYS_socketpair, fam, type, 0, (long)sv, 0);
                verdict(name, r, EAFNOSUPPORT, 0, r >= 0 ? "the pair was created: filter bypassed" : NULL);
                snprintf(name, sizeof(name), "x86_64.socketpair.%s|hibits", families[i].name);
                r = sys64(SYS_socketpair, (long)((1UL << 32) | (unsigned long)fam), type, 0, (long)sv, 0);
                verdict(name, r, EAFNOSUPPORT, 0, NULL);
                if (blk && have_i386) {
                        snprintf(name, sizeof(name), "i386.socketpair.%s", families[i].name);
                        r = sys32(360, fam, type, 0, (long)(uintptr_t)(blk + 8), 0);
                        verdict(name, r, EAFNOSUPPORT, 0, NULL);
                        snprintf(name, sizeof(name), "i386.socketcall.socketpair.%s", families[i].name);
                        blk[0] = (uint32_t)fam;
                        blk[1] = (uint32_t)type;
                        blk[2] = 0;
                        blk[3] = (uint32_t)(uintptr_t)(blk + 8);
                        r = sys32(102, 8 /* SYS_SOCKETPAIR */, (long)(uintptr_t)blk, 0, 0, 0);
                        verdict(name, r, EAFNOSUPPORT, 0, NULL);
                }
                snprintf(name, sizeof(name), "x32.socketpair.%s", families[i].name);
                r = sys64(X32_BIT | 53, fam, type, 0, (long)sv, 0);
                verdict(name, r, EAFNOSUPPORT, ENOSYS, r == -ENOSYS ? "x32 disabled in the kernel" : NULL);
                if (sv[0] >= 0) {
                        close(sv[0]);
                        close(sv[1]);
                }
        }
}

/* ---- what must keep working (the filter must not over-block) ------------------------- */

static void *thread_main(void *arg)
{
        return arg;
}

static void allowed(const char *name, long rc)
{
        checks++;
        if (rc >= 0) {
                printf("ok %s\n", name);
                return;
        }
        failures++;
        printf("FAIL %s got %s (wanted success)\n", name, ename((int)-rc));
}

static void check_allowed(void)
{
        char path[64] = "/tmp/hxs-probe-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) {
                snprintf(path, sizeof(path), "%s", "/home/sandbox/.hxs-probe");
                fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        }
        allowed("allow.open", fd < 0 ? -(long)errno : fd);
        if (fd >= 0) {
                allowed("allow.chmod", chmod(path, 0640) < 0 ? -(long)errno : 0);
                allowed("allow.fchmod", fchmod(fd, 0600) < 0 ? -(long)errno : 0);
                close(fd);
                unlink(path);
        }
        long r = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
        allowed("allow.prctl", r < 0 ? -(long)errno : r);
        allowed("allow.prctl.no_new_privs_is_1", r == 1 ? 0 : -EINVAL);
        r = prctl(PR_SET_NAME, "hxs-probe", 0, 0, 0);
        allowed("allow.prctl.set_name", r < 0 ? -(long)errno : r);

        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        allowed("allow.socket.AF_INET", s < 0 ? -(long)errno : s);
        if (s >= 0) {
                struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = 0 };
                sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                allowed("allow.bind", bind(s, (struct sockaddr *)&sin, sizeof(sin)) < 0 ? -(long)errno : 0);
                allowed("allow.listen", listen(s, 4) < 0 ? -(long)errno : 0);
                close(s);
        }
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        allowed("allow.socket.AF_UNIX", s < 0 ? -(long)errno : s);
        if (s >= 0)
                close(s);
        s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        allowed("allow.socket.AF_INET6", s < 0 ? -(long)errno : s);
        if (s >= 0)
                close(s);
        s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */);
        allowed("allow.socket.AF_NETLINK", s < 0 ? -(long)errno : s);
        if (s >= 0)
                close(s);
        int sv[2];
        r = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
        allowed("allow.socketpair.AF_UNIX", r < 0 ? -(long)errno : r);
        if (r == 0) {
                close(sv[0]);
                close(sv[1]);
        }

        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
                _exit(7);
        int st = 0;
        allowed("allow.fork", pid < 0 ? -(long)errno :
                              (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7) ? 0 : -ECHILD);
        pthread_t t;
        int e = pthread_create(&t, NULL, thread_main, NULL);
        if (e == 0)
                pthread_join(t, NULL);
        allowed("allow.pthread_create", e ? -(long)e : 0);
        /* the i386 entry really reaches the kernel (so the i386 lines above mean something) */
        if (have_i386)
                allowed("allow.i386.getpid", sys32(20, 0, 0, 0, 0, 0) == (long)getpid() ? 0 : -EINVAL);
}

/* Some kernels refuse the i386 entry (ia32_emulation=0, some hypervisors): int $0x80
 * then raises a general protection fault. Try it in a child first. */
static int probe_i386(void)
{
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
                return 0;
        if (pid == 0) {
                signal(SIGSEGV, SIG_DFL);
                _exit(sys32(20, 0, 0, 0, 0, 0) == (long)getpid() ? 0 : 1);
        }
        int st = 0;
        if (waitpid(pid, &st, 0) != pid)
                return 0;
        if (WIFSIGNALED(st)) {
                printf("# i386 ABI: not available (int $0x80 killed the child with signal %d): "
                       "i386 checks skipped\n", WTERMSIG(st));
                return 0;
        }
        printf("# i386 ABI: %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "available" : "unexpected answer");
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int in_sandbox(void)
{
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        int seccomp = 0, nnp = 0;
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, "Seccomp:", 8) == 0)
                        seccomp = atoi(line + 8);
                else if (strncmp(line, "NoNewPrivs:", 11) == 0)
                        nnp = atoi(line + 11);
        }
        fclose(f);
        return seccomp == 2 && nnp == 1 && getuid() != 0 && geteuid() != 0;
}

int main(int argc, char **argv)
{
        (void)argv;
        if (argc != 1) {
                fprintf(stderr, "usage: hxs-probe (inside a sandbox, no arguments)\n");
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (!in_sandbox()) {
                fprintf(stderr, "hxs-probe: not inside a sandbox (no seccomp filter, no_new_privs "
                                "or running as root): refusing to run\n");
                return 3;
        }
        long x32 = sys64(X32_BIT | 39, 0, 0, 0, 0, 0);
        printf("# x32 ABI: %s\n", x32 == (long)getpid() ? "enabled" :
                                  x32 == -ENOSYS ? "disabled in the kernel (getpid -> ENOSYS)" : "unexpected");
        have_i386 = probe_i386();
        check_table();
        check_namespaces();
        check_ioctls();
        check_sockets();
        check_allowed();
        printf("# %d checks, %d failed\n", checks, failures);
        return failures ? 1 : 0;
}
