/* SPDX-License-Identifier: Apache-2.0 */
/* The steps between clone and exec (core/jail.h), each run in a forked child that
 * reports what it sees through its exit status: the descriptors, the uid change, the
 * capabilities, the death signal. The privilege steps need root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/jail.h"

/* Runs fn in a child; returns its exit status (0: every check held). */
static int in_child(int (*fn)(void))
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(fn());
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        return WEXITSTATUS(st);
}

static bool same_file(int a, int b)
{
        struct stat sa, sb;
        return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void test_every_step_has_a_name(void **state)
{
        for (int s = 0; s < JAIL_STEP_MAX; s++) {
                assert_non_null(jail_step_text(s));
                assert_true(strlen(jail_step_text(s)) > 0);
        }
        assert_null(jail_step_text(-1));
        assert_null(jail_step_text(JAIL_STEP_MAX));
}

/* Sources below n that collide with targets: 0 <- 2's file, 1 <- 0's, 2 closed, 3 <- 1's. */
static int arrange_child(void)
{
        int p[2];
        if (pipe(p) < 0)
                return 10;
        int a = open("/dev/null", O_RDONLY), b = dup(p[0]), c = dup(p[1]);
        /* make 0, 1 and 2 three different files whose copies we keep above */
        int f0 = dup2(a, 0), f1 = dup2(b, 1), f2 = dup2(c, 2);
        if (f0 != 0 || f1 != 1 || f2 != 2)
                return 11;
        int keep0 = dup(0), keep1 = dup(1), keep2 = dup(2);
        const int fds[] = { 2, 0, -1, 1 };
        if (jail_arrange_fds(fds, 4, 3) < 0)
                return 12;
        if (!same_file(0, keep2) || !same_file(1, keep0) || !same_file(3, keep1))
                return 13;
        if (fcntl(2, F_GETFD) >= 0 || errno != EBADF)
                return 14; /* -1: closed */
        if (fcntl(0, F_GETFD) & FD_CLOEXEC || fcntl(1, F_GETFD) & FD_CLOEXEC)
                return 15; /* below cloexec_from: open across exec */
        if (!(fcntl(3, F_GETFD) & FD_CLOEXEC))
                return 16;
        return 0;
}

static void test_arrange_fds_moves_colliding_sources_first(void **state)
{
        assert_int_equal(in_child(arrange_child), 0);
}

static int close_child(void)
{
        int fds[6];
        for (int i = 0; i < 6; i++)
                if ((fds[i] = open("/dev/null", O_RDONLY)) < 0)
                        return 10;
        const int keep[] = { fds[4], -1, fds[1] };
        if (jail_close_all_except(keep, 3) < 0)
                return 11;
        for (int i = 0; i < 6; i++) {
                bool open_now = fcntl(fds[i], F_GETFD) >= 0;
                if (open_now != (i == 1 || i == 4))
                        return 20 + i;
        }
        if (fcntl(0, F_GETFD) >= 0 || fcntl(2, F_GETFD) >= 0)
                return 12; /* not kept, so closed too */
        return 0;
}

static void test_close_all_except_keeps_only_those(void **state)
{
        assert_int_equal(in_child(close_child), 0);
}

static void test_a_failure_is_said_by_name(void **state)
{
        int p[2];
        assert_int_equal(pipe(p), 0);
        jail_say(p[1], "the test's jail", jail_step_text(JAIL_SETID), NULL, EPERM);
        jail_say(p[1], "the test's jail", "binding", "/x", 123);
        close(p[1]);
        char buf[256] = "";
        ssize_t n = read(p[0], buf, sizeof(buf) - 1);
        close(p[0]);
        assert_true(n > 0);
        assert_string_equal(buf, "hexr-sandbox: the test's jail: switching to its uid: errno 1\n"
                                 "hexr-sandbox: the test's jail: binding /x: errno 123\n");
}

/* The privilege steps in the order every caller uses them: bounding set, uid, caps,
 * the death signal after the uid change (which clears it), no_new_privs. */
static int drop_child(void)
{
        if (jail_drop_bounding(0, false) < 0)
                return 10;
        if (jail_become(65534, 65534, false) < 0)
                return 11;
        if (jail_set_caps(0) < 0)
                return 12;
        if (jail_pdeathsig(getppid(), -1) < 0)
                return 13;
        if (jail_no_new_privs() < 0)
                return 14;
        uid_t r, e, s;
        gid_t rg, eg, sg;
        if (getresuid(&r, &e, &s) < 0 || r != 65534 || e != 65534 || s != 65534)
                return 20;
        if (getresgid(&rg, &eg, &sg) < 0 || rg != 65534 || eg != 65534 || sg != 65534)
                return 21;
        if (getgroups(0, NULL) != 0)
                return 22;
        struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct data[2];
        if (syscall(SYS_capget, &hdr, data) < 0 || data[0].effective || data[0].permitted || data[0].inheritable ||
            data[1].effective || data[1].permitted || data[1].inheritable)
                return 23;
        for (int cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
                        return 24;
        int sig = 0;
        if (prctl(PR_GET_PDEATHSIG, &sig, 0, 0, 0) < 0 || sig != SIGKILL)
                return 25;
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
                return 26;
        return 0;
}

static void test_the_privilege_steps_leave_nothing(void **state)
{
        if (geteuid() != 0) {
                print_message("skipped: the privilege steps need root\n");
                return;
        }
        assert_int_equal(in_child(drop_child), 0);
}

/* A parent check that fails: the death signal set, the parent not the one named. */
static int orphan_child(void)
{
        return jail_pdeathsig(1, -1) == -ESRCH ? 0 : 10;
}

static void test_a_parent_that_is_not_there_is_noticed(void **state)
{
        assert_int_equal(in_child(orphan_child), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_step_has_a_name),
                cmocka_unit_test(test_arrange_fds_moves_colliding_sources_first),
                cmocka_unit_test(test_close_all_except_keeps_only_those),
                cmocka_unit_test(test_a_failure_is_said_by_name),
                cmocka_unit_test(test_the_privilege_steps_leave_nothing),
                cmocka_unit_test(test_a_parent_that_is_not_there_is_noticed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
