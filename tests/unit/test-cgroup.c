/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's cgroup graveyard and names (core/cgroup.h), on plain directories that
 * stand in for cgroups: a cgroup that cannot be removed yet stays in the graveyard
 * and goes once it can; a full graveyard waits instead of forgetting; a name is the
 * last part of the cgroup's path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/cgroup.h"

static char tmp[] = "/tmp/hxs-cgroup-XXXXXX";

/* A stand-in cgroup: a directory in one hierarchy, kept busy by a file in it. */
static cg_exec fake(const char *name, bool busy)
{
        cg_exec c = { 0 };
        snprintf(c.path[CG_MEMORY], sizeof(c.path[CG_MEMORY]), "%s/%s", tmp, name);
        assert_int_equal(mkdir(c.path[CG_MEMORY], 0755), 0);
        if (busy) {
                char f[700];
                snprintf(f, sizeof(f), "%s/busy", c.path[CG_MEMORY]);
                FILE *fp = fopen(f, "w");
                assert_non_null(fp);
                fclose(fp);
        }
        return c;
}

static void unbusy(const cg_exec *c)
{
        char f[700];
        snprintf(f, sizeof(f), "%s/busy", c->path[CG_MEMORY]);
        assert_int_equal(unlink(f), 0);
}

static bool exists(const cg_exec *c)
{
        struct stat st;
        return stat(c->path[CG_MEMORY], &st) == 0;
}

static void test_what_cannot_go_yet_stays_until_it_can(void **state)
{
        cg_graveyard *g = calloc(1, sizeof(*g));
        assert_non_null(g);
        cg_exec a = fake("s1.2-1", true), b = fake("s1.2-2", false);
        cg_graveyard_add(g, &a);
        cg_graveyard_add(g, &b);
        assert_int_equal(g->n, 2);
        cg_graveyard_bury(g, false);
        assert_int_equal(g->n, 1); /* b went, a is still busy */
        assert_false(exists(&b));
        assert_true(exists(&a));
        unbusy(&a);
        cg_graveyard_bury(g, false);
        assert_int_equal(g->n, 0);
        assert_false(exists(&a));
        free(g);
}

static void test_a_full_graveyard_does_not_forget(void **state)
{
        cg_graveyard *g = calloc(1, sizeof(*g));
        assert_non_null(g);
        cg_exec c = fake("s1.2-3", false);
        g->n = CG_GRAVEYARD_MAX; /* full (of nothing that matters here) */
        cg_graveyard_add(g, &c);
        assert_int_equal(g->n, CG_GRAVEYARD_MAX);
        assert_false(exists(&c)); /* removed at once instead */
        free(g);
}

static void test_the_name_is_the_last_part_of_the_path(void **state)
{
        cg_exec c = { 0 };
        char name[64];
        snprintf(c.path[CG_PIDS], sizeof(c.path[CG_PIDS]), "/sys/fs/cgroup/pids/x/hexr-sandbox/s12.345-6");
        cg_exec_name(&c, name, sizeof(name));
        assert_string_equal(name, "s12.345-6");
        cg_exec none = { 0 };
        cg_exec_name(&none, name, sizeof(name));
        assert_string_equal(name, "");
}

static int setup(void **state)
{
        return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
        return rmdir(tmp);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_what_cannot_go_yet_stays_until_it_can),
                cmocka_unit_test(test_a_full_graveyard_does_not_forget),
                cmocka_unit_test(test_the_name_is_the_last_part_of_the_path),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
