/* SPDX-License-Identifier: Apache-2.0 */
/* The pre-started sandboxes' bookkeeping (ns/pool.h) with fake sandboxes: the targets
 * per language, taking, and when a refill starts one (at once for a language with none
 * ready, at a pause of the requests for one that still has some). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "engine/request.h"
#include "ns/pool.h"

typedef struct fake {
        unsigned started[NS_POOL_KINDS];
        unsigned destroyed;
        bool python_not_ready;  /* Python's start says -EAGAIN (its templates start) */
} fake;

typedef struct fake_sb {
        ns_pool_kind kind;
} fake_sb;

static int fake_start(void *ctx, ns_pool_kind kind, uint32_t memory_mb, void **ret, hxs_error *err)
{
        (void)memory_mb;
        (void)err;
        fake *f = ctx;
        if (ns_pool_language(kind) == HXS_LANG_PYTHON && f->python_not_ready)
                return -11; /* -EAGAIN */
        fake_sb *sb = malloc(sizeof(*sb));
        if (!sb)
                return -12;
        sb->kind = kind;
        f->started[kind]++;
        *ret = sb;
        return 0;
}

static int fake_claim(void *ctx, void *sb, void *arg)
{
        (void)ctx;
        (void)arg;
        free(sb); /* the execution's now */
        return 1;
}

static bool fake_alive(void *ctx, void *sb)
{
        (void)ctx;
        (void)sb;
        return true;
}

static void fake_destroy(void *ctx, void *sb)
{
        fake *f = ctx;
        f->destroyed++;
        free(sb);
}

static const ns_pool_ops ops = { .start = fake_start, .claim = fake_claim, .alive = fake_alive,
                                 .destroy = fake_destroy };

static hxs_config two_each(void)
{
        return (hxs_config){ .warm = true, .pool_size = 2, .pool_memory_mb = 2048, .default_memory_mb = 256 };
}

static void test_fill_reaches_the_targets(void **state)
{
        (void)state;
        fake f = { 0 };
        hxs_config cfg = two_each();
        ns_pool *p = ns_pool_new(&cfg, &ops, &f);
        assert_non_null(p);
        assert_false(ns_pool_fill(p, UINT32_MAX, false));
        assert_int_equal(f.started[NS_POOL_JAVASCRIPT], 2);
        assert_int_equal(f.started[NS_POOL_BASH], 2);
        assert_int_equal(f.started[NS_POOL_PYTHON], 2);
        assert_int_equal(f.started[NS_POOL_PYTHON_SCI], 2);
        hxs_engine_stats st = { 0 };
        ns_pool_stats(p, &st);
        assert_int_equal(st.pool_ready, 8);
        assert_int_equal(st.pool_target, 8);
        /* /health counts both Python kinds as Python */
        assert_int_equal(st.pool_lang_ready[HXS_LANG_PYTHON], 4);
        assert_int_equal(st.pool_lang_target[HXS_LANG_JAVASCRIPT], 2);
        assert_int_equal(st.pool_lang_memory_mb[HXS_LANG_PYTHON], 4 * 256);
        ns_pool_free(p);
        assert_int_equal(f.destroyed, 8);
}

/* Room for fewer than every kind: JavaScript and Bash first (Python starts warm without
 * a pre-started sandbox), then Python's two, round by round. */
static void test_a_small_room_goes_to_javascript_and_bash_first(void **state)
{
        (void)state;
        fake f = { 0 };
        hxs_config cfg = two_each();
        cfg.pool_memory_mb = 512;
        ns_pool *p = ns_pool_new(&cfg, &ops, &f);
        (void)ns_pool_fill(p, UINT32_MAX, false);
        assert_int_equal(f.started[NS_POOL_JAVASCRIPT], 1);
        assert_int_equal(f.started[NS_POOL_BASH], 1);
        assert_int_equal(f.started[NS_POOL_PYTHON], 0);
        assert_int_equal(f.started[NS_POOL_PYTHON_SCI], 0);
        ns_pool_free(p);
        cfg.pool_memory_mb = 1280;
        f = (fake){ 0 };
        p = ns_pool_new(&cfg, &ops, &f);
        (void)ns_pool_fill(p, UINT32_MAX, false);
        assert_int_equal(f.started[NS_POOL_JAVASCRIPT], 2);
        assert_int_equal(f.started[NS_POOL_BASH], 1);
        assert_int_equal(f.started[NS_POOL_PYTHON], 1);
        assert_int_equal(f.started[NS_POOL_PYTHON_SCI], 1);
        ns_pool_free(p);
}

/* A start that is not possible yet (Python's templates still starting) is no failure:
 * the other languages fill, nothing is held back, and Python's turn comes again. */
static void test_a_start_not_possible_yet_is_no_failure(void **state)
{
        (void)state;
        fake f = { .python_not_ready = true };
        hxs_config cfg = two_each();
        ns_pool *p = ns_pool_new(&cfg, &ops, &f);
        assert_false(ns_pool_fill(p, UINT32_MAX, false));
        assert_int_equal(f.started[NS_POOL_JAVASCRIPT], 2);
        assert_int_equal(f.started[NS_POOL_BASH], 2);
        assert_int_equal(f.started[NS_POOL_PYTHON], 0);
        assert_int_equal(f.started[NS_POOL_PYTHON_SCI], 0);
        f.python_not_ready = false;
        /* at once: no back-off as after a failure */
        assert_false(ns_pool_fill(p, UINT32_MAX, false));
        assert_int_equal(f.started[NS_POOL_PYTHON], 2);
        assert_int_equal(f.started[NS_POOL_PYTHON_SCI], 2);
        ns_pool_free(p);
}

static void test_a_language_with_one_left_waits_for_a_pause(void **state)
{
        (void)state;
        fake f = { 0 };
        hxs_config cfg = two_each();
        ns_pool *p = ns_pool_new(&cfg, &ops, &f);
        (void)ns_pool_fill(p, UINT32_MAX, false);

        /* one Bash sandbox used: one is still ready, so during the requests nothing is
         * started, but the caller is told there is more to do once they pause */
        assert_non_null(ns_pool_take(p, NS_POOL_BASH, NULL));
        assert_true(ns_pool_fill(p, 1, true));
        assert_int_equal(f.started[NS_POOL_BASH], 2);
        /* the pause: one more, then the pool is full again */
        assert_false(ns_pool_fill(p, 1, false));
        assert_int_equal(f.started[NS_POOL_BASH], 3);
        assert_false(ns_pool_fill(p, 1, true));
        assert_int_equal(f.started[NS_POOL_BASH], 3);
        ns_pool_free(p);
}

static void test_a_language_with_none_left_refills_at_once(void **state)
{
        (void)state;
        fake f = { 0 };
        hxs_config cfg = two_each();
        ns_pool *p = ns_pool_new(&cfg, &ops, &f);
        (void)ns_pool_fill(p, UINT32_MAX, false);

        assert_non_null(ns_pool_take(p, NS_POOL_JAVASCRIPT, NULL));
        assert_non_null(ns_pool_take(p, NS_POOL_JAVASCRIPT, NULL));
        assert_null(ns_pool_take(p, NS_POOL_JAVASCRIPT, NULL)); /* none: the request runs cold */
        /* requests still coming: the empty language gets one now, one at a time */
        assert_true(ns_pool_fill(p, 1, true));
        assert_int_equal(f.started[NS_POOL_JAVASCRIPT], 3);
        /* with one ready it waits for the pause like the others */
        assert_true(ns_pool_fill(p, 1, true));
        assert_int_equal(f.started[NS_POOL_JAVASCRIPT], 3);
        assert_false(ns_pool_fill(p, UINT32_MAX, false));
        assert_int_equal(f.started[NS_POOL_JAVASCRIPT], 4);
        ns_pool_free(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fill_reaches_the_targets),
                cmocka_unit_test(test_a_small_room_goes_to_javascript_and_bash_first),
                cmocka_unit_test(test_a_start_not_possible_yet_is_no_failure),
                cmocka_unit_test(test_a_language_with_one_left_waits_for_a_pause),
                cmocka_unit_test(test_a_language_with_none_left_refills_at_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
