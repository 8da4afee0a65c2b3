/* SPDX-License-Identifier: Apache-2.0 */
/* MCP content blocks every tool's result is made of: text, the exit status line, an
 * image per returned image, an embedded resource per other returned file; and the
 * API's files objects reduced to metadata for structuredContent. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/macro.h"
#include "engine/json.h"
#include "mcp/mcp-int.h"

bool mcp_content_add(json_t *content, json_t *block)
{
        return block && json_array_append_new(content, block) == 0;
}

/* "exit status 1", then why the engine ended it and what was left out. */
bool mcp_content_status(json_t *content, const hxs_result *res)
{
        char line[600];
        int n = snprintf(line, sizeof(line), "exit status %d", res->exit_code);
        if (res->end != HXS_END_EXITED)
                n += snprintf(line + n, sizeof(line) - (size_t)n, "; %s: %.*s", hxs_end_reason_name(res->end),
                              (int)strnlen(res->end_message, sizeof(res->end_message)), res->end_message);
        if (res->stdout_truncated)
                n += snprintf(line + n, sizeof(line) - (size_t)n, "; stdout: %" PRIu64 " bytes left out",
                              res->stdout_omitted);
        if (res->stderr_truncated)
                snprintf(line + n, sizeof(line) - (size_t)n, "; stderr: %" PRIu64 " bytes left out",
                         res->stderr_omitted);
        json_t *s = json_string_lossy(line, strlen(line));
        return s && mcp_content_add(content, json_pack("{s:s,s:o}", "type", "text", "text", s));
}

bool mcp_is_image(const char *mime)
{
        return strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0 ||
               strcmp(mime, "image/gif") == 0 || strcmp(mime, "image/webp") == 0;
}

/* file:///home/sandbox/PATH with every byte but unreserved ones and '/' escaped. */
json_t *mcp_file_uri(const char *path)
{
        static const char hex[] = "0123456789ABCDEF";
        static const char prefix[] = "file:///home/sandbox/";
        size_t n = strlen(path);
        _cleanup_free_ char *u = malloc(sizeof(prefix) + 3 * n);
        if (!u)
                return NULL;
        size_t o = strlen(prefix);
        memcpy(u, prefix, o);
        for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                    strchr("-._~/", *p))
                        u[o++] = (char)*p;
                else {
                        u[o++] = '%';
                        u[o++] = hex[*p >> 4];
                        u[o++] = hex[*p & 15];
                }
        }
        u[o] = '\0';
        return json_string(u);
}

/* One returned file: an image block, an embedded resource (text or blob), or a note
 * that it was over the return budget. fj is its object in the API's result (path,
 * mime, encoding, content). */
bool mcp_content_file(json_t *content, const hxs_file *f, const json_t *fj)
{
        const json_t *data = json_object_get(fj, "content");
        bool text = strcmp(json_string_value(json_object_get(fj, "encoding")), "utf-8") == 0;
        if (f->truncated) {
                json_t *s = json_sprintf("%s: %" PRIu64 " bytes, over the return budget (MAX_RETURN_BYTES): not returned",
                                         json_string_value(json_object_get(fj, "path")), f->size);
                return s && mcp_content_add(content, json_pack("{s:s,s:o}", "type", "text", "text", s));
        }
        if (mcp_is_image(f->mime))
                return mcp_content_add(content, json_pack("{s:s,s:O,s:s}", "type", "image", "data", data, "mimeType", f->mime));
        return mcp_content_add(content, json_pack("{s:s,s:{s:o,s:s,s:O}}", "type", "resource", "resource", "uri",
                                      mcp_file_uri(f->path), "mimeType", f->mime, text ? "text" : "blob", data));
}

/* The API's result object without the files' contents: what structuredContent holds. */
void mcp_strip_file_contents(json_t *files)
{
        size_t i;
        json_t *f;
        json_array_foreach(files, i, f) {
                json_object_del(f, "content");
                json_object_del(f, "encoding");
        }
}
