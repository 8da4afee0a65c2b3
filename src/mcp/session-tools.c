/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session tools: session_create, session_exec, session_write_file,
 * session_read_file, session_list_files, session_close. Their schemas, their arguments
 * to what the transport asks of the library's session API (a session's request and
 * limits, a cell's request, a path, bytes), and the library's answers as tool results.
 * Which sessions a client may name is the transport's rule (stdio: the process's own;
 * HTTP: the caller's), not this file's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/macro.h"
#include "engine/files-out.h"
#include "engine/json.h"
#include "engine/request.h"
#include "mcp/mcp-int.h"
#include "session/session-json.h"

#define SID_ARG "session_id", "type", "string", "description", "the id session_create returned"

static json_t *lang_schema(void)
{
        return json_pack("{s:s,s:[sss],s:s,s:s}", "type", "string", "enum", "python", "javascript", "bash", "default",
                         "python", "description", "the session's language (aliases: js, node, shell, sh)");
}

static json_t *files_schema(const char *what)
{
        return json_pack("{s:s,s:{s:s,s:{s:{s:s},s:{s:s},s:{s:s,s:[ss]}},s:[ss],s:b},s:s}", "type", "array", "items",
                         "type", "object", "properties", "path", "type", "string", "content", "type", "string",
                         "encoding", "type", "string", "enum", "utf-8", "base64", "required", "path", "content",
                         "additionalProperties", 0, "description", what);
}

static json_t *strings_schema(const char *what)
{
        return json_pack("{s:s,s:{s:s},s:s}", "type", "array", "items", "type", "string", "description", what);
}

static json_t *seconds_schema(const char *what, uint32_t max)
{
        return json_pack("{s:s,s:i,s:I,s:s}", "type", "integer", "minimum", 1, "maximum", (json_int_t)max, "description",
                         what);
}

json_t *mcp_session_input_schema(mcp_tool kind, const hxs_config *cfg)
{
        switch (kind) {
        case MCP_TOOL_SESSION_CREATE:
                return json_pack("{s:s,s:{s:o,s:{s:s,s:i,s:I,s:s},s:o,s:o,s:o,s:o},s:b}", "type", "object", "properties",
                                 "language", lang_schema(), "memory_mb", "type", "integer", "minimum", 16, "maximum",
                                 (json_int_t)cfg->max_memory_mb, "description", "memory limit of the whole session",
                                 "packages", strings_schema("Python packages to install first (pip requirements)"),
                                 "files", files_schema("files written into the working directory at the start"),
                                 "idle_timeout", seconds_schema("the session ends after this long without a cell",
                                                                cfg->session_idle_timeout_max_s),
                                 "lifetime", seconds_schema("the session ends this long after it started",
                                                            cfg->session_lifetime_max_s),
                                 "additionalProperties", 0);
        case MCP_TOOL_SESSION_EXEC:
                return json_pack("{s:s,s:{s:{s:s,s:s},s:{s:s,s:s},s:o,s:o,s:o},s:[ss],s:b}", "type", "object",
                                 "properties", SID_ARG, "code", "type", "string", "description",
                                 "the cell: runs in the session's interpreter, whose state it keeps",
                                 "timeout", seconds_schema("time limit of the cell in seconds", cfg->max_timeout_s),
                                 "files", files_schema("files written into the working directory before the cell"),
                                 "return_files", strings_schema("glob patterns of files to return besides output/"),
                                 "required", "session_id", "code", "additionalProperties", 0);
        case MCP_TOOL_SESSION_WRITE_FILE:
                return json_pack("{s:s,s:{s:{s:s,s:s},s:{s:s,s:s},s:{s:s},s:{s:s,s:[ss],s:s}},s:[sss],s:b}", "type",
                                 "object", "properties", SID_ARG, "path", "type", "string", "description",
                                 "relative to the working directory", "content", "type", "string", "encoding", "type",
                                 "string", "enum", "utf-8", "base64", "default", "utf-8", "required", "session_id",
                                 "path", "content", "additionalProperties", 0);
        case MCP_TOOL_SESSION_READ_FILE:
                return json_pack("{s:s,s:{s:{s:s,s:s},s:{s:s,s:s}},s:[ss],s:b}", "type", "object", "properties", SID_ARG,
                                 "path", "type", "string", "description", "relative to the working directory",
                                 "required", "session_id", "path", "additionalProperties", 0);
        case MCP_TOOL_SESSION_LIST_FILES:
                return json_pack("{s:s,s:{s:{s:s,s:s},s:{s:s,s:s}},s:[s],s:b}", "type", "object", "properties", SID_ARG,
                                 "path", "type", "string", "description", "a directory (default: the working directory)",
                                 "required", "session_id", "additionalProperties", 0);
        case MCP_TOOL_SESSION_CLOSE:
                return json_pack("{s:s,s:{s:{s:s,s:s}},s:[s],s:b}", "type", "object", "properties", SID_ARG, "required",
                                 "session_id", "additionalProperties", 0);
        case MCP_TOOL_RUN_CODE:
        case MCP_TOOL_MAX:
        default:
                return NULL;
        }
}

json_t *mcp_session_output_schema(mcp_tool kind)
{
        switch (kind) {
        case MCP_TOOL_SESSION_CREATE:
        case MCP_TOOL_SESSION_CLOSE:
                return json_pack("{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:[ss]}},s:[ss]}", "type", "object", "properties",
                                 "id", "type", "string", "language", "type", "string", "state", "type", "string",
                                 "ended_reason", "type", "string", "null", "required", "id", "state");
        case MCP_TOOL_SESSION_EXEC:
                return json_pack("{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:[ss]},s:{s:[ss]},s:{s:s}},s:[sss]}", "type",
                                 "object", "properties", "status", "type", "string", "stdout", "type", "string", "stderr",
                                 "type", "string", "value", "type", "string", "null", "exception", "type", "object",
                                 "null", "files", "type", "array", "required", "status", "stdout", "stderr");
        case MCP_TOOL_SESSION_WRITE_FILE:
        case MCP_TOOL_SESSION_READ_FILE:
                return json_pack("{s:s,s:{s:{s:s},s:{s:s}},s:[ss]}", "type", "object", "properties", "path", "type",
                                 "string", "size", "type", "integer", "required", "path", "size");
        case MCP_TOOL_SESSION_LIST_FILES:
                return json_pack("{s:s,s:{s:{s:s,s:{s:s,s:{s:{s:s},s:{s:s},s:{s:s}}}}},s:[s]}", "type", "object",
                                 "properties", "files", "type", "array", "items", "type", "object", "properties", "path",
                                 "type", "string", "type", "type", "string", "size", "type", "integer", "required",
                                 "files");
        case MCP_TOOL_RUN_CODE:
        case MCP_TOOL_MAX:
        default:
                return NULL;
        }
}

/* ---- arguments ------------------------------------------------------------------- */

/* "NAME: RULE", about argument name (shown safely). */
static int bad(hxs_error *err, const char *name, const char *rule)
{
        char q[64];
        utf8_lossy_copy(q, sizeof(q), name, strlen(name));
        snprintf(err->message, sizeof(err->message), "%s: %s", q, rule);
        snprintf(err->field, sizeof(err->field), "%s", q);
        err->kind = HXS_ERR_INVALID;
        err->errnum = EINVAL;
        return -EINVAL;
}

/* Unknown arguments first: a typo is not a missing argument. */
static int check_names(const json_t *args, const char *const *names, const char *list, hxs_error *err)
{
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)args, key, v) {
                bool known = false;
                for (size_t i = 0; names[i]; i++)
                        known |= strcmp(key, names[i]) == 0;
                if (!known) {
                        char rule[200];
                        snprintf(rule, sizeof(rule), "unknown argument (the arguments are %s)", list);
                        return bad(err, key, rule);
                }
        }
        return 0;
}

/* A required string argument without NUL. */
static int get_string(const json_t *args, const char *name, bool required, const char **ret, hxs_error *err)
{
        const json_t *v = json_object_get(args, name);
        *ret = NULL;
        if (!v || json_is_null(v))
                return required ? bad(err, name, "is required, a string") : 0;
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
                return bad(err, name, "must be a string without NUL");
        *ret = json_string_value(v);
        return 0;
}

static int get_seconds(const json_t *args, const char *name, uint32_t *ret, hxs_error *err)
{
        const json_t *v = json_object_get(args, name);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > UINT32_MAX)
                return bad(err, name, "must be a positive integer number of seconds");
        *ret = (uint32_t)json_integer_value(v);
        return 0;
}

/* The arguments named, copied into an exec body for hxs_request_from_json (so they are
 * validated exactly as exec's), with "code" when the body has none. */
static int request_of(const json_t *args, const char *const *keys, const hxs_config *cfg, hxs_request **ret,
                      hxs_error *err)
{
        json_t *body = json_object();
        if (!body)
                return -ENOMEM;
        for (size_t i = 0; keys[i]; i++) {
                json_t *v = json_object_get(args, keys[i]);
                if (v && json_object_set(body, keys[i], v) < 0) {
                        json_decref(body);
                        return -ENOMEM;
                }
        }
        if (!json_object_get(body, "code"))
                json_object_set_new(body, "code", json_string(""));
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!text)
                return -ENOMEM;
        int r = hxs_request_from_json(text, strlen(text), cfg, ret, err);
        free(text);
        return r < 0 && err->kind == HXS_ERR_INTERNAL ? -ENOMEM : r;
}

static int create_args(const json_t *args, const hxs_config *cfg, mcp_run *r, hxs_error *err)
{
        static const char *const names[] = { "language", "memory_mb", "packages", "files", "idle_timeout", "lifetime", NULL };
        static const char *const body[] = { "language", "memory_mb", "packages", "files", NULL };
        int ret = check_names(args, names, "language, memory_mb, packages, files, idle_timeout, lifetime", err);
        if (ret >= 0)
                ret = get_seconds(args, "idle_timeout", &r->limits.idle_timeout_s, err);
        if (ret >= 0)
                ret = get_seconds(args, "lifetime", &r->limits.lifetime_s, err);
        return ret < 0 ? ret : request_of(args, body, cfg, &r->req, err);
}

static int exec_args(const json_t *args, const hxs_config *cfg, mcp_run *r, hxs_error *err)
{
        static const char *const names[] = { "session_id", "code", "timeout", "files", "return_files", NULL };
        static const char *const body[] = { "code", "timeout", "files", "return_files", NULL };
        const char *sid;
        int ret = check_names(args, names, "session_id, code, timeout, files, return_files", err);
        if (ret >= 0)
                ret = get_string(args, "session_id", true, &sid, err);
        /* code may hold NUL as exec's may: only that it is a string is checked here */
        if (ret >= 0 && !json_is_string(json_object_get(args, "code")))
                ret = bad(err, "code", "is required, a string (the cell)");
        if (ret < 0)
                return ret;
        snprintf(r->session_id, sizeof(r->session_id), "%s", sid);
        return request_of(args, body, cfg, &r->req, err);
}

/* The path and the bytes, through exec's files rules (normalised path, sizes, base64). */
static int write_args(const json_t *args, const hxs_config *cfg, mcp_run *r, hxs_error *err)
{
        static const char *const names[] = { "session_id", "path", "content", "encoding", NULL };
        const char *sid, *path;
        int ret = check_names(args, names, "session_id, path, content, encoding", err);
        if (ret >= 0)
                ret = get_string(args, "session_id", true, &sid, err);
        if (ret >= 0)
                ret = get_string(args, "path", true, &path, err);
        if (ret < 0)
                return ret;
        const json_t *content = json_object_get(args, "content"), *enc = json_object_get(args, "encoding");
        json_t *file = json_pack("{s:s,s:O?,s:O?}", "path", path, "content", content, "encoding", enc);
        json_t *wrapped = file ? json_pack("{s:[o]}", "files", file) : NULL;
        if (!wrapped)
                return -ENOMEM;
        static const char *const body[] = { "files", NULL };
        hxs_request *req = NULL;
        ret = request_of(wrapped, body, cfg, &req, err);
        json_decref(wrapped);
        if (ret < 0) {
                /* said of this tool's arguments, not of exec's files[0] */
                if (strncmp(err->message, "files[0].", 9) == 0)
                        memmove(err->message, err->message + 9, strlen(err->message + 9) + 1);
                return ret;
        }
        snprintf(r->session_id, sizeof(r->session_id), "%s", sid);
        request_file *f = &req->files[0];
        r->path = strdup(f->path);
        r->data = f->len ? malloc(f->len) : NULL;
        if (!r->path || (f->len && !r->data)) {
                hxs_request_free(req);
                return -ENOMEM;
        }
        if (f->len)
                memcpy(r->data, f->data, f->len);
        r->len = f->len;
        hxs_request_free(req);
        return 0;
}

static int path_args(const json_t *args, bool need_path, mcp_run *r, hxs_error *err)
{
        static const char *const names[] = { "session_id", "path", NULL };
        const char *sid, *path = NULL;
        int ret = check_names(args, names, "session_id, path", err);
        if (ret >= 0)
                ret = get_string(args, "session_id", true, &sid, err);
        if (ret >= 0)
                ret = get_string(args, "path", need_path, &path, err);
        if (ret < 0)
                return ret;
        snprintf(r->session_id, sizeof(r->session_id), "%s", sid);
        r->path = strdup(path ? path : "");
        return r->path ? 0 : -ENOMEM;
}

int mcp_session_args(mcp_tool kind, const json_t *args, const hxs_config *cfg, mcp_run *r, hxs_error *err)
{
        static const json_t *none;
        if (!none)
                none = json_object();
        if (!args || json_is_null(args))
                args = none;
        switch (kind) {
        case MCP_TOOL_SESSION_CREATE:
                return create_args(args, cfg, r, err);
        case MCP_TOOL_SESSION_EXEC:
                return exec_args(args, cfg, r, err);
        case MCP_TOOL_SESSION_WRITE_FILE:
                return write_args(args, cfg, r, err);
        case MCP_TOOL_SESSION_READ_FILE:
                return path_args(args, true, r, err);
        case MCP_TOOL_SESSION_LIST_FILES:
                return path_args(args, false, r, err);
        case MCP_TOOL_SESSION_CLOSE: {
                static const char *const names[] = { "session_id", NULL };
                const char *sid;
                int ret = check_names(args, names, "session_id", err);
                if (ret >= 0)
                        ret = get_string(args, "session_id", true, &sid, err);
                if (ret >= 0)
                        snprintf(r->session_id, sizeof(r->session_id), "%s", sid);
                return ret;
        }
        case MCP_TOOL_RUN_CODE:
        case MCP_TOOL_MAX:
        default:
                return -EINVAL;
        }
}

/* ---- results --------------------------------------------------------------------- */

static bool add_text(json_t *content, const char *text)
{
        json_t *s = json_string_lossy(text, strlen(text));
        return s && mcp_content_add(content, json_pack("{s:s,s:o}", "type", "text", "text", s));
}

static json_t *tool_result(json_t *content, json_t *structured, bool failed)
{
        if (!content || !structured) {
                json_decref(content);
                json_decref(structured);
                return NULL;
        }
        return json_pack("{s:o,s:o,s:b}", "content", content, "structuredContent", structured, "isError", failed);
}

json_t *mcp_session_result_json(const hxs_session *s, const char *sid, bool closing)
{
        hxs_session_info in;
        char line[400];
        hxs_session_get_info(s, &in);
        json_t *content = json_array();
        if (closing)
                snprintf(line, sizeof(line), "session %s closed", sid);
        else if (in.state == HXS_SESSION_ENDED)
                snprintf(line, sizeof(line), "session %s ended: %s", sid, in.end_message);
        else
                snprintf(line, sizeof(line), "session %s: %s %s, %s; pass its session_id to session_exec",
                         sid, hxs_language_name(in.language), in.driver_version, hxs_session_state_name(in.state));
        if (content && !add_text(content, line)) {
                json_decref(content);
                content = NULL;
        }
        return tool_result(content, session_to_json(s, sid), !closing && in.state == HXS_SESSION_ENDED);
}

/* A mime bundle: an image block for image/png, else its text/plain (prefix before it). */
static bool add_bundle(json_t *content, const json_t *bundle, const char *prefix)
{
        const json_t *png = json_object_get(bundle, "image/png");
        if (json_is_string(png))
                return mcp_content_add(content, json_pack("{s:s,s:O,s:s}", "type", "image", "data", png, "mimeType",
                                                          "image/png"));
        const json_t *plain = json_object_get(bundle, "text/plain");
        if (!json_is_string(plain))
                return true;
        json_t *s = json_sprintf("%s%s", prefix, json_string_value(plain));
        return s && mcp_content_add(content, json_pack("{s:s,s:o}", "type", "text", "text", s));
}

static bool add_exception(json_t *content, const json_t *e)
{
        if (!json_is_object(e))
                return true;
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        const char *tb = json_string_value(json_object_get(e, "traceback"));
        json_t *s = tb && tb[0] ? json_string(tb) :
                                  json_sprintf("%s: %s", type ? type : "Exception", msg ? msg : "");
        return s && mcp_content_add(content, json_pack("{s:s,s:o}", "type", "text", "text", s));
}

json_t *mcp_cell_result_json(const hxs_cell_result *res, const hxs_session *s, const char *sid)
{
        json_t *o = cell_result_to_json(res, s, sid);
        json_t *content = json_array();
        bool ok = o && content;
        char line[400];
        size_t i;
        json_t *v;

        if (ok && res->stdout_len)
                ok = mcp_content_add(content, json_pack("{s:s,s:O}", "type", "text", "text", json_object_get(o, "stdout")));
        if (ok && res->stderr_len) {
                json_t *t = json_sprintf("stderr:\n%s", json_string_value(json_object_get(o, "stderr")));
                ok = t && mcp_content_add(content, json_pack("{s:s,s:o}", "type", "text", "text", t));
        }
        json_array_foreach(json_object_get(o, "outputs"), i, v)
                if (ok)
                        ok = add_bundle(content, json_object_get(v, "data"), "");
        if (ok && json_is_object(json_object_get(o, "value_data")))
                ok = add_bundle(content, json_object_get(o, "value_data"), "value: ");
        if (ok)
                ok = add_exception(content, json_object_get(o, "exception"));
        int n = snprintf(line, sizeof(line), "cell %" PRIu64 ": %s", res->cell, hxs_cell_status_name(res->status));
        if (res->error_type[0])
                snprintf(line + n, sizeof(line) - (size_t)n, "; %s: %s", res->error_type, res->error_message);
        ok = ok && add_text(content, line);
        json_t *files = ok ? json_object_get(o, "files") : NULL;
        for (size_t k = 0; ok && k < res->n_files; k++)
                ok = mcp_content_file(content, &res->files[k], json_array_get(files, k));
        if (!ok) {
                json_decref(o);
                json_decref(content);
                return NULL;
        }
        mcp_strip_file_contents(files);
        return tool_result(content, o, res->status != HXS_CELL_OK);
}

static bool valid_text(const unsigned char *p, size_t n)
{
        json_t *s = json_stringn((const char *)(p ? p : (const unsigned char *)""), n);
        bool ok = s != NULL && !memchr(p ? (const void *)p : "", 0, n);
        json_decref(s);
        return ok;
}

static json_t *read_result(const hxs_session_file_result *res)
{
        const char *mime = files_mime(res->path);
        json_t *content = json_array();
        json_t *st = json_pack("{s:s,s:I,s:b,s:s}", "path", res->path, "size", (json_int_t)res->size, "truncated",
                               res->truncated, "mime", mime);
        bool ok = content && st;
        if (ok && res->truncated) {
                char line[400];
                snprintf(line, sizeof(line), "%s: %" PRIu64 " bytes, larger than MAX_FILE_BYTES: not read", res->path,
                         res->size);
                ok = add_text(content, line);
        } else if (ok) {
                bool text = strncmp(mime, "image/", 6) != 0 && valid_text(res->data, res->len);
                hxs_file f = { .path = (char *)res->path, .data = res->data, .len = res->len, .size = res->size,
                               .mime = text && strncmp(mime, "text/", 5) != 0 ? "text/plain" : mime };
                json_t *fj = files_to_json(&f, 1);
                ok = fj && mcp_content_file(content, &f, json_array_get(fj, 0));
                json_decref(fj);
        }
        if (!ok) {
                json_decref(content);
                json_decref(st);
                return NULL;
        }
        return tool_result(content, st, res->truncated);
}

static json_t *list_result(const hxs_session_file_result *res)
{
        json_t *content = json_array(), *files = json_array();
        size_t cap = 64 + res->n_entries * 48, o = 0;
        char *text = malloc(cap);
        bool ok = content && files && text;
        for (size_t i = 0; ok && i < res->n_entries; i++) {
                const hxs_session_entry *e = &res->entries[i];
                json_t *p = json_string_lossy(e->path, strlen(e->path));
                ok = p && json_array_append_new(files, json_pack("{s:o,s:s,s:I}", "path", p, "type", e->type, "size",
                                                                 (json_int_t)e->size)) == 0;
                size_t need = strlen(e->path) + 40;
                if (ok && o + need >= cap) {
                        char *t = realloc(text, cap = (o + need) * 2);
                        ok = t != NULL;
                        if (t)
                                text = t;
                }
                if (ok)
                        o += (size_t)snprintf(text + o, cap - o, "%s%s\t%" PRIu64 "\t%s", o ? "\n" : "", e->type,
                                              e->size, e->path);
        }
        if (ok && !o)
                snprintf(text, cap, "(empty)");
        ok = ok && add_text(content, text);
        free(text);
        if (!ok) {
                json_decref(content);
                json_decref(files);
                return NULL;
        }
        return tool_result(content, json_pack("{s:o}", "files", files), false);
}

json_t *mcp_file_result_json(mcp_tool kind, const hxs_session_file_result *res)
{
        char line[600];
        if (res->status < 0) {
                if (res->status == -ESHUTDOWN)
                        snprintf(line, sizeof(line), "the session has ended");
                else
                        snprintf(line, sizeof(line), "%s: %s%s%s", res->path[0] ? res->path : "path",
                                 res->error_type, res->error_type[0] ? ": " : "",
                                 res->error_message[0] ? res->error_message : strerror(-res->status));
                return mcp_tool_error_result(line);
        }
        if (kind == MCP_TOOL_SESSION_WRITE_FILE) {
                json_t *content = json_array();
                snprintf(line, sizeof(line), "wrote %" PRIu64 " bytes to %s", res->size, res->path);
                if (content && !add_text(content, line)) {
                        json_decref(content);
                        content = NULL;
                }
                return tool_result(content, json_pack("{s:s,s:I}", "path", res->path, "size", (json_int_t)res->size),
                                   false);
        }
        return kind == MCP_TOOL_SESSION_READ_FILE ? read_result(res) : list_result(res);
}
