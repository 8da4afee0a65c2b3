/* SPDX-License-Identifier: Apache-2.0 */
/* Per-caller state: fair turns between callers (FIFO within one), the slots one caller
 * may hold, the per-minute bucket, and the bounded metrics labels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/call.h"
#include "server/callers.h"
#include "server/loop.h"
#include "server/metrics.h"

static hxs_config cfg;
static metrics m;

static callers *new_table(uint32_t share)
{
        callers *cl = NULL;
        memset(&m, 0, sizeof(m));
        assert_int_equal(callers_new(&cfg, &m, share, &cl), 0);
        return cl;
}

static void wait_for_turn(callers *cl, call *c, caller_state *cs)
{
        c->cs = cs;
        callers_enqueue(cl, c);
}

static void test_turns_round_robin(void **state)
{
        hxs_config_defaults(&cfg);
        callers *cl = new_table(0);
        caller_state *a = callers_get(cl, "spiffe://t/a"), *b = callers_get(cl, "spiffe://t/b");
        call a1 = { 0 }, a2 = { 0 }, a3 = { 0 }, b1 = { 0 };

        assert_non_null(a);
        assert_non_null(b);
        assert_ptr_equal(callers_get(cl, "spiffe://t/a"), a);
        wait_for_turn(cl, &a1, a);
        wait_for_turn(cl, &a2, a);
        wait_for_turn(cl, &a3, a);
        wait_for_turn(cl, &b1, b);
        assert_int_equal(a->queued, 3);
        /* a came first, then b has its turn, then a's others in their order */
        assert_ptr_equal(callers_next(cl), &a1);
        assert_ptr_equal(callers_next(cl), &b1);
        assert_ptr_equal(callers_next(cl), &a2);
        assert_ptr_equal(callers_next(cl), &a3);
        assert_null(callers_next(cl));
        assert_int_equal(a->queued, 0);
        assert_int_equal(b->queued, 0);
        callers_free(cl);
}

static void test_share_skips_a_busy_caller(void **state)
{
        hxs_config_defaults(&cfg);
        callers *cl = new_table(1);
        caller_state *a = callers_get(cl, "spiffe://t/a"), *b = callers_get(cl, "spiffe://t/b");
        call a1 = { 0 }, b1 = { 0 };

        assert_int_equal(callers_share(cl), 1);
        a->running = 1; /* holds its one slot */
        assert_false(callers_may_run(cl, a));
        assert_true(callers_may_run(cl, b));
        wait_for_turn(cl, &a1, a);
        assert_false(callers_waiting_may_run(cl));
        assert_null(callers_next(cl));
        wait_for_turn(cl, &b1, b);
        assert_true(callers_waiting_may_run(cl));
        assert_ptr_equal(callers_next(cl), &b1);
        a->running = 0;
        assert_ptr_equal(callers_next(cl), &a1);
        /* taken out of the queue another way (a timeout): nobody waits */
        wait_for_turn(cl, &a1, a);
        callers_unqueue(cl, &a1);
        assert_false(callers_waiting_may_run(cl));
        assert_null(callers_next(cl));
        callers_free(cl);
}

/* With a memory share, a caller holding it waits whatever its slots. */
static void test_memory_share_skips_a_caller_holding_it(void **state)
{
        hxs_config_defaults(&cfg);
        callers *cl = new_table(3);
        caller_state *a = callers_get(cl, "spiffe://t/a"), *b = callers_get(cl, "spiffe://t/b");
        call a1 = { 0 }, b1 = { 0 };

        callers_set_memory_share(cl, 768);
        a->running = 1;
        a->memory_mb = 512;
        assert_true(callers_may_run(cl, a)); /* below both shares */
        a->running = 2;
        a->memory_mb = 1024; /* two slots of three, but all of its memory */
        assert_false(callers_may_run(cl, a));
        assert_true(callers_may_run(cl, b));
        wait_for_turn(cl, &a1, a);
        wait_for_turn(cl, &b1, b);
        assert_ptr_equal(callers_peek(cl), &b1);
        assert_ptr_equal(callers_next(cl), &b1);
        assert_null(callers_next(cl));
        a->memory_mb = 256;
        assert_ptr_equal(callers_peek(cl), &a1);
        assert_ptr_equal(callers_next(cl), &a1);
        callers_free(cl);
}

static void test_per_minute_bucket(void **state)
{
        hxs_config_defaults(&cfg);
        cfg.quota_per_minute = 2;
        callers *cl = new_table(0);
        caller_state *a = callers_get(cl, "");
        uint64_t now = now_ms();
        unsigned wait_s = 0;

        assert_true(callers_take_token(cl, a, now, &wait_s));
        assert_true(callers_take_token(cl, a, now, &wait_s));
        assert_false(callers_take_token(cl, a, now, &wait_s));
        assert_in_range(wait_s, 1, 60);
        /* half a minute later one is back */
        assert_true(callers_take_token(cl, a, now + 30000, &wait_s));
        callers_free(cl);
}

static void test_labels_are_bounded(void **state)
{
        hxs_config_defaults(&cfg);
        cfg.metrics_callers = 2;
        callers *cl = new_table(0);
        caller_state *anon = callers_get(cl, ""), *a = callers_get(cl, "spiffe://t/a"),
                     *b = callers_get(cl, "spiffe://t/b");

        assert_string_equal(callers_label(&m, anon->label), "anonymous");
        assert_string_equal(callers_label(&m, a->label), "spiffe://t/a");
        assert_int_equal(b->label, (int)m.caller_other);
        assert_string_equal(callers_label(&m, b->label), "other");
        callers_free(cl);
        assert_null(m.caller_labels);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_turns_round_robin),
                cmocka_unit_test(test_share_skips_a_busy_caller),
                cmocka_unit_test(test_memory_share_skips_a_caller_holding_it),
                cmocka_unit_test(test_per_minute_bucket),
                cmocka_unit_test(test_labels_are_bounded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
