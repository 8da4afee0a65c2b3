/* SPDX-License-Identifier: Apache-2.0 */
/* The recent executions behind GET /api/v1/executions/{id} (records.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hexr-sandbox/sandbox.h"
#include "server/call.h"

/* The ring (records.c's own). */
typedef struct records records;

/* One recent execution. */
typedef struct exec_record {
        char id[33];                    /* "" = free slot */
        char *caller;
        hxs_language language;
        const char *outcome;            /* static */
        const char *error_code;         /* static or NULL */
        bool ran;                       /* the fields below are set */
        int exit_code, signal;
        bool timed_out, oom_killed, stdout_truncated, stderr_truncated;
        uint64_t execution_time_ms, memory_used_mb, stdout_bytes, stderr_bytes, queue_ms;
        int64_t finished_unix_ms;
} exec_record;

/* A ring of n records (EXECUTION_RECORDS; 0 keeps none). */
int records_new(uint32_t n, records **ret);
void records_free(records *rs);         /* NULL is fine */
/* c's execution ended: res is NULL when it did not run. NULL rs keeps nothing. */
void records_add(records *rs, const call *c, const hxs_result *res, const char *outcome_text,
                 const char *error_code);
/* The record of id, if caller made it; NULL otherwise (another caller's too). */
const exec_record *records_find(const records *rs, const char *id, const char *caller);
char *records_to_json(const exec_record *r, size_t *ret_len);
