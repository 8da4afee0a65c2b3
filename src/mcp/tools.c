/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tool table: what tools/list shows (names, titles, descriptions, schemas and
 * annotations, always in this order) and tools/call's dispatch to a tool. A call with
 * bad arguments is a tool result with isError naming the argument, so that a model can
 * fix its call; only an unknown tool or params that are not a call are protocol errors.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/macro.h"
#include "mcp/mcp-int.h"

/* The tools in tools/list's order (mcp_tool's). Hints: every tool acts in a sandbox
 * of its own without network (no open world); run_code and session_exec run new code
 * each time (not idempotent, not read-only); closing a session, and writing over a
 * session's file, destroy what was there. */
static const struct tool_def {
        const char *name, *title, *description;
        bool read_only, destructive, idempotent;
} tools[MCP_TOOL_MAX] = {
        [MCP_TOOL_RUN_CODE] = { "run_code", "Run code in a sandbox",
                "Runs a program in a fresh, isolated sandbox (no network) and returns its stdout, stderr "
                "and exit status. language: python (default; numpy, pandas, matplotlib, scipy, "
                "scikit-learn and more are installed), javascript (Node.js) or bash. files are written "
                "into the working directory first; files the program writes under output/ come back "
                "(charts shown with matplotlib come back as images), and so do those matching "
                "return_files. A program that fails (non-zero exit, time or memory limit) gives a "
                "result with isError. Nothing is kept afterwards: for state across calls use a session." },
        [MCP_TOOL_SESSION_CREATE] = { "session_create", "Start a sandbox session",
                "Starts a session: one sandbox (no network) whose interpreter keeps its state (variables, "
                "imports, files) across session_exec calls, like a notebook. Returns its session_id. It "
                "ends with session_close, after idle_timeout seconds without a cell, or at its lifetime." },
        [MCP_TOOL_SESSION_EXEC] = { "session_exec", "Run a cell in a session",
                "Runs code in the session's interpreter, which keeps its state: returns stdout, stderr, "
                "the value of the last expression, displayed outputs (charts as images), an exception "
                "with its traceback, and files written under output/. A cell that raises or is "
                "interrupted at its timeout gives a result with isError; the session goes on." },
        [MCP_TOOL_SESSION_WRITE_FILE] = { "session_write_file", "Write a file into a session",
                "Writes a file (text, or base64 with encoding \"base64\") into the session's working "
                "directory, replacing one of that path.", false, true, true },
        [MCP_TOOL_SESSION_READ_FILE] = { "session_read_file", "Read a file of a session",
                "Reads a file of the session's working directory: text as text, images as images, "
                "other bytes as a resource.", true, false, true },
        [MCP_TOOL_SESSION_LIST_FILES] = { "session_list_files", "List a session's files",
                "Lists a directory of the session (default: its working directory): type, size and path "
                "of each entry.", true, false, true },
        [MCP_TOOL_SESSION_CLOSE] = { "session_close", "Close a session",
                "Ends the session now: its sandbox and everything in it are gone.", false, true, true },
};

static json_t *tool_json(mcp_tool kind, const hxs_config *cfg)
{
        const struct tool_def *t = &tools[kind];
        bool run = kind == MCP_TOOL_RUN_CODE;
        return json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}", "name", t->name, "title", t->title,
                         "description", t->description, "inputSchema",
                         run ? mcp_run_code_input_schema(cfg) : mcp_session_input_schema(kind, cfg), "outputSchema",
                         run ? mcp_run_code_output_schema() : mcp_session_output_schema(kind), "annotations", "title",
                         t->title, "readOnlyHint", t->read_only, "destructiveHint", t->destructive, "idempotentHint",
                         t->idempotent, "openWorldHint", 0);
}

json_t *mcp_tools_json(const hxs_config *cfg)
{
        json_t *a = json_array();
        for (int k = 0; a && k < MCP_TOOL_MAX; k++)
                if (json_array_append_new(a, tool_json((mcp_tool)k, cfg)) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static int result_now(mcp_outcome *ret, const json_t *id, json_t *result)
{
        ret->reply = mcp_result_text(id, result, &ret->reply_len);
        if (!ret->reply)
                return -ENOMEM;
        ret->action = MCP_ACT_REPLY;
        return 0;
}

static int protocol_error(mcp_outcome *ret, const json_t *id, int code, const char *msg)
{
        ret->reply = mcp_error_json(id, code, msg, &ret->reply_len);
        if (!ret->reply)
                return -ENOMEM;
        ret->action = MCP_ACT_REPLY;
        return 0;
}

static int find_tool(const json_t *name, mcp_tool *ret)
{
        for (int k = 0; k < MCP_TOOL_MAX; k++)
                if (strcmp(json_string_value(name), tools[k].name) == 0 &&
                    strlen(json_string_value(name)) == json_string_length(name)) {
                        *ret = (mcp_tool)k;
                        return 0;
                }
        return -ENOENT;
}

int mcp_tools_call(mcp_session *s, const json_t *id, const json_t *params, mcp_outcome *ret)
{
        const json_t *name = json_object_get(params, "name");
        const json_t *args = json_object_get(params, "arguments");
        mcp_tool kind;

        if (!json_is_string(name))
                return protocol_error(ret, id, MCP_INVALID_PARAMS, "params.name: is required, the tool's name");
        if (find_tool(name, &kind) < 0)
                return protocol_error(ret, id, MCP_INVALID_PARAMS,
                                      "unknown tool (tools/list names the tools: run_code and the session_* tools)");
        ret->tool = tools[kind].name;
        if (args && !json_is_object(args) && !json_is_null(args))
                return protocol_error(ret, id, MCP_INVALID_PARAMS, "params.arguments: must be an object");

        mcp_run *run = mcp_run_new(id, params, kind, tools[kind].name, NULL);
        if (!run)
                return -ENOMEM;
        hxs_error err = { 0 };
        int r = kind == MCP_TOOL_RUN_CODE ? mcp_run_code_request(args, s->cfg, &run->req, &err) :
                                            mcp_session_args(kind, args, s->cfg, run, &err);
        if (r < 0) {
                mcp_run_free(run);
                return r == -ENOMEM ? -ENOMEM : result_now(ret, id, mcp_tool_error_result(err.message));
        }
        ret->run = run;
        ret->action = MCP_ACT_RUN;
        return 0;
}
