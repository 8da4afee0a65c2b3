/* SPDX-License-Identifier: Apache-2.0 */
/* Interactive stdin (exec.h, exec_stdin_*) on the qemu backend, through the real engine
 * and QEMU driver with tests/fake-qemu as QEMU_BIN (next to this binary): RUN says
 * interactive with the session's argv, bytes queued before and while the program runs
 * go as STDIN frames after START (a write larger than a frame too), and the close as
 * an empty STDIN. The fake echoes each frame back. Skips where the backend cannot start
 * (not root: QEMU's jail). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "engine/request.h"

typedef struct seen {
        char *out;
        size_t len, cap;
} seen;

static void on_output(void *userdata, int stream, const void *data, size_t len)
{
        seen *s = userdata;
        if (stream != 1 || len > s->cap - 1 - s->len)
                return;
        memcpy(s->out + s->len, data, len);
        s->len += len;
        s->out[s->len] = '\0';
}

/* Drives x until `want` was printed (or it ended, or 60 s went by). */
static bool pump_until(hxs_exec *x, seen *s, const char *want)
{
        time_t end = time(NULL) + 60;
        while (!strstr(s->out, want) && !hxs_exec_done(x) && time(NULL) < end) {
                struct epoll_event ev;
                (void)epoll_wait(hxs_exec_fd(x), &ev, 1, 100);
                hxs_exec_process(x);
        }
        return strstr(s->out, want) != NULL;
}

static void fake_image(char *dir, size_t size)
{
        snprintf(dir, size, "/tmp/hxs-vm-stdin-%d", (int)getpid());
        assert_int_equal(mkdir(dir, 0755) == 0 || errno == EEXIST, 1);
        static const char *const names[] = { "vmlinux", "initramfs.img", "rootfs.ext4" };
        for (size_t i = 0; i < 3; i++) {
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
                FILE *f = fopen(p, "w");
                assert_non_null(f);
                fprintf(f, "fake %s\n", names[i]);
                fclose(f);
        }
}

static void remove_image(const char *dir)
{
        static const char *const names[] = { "vmlinux", "initramfs.img", "rootfs.ext4" };
        for (size_t i = 0; i < 3; i++) {
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
                unlink(p);
        }
        rmdir(dir);
}

static void test_fake_qemu(void **state)
{
        (void)state;
        hxs_config cfg;
        hxs_error err = { 0 };
        char self[PATH_MAX], fake[PATH_MAX + 16], dir[128];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (geteuid() != 0 || n <= 0 || hxs_config_from_env(&cfg, &err) < 0)
                skip();
        self[n] = '\0';
        *strrchr(self, '/') = '\0';
        snprintf(fake, sizeof(fake), "%s/fake-qemu", self);
        if (access(fake, X_OK) < 0)
                skip();
        fake_image(dir, sizeof(dir));
        cfg.backend = HXS_BACKEND_QEMU;
        cfg.vm_accel = HXS_VM_ACCEL_TCG;
        cfg.vm_pool_size = 0;
        snprintf(cfg.qemu_bin, sizeof(cfg.qemu_bin), "%s", fake);
        snprintf(cfg.vm_image_dir, sizeof(cfg.vm_image_dir), "%s", dir);
        hxs_engine *e;
        if (hxs_engine_new(&cfg, &e, &err) < 0) {
                fprintf(stderr, "skipped: %s\n", err.message);
                remove_image(dir);
                skip();
        }
        hxs_request *req = hxs_request_new();
        assert_non_null(req);
        assert_int_equal(hxs_request_set_code(req, "stdin-echo", 10), 0);
        const char *const argv[] = { "/usr/bin/python3", "-I", "/opt/hexr-session/driver.py", NULL };
        assert_int_equal(request_set_interactive(req, argv), 0);
        hxs_exec *x;
        assert_int_equal(hxs_exec_start(e, req, &x, &err), 0);
        hxs_request_free(req);
        static seen s;
        s.cap = 2u << 20;
        s.out = calloc(1, s.cap);
        assert_non_null(s.out);
        hxs_exec_set_output(x, on_output, &s);

        /* queued before the VM is there: goes after START */
        assert_int_equal(exec_stdin_write(x, "hello\n", 6), 0);
        assert_true(pump_until(x, &s, "interactive=1 argv=/usr/bin/python3 -I /opt/hexr-session/driver.py\n"
                                      "hello\n"));
        /* more than a frame holds */
        size_t big = 1u << 20;
        char *line = malloc(big);
        assert_non_null(line);
        memset(line, 'a', big - 1);
        line[big - 1] = '\n';
        assert_int_equal(exec_stdin_write(x, line, big), 0);
        assert_int_equal(exec_stdin_write(x, "two\n", 4), 0);
        line[big - 1] = '\0';
        assert_true(pump_until(x, &s, "two\n"));
        assert_non_null(strstr(s.out, line));
        free(line);
        exec_stdin_close(x);
        assert_true(pump_until(x, &s, "eof\n"));
        assert_int_equal(exec_stdin_write(x, "late\n", 5), -EPIPE);
        while (!hxs_exec_done(x)) {
                struct epoll_event ev;
                (void)epoll_wait(hxs_exec_fd(x), &ev, 1, 100);
                hxs_exec_process(x);
        }
        hxs_result res = { 0 };
        assert_int_equal(hxs_exec_take_result(x, &res, &err), 0);
        assert_int_equal(res.exit_code, 0);
        hxs_result_clear(&res);
        hxs_exec_free(x);
        hxs_engine_free(e);
        free(s.out);
        remove_image(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fake_qemu),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
