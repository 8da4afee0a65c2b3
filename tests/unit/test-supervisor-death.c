/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox dies with the process that supervises it, however that process dies, and
 * even when its parent-death signal is refused: the kernel sends that signal with the
 * credentials of the parent thread as it dies, and a service thread that died while it
 * acted as another owner uid (cloning the next sandbox) was not allowed to signal this
 * one, which then ran on with nothing to stop it (seen after a SIGKILL of the service
 * under load). Here the supervisor is a forked copy of this test that starts a real
 * namespace sandbox, makes every thread of its own an unprivileged effective uid (so
 * that no parent-death signal may reach the sandbox, as on that thread) and SIGKILLs
 * itself: the sandbox must be gone within seconds, its PID 1 having seen the hold pipe
 * hang up. Skips where no sandbox can start (not root, no namespaces). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "engine/request.h"
#include "seen-output.h"


/* The first child of this thread (the sandbox's PID 1), or -1. */
static pid_t own_child(void)
{
        char path[64], buf[64] = { 0 };
        snprintf(path, sizeof(path), "/proc/self/task/%ld/children", (long)syscall(SYS_gettid));
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        return n > 0 ? (pid_t)atol(buf) : -1;
}

/* In the forked supervisor: start the sandbox, say its PID 1 on `out` ("skip" when no
 * sandbox can start), lose the right to signal it, die. */
static _Noreturn void supervise(int out, const char *why_skip_path)
{
        hxs_config cfg;
        hxs_error err = { 0 };
        hxs_engine *e = NULL;
        if (hxs_config_from_env(&cfg, &err) < 0 || (cfg.backend = HXS_BACKEND_NAMESPACES, cfg.warm = false,
                                                      hxs_engine_new(&cfg, &e, &err) < 0)) {
                FILE *f = fopen(why_skip_path, "w");
                if (f) {
                        fputs(err.message, f);
                        fclose(f);
                }
                (void)!write(out, "skip", 4);
                _exit(0);
        }
        hxs_request *req = hxs_request_new();
        static const char code[] = "import time\nprint('running', flush=True)\ntime.sleep(60)\n";
        if (!req || hxs_request_set_code(req, code, strlen(code)) < 0)
                _exit(1);
        hxs_request_set_timeout_s(req, 30);
        hxs_exec *x;
        if (hxs_exec_start(e, req, &x, &err) < 0) {
                fprintf(stderr, "starting the sandbox: %s\n", err.message);
                _exit(2);
        }
        static seen s;
        hxs_exec_set_output(x, on_output, &s);
        time_t end = time(NULL) + 30;
        while (!strstr(s.out, "running") && !hxs_exec_done(x) && time(NULL) < end) {
                struct epoll_event ev;
                (void)epoll_wait(hxs_exec_fd(x), &ev, 1, 100);
                hxs_exec_process(x);
        }
        pid_t pid1 = own_child();
        if (!strstr(s.out, "running") || pid1 <= 0)
                _exit(3);
        /* every thread: effective uid 65534 (so no effective capability), real uid 0; a
         * parent-death signal from any of them to the sandbox (host uid SANDBOX_UID_BASE)
         * is refused */
        if (setresuid((uid_t)-1, 65534, (uid_t)-1) < 0)
                _exit(4);
        char msg[32];
        int n = snprintf(msg, sizeof(msg), "%d", (int)pid1);
        (void)!write(out, msg, (size_t)n);
        close(out);
        raise(SIGKILL);
        _exit(5);
}

static void test_sandbox_dies_with_its_supervisor(void **state)
{
        (void)state;
        if (geteuid() != 0) {
                fprintf(stderr, "skipped: not root, no sandbox can start\n");
                skip();
        }
        char dir[] = "/tmp/hxs-supervisor-death-XXXXXX";
        assert_non_null(mkdtemp(dir));
        assert_int_equal(chmod(dir, 0755), 0);
        char why[sizeof(dir) + 16];
        snprintf(why, sizeof(why), "%s/why", dir);
        char state_dir[sizeof(dir) + 16];
        snprintf(state_dir, sizeof(state_dir), "%s/state", dir);
        assert_int_equal(setenv("STATE_DIR", state_dir, 1), 0);

        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t sup = fork();
        assert_true(sup >= 0);
        if (sup == 0) {
                close(p[0]);
                supervise(p[1], why);
        }
        close(p[1]);
        char msg[32] = { 0 };
        struct pollfd pfd = { .fd = p[0], .events = POLLIN };
        assert_int_equal(poll(&pfd, 1, 120 * 1000), 1);
        ssize_t n = read(p[0], msg, sizeof(msg) - 1);
        close(p[0]);
        int status;
        assert_int_equal(waitpid(sup, &status, 0), sup);
        if (n == 4 && !memcmp(msg, "skip", 4)) {
                char reason[512] = { 0 };
                FILE *f = fopen(why, "r");
                if (f) {
                        (void)!fread(reason, 1, sizeof(reason) - 1, f);
                        fclose(f);
                }
                fprintf(stderr, "skipped: no sandbox can start here: %s\n", reason);
                unlink(why);
                rmdir(state_dir);
                rmdir(dir);
                skip();
        }
        if (n <= 0) /* the supervisor failed first: its exit status says where */
                fail_msg("the supervisor ended before its sandbox ran: wait status %#x", status);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        pid_t pid1 = (pid_t)atol(msg);
        assert_true(pid1 > 0);

        /* the sandbox's PID 1 ends within 20 s (a zombie of our init then counts as ended) */
        int pidfd = (int)syscall(SYS_pidfd_open, pid1, 0);
        bool gone = pidfd < 0 && errno == ESRCH;
        if (pidfd >= 0) {
                struct pollfd w = { .fd = pidfd, .events = POLLIN };
                gone = poll(&w, 1, 20 * 1000) == 1;
                if (!gone) /* leave nothing behind, then fail */
                        (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                close(pidfd);
        }

        /* the next engine on this STATE_DIR sweeps the dead one's cgroups */
        hxs_config cfg;
        hxs_error err = { 0 };
        if (hxs_config_from_env(&cfg, &err) == 0) {
                cfg.backend = HXS_BACKEND_NAMESPACES;
                cfg.warm = false;
                hxs_engine *e;
                if (hxs_engine_new(&cfg, &e, &err) == 0)
                        hxs_engine_free(e);
        }
        unsetenv("STATE_DIR");
        char cmd[sizeof(dir) + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void)!system(cmd);
        assert_true(gone);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sandbox_dies_with_its_supervisor),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
