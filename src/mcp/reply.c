/* SPDX-License-Identifier: Apache-2.0 */
/* JSON-RPC 2.0 responses as text: a result, an error. The bottom of the MCP module: it
 * calls nothing of it. */
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp-int.h"

static char *dump(json_t *o, size_t *ret_len)
{
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (text)
                *ret_len = strlen(text);
        return text;
}

char *mcp_result_text(const json_t *id, json_t *result, size_t *ret_len)
{
        if (!result)
                return NULL;
        return dump(json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result), ret_len);
}

char *mcp_error_json(const json_t *id, int code, const char *message, size_t *ret_len)
{
        json_t *null = json_null();
        return dump(json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : null,
                              "error", "code", code, "message", message), ret_len);
}

char *mcp_error_text(const char *id_json, int code, const char *message, size_t *ret_len)
{
        json_t *id = id_json ? json_loads(id_json, JSON_DECODE_ANY, NULL) : NULL;
        char *text = mcp_error_json(id, code, message, ret_len);
        json_decref(id);
        return text;
}
