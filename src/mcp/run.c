/* SPDX-License-Identifier: Apache-2.0 */
/* A tool call at work (mcp_run): what the transport asks of it, its progress
 * notifications, its response at the end; and the outcome that hands it out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json.h"
#include "mcp/mcp-int.h"

mcp_run *mcp_run_new(const json_t *id, const json_t *params, mcp_tool kind, const char *tool, hxs_request *req)
{
        mcp_run *r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        r->id = json_deep_copy(id);
        r->id_text = r->id ? json_dumps(r->id, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        const json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
        if (json_is_string(token) || json_is_integer(token))
                r->token = json_deep_copy(token);
        r->tool = tool;
        r->kind = kind;
        r->req = req;
        if (!r->id_text || (token && (json_is_string(token) || json_is_integer(token)) && !r->token)) {
                r->req = NULL;
                mcp_run_free(r);
                return NULL;
        }
        return r;
}

const hxs_request *mcp_run_request(const mcp_run *r) { return r->req; }
hxs_request *mcp_run_take_request(mcp_run *r)
{
        hxs_request *req = r->req;
        r->req = NULL;
        return req;
}

const char *mcp_run_id(const mcp_run *r) { return r->id_text; }
const char *mcp_run_tool(const mcp_run *r) { return r->tool; }
mcp_tool mcp_run_kind(const mcp_run *r) { return r->kind; }
const char *mcp_run_session_id(const mcp_run *r) { return r->session_id; }
const hxs_session_limits *mcp_run_limits(const mcp_run *r) { return &r->limits; }
const char *mcp_run_path(const mcp_run *r) { return r->path ? r->path : ""; }

const void *mcp_run_data(const mcp_run *r, size_t *ret_len)
{
        *ret_len = r->len;
        return r->data;
}
bool mcp_run_wants_progress(const mcp_run *r) { return r->token != NULL; }

void mcp_run_free(mcp_run *r)
{
        if (!r)
                return;
        json_decref(r->id);
        free(r->id_text);
        json_decref(r->token);
        hxs_request_free(r->req);
        free(r->path);
        free(r->data);
        free(r);
}

char *mcp_run_progress(mcp_run *r, int stream, const void *data, size_t len, size_t *ret_len)
{
        if (!r->token || len == 0)
                return NULL;
        r->progress += len;
        json_t *msg = json_string_lossy(data, len);
        json_t *n = json_pack("{s:s,s:s,s:{s:O,s:I,s:o}}", "jsonrpc", "2.0", "method", "notifications/progress",
                              "params", "progressToken", r->token, "progress", (json_int_t)r->progress,
                              "message", msg);
        (void)stream;
        char *text = n ? json_dumps(n, JSON_COMPACT) : NULL;
        json_decref(n);
        if (text)
                *ret_len = strlen(text);
        return text;
}

char *mcp_run_result(mcp_run *r, const hxs_result *res, size_t *ret_len)
{
        return mcp_result_text(r->id, mcp_run_code_result(res), ret_len);
}

char *mcp_run_failed(mcp_run *r, const hxs_error *err, size_t *ret_len)
{
        char msg[sizeof(err->message) + 64];
        snprintf(msg, sizeof(msg), "the sandbox could not run: %s",
                 err->message[0] ? err->message : "an internal error");
        return mcp_result_text(r->id, mcp_tool_error_result(msg), ret_len);
}

char *mcp_run_error(mcp_run *r, const char *message, size_t *ret_len)
{
        return mcp_result_text(r->id, mcp_tool_error_result(message), ret_len);
}

char *mcp_run_session_result(mcp_run *r, const hxs_session *s, const char *sid, size_t *ret_len)
{
        return mcp_result_text(r->id, mcp_session_result_json(s, sid, r->kind == MCP_TOOL_SESSION_CLOSE), ret_len);
}

char *mcp_run_cell_result(mcp_run *r, const hxs_cell_result *res, const hxs_session *s, const char *sid,
                          size_t *ret_len)
{
        return mcp_result_text(r->id, mcp_cell_result_json(res, s, sid), ret_len);
}

char *mcp_run_file_result(mcp_run *r, const hxs_session_file_result *res, size_t *ret_len)
{
        return mcp_result_text(r->id, mcp_file_result_json(r->kind, res), ret_len);
}

void mcp_outcome_clear(mcp_outcome *o)
{
        free(o->reply);
        mcp_run_free(o->run);
        free(o->cancel_id);
        memset(o, 0, sizeof(*o));
}
