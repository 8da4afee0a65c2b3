/* SPDX-License-Identifier: Apache-2.0 */
/* Interactive stdin (exec.h, exec_stdin_*), what sessions are built on: the queue as
 * the engine keeps it, around a fake backend (bytes queued before the start go once it
 * has started, a close is passed on, nothing goes after it), then a real namespace
 * sandbox running a line echo loop fed while it runs, with a write larger than a pipe
 * holds. The real one skips where no sandbox can start (not root, no namespaces). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "engine/request.h"
#include "seen-output.h"

/* ---- the queue, around a fake backend ---------------------------------------------- */

static size_t fake_kicks;
static char fake_written[64];
static size_t fake_len;

/* Takes at most 4 bytes per call, as a nearly full pipe would. */
static void fake_stdin_more(hxs_exec *x)
{
        fake_kicks++;
        const char *data;
        size_t n = exec_stdin_pending(x, &data);
        if (n > 4)
                n = 4;
        memcpy(fake_written + fake_len, data, n);
        fake_len += n;
        exec_stdin_consumed(x, n);
        if (exec_stdin_pending(x, &data) == 0 && x->stdin_closing)
                exec_stdin_gone(x);
}

static void fake_release(hxs_exec *x) { (void)x; }
static const backend_ops fake = { .name = "fake", .features = BACKEND_INTERACTIVE,
                                  .stdin_more = fake_stdin_more, .release = fake_release };

static void test_queue(void **state)
{
        (void)state;
        hxs_engine e = { .ops = &fake };
        hxs_config_defaults(&e.cfg);
        hxs_request *req = hxs_request_new();
        assert_non_null(req);
        assert_int_equal(request_set_interactive(req, NULL), 0);
        hxs_exec *x;
        hxs_error err = { 0 };
        assert_int_equal(exec_new(&e, req, &x, &err), 0);
        /* not started: queued, the backend not asked */
        assert_int_equal(exec_stdin_write(x, "abcdef", 6), 0);
        assert_int_equal(fake_kicks, 0);
        x->priv = calloc(1, 1);
        assert_int_equal(exec_stdin_write(x, "gh", 2), 0);
        assert_int_equal(fake_kicks, 1);
        assert_int_equal(fake_len, 4);
        fake_stdin_more(x); /* the fd was writable again */
        assert_int_equal(fake_len, 8);
        assert_memory_equal(fake_written, "abcdefgh", 8);
        exec_stdin_close(x);
        assert_true(x->stdin_gone);
        assert_int_equal(exec_stdin_write(x, "x", 1), -EPIPE);
        free(x->priv);
        x->priv = NULL;
        exec_free(x);
}

static void test_not_interactive(void **state)
{
        (void)state;
        hxs_engine e = { .ops = &fake };
        hxs_config_defaults(&e.cfg);
        hxs_exec *x;
        hxs_error err = { 0 };
        assert_int_equal(exec_new(&e, hxs_request_new(), &x, &err), 0);
        assert_int_equal(exec_stdin_write(x, "x", 1), -EINVAL);
        exec_free(x);
}

/* ---- a real sandbox ------------------------------------------------------------------ */


/* Drives x until `want` was printed (or it ended, or 10 s went by). */
static bool pump_until(hxs_exec *x, seen *s, const char *want)
{
        time_t end = time(NULL) + 10;
        while (!strstr(s->out, want) && !hxs_exec_done(x) && time(NULL) < end) {
                struct epoll_event ev;
                (void)epoll_wait(hxs_exec_fd(x), &ev, 1, 100);
                hxs_exec_process(x);
        }
        return strstr(s->out, want) != NULL;
}

static const char echo_loop[] =
        "import sys\n"
        "for line in sys.stdin:\n"
        "    print(len(line), line[:8].strip().upper(), flush=True)\n"
        "print('eof', flush=True)\n";

static void test_namespaces(void **state)
{
        (void)state;
        hxs_config cfg;
        hxs_error err = { 0 };
        if (geteuid() != 0 || hxs_config_from_env(&cfg, &err) < 0)
                skip();
        cfg.backend = HXS_BACKEND_NAMESPACES;
        cfg.warm = false;
        hxs_engine *e;
        if (hxs_engine_new(&cfg, &e, &err) < 0) {
                fprintf(stderr, "skipped: %s\n", err.message);
                skip();
        }
        hxs_request *req = hxs_request_new();
        assert_non_null(req);
        assert_int_equal(hxs_request_set_code(req, echo_loop, strlen(echo_loop)), 0);
        const char *const argv[] = { "/usr/bin/python3", "-u", "/code/main.py", NULL };
        assert_int_equal(request_set_interactive(req, argv), 0);
        hxs_exec *x;
        int r = hxs_exec_start(e, req, &x, &err);
        assert_int_equal(r, 0);
        hxs_request_free(req);
        static seen s;
        hxs_exec_set_output(x, on_output, &s);

        assert_int_equal(exec_stdin_write(x, "hello\n", 6), 0);
        assert_true(pump_until(x, &s, "6 HELLO\n"));
        /* more than a pipe holds: written as the program reads it */
        size_t big = 1 << 20;
        char *line = malloc(big + 1);
        assert_non_null(line);
        memset(line, 'a', big - 1);
        line[big - 1] = '\n';
        assert_int_equal(exec_stdin_write(x, line, big), 0);
        assert_int_equal(exec_stdin_write(x, "two\n", 4), 0);
        free(line);
        assert_true(pump_until(x, &s, "1048576 AAAAAAAA\n4 TWO\n"));
        exec_stdin_close(x);
        assert_true(pump_until(x, &s, "eof\n"));
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
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_queue),
                cmocka_unit_test(test_not_interactive),
                cmocka_unit_test(test_namespaces),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
