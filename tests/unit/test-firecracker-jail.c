/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Firecracker driver against tests/fake-firecracker: the jail (uid, namespaces,
 * root, /dev, cgroup limits), the API sequence, the vsock handshake with retries and
 * the agent's stream, the error messages when Firecracker misbehaves, and that nothing
 * (process, cgroup, jail directory) is left after success or failure. Needs root, as
 * the driver does; needs no KVM and no Firecracker (the vm_host is built here, as
 * vm_host_init would refuse Firecracker without KVM).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "core/fileio.h"
#include "ns/ns.h"
#include "vm/vm.h"

#define FC_UID 1999999u

#ifndef HXS_FAKE_FIRECRACKER
#define HXS_FAKE_FIRECRACKER "" /* not built (no static jansson): the tests skip */
#endif

static char tmp[] = "/tmp/hxs-fc-test-XXXXXX";
static vm_host host;
static cg_layout cgroups; /* the engine's, as vm_init hands it to the host */

static void write_text(const char *path, const char *text, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        assert_int_equal(chmod(path, mode), 0);
}

static void set_mode(const char *mode)
{
        char text[64];
        snprintf(text, sizeof(text), "%s\n", mode);
        write_text(host.kernel, text, 0644);
}

static int setup(void **state)
{
        if (geteuid() != 0)
                return 0;
        if (!mkdtemp(tmp))
                return -1;
        host.kind = HXS_BACKEND_FIRECRACKER;
        snprintf(host.hypervisor, sizeof(host.hypervisor), "%s", HXS_FAKE_FIRECRACKER);
        snprintf(host.kernel, sizeof(host.kernel), "%s/vmlinux", tmp);
        snprintf(host.initrd, sizeof(host.initrd), "%s/initramfs.img", tmp);
        snprintf(host.rootfs, sizeof(host.rootfs), "%s/rootfs.ext4", tmp);
        snprintf(host.state_dir, sizeof(host.state_dir), "%s/state", tmp);
        host.kvm = true;
        host.vmm_uid = FC_UID;
        hxs_error err = { 0 };
        if (cg_layout_init(&cgroups, &err) < 0)
                return -1;
        host.cg = &cgroups;
        set_mode("ok");
        write_text(host.initrd, "initrd", 0644);
        write_text(host.rootfs, "rootfs", 0644);
        return 0;
}

static int teardown(void **state)
{
        if (geteuid() != 0)
                return 0;
        char p[400];
        const char *files[] = { host.kernel, host.initrd, host.rootfs };
        for (size_t i = 0; i < 3; i++)
                unlink(files[i]);
        snprintf(p, sizeof(p), "%s/fc", host.state_dir);
        rmdir(p);
        rmdir(host.state_dir);
        rmdir(tmp);
        return 0;
}

static void need_root(void)
{
        if (geteuid() != 0) {
                print_message("skipped: the Firecracker driver's jail needs root\n");
                skip();
        }
        if (!HXS_FAKE_FIRECRACKER[0]) {
                print_message("skipped: tests/fake-firecracker was not built (no static libjansson)\n");
                skip();
        }
}

/* Entries of <state>/fc (the jails' mount points). */
static int jails_left(void)
{
        char p[400];
        snprintf(p, sizeof(p), "%s/fc", host.state_dir);
        DIR *d = opendir(p);
        if (!d)
                return 0;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

/* Our cgroups ("s<our pid>.*") in every hexr-sandbox directory of our own cgroups. */
static int cgroups_left(void)
{
        FILE *f = fopen("/proc/self/cgroup", "re");
        assert_non_null(f);
        char line[1024], prefix[32];
        snprintf(prefix, sizeof(prefix), "s%d.", (int)getpid());
        int n = 0;
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c2 = '\0';
                const char *ctrl = c1 + 1, *path = strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1;
                const char *mounts[2];
                char a[600], b[600];
                if (ctrl[0] == '\0') {
                        snprintf(a, sizeof(a), "/sys/fs/cgroup%s/hexr-sandbox", path);
                        snprintf(b, sizeof(b), "/sys/fs/cgroup/unified%s/hexr-sandbox", path);
                } else {
                        snprintf(a, sizeof(a), "/sys/fs/cgroup/%s%s/hexr-sandbox", ctrl, path);
                        b[0] = '\0';
                }
                mounts[0] = a;
                mounts[1] = b;
                for (int i = 0; i < 2; i++) {
                        DIR *d = mounts[i][0] ? opendir(mounts[i]) : NULL;
                        if (!d)
                                continue;
                        struct dirent *de;
                        while ((de = readdir(d)))
                                if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
                                        n++;
                        closedir(d);
                }
        }
        fclose(f);
        return n;
}

static void assert_nothing_left(void)
{
        siginfo_t si = { 0 };
        /* no child at all: every Firecracker was reaped */
        assert_int_equal(waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT), -1);
        assert_int_equal(errno, ECHILD);
        assert_int_equal(jails_left(), 0);
        assert_int_equal(cgroups_left(), 0);
}

static void send_all(int fd, const uint8_t *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EAGAIN) {
                        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                        poll(&pfd, 1, 1000);
                        continue;
                }
                assert_true(w > 0);
                p += w;
                n -= (size_t)w;
        }
}

static void send_frame(int fd, hxp_type type, const void *p, size_t n)
{
        uint8_t h[HXP_HEADER_SIZE];
        assert_int_equal(hxp_header(h, type, n), 0);
        send_all(fd, h, sizeof(h));
        if (n)
                send_all(fd, p, n);
}

/* The memory limit of the process's cgroup in the memory hierarchy (v1 or v2). */
static unsigned long long memory_limit(pid_t pid, char *name, size_t name_size)
{
        char p[64], line[1024];
        snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
        FILE *f = fopen(p, "re");
        assert_non_null(f);
        unsigned long long limit = 0;
        char v1[700] = "", v2[700] = "";
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c2 = '\0';
                if (strcmp(c1 + 1, "memory") == 0)
                        snprintf(v1, sizeof(v1), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", c2 + 1);
                else if (c1[1] == '\0')
                        snprintf(v2, sizeof(v2), "/sys/fs/cgroup%s/memory.max", c2 + 1);
                const char *slash = strrchr(c2 + 1, '/');
                if (strcmp(c1 + 1, "memory") == 0 || (c1[1] == '\0' && !name[0]))
                        snprintf(name, name_size, "%s", slash ? slash + 1 : "");
        }
        fclose(f);
        FILE *m = fopen(v1[0] ? v1 : v2, "re");
        assert_non_null(m);
        assert_int_equal(fscanf(m, "%llu", &limit), 1);
        fclose(m);
        return limit;
}

/* Listening unix sockets on the host that anyone may connect to: not in the jail. */
static int host_socket(const char *path)
{
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        (void)unlink(path);
        assert_true(s >= 0);
        assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(chmod(path, 0777), 0);
        assert_int_equal(listen(s, 4), 0);
        return s;
}

static int connect_path(const char *path)
{
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int r = connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        close(s);
        return r;
}

static void test_boots_in_its_jail(void **state)
{
        need_root();
        set_mode("ok");
        char socks[2][64];
        int ls[2];
        snprintf(socks[0], sizeof(socks[0]), "/tmp/hxs-fc-probe-%d.sock", (int)getpid());
        snprintf(socks[1], sizeof(socks[1]), "/run/hxs-fc-probe-%d.sock", (int)getpid());
        for (int i = 0; i < 2; i++)
                ls[i] = host_socket(socks[i]);
        vm_instance v;
        hxs_error err = { 0 };
        int r = vm_spawn(&host, 256, &v, &err);
        if (r < 0)
                fail_msg("vm_spawn: %s", err.message);
        char jail[300];
        snprintf(jail, sizeof(jail), "%s", v.jail);
        assert_true(strncmp(jail, host.state_dir, strlen(host.state_dir)) == 0);
        assert_true(v.pidfd >= 0 && v.chan >= 0 && v.err_fd >= 0 && v.pid > 0);
        assert_true(fcntl(v.chan, F_GETFL) & O_NONBLOCK);
        assert_int_equal(fcntl(v.chan, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        r = vm_wait_ready(&v, 5000, &err);
        if (r < 0)
                fail_msg("vm_wait_ready: %s", err.message);

        /* the host's unix sockets answer here, and are not there in its root */
        for (int i = 0; i < 2; i++) {
                char in_jail[128];
                snprintf(in_jail, sizeof(in_jail), "/proc/%d/root%s", (int)v.pid, socks[i]);
                assert_int_equal(connect_path(socks[i]), 0);
                assert_int_equal(connect_path(in_jail), -ENOENT);
                close(ls[i]);
                unlink(socks[i]);
        }

        /* its own cgroup, named like its jail, limited to guest RAM + overhead */
        char cg_name[256] = "";
        unsigned long long limit = memory_limit(v.pid, cg_name, sizeof(cg_name));
        assert_string_equal(cg_name, strrchr(jail, '/') + 1);
        assert_true(limit == (256ull + 64) << 20);

        /* RUN, CODE, STDIN end, START: the fake answers with what it saw */
        uint8_t run[256];
        hxp_builder b;
        hxp_builder_init(&b, run, sizeof(run));
        static const char code[] = "print(42)";
        uint32_t fields[][2] = { { HXP_RUN_LANGUAGE, 0 }, { HXP_RUN_TIMEOUT_MS, 1000 }, { HXP_RUN_MEMORY_MB, 128 },
                                 { HXP_RUN_PIDS_MAX, 64 }, { HXP_RUN_NOFILE, 64 }, { HXP_RUN_TMPFS_MB, 16 },
                                 { HXP_RUN_OUTPUT_MAX, 65536 }, { HXP_RUN_CODE_LEN, sizeof(code) - 1 },
                                 { HXP_RUN_STDIN_LEN, 0 } };
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                hxp_put_u32(&b, (uint16_t)fields[i][0], fields[i][1]);
        send_frame(v.chan, HXP_RUN, run, b.len);
        send_frame(v.chan, HXP_CODE, code, sizeof(code) - 1);
        send_frame(v.chan, HXP_STDIN, NULL, 0);
        send_frame(v.chan, HXP_START, NULL, 0);
        char out[8192] = "";
        bool exited = false;
        while (!exited) {
                hxp_frame f;
                r = vm_read_frame(&v, &f);
                if (r == 0) {
                        struct pollfd pfd = { .fd = v.chan, .events = POLLIN };
                        assert_true(poll(&pfd, 1, 5000) == 1);
                        continue;
                }
                assert_int_equal(r, 1);
                if (f.type == HXP_STDOUT)
                        snprintf(out + strlen(out), sizeof(out) - strlen(out), "%.*s", (int)f.len, f.payload);
                else if (f.type == HXP_EXIT)
                        exited = true;
                else
                        fail_msg("unexpected frame %d", f.type);
        }
        print_message("fake firecracker saw: %s", out);
        static const char *const want[] = {
                "pid=1 ",                                       /* its own pid namespace */
                "uid=1999999,1999999,1999999 ", "gid=1999999,1999999,1999999 ", "groups=0 ",
                "nnp=1 ", "caps=0,0,0 ", "bounding=0 ",
                "pdeathsig=9 ",                                 /* set after the uid change */
                "root=dev,initramfs.img,rootfs.ext4,run,vmlinux ", /* nothing of the host */
                "dev=kvm,urandom ",                             /* no net/tun */
                "kvm=c:10:232:uid1999999:600:",                 /* usable by its uid */
                "ifaces=lo ",                                   /* no network */
                "rootwrite=EROFS ", "runwrite=ok ",
                "mem=256 ", "vcpus=1 ", "id=hexr-s",
                "code=print(42)\n",
        };
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                if (!strstr(out, want[i]))
                        fail_msg("the jail is not as it should be: \"%s\" missing in: %s", want[i], out);
        /* the image is read-only in the jail, whichever check catches it first */
        assert_true(strstr(out, "imagewrite=EROFS ") || strstr(out, "imagewrite=EACCES "));

        vm_destroy(&v);
        struct stat st;
        assert_int_equal(stat(jail, &st), -1);
        assert_nothing_left();
}

static void expect_failure(const char *mode, const char *fragment)
{
        if (mode)
                set_mode(mode);
        vm_instance v;
        hxs_error err = { 0 };
        int r = vm_spawn(&host, 256, &v, &err);
        if (r >= 0) {
                vm_destroy(&v);
                fail_msg("mode %s: vm_spawn succeeded", mode);
        }
        print_message("%s: %s\n", mode ? mode : "-", err.message);
        if (!strstr(err.message, fragment))
                fail_msg("mode %s: \"%s\" lacks \"%s\"", mode, err.message, fragment);
        size_t len = strlen(err.message);
        if (len == 0 || err.message[len - 1] == ' ')
                fail_msg("mode %s: \"%s\" is not one tidy sentence", mode, err.message);
        assert_int_equal(v.pidfd, -1);
        assert_nothing_left();
        set_mode("ok");
}

static void test_api_fault_is_reported(void **state)
{
        need_root();
        expect_failure("reject-machine-config",
                       "firecracker: PUT /machine-config answered 400: fake: machine config rejected \"on purpose\"");
}

static void test_malformed_http_is_refused(void **state)
{
        need_root();
        expect_failure("bad-http", "firecracker: PUT /boot-source: the answer is not HTTP we accept");
}

static void test_death_after_start_says_why(void **state)
{
        need_root();
        expect_failure("exit-after-start",
                       "exited before the guest agent listened: fake-firecracker: exiting on purpose");
}

static void test_garbage_handshake_is_refused(void **state)
{
        need_root();
        expect_failure("bad-ok", "its vsock answered CONNECT with something other than OK");
}

/* A Firecracker under a guest's control must not make the host follow a link. */
static void test_symlinked_socket_is_not_followed(void **state)
{
        need_root();
        expect_failure("symlink", "connecting to the guest's vsock (/run/v.sock): Socket operation on non-socket");
}

static void test_unreadable_image_is_named(void **state)
{
        need_root();
        assert_int_equal(chmod(host.rootfs, 0600), 0);
        expect_failure(NULL, "rootfs.ext4 (mode 0600) is not readable by uid 1999999");
        assert_int_equal(chmod(host.rootfs, 0644), 0);
}

static void test_jail_failure_names_the_step(void **state)
{
        need_root();
        vm_host saved = host;
        /* a dynamically linked binary (this test) cannot run in the jail: no loader there */
        char self[256];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        assert_true(n > 0 && (size_t)n < sizeof(self) - 1);
        self[n] = '\0';
        snprintf(host.hypervisor, sizeof(host.hypervisor), "%s", self);
        expect_failure(NULL, "firecracker: setting up its jail: executing the binary: No such file or directory");
        host = saved;
}

/* The pool's thread and the event loop spawn at the same time. */
static void *spawn_one(void *arg)
{
        vm_instance *v = arg;
        hxs_error err = { 0 };
        if (vm_spawn(&host, 200, v, &err) < 0) {
                print_message("vm_spawn: %s\n", err.message);
                return (void *)1;
        }
        if (vm_wait_ready(v, 5000, &err) < 0) {
                print_message("vm_wait_ready: %s\n", err.message);
                vm_destroy(v);
                return (void *)1;
        }
        return NULL;
}

static void test_concurrent_spawns(void **state)
{
        need_root();
        set_mode("ok");
        vm_instance v[3];
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
                assert_int_equal(pthread_create(&t[i], NULL, spawn_one, &v[i]), 0);
        int failed = 0;
        for (int i = 0; i < 3; i++) {
                void *r;
                pthread_join(t[i], &r);
                failed += r != NULL;
        }
        assert_int_equal(failed, 0);
        /* three jails, three names, three pid namespaces */
        assert_int_equal(jails_left(), 3);
        assert_string_not_equal(v[0].jail, v[1].jail);
        assert_string_not_equal(v[1].jail, v[2].jail);
        for (int i = 0; i < 3; i++)
                vm_destroy(&v[i]);
        assert_nothing_left();
}

/* A jail left by a process that died goes on the next start; live owners' stay. */
static void test_sweeps_dead_owners_jails(void **state)
{
        need_root();
        vm_host saved = host;
        snprintf(host.state_dir, sizeof(host.state_dir), "%s/state2", tmp);
        char fc[400], dead[500], alive[500], other[500];
        snprintf(fc, sizeof(fc), "%s/fc", host.state_dir);
        assert_int_equal(mkdir(host.state_dir, 0711), 0);
        assert_int_equal(mkdir(fc, 0700), 0);
        unsigned long long start = 0;
        assert_int_equal(proc_start_time(getpid(), &start), 0);
        snprintf(dead, sizeof(dead), "%s/s%d.%llu-7", fc, (int)getpid(), start + 1); /* pid reused */
        snprintf(alive, sizeof(alive), "%s/s%d.%llu-7", fc, (int)getpid(), start);
        snprintf(other, sizeof(other), "%s/not-a-jail", fc);
        assert_int_equal(mkdir(dead, 0700), 0);
        assert_int_equal(mkdir(alive, 0700), 0);
        assert_int_equal(mkdir(other, 0700), 0);
        vm_instance v;
        hxs_error err = { 0 };
        if (vm_spawn(&host, 200, &v, &err) < 0)
                fail_msg("vm_spawn: %s", err.message);
        vm_destroy(&v);
        struct stat st;
        assert_int_equal(stat(dead, &st), -1);
        assert_int_equal(stat(alive, &st), 0);
        assert_int_equal(stat(other, &st), 0);
        rmdir(alive);
        rmdir(other);
        assert_nothing_left();
        rmdir(fc);
        rmdir(host.state_dir);
        host = saved;
}

/* A cold start runs on the spawner's thread: the caller gets an fd at once, and the
 * answer when the start is over, however long Firecracker takes (here: its API never
 * answers, and the driver gives up after its 3 s). */
static void test_cold_start_is_off_the_callers_thread(void **state)
{
        need_root();
        set_mode("hold-api");
        vm_spawner *s;
        hxs_error err = { 0 };
        assert_int_equal(vm_spawner_new(&host, &s, &err), 0);
        vm_spawn_job *job;
        int fd;
        assert_int_equal(vm_spawner_submit(s, 256, &job, &fd, &err), 0);
        /* back here while the driver waits on the API (for up to 3 s) */
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        assert_int_equal(poll(&pfd, 1, 0), 0);
        assert_int_equal(poll(&pfd, 1, 30000), 1);
        vm_instance v;
        assert_true(vm_spawn_job_take(job, &v, &err) < 0);
        print_message("%s\n", err.message);
        assert_non_null(strstr(err.message, "firecracker: PUT /boot-source"));

        /* one given up while it starts: its VM is destroyed once it is there */
        set_mode("ok");
        assert_int_equal(vm_spawner_submit(s, 256, &job, &fd, &err), 0);
        vm_spawn_job_abandon(job);
        vm_spawner_free(s); /* waits for the start under way */
        assert_nothing_left();
}

/* Each hypervisor has a uid of its own, and none is the package downloader's or a
 * template's: a compromise of one cannot ptrace or signal the others. */
static void test_vmm_uids_are_their_own(void **state)
{
        hxs_config cfg;
        hxs_config_defaults(&cfg);
        uint32_t qemu = vm_vmm_uid(&cfg, HXS_BACKEND_QEMU), fc = vm_vmm_uid(&cfg, HXS_BACKEND_FIRECRACKER);
        const uint32_t others[] = { cfg.uid_base, cfg.uid_base + NS_SANDBOX_UID, cfg.uid_base + NS_TEMPLATE_UID,
                                    cfg.uid_base + PKG_FETCH_UID };
        assert_int_not_equal(qemu, fc);
        for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
                assert_int_not_equal(qemu, others[i]);
                assert_int_not_equal(fc, others[i]);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_vmm_uids_are_their_own),
                cmocka_unit_test(test_boots_in_its_jail),
                cmocka_unit_test(test_api_fault_is_reported),
                cmocka_unit_test(test_malformed_http_is_refused),
                cmocka_unit_test(test_death_after_start_says_why),
                cmocka_unit_test(test_garbage_handshake_is_refused),
                cmocka_unit_test(test_symlinked_socket_is_not_followed),
                cmocka_unit_test(test_unreadable_image_is_named),
                cmocka_unit_test(test_jail_failure_names_the_step),
                cmocka_unit_test(test_concurrent_spawns),
                cmocka_unit_test(test_sweeps_dead_owners_jails),
                cmocka_unit_test(test_cold_start_is_off_the_callers_thread),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
