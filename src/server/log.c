/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's log: one JSON object per line on stderr. One line per execution
 * request (what ran, for whom, how it ended) and a few for the service's own events.
 * Never the code, stdin or env values: those are the caller's data.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/json.h"
#include "server/call.h"
#include "server/log.h"

static void timestamp(char *buf, size_t cap)
{
        struct timespec ts;
        struct tm tm;

        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

static void emit(json_t *o)
{
        char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (line) {
                /* One write per line, so lines of concurrent writers do not interleave. */
                size_t n = strlen(line);
                line[n] = '\n';
                (void)fwrite(line, 1, n + 1, stderr);
                free(line);
        }
        json_decref(o);
}

static json_t *start_line(const char *event)
{
        char ts[40];
        timestamp(ts, sizeof(ts));
        return json_pack("{s:s,s:s}", "ts", ts, "event", event);
}

void log_line(const char *event, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        json_t *o = start_line(event);
        if (o)
                json_object_set_new(o, "message", json_string_lossy(msg, strlen(msg)));
        emit(o);
}

void log_call(const call *c, const hxs_result *res, const char *outcome_text,
              const char *error_code)
{
        json_t *o = start_line("exec");
        if (!o)
                return;
        json_object_set_new(o, "id", json_string(c->id));
        if (c->caller[0])
                json_object_set_new(o, "caller", json_string(c->caller));
        json_object_set_new(o, "route", json_string(c->route == ROUTE_EXECUTE ? "/execute" :
                                                    c->route == ROUTE_MCP ? "/mcp" : "/api/v1/exec"));
        if (c->status)
                json_object_set_new(o, "status", json_integer(c->status));
        if (c->parsed) {
                json_object_set_new(o, "language", json_string(hxs_language_name(c->language)));
                json_object_set_new(o, "timeout", json_integer(c->timeout_s));
                json_object_set_new(o, "memory_mb", json_integer(c->memory_mb));
                json_object_set_new(o, "code_bytes", json_integer((json_int_t)c->code_bytes));
        }
        json_object_set_new(o, "outcome", json_string(outcome_text));
        if (!error_code && c->status != 200)
                error_code = c->error_code;
        if (error_code)
                json_object_set_new(o, "error", json_string(error_code));
        if (res) {
                json_object_set_new(o, "exit_code", json_integer(res->exit_code));
                if (res->signal)
                        json_object_set_new(o, "signal", json_integer(res->signal));
                json_object_set_new(o, "execution_time_ms",
                                    json_integer((json_int_t)res->execution_time_ms));
                json_object_set_new(o, "memory_used_mb", json_integer((json_int_t)res->memory_used_mb));
                json_object_set_new(o, "start", json_string(res->warm ? "warm" : res->pooled ? "pooled" : "cold"));
                if (res->packages != HXS_PACKAGES_NONE)
                        json_object_set_new(o, "packages", json_string(hxs_packages_source_name(res->packages)));
                if (res->stdout_truncated || res->stderr_truncated)
                        json_object_set_new(o, "output_truncated", json_true());
        }
        if (c->started_ms && c->received_ms && c->started_ms >= c->received_ms)
                json_object_set_new(o, "queue_ms", json_integer((json_int_t)(c->started_ms - c->received_ms)));
        emit(o);
}
