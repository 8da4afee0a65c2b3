/* SPDX-License-Identifier: Apache-2.0 */
/* Multipart uploads (upload.c) against the service's staging room: every byte staged is
 * counted on the shared counter, an upload that would go over UPLOAD_STAGING_BYTES
 * fails with -EBUSY naming it, and each way an upload ends (refused, freed after its
 * request) gives its bytes back, so the counter returns to zero. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/upload.h"

#define CT "multipart/form-data; boundary=XyZ"
/* The parser holds back what could start the next delimiter ("\r\n--XyZ" less one) */
#define HELD 6

static hxs_config cfg;

static int setup(void **state)
{
        (void)state;
        hxs_config_defaults(&cfg);
        snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", "/tmp");
        cfg.upload_staging_bytes = 1000;
        return 0;
}

/* The head of a body: its request part and one file part's headers. */
static void feed_head(upload *u, const char *name)
{
        char head[512];
        hxs_error err = { 0 };
        int n = snprintf(head, sizeof(head),
                         "--XyZ\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n"
                         "{\"language\":\"python\",\"code\":\"pass\"}\r\n"
                         "--XyZ\r\nContent-Disposition: form-data; name=\"files\"; filename=\"%s\"\r\n\r\n",
                         name);
        assert_int_equal(upload_feed(u, head, (size_t)n, &err), 0);
}

static int feed_bytes(upload *u, size_t len, hxs_error *err)
{
        char buf[256];
        memset(buf, 'a', sizeof(buf));
        while (len) {
                size_t n = len < sizeof(buf) ? len : sizeof(buf);
                int r = upload_feed(u, buf, n, err);
                if (r < 0)
                        return r;
                len -= n;
        }
        return 0;
}

static void test_counted_refused_released(void **state)
{
        (void)state;
        uint64_t staged = 0;
        hxs_error err = { 0 };
        upload *a = NULL, *b = NULL;

        assert_int_equal(upload_new(&cfg, &staged, CT, &a, &err), 0);
        feed_head(a, "a.bin");
        assert_int_equal(feed_bytes(a, 600, &err), 0);
        assert_int_equal(staged, 600 - HELD);

        assert_int_equal(upload_new(&cfg, &staged, CT, &b, &err), 0);
        feed_head(b, "b.bin");
        assert_int_equal(feed_bytes(b, 300, &err), 0);
        assert_int_equal(staged, 900 - 2 * HELD);
        /* b goes over: refused, and what it staged is given back at once */
        assert_int_equal(feed_bytes(b, 300, &err), -EBUSY);
        assert_non_null(strstr(err.message, "UPLOAD_STAGING_BYTES"));
        assert_string_equal(err.field, "files");
        assert_int_equal(staged, 600 - HELD);
        assert_int_equal(feed_bytes(b, 300, &(hxs_error){ 0 }), 0); /* the rest is dropped */
        assert_int_equal(staged, 600 - HELD);
        upload_free(b);
        assert_int_equal(staged, 600 - HELD);

        /* a's request holds its files until it is freed */
        hxs_request *req = NULL;
        assert_int_equal(upload_feed(a, "\r\n--XyZ--\r\n", 11, &err), 0);
        assert_int_equal(upload_finish(a, &req, &err), 0);
        assert_int_equal(staged, 600);
        hxs_request_free(req);
        upload_free(a);
        assert_int_equal(staged, 0);

        /* room again */
        assert_int_equal(upload_new(&cfg, &staged, CT, &b, &err), 0);
        feed_head(b, "c.bin");
        assert_int_equal(feed_bytes(b, 1000, &err), 0);
        assert_int_equal(staged, 1000 - HELD);
        upload_free(b);
        assert_int_equal(staged, 0);
}

/* Any other failure (a file over MAX_FILE_BYTES) gives the bytes back too. */
static void test_too_large_releases(void **state)
{
        (void)state;
        uint64_t staged = 0;
        hxs_error err = { 0 };
        upload *u = NULL;
        uint32_t saved = cfg.max_file_bytes;

        cfg.max_file_bytes = 100;
        assert_int_equal(upload_new(&cfg, &staged, CT, &u, &err), 0);
        feed_head(u, "big.bin");
        assert_int_equal(feed_bytes(u, 100 + HELD, &err), 0);
        assert_int_equal(staged, 100);
        assert_int_equal(feed_bytes(u, 1, &err), -E2BIG);
        assert_int_equal(staged, 0);
        upload_free(u);
        assert_int_equal(staged, 0);
        cfg.max_file_bytes = saved;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_counted_refused_released, setup),
                cmocka_unit_test_setup(test_too_large_releases, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
