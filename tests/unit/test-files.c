/* SPDX-License-Identifier: Apache-2.0 */
/* Files in and out: the path rule, the request's checks (each refusal naming the file),
 * the return globs, the mime table, and a result's "files" in JSON. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "engine/files-out.h"
#include "engine/json.h"
#include "engine/request.h"

static hxs_config cfg;

static void test_path_rule(void **state)
{
        static const struct {
                const char *in, *out;
        } ok[] = {
                { "a", "a" }, { "a//b/./c", "a/b/c" }, { "./x.csv", "x.csv" }, { "dir/", "dir" },
                { "output/plot.png", "output/plot.png" }, { "...", "..." }, { "a..b", "a..b" },
        };
        char out[REQUEST_PATH_MAX + 1];
        const char *why;
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                assert_int_equal(request_path_normalize(ok[i].in, out, sizeof(out), &why), 0);
                assert_string_equal(out, ok[i].out);
        }
        static const char *const bad[] = { "", "/etc/passwd", "..", "a/../b", "a/..", "./", ".", "a\nb",
                                           "tab\there", "del\x7f" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(request_path_normalize(bad[i], out, sizeof(out), &why), -EINVAL);
        char longp[300];
        memset(longp, 'x', sizeof(longp) - 1);
        longp[sizeof(longp) - 1] = '\0';
        assert_int_equal(request_path_normalize(longp, out, sizeof(out), &why), -EINVAL);
        assert_string_equal(why, "is longer than 255 bytes");
}

static hxs_request *request_with(const char *const *paths, size_t n)
{
        hxs_request *req = hxs_request_new();
        hxs_request_set_code(req, "1", 1);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(hxs_request_add_file(req, paths[i], "x", 1), 0);
        return req;
}

static void expect_refused(const char *const *paths, size_t n, const char *field, const char *subject)
{
        hxs_request *req = request_with(paths, n);
        hxs_error err = { 0 };
        assert_true(hxs_request_validate(req, &cfg, &err) < 0);
        assert_int_equal(err.kind, HXS_ERR_INVALID);
        assert_string_equal(err.field, field);
        if (subject)
                assert_string_equal(err.subject, subject);
        assert_non_null(strstr(err.message, field));
        hxs_request_free(req);
}

static void test_request_files_refused(void **state)
{
        const char *abs[] = { "ok.txt", "/etc/shadow" };
        expect_refused(abs, 2, "files[1].path", "/etc/shadow");
        const char *dots[] = { "../x" };
        expect_refused(dots, 1, "files[0].path", "../x");
        const char *twice[] = { "a/b.csv", "a//b.csv" };
        expect_refused(twice, 2, "files[1].path", "a/b.csv");
        const char *dir_vs_file[] = { "data/x.csv", "data" };
        expect_refused(dir_vs_file, 2, "files[0].path", "data/x.csv");
}

static void test_request_files_limits(void **state)
{
        hxs_config c = cfg;
        c.max_files = 2;
        const char *three[] = { "a", "b", "c" };
        hxs_request *req = request_with(three, 3);
        hxs_error err = { 0 };
        assert_int_equal(hxs_request_validate(req, &c, &err), -E2BIG);
        assert_string_equal(err.field, "files");
        hxs_request_free(req);

        c = cfg;
        c.max_file_bytes = 4;
        req = hxs_request_new();
        hxs_request_set_code(req, "1", 1);
        hxs_request_add_file(req, "small", "abcd", 4);
        hxs_request_add_file(req, "big.bin", "abcde", 5);
        assert_int_equal(hxs_request_validate(req, &c, &err), -E2BIG);
        assert_string_equal(err.field, "files[1].path");
        assert_string_equal(err.subject, "big.bin");
        hxs_request_free(req);

        c = cfg;
        c.max_files_bytes = 8;
        req = hxs_request_new();
        hxs_request_set_code(req, "1", 1);
        hxs_request_add_file(req, "a", "abcde", 5);
        hxs_request_add_file(req, "b", "abcde", 5);
        assert_int_equal(hxs_request_validate(req, &c, &err), -E2BIG);
        assert_string_equal(err.field, "files");
        hxs_request_free(req);
}

static void test_request_files_normalised_and_copied(void **state)
{
        hxs_request *req = hxs_request_new();
        hxs_request_set_code(req, "1", 1);
        int p[2];
        assert_int_equal(pipe(p), 0);
        assert_int_equal(hxs_request_add_file_fd(req, "in//data.csv", p[0], 10), 0);
        close(p[0]);  /* the request holds its own */
        assert_int_equal(hxs_request_add_return_glob(req, "./*.png"), 0);
        hxs_error err = { 0 };
        assert_int_equal(hxs_request_validate(req, &cfg, &err), 0);
        assert_string_equal(req->files[0].path, "in/data.csv");
        assert_true(req->files[0].fd >= 0);
        assert_string_equal(req->return_globs[0], "*.png");
        hxs_request *copy;
        assert_int_equal(request_dup(req, &copy), 0);
        assert_int_equal(copy->n_files, 1);
        assert_true(copy->files[0].fd >= 0 && copy->files[0].fd != req->files[0].fd);
        assert_int_equal(copy->files[0].size, 10);
        hxs_request_free(copy);
        hxs_request_free(req);
        close(p[1]);
}

static void test_globs(void **state)
{
        assert_true(files_glob_match("*.csv", "a.csv"));
        assert_false(files_glob_match("*.csv", "d/a.csv")); /* * stays in its directory */
        assert_true(files_glob_match("**/*.csv", "d/e/a.csv"));
        assert_true(files_glob_match("**/*.csv", "a.csv"));  /* ** may be no directory */
        assert_true(files_glob_match("d/**", "d/e/f"));
        assert_false(files_glob_match("d/**", "e/f"));
        assert_true(files_glob_match("r?port.[tm]d", "report.md"));
        assert_false(files_glob_match("*", ".hidden"));
}

static void test_mime(void **state)
{
        assert_string_equal(files_mime("output/figure-1.png"), "image/png");
        assert_string_equal(files_mime("data.CSV"), "text/csv");
        assert_string_equal(files_mime("a.tar.gz"), "application/gzip");
        assert_string_equal(files_mime("noext"), "application/octet-stream");
        assert_string_equal(files_mime("dir.d/noext"), "application/octet-stream");
}

static void test_files_in_json(void **state)
{
        hxs_result res = { 0 };
        res.files = calloc(2, sizeof(hxs_file));
        res.n_files = 2;
        res.files[0] = (hxs_file){ .path = strdup("output/a.txt"), .data = (unsigned char *)strdup("hi"), .len = 2,
                                   .size = 2, .mime = "text/plain" };
        res.files[1] = (hxs_file){ .path = strdup("output/b.png"), .data = malloc(3), .len = 3, .size = 3,
                                   .mime = "image/png" };
        memcpy(res.files[1].data, "\x89PN", 3);
        json_t *o = result_to_json(&res, NULL);
        json_t *f = json_object_get(o, "files");
        assert_int_equal(json_array_size(f), 2);
        json_t *a = json_array_get(f, 0), *b = json_array_get(f, 1);
        assert_string_equal(json_string_value(json_object_get(a, "encoding")), "utf-8");
        assert_string_equal(json_string_value(json_object_get(a, "content")), "hi");
        assert_string_equal(json_string_value(json_object_get(b, "encoding")), "base64");
        assert_string_equal(json_string_value(json_object_get(b, "content")), "iVBO");
        assert_int_equal(json_integer_value(json_object_get(b, "size")), 3);
        assert_true(json_is_false(json_object_get(b, "truncated")));
        /* the direct writer says the same */
        char *dumped = json_dumps(o, JSON_COMPACT);
        size_t len;
        char *text = hxs_result_to_text(&res, NULL, &len);
        assert_string_equal(text, dumped);
        free(text);
        free(dumped);
        json_decref(o);
        hxs_result_clear(&res);
}

static int setup(void **state)
{
        hxs_config_defaults(&cfg);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_path_rule),          cmocka_unit_test(test_request_files_refused),
                cmocka_unit_test(test_request_files_limits), cmocka_unit_test(test_request_files_normalised_and_copied),
                cmocka_unit_test(test_globs),              cmocka_unit_test(test_mime),
                cmocka_unit_test(test_files_in_json),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
