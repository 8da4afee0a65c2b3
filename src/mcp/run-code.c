/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The run_code tool: its input and output schemas, its arguments to a request (through
 * hxs_request_from_json, so a call is validated exactly as POST /api/v1/exec validates a
 * body), its output as progress notifications and its result as MCP content: text for
 * the streams and the exit status, an image block per returned image (charts), other
 * returned files as embedded resources, and structuredContent that the output schema
 * describes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/macro.h"
#include "engine/json.h"
#include "mcp/mcp-int.h"

static const char *const arg_names[] = { "language", "code", "timeout", "files", "packages", "return_files" };
#define ARG_LIST "language, code, timeout, files, packages, return_files"

json_t *mcp_run_code_input_schema(const hxs_config *cfg)
{
        return json_pack(
                "{s:s,s:{s:{s:s,s:[sss],s:s,s:s},s:{s:s,s:s},s:{s:s,s:i,s:i,s:s},"
                "s:{s:s,s:{s:s,s:{s:{s:s},s:{s:s},s:{s:s,s:[ss]}},s:[ss],s:b},s:s},"
                "s:{s:s,s:{s:s},s:s},s:{s:s,s:{s:s},s:s}},s:[s],s:b}",
                "type", "object", "properties",
                "language", "type", "string", "enum", "python", "javascript", "bash", "default", "python",
                "description", "the program's language (aliases: js, node, shell, sh)",
                "code", "type", "string", "description", "the program",
                "timeout", "type", "integer", "minimum", 1, "maximum", (json_int_t)cfg->max_timeout_s,
                "description", "time limit in seconds",
                "files", "type", "array", "items", "type", "object", "properties", "path", "type", "string",
                "content", "type", "string", "encoding", "type", "string", "enum", "utf-8", "base64",
                "required", "path", "content", "additionalProperties", 0, "description",
                "files written into the working directory before the program starts (path relative to it)",
                "packages", "type", "array", "items", "type", "string", "description",
                "Python packages to install (pip requirements) before the program runs",
                "return_files", "type", "array", "items", "type", "string", "description",
                "glob patterns of files to return besides those under output/ (e.g. \"*.csv\")",
                "required", "code", "additionalProperties", 0);
}

json_t *mcp_run_code_output_schema(void)
{
        return json_pack(
                "{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:[ss]},"
                "s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:[ss],s:{s:{s:s},s:{s:s}}},"
                "s:{s:s,s:{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:s}}}}},"
                "s:[ssssss]}",
                "type", "object", "properties",
                "stdout", "type", "string", "stderr", "type", "string", "exit_code", "type", "integer",
                "execution_time_ms", "type", "integer", "memory_used_mb", "type", "integer",
                "timed_out", "type", "boolean", "oom_killed", "type", "boolean",
                "signal", "type", "integer", "null",
                "stdout_truncated", "type", "boolean", "stderr_truncated", "type", "boolean",
                "stdout_omitted_bytes", "type", "integer", "stderr_omitted_bytes", "type", "integer",
                "error", "type", "object", "null", "properties", "type", "type", "string", "message", "type",
                "string",
                "files", "type", "array", "items", "type", "object", "properties", "path", "type", "string",
                "size", "type", "integer", "mime", "type", "string", "truncated", "type", "boolean",
                "required", "stdout", "stderr", "exit_code", "error", "files", "execution_time_ms");
}

json_t *mcp_tool_error_result(const char *msg)
{
        return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", msg, "isError", 1);
}

int mcp_run_code_request(const json_t *args, const hxs_config *cfg, hxs_request **ret_req, hxs_error *err)
{
        const char *key;
        json_t *v;

        if (!args || json_is_null(args))
                return hxs_request_from_json("{}", 2, cfg, ret_req, err);
        json_object_foreach((json_t *)args, key, v) {
                bool known = false;
                for (size_t i = 0; i < ARRAY_SIZE(arg_names); i++)
                        known |= strcmp(key, arg_names[i]) == 0;
                if (!known) {
                        char q[64];
                        utf8_lossy_copy(q, sizeof(q), key, strlen(key));
                        snprintf(err->message, sizeof(err->message),
                                 "%s: unknown argument (the arguments are " ARG_LIST ")", q);
                        snprintf(err->field, sizeof(err->field), "%s", q);
                        err->kind = HXS_ERR_INVALID;
                        err->errnum = EINVAL;
                        return -EINVAL;
                }
        }
        _cleanup_free_ char *body = json_dumps(args, JSON_COMPACT);
        if (!body)
                return -ENOMEM;
        int r = hxs_request_from_json(body, strlen(body), cfg, ret_req, err);
        return r < 0 && err->kind == HXS_ERR_INTERNAL ? -ENOMEM : r;
}

json_t *mcp_run_code_result(const hxs_result *res)
{
        json_t *api = result_to_json(res, NULL);
        json_t *content = json_array();
        bool ok = api && content;

        if (ok && res->stdout_len)
                ok = mcp_content_add(content, json_pack("{s:s,s:O}", "type", "text", "text", json_object_get(api, "stdout")));
        if (ok && res->stderr_len) {
                json_t *s = json_sprintf("stderr:\n%s", json_string_value(json_object_get(api, "stderr")));
                ok = s && mcp_content_add(content, json_pack("{s:s,s:o}", "type", "text", "text", s));
        }
        ok = ok && mcp_content_status(content, res);
        json_t *files = ok ? json_object_get(api, "files") : NULL;
        for (size_t i = 0; ok && i < res->n_files; i++)
                ok = mcp_content_file(content, &res->files[i], json_array_get(files, i));
        if (!ok) {
                json_decref(api);
                json_decref(content);
                return NULL;
        }
        mcp_strip_file_contents(files);
        bool failed = res->exit_code != 0 || res->end != HXS_END_EXITED;
        return json_pack("{s:o,s:o,s:b}", "content", content, "structuredContent", api, "isError", failed);
}
