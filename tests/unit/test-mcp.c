/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP protocol core (src/mcp): JSON-RPC errors by their codes, version negotiation,
 * the tool list, run_code's arguments validated as exec's body, cancellation, progress
 * and a result as MCP content (text, images, files, structuredContent, isError). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "mcp/mcp.h"

static hxs_config cfg;

/* Handles msg; the outcome's reply (if any) parsed in *ret_json. */
static mcp_action handle(mcp_session *s, const char *msg, json_t **ret_json, mcp_outcome *o)
{
        assert_int_equal(mcp_handle(s, msg, strlen(msg), o), 0);
        *ret_json = NULL;
        if (o->action == MCP_ACT_REPLY) {
                assert_non_null(o->reply);
                assert_int_equal(strlen(o->reply), o->reply_len);
                assert_null(memchr(o->reply, '\n', o->reply_len)); /* one line for stdio */
                *ret_json = json_loads(o->reply, 0, NULL);
                assert_non_null(*ret_json);
        }
        return o->action;
}

static void expect_error(const char *msg, int code)
{
        mcp_session *s = mcp_session_new(&cfg);
        mcp_outcome o;
        json_t *j;
        assert_int_equal(handle(s, msg, &j, &o), MCP_ACT_REPLY);
        json_t *e = json_object_get(j, "error");
        if (json_integer_value(json_object_get(e, "code")) != code)
                fail_msg("%s: got %s", msg, o.reply);
        assert_string_equal(json_string_value(json_object_get(j, "jsonrpc")), "2.0");
        json_decref(j);
        mcp_outcome_clear(&o);
        mcp_session_free(s);
}

static void test_errors(void **state)
{
        expect_error("{not json", -32700);
        expect_error("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600);
        expect_error("42", -32600);
        expect_error("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", -32600);
        expect_error("{\"jsonrpc\":\"2.0\",\"id\":1}", -32600);
        expect_error("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", -32600);
        expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"id\":2}", -32700);
        expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}", -32601);
        expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}", -32602);
        expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"rm_rf\"}}", -32602);
        expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}", -32602);
}

static void test_notifications_get_nothing(void **state)
{
        mcp_session *s = mcp_session_new(&cfg);
        mcp_outcome o;
        json_t *j;
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &j, &o), MCP_ACT_NONE);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}", &j, &o), MCP_ACT_NONE);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", &j, &o), MCP_ACT_NONE);
        assert_false(o.is_request);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"a\\\"b\"}}",
                                &j, &o), MCP_ACT_CANCEL);
        assert_string_equal(o.cancel_id, "\"a\\\"b\"");
        mcp_outcome_clear(&o);
        mcp_session_free(s);
}

static void expect_version(const char *asked, const char *agreed)
{
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\","
                 "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}", asked);
        mcp_session *s = mcp_session_new(&cfg);
        mcp_outcome o;
        json_t *j;
        assert_int_equal(handle(s, msg, &j, &o), MCP_ACT_REPLY);
        json_t *res = json_object_get(j, "result");
        assert_string_equal(json_string_value(json_object_get(j, "id")), "i");
        assert_string_equal(json_string_value(json_object_get(res, "protocolVersion")), agreed);
        assert_string_equal(mcp_session_version(s), agreed);
        assert_true(json_is_false(json_object_get(json_object_get(json_object_get(res, "capabilities"), "tools"),
                                                  "listChanged")));
        assert_string_equal(json_string_value(json_object_get(json_object_get(res, "serverInfo"), "version")),
                            hxs_version());
        json_decref(j);
        mcp_outcome_clear(&o);
        mcp_session_free(s);
}

static void test_versions(void **state)
{
        expect_version("2025-11-25", "2025-11-25");
        expect_version("2025-06-18", "2025-06-18");
        expect_version("2025-03-26", "2025-03-26");
        expect_version("2024-11-05", "2025-11-25");
        expect_version("1999-01-01", "2025-11-25");
        assert_true(mcp_version_supported("2025-06-18"));
        assert_false(mcp_version_supported("2025-06-19"));
        assert_false(mcp_version_supported(NULL));
}

static void test_tools_list(void **state)
{
        mcp_session *s = mcp_session_new(&cfg);
        mcp_outcome o;
        json_t *j;
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}", &j, &o), MCP_ACT_REPLY);
        char *first = strdup(o.reply);
        json_t *tools = json_object_get(json_object_get(j, "result"), "tools");
        assert_true(json_array_size(tools) >= 1);
        static const char *const names[] = { "run_code", "session_create", "session_exec", "session_write_file",
                                             "session_read_file", "session_list_files", "session_close" };
        assert_int_equal(json_array_size(tools), 7);
        for (size_t i = 0; i < 7; i++) {
                json_t *ti = json_array_get(tools, i);
                assert_string_equal(json_string_value(json_object_get(ti, "name")), names[i]);
                assert_string_equal(json_string_value(json_object_get(json_object_get(ti, "inputSchema"), "type")), "object");
                assert_string_equal(json_string_value(json_object_get(json_object_get(ti, "outputSchema"), "type")), "object");
                assert_true(json_is_false(json_object_get(json_object_get(ti, "annotations"), "openWorldHint")));
        }
        json_t *t = json_array_get(tools, 0);
        assert_string_equal(json_string_value(json_object_get(t, "name")), "run_code");
        assert_string_equal(json_string_value(json_object_get(json_object_get(t, "inputSchema"), "type")), "object");
        assert_string_equal(json_string_value(json_object_get(json_object_get(t, "outputSchema"), "type")), "object");
        json_t *a = json_object_get(t, "annotations");
        assert_true(json_is_false(json_object_get(a, "readOnlyHint")));
        assert_true(json_is_false(json_object_get(a, "destructiveHint")));
        assert_true(json_is_false(json_object_get(a, "idempotentHint")));
        assert_true(json_is_false(json_object_get(a, "openWorldHint")));
        json_decref(j);
        mcp_outcome_clear(&o);
        /* deterministic: the same bytes every time */
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}", &j, &o), MCP_ACT_REPLY);
        assert_string_equal(o.reply, first);
        free(first);
        json_decref(j);
        mcp_outcome_clear(&o);
        mcp_session_free(s);
}

/* Bad arguments: a tool result with isError naming the argument, not a protocol error. */
static void expect_tool_error_of(const char *tool, const char *args, const char *fragment)
{
        char msg[600];
        snprintf(msg, sizeof(msg),
                 "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":%s}}",
                 tool, args);
        mcp_session *s = mcp_session_new(&cfg);
        mcp_outcome o;
        json_t *j;
        assert_int_equal(handle(s, msg, &j, &o), MCP_ACT_REPLY);
        json_t *res = json_object_get(j, "result");
        assert_non_null(res);
        assert_true(json_is_true(json_object_get(res, "isError")));
        const char *text = json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
        if (!text || !strstr(text, fragment))
                fail_msg("%s: %s lacks %s", args, o.reply, fragment);
        json_decref(j);
        mcp_outcome_clear(&o);
        mcp_session_free(s);
}

static void expect_tool_error(const char *args, const char *fragment)
{
        expect_tool_error_of("run_code", args, fragment);
}

static void test_bad_arguments(void **state)
{
        expect_tool_error("{}", "code: is required");
        expect_tool_error("{\"code\":\"x\",\"timeout\":\"a\"}", "timeout");
        expect_tool_error("{\"code\":\"x\",\"timeout\":100000}", "exceeds the maximum");
        expect_tool_error("{\"code\":\"x\",\"language\":\"cobol\"}", "language");
        expect_tool_error("{\"code\":\"x\",\"memory_mb\":64}", "memory_mb: unknown argument");
        expect_tool_error("{\"code\":\"x\",\"files\":[{\"path\":\"../a\",\"content\":\"\"}]}", "files[0].path");
        expect_tool_error("{\"code\":\"x\",\"packages\":[1]}", "packages[0]");
}

/* A session tool's call: the run carries what the transport needs. */
static mcp_run *session_run(const char *tool, const char *args)
{
        char msg[600];
        snprintf(msg, sizeof(msg),
                 "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":%s}}",
                 tool, args);
        mcp_session *s = mcp_session_new(&cfg);
        mcp_outcome o;
        json_t *j;
        if (handle(s, msg, &j, &o) != MCP_ACT_RUN)
                fail_msg("%s %s: %s", tool, args, o.reply);
        mcp_run *r = o.run;
        o.run = NULL;
        mcp_outcome_clear(&o);
        mcp_session_free(s);
        return r;
}

static void test_session_tools(void **state)
{
        mcp_run *r = session_run("session_create", "{\"language\":\"bash\",\"idle_timeout\":60,\"packages\":[\"x\"]}");
        assert_int_equal(mcp_run_kind(r), MCP_TOOL_SESSION_CREATE);
        assert_int_equal(hxs_request_language(mcp_run_request(r)), HXS_LANG_BASH);
        assert_int_equal(mcp_run_limits(r)->idle_timeout_s, 60);
        assert_int_equal(mcp_run_limits(r)->lifetime_s, 0);
        mcp_run_free(r);

        r = session_run("session_exec", "{\"session_id\":\"abc\",\"code\":\"x+1\",\"timeout\":3}");
        assert_int_equal(mcp_run_kind(r), MCP_TOOL_SESSION_EXEC);
        assert_string_equal(mcp_run_session_id(r), "abc");
        assert_int_equal(hxs_request_timeout_s(mcp_run_request(r)), 3);
        mcp_run_free(r);

        r = session_run("session_write_file", "{\"session_id\":\"abc\",\"path\":\"a//b.bin\",\"content\":\"AAE=\",\"encoding\":\"base64\"}");
        size_t len = 0;
        const unsigned char *data = mcp_run_data(r, &len);
        assert_string_equal(mcp_run_path(r), "a/b.bin"); /* normalised as exec's files */
        assert_int_equal(len, 2);
        assert_int_equal(data[0], 0);
        assert_int_equal(data[1], 1);
        mcp_run_free(r);

        r = session_run("session_list_files", "{\"session_id\":\"abc\"}");
        assert_string_equal(mcp_run_path(r), "");
        mcp_run_free(r);

        expect_tool_error_of("session_exec", "{\"code\":\"1\"}", "session_id: is required");
        expect_tool_error_of("session_exec", "{\"session_id\":\"a\"}", "code: is required");
        expect_tool_error_of("session_create", "{\"lifetime\":-1}", "lifetime: must be a positive integer");
        expect_tool_error_of("session_create", "{\"langauge\":\"bash\"}", "langauge: unknown argument");
        expect_tool_error_of("session_write_file", "{\"session_id\":\"a\",\"path\":\"../x\",\"content\":\"\"}", "path: ");
        expect_tool_error_of("session_write_file", "{\"session_id\":\"a\",\"path\":\"x\",\"content\":\"!\",\"encoding\":\"base64\"}",
                             "content: is not valid base64");
        expect_tool_error_of("session_read_file", "{\"session_id\":\"a\"}", "path: is required");
}

static void test_run_and_cancel(void **state)
{
        mcp_session *s = mcp_session_new(&cfg);
        mcp_outcome o;
        json_t *j;
        assert_int_equal(handle(s,
                                "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\","
                                "\"arguments\":{\"code\":\"print(1)\",\"language\":\"python\",\"timeout\":5},"
                                "\"_meta\":{\"progressToken\":9}}}", &j, &o), MCP_ACT_RUN);
        mcp_run *run = o.run;
        o.run = NULL;
        mcp_outcome_clear(&o);
        assert_string_equal(mcp_run_id(run), "\"r1\"");
        assert_string_equal(mcp_run_tool(run), "run_code");
        assert_true(mcp_run_wants_progress(run));
        assert_int_equal(hxs_request_timeout_s(mcp_run_request(run)), 5);

        /* progress: the token, increasing numbers, the output as message */
        size_t n = 0;
        char *p1 = mcp_run_progress(run, 1, "ab", 2, &n);
        char *p2 = mcp_run_progress(run, 2, "\xff", 1, &n);
        json_t *j1 = json_loads(p1, 0, NULL), *j2 = json_loads(p2, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(j1, "method")), "notifications/progress");
        json_t *pa = json_object_get(j1, "params"), *pb = json_object_get(j2, "params");
        assert_int_equal(json_integer_value(json_object_get(pa, "progressToken")), 9);
        assert_string_equal(json_string_value(json_object_get(pa, "message")), "ab");
        assert_true(json_integer_value(json_object_get(pb, "progress")) > json_integer_value(json_object_get(pa, "progress")));
        assert_string_equal(json_string_value(json_object_get(pb, "message")), "\xef\xbf\xbd");
        json_decref(j1);
        json_decref(j2);
        free(p1);
        free(p2);

        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"r1\"}}",
                                &j, &o), MCP_ACT_CANCEL);
        assert_string_equal(o.cancel_id, mcp_run_id(run));
        mcp_outcome_clear(&o);
        mcp_run_free(run);
        mcp_session_free(s);
}

static json_t *result_of(const hxs_result *res)
{
        mcp_session *s = mcp_session_new(&cfg);
        mcp_outcome o;
        json_t *j;
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\","
                                   "\"arguments\":{\"code\":\"x\"}}}", &j, &o), MCP_ACT_RUN);
        assert_false(mcp_run_wants_progress(o.run));
        size_t n = 0;
        assert_null(mcp_run_progress(o.run, 1, "x", 1, &n));
        char *text = mcp_run_result(o.run, res, &n);
        assert_non_null(text);
        assert_int_equal(strlen(text), n);
        j = json_loads(text, 0, NULL);
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "id")), 4);
        free(text);
        mcp_outcome_clear(&o);
        mcp_session_free(s);
        json_t *r = json_incref(json_object_get(j, "result"));
        json_decref(j);
        return r;
}

static void test_result_content(void **state)
{
        static unsigned char png[] = { 0x89, 'P', 'N', 'G' };
        static unsigned char csv[] = "a,b\n1,2\n";
        hxs_file files[] = {
                { .path = "output/figure-1.png", .data = png, .len = 4, .size = 4, .mime = "image/png" },
                { .path = "output/t a.csv", .data = csv, .len = 8, .size = 8, .mime = "text/csv" },
                { .path = "output/big.bin", .size = 1 << 30, .truncated = true, .mime = "application/octet-stream" },
        };
        hxs_result res = { .stdout_data = "hello\n", .stdout_len = 6, .stderr_data = "warn\n", .stderr_len = 5,
                           .files = files, .n_files = 3, .execution_time_ms = 12 };
        json_t *r = result_of(&res);
        assert_true(json_is_false(json_object_get(r, "isError")));
        json_t *c = json_object_get(r, "content");
        assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "text")), "hello\n");
        assert_string_equal(json_string_value(json_object_get(json_array_get(c, 1), "text")), "stderr:\nwarn\n");
        assert_string_equal(json_string_value(json_object_get(json_array_get(c, 2), "text")), "exit status 0");
        json_t *img = json_array_get(c, 3);
        assert_string_equal(json_string_value(json_object_get(img, "type")), "image");
        assert_string_equal(json_string_value(json_object_get(img, "mimeType")), "image/png");
        assert_string_equal(json_string_value(json_object_get(img, "data")), "iVBORw==");
        json_t *rs = json_object_get(json_array_get(c, 4), "resource");
        assert_string_equal(json_string_value(json_object_get(rs, "uri")), "file:///home/sandbox/output/t%20a.csv");
        assert_string_equal(json_string_value(json_object_get(rs, "text")), "a,b\n1,2\n");
        assert_non_null(strstr(json_string_value(json_object_get(json_array_get(c, 5), "text")), "not returned"));
        json_t *sc = json_object_get(r, "structuredContent");
        assert_string_equal(json_string_value(json_object_get(sc, "stdout")), "hello\n");
        assert_int_equal(json_integer_value(json_object_get(sc, "exit_code")), 0);
        assert_true(json_is_null(json_object_get(sc, "error")));
        json_t *f0 = json_array_get(json_object_get(sc, "files"), 0);
        assert_string_equal(json_string_value(json_object_get(f0, "path")), "output/figure-1.png");
        assert_null(json_object_get(f0, "content")); /* metadata only: the bytes are in content */
        json_decref(r);

        hxs_result killed = { .exit_code = 124, .timed_out = true, .end = HXS_END_TIME_LIMIT,
                              .end_message = "killed: time limit of 1 s exceeded" };
        r = result_of(&killed);
        assert_true(json_is_true(json_object_get(r, "isError")));
        c = json_object_get(r, "content");
        assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "text")),
                            "exit status 124; timeout: killed: time limit of 1 s exceeded");
        sc = json_object_get(r, "structuredContent");
        assert_string_equal(json_string_value(json_object_get(json_object_get(sc, "error"), "type")), "timeout");
        json_decref(r);

        hxs_result failed = { .exit_code = 1 };
        r = result_of(&failed);
        assert_true(json_is_true(json_object_get(r, "isError")));
        json_decref(r);
}

static int setup(void **state)
{
        hxs_config_defaults(&cfg);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_errors),        cmocka_unit_test(test_notifications_get_nothing),
                cmocka_unit_test(test_versions),      cmocka_unit_test(test_tools_list),
                cmocka_unit_test(test_bad_arguments), cmocka_unit_test(test_session_tools),
                cmocka_unit_test(test_run_and_cancel),
                cmocka_unit_test(test_result_content),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
