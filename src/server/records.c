/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The last EXECUTION_RECORDS executions, in a ring: who asked, what ran and how it
 * ended, never the code or the output. GET /api/v1/executions/{id} serves a record to
 * the caller that made it, and to nobody else (404 for others, so an id is not an
 * oracle for what another caller ran).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/call.h"
#include "server/records.h"

struct records {
        uint32_t n, next;
        exec_record r[];
};

int records_new(uint32_t n, records **ret)
{
        records *rs = calloc(1, sizeof(*rs) + (size_t)n * sizeof(rs->r[0]));
        if (!rs)
                return -ENOMEM;
        rs->n = n;
        *ret = rs;
        return 0;
}

void records_free(records *rs)
{
        if (!rs)
                return;
        for (uint32_t i = 0; i < rs->n; i++)
                free(rs->r[i].caller);
        free(rs);
}

void records_add(records *rs, const call *c, const hxs_result *res, const char *outcome_text,
                 const char *error_code)
{
        struct timespec ts;

        if (!rs || !rs->n)
                return;
        exec_record *r = &rs->r[rs->next];
        rs->next = (rs->next + 1) % rs->n;
        free(r->caller);
        memset(r, 0, sizeof(*r));
        r->caller = strdup(c->caller);
        if (!r->caller)
                return; /* the slot stays free */
        memcpy(r->id, c->id, sizeof(r->id));
        r->language = c->language;
        r->outcome = outcome_text;
        r->error_code = error_code;
        if (c->started_ms && c->received_ms && c->started_ms >= c->received_ms)
                r->queue_ms = c->started_ms - c->received_ms;
        clock_gettime(CLOCK_REALTIME, &ts);
        r->finished_unix_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        if (res) {
                r->ran = true;
                r->exit_code = res->exit_code;
                r->signal = res->signal;
                r->timed_out = res->timed_out;
                r->oom_killed = res->oom_killed;
                r->stdout_truncated = res->stdout_truncated;
                r->stderr_truncated = res->stderr_truncated;
                r->execution_time_ms = res->execution_time_ms;
                r->memory_used_mb = res->memory_used_mb;
                r->stdout_bytes = res->stdout_len;
                r->stderr_bytes = res->stderr_len;
        }
}

const exec_record *records_find(const records *rs, const char *id, const char *caller)
{
        for (uint32_t i = 0; rs && i < rs->n; i++) {
                const exec_record *r = &rs->r[i];
                if (r->id[0] && r->caller && strcmp(r->id, id) == 0)
                        return strcmp(r->caller, caller) == 0 ? r : NULL;
        }
        return NULL;
}

static void iso8601(int64_t unix_ms, char *buf, size_t cap)
{
        time_t t = (time_t)(unix_ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, cap - n, ".%03dZ", (int)(unix_ms % 1000));
}

char *records_to_json(const exec_record *r, size_t *ret_len)
{
        char finished[40];

        iso8601(r->finished_unix_ms, finished, sizeof(finished));
        json_t *o = json_pack("{s:s,s:s*,s:s,s:s,s:s,s:I}", "id", r->id, "caller",
                              r->caller[0] ? r->caller : NULL, "language",
                              hxs_language_name(r->language), "outcome", r->outcome,
                              "finished_at", finished, "queue_ms", (json_int_t)r->queue_ms);
        if (!o)
                return NULL;
        if (!r->caller[0])
                json_object_set_new(o, "caller", json_null());
        if (r->error_code)
                json_object_set_new(o, "error", json_string(r->error_code));
        if (r->ran) {
                json_t *x = json_pack("{s:i,s:o,s:b,s:b,s:I,s:I,s:I,s:I,s:b,s:b}", "exit_code",
                                      r->exit_code, "signal",
                                      r->signal ? json_integer(r->signal) : json_null(),
                                      "timed_out", r->timed_out, "oom_killed", r->oom_killed,
                                      "execution_time_ms", (json_int_t)r->execution_time_ms,
                                      "memory_used_mb", (json_int_t)r->memory_used_mb,
                                      "stdout_bytes", (json_int_t)r->stdout_bytes, "stderr_bytes",
                                      (json_int_t)r->stderr_bytes, "stdout_truncated",
                                      r->stdout_truncated, "stderr_truncated", r->stderr_truncated);
                if (!x || json_object_update(o, x) < 0) {
                        json_decref(x);
                        json_decref(o);
                        return NULL;
                }
                json_decref(x);
        }
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (text)
                *ret_len = strlen(text);
        return text;
}
