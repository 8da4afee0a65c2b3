/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's root filesystem as a table of steps (ns-root.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "core/macro.h"
#include "ns/ns-etc.h"
#include "ns/ns-proc.h"
#include "ns/ns-report.h"
#include "ns/ns-root.h"

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
                ns_child_die("bind-mounting %s", src);
        unsigned long f = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | locked_flags(src);
        if (mount(NULL, dst, NULL, f, NULL) < 0)
                ns_child_die("remounting %s", dst);
}

/* Read-only bind of a host path (file or directory) onto dst, which must exist. */
static void bind_ro(const char *src, const char *dst)
{
        if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                ns_child_die("bind-mounting %s", src);
        unsigned long f = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(src);
        if (mount(NULL, dst, NULL, f, NULL) < 0)
                ns_child_die("making %s read-only", dst);
}

static void mkdir_or_die(const char *path, mode_t mode)
{
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                ns_child_die("mkdir %s", path);
}

static void touch_or_die(const char *path)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                ns_child_die("creating %s", path);
        close(fd);
}

static void write_or_die(const char *path, const void *data, size_t len, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                ns_child_die("creating %s", path);
        const char *p = data;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        ns_child_die("writing %s", path);
                }
                p += n;
                len -= (size_t)n;
        }
        if (fchmod(fd, mode) < 0)
                ns_child_die("chmod %s", path);
        close(fd);
}

static void write_str(const char *path, const char *s)
{
        write_or_die(path, s, strlen(s), 0444);
}

static void tmpfs_or_die(const char *dst, const char *opts, unsigned long flags)
{
        if (mount("tmpfs", dst, "tmpfs", flags, opts) < 0)
                ns_child_die("mounting a tmpfs on %s (%s)", dst, opts);
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

/* The sandbox's sitecustomize in the directory dir (/etc/python3.X) of the root, see
 * ns_python_site; with its bytecode when the sandbox starts its Python cold. */
static void write_python_site(const char *root, const char *dir, const ns_python_site *site, bool bytecode)
{
        char p[700], cache[700];
        struct stat st;

        mkdir_or_die(dir, 0755);
        snprintf(p, sizeof(p), "%s/sitecustomize.py", dir);
        write_str(p, site->loader);
        snprintf(p, sizeof(p), "%s/hxs_charts.py", dir);
        write_str(p, site->hooks);
        if (site->hooks_pyc_len) {
                snprintf(p, sizeof(p), "%s/hxs_charts.pyc", dir);
                write_or_die(p, site->hooks_pyc, site->hooks_pyc_len, 0444);
        }
        /* Python finds sitecustomize as /usr/lib/python3.X/sitecustomize.py, the host's
         * link to the file above, and looks for its bytecode in the host's __pycache__
         * there: the host's, stale for ours, so every start compiled ours (about 2 ms,
         * the interpreter's first compile). Ours is shown there instead, a pyc Python
         * takes without checking the source; where the host has no such file (or
         * another Python), the source is compiled as before. Not in a sandbox whose
         * Python a warm template clones (the template ran its site once for all): the
         * bind would cost each of them more than the rare Python it starts anew saves. */
        if (!bytecode || !site->loader_pyc_len || !site->loader_cache[0])
                return;
        snprintf(cache, sizeof(cache), "%s%s", root, site->loader_cache);
        if (lstat(cache, &st) < 0 || !S_ISREG(st.st_mode))
                return;
        snprintf(p, sizeof(p), "%s/sitecustomize.pyc", dir);
        write_or_die(p, site->loader_pyc, site->loader_pyc_len, 0444);
        bind_ro(p, cache);
}

static void build_etc(const char *root, const ns_python_site *site, bool bytecode)
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
                ns_child_die("symlink %s", p);

        for (size_t i = 0; i < ARRAY_SIZE(etc_binds); i++) {
                struct stat st;
                snprintf(src, sizeof(src), "/etc/%s", etc_binds[i]);
                snprintf(p, sizeof(p), "%s/etc/%s", root, etc_binds[i]);
                /* /usr/lib/python3.X/sitecustomize.py points here: ours instead of the
                 * host's (an apport hook at most) */
                if (site && strncmp(etc_binds[i], "python3.", 8) == 0 && lstat(src, &st) == 0 &&
                    S_ISDIR(st.st_mode)) {
                        write_python_site(root, p, site, bytecode);
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
                                ns_child_die("symlink %s", p);
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
                ns_child_die("leaving the caller's session");
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
                        ns_child_die("bind-mounting %s", src);
        }
        static const char *const links[][2] = {
                { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
                { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
                { "pts/ptmx", "ptmx" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
                snprintf(p, sizeof(p), "%s/dev/%s", root, links[i][1]);
                if (symlink(links[i][0], p) < 0)
                        ns_child_die("symlink %s", p);
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
                ns_child_die("mounting /dev/pts");
        snprintf(p, sizeof(p), "%s/dev/shm", root);
        mkdir_or_die(p, 01777);
        tmpfs_or_die(p, "size=16m,nr_inodes=1024,mode=1777", MS_NOSUID | MS_NODEV);
        snprintf(p, sizeof(p), "%s/dev", root);
        if (mount(NULL, p, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755") < 0)
                ns_child_die("making /dev read-only");
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
                        ns_child_die("chmod %s", p);
                if ((ret_fds[i] = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                        ns_child_die("opening %s", p);
        }
}

static void bind_scratch(const char *root, int fds[3])
{
        for (size_t i = 0; i < ARRAY_SIZE(scratch_dirs); i++) {
                char src[64], dst[600];
                snprintf(src, sizeof(src), "/proc/self/fd/%d", fds[i]);
                snprintf(dst, sizeof(dst), "%s/%s", root, scratch_dirs[i]);
                if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                        ns_child_die("bind-mounting /%s", scratch_dirs[i]);
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
                ns_child_die("making mounts private");
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
                 ((c->pl->code_len + c->a->drivers_bytes) >> 10) + 1024 + (ns_machine_root_bytes(&c->mach) >> 10));
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
                ns_child_die("symlink %s", p);
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
                        ns_child_die("symlink %s", p);
        }
        snprintf(p, sizeof(p), "%s/usr", c->root);
        bind_ro(usr_src, p);
}

static void op_etc(root_ctx *c)
{
        build_etc(c->root, c->a->site, !c->a->warm);
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

/* the program, read-only once the root is; in a pre-started sandbox a FIFO instead,
 * which the interpreter opens as it would the file and reads to its end, once the
 * supervisor writes the code into it (the path, argv and line numbers stay the cold
 * path's). Only a writer that opens it through the root may: the root is read-only,
 * which does not stop a FIFO's writer. */
static void op_code(root_ctx *c)
{
        char p[600];
        snprintf(p, sizeof(p), "%s/code/%s", c->root, c->a->code_name);
        if (!c->a->code_fifo) {
                write_or_die(p, c->pl->code, c->pl->code_len, 0444);
                return;
        }
        if (mkfifo(p, 0444) < 0)
                ns_child_die("mkfifo %s", p);
}

size_t ns_drivers_bytes(const driver_file *drivers)
{
        size_t n = 0;
        for (const driver_file *f = drivers; f->name; f++)
                n += strlen(f->text) + 512; /* and its inode, rounded up */
        return n;
}

/* a session's drivers, read-only once the root is (engine/drivers.h) */
static void op_drivers(root_ctx *c)
{
        if (!c->a->drivers)
                return;
        char p[600];
        mkdirs_in_root(c, DRIVERS_DIR, p, sizeof(p));
        for (const driver_file *f = c->a->drivers; f->name; f++) {
                snprintf(p, sizeof(p), "%s%s/%s", c->root, DRIVERS_DIR, f->name);
                write_str(p, f->text);
        }
}

/* /proc of our own pid namespace and a /sys, showing the sandbox's limits */
static void op_proc_sys(root_ctx *c)
{
        char why[300];
        int r;
        if ((r = ns_proc_mount(c->root, &c->mach, why, sizeof(why))) < 0 ||
            (r = ns_sys_build(c->root, &c->mach, why, sizeof(why))) < 0) {
                errno = -r;
                ns_child_die("%s", why);
        }
}

static void op_read_only(root_ctx *c)
{
        if (mount(NULL, c->root, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
                ns_child_die("making the root read-only");
}

/* Into the new root; the host's tree is detached, nothing of it stays in reach. */
static void op_pivot(root_ctx *c)
{
        if (chdir(c->root) < 0)
                ns_child_die("chdir to the new root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                ns_child_die("pivot_root");
        if (umount2(".", MNT_DETACH) < 0)
                ns_child_die("detaching the old root");
        if (chdir("/") < 0)
                ns_child_die("chdir /");
}

/* the program's uptime starts now (its processes are forked after this) */
static void op_clock(root_ctx *c)
{
        (void)c;
        char why[300];
        int r = ns_time_start(why, sizeof(why));
        if (r < 0) {
                errno = -r;
                ns_child_die("%s", why);
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
        STEP(op_drivers),
        STEP(op_proc_sys),
        STEP(op_read_only),
        STEP(op_pivot),
        STEP(op_clock),
};

void ns_root_build(const ns_child_args *a, const payload_view *pl)
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

