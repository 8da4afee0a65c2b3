/* SPDX-License-Identifier: Apache-2.0 */
/* What the MCP module's files share (src/mcp only): the session and run structs, the
 * tool table's entry points and the builders of JSON-RPC responses. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "mcp/mcp.h"

struct mcp_session {
        const hxs_config *cfg;
        char version[16];       /* negotiated; MCP_PROTOCOL_LATEST until initialize */
};

struct mcp_run {
        json_t *id;             /* the request's id (string or integer) */
        char *id_text;          /* the same as compact JSON */
        json_t *token;          /* _meta.progressToken, NULL when none */
        uint64_t progress;      /* bytes of output reported so far: always increasing */
        const char *tool;       /* static */
        mcp_tool kind;
        hxs_request *req;
        char session_id[80];    /* session tools */
        hxs_session_limits limits;
        char *path;
        unsigned char *data;
        size_t len;
};

/* reply.c: a response {"jsonrpc":"2.0","id":id,"result":result} as text; result is stolen. */
char *mcp_result_text(const json_t *id, json_t *result, size_t *ret_len);
/* An error response; id NULL: null. */
char *mcp_error_json(const json_t *id, int code, const char *message, size_t *ret_len);

/* run.c: a run of tool for the request id (params' _meta.progressToken asks for
 * progress); takes req. NULL on ENOMEM (req is then the caller's still). */
mcp_run *mcp_run_new(const json_t *id, const json_t *params, mcp_tool kind, const char *tool, hxs_request *req);

/* tools.c: the tools array of tools/list, in a fixed order. NULL on ENOMEM. */
json_t *mcp_tools_json(const hxs_config *cfg);
/* tools/call: a run to start, a result known at once (bad arguments: isError), or a
 * protocol error (unknown tool, params not an object). -ENOMEM only. */
int mcp_tools_call(mcp_session *s, const json_t *id, const json_t *params, mcp_outcome *ret);

/* session-tools.c: the session tools' schemas, arguments (into r's fields: -EINVAL
 * with err naming the argument, -ENOMEM) and results as tool result objects. */
json_t *mcp_session_input_schema(mcp_tool kind, const hxs_config *cfg);
json_t *mcp_session_output_schema(mcp_tool kind);
int mcp_session_args(mcp_tool kind, const json_t *args, const hxs_config *cfg, mcp_run *r, hxs_error *err);
json_t *mcp_session_result_json(const hxs_session *s, const char *sid, bool closing);
json_t *mcp_cell_result_json(const hxs_cell_result *res, const hxs_session *s, const char *sid);
json_t *mcp_file_result_json(mcp_tool kind, const hxs_session_file_result *res);

/* content.c: blocks appended to a content array (false on ENOMEM). */
bool mcp_content_add(json_t *content, json_t *block);       /* steals block */
bool mcp_content_status(json_t *content, const hxs_result *res);
/* A returned file: image, embedded resource or a note; fj is its API object. */
bool mcp_content_file(json_t *content, const hxs_file *f, const json_t *fj);
void mcp_strip_file_contents(json_t *files);
bool mcp_is_image(const char *mime);
json_t *mcp_file_uri(const char *path);

/* run-code.c: run_code's schemas, its arguments to a request, its result. */
json_t *mcp_run_code_input_schema(const hxs_config *cfg);
json_t *mcp_run_code_output_schema(void);
/* 0 and *ret_req, or -EINVAL with err naming the argument, or -ENOMEM. */
int mcp_run_code_request(const json_t *args, const hxs_config *cfg, hxs_request **ret_req,
                         hxs_error *err);
/* The tool result of an execution: content, structuredContent, isError. */
json_t *mcp_run_code_result(const hxs_result *res);
/* A tool result {"content": [{"type":"text","text":msg}], "isError": true}. */
json_t *mcp_tool_error_result(const char *msg);
