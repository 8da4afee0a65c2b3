/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the sandbox. The cloned child is PID 1 of a new pid namespace and root of a
 * new user namespace (mapped to an unprivileged host uid). ns_child_main is the list
 * of steps, in the order the security argument needs; the root filesystem is a table
 * of steps (root_steps) run by one loop. It pivots into the root, then forks the
 * program: the program drops to the "sandbox" user with no capabilities, no_new_privs
 * and the seccomp filter (the steps of jail.h), and execs the interpreter. PID 1 then
 * becomes the init (ns-init.h): with no capabilities, no_new_privs and the same filter
 * it execs a small static program that reaps, and when the program exits reports the
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
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/macro.h"
#include "ns/ns-etc.h"
#include "ns/ns-files.h"
#include "ns/ns-init.h"
#include "core/jail.h"
#include "ns/ns-proc.h"
#include "ns/ns.h"

_Static_assert(NS_INIT_REPORT_STATUS == NS_REPORT_STATUS, "the init reports as PID 1 does");

static int report_fd = -1;

/* Reports a set-up failure and ends the child. */
_printf_(1, 2) static _Noreturn void die(const char *fmt, ...)
{
        char buf[400];
        int saved = errno;
        buf[0] = NS_REPORT_ERROR;
        va_list ap;
        va_start(ap, fmt);
        if (vsnprintf(buf + 1, sizeof(buf) - 1, fmt, ap) < 0)
                buf[1] = '\0';
        va_end(ap);
        size_t len = strlen(buf);
        if (saved)
                snprintf(buf + len, sizeof(buf) - len, ": %s", strerror(saved));
        /* sent with its NUL: PID 1's status record may follow in the pipe */
        len = strlen(buf) + 1;
        if (report_fd >= 0)
                (void)!write(report_fd, buf, len);
        _exit(127);
}

/* ---- the root filesystem ------------------------------------------------------ */

/* Mount flags of `path` that a bind remount must keep (the kernel locks them). */
static unsigned long locked_flags(const char *path)
{
        struct statvfs s;
        unsigned long f = 0;
        if (statvfs(path, &s) < 0)
                return 0;
        if (s.f_flag & ST_NOEXEC)
                f |= MS_NOEXEC;
        if (s.f_flag & ST_NOATIME)
                f |= MS_NOATIME;
        if (s.f_flag & ST_NODIRATIME)
                f |= MS_NODIRATIME;
        if (s.f_flag & ST_RELATIME)
                f |= MS_RELATIME;
        return f;
}

/* Writable bind of a host directory onto dst (the installer's /target). */
static void bind_rw(const char *src, const char *dst)
{
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                die("bind-mounting %s", src);
        unsigned long f = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | locked_flags(src);
        if (mount(NULL, dst, NULL, f, NULL) < 0)
                die("remounting %s", dst);
}

/* Read-only bind of a host path (file or directory) onto dst, which must exist. */
static void bind_ro(const char *src, const char *dst)
{
        if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                die("bind-mounting %s", src);
        unsigned long f = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(src);
        if (mount(NULL, dst, NULL, f, NULL) < 0)
                die("making %s read-only", dst);
}

static void mkdir_or_die(const char *path, mode_t mode)
{
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                die("mkdir %s", path);
}

static void touch_or_die(const char *path)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                die("creating %s", path);
        close(fd);
}

static void write_or_die(const char *path, const void *data, size_t len, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                die("creating %s", path);
        const char *p = data;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        die("writing %s", path);
                }
                p += n;
                len -= (size_t)n;
        }
        if (fchmod(fd, mode) < 0)
                die("chmod %s", path);
        close(fd);
}

static void write_str(const char *path, const char *s)
{
        write_or_die(path, s, strlen(s), 0444);
}

static void tmpfs_or_die(const char *dst, const char *opts, unsigned long flags)
{
        if (mount("tmpfs", dst, "tmpfs", flags, opts) < 0)
                die("mounting a tmpfs on %s (%s)", dst, opts);
}

/* Host /etc entries the runtimes need, shown read-only. Absent ones are skipped. */
static const char *const etc_binds[] = {
        "ld.so.cache", "ssl", "alternatives", "python3", "python3.11", "localtime",
        "matplotlibrc", "fonts", "services", "protocols",
};
/* ... and what a host without them (no netbase) gets instead: getservbyname and
 * getaddrinfo("localhost", "http") must work everywhere */
static const struct {
        const char *name, *text;
} etc_fallbacks[] = {
        { "services", ns_etc_services }, { "protocols", ns_etc_protocols },
};

static const char etc_passwd[] =
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        "sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";
static const char etc_hosts[] = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n";
static const char etc_nsswitch[] = "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                                   "services: files\nprotocols: files\nnetworks: files\n";

static void build_etc(const char *root, const char *sitecustomize)
{
        char p[600], src[300];
        snprintf(p, sizeof(p), "%s/etc", root);
        mkdir_or_die(p, 0755);
        snprintf(p, sizeof(p), "%s/etc/passwd", root);
        write_str(p, etc_passwd);
        snprintf(p, sizeof(p), "%s/etc/group", root);
        write_str(p, etc_group);
        snprintf(p, sizeof(p), "%s/etc/hosts", root);
        write_str(p, etc_hosts);
        snprintf(p, sizeof(p), "%s/etc/hostname", root);
        write_str(p, "sandbox\n");
        snprintf(p, sizeof(p), "%s/etc/nsswitch.conf", root);
        write_str(p, etc_nsswitch);
        snprintf(p, sizeof(p), "%s/etc/resolv.conf", root);
        write_str(p, "# no network in the sandbox\n");
        snprintf(p, sizeof(p), "%s/etc/os-release", root);
        if (symlink("../usr/lib/os-release", p) < 0)
                die("symlink %s", p);

        for (size_t i = 0; i < ARRAY_SIZE(etc_binds); i++) {
                struct stat st;
                snprintf(src, sizeof(src), "/etc/%s", etc_binds[i]);
                snprintf(p, sizeof(p), "%s/etc/%s", root, etc_binds[i]);
                /* /usr/lib/python3.X/sitecustomize.py points here: ours instead of the
                 * host's (an apport hook at most) */
                if (sitecustomize && strncmp(etc_binds[i], "python3.", 8) == 0 && lstat(src, &st) == 0 &&
                    S_ISDIR(st.st_mode)) {
                        mkdir_or_die(p, 0755);
                        snprintf(p, sizeof(p), "%s/etc/%s/sitecustomize.py", root, etc_binds[i]);
                        write_str(p, sitecustomize);
                        continue;
                }
                if (lstat(src, &st) < 0) {
                        for (size_t j = 0; j < ARRAY_SIZE(etc_fallbacks); j++)
                                if (strcmp(etc_binds[i], etc_fallbacks[j].name) == 0)
                                        write_str(p, etc_fallbacks[j].text);
                        continue;
                }
                if (S_ISLNK(st.st_mode)) {
                        char target[256];
                        ssize_t n = readlink(src, target, sizeof(target) - 1);
                        if (n <= 0)
                                continue;
                        target[n] = '\0';
                        if (symlink(target, p) < 0)
                                die("symlink %s", p);
                        continue;
                }
                if (S_ISDIR(st.st_mode))
                        mkdir_or_die(p, 0755);
                else
                        touch_or_die(p);
                bind_ro(src, p);
        }
}

static void build_dev(const char *root)
{
        static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
        char p[600], src[64];
        /* /dev/tty opens the caller's controlling terminal: a sandbox started from a
         * shell (the CLI) would otherwise share that shell's session and terminal.
         * Leave it: the sandbox has no controlling terminal but one of its own ptys. */
        if (setsid() < 0)
                die("leaving the caller's session");
        snprintf(p, sizeof(p), "%s/dev", root);
        mkdir_or_die(p, 0755);
        tmpfs_or_die(p, "size=64k,nr_inodes=64,mode=0755", MS_NOSUID | MS_NOEXEC);
        for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
                snprintf(p, sizeof(p), "%s/dev/%s", root, nodes[i]);
                snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
                touch_or_die(p);
                /* a bind keeps the host devtmpfs mount, where device access is allowed
                 * (character devices are neither executable nor setuid: no remount) */
                if (mount(src, p, NULL, MS_BIND, NULL) < 0)
                        die("bind-mounting %s", src);
        }
        static const char *const links[][2] = {
                { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
                { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
                { "pts/ptmx", "ptmx" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
                snprintf(p, sizeof(p), "%s/dev/%s", root, links[i][1]);
                if (symlink(links[i][0], p) < 0)
                        die("symlink %s", p);
        }
        /* pseudo-terminals: a devpts instance of the sandbox's own (it sees no other
         * terminal), with few of them: the kernel's budget of ptys outside the host's
         * own instance (kernel.pty.max - kernel.pty.reserve) is shared by every
         * sandbox and container */
        char opts[96];
        snprintf(p, sizeof(p), "%s/dev/pts", root);
        mkdir_or_die(p, 0755);
        snprintf(opts, sizeof(opts), "newinstance,ptmxmode=0666,mode=0620,max=%d", NS_PTYS_MAX);
        if (mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, opts) < 0)
                die("mounting /dev/pts");
        snprintf(p, sizeof(p), "%s/dev/shm", root);
        mkdir_or_die(p, 01777);
        tmpfs_or_die(p, "size=16m,nr_inodes=1024,mode=1777", MS_NOSUID | MS_NODEV);
        snprintf(p, sizeof(p), "%s/dev", root);
        if (mount(NULL, p, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755") < 0)
                die("making /dev read-only");
}

/* /tmp, /var/tmp and /run/lock: private and writable, and one tmpfs for the three, so
 * that together they stay within SANDBOX_TMPFS_MB (and its pages count against the
 * memory cgroup, as every tmpfs's do). The tmpfs is mounted on the mount point first,
 * under the root's own tmpfs: its directories are reached only through the descriptors
 * kept here, bound to their places (bind_scratch), and the tmpfs's own mount leaves
 * with the host's tree at pivot_root, in the one detach that costs a grace period. */
static const char *const scratch_dirs[] = { "tmp", "var/tmp", "run/lock" };

static void stage_scratch(const char *mountpoint, const ns_limits *lim, int ret_fds[3])
{
        char p[600], opts[128];
        snprintf(opts, sizeof(opts), "size=%um,nr_inodes=%u,mode=0755", lim->tmpfs_mb,
                 lim->tmpfs_mb * 256 + 1024);
        tmpfs_or_die(mountpoint, opts, MS_NOSUID | MS_NODEV);
        snprintf(p, sizeof(p), "%s/var", mountpoint);
        mkdir_or_die(p, 0755);
        snprintf(p, sizeof(p), "%s/run", mountpoint);
        mkdir_or_die(p, 0755);
        _Static_assert(ARRAY_SIZE(scratch_dirs) == 3, "three scratch directories");
        for (size_t i = 0; i < ARRAY_SIZE(scratch_dirs); i++) {
                snprintf(p, sizeof(p), "%s/%s", mountpoint, scratch_dirs[i]);
                mkdir_or_die(p, 01777);
                if (chmod(p, 01777) < 0) /* mkdir's mode went through the umask */
                        die("chmod %s", p);
                if ((ret_fds[i] = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                        die("opening %s", p);
        }
}

static void bind_scratch(const char *root, int fds[3])
{
        for (size_t i = 0; i < ARRAY_SIZE(scratch_dirs); i++) {
                char src[64], dst[600];
                snprintf(src, sizeof(src), "/proc/self/fd/%d", fds[i]);
                snprintf(dst, sizeof(dst), "%s/%s", root, scratch_dirs[i]);
                if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                        die("bind-mounting /%s", scratch_dirs[i]);
                close_fd(&fds[i]);
        }
}

/* What the synthesized /proc and /sys report: the sandbox's CPU share and memory limit. */
static ns_machine machine_of(const ns_child_args *a)
{
        ns_machine m = { .ncpus = ns_machine_cpus(a->limits->cpus_milli) };
        struct sysinfo si;
        uint64_t host_kb = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit / 1024 : 0;
        m.memory_kb = (uint64_t)a->memory_mb * 1024;
        if (m.memory_kb == 0 || (host_kb > 0 && m.memory_kb > host_kb))
                m.memory_kb = host_kb;
        return m;
}

/* ---- the root as a table of steps (bubblewrap's SetupOp) ------------------------- */

/* What the steps of the root share. */
typedef struct root_ctx {
        const ns_child_args *a;
        const payload_view *pl;
        const char *root;               /* a->mountpoint */
        ns_machine mach;
        int scratch[3];                 /* stage_scratch's directories, until bound */
        const char *path, *host;        /* the bind being made: in the root, on the host */
} root_ctx;

typedef struct root_step {
        void (*run)(root_ctx *c);
        const char *path;               /* in the new root, for a bind */
        size_t host;                    /* a const char * of ns_child_args: NULL there skips
                                         * the step; NO_HOST: always run */
} root_step;
#define NO_HOST SIZE_MAX

static void op_private(root_ctx *c)
{
        (void)c;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                die("making mounts private");
}

static void op_stage_scratch(root_ctx *c)
{
        stage_scratch(c->root, c->a->limits, c->scratch);
}

/* The root itself: a tmpfs sized for the code, the synthesized files and a margin. */
static void op_root_tmpfs(root_ctx *c)
{
        char opts[128];
        snprintf(opts, sizeof(opts), "size=%zuk,nr_inodes=4096,mode=0755",
                 (c->pl->code_len >> 10) + 1024 + (ns_machine_root_bytes(&c->mach) >> 10));
        tmpfs_or_die(c->root, opts, MS_NOSUID | MS_NODEV);
}

static void op_skeleton(root_ctx *c)
{
        static const char *const dirs[] = { "usr", "tmp", "home", "home/sandbox", "proc", "code",
                                            "var", "var/tmp", "run", "run/lock" };
        char p[600];
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                snprintf(p, sizeof(p), "%s/%s", c->root, dirs[i]);
                mkdir_or_die(p, 0755);
        }
        snprintf(p, sizeof(p), "%s/var/lock", c->root);
        if (symlink("../run/lock", p) < 0)
                die("symlink %s", p);
}

/* /usr read-only, the host's or SANDBOX_ROOTFS's, with the merged-/usr links it has. */
static void op_usr(root_ctx *c)
{
        static const char *const usr_links[][2] = {
                { "usr/bin", "bin" }, { "usr/sbin", "sbin" }, { "usr/lib", "lib" },
                { "usr/lib64", "lib64" }, { "usr/lib32", "lib32" }, { "usr/libx32", "libx32" },
        };
        const char *usr_src = "/usr";
        char rootfs_usr[300], p[600];
        if (c->a->limits->rootfs[0]) {
                snprintf(rootfs_usr, sizeof(rootfs_usr), "%s/usr", c->a->limits->rootfs);
                usr_src = rootfs_usr;
        }
        for (size_t i = 0; i < ARRAY_SIZE(usr_links); i++) {
                char target[320];
                snprintf(target, sizeof(target), "%s/%s", usr_src, usr_links[i][0] + 4);
                if (access(target, F_OK) < 0)
                        continue;
                snprintf(p, sizeof(p), "%s/%s", c->root, usr_links[i][1]);
                if (symlink(usr_links[i][0], p) < 0)
                        die("symlink %s", p);
        }
        snprintf(p, sizeof(p), "%s/usr", c->root);
        bind_ro(usr_src, p);
}

static void op_etc(root_ctx *c)
{
        build_etc(c->root, c->a->sitecustomize);
}

static void op_dev(root_ctx *c)
{
        build_dev(c->root);
}

/* writable scratch, capped; pages count against the sandbox's memory cgroup */
static void op_scratch(root_ctx *c)
{
        bind_scratch(c->root, c->scratch);
}

static void op_home(root_ctx *c)
{
        const ns_limits *lim = c->a->limits;
        char p[600], opts[128];
        snprintf(p, sizeof(p), "%s/home/sandbox", c->root);
        snprintf(opts, sizeof(opts), "size=%um,nr_inodes=%u,mode=0700,uid=%d,gid=%d", lim->tmpfs_mb,
                 lim->tmpfs_mb * 256 + 1024, NS_SANDBOX_UID, NS_SANDBOX_UID);
        tmpfs_or_die(p, opts, MS_NOSUID | MS_NODEV);
}

/* The directories of path in the root (mode 0755), the last one included. */
static void mkdirs_in_root(root_ctx *c, const char *path, char *p, size_t size)
{
        snprintf(p, size, "%s%s", c->root, path);
        for (char *q = p + strlen(c->root) + 1; (q = strchr(q, '/')); q++) {
                *q = '\0';
                mkdir_or_die(p, 0755);
                *q = '/';
        }
        mkdir_or_die(p, 0755);
}

static void op_bind_ro(root_ctx *c)
{
        char p[600];
        mkdirs_in_root(c, c->path, p, sizeof(p));
        bind_ro(c->host, p);
}

static void op_bind_rw(root_ctx *c)
{
        char p[600];
        mkdirs_in_root(c, c->path, p, sizeof(p));
        bind_rw(c->host, p);
}

/* the program, read-only once the root is */
static void op_code(root_ctx *c)
{
        char p[600];
        snprintf(p, sizeof(p), "%s/code/%s", c->root, c->a->code_name);
        write_or_die(p, c->pl->code, c->pl->code_len, 0444);
}

/* /proc of our own pid namespace and a /sys, showing the sandbox's limits */
static void op_proc_sys(root_ctx *c)
{
        char why[300];
        int r;
        if ((r = ns_proc_mount(c->root, &c->mach, why, sizeof(why))) < 0 ||
            (r = ns_sys_build(c->root, &c->mach, why, sizeof(why))) < 0) {
                errno = -r;
                die("%s", why);
        }
}

static void op_read_only(root_ctx *c)
{
        if (mount(NULL, c->root, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
                die("making the root read-only");
}

/* Into the new root; the host's tree is detached, nothing of it stays in reach. */
static void op_pivot(root_ctx *c)
{
        if (chdir(c->root) < 0)
                die("chdir to the new root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                die("pivot_root");
        if (umount2(".", MNT_DETACH) < 0)
                die("detaching the old root");
        if (chdir("/") < 0)
                die("chdir /");
}

/* the program's uptime starts now (its processes are forked after this) */
static void op_clock(root_ctx *c)
{
        (void)c;
        char why[300];
        int r = ns_time_start(why, sizeof(why));
        if (r < 0) {
                errno = -r;
                die("%s", why);
        }
}

#define STEP(fn) { fn, NULL, NO_HOST }
#define BIND(fn, path, field) { fn, path, offsetof(ns_child_args, field) }

/* In this order: nothing propagates to the host before anything is mounted; /proc
 * and /sys once the rest is there; read-only before pivot_root. */
static const root_step root_steps[] = {
        STEP(op_private),               /* nothing we mount may propagate back to the host */
        STEP(op_stage_scratch),         /* the scratch tmpfs, on the mount point first */
        STEP(op_root_tmpfs),
        STEP(op_skeleton),
        STEP(op_usr),
        STEP(op_etc),
        STEP(op_dev),
        STEP(op_scratch),               /* /tmp, /var/tmp, /run/lock */
        STEP(op_home),
        /* packages=: an installed set, read-only; the installer's wheelhouse and target */
        BIND(op_bind_ro, NS_PACKAGES_DIR, pkgs_dir),
        BIND(op_bind_ro, "/wheelhouse", wheelhouse_dir),
        BIND(op_bind_rw, "/target", target_dir),
        STEP(op_code),
        STEP(op_proc_sys),
        STEP(op_read_only),
        STEP(op_pivot),
        STEP(op_clock),
};

static void build_root(const ns_child_args *a, const payload_view *pl)
{
        root_ctx c = { .a = a, .pl = pl, .root = a->mountpoint, .mach = machine_of(a) };
        for (size_t i = 0; i < ARRAY_SIZE(root_steps); i++) {
                const root_step *s = &root_steps[i];
                c.path = s->path;
                c.host = NULL;
                if (s->host != NO_HOST) {
                        memcpy(&c.host, (const char *)a + s->host, sizeof(c.host));
                        if (!c.host)
                                continue; /* an optional bind this sandbox has not */
                }
                s->run(&c);
        }
}

static void loopback_up(void)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                die("socket for lo");
        struct ifreq ifr = { 0 };
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                die("reading lo flags");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                die("bringing lo up");
        close(s);
}

/* ---- dropping privileges (the steps are jail.c's) ----------------------------------- */

/* A jail step's failure, named, ends the child. */
static void step(jail_step which, int r)
{
        if (r < 0) {
                errno = -r;
                die("%s", jail_step_text(which));
        }
}

/* The program process: stdio, limits, the sandbox user, no capabilities,
 * no_new_privs, seccomp; then exec (cold) or return (warm). */
static void run_program(const ns_child_args *a, const payload_view *pl, ns_program *ret)
{
        const ns_limits *lim = a->limits;

        /* stdio: the supervisor's pipes; stdin /dev/null unless the request has one */
        int fds[3] = { a->stdin_fd, a->stdout_fd, a->stderr_fd };
        if (fds[0] < 0 && (fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
                die("opening /dev/null");
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
                die("chdir %s", NS_SANDBOX_HOME);
        step(JAIL_BOUNDING, jail_drop_bounding(0, false));
        step(JAIL_SETID, jail_become(NS_SANDBOX_UID, NS_SANDBOX_UID, false));
        step(JAIL_CAPS, jail_set_caps(0));
        step(JAIL_NNP, jail_no_new_privs());
        /* the uid change made it undumpable (its /proc files root's): undo that, after it */
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
                die("dumpable");
        int r = hxs_seccomp_load(a->seccomp);
        if (r < 0) {
                errno = -r;
                die("loading the seccomp filter");
        }
        snprintf(ret->code_path, sizeof(ret->code_path), "/code/%s", a->code_name);
        ret->env = pl->env;
        if (a->warm) {
                /* no exec will close them: the program keeps stdio and nothing else
                 * (the report pipe would let it forge its own result) */
                step(JAIL_CLOSE, jail_close_from(3, false));
                return;
        }
        char *argv[] = { (char *)a->interpreter, ret->code_path, NULL };
        execve(a->interpreter, argv, pl->env);
        die("executing %s", a->interpreter);
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
                        die("opening %s", p);
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
                        die("setting the user namespace's %s", userns_counters[i].name);
                close(fds[i]);
        }
}

/* ---- PID 1 ------------------------------------------------------------------------ */

/* PID 1 without a static init to exec (the microVM's agent passes none): the same
 * loop, in this copy of the agent. */
static _Noreturn void init_loop(pid_t program)
{
        /* Only our own signal handling matters: the kernel already ignores signals from
         * inside the namespace that PID 1 has no handler for. */
        ns_init_reap(program, report_fd, -1);
}

/* Becomes the static init: the report pipe at NS_INIT_REPORT_FD, nothing else open,
 * no environment. Failing here fails the sandbox (it must not run on as a copy). */
static _Noreturn void exec_init(int init_fd, int hold_fd, pid_t program)
{
        /* out of the way first, so that no dup2 below clobbers another */
        int rep = fcntl(report_fd, F_DUPFD_CLOEXEC, 10), ini = fcntl(init_fd, F_DUPFD_CLOEXEC, 10);
        int hold = fcntl(hold_fd, F_DUPFD_CLOEXEC, 10);
        if (rep < 0 || ini < 0 || hold < 0 || dup2(rep, NS_INIT_REPORT_FD) < 0 || /* dup2: not CLOEXEC */
            dup3(ini, NS_INIT_REPORT_FD + 1, O_CLOEXEC) < 0 || dup2(hold, NS_INIT_HOLD_FD) < 0)
                die("setting up the init's descriptors");
        report_fd = NS_INIT_REPORT_FD;
        init_fd = NS_INIT_REPORT_FD + 1;
        if (jail_close_from(NS_INIT_HOLD_FD + 1, false) < 0)
                die("closing the init's other descriptors");
        char pid_arg[16], fd_arg[16], hold_arg[16];
        snprintf(pid_arg, sizeof(pid_arg), "%d", (int)program);
        snprintf(fd_arg, sizeof(fd_arg), "%d", NS_INIT_REPORT_FD);
        snprintf(hold_arg, sizeof(hold_arg), "%d", NS_INIT_HOLD_FD);
        char *argv[] = { "hxs-init", fd_arg, pid_arg, hold_arg, NULL };
        char *envp[] = { NULL };
        syscall(SYS_execveat, init_fd, "", argv, envp, AT_EMPTY_PATH);
        die("executing the sandbox's init");
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
        report_fd = a->report_fd;
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
                die("sethostname");
}

static void read_payload(const ns_child_args *a, payload_view *ret)
{
        int r = payload_map(a->payload_fd, ret);
        if (r < 0) {
                errno = -r;
                die("reading the payload");
        }
        close(a->payload_fd);
}

/* cgroup namespace now, so the sandbox's own cgroup is its root. The sync pipe stays
 * open: the static init holds on it (NS_INIT_HOLD_FD). */
static void enter_cgroup_namespace(const ns_child_args *a)
{
        if (a->init_fd < 0)
                close(a->sync_fd);
        if (unshare(CLONE_NEWCGROUP) < 0)
                die("unsharing the cgroup namespace");
}

static void write_files(const ns_child_args *a)
{
        if (!a->has_files)
                return;
        char why[400];
        int r = ns_files_unpack(a->files_fd, NS_SANDBOX_HOME, NS_SANDBOX_UID, NS_SANDBOX_UID, why, sizeof(why));
        if (r < 0) {
                errno = -r;
                die("%s", why);
        }
        close(a->files_fd);
}

static pid_t fork_program(void)
{
        pid_t program = fork();
        if (program < 0)
                die("fork");
        return program;
}

/* PID 1 keeps only the report pipe: the program's end of stdio must be the only
 * writer, so the supervisor sees EOF when the sandbox is gone. Then no capabilities,
 * no_new_privs and the filter, and the init. */
static _Noreturn void become_init(const ns_child_args *a, pid_t program)
{
        if (a->stdin_fd >= 0)
                close(a->stdin_fd);
        close(a->stdout_fd);
        close(a->stderr_fd);
        step(JAIL_BOUNDING, jail_drop_bounding(0, false));
        step(JAIL_CAPS, jail_set_caps(0));
        if (jail_no_new_privs() < 0 || hxs_seccomp_load(a->seccomp) < 0)
                _exit(127);
        if (a->init_fd < 0)
                init_loop(program);
        exec_init(a->init_fd, a->sync_fd, program);
}

/* The recipe, in the order the security argument needs (nsjail's containProc): a
 * failing step ends the child. */
void ns_child_main(const ns_child_args *a, ns_program *ret)
{
        payload_view pl;
        int counter_fds[ARRAY_SIZE(userns_counters)];

        keep_own_descriptors(a);        /* and into the v1 cgroups, first */
        reset_signals(a);
        await_supervisor(a, 'm');       /* our uid/gid maps are written */
        become_namespace_root(a);       /* and die with the supervisor */
        set_hostname();
        read_payload(a, &pl);
        open_userns_counters(a->limits, counter_fds);
        loopback_up();
        build_root(a, &pl);
        await_supervisor(a, 'g');       /* in every cgroup of the sandbox */
        enter_cgroup_namespace(a);
        write_userns_counters(a->limits, counter_fds);
        write_files(a);                 /* into the working directory, charged to the sandbox */
        pid_t program = fork_program();
        if (program == 0) {
                run_program(a, &pl, ret);
                return;                 /* warm: the caller runs the program */
        }
        become_init(a, program);
}
