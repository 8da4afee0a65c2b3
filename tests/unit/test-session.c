/* SPDX-License-Identifier: Apache-2.0 */
/* Sessions (src/session/). The driver's lines as the host reads them, around a fake
 * backend: split anywhere, one object per line, "ready" first, unknown events and
 * fields ignored, a line past SESSION_LINE_MAX or one that is not an object ends the
 * session with "protocol"; the queue's bound. Then real namespace sessions (skipped
 * where no sandbox can start): state across cells, the last expression's value, an
 * exception, an interrupt at the time limit that keeps state, a cell that does not
 * stop ending the session with cell_timeout, files put, got and listed, bash state,
 * a cell interrupted by its caller (state kept, a queued cell never run, a cancelled
 * cell stopped so the next one runs at once). */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "engine/request.h"
#include "session/session.h"

/* ---- the driver's lines, around a fake backend ------------------------------------- */

static int fake_kills;
static void fake_kill(hxs_exec *x) { (void)x; fake_kills++; }
static void fake_release(hxs_exec *x) { (void)x; }
static void fake_stdin_more(hxs_exec *x)
{
        const char *d;
        exec_stdin_consumed(x, exec_stdin_pending(x, &d));
}
static const backend_ops fake = { .name = "fake", .features = BACKEND_INTERACTIVE, .kill = fake_kill,
                                  .release = fake_release, .stdin_more = fake_stdin_more };
static hxs_engine fake_engine = { .ops = &fake };

static hxs_session *fake_session(void)
{
        hxs_config_defaults(&fake_engine.cfg);
        hxs_session *s = calloc(1, sizeof(*s));
        assert_non_null(s);
        s->engine = &fake_engine;
        s->cfg = &fake_engine.cfg;
        s->epfd = s->timer_fd = -1;
        s->lim = (hxs_session_limits){ 60, 600 };
        hxs_request *req = hxs_request_new();
        assert_non_null(req);
        assert_int_equal(request_set_interactive(req, NULL), 0);
        hxs_error err = { 0 };
        assert_int_equal(exec_new(&fake_engine, req, &s->x, &err), 0);
        s->x->priv = calloc(1, 1);
        fake_kills = 0;
        return s;
}

static void fake_free(hxs_session *s)
{
        free(s->x->priv);
        s->x->priv = NULL;
        hxs_session_free(s);
}

static void feed(hxs_session *s, const char *text) { proto_feed(s, text, strlen(text)); }

static void test_ready_split(void **state)
{
        (void)state;
        hxs_session *s = fake_session();
        feed(s, "{\"ev\":\"rea");
        assert_false(s->ready);
        feed(s, "dy\",\"language\":\"python\",\"version\":\"3.11.2\",\"future\":[1,2]}\n");
        assert_true(s->ready);
        assert_string_equal(s->version, "3.11.2");
        /* unknown events and events of nothing running: ignored */
        feed(s, "{\"ev\":\"telemetry\",\"x\":1}\n{\"ev\":\"stdout\",\"id\":\"c9\",\"text\":\"late\"}\n");
        assert_int_equal(s->end, HXS_SESSION_LIVE);
        fake_free(s);
}

static void test_protocol_errors(void **state)
{
        (void)state;
        static const char *const bad[] = {
                "[1,2]\n", "not json\n", "{\"ev\":1}\n", "{\"ev\":\"ready\",\"ev\":\"ready\"}\n",
                "{\"ev\":\"ready\"} trailing\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                hxs_session *s = fake_session();
                feed(s, bad[i]);
                assert_int_equal(s->end, HXS_SESSION_PROTOCOL);
                assert_int_equal(fake_kills, 1);
                fake_free(s);
        }
        /* anything but "ready" first */
        hxs_session *s = fake_session();
        feed(s, "{\"ev\":\"stdout\",\"id\":\"c1\",\"text\":\"x\"}\n");
        assert_int_equal(s->end, HXS_SESSION_PROTOCOL);
        fake_free(s);
}

static void test_line_max(void **state)
{
        (void)state;
        hxs_session *s = fake_session();
        size_t n = SESSION_LINE_MAX / 4;
        char *chunk = malloc(n);
        assert_non_null(chunk);
        memset(chunk, ' ', n);
        for (int i = 0; i < 4; i++)
                proto_feed(s, chunk, n);
        assert_int_equal(s->end, HXS_SESSION_LIVE);
        proto_feed(s, " ", 1);
        assert_int_equal(s->end, HXS_SESSION_PROTOCOL);
        free(chunk);
        fake_free(s);
}

static void ignore_done(void *userdata, hxs_cell_result *res)
{
        (void)userdata;
        hxs_cell_result_clear(res);
}

static void test_queue_bound(void **state)
{
        (void)state;
        hxs_session *s = fake_session();
        s->language = HXS_LANG_PYTHON;
        s->memory_mb = 256;
        hxs_request *cell = hxs_request_new();
        assert_int_equal(hxs_request_set_code(cell, "1", 1), 0);
        hxs_cell_callbacks cb = { .done = ignore_done };
        hxs_error err = { 0 };
        uint64_t h = 0;
        for (int i = 0; i < HXS_SESSION_QUEUE_MAX; i++)
                assert_int_equal(hxs_session_exec(s, cell, &cb, &h, &err), 0);
        assert_int_equal(hxs_session_exec(s, cell, &cb, NULL, &err), -EBUSY);
        hxs_session_cancel(s, h);
        assert_int_equal(hxs_session_exec(s, cell, &cb, NULL, &err), 0);
        s->end = HXS_SESSION_DELETED;
        assert_int_equal(hxs_session_exec(s, cell, &cb, NULL, &err), -ESHUTDOWN);
        hxs_request_free(cell);
        fake_free(s);
}

/* ---- real sessions ------------------------------------------------------------------ */

static hxs_engine *real_engine(void)
{
        hxs_config cfg;
        hxs_error err = { 0 };
        if (geteuid() != 0 || hxs_config_from_env(&cfg, &err) < 0)
                return NULL;
        cfg.backend = HXS_BACKEND_NAMESPACES;
        cfg.warm = false;
        hxs_engine *e;
        if (hxs_engine_new(&cfg, &e, &err) < 0) {
                fprintf(stderr, "skipped: %s\n", err.message);
                return NULL;
        }
        return e;
}

static hxs_session *real_session(hxs_engine *e, const char *language)
{
        hxs_request *req = hxs_request_new();
        hxs_language lang;
        assert_int_equal(hxs_language_parse(language, &lang), 0);
        assert_int_equal(hxs_request_set_language(req, lang), 0);
        hxs_session *s;
        hxs_error err = { 0 };
        int r = hxs_session_start(e, req, NULL, &s, &err);
        hxs_request_free(req);
        if (r < 0)
                fail_msg("start: %s", err.message);
        if (hxs_session_wait_ready(s, &err) < 0)
                fail_msg("ready: %s", err.message);
        return s;
}

/* Runs code (time limit timeout_s) and returns the result. */
static hxs_cell_result run(hxs_session *s, const char *code, uint32_t timeout_s)
{
        hxs_request *cell = hxs_request_new();
        assert_int_equal(hxs_request_set_code(cell, code, strlen(code)), 0);
        hxs_request_set_timeout_s(cell, timeout_s);
        hxs_cell_result res;
        hxs_error err = { 0 };
        if (hxs_session_run(s, cell, NULL, NULL, &res, &err) < 0)
                fail_msg("run: %s", err.message);
        hxs_request_free(cell);
        return res;
}

static void assert_value(hxs_session *s, const char *code, const char *want)
{
        hxs_cell_result r = run(s, code, 5);
        assert_int_equal(r.status, HXS_CELL_OK);
        assert_non_null(r.value_json);
        char expect[256];
        snprintf(expect, sizeof(expect), "{\"text/plain\":\"%s\"}", want);
        assert_string_equal(r.value_json, expect);
        hxs_cell_result_clear(&r);
}

static void test_python(void **state)
{
        (void)state;
        hxs_engine *e = real_engine();
        if (!e)
                skip();
        hxs_session *s = real_session(e, "python");
        hxs_cell_result r = run(s, "x = 41\nprint('hi')", 5);
        assert_int_equal(r.status, HXS_CELL_OK);
        assert_string_equal(r.stdout_data, "hi\n");
        assert_null(r.value_json);
        hxs_cell_result_clear(&r);
        assert_value(s, "x + 1", "42");

        r = run(s, "1/0", 5);
        assert_int_equal(r.status, HXS_CELL_EXCEPTION);
        assert_non_null(strstr(r.exception_json, "\"type\":\"ZeroDivisionError\""));
        hxs_cell_result_clear(&r);

        /* interrupted at its limit, state kept */
        r = run(s, "while True: pass", 1);
        assert_int_equal(r.status, HXS_CELL_INTERRUPTED);
        assert_string_equal(r.error_type, "timeout");
        hxs_cell_result_clear(&r);
        assert_value(s, "x", "41");

        /* files */
        hxs_session_file_result f;
        hxs_error err = { 0 };
        assert_int_equal(hxs_session_put_file_sync(s, "d/a.txt", "abc", 3, &f, &err), 0);
        hxs_session_file_result_clear(&f);
        assert_value(s, "open('d/a.txt').read()", "'abc'");
        assert_int_equal(hxs_session_get_file_sync(s, "d/a.txt", &f, &err), 0);
        assert_int_equal(f.len, 3);
        assert_memory_equal(f.data, "abc", 3);
        hxs_session_file_result_clear(&f);
        assert_int_equal(hxs_session_get_file_sync(s, "nope.txt", &f, &err), -ENOENT);
        hxs_session_file_result_clear(&f);
        assert_int_equal(hxs_session_list_files_sync(s, "d", &f, &err), 0);
        assert_int_equal(f.n_entries, 1);
        hxs_session_file_result_clear(&f);
        assert_int_equal(hxs_session_get_file_sync(s, "../etc/passwd", &f, &err), -EINVAL);
        assert_string_equal(err.field, "path");

        /* a cell that ignores its interrupt (a regular expression never checks for
         * signals): the session ends, and says why */
        r = run(s, "import re; re.match(r'(a+)+b', 'a' * 64)", 1);
        assert_int_equal(r.status, HXS_CELL_SESSION_ENDED);
        assert_string_equal(r.error_type, "timeout");
        hxs_cell_result_clear(&r);
        hxs_session_info in;
        hxs_session_get_info(s, &in);
        assert_int_equal(in.state, HXS_SESSION_ENDED);
        assert_int_equal(in.end, HXS_SESSION_CELL_TIMEOUT);
        hxs_session_free(s);
        hxs_engine_free(e);
}

/* A cell's callbacks, recorded. */
typedef struct seen {
        bool done, output;
        hxs_cell_result res;
} seen;

static void seen_output(void *userdata, int stream, const void *data, size_t len)
{
        (void)stream, (void)data, (void)len;
        ((seen *)userdata)->output = true;
}

static void seen_done(void *userdata, hxs_cell_result *res)
{
        seen *w = userdata;
        w->res = *res;
        w->done = true;
}

static uint64_t queue_cell(hxs_session *s, const char *code, seen *w)
{
        hxs_request *cell = hxs_request_new();
        assert_int_equal(hxs_request_set_code(cell, code, strlen(code)), 0);
        hxs_request_set_timeout_s(cell, 30);
        hxs_cell_callbacks cb = { .output = seen_output, .done = seen_done, .userdata = w };
        hxs_error err = { 0 };
        uint64_t h = 0;
        assert_int_equal(hxs_session_exec(s, cell, &cb, &h, &err), 0);
        hxs_request_free(cell);
        return h;
}

/* Turns until *flag (a cell's time limit of 30 s is far away: it is not what stops it). */
static void turn_until(hxs_session *s, const bool *flag)
{
        while (!*flag) {
                struct pollfd p = { .fd = hxs_session_fd(s), .events = POLLIN };
                (void)poll(&p, 1, 1000);
                hxs_session_process(s);
        }
}

static void test_interrupt(void **state)
{
        (void)state;
        hxs_engine *e = real_engine();
        if (!e)
                skip();
        hxs_session *s = real_session(e, "python");
        assert_value(s, "x = 41; x", "41");

        /* running: interrupted, state kept; queued behind it: never run */
        seen a = { 0 }, b = { 0 };
        (void)queue_cell(s, "print('in', flush=True)\nwhile True: pass", &a);
        uint64_t hb = queue_cell(s, "x = 0", &b);
        turn_until(s, &a.output);
        assert_int_equal(hxs_session_interrupt(s, hb), 0);
        assert_int_equal(hxs_session_interrupt(s, 0), 0);
        turn_until(s, &a.done);
        assert_int_equal(a.res.status, HXS_CELL_INTERRUPTED);
        assert_string_equal(a.res.error_type, "cancelled");
        assert_non_null(strstr(a.res.exception_json, "KeyboardInterrupt"));
        hxs_cell_result_clear(&a.res);
        turn_until(s, &b.done);
        assert_int_equal(b.res.status, HXS_CELL_INTERRUPTED);
        assert_string_equal(b.res.error_type, "cancelled");
        hxs_cell_result_clear(&b.res);
        assert_value(s, "x", "41");

        /* cancelled (its caller went away): stopped unheard, the next cell runs */
        seen c = { 0 };
        uint64_t hc = queue_cell(s, "print('in', flush=True)\nwhile True: pass", &c);
        turn_until(s, &c.output);
        hxs_session_cancel(s, hc);
        assert_value(s, "x + 1", "42");
        assert_false(c.done);
        assert_int_equal(hxs_session_interrupt(s, 0), -ENOENT);
        hxs_session_info in;
        hxs_session_get_info(s, &in);
        assert_int_equal(in.state, HXS_SESSION_IDLE);
        hxs_session_free(s);
        hxs_engine_free(e);
}

static void test_bash(void **state)
{
        (void)state;
        hxs_engine *e = real_engine();
        if (!e)
                skip();
        hxs_session *s = real_session(e, "bash");
        hxs_cell_result r = run(s, "cd /tmp; X=5; f() { echo f$1; }", 5);
        assert_int_equal(r.status, HXS_CELL_OK);
        hxs_cell_result_clear(&r);
        r = run(s, "f $X; pwd", 5);
        assert_string_equal(r.stdout_data, "f5\n/tmp\n");
        hxs_cell_result_clear(&r);
        hxs_session_end_now(s, HXS_SESSION_DELETED);
        hxs_error err = { 0 };
        assert_int_equal(hxs_session_wait_ready(s, &err), -ESHUTDOWN);
        hxs_session_free(s);
        hxs_engine_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ready_split),
                cmocka_unit_test(test_protocol_errors),
                cmocka_unit_test(test_line_max),
                cmocka_unit_test(test_queue_bound),
                cmocka_unit_test(test_python),
                cmocka_unit_test(test_interrupt),
                cmocka_unit_test(test_bash),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
