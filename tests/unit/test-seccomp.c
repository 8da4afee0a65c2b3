/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The compiled seccomp program, evaluated without loading it (sandbox_filter_eval), for
 * the rules that a multi-architecture libseccomp filter is known to drop or miss: the
 * calls newer than the libseccomp release (statmount, listmount, open_tree_attr, by
 * number), socketpair (the family rules of socket), the families outside the allow
 * list; on every ABI. Then the same program loaded for real in a child process, so the
 * evaluator and the kernel are seen to agree.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ns/seccomp.h"

#define X32 0x40000000u

static sandbox_filter filter;

static int setup(void **state)
{
        hxs_error err = { 0 };
        if (sandbox_filter_build(&filter, &err) < 0) {
                fprintf(stderr, "building the filter: %s\n", err.message);
                return -1;
        }
        return 0;
}

static int teardown(void **state)
{
        sandbox_filter_free(&filter);
        return 0;
}

static uint32_t answer(uint32_t arch, uint32_t nr, uint64_t a0, uint64_t a1)
{
        uint64_t args[6] = { a0, a1, 0, 0, 0, 0 };
        return sandbox_filter_eval(&filter, arch, nr, args);
}

#define DENIED(e) (SECCOMP_RET_ERRNO | (uint32_t)(e))
#define ALLOWED SECCOMP_RET_ALLOW

/* The three ABIs, as seccomp_data shows a call: arch, and the number's x32 bit. */
static const struct {
        const char *name;
        uint32_t arch, bit;
} abis[] = {
        { "x86_64", AUDIT_ARCH_X86_64, 0 },
        { "i386", AUDIT_ARCH_I386, 0 },
        { "x32", AUDIT_ARCH_X86_64, X32 },
};

static void test_calls_newer_than_libseccomp_are_denied_on_every_abi(void **state)
{
        /* one numbering for every x86 ABI from 424 on */
        static const uint32_t nrs[] = { 457 /* statmount */, 458 /* listmount */, 467 /* open_tree_attr */ };
        for (size_t a = 0; a < 3; a++)
                for (size_t i = 0; i < 3; i++) {
                        uint32_t got = answer(abis[a].arch, abis[a].bit | nrs[i], 0, 0);
                        if (got != DENIED(EPERM))
                                fail_msg("%s %u answers %#x", abis[a].name, nrs[i], got);
                }
        /* and their neighbours stay allowed (the rule is the number, not a range) */
        assert_int_equal(answer(AUDIT_ARCH_X86_64, 456 /* futex_requeue */, 0, 0), ALLOWED);
        assert_int_equal(answer(AUDIT_ARCH_X86_64, 459 /* lsm_get_self_attr */, 0, 0), ALLOWED);
}

/* x86_64 and x32 numbers of socket and socketpair; i386's direct calls. */
static const struct {
        uint32_t arch, nr;
        const char *what;
} socket_calls[] = {
        { AUDIT_ARCH_X86_64, 41, "x86_64 socket" },
        { AUDIT_ARCH_X86_64, 53, "x86_64 socketpair" },
        { AUDIT_ARCH_X86_64, X32 | 41, "x32 socket" },
        { AUDIT_ARCH_X86_64, X32 | 53, "x32 socketpair" },
        { AUDIT_ARCH_I386, 359, "i386 socket" },
        { AUDIT_ARCH_I386, 360, "i386 socketpair" },
};

static void test_socket_and_socketpair_take_only_four_families(void **state)
{
        static const int denied[] = {
                AF_PACKET, AF_KEY, AF_BLUETOOTH, AF_VSOCK, AF_ALG, AF_TIPC, AF_RDS, AF_CAN,
                /* with a record of kernel bugs */
                33 /* AF_RXRPC */, 41 /* AF_KCM */, 43 /* AF_SMC */, 24 /* AF_PPPOX */,
                35 /* AF_PHONET */, 36 /* AF_IEEE802154 */, 37 /* AF_CAIF */, 45 /* AF_MCTP */,
                42 /* AF_QIPCRTR */, 34 /* AF_ISDN */,
                /* none yet */
                50, 63,
        };
        static const int allowed[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
        for (size_t c = 0; c < sizeof(socket_calls) / sizeof(socket_calls[0]); c++) {
                for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
                        /* the family is an int: junk in the upper half changes nothing */
                        for (uint64_t hi = 0; hi <= 1; hi++) {
                                uint32_t got = answer(socket_calls[c].arch, socket_calls[c].nr,
                                                      (hi << 32) | (uint64_t)denied[i], SOCK_STREAM);
                                if (got != DENIED(EAFNOSUPPORT))
                                        fail_msg("%s family %d%s answers %#x", socket_calls[c].what, denied[i],
                                                 hi ? " (high bits)" : "", got);
                        }
                }
                for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
                        uint32_t got = answer(socket_calls[c].arch, socket_calls[c].nr, (uint64_t)allowed[i],
                                              SOCK_STREAM);
                        if (got != ALLOWED)
                                fail_msg("%s family %d answers %#x", socket_calls[c].what, allowed[i], got);
                }
        }
        /* i386 socketcall: the family is in memory, so SYS_SOCKET and SYS_SOCKETPAIR go */
        assert_int_equal(answer(AUDIT_ARCH_I386, 102, 1, 0), DENIED(EAFNOSUPPORT));
        assert_int_equal(answer(AUDIT_ARCH_I386, 102, 8, 0), DENIED(EAFNOSUPPORT));
}

static void test_the_rest_of_the_policy(void **state)
{
        for (size_t a = 0; a < 3; a++) {
                uint32_t arch = abis[a].arch, bit = abis[a].bit;
                bool i386 = arch == AUDIT_ARCH_I386;
                assert_int_equal(answer(arch, bit | 435 /* clone3 */, 0, 0), DENIED(ENOSYS));
                assert_int_equal(answer(arch, bit | (i386 ? 21 : 165) /* mount */, 0, 0), DENIED(EPERM));
                assert_int_equal(answer(arch, bit | (i386 ? 310 : 272) /* unshare */, 0, 0), DENIED(EPERM));
                assert_int_equal(answer(arch, bit | 438 /* pidfd_getfd */, 0, 0), DENIED(EPERM));
                assert_int_equal(answer(arch, bit | (i386 ? 3 : 0) /* read */, 0, 0), ALLOWED);
                /* clone: a fork passes, a new user namespace does not */
                uint32_t clone = bit | (i386 ? 120 : 56);
                assert_int_equal(answer(arch, clone, 17, 0), ALLOWED);
                assert_int_equal(answer(arch, clone, 17 | 0x10000000 /* CLONE_NEWUSER */, 0), DENIED(EPERM));
                /* ioctl TIOCSTI, with junk in the high bits (CVE-2019-10063) */
                uint32_t ioctl = bit | (i386 ? 54 : (bit ? 514 : 16));
                assert_int_equal(answer(arch, ioctl, 0, 0x5412 | (1ULL << 32)), DENIED(EPERM));
                assert_int_equal(answer(arch, ioctl, 0, 0x5401 /* TCGETS */), ALLOWED);
        }
        /* an architecture the filter does not know is killed, not allowed */
        assert_int_not_equal(answer(AUDIT_ARCH_AARCH64, 0, 0, 0), ALLOWED);
}

/* The document lists every call (its table is this program's own). */
static void test_description_names_what_was_missing(void **state)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_non_null(f);
        assert_int_equal(sandbox_filter_describe(f), 0);
        fclose(f);
        static const char *const names[] = { "| `statmount` |", "| `listmount` |", "| `open_tree_attr` |",
                                             "`socket`, `socketpair`", "| `kcmp` |", "| `pidfd_getfd` |",
                                             "| `modify_ldt` |", "| `name_to_handle_at` |", "| `mbind` |" };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (!strstr(buf, names[i]))
                        fail_msg("the description lacks %s", names[i]);
        free(buf);
}

/* The program built in is the one the policy compiles to now, and it passes every
 * rule's check: a policy change cannot ship with the old program. */
static void test_the_built_in_program_is_the_policy_compiled(void **state)
{
        hxs_error err = { 0 };
        sandbox_filter compiled;
        if (sandbox_filter_compile(&compiled, &err) < 0)
                fail_msg("compiling the policy: %s", err.message);
        assert_int_equal(compiled.len, filter.len);
        assert_memory_equal(compiled.insns, filter.insns, filter.len * sizeof(*filter.insns));
        sandbox_filter_free(&compiled);
        if (sandbox_filter_verify(&filter, &err) < 0)
                fail_msg("the built-in program: %s", err.message);
}

/* The kernel runs the program for every number of every ABI when a sandbox attaches it
 * (its cache of calls to allow unfiltered), with interrupts off, and again at every call
 * the cache cannot answer: the program is a search tree of numbers, so that a number
 * walks a few dozen instructions. As a list (libseccomp's default layout) numbers
 * walked 139 on average and the attach cost about 0.3 ms more. */
#define STEPS_MEAN_MAX 48

static void test_numbers_walk_a_tree_not_a_list(void **state)
{
        for (size_t a = 0; a < sizeof(abis) / sizeof(abis[0]); a++) {
                size_t worst = 0, total = 0;
                for (uint32_t nr = 0; nr < 512; nr++) {
                        size_t n = sandbox_filter_steps(&filter, abis[a].arch, abis[a].bit | nr);
                        total += n;
                        worst = n > worst ? n : worst;
                }
                double mean = total / 512.0;
                print_message("%s: %.1f instructions on average, %zu at most, of %u\n", abis[a].name, mean, worst,
                              filter.len);
                if (mean > STEPS_MEAN_MAX)
                        fail_msg("%s: a number walks %.1f instructions on average (at most %d)", abis[a].name, mean,
                                 STEPS_MEAN_MAX);
        }
}

/* Loaded for real, in a child: the kernel answers as the evaluation said. */
static void test_the_kernel_agrees(void **state)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sandbox_filter_load(&filter) < 0)
                        _exit(10);
                int sv[2];
                if (syscall(SYS_socketpair, 30 /* AF_TIPC */, SOCK_STREAM, 0, sv) != -1 || errno != EAFNOSUPPORT)
                        _exit(11);
                if (syscall(457, 0, 0, 0, 0) != -1 || errno != EPERM)
                        _exit(12);
                if (syscall(458, 0, 0, 0, 0) != -1 || errno != EPERM)
                        _exit(13);
                if (syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, sv) != 0)
                        _exit(14);
                if (syscall(SYS_socket, 41 /* AF_KCM */, SOCK_DGRAM, 0) != -1 || errno != EAFNOSUPPORT)
                        _exit(15);
                _exit(0);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_calls_newer_than_libseccomp_are_denied_on_every_abi),
                cmocka_unit_test(test_socket_and_socketpair_take_only_four_families),
                cmocka_unit_test(test_the_rest_of_the_policy),
                cmocka_unit_test(test_description_names_what_was_missing),
                cmocka_unit_test(test_the_built_in_program_is_the_policy_compiled),
                cmocka_unit_test(test_numbers_walk_a_tree_not_a_list),
                cmocka_unit_test(test_the_kernel_agrees),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
