/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: MCP messages (`hexr-sandbox mcp` lines, POST /mcp bodies) through
 * mcp_handle, which reads JSON-RPC strictly and answers or hands out a tool call.
 *
 * The input is the message, as is. Invariants:
 *  - mcp_handle returns 0 (only ENOMEM may fail) and the outcome is one of the actions;
 *  - a reply is one line of JSON: an object with "jsonrpc": "2.0" and exactly one of
 *    "result" and "error" (whose code is an integer and message a string);
 *  - a run's request (run_code, session_create, session_exec) passes
 *    hxs_request_validate again, its id is JSON, and its progress, result, failure,
 *    cell and file texts are one line of JSON each;
 *  - a cancellation names an id that is JSON (a string or an integer).
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mcp/mcp.h"

static void check_line(const char *text, size_t len)
{
        CHECK(text != NULL);
        CHECK(strlen(text) == len);
        CHECK(memchr(text, '\n', len) == NULL);
        json_t *o = json_loadb(text, len, 0, NULL);
        CHECK(json_is_object(o));
        CHECK(json_is_string(json_object_get(o, "jsonrpc")));
        json_decref(o);
}

static void check_reply(const char *text, size_t len)
{
        check_line(text, len);
        json_t *o = json_loadb(text, len, 0, NULL);
        json_t *res = json_object_get(o, "result"), *err = json_object_get(o, "error");
        CHECK((res != NULL) != (err != NULL));
        CHECK(json_object_get(o, "id") != NULL);
        if (err) {
                CHECK(json_is_integer(json_object_get(err, "code")));
                CHECK(json_is_string(json_object_get(err, "message")));
        }
        json_decref(o);
}

static void check_run(mcp_run *run, const hxs_config *cfg)
{
        hxs_error err = { 0 };
        size_t n = 0;

        mcp_tool kind = mcp_run_kind(run);
        bool has_request = kind == MCP_TOOL_RUN_CODE || kind == MCP_TOOL_SESSION_CREATE || kind == MCP_TOOL_SESSION_EXEC;
        CHECK(has_request == (mcp_run_request(run) != NULL));
        if (has_request)
                CHECK(hxs_request_validate((hxs_request *)mcp_run_request(run), cfg, &err) == 0);
        /* only the tools on an existing session name one */
        if (kind == MCP_TOOL_RUN_CODE || kind == MCP_TOOL_SESSION_CREATE)
                CHECK(mcp_run_session_id(run)[0] == '\0');
        size_t dlen = 0;
        const void *data = mcp_run_data(run, &dlen);
        CHECK(dlen == 0 || data != NULL);
        json_t *id = json_loads(mcp_run_id(run), JSON_DECODE_ANY, NULL);
        CHECK(json_is_string(id) || json_is_integer(id));
        json_decref(id);
        char *p = mcp_run_progress(run, 1, "out\xff", 4, &n);
        CHECK(mcp_run_wants_progress(run) == (p != NULL));
        if (p)
                check_line(p, n);
        free(p);
        hxs_result res = { .stdout_data = "x", .stdout_len = 1, .exit_code = 1 };
        char *r = mcp_run_result(run, &res, &n);
        check_reply(r, n);
        free(r);
        snprintf(err.message, sizeof(err.message), "no sandbox");
        r = mcp_run_failed(run, &err, &n);
        check_reply(r, n);
        free(r);
        hxs_cell_result cell = { .status = HXS_CELL_EXCEPTION, .cell = 2, .stdout_data = "o", .stdout_len = 1,
                                 .stderr_data = "", .outputs_json = "[{\"type\":\"display\",\"data\":{\"text/plain\":\"x\"}}]",
                                 .value_json = "{\"text/plain\":\"42\"}",
                                 .exception_json = "{\"type\":\"E\",\"message\":\"m\",\"traceback\":\"t\"}" };
        r = mcp_run_cell_result(run, &cell, NULL, "s", &n);
        check_reply(r, n);
        free(r);
        hxs_session_file_result fr = { .status = kind == MCP_TOOL_SESSION_READ_FILE ? 0 : -ENOENT, .path = "a.txt",
                                       .data = (unsigned char *)"hi", .len = 2, .size = 2 };
        r = mcp_run_file_result(run, &fr, &n);
        check_reply(r, n);
        free(r);
        hxs_request *req = mcp_run_take_request(run);
        CHECK(mcp_run_request(run) == NULL);
        hxs_request_free(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static hxs_config cfg;
        static bool ready;
        if (!ready) {
                hxs_config_defaults(&cfg);
                ready = true;
        }
        mcp_session *s = mcp_session_new(&cfg);
        CHECK(s != NULL);
        mcp_outcome o;
        CHECK(mcp_handle(s, (const char *)data, size, &o) == 0);
        CHECK(o.method != NULL);
        CHECK(mcp_version_supported(mcp_session_version(s)));
        switch (o.action) {
        case MCP_ACT_REPLY:
                check_reply(o.reply, o.reply_len);
                break;
        case MCP_ACT_RUN:
                CHECK(o.run != NULL && o.tool != NULL);
                check_run(o.run, &cfg);
                break;
        case MCP_ACT_CANCEL: {
                json_t *id = json_loads(o.cancel_id, JSON_DECODE_ANY, NULL);
                CHECK(json_is_string(id) || json_is_integer(id));
                json_decref(id);
                break;
        }
        case MCP_ACT_NONE:
                CHECK(o.reply == NULL && o.run == NULL);
                break;
        case MCP_ACT_MAX:
        default:
                CHECK(false);
        }
        mcp_outcome_clear(&o);
        mcp_session_free(s);
        return 0;
}
