/* SPDX-License-Identifier: Apache-2.0 */
/* A session and a cell's result as the HTTP API's objects (docs/api.md, "Sessions"). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/json.h"
#include "session/session-json.h"
#include "session/session.h"

void session_time_text(int64_t t, char *buf, size_t size)
{
        time_t tt = (time_t)t;
        struct tm tm;
        gmtime_r(&tt, &tm);
        strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *time_json(int64_t t)
{
        char buf[32];
        if (!t)
                return json_null();
        session_time_text(t, buf, sizeof(buf));
        return json_string(buf);
}

static json_t *text_or_null(const char *s)
{
        return s && s[0] ? json_string_lossy(s, strlen(s)) : json_null();
}

json_t *session_to_json(const hxs_session *s, const char *id)
{
        hxs_session_info in;
        hxs_session_get_info(s, &in);
        return json_pack("{s:o, s:s, s:s, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:o, s:o}",
                         "id", text_or_null(id), "language", hxs_language_name(in.language),
                         "state", hxs_session_state_name(in.state), "created_at", time_json(in.created_at),
                         "expires_at", time_json(in.expires_at), "idle_expires_at", time_json(in.idle_expires_at),
                         "memory_mb", (json_int_t)in.memory_mb, "cells", (json_int_t)in.cells,
                         "idle_timeout", (json_int_t)in.idle_timeout_s, "lifetime", (json_int_t)in.lifetime_s,
                         "ended_reason", text_or_null(hxs_session_end_name(in.end)),
                         "ended_message", text_or_null(in.end ? in.end_message : NULL));
}

/* Our own JSON text back to a value (NULL and bad text: null, or [] for a list). */
static json_t *parsed(const char *text, bool list)
{
        json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
        if (!v)
                v = list ? json_array() : json_null();
        return v;
}

static json_t *error_json(const hxs_cell_result *res)
{
        if (!res->error_type[0])
                return json_null();
        return json_pack("{s:s, s:o}", "type", res->error_type, "message", text_or_null(res->error_message));
}

json_t *cell_result_to_json(const hxs_cell_result *res, const hxs_session *s, const char *id)
{
        json_t *value = parsed(res->value_json, false);
        json_t *plain = json_is_object(value) ? json_object_get(value, "text/plain") : NULL;
        char cell_id[32];
        snprintf(cell_id, sizeof(cell_id), "%" PRIu64, res->cell);
        json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:b, s:b, s:I, s:I, s:I, s:O, s:o, s:o, s:o, s:o, s:o}",
                              "id", cell_id, "status", hxs_cell_status_name(res->status),
                              "stdout", json_string_lossy(res->stdout_data ? res->stdout_data : "", res->stdout_len),
                              "stderr", json_string_lossy(res->stderr_data ? res->stderr_data : "", res->stderr_len),
                              "stdout_truncated", res->stdout_truncated, "stderr_truncated", res->stderr_truncated,
                              "stdout_omitted_bytes", (json_int_t)res->stdout_omitted,
                              "stderr_omitted_bytes", (json_int_t)res->stderr_omitted,
                              "execution_time_ms", (json_int_t)res->execution_time_ms,
                              "value", json_is_string(plain) ? plain : json_null(),
                              "value_data", value,
                              "outputs", parsed(res->outputs_json, true),
                              "exception", parsed(res->exception_json, false),
                              "error", error_json(res),
                              "files", files_to_json(res->files, res->n_files));
        if (o && s)
                json_object_set_new(o, "session", session_to_json(s, id));
        return o;
}

static char *to_text(json_t *v, size_t *ret_len)
{
        char *t = v ? json_dumps(v, JSON_COMPACT) : NULL;
        json_decref(v);
        if (t && ret_len)
                *ret_len = strlen(t);
        return t;
}

char *hxs_session_to_text(const hxs_session *s, const char *id, size_t *ret_len)
{
        return to_text(session_to_json(s, id), ret_len);
}

char *hxs_cell_result_to_text(const hxs_cell_result *res, const hxs_session *s, const char *id, size_t *ret_len)
{
        return to_text(cell_result_to_json(res, s, id), ret_len);
}
