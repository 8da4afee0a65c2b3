/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: what a session's driver writes on its stdout (src/session/session-proto.c
 * and the cell and file operations reading it), hostile bytes by design.
 *
 * The input is the driver's stdout. Its first line is fed alone (a "ready" line lets
 * the session start its queued cell, c1, and then a get of a file, f2), the rest in
 * chunks whose sizes the first byte picks, around a fake backend (no sandbox).
 *
 * Invariants:
 *  - nothing crashes, leaks or reads out of bounds (the replay runs under ASan in the
 *    sanitizer build), whatever the lines;
 *  - a session that ended did so for a reason with a message;
 *  - a cell result that came back is a valid JSON object with a known status, within
 *    MAX_OUTPUT_BYTES per stream (head and tail, and the marker line).
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/exec.h"
#include "engine/request.h"
#include "session/session.h"
#include "fuzz.h"

static void fake_kill(hxs_exec *x) { (void)x; }
static void fake_release(hxs_exec *x) { (void)x; }
static int fake_process(hxs_exec *x) { (void)x; return 0; }
static void fake_stdin_more(hxs_exec *x)
{
        const char *d;
        exec_stdin_consumed(x, exec_stdin_pending(x, &d));
}
static const backend_ops fake = { .name = "fake", .features = BACKEND_INTERACTIVE, .kill = fake_kill,
                                  .release = fake_release, .process = fake_process,
                                  .stdin_more = fake_stdin_more };

static hxs_engine engine = { .ops = &fake };
static bool cell_done, file_done;

static void on_cell(void *userdata, hxs_cell_result *res)
{
        (void)userdata;
        size_t n;
        char *text = hxs_cell_result_to_text(res, NULL, NULL, &n);
        CHECK(text != NULL);
        json_t *o = json_loads(text, 0, NULL);
        CHECK(json_is_object(o));
        const char *st = json_string_value(json_object_get(o, "status"));
        CHECK(st && (!strcmp(st, "ok") || !strcmp(st, "exception") || !strcmp(st, "interrupted") ||
                     !strcmp(st, "session_ended")));
        size_t marker = 100;
        CHECK(res->stdout_len <= engine.cfg.max_output_bytes + marker);
        CHECK(res->stderr_len <= engine.cfg.max_output_bytes + marker);
        json_decref(o);
        free(text);
        hxs_cell_result_clear(res);
        cell_done = true;
}

static void on_file(void *userdata, hxs_session_file_result *res)
{
        (void)userdata;
        CHECK(res->len <= engine.cfg.max_file_bytes);
        hxs_session_file_result_clear(res);
        file_done = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        hxs_config_defaults(&engine.cfg);
        engine.cfg.max_output_bytes = 1024;
        hxs_session *s = calloc(1, sizeof(*s));
        CHECK(s != NULL);
        s->engine = &engine;
        s->cfg = &engine.cfg;
        s->epfd = s->timer_fd = -1;
        s->lim = (hxs_session_limits){ 60, 600 };
        s->started_ms = session_now_ms();
        s->ready_deadline = s->started_ms + 60000;
        s->next_handle = 1;
        s->memory_mb = 256;
        hxs_request *req = hxs_request_new();
        CHECK(req && request_set_interactive(req, NULL) == 0);
        hxs_error err = { 0 };
        CHECK(exec_new(&engine, req, &s->x, &err) == 0);
        s->x->priv = calloc(1, 1);

        hxs_request *cell = hxs_request_new();
        CHECK(cell && hxs_request_set_code(cell, "x", 1) == 0);
        hxs_cell_callbacks cb = { .done = on_cell };
        CHECK(hxs_session_exec(s, cell, &cb, NULL, &err) == 0);
        hxs_request_free(cell);
        CHECK(hxs_session_get_file(s, "a/b.csv", on_file, NULL, NULL, &err) == 0);
        cell_done = file_done = false;

        size_t step = size ? (size_t)(data[0] % 64) + 1 : 1;
        const uint8_t *nl = memchr(data, '\n', size);
        size_t first = nl ? (size_t)(nl - data) + 1 : size;
        proto_feed(s, (const char *)data, first);
        hxs_session_process(s); /* the cell starts, once ready */
        for (size_t off = first; off < size && !s->end; off += step) {
                size_t n = size - off < step ? size - off : step;
                proto_feed(s, (const char *)data + off, n);
                hxs_session_process(s);
        }
        if (s->end)
                CHECK(hxs_session_end_name(s->end) != NULL && s->end_message[0]);

        free(s->x->priv);
        s->x->priv = NULL;
        hxs_session_free(s);
        return 0;
}
