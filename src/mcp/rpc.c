/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON-RPC 2.0 and the MCP lifecycle: one message in, what to do with it out. Reads
 * untrusted bytes strictly (jansson, duplicate keys refused), answers initialize (with
 * version negotiation), ping and tools/list itself, hands tools/call to tools.c and
 * turns notifications/cancelled into the id of the run to end. Errors are JSON-RPC's
 * own codes: -32700 unreadable JSON, -32600 not a request, -32601 unknown method,
 * -32602 bad params.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/macro.h"
#include "mcp/mcp-int.h"

static const char *const versions[] = { MCP_PROTOCOL_LATEST, "2025-06-18", "2025-03-26" };

bool mcp_version_supported(const char *version)
{
        for (size_t i = 0; version && i < ARRAY_SIZE(versions); i++)
                if (strcmp(version, versions[i]) == 0)
                        return true;
        return false;
}

mcp_session *mcp_session_new(const hxs_config *cfg)
{
        mcp_session *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->cfg = cfg;
        strcpy(s->version, MCP_PROTOCOL_LATEST);
        return s;
}

void mcp_session_free(mcp_session *s) { free(s); }

const char *mcp_session_version(const mcp_session *s) { return s->version; }

static int reply(mcp_outcome *ret, char *text, size_t len)
{
        if (!text)
                return -ENOMEM;
        ret->action = MCP_ACT_REPLY;
        ret->reply = text;
        ret->reply_len = len;
        return 0;
}

static int reply_error(mcp_outcome *ret, const json_t *id, int code, const char *message)
{
        size_t len = 0;
        char *text = mcp_error_json(id, code, message, &len);
        return reply(ret, text, len);
}

static int reply_result(mcp_outcome *ret, const json_t *id, json_t *result)
{
        size_t len = 0;
        char *text = mcp_result_text(id, result, &len);
        return reply(ret, text, len);
}

/* initialize: the client's version when we speak it, else our newest (the client then
 * decides whether it can go on). */
static int on_initialize(mcp_session *s, const json_t *id, const json_t *params, mcp_outcome *ret)
{
        const json_t *v = json_object_get(params, "protocolVersion");
        if (!json_is_string(v))
                return reply_error(ret, id, MCP_INVALID_PARAMS,
                                   "params.protocolVersion: is required, a string such as \"" MCP_PROTOCOL_LATEST "\"");
        snprintf(s->version, sizeof(s->version), "%s",
                 mcp_version_supported(json_string_value(v)) ? json_string_value(v) : MCP_PROTOCOL_LATEST);
        json_t *result = json_pack(
                "{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", s->version, "capabilities",
                "tools", "listChanged", 0, "serverInfo", "name", "hexr-sandbox", "title", "hexr-sandbox",
                "version", hxs_version(), "instructions",
                "Runs code (Python, JavaScript, Bash) in a fresh isolated sandbox per call with run_code: "
                "files in, files out (charts come back as images), stdout, stderr and the exit status.");
        return reply_result(ret, id, result);
}

static int on_tools_list(mcp_session *s, const json_t *id, mcp_outcome *ret)
{
        json_t *tools = mcp_tools_json(s->cfg);
        return reply_result(ret, id, tools ? json_pack("{s:o}", "tools", tools) : NULL);
}

/* notifications/cancelled: {"requestId": id, "reason"?}. An id we never saw is no error
 * (the run may have just ended): the transport finds nothing to end. */
static int on_cancelled(const json_t *params, mcp_outcome *ret)
{
        const json_t *rid = json_object_get(params, "requestId");
        if (!json_is_string(rid) && !json_is_integer(rid))
                return 0;
        ret->cancel_id = json_dumps(rid, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!ret->cancel_id)
                return -ENOMEM;
        ret->action = MCP_ACT_CANCEL;
        return 0;
}

static const char *const methods[] = {
        "initialize", "ping", "tools/list", "tools/call", "notifications/initialized",
        "notifications/cancelled",
};

static const char *method_label(const char *m)
{
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
                if (strcmp(m, methods[i]) == 0)
                        return methods[i];
        return "other";
}

static int dispatch(mcp_session *s, const char *method, const json_t *id, const json_t *params,
                    mcp_outcome *ret)
{
        if (!id) {
                /* a notification: never answered, even when we do not know it */
                if (strcmp(method, "notifications/cancelled") == 0)
                        return on_cancelled(params, ret);
                return 0;
        }
        if (params && !json_is_object(params))
                return reply_error(ret, id, MCP_INVALID_PARAMS, "params: must be an object");
        if (strcmp(method, "initialize") == 0)
                return on_initialize(s, id, params, ret);
        if (strcmp(method, "ping") == 0)
                return reply_result(ret, id, json_object());
        if (strcmp(method, "tools/list") == 0)
                return on_tools_list(s, id, ret);
        if (strcmp(method, "tools/call") == 0)
                return mcp_tools_call(s, id, params, ret);
        return reply_error(ret, id, MCP_METHOD_NOT_FOUND,
                           "method not found (this server offers initialize, ping, tools/list and tools/call)");
}

static int handle_object(mcp_session *s, json_t *msg, mcp_outcome *ret)
{
        const json_t *id = json_object_get(msg, "id");
        const json_t *method = json_object_get(msg, "method");
        const json_t *v = json_object_get(msg, "jsonrpc");
        bool id_ok = json_is_string(id) || json_is_integer(id);

        if (!method && (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
                ret->method = "response";
                return 0; /* a response to a request of ours: we send none, nothing to do */
        }
        ret->is_request = id != NULL;
        if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0)
                return reply_error(ret, id_ok ? id : NULL, MCP_INVALID_REQUEST,
                                   "jsonrpc: must be \"2.0\"");
        if (!json_is_string(method) || strlen(json_string_value(method)) != json_string_length(method))
                return reply_error(ret, id_ok ? id : NULL, MCP_INVALID_REQUEST,
                                   "method: is required, a string without NUL");
        if (id && !id_ok)
                return reply_error(ret, NULL, MCP_INVALID_REQUEST,
                                   "id: must be a string or an integer");
        ret->method = method_label(json_string_value(method));
        return dispatch(s, json_string_value(method), id, json_object_get(msg, "params"), ret);
}

int mcp_handle(mcp_session *s, const char *msg, size_t len, mcp_outcome *ret)
{
        json_error_t jerr;

        memset(ret, 0, sizeof(*ret));
        ret->method = "invalid";
        json_t *root = json_loadb(msg, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        int r;
        if (!root)
                r = reply_error(ret, NULL, MCP_PARSE_ERROR, "parse error: the message is not valid JSON");
        else if (json_is_array(root))
                r = reply_error(ret, NULL, MCP_INVALID_REQUEST,
                                "batches are not supported: send one JSON-RPC message at a time");
        else if (!json_is_object(root))
                r = reply_error(ret, NULL, MCP_INVALID_REQUEST, "the message must be a JSON object");
        else
                r = handle_object(s, root, ret);
        json_decref(root);
        if (r < 0)
                mcp_outcome_clear(ret);
        return r;
}
