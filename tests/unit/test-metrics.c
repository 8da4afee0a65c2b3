/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text (metrics.c) from the counters and the gauges it is given: every
 * label combination of the fixed families is there from the start, and what was
 * counted or measured shows where it belongs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/metrics.h"

static char *render(const metrics *m, const metrics_gauges *g)
{
        size_t len = 0;
        char *text = metrics_render(m, g, &len);
        assert_non_null(text);
        assert_int_equal(strlen(text), len);
        return text;
}

static void test_zeros_are_there(void **state)
{
        metrics m = { 0 };
        metrics_gauges g = { 0 };
        char *t = render(&m, &g);

        assert_non_null(strstr(t, "# TYPE hexr_sandbox_executions_total counter\n"));
        assert_non_null(strstr(t, "hexr_sandbox_executions_total{language=\"python\",outcome=\"ok\"} 0\n"));
        assert_non_null(strstr(t, "hexr_sandbox_executions_total{language=\"bash\",outcome=\"setup_failed\"} 0\n"));
        assert_non_null(strstr(t, "hexr_sandbox_rejected_requests_total{reason=\"quota_exceeded\"} 0\n"));
        assert_non_null(strstr(t, "hexr_sandbox_connections_closed_total{reason=\"request_timeout\"} 0\n"));
        assert_non_null(strstr(t, "hexr_sandbox_draining 0\n"));
        /* no caller table: no per-caller families */
        assert_null(strstr(t, "hexr_sandbox_caller_executions_total"));
        /* no response yet: no HTTP sample */
        assert_null(strstr(t, "hexr_sandbox_http_requests_total{"));
        free(t);
}

static void test_counted_and_given(void **state)
{
        metrics m = { 0 };
        metrics_gauges g = { .active = 3, .queued = 2, .max_concurrent = 4, .max_queue = 64,
                             .draining = true, .oldest_wait_s = 1.25, .conns_fresh = 5,
                             .conns_established = 6, .conns_lingering = 7,
                             .upload_staged = 5000000000ull, .upload_staging_max = 1u << 30 };

        g.engine.templates_ready = 1;
        metrics_execution(&m, HXS_LANG_JAVASCRIPT, OUTCOME_TIMEOUT, 1500);
        metrics_reject(&m, REJECT_OVERLOADED);
        metrics_connection_cut(&m, CONN_CUT_HANDSHAKE);
        metrics_http(&m, ROUTE_HEALTH, 503);
        char *t = render(&m, &g);

        assert_non_null(strstr(t, "hexr_sandbox_executions_total{language=\"javascript\",outcome=\"timeout\"} 1\n"));
        assert_non_null(strstr(t, "hexr_sandbox_execution_duration_seconds_count 1\n"));
        assert_non_null(strstr(t, "hexr_sandbox_rejected_requests_total{reason=\"overloaded\"} 1\n"));
        assert_non_null(strstr(t, "hexr_sandbox_connections_closed_total{reason=\"handshake_timeout\"} 1\n"));
        assert_non_null(strstr(t, "hexr_sandbox_http_requests_total{route=\"/health\",status=\"503\"} 1\n"));
        assert_non_null(strstr(t, "hexr_sandbox_active_executions 3\n"));
        assert_non_null(strstr(t, "hexr_sandbox_queued_executions 2\n"));
        assert_non_null(strstr(t, "hexr_sandbox_max_concurrent_executions 4\n"));
        assert_non_null(strstr(t, "hexr_sandbox_max_queued_executions 64\n"));
        assert_non_null(strstr(t, "hexr_sandbox_draining 1\n"));
        assert_non_null(strstr(t, "hexr_sandbox_queue_oldest_wait_seconds 1.250\n"));
        assert_non_null(strstr(t, "hexr_sandbox_warm_templates_ready 1\n"));
        assert_non_null(strstr(t, "hexr_sandbox_connections{state=\"new\"} 5\n"));
        assert_non_null(strstr(t, "hexr_sandbox_connections{state=\"established\"} 6\n"));
        assert_non_null(strstr(t, "hexr_sandbox_lingering_connections 7\n"));
        assert_non_null(strstr(t, "hexr_sandbox_upload_staged_bytes 5000000000\n"));
        assert_non_null(strstr(t, "hexr_sandbox_upload_staging_max_bytes 1073741824\n"));
        free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_zeros_are_there),
                cmocka_unit_test(test_counted_and_given),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
