/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The machine a program sees (see ns-proc.h): /proc, /sys and the uptime.
 *
 * /proc is a full procfs of the sandbox's own pid namespace, mounted hidepid=invisible
 * (the program sees its own processes only), so that /proc/self/..., /proc/<pid>/...,
 * ps and top work as on any machine. Its top level is an allow list: the entries of
 * proc_kept stay as they are, /proc/sys stays read-only, the resource files of
 * proc_made are replaced by files written for this sandbox, and every other entry
 * (kcore, kallsyms, keys, timer_list, sched_debug, sysrq-trigger, interrupts,
 * diskstats, partitions, cmdline, ..., and whatever a newer kernel adds) is covered by
 * an empty entry the sandbox user cannot open (mode 0, owned by the sandbox's root).
 * An allow list rather than a container runtime's deny list, so that a kernel upgrade
 * cannot widen it.
 *
 * The replacements show a small machine with the sandbox's limits, as LXCFS does for
 * containers: as many CPUs as the CPU share rounded up (cpuinfo, stat), MemTotal = the
 * memory limit and no swap (meminfo, swaps), load 0. They are a snapshot of a machine
 * that has just started: idle, all of its memory free. /proc/uptime stays the kernel's
 * own; the time namespace of ns_time_start makes it count from the sandbox's start.
 *
 * The replacements and the two mask entries are written into the root tmpfs directory
 * that procfs is then mounted over, and bound from there through /proc/self/fd. So they
 * take no mount of their own, live on the root's superblock (read-only with it, and one
 * file system for df), and no path reaches them.
 *
 * /sys is a few directories and files of the root tmpfs, not sysfs: the CPU topology
 * that libc (get_nprocs, sysconf) and runtimes read, reporting the same CPUs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/macro.h"
#include "ns/ns-proc.h"

#define PROC_FLAGS (MS_NOSUID | MS_NODEV | MS_NOEXEC)
#define CPUINFO_BLOCK_MAX 8192  /* one processor's block of the host's /proc/cpuinfo */

/* Top-level /proc entries shown as the kernel makes them. Everything about the
 * program's own processes, namespaces and mounts; nothing about the host's hardware,
 * memory or other tenants (uptime counts from the sandbox's start, see ns_time_start;
 * version is what uname(2) says anyway). */
static const char *const proc_kept[] = {
        "self", "thread-self", "mounts", "net", "sysvipc", "uptime", "version",
};

enum { MADE_CPUINFO, MADE_MEMINFO, MADE_STAT, MADE_LOADAVG, MADE_SWAPS, MADE_MAX };
static const char *const proc_made[MADE_MAX] = {
        [MADE_CPUINFO] = "cpuinfo", [MADE_MEMINFO] = "meminfo", [MADE_STAT] = "stat",
        [MADE_LOADAVG] = "loadavg", [MADE_SWAPS] = "swaps",
};

_printf_(4, 5) static int fail(char *why, size_t size, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, size, fmt, ap);
        va_end(ap);
        return err > 0 ? -err : -EIO;
}

unsigned ns_machine_cpus(uint32_t cpus_milli)
{
        cpu_set_t set;
        unsigned avail = 1;
        if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
                avail = (unsigned)CPU_COUNT(&set);
        if (cpus_milli == 0)
                return avail;
        unsigned n = (cpus_milli + 999) / 1000;
        return n > avail ? avail : n;
}

size_t ns_machine_root_bytes(const ns_machine *m)
{
        /* a cpuinfo block, a stat line and a /sys directory per CPU, plus the rest */
        return (size_t)m->ncpus * (CPUINFO_BLOCK_MAX + 4096) + (32u << 10);
}

/* ---- writing files without allocating --------------------------------------------- */

typedef struct out {
        int fd;
        int err;        /* first write error, as -errno */
        size_t len;
        char buf[4096];
} out;

static void out_flush(out *o)
{
        const char *p = o->buf;
        while (o->len > 0 && o->err == 0) {
                ssize_t n = write(o->fd, p, o->len);
                if (n < 0) {
                        if (errno != EINTR)
                                o->err = negative_errno();
                        continue;
                }
                p += n;
                o->len -= (size_t)n;
        }
        o->len = 0;
}

static void out_put(out *o, const char *s, size_t n)
{
        while (n > 0) {
                if (o->len == sizeof(o->buf))
                        out_flush(o);
                size_t k = sizeof(o->buf) - o->len;
                if (k > n)
                        k = n;
                memcpy(o->buf + o->len, s, k);
                o->len += k;
                s += k;
                n -= k;
        }
}

_printf_(2, 3) static void out_printf(out *o, const char *fmt, ...)
{
        char line[256];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (n > 0)
                out_put(o, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* ---- the replacement files --------------------------------------------------------- */

/* The first processor's block of the host's /proc/cpuinfo (the procfs this process
 * still sees), so that model name, flags and the rest are the real CPU's. */
static size_t host_cpuinfo_block(char *buf, size_t size)
{
        ssize_t n = read_file("/proc/cpuinfo", buf, size);
        if (n <= 0)
                return 0;
        char *end = strstr(buf, "\n\n");
        if (end)
                return (size_t)(end - buf) + 1;
        end = strrchr(buf, '\n'); /* cut at the last whole line */
        return end ? (size_t)(end - buf) + 1 : 0;
}

static bool key_is(const char *line, size_t keylen, const char *key)
{
        return strlen(key) == keylen && memcmp(line, key, keylen) == 0;
}

/* The host's block once per CPU, renumbered: processor, core and APIC ids, and the
 * sibling and core counts of a machine with ncpus single-threaded cores. */
static void make_cpuinfo(out *o, unsigned ncpus)
{
        char host[CPUINFO_BLOCK_MAX];
        size_t len = host_cpuinfo_block(host, sizeof(host));
        for (unsigned cpu = 0; cpu < ncpus; cpu++) {
                if (len == 0) {
                        out_printf(o, "processor\t: %u\n\n", cpu);
                        continue;
                }
                for (const char *p = host, *end = host + len; p < end;) {
                        const char *eol = memchr(p, '\n', (size_t)(end - p));
                        eol = eol ? eol + 1 : end;
                        const char *colon = memchr(p, ':', (size_t)(eol - p));
                        size_t keylen = colon ? (size_t)(colon - p) : 0;
                        while (keylen > 0 && (p[keylen - 1] == '\t' || p[keylen - 1] == ' '))
                                keylen--;
                        long value = -1;
                        if (key_is(p, keylen, "processor") || key_is(p, keylen, "core id") ||
                            key_is(p, keylen, "apicid") || key_is(p, keylen, "initial apicid"))
                                value = cpu;
                        else if (key_is(p, keylen, "siblings") || key_is(p, keylen, "cpu cores"))
                                value = ncpus;
                        else if (key_is(p, keylen, "physical id"))
                                value = 0;
                        if (value >= 0) {
                                out_put(o, p, (size_t)(colon - p) + 1);
                                out_printf(o, " %ld\n", value);
                        } else {
                                out_put(o, p, (size_t)(eol - p));
                        }
                        p = eol;
                }
                out_put(o, "\n", 1);
        }
}

static void make_meminfo(out *o, uint64_t total_kb)
{
        static const char *const zero_kb[] = {
                "Buffers", "Cached", "SwapCached", "Active", "Inactive", "Active(anon)",
                "Inactive(anon)", "Active(file)", "Inactive(file)", "Unevictable", "Mlocked",
                "SwapTotal", "SwapFree", "Dirty", "Writeback", "AnonPages", "Mapped", "Shmem",
                "KReclaimable", "Slab", "SReclaimable", "SUnreclaim", "KernelStack",
                "PageTables", "Bounce", "WritebackTmp",
        };
        static const char *const total_kb_names[] = { "MemTotal", "MemFree", "MemAvailable" };
        char name[32];
        for (size_t i = 0; i < ARRAY_SIZE(total_kb_names); i++) {
                snprintf(name, sizeof(name), "%s:", total_kb_names[i]);
                out_printf(o, "%-16s%8llu kB\n", name, (unsigned long long)total_kb);
        }
        for (size_t i = 0; i < ARRAY_SIZE(zero_kb); i++) {
                snprintf(name, sizeof(name), "%s:", zero_kb[i]);
                out_printf(o, "%-16s%8d kB\n", name, 0);
        }
        /* no swap and no overcommit headroom beyond the limit */
        out_printf(o, "%-16s%8llu kB\n", "CommitLimit:", (unsigned long long)total_kb);
        out_printf(o, "%-16s%8d kB\n", "Committed_AS:", 0);
        static const char *const huge[] = { "HugePages_Total", "HugePages_Free", "HugePages_Rsvd",
                                            "HugePages_Surp" };
        for (size_t i = 0; i < ARRAY_SIZE(huge); i++) {
                snprintf(name, sizeof(name), "%s:", huge[i]);
                out_printf(o, "%-16s%8d\n", name, 0);
        }
        out_printf(o, "%-16s%8d kB\n%-16s%8d kB\n", "Hugepagesize:", 2048, "Hugetlb:", 0);
}

/* All counters zero: nothing has run yet. btime is now, as the time namespace says. */
static void make_stat(out *o, unsigned ncpus)
{
        static const char zeros[] = " 0 0 0 0 0 0 0 0 0 0\n";
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        out_printf(o, "cpu %s", zeros);
        for (unsigned cpu = 0; cpu < ncpus; cpu++)
                out_printf(o, "cpu%u%s", cpu, zeros);
        out_printf(o, "intr 0\nctxt 0\nbtime %lld\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n"
                      "softirq 0 0 0 0 0 0 0 0 0 0 0\n", (long long)now.tv_sec);
}

/* Creates name in dir (mode 0444) with what make() writes; returns its descriptor. */
static int make_file(int dir, int which, const ns_machine *m, char *why, size_t size)
{
        const char *name = proc_made[which];
        out o = { .fd = openat(dir, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444) };
        if (o.fd < 0)
                return fail(why, size, errno, "creating the sandbox's /proc/%s", name);
        switch (which) {
        case MADE_CPUINFO:
                make_cpuinfo(&o, m->ncpus);
                break;
        case MADE_MEMINFO:
                make_meminfo(&o, m->memory_kb);
                break;
        case MADE_STAT:
                make_stat(&o, m->ncpus);
                break;
        case MADE_LOADAVG:
                out_printf(&o, "0.00 0.00 0.00 1/1 1\n");
                break;
        case MADE_SWAPS:
                out_printf(&o, "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
                break;
        default:
                break;
        }
        out_flush(&o);
        if (o.err < 0) {
                close(o.fd);
                return fail(why, size, -o.err, "writing the sandbox's /proc/%s", name);
        }
        return o.fd;
}

/* ---- /proc ------------------------------------------------------------------------- */

static bool listed(const char *name, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(name, list[i]) == 0)
                        return true;
        return false;
}

static bool all_digits(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* Binds the file or directory behind fd (through procfs's magic link) onto the entry
 * name; the working directory is the new procfs (short lookups: there are dozens). */
static int bind_fd(int fd, const char *name, char *why, size_t size)
{
        char src[64];
        snprintf(src, sizeof(src), "self/fd/%d", fd);
        if (mount(src, name, NULL, MS_BIND, NULL) < 0)
                return fail(why, size, errno, "covering /proc/%s", name);
        return 0;
}

/* Walks the top level of the procfs mounted on proc: each entry is kept, made
 * read-only, replaced by what made[] holds, or masked. */
static int cover_entries(const char *proc, const int *made, int mask_file, int mask_dir, char *why,
                         size_t size)
{
        _cleanup_close_ int dir = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0 || fchdir(dir) < 0)
                return fail(why, size, errno, "opening the sandbox's /proc");
        char buf[4096] __attribute__((aligned(8)));
        for (;;) {
                ssize_t n = getdents64(dir, buf, sizeof(buf));
                if (n < 0)
                        return fail(why, size, errno, "listing the sandbox's /proc");
                if (n == 0)
                        return 0;
                for (ssize_t off = 0; off < n;) {
                        const struct dirent64 *d = (const struct dirent64 *)(buf + off);
                        off += d->d_reclen;
                        const char *name = d->d_name;
                        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || all_digits(name) ||
                            listed(name, proc_kept, ARRAY_SIZE(proc_kept)))
                                continue;
                        int r = 0;
                        if (strcmp(name, "sys") == 0) {
                                if (mount(name, name, NULL, MS_BIND | MS_REC, NULL) < 0 ||
                                    mount(NULL, name, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | PROC_FLAGS, NULL) < 0)
                                        r = fail(why, size, errno, "making /proc/sys read-only");
                        } else {
                                int which = -1;
                                for (int i = 0; i < MADE_MAX; i++)
                                        if (strcmp(name, proc_made[i]) == 0)
                                                which = i;
                                unsigned char type = d->d_type;
                                struct stat st;
                                if (type == DT_UNKNOWN && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                                        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
                                /* procfs's own top-level links (self, net, mounts, ...) are
                                 * kept; one a newer kernel adds points inside /proc, whose
                                 * entries are covered here themselves */
                                if (which < 0 && type == DT_LNK)
                                        continue;
                                int src = which >= 0 ? made[which] : type == DT_DIR ? mask_dir : mask_file;
                                r = bind_fd(src, name, why, size);
                        }
                        if (r < 0)
                                return r;
                }
        }
}

int ns_proc_mount(const char *root, const ns_machine *m, char *why, size_t size)
{
        char proc[600];
        int made[MADE_MAX], mask_file = -1, mask_dir = -1, r = 0;
        for (int i = 0; i < MADE_MAX; i++)
                made[i] = -1;
        snprintf(proc, sizeof(proc), "%s/proc", root);
        _cleanup_close_ int under = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (under < 0)
                return fail(why, size, errno, "opening %s", proc);
        for (int i = 0; i < MADE_MAX && r == 0; i++)
                if ((made[i] = make_file(under, i, m, why, size)) < 0)
                        r = made[i];
        if (r == 0 && (mask_file = openat(under, "masked", O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0)) < 0)
                r = fail(why, size, errno, "creating the mask of /proc entries");
        if (r == 0 && (mkdirat(under, "masked-dir", 0) < 0 ||
                       (mask_dir = openat(under, "masked-dir", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0))
                r = fail(why, size, errno, "creating the mask of /proc directories");

        if (r == 0 && mount("proc", proc, "proc", PROC_FLAGS, "hidepid=invisible") == 0) {
                r = cover_entries(proc, made, mask_file, mask_dir, why, size);
        } else if (r == 0) {
                /* The kernel mounts a full procfs in a user namespace only for a mounter
                 * that sees one in full (mnt_already_visible): not so inside a container
                 * that masks its own /proc. Then the processes are all there is. */
                int full = errno;
                if (mount("proc", proc, "proc", PROC_FLAGS, "hidepid=invisible,subset=pid") < 0)
                        r = fail(why, size, errno, "mounting /proc (a full procfs: %s; process-only)",
                                 strerror(full));
        }
        for (int i = 0; i < MADE_MAX; i++)
                if (made[i] >= 0)
                        close(made[i]);
        if (mask_file >= 0)
                close(mask_file);
        if (mask_dir >= 0)
                close(mask_dir);
        return r;
}

/* ---- /sys and the clock -------------------------------------------------------- */

int ns_sys_build(const char *root, const ns_machine *m, char *why, size_t size)
{
        static const char *const dirs[] = { "sys", "sys/devices", "sys/devices/system",
                                            "sys/devices/system/cpu" };
        char p[700], list[32];
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
                if (mkdir(p, 0555) < 0)
                        return fail(why, size, errno, "creating /%s", dirs[i]);
        }
        for (unsigned cpu = 0; cpu < m->ncpus; cpu++) {
                snprintf(p, sizeof(p), "%s/sys/devices/system/cpu/cpu%u", root, cpu);
                if (mkdir(p, 0555) < 0)
                        return fail(why, size, errno, "creating /sys/devices/system/cpu/cpu%u", cpu);
        }
        if (m->ncpus > 1)
                snprintf(list, sizeof(list), "0-%u\n", m->ncpus - 1);
        else
                snprintf(list, sizeof(list), "0\n");
        static const char *const files[] = { "online", "possible", "present" };
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                snprintf(p, sizeof(p), "%s/sys/devices/system/cpu/%s", root, files[i]);
                out o = { .fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444) };
                if (o.fd < 0)
                        return fail(why, size, errno, "creating /sys/devices/system/cpu/%s", files[i]);
                out_put(&o, list, strlen(list));
                out_flush(&o);
                close(o.fd);
                if (o.err < 0)
                        return fail(why, size, -o.err, "writing /sys/devices/system/cpu/%s", files[i]);
        }
        return 0;
}

int ns_time_start(char *why, size_t size)
{
        struct timespec boot;
        if (clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
                return fail(why, size, errno, "reading the boot time");
        if (unshare(CLONE_NEWTIME) < 0) {
                if (errno == EINVAL)
                        return 0; /* a kernel without time namespaces */
                return fail(why, size, errno, "creating the time namespace");
        }
        /* minus the boot time, as seconds plus a non-negative fraction (the kernel's form) */
        long long sec = -(long long)boot.tv_sec;
        long nsec = 0;
        if (boot.tv_nsec > 0) {
                sec -= 1;
                nsec = 1000000000L - boot.tv_nsec;
        }
        char offset[64];
        snprintf(offset, sizeof(offset), "boottime %lld %ld\n", sec, nsec);
        /* Since becoming the namespace's root we are not dumpable, so our /proc files
         * belong to the host's root and the write would be refused. Dumpable only for
         * the write: nothing else runs in the sandbox yet, and only a host process of
         * our own uid could use it (ptrace is filtered in every sandbox). */
        int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
        if (dumpable < 0 || prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
                return fail(why, size, errno, "setting the sandbox's boot time");
        int r = write_file("/proc/self/timens_offsets", offset);
        if (prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0) < 0 && r == 0)
                r = negative_errno();
        if (r < 0)
                return fail(why, size, -r, "setting the sandbox's boot time");
        return 0;
}
