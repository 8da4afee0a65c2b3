/* SPDX-License-Identifier: Apache-2.0 */
/* Files in, through the namespace backend's memfd: what the supervisor stages (bytes
 * and an fd's content) is what the set-up writes out, with its directories, modes and
 * owner; a path that already exists is not overwritten. */
#include <errno.h>
#include <fcntl.h>
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

#include "ns/ns-files.h"

static char dir[64];

static int setup(void **state)
{
        snprintf(dir, sizeof(dir), "/tmp/hxs-ns-files-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static void read_back(const char *rel, const char *want, size_t want_len, mode_t mode)
{
        char p[256], buf[4096];
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        int fd = open(p, O_RDONLY);
        assert_true(fd >= 0);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_mode & 07777, mode);
        assert_int_equal(st.st_uid, getuid());
        ssize_t n = read(fd, buf, sizeof(buf));
        close(fd);
        assert_int_equal(n, (ssize_t)want_len);
        assert_memory_equal(buf, want, want_len);
}

static void test_round_trip(void **state)
{
        char src[64];
        snprintf(src, sizeof(src), "%s.src", dir);
        int sfd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0600);
        assert_true(sfd >= 0);
        assert_int_equal(write(sfd, "from-an-fd", 10), 10);
        unlink(src);

        hxs_request *req = hxs_request_new();
        assert_int_equal(hxs_request_add_file(req, "a.txt", "alpha", 5), 0);
        assert_int_equal(hxs_request_add_file(req, "d/e/empty", "", 0), 0);
        assert_int_equal(hxs_request_add_file_fd(req, "d/fd.bin", sfd, 10), 0);
        close(sfd);
        int bundle = ns_files_bundle(req);
        assert_true(bundle >= 0);
        /* sealed: nothing can change it on the way */
        assert_true(write(bundle, "x", 1) < 0);

        char why[300];
        assert_int_equal(ns_files_unpack(bundle, dir, getuid(), getgid(), why, sizeof(why)), 0);
        close(bundle);
        read_back("a.txt", "alpha", 5, 0644);
        read_back("d/e/empty", "", 0, 0644);
        read_back("d/fd.bin", "from-an-fd", 10, 0644);
        struct stat st;
        char p[256];
        snprintf(p, sizeof(p), "%s/d/e", dir);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);

        /* again into the same directory: the first file exists, and is refused */
        bundle = ns_files_bundle(req);
        assert_int_equal(ns_files_unpack(bundle, dir, getuid(), getgid(), why, sizeof(why)), -EEXIST);
        assert_non_null(strstr(why, "a.txt"));
        close(bundle);
        hxs_request_free(req);
}

static void test_fd_shorter_than_said(void **state)
{
        int p[2];
        assert_int_equal(pipe(p), 0);
        close(p[1]);
        hxs_request *req = hxs_request_new();
        assert_int_equal(hxs_request_add_file_fd(req, "short", p[0], 100), 0);
        close(p[0]);
        assert_true(ns_files_bundle(req) < 0);
        hxs_request_free(req);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
                cmocka_unit_test(test_fd_shorter_than_said),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
