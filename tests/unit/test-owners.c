/* SPDX-License-Identifier: Apache-2.0 */
/* The owner uid pool (ns/owners.h): two engines sharing SANDBOX_UID_BASE (two pools on
 * one lock file, each its own open file description) never hold the same uid; a uid
 * comes back when its last holder lets go, and with the process. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ns/ns.h"
#include "ns/owners.h"

static char lock_path[64];
static hxs_config cfg;

static int setup(void **state)
{
        snprintf(lock_path, sizeof(lock_path), "/tmp/hxs-owners-XXXXXX");
        int fd = mkstemp(lock_path);
        if (fd < 0)
                return -1;
        close(fd);
        hxs_config_defaults(&cfg);
        cfg.max_concurrent = 2;
        return 0;
}

static int teardown(void **state)
{
        return unlink(lock_path);
}

static ns_owners *pool(void)
{
        ns_owners *o = NULL;
        hxs_error err = { 0 };
        assert_int_equal(ns_owners_new(&cfg, lock_path, &o, &err), 0);
        return o;
}

static void test_two_engines_never_share_a_uid(void **state)
{
        ns_owners *a = pool(), *b = pool();
        unsigned size = ns_owner_pool(&cfg);
        uid_t first = cfg.uid_base + NS_OWNER_UID;
        bool *held = calloc(size, sizeof(bool));
        assert_non_null(held);
        /* all of it, alternating between the two */
        for (unsigned i = 0; i < size; i++) {
                uid_t u;
                assert_int_equal(ns_owner_take(i % 2 ? b : a, &u), 0);
                assert_true(u >= first && u - first < size);
                assert_false(held[u - first]);
                held[u - first] = true;
        }
        uid_t u;
        assert_int_equal(ns_owner_take(a, &u), -EBUSY);
        assert_int_equal(ns_owner_take(b, &u), -EBUSY);
        assert_int_equal(ns_owners_held(a) + ns_owners_held(b), size);
        free(held);
        ns_owners_free(a);
        /* a's uids are free again for b (its process would have died the same way) */
        assert_int_equal(ns_owner_take(b, &u), 0);
        ns_owners_free(b);
}

static void test_a_uid_comes_back_with_its_last_holder(void **state)
{
        ns_owners *a = pool(), *b = pool();
        uid_t u, v;
        assert_int_equal(ns_owner_take(a, &u), 0);
        ns_owner_hold(a, u); /* a warm slot's sandbox */
        ns_owner_put(a, u);  /* its template is gone */
        /* still held: b cannot get it, whatever it takes */
        for (unsigned i = 0; i < ns_owner_pool(&cfg) - 1; i++) {
                assert_int_equal(ns_owner_take(b, &v), 0);
                assert_int_not_equal(v, u);
        }
        assert_int_equal(ns_owner_take(b, &v), -EBUSY);
        ns_owner_put(a, u); /* and the sandbox */
        assert_int_equal(ns_owner_take(b, &v), 0);
        assert_int_equal(v, u);
        ns_owners_free(a);
        ns_owners_free(b);
}

static void test_a_dead_engine_holds_nothing(void **state)
{
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                ns_owners *o = NULL;
                hxs_error err = { 0 };
                if (ns_owners_new(&cfg, lock_path, &o, &err) < 0)
                        _exit(1);
                for (uid_t u; ns_owner_take(o, &u) == 0;)
                        ;
                (void)!write(p[1], "x", 1);
                pause(); /* killed with everything held */
                _exit(0);
        }
        char c;
        assert_int_equal(read(p[0], &c, 1), 1);
        ns_owners *b = pool();
        uid_t u;
        assert_int_equal(ns_owner_take(b, &u), -EBUSY);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        assert_int_equal(ns_owner_take(b, &u), 0);
        ns_owners_free(b);
        close(p[0]);
        close(p[1]);
}

static void test_a_lock_file_others_may_write_is_refused(void **state)
{
        assert_int_equal(chmod(lock_path, 0666), 0);
        ns_owners *o = NULL;
        hxs_error err = { 0 };
        assert_int_equal(ns_owners_new(&cfg, lock_path, &o, &err), -EPERM);
        assert_non_null(strstr(err.message, lock_path));
        assert_int_equal(chmod(lock_path, 0600), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_two_engines_never_share_a_uid),
                cmocka_unit_test(test_a_uid_comes_back_with_its_last_holder),
                cmocka_unit_test(test_a_dead_engine_holds_nothing),
                cmocka_unit_test(test_a_lock_file_others_may_write_is_refused),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
