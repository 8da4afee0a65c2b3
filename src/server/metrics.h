/* SPDX-License-Identifier: Apache-2.0 */
/* The service's counters (metrics.c) and their Prometheus text. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hexr-sandbox/sandbox.h"
#include "server/call.h"

/* Execution outcomes, as counted in hexr_sandbox_executions_total. */
typedef enum outcome {
        OUTCOME_OK,            /* exit 0 */
        OUTCOME_ERROR,         /* non-zero exit status */
        OUTCOME_TIMEOUT,       /* time limit */
        OUTCOME_OOM,           /* memory limit */
        OUTCOME_KILLED,        /* ended by a signal: its own, a client gone, a drain */
        OUTCOME_SETUP_FAILED,  /* the sandbox could not be set up */
        OUTCOME_MAX,
} outcome;

/* Why a request was turned away, as counted in hexr_sandbox_rejected_requests_total. */
typedef enum reject_reason {
        REJECT_INVALID,         /* 400 */
        REJECT_TOO_LARGE,       /* 413 */
        REJECT_MEDIA_TYPE,      /* 415 */
        REJECT_NOT_FOUND,       /* 422: a package that does not exist */
        REJECT_OVERLOADED,      /* 429: no slot and the queue is full */
        REJECT_QUEUE_TIMEOUT,   /* 429: waited QUEUE_TIMEOUT for a slot */
        REJECT_DRAINING,        /* 503 */
        REJECT_FORBIDDEN,       /* 403: no identity, or one AUTH_ALLOW does not list */
        REJECT_QUOTA,           /* 429: the caller's own quota */
        REJECT_REASON_MAX,
} reject_reason;

/* Why conn.c turned a connection away, as counted in hexr_sandbox_connections_closed_total. */
typedef enum conn_cut {
        CONN_CUT_ADDRESS_LIMIT, /* refused: its address holds MAX_CONNECTIONS_PER_ADDRESS */
        CONN_CUT_REPLACED,      /* fresh, replaced by a newer connection */
        CONN_CUT_HANDSHAKE,     /* no request line within HANDSHAKE_TIMEOUT */
        CONN_CUT_REQUEST,       /* no whole request within REQUEST_READ_TIMEOUT_S */
        CONN_CUT_MAX,
} conn_cut;

/* Distinct (method, tool) pairs of MCP messages counted: src/mcp names fewer. */
#define METRICS_MCP_LABELS 16

typedef struct metrics {
        uint64_t executions[HXS_LANG_MAX][OUTCOME_MAX];
        uint64_t rejected[REJECT_REASON_MAX];
        uint64_t duration_buckets[16];  /* cumulative counts per le bound */
        uint64_t duration_count;
        double duration_sum_s;
        uint64_t http[ROUTE_MAX][600];  /* by status code */
        /* per caller label: [METRICS_CALLERS + 1], the last is "other" (callers.c) */
        char **caller_labels;
        uint32_t n_caller_labels;
        uint32_t caller_other;          /* index of "other": METRICS_CALLERS */
        uint64_t (*caller_executions)[OUTCOME_MAX];
        uint64_t *caller_rejected;      /* quota */
        uint64_t packages[HXS_PACKAGES_SOURCE_MAX]; /* executions with packages=, by where they came from */
        /* time from the whole request to its sandbox starting (autoscaling) */
        uint64_t queue_wait_buckets[16];
        uint64_t queue_wait_count;
        double queue_wait_sum_s;
        uint64_t connections_cut[CONN_CUT_MAX];
        /* MCP messages by (method, tool): static labels from src/mcp, a bounded set */
        const char *mcp_method[METRICS_MCP_LABELS], *mcp_tool[METRICS_MCP_LABELS];
        uint64_t mcp_calls[METRICS_MCP_LABELS];
} metrics;

void metrics_execution(metrics *m, hxs_language lang, outcome o, uint64_t duration_ms);
void metrics_caller_execution(metrics *m, int label, outcome o);
void metrics_caller_quota(metrics *m, int label);
void metrics_reject(metrics *m, reject_reason r);
void metrics_connection_cut(metrics *m, conn_cut why);
void metrics_http(metrics *m, route rt, unsigned status);
/* An MCP message on /mcp: method and tool (NULL: none) are static strings of src/mcp. */
void metrics_mcp(metrics *m, const char *method, const char *tool);
void metrics_queue_wait(metrics *m, uint64_t wait_ms);  /* a sandbox is starting */
/* What /metrics shows besides the counters, read from the modules when it is asked
 * for. */
typedef struct metrics_gauges {
        uint32_t active, queued;                /* executions running, requests waiting */
        uint32_t max_concurrent, max_queue;
        bool draining;
        double oldest_wait_s;                   /* of the oldest waiting request; 0: none */
        hxs_engine_stats engine;
        uint32_t conns_fresh, conns_established, conns_lingering; /* conn_stats */
        uint64_t upload_staged, upload_staging_max; /* bytes; UPLOAD_STAGING_BYTES */
} metrics_gauges;

/* The Prometheus text (format 0.0.4); NULL on allocation failure. */
char *metrics_render(const metrics *m, const metrics_gauges *g, size_t *ret_len);
outcome outcome_of(const hxs_result *res);
const char *outcome_name(outcome o);
