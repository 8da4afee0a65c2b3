/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (the package cache's keys) against the FIPS 180-4 test vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/sha256.h"

static void hex_of(const void *data, size_t len, char out[65])
{
        sha256_ctx c;
        uint8_t d[32];
        sha256_init(&c);
        sha256_update(&c, data, len);
        sha256_final(&c, d);
        sha256_hex(d, out);
}

static void test_vectors(void **state)
{
        char h[65];
        hex_of("", 0, h);
        assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        hex_of("abc", 3, h);
        assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        hex_of(two, strlen(two), h);
        assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        /* one million 'a', fed in uneven pieces across block boundaries */
        sha256_ctx c;
        uint8_t d[32];
        char a[997];
        memset(a, 'a', sizeof(a));
        sha256_init(&c);
        size_t left = 1000000;
        while (left) {
                size_t n = left < sizeof(a) ? left : sizeof(a);
                sha256_update(&c, a, n);
                left -= n;
        }
        sha256_final(&c, d);
        sha256_hex(d, h);
        assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_file(void **state)
{
        char path[] = "/tmp/hxs-sha256-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "abc", 3), 3);
        close(fd);
        uint8_t d[32];
        char h[65];
        assert_int_equal(sha256_file(-100 /* AT_FDCWD */, path, d), 0);
        sha256_hex(d, h);
        assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        unlink(path);
        assert_true(sha256_file(-100, path, d) < 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_vectors),
                cmocka_unit_test(test_file),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
