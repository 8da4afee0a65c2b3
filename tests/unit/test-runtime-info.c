/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime manifest: the built-in one, the format's rules, Debian versions from a
 * dpkg status file, and the upstream part of a Debian version. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/runtime-info.h"

static const hxs_runtime_package *find(const hxs_runtime_info *ri, const char *debian)
{
        for (size_t i = 0; i < ri->n; i++)
                if (strcmp(ri->pkgs[i].debian, debian) == 0)
                        return &ri->pkgs[i];
        return NULL;
}

static void test_builtin_manifest(void **state)
{
        hxs_runtime_info ri;
        hxs_error err = { 0 };
        assert_int_equal(runtime_manifest_parse(embed_runtimes_txt, &ri, &err), 0);
        const hxs_runtime_package *p = find(&ri, "python3");
        assert_non_null(p);
        assert_true(p->interpreter && p->language == HXS_LANG_PYTHON);
        assert_true(find(&ri, "nodejs")->interpreter && find(&ri, "bash")->interpreter);
        static const char *const dists[][3] = {
                { "python3-matplotlib", "matplotlib", "matplotlib" }, { "python3-sklearn", "scikit-learn", "sklearn" },
                { "python3-pil", "Pillow", "PIL" }, { "python3-bs4", "beautifulsoup4", "bs4" },
                { "python3-seaborn", "seaborn", "seaborn" }, { "python3-tabulate", "tabulate", "tabulate" },
        };
        for (size_t i = 0; i < sizeof(dists) / sizeof(dists[0]); i++) {
                p = find(&ri, dists[i][0]);
                assert_non_null(p);
                assert_string_equal(p->distribution, dists[i][1]);
                assert_string_equal(p->import_name, dists[i][2]);
                assert_false(p->interpreter);
        }
        p = find(&ri, "tzdata");
        assert_true(p && p->language == HXS_LANG_MAX && !p->interpreter);
        assert_string_equal(ri.interpreter[HXS_LANG_PYTHON], "/usr/bin/python3");
}

static void test_format_rules(void **state)
{
        static const struct {
                const char *text, *needle;
        } bad[] = {
                { "python python3\nperl perl\njavascript nodejs\nbash bash\n", "line 2: language \"perl\"" },
                { "python python3 x\njavascript nodejs\nbash bash\n", "line 1: expected" },
                { "python python3\npython a b c d e\njavascript nodejs\nbash bash\n", "line 2: too many words" },
                { "python python3\npython python3\njavascript nodejs\nbash bash\n", "python3 is listed twice" },
                { "python python3\njavascript nodejs x y\nbash bash\n", "only python packages" },
                { "python python3-numpy numpy numpy\njavascript nodejs\nbash bash\n", "first package" },
                { "python python3\nbash bash\n", "no package for javascript" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                hxs_runtime_info ri;
                hxs_error err = { 0 };
                assert_true(runtime_manifest_parse(bad[i].text, &ri, &err) < 0);
                if (!strstr(err.message, bad[i].needle))
                        fail_msg("%zu: \"%s\" lacks \"%s\"", i, err.message, bad[i].needle);
        }
        /* comments, blank lines, tabs, no final newline */
        hxs_runtime_info ri;
        hxs_error err = { 0 };
        assert_int_equal(runtime_manifest_parse("# c\n\npython\tpython3 # the interpreter\n"
                                                "python  python3-x  X  x\r\njavascript nodejs\nbash bash",
                                                &ri, &err), 0);
        assert_int_equal(ri.n, 4);
        assert_string_equal(ri.pkgs[1].distribution, "X");
        assert_string_equal(ri.pkgs[1].import_name, "x");
        assert_string_equal(ri.pkgs[3].debian, "bash");
}

static void test_upstream_version(void **state)
{
        static const char *const cases[][2] = {
                { "1:1.24.2-1+deb12u1", "1.24.2" }, { "3.11.2-1+b1", "3.11.2" },
                { "20.20.2-1nodesource1+repack1", "20.20.2" }, { "1.5.3+dfsg-2", "1.5.3+dfsg" },
                { "2024a", "2024a" }, { "1.2-3-4", "1.2-3" }, { "", "" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char buf[64];
                runtime_upstream_version(cases[i][0], buf, sizeof(buf));
                assert_string_equal(buf, cases[i][1]);
        }
}

static void test_dpkg_status(void **state)
{
        char path[] = "/tmp/hxs-test-dpkg-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        static const char status[] =
                "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2+b8\n\n"
                "Package: nodejs\nStatus: deinstall ok config-files\nVersion: 18.0-1\n\n"
                "Package: python3\nStatus: install ok installed\nDescription: the\n interpreter\n"
                "Version: 3.11.2-1+b1\n\n"
                "Package: python3-numpy\nStatus: install ok half-installed\nVersion: 1:1.0-1\n\n"
                "Package: tzdata\nVersion: 2024a-0+deb12u1\nStatus: install ok installed";
        assert_int_equal(write(fd, status, strlen(status)), (ssize_t)strlen(status));
        close(fd);
        hxs_runtime_info ri;
        hxs_error err = { 0 };
        assert_int_equal(runtime_manifest_parse(embed_runtimes_txt, &ri, &err), 0);
        assert_int_equal(runtime_read_dpkg_status(&ri, path), 0);
        unlink(path);
        assert_string_equal(find(&ri, "bash")->debian_version, "5.2.15-2+b8");
        assert_string_equal(find(&ri, "nodejs")->debian_version, "");
        assert_string_equal(find(&ri, "python3")->debian_version, "3.11.2-1+b1");
        assert_string_equal(find(&ri, "python3-numpy")->debian_version, "");
        assert_string_equal(find(&ri, "tzdata")->debian_version, "2024a-0+deb12u1");
        assert_int_equal(runtime_read_dpkg_status(&ri, "/nonexistent/status"), -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_builtin_manifest),
                cmocka_unit_test(test_format_rules),
                cmocka_unit_test(test_upstream_version),
                cmocka_unit_test(test_dpkg_status),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
