/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Counters kept by the loop and their Prometheus text exposition (format 0.0.4),
 * written by hand: there is no C client library worth a dependency for six families.
 * Every label combination of the fixed families is always present, so a dashboard
 * sees zeros rather than gaps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/metrics.h"

static const char *const outcome_names[OUTCOME_MAX] = {
        [OUTCOME_OK] = "ok",
        [OUTCOME_ERROR] = "error",
        [OUTCOME_TIMEOUT] = "timeout",
        [OUTCOME_OOM] = "oom",
        [OUTCOME_KILLED] = "killed",
        [OUTCOME_SETUP_FAILED] = "setup_failed",
};

static const char *const reject_names[REJECT_REASON_MAX] = {
        [REJECT_INVALID] = "invalid_request",
        [REJECT_TOO_LARGE] = "too_large",
        [REJECT_MEDIA_TYPE] = "unsupported_media_type",
        [REJECT_NOT_FOUND] = "not_found",
        [REJECT_OVERLOADED] = "overloaded",
        [REJECT_QUEUE_TIMEOUT] = "queue_timeout",
        [REJECT_DRAINING] = "draining",
        [REJECT_FORBIDDEN] = "forbidden",
        [REJECT_QUOTA] = "quota_exceeded",
};

static const char *const route_labels[ROUTE_MAX] = {
        [ROUTE_EXEC] = "/api/v1/exec",
        [ROUTE_EXECUTE] = "/execute",
        [ROUTE_HEALTH] = "/health",
        [ROUTE_METRICS] = "/metrics",
        [ROUTE_EXECUTIONS] = "/api/v1/executions/{id}",
        [ROUTE_RUNTIMES] = "/api/v1/runtimes",
        [ROUTE_SESSIONS] = "/api/v1/sessions",
        [ROUTE_MCP] = "/mcp",
        [ROUTE_OTHER] = "other",
};

/* Upper bounds of the duration histogram, in seconds (+Inf is implicit). */
static const double duration_bounds[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300 };
_Static_assert(sizeof(duration_bounds) / sizeof(duration_bounds[0]) <=
                       sizeof(((metrics *)0)->duration_buckets) / sizeof(uint64_t),
               "histogram buckets");

/* Upper bounds of the queue wait histogram, in seconds: most requests start at once. */
static const double queue_wait_bounds[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 };
_Static_assert(sizeof(queue_wait_bounds) / sizeof(queue_wait_bounds[0]) <=
                       sizeof(((metrics *)0)->queue_wait_buckets) / sizeof(uint64_t),
               "queue wait buckets");

#define N_BOUNDS(b) (sizeof(b) / sizeof((b)[0]))

/* One observation of s seconds in a histogram with these upper bounds. */
static void observe(const double *bounds, size_t n, uint64_t *buckets, uint64_t *count, double *sum, double s)
{
        for (size_t i = 0; i < n; i++)
                if (s <= bounds[i]) {
                        buckets[i]++;
                        break;
                }
        (*count)++;
        *sum += s;
}

static void render_histogram(FILE *f, const char *name, const double *bounds, size_t n, const uint64_t *buckets,
                             uint64_t count, double sum)
{
        uint64_t cumulative = 0;
        for (size_t i = 0; i < n; i++) {
                cumulative += buckets[i];
                fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cumulative);
        }
        fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)count);
        fprintf(f, "%s_sum %.6f\n", name, sum);
        fprintf(f, "%s_count %llu\n", name, (unsigned long long)count);
}

const char *outcome_name(outcome o)
{
        return (unsigned)o < OUTCOME_MAX ? outcome_names[o] : "unknown";
}

outcome outcome_of(const hxs_result *res)
{
        if (res->timed_out)
                return OUTCOME_TIMEOUT;
        if (res->oom_killed)
                return OUTCOME_OOM;
        if (res->signal)
                return OUTCOME_KILLED;
        return res->exit_code == 0 ? OUTCOME_OK : OUTCOME_ERROR;
}

void metrics_execution(metrics *m, hxs_language lang, outcome o, uint64_t duration_ms)
{
        if ((unsigned)lang >= HXS_LANG_MAX || (unsigned)o >= OUTCOME_MAX)
                return;
        m->executions[lang][o]++;
        if (o == OUTCOME_SETUP_FAILED)
                return; /* nothing ran: no duration */
        observe(duration_bounds, N_BOUNDS(duration_bounds), m->duration_buckets, &m->duration_count,
                &m->duration_sum_s, (double)duration_ms / 1000.0);
}

/* label: from callers.c; out of range counts as "other" (the last slot). */
static uint32_t label_slot(const metrics *m, int label)
{
        return label >= 0 && (uint32_t)label < m->n_caller_labels ? (uint32_t)label : UINT32_MAX;
}

void metrics_caller_execution(metrics *m, int label, outcome o)
{
        if (!m->caller_executions || (unsigned)o >= OUTCOME_MAX)
                return;
        uint32_t i = label_slot(m, label);
        m->caller_executions[i == UINT32_MAX ? m->caller_other : i][o]++;
}

void metrics_caller_quota(metrics *m, int label)
{
        if (!m->caller_rejected)
                return;
        uint32_t i = label_slot(m, label);
        m->caller_rejected[i == UINT32_MAX ? m->caller_other : i]++;
}

void metrics_reject(metrics *m, reject_reason r)
{
        if ((unsigned)r < REJECT_REASON_MAX)
                m->rejected[r]++;
}

void metrics_queue_wait(metrics *m, uint64_t wait_ms)
{
        observe(queue_wait_bounds, N_BOUNDS(queue_wait_bounds), m->queue_wait_buckets, &m->queue_wait_count,
                &m->queue_wait_sum_s, (double)wait_ms / 1000.0);
}

void metrics_connection_cut(metrics *m, conn_cut why)
{
        if ((unsigned)why < CONN_CUT_MAX)
                m->connections_cut[why]++;
}

static const char *const cut_names[CONN_CUT_MAX] = {
        [CONN_CUT_ADDRESS_LIMIT] = "address_limit",
        [CONN_CUT_REPLACED] = "replaced",
        [CONN_CUT_HANDSHAKE] = "handshake_timeout",
        [CONN_CUT_REQUEST] = "request_timeout",
};

void metrics_http(metrics *m, route rt, unsigned status)
{
        if ((unsigned)rt < ROUTE_MAX && status < 600)
                m->http[rt][status]++;
}

void metrics_mcp(metrics *m, const char *method, const char *tool)
{
        if (!tool)
                tool = "";
        for (size_t i = 0; i < METRICS_MCP_LABELS; i++) {
                if (!m->mcp_method[i]) {
                        m->mcp_method[i] = method;
                        m->mcp_tool[i] = tool;
                }
                if (strcmp(m->mcp_method[i], method) == 0 && strcmp(m->mcp_tool[i], tool) == 0) {
                        m->mcp_calls[i]++;
                        return;
                }
        }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* What an autoscaler needs: slots in use and in all (above), the queue's length, room
 * and age, and how long requests waited for a slot. */
static void render_queue(FILE *f, const metrics *m, const metrics_gauges *g)
{
        family(f, "hexr_sandbox_max_queued_executions", "gauge",
               "Requests that may wait for a slot before 429 (MAX_QUEUE).");
        fprintf(f, "hexr_sandbox_max_queued_executions %u\n", g->max_queue);
        family(f, "hexr_sandbox_queue_oldest_wait_seconds", "gauge",
               "How long the oldest waiting request has waited for a slot (0: none waits).");
        fprintf(f, "hexr_sandbox_queue_oldest_wait_seconds %.3f\n", g->oldest_wait_s);
        family(f, "hexr_sandbox_queue_wait_seconds", "histogram",
               "Time from a whole request to its sandbox starting, in seconds (0 when a slot was free).");
        render_histogram(f, "hexr_sandbox_queue_wait_seconds", queue_wait_bounds, N_BOUNDS(queue_wait_bounds),
                         m->queue_wait_buckets, m->queue_wait_count, m->queue_wait_sum_s);
}

char *metrics_render(const metrics *m, const metrics_gauges *g, size_t *ret_len)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return NULL;

        family(f, "hexr_sandbox_executions_total", "counter",
               "Executions that ended, by language and outcome (ok: exit 0, error: non-zero exit, timeout, oom, killed: ended by a signal, setup_failed: the sandbox could not be set up).");
        for (int l = 0; l < HXS_LANG_MAX; l++)
                for (int o = 0; o < OUTCOME_MAX; o++)
                        fprintf(f, "hexr_sandbox_executions_total{language=\"%s\",outcome=\"%s\"} %llu\n",
                                hxs_language_name((hxs_language)l), outcome_names[o],
                                (unsigned long long)m->executions[l][o]);

        family(f, "hexr_sandbox_execution_duration_seconds", "histogram",
               "Wall time of executions that ran, in seconds.");
        render_histogram(f, "hexr_sandbox_execution_duration_seconds", duration_bounds, N_BOUNDS(duration_bounds),
                         m->duration_buckets, m->duration_count, m->duration_sum_s);

        family(f, "hexr_sandbox_active_executions", "gauge", "Executions running now.");
        fprintf(f, "hexr_sandbox_active_executions %u\n", g->active);
        family(f, "hexr_sandbox_queued_executions", "gauge", "Requests waiting for an execution slot.");
        fprintf(f, "hexr_sandbox_queued_executions %u\n", g->queued);
        family(f, "hexr_sandbox_max_concurrent_executions", "gauge",
               "Execution slots (MAX_CONCURRENT).");
        fprintf(f, "hexr_sandbox_max_concurrent_executions %u\n", g->max_concurrent);
        family(f, "hexr_sandbox_draining", "gauge", "1 while the service drains after SIGTERM, else 0.");
        fprintf(f, "hexr_sandbox_draining %d\n", g->draining ? 1 : 0);
        render_queue(f, m, g);
        family(f, "hexr_sandbox_upload_staged_bytes", "gauge",
               "Bytes of multipart uploads staged under STATE_DIR now, for requests not yet ended.");
        fprintf(f, "hexr_sandbox_upload_staged_bytes %llu\n", (unsigned long long)g->upload_staged);
        family(f, "hexr_sandbox_upload_staging_max_bytes", "gauge",
               "Bytes uploads may stage at once before 429 (UPLOAD_STAGING_BYTES).");
        fprintf(f, "hexr_sandbox_upload_staging_max_bytes %llu\n", (unsigned long long)g->upload_staging_max);

        const hxs_engine_stats *st = &g->engine;
        family(f, "hexr_sandbox_warm_enabled", "gauge",
               "1 when Python starts from warm templates (SANDBOX_WARM and they could start), else 0.");
        fprintf(f, "hexr_sandbox_warm_enabled %d\n", st->warm_enabled ? 1 : 0);
        family(f, "hexr_sandbox_warm_templates_ready", "gauge", "Warm templates ready to clone now.");
        fprintf(f, "hexr_sandbox_warm_templates_ready %u\n", st->templates_ready);
        family(f, "hexr_sandbox_warm_templates", "gauge", "Warm templates kept by the engine.");
        fprintf(f, "hexr_sandbox_warm_templates %u\n", st->templates_total);
        family(f, "hexr_sandbox_warm_template_restarts_total", "counter",
               "Warm templates restarted since the service started.");
        fprintf(f, "hexr_sandbox_warm_template_restarts_total %lu\n", st->template_restarts);
        family(f, "hexr_sandbox_vm_pool_ready", "gauge", "Booted microVMs waiting for an execution.");
        fprintf(f, "hexr_sandbox_vm_pool_ready %u\n", st->vm_pool_ready);
        family(f, "hexr_sandbox_vm_pool_target", "gauge",
               "Booted microVMs the pool keeps (VM_POOL_SIZE within VM_POOL_MEMORY_MB; 0 for namespaces).");
        fprintf(f, "hexr_sandbox_vm_pool_target %u\n", st->vm_pool_target);
        family(f, "hexr_sandbox_vm_pool_boots_total", "counter", "MicroVMs the pool has booted to a ready agent.");
        fprintf(f, "hexr_sandbox_vm_pool_boots_total %lu\n", st->vm_booted);
        family(f, "hexr_sandbox_vm_pool_boot_failures_total", "counter",
               "Pool boots that did not reach a ready agent.");
        fprintf(f, "hexr_sandbox_vm_pool_boot_failures_total %lu\n", st->vm_boot_failures);

        family(f, "hexr_sandbox_packages_total", "counter",
               "Executions that asked for packages, by where they came from (image: all in the image; cached: an installed set from the package cache; installed: installed for this execution).");
        for (int p = HXS_PACKAGES_IMAGE; p < HXS_PACKAGES_SOURCE_MAX; p++)
                fprintf(f, "hexr_sandbox_packages_total{source=\"%s\"} %llu\n",
                        hxs_packages_source_name((hxs_packages_source)p), (unsigned long long)m->packages[p]);

        family(f, "hexr_sandbox_rejected_requests_total", "counter",
               "Execution requests turned away before running, by reason.");
        for (int r = 0; r < REJECT_REASON_MAX; r++)
                fprintf(f, "hexr_sandbox_rejected_requests_total{reason=\"%s\"} %llu\n",
                        reject_names[r], (unsigned long long)m->rejected[r]);

        if (m->caller_executions && m->caller_rejected) {
                /* Bounded: METRICS_CALLERS labels, then "other". */
                family(f, "hexr_sandbox_caller_executions_total", "counter",
                       "Executions that ended, by caller (SPIFFE ID; anonymous without identities; other past METRICS_CALLERS) and outcome.");
                for (uint32_t i = 0; i <= m->n_caller_labels; i++) {
                        uint32_t slot = i == m->n_caller_labels ? m->caller_other : i;
                        const char *name = i == m->n_caller_labels ? "other" : m->caller_labels[i];
                        for (int o = 0; o < OUTCOME_MAX; o++)
                                fprintf(f, "hexr_sandbox_caller_executions_total{caller=\"%s\",outcome=\"%s\"} %llu\n",
                                        name, outcome_names[o],
                                        (unsigned long long)m->caller_executions[slot][o]);
                }
                family(f, "hexr_sandbox_caller_quota_rejections_total", "counter",
                       "Requests turned away by the caller's own quota (429 quota_exceeded), by caller.");
                for (uint32_t i = 0; i <= m->n_caller_labels; i++) {
                        uint32_t slot = i == m->n_caller_labels ? m->caller_other : i;
                        const char *name = i == m->n_caller_labels ? "other" : m->caller_labels[i];
                        fprintf(f, "hexr_sandbox_caller_quota_rejections_total{caller=\"%s\"} %llu\n",
                                name, (unsigned long long)m->caller_rejected[slot]);
                }
        }

        uint32_t fresh = g->conns_fresh, established = g->conns_established, lingering = g->conns_lingering;
        family(f, "hexr_sandbox_connections", "gauge",
               "Open HTTP connections: new (no request line yet) and established (at least one request line).");
        fprintf(f, "hexr_sandbox_connections{state=\"new\"} %u\n", fresh);
        fprintf(f, "hexr_sandbox_connections{state=\"established\"} %u\n", established);
        family(f, "hexr_sandbox_lingering_connections", "gauge",
               "Closed connections whose client is still sending: read and dropped so it can read its reply.");
        fprintf(f, "hexr_sandbox_lingering_connections %u\n", lingering);
        family(f, "hexr_sandbox_connections_closed_total", "counter",
               "Connections turned away before or while reading a request, by reason (address_limit: refused at MAX_CONNECTIONS_PER_ADDRESS; replaced: a new connection took the slot of one that had sent no request line; handshake_timeout; request_timeout).");
        for (int i = 0; i < CONN_CUT_MAX; i++)
                fprintf(f, "hexr_sandbox_connections_closed_total{reason=\"%s\"} %llu\n", cut_names[i],
                        (unsigned long long)m->connections_cut[i]);

        family(f, "hexr_sandbox_http_requests_total", "counter",
               "HTTP responses, by route and status (499: the client went away first).");
        for (int rt = 0; rt < ROUTE_MAX; rt++)
                for (unsigned s = 100; s < 600; s++)
                        if (m->http[rt][s])
                                fprintf(f, "hexr_sandbox_http_requests_total{route=\"%s\",status=\"%u\"} %llu\n",
                                        route_labels[rt], s, (unsigned long long)m->http[rt][s]);

        family(f, "hexr_sandbox_mcp_messages_total", "counter",
               "MCP messages received on /mcp, by JSON-RPC method and, for tools/call, tool (other: a method this server does not offer; invalid: no method could be read).");
        for (size_t i = 0; i < METRICS_MCP_LABELS && m->mcp_method[i]; i++)
                fprintf(f, "hexr_sandbox_mcp_messages_total{method=\"%s\",tool=\"%s\"} %llu\n", m->mcp_method[i],
                        m->mcp_tool[i], (unsigned long long)m->mcp_calls[i]);

        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        *ret_len = len;
        return buf;
}
