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

/* Every tool runs code in a sandbox of its own: it changes nothing outside it
 * (not destructive, no open world: no network), and each call is a new run. */
static json_t *annotations(const char *title)
{
        return json_pack("{s:s,s:b,s:b,s:b,s:b}", "title", title, "readOnlyHint", 0, "destructiveHint", 0,
                         "idempotentHint", 0, "openWorldHint", 0);
}

static json_t *run_code_tool(const hxs_config *cfg)
{
        return json_pack(
                "{s:s,s:s,s:s,s:o,s:o,s:o}", "name", "run_code", "title", "Run code in a sandbox",
                "description",
                "Runs a program in a fresh, isolated sandbox (no network) and returns its stdout, stderr "
                "and exit status. language: python (default; numpy, pandas, matplotlib, scipy, "
                "scikit-learn and more are installed), javascript (Node.js) or bash. files are written "
                "into the working directory first; files the program writes under output/ come back "
                "(charts shown with matplotlib come back as images), and so do those matching "
                "return_files. A program that fails (non-zero exit, time or memory limit) gives a "
                "result with isError.",
                "inputSchema", mcp_run_code_input_schema(cfg), "outputSchema", mcp_run_code_output_schema(),
                "annotations", annotations("Run code in a sandbox"));
}

json_t *mcp_tools_json(const hxs_config *cfg)
{
        return json_pack("[o]", run_code_tool(cfg));
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

int mcp_tools_call(mcp_session *s, const json_t *id, const json_t *params, mcp_outcome *ret)
{
        const json_t *name = json_object_get(params, "name");
        const json_t *args = json_object_get(params, "arguments");

        if (!json_is_string(name))
                return protocol_error(ret, id, MCP_INVALID_PARAMS, "params.name: is required, the tool's name");
        if (strcmp(json_string_value(name), "run_code") != 0 ||
            strlen(json_string_value(name)) != json_string_length(name))
                return protocol_error(ret, id, MCP_INVALID_PARAMS,
                                      "unknown tool (tools/list names the tools: run_code)");
        ret->tool = "run_code";
        if (args && !json_is_object(args) && !json_is_null(args))
                return protocol_error(ret, id, MCP_INVALID_PARAMS, "params.arguments: must be an object");

        hxs_request *req = NULL;
        hxs_error err = { 0 };
        int r = mcp_run_code_request(args, s->cfg, &req, &err);
        if (r == -ENOMEM)
                return -ENOMEM;
        if (r < 0)
                return result_now(ret, id, mcp_tool_error_result(err.message));
        ret->run = mcp_run_new(id, params, "run_code", req);
        if (!ret->run) {
                hxs_request_free(req);
                return -ENOMEM;
        }
        ret->action = MCP_ACT_RUN;
        return 0;
}
