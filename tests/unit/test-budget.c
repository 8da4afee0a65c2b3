/* SPDX-License-Identifier: Apache-2.0 */
/* The budgets derived from the host (server/budget.h): slots from the pid space, the
 * memory budget from MemAvailable, warm slots, and what explicit settings keep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/uids.h"
#include "server/budget.h"

static hxs_config defaults(void)
{
        return (hxs_config){ .pids_max = 256, .max_memory_mb = 512, .warm = true };
}

static const host_facts small_vm = { .mem_available_mb = 24000, .pid_max = 32768,
                                     .threads_max = 192000, .cores = 2 };

static void test_slots_come_from_the_pid_space_not_the_cores(void **state)
{
        hxs_config cfg = defaults();
        budget_settle(&cfg, &small_vm);
        assert_int_equal(cfg.max_concurrent, 32768 / 2 / 256);
        assert_int_equal(cfg.memory_budget_mb, 12000);
        /* a warm template for every execution that may run, up to a bound: a burst of
         * sleepers starts warm too */
        assert_int_equal(cfg.warm_slots, BUDGET_WARM_SLOTS_MAX);
        assert_int_equal(ns_warm_slots(&cfg), BUDGET_WARM_SLOTS_MAX);
        cfg = defaults();
        cfg.pids_max = 4096; /* 4 slots: as many warm */
        budget_settle(&cfg, &small_vm);
        assert_int_equal(cfg.max_concurrent, 4);
        assert_int_equal(cfg.warm_slots, 4);

        host_facts h = small_vm;
        h.threads_max = 4096; /* the smaller of the two counts */
        cfg = defaults();
        budget_settle(&cfg, &h);
        assert_int_equal(cfg.max_concurrent, 8);
}

static void test_slots_are_bounded_both_ways(void **state)
{
        host_facts h = small_vm;
        h.pid_max = h.threads_max = 4194304;
        hxs_config cfg = defaults();
        cfg.pids_max = 8;
        budget_settle(&cfg, &h);
        assert_int_equal(cfg.max_concurrent, BUDGET_SLOTS_MAX);

        h.pid_max = h.threads_max = 1000;
        cfg = defaults();
        budget_settle(&cfg, &h);
        assert_int_equal(cfg.max_concurrent, 2);
        assert_int_equal(cfg.warm_slots, 2);
}

static void test_slots_leave_descriptors_for_the_connections(void **state)
{
        host_facts h = small_vm;
        h.nofile = 1024; /* a hard limit of 1024 */
        hxs_config cfg = defaults();
        cfg.max_connections = 256;
        budget_settle(&cfg, &h);
        assert_int_equal(cfg.max_concurrent, (1024 - 256 - BUDGET_FDS_RESERVED) / BUDGET_FDS_PER_EXEC);

        h.nofile = 100; /* still the floor */
        cfg = defaults();
        cfg.max_connections = 256;
        budget_settle(&cfg, &h);
        assert_int_equal(cfg.max_concurrent, 2);
}

static void test_explicit_settings_are_kept(void **state)
{
        hxs_config cfg = defaults();
        cfg.max_concurrent = 6;
        cfg.memory_budget_mb = 2048;
        budget_settle(&cfg, &small_vm);
        assert_int_equal(cfg.max_concurrent, 6);
        assert_int_equal(cfg.memory_budget_mb, 2048);
        assert_int_equal(cfg.warm_slots, 6); /* as before: one per slot */

        cfg = defaults();
        cfg.max_concurrent = 3;
        cfg.warm_slots = 9;
        budget_settle(&cfg, &small_vm);
        assert_int_equal(cfg.warm_slots, 3); /* no template no execution could use */
}

static void test_the_largest_request_always_fits(void **state)
{
        hxs_config cfg = defaults();
        cfg.memory_budget_mb = 100;
        budget_settle(&cfg, &small_vm);
        assert_int_equal(cfg.memory_budget_mb, 512);

        host_facts h = small_vm;
        h.cgroup_limit_mb = 3072; /* a container's limit, below the host's MemAvailable */
        cfg = defaults();
        budget_settle(&cfg, &h);
        assert_int_equal(cfg.memory_budget_mb, 1536);

        h = small_vm;
        h.mem_available_mb = 0; /* unknown: MAX_MEMORY_MB per core */
        cfg = defaults();
        budget_settle(&cfg, &h);
        assert_int_equal(cfg.memory_budget_mb, 2 * 512);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_slots_come_from_the_pid_space_not_the_cores),
                cmocka_unit_test(test_slots_are_bounded_both_ways),
                cmocka_unit_test(test_slots_leave_descriptors_for_the_connections),
                cmocka_unit_test(test_explicit_settings_are_kept),
                cmocka_unit_test(test_the_largest_request_always_fits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
