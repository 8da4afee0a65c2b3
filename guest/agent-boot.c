/* SPDX-License-Identifier: Apache-2.0 */
/*
 * From a bare kernel to a machine the agent can work in, as a list of steps:
 *
 *   1. /dev (devtmpfs), /proc, /sys in the initramfs;
 *   2. the kernel command line: hexr.port= (virtio-serial) or hexr.vsock= (vsock);
 *   3. the modules the image builder put in /modules/<group>/NN-name.ko, in file-name
 *      order (the builder numbered them in dependency order): "base" always, then
 *      "serial" or "vsock" for the channel asked for;
 *   4. /dev/vda (ext4, read-only) as the new root, with /dev, /proc, /sys moved into
 *      it (the initramfs stays underneath, unreachable: it only holds this binary);
 *   5. a small tmpfs on /run for the sandbox's mount point, cgroup2 on /sys/fs/cgroup.
 *
 * The kernel only gives us PID 1 and the initramfs: everything here is the kernel's
 * interface, no helper program exists yet.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "guest/agent.h"

bool agent_verbose;

void agent_mark(const char *step)
{
        if (!agent_verbose)
                return;
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        agent_log("%5ld.%03ld s  %s", (long)ts.tv_sec, ts.tv_nsec / 1000000L, step);
}

#define NEWROOT "/newroot"
#define MODULES_DIR "/modules"

static void sleep_ms(unsigned ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int mount_or_fail(const char *src, const char *dst, const char *type, unsigned long flags,
                         const char *opts, hxs_error *err)
{
        if (mkdir(dst, 0755) < 0 && errno != EEXIST)
                return err_fail(err, HXS_ERR_SETUP, -errno, "mkdir %s: %s", dst, strerror(errno));
        if (mount(src, dst, type, flags, opts) < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "mounting %s on %s: %s", type ? type : src, dst, strerror(errno));
        return 0;
}

/* hexr.port=NAME, hexr.vsock=PORT. Names are checked: they end up in paths. */
static int parse_cmdline(agent_boot *b, hxs_error *err)
{
        char line[4096];
        int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "opening /proc/cmdline: %s", strerror(errno));
        ssize_t n = read(fd, line, sizeof(line) - 1);
        close(fd);
        if (n < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "reading /proc/cmdline: %s", strerror(errno));
        line[n] = '\0';
        for (char *save = NULL, *tok = strtok_r(line, " \t\n", &save); tok;
             tok = strtok_r(NULL, " \t\n", &save)) {
                if (strncmp(tok, "hexr.port=", 10) == 0) {
                        const char *v = tok + 10;
                        size_t len = strlen(v);
                        if (len == 0 || len >= sizeof(b->port_name) || strspn(v,
                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len)
                                return err_fail(err, HXS_ERR_SETUP, -EIO, "hexr.port=%s is not a port name", v);
                        memcpy(b->port_name, v, len + 1);
                } else if (strncmp(tok, "hexr.vsock=", 11) == 0) {
                        char *end;
                        errno = 0;
                        unsigned long p = strtoul(tok + 11, &end, 10);
                        if (errno || *end || end == tok + 11 || p == 0 || p >= 0xffffffffUL)
                                return err_fail(err, HXS_ERR_SETUP, -EIO, "hexr.vsock=%s is not a port number", tok + 11);
                        b->vsock_port = (unsigned)p;
                } else if (strcmp(tok, "hexr.verbose") == 0) {
                        agent_verbose = true;
                }
        }
        if (!b->port_name[0] && !b->vsock_port)
                return err_fail(err, HXS_ERR_SETUP, -EIO, "the kernel command line names no channel (hexr.port= or hexr.vsock=)");
        return 0;
}

static int name_filter(const struct dirent *de)
{
        size_t len = strlen(de->d_name);
        return len > 3 && strcmp(de->d_name + len - 3, ".ko") == 0;
}

/* Loads every module of one group, in file-name order; a missing group is fine
 * (the kernel has those drivers built in). The files are removed once loaded. */
static int load_modules(const char *group, hxs_error *err)
{
        char dir[128];
        snprintf(dir, sizeof(dir), MODULES_DIR "/%s", group);
        struct dirent **names;
        int n = scandir(dir, &names, name_filter, alphasort);
        if (n < 0)
                return errno == ENOENT ? 0 : err_fail(err, HXS_ERR_SETUP, -errno, "listing %s: %s", dir, strerror(errno));
        int r = 0;
        for (int i = 0; i < n; i++) {
                char path[400];
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
                int fd = r == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
                if (r == 0 && fd < 0)
                        r = err_fail(err, HXS_ERR_SETUP, -errno, "opening %s: %s", path, strerror(errno));
                if (fd >= 0) {
                        if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
                                r = err_fail(err, HXS_ERR_SETUP, -errno, "loading %s: %s", path, strerror(errno));
                        close(fd);
                        (void)unlink(path);
                }
                free(names[i]);
        }
        free(names);
        return r;
}

static int wait_for(const char *path, unsigned timeout_ms)
{
        for (unsigned waited = 0;; waited += 5) {
                if (access(path, F_OK) == 0)
                        return 0;
                if (waited >= timeout_ms)
                        return -ENOENT;
                sleep_ms(5);
        }
}

static int switch_root(hxs_error *err)
{
        int r;
        if (wait_for("/dev/vda", 10000) < 0)
                return err_fail(err, HXS_ERR_SETUP, -EIO, "no root disk (/dev/vda) appeared");
        if ((r = mount_or_fail("/dev/vda", NEWROOT, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV,
                               "", err)) < 0)
                return r;
        static const char *const moves[] = { "/dev", "/proc", "/sys" };
        for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
                char dst[64];
                snprintf(dst, sizeof(dst), NEWROOT "%s", moves[i]);
                if (mount(moves[i], dst, NULL, MS_MOVE, NULL) < 0)
                        return err_fail(err, HXS_ERR_SETUP, -errno, "moving %s into the root image: %s", moves[i], strerror(errno));
        }
        if (chdir(NEWROOT) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
            chdir("/") < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "switching to the root image: %s", strerror(errno));
        if ((r = mount_or_fail("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                               "size=1m,mode=0755", err)) < 0)
                return r;
        if ((r = mount_or_fail("cgroup2", "/sys/fs/cgroup", "cgroup2",
                               MS_NOSUID | MS_NODEV | MS_NOEXEC, "", err)) < 0)
                return r;
        return 0;
}

int boot_machine(agent_boot *ret, hxs_error *err)
{
        int r;
        *ret = (agent_boot){ 0 };
        if ((r = mount_or_fail("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755",
                               err)) < 0 ||
            (r = mount_or_fail("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "", err)) < 0 ||
            (r = mount_or_fail("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "", err)) < 0)
                return r;
        if ((r = parse_cmdline(ret, err)) < 0)
                return r;
        agent_mark("agent started");
        if ((r = load_modules("base", err)) < 0 ||
            (r = load_modules(ret->vsock_port ? "vsock" : "serial", err)) < 0)
                return r;
        agent_mark("modules loaded");
        r = switch_root(err);
        agent_mark("root mounted");
        return r;
}

/* /sys/class/virtio-ports/vportNpM/name holds the name the host gave the port. */
static int find_port(const char *name, char *dev, size_t dev_size)
{
        DIR *d = opendir("/sys/class/virtio-ports");
        if (!d)
                return -errno;
        int r = -ENOENT;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || strlen(de->d_name) > 32)
                        continue;
                char path[128], got[160];
                snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", de->d_name);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read(fd, got, sizeof(got) - 1);
                close(fd);
                if (n <= 0)
                        continue;
                got[n] = '\0';
                got[strcspn(got, "\n")] = '\0';
                if (strcmp(got, name) == 0) {
                        snprintf(dev, dev_size, "/dev/%s", de->d_name);
                        r = 0;
                        break;
                }
        }
        closedir(d);
        return r;
}

int boot_channel(const agent_boot *b, int *ret_fd, bool *ret_listening, hxs_error *err)
{
        if (b->vsock_port) {
                int s = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (s < 0)
                        return err_fail(err, HXS_ERR_SETUP, -errno, "creating the vsock socket: %s", strerror(errno));
                struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY,
                                          .svm_port = b->vsock_port };
                if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 1) < 0) {
                        int e = errno;
                        close(s);
                        return err_fail(err, HXS_ERR_SETUP, -e, "listening on vsock port %u: %s", b->vsock_port, strerror(e));
                }
                *ret_fd = s;
                *ret_listening = true;
                return 0;
        }
        char dev[64];
        int r = -ENOENT;
        /* the port appears once the host's device has announced it */
        for (unsigned waited = 0; waited < 10000; waited += 5) {
                if ((r = find_port(b->port_name, dev, sizeof(dev))) == 0 && access(dev, F_OK) == 0)
                        break;
                r = -ENOENT;
                sleep_ms(5);
        }
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, -EIO, "no virtio port named %s", b->port_name);
        int fd = open(dev, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "opening %s: %s", dev, strerror(errno));
        *ret_fd = fd;
        *ret_listening = false;
        return 0;
}

_Noreturn void boot_poweroff(void)
{
        sync();
        reboot(RB_AUTOBOOT);
        /* reboot only fails without CAP_SYS_BOOT, i.e. not as the VM's PID 1 */
        for (;;)
                pause();
}
