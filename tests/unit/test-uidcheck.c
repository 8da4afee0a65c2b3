/* SPDX-License-Identifier: Apache-2.0 */
/* SANDBOX_UID_BASE against subordinate ids and accounts (core/uidcheck.h), with files
 * written here. */
#include <errno.h>
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

#include "core/error.h"
#include "core/uidcheck.h"
#include "ns/ns.h"

static char dir[64];

static const char *file(const char *name, const char *text)
{
        static char paths[8][128];
        static int next;
        char *p = paths[next++ % 8];
        snprintf(p, 128, "%s/%s", dir, name);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        return p;
}

static int setup(void **state)
{
        snprintf(dir, sizeof(dir), "/tmp/hxs-uidcheck-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

/* The engine's own ranges for the default base. */
static size_t default_ranges(uid_range r[HOST_UID_RANGES])
{
        hxs_config cfg;
        hxs_config_defaults(&cfg);
        cfg.max_concurrent = 16;
        return host_uid_ranges(&cfg, r);
}

static int check(const id_files *files, hxs_error *err)
{
        uid_range r[HOST_UID_RANGES];
        return uid_ranges_check(r, default_ranges(r), files, err);
}

static void test_the_ranges_cover_every_offset(void **state)
{
        uid_range r[HOST_UID_RANGES];
        size_t n = default_ranges(r);
        static const uint32_t used[] = { 1000000, 1001000, 1002000, 1003000, 1003001, 1003002,
                                         1004000, 1004000 + 16 /* a cold owner */ };
        for (size_t i = 0; i < sizeof(used) / sizeof(used[0]); i++) {
                bool in = false;
                for (size_t k = 0; k < n; k++)
                        in |= used[i] >= r[k].first && used[i] - r[k].first < r[k].count;
                if (!in)
                        fail_msg("uid %u is not checked", used[i]);
        }
}

static void test_a_free_host_passes(void **state)
{
        id_files f = {
                file("subuid", "# comment\nalice:100000:65536\nbob:165536:65536\n\n"),
                file("subgid", "alice:100000:65536\n"),
                file("passwd", "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n"),
                file("group", "root:x:0:\nalice:x:1000:\n"),
        };
        hxs_error err = { 0 };
        assert_int_equal(check(&f, &err), 0);
        /* absent files are no entries */
        id_files none = { "/nonexistent/a", "/nonexistent/b", "/nonexistent/c", "/nonexistent/d" };
        assert_int_equal(check(&none, &err), 0);
}

static void test_a_subordinate_range_that_meets_one_refuses(void **state)
{
        /* shadow-utils' 14th user: 951968..1017503 holds every one of the defaults */
        id_files f = {
                file("subuid", "alice:100000:65536\nnick:951968:65536\n"),
                file("subgid", ""), file("passwd", ""), file("group", ""),
        };
        hxs_error err = { 0 };
        assert_int_equal(check(&f, &err), -EEXIST);
        assert_string_equal(err.field, "SANDBOX_UID_BASE");
        assert_non_null(strstr(err.message, "line 2"));
        assert_non_null(strstr(err.message, "nick:951968:65536"));
        assert_non_null(strstr(err.message, "1000000..1000000"));

        /* one that reaches only the owner uids, by its last id */
        id_files g = {
                file("subuid", ""), file("subgid", "carol:1003003:998\n"), file("passwd", ""), file("group", ""),
        };
        err_clear(&err);
        assert_int_equal(check(&g, &err), -EEXIST);
        assert_non_null(strstr(err.message, "owners of the sandboxes' user namespaces"));
        assert_non_null(strstr(g.subgid, "subgid"));
        assert_non_null(strstr(err.message, "subgid"));
        /* and one that ends just before them does not */
        id_files h = {
                file("subuid", ""), file("subgid", "carol:1003003:997\n"), file("passwd", ""), file("group", ""),
        };
        err_clear(&err);
        assert_int_equal(check(&h, &err), 0);
}

static void test_an_account_in_a_range_refuses(void **state)
{
        id_files f = {
                file("subuid", ""), file("subgid", ""),
                file("passwd", "root:x:0:0:root:/root:/bin/sh\nsvc:x:1004020:100::/:/usr/sbin/nologin\n"),
                file("group", ""),
        };
        hxs_error err = { 0 };
        assert_int_equal(check(&f, &err), -EEXIST);
        assert_non_null(strstr(err.message, "1004020"));
        assert_non_null(strstr(err.message, "line 2"));
        /* a group with one of the gids */
        id_files g = {
                file("subuid", ""), file("subgid", ""), file("passwd", ""),
                file("group", "root:x:0:\nsandboxes:x:1001000:\n"),
        };
        err_clear(&err);
        assert_int_equal(check(&g, &err), -EEXIST);
        assert_non_null(strstr(err.message, "the sandbox user"));
        /* the primary gid of an account counts too */
        id_files h = {
                file("subuid", ""), file("subgid", ""), file("passwd", "x:x:500:1002000::/:/bin/sh\n"),
                file("group", ""),
        };
        err_clear(&err);
        assert_int_equal(check(&h, &err), -EEXIST);
        assert_non_null(strstr(err.message, "templates"));
}

static void test_an_unreadable_file_is_an_error(void **state)
{
        id_files f = { dir /* a directory: reading fails */, NULL, NULL, NULL };
        hxs_error err = { 0 };
        int r = check(&f, &err);
        assert_true(r < 0 && r != -EEXIST);
        assert_non_null(strstr(err.message, dir));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_the_ranges_cover_every_offset),
                cmocka_unit_test(test_a_free_host_passes),
                cmocka_unit_test(test_a_subordinate_range_that_meets_one_refuses),
                cmocka_unit_test(test_an_account_in_a_range_refuses),
                cmocka_unit_test(test_an_unreadable_file_is_an_error),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
