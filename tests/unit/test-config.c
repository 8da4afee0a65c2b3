/* SPDX-License-Identifier: Apache-2.0 */
/* The settings table: defaults, every parser, bounds, and messages naming the setting. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hexr-sandbox/sandbox.h"

static void test_defaults(void **state)
{
        hxs_config c;
        hxs_config_defaults(&c);
        assert_int_equal(c.max_timeout_s, 30);
        assert_int_equal(c.max_memory_mb, 512);
        assert_int_equal(c.default_memory_mb, 256);
        assert_int_equal(c.max_output_bytes, 1 << 20);
        assert_string_equal(c.listen_address, "127.0.0.1:8080");
        assert_string_equal(c.firecracker_bin, "/usr/bin/firecracker");
        assert_int_equal(c.backend, HXS_BACKEND_AUTO);
        assert_int_equal(c.cpus_milli, 1000);
}

static void test_durations(void **state)
{
        hxs_config c;
        hxs_error err = { 0 };
        hxs_config_defaults(&c);
        assert_int_equal(hxs_config_set(&c, "MAX_EXECUTION_TIME", "45", &err), 0);
        assert_int_equal(c.max_timeout_s, 45);
        assert_int_equal(hxs_config_set(&c, "MAX_EXECUTION_TIME", "30s", &err), 0);
        assert_int_equal(c.max_timeout_s, 30);
        assert_int_equal(hxs_config_set(&c, "MAX_EXECUTION_TIME", "2m", &err), 0);
        assert_int_equal(c.max_timeout_s, 120);
        assert_int_equal(hxs_config_set(&c, "MAX_EXECUTION_TIME", "1h", &err), 0);
        assert_int_equal(c.max_timeout_s, 3600);
        static const char *const bad[] = { "", "-5", "5x", "1.5s", "s", " 5", "0", "99999999999999999999", "25h" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                assert_true(hxs_config_set(&c, "MAX_EXECUTION_TIME", bad[i], &err) < 0);
                assert_string_equal(err.field, "MAX_EXECUTION_TIME");
                assert_non_null(strstr(err.message, "MAX_EXECUTION_TIME"));
        }
        assert_int_equal(c.max_timeout_s, 3600); /* unchanged by failures */
}

static void test_sizes_and_cpus(void **state)
{
        hxs_config c;
        hxs_error err = { 0 };
        hxs_config_defaults(&c);
        assert_int_equal(hxs_config_set(&c, "MAX_OUTPUT_BYTES", "64k", &err), 0);
        assert_int_equal(c.max_output_bytes, 65536);
        assert_int_equal(hxs_config_set(&c, "MAX_OUTPUT_BYTES", "2M", &err), 0);
        assert_int_equal(c.max_output_bytes, 2 << 20);
        assert_true(hxs_config_set(&c, "MAX_OUTPUT_BYTES", "10", &err) < 0); /* below 1024 */
        assert_non_null(strstr(err.message, "outside"));
        assert_int_equal(hxs_config_set(&c, "SANDBOX_CPUS", "0.5", &err), 0);
        assert_int_equal(c.cpus_milli, 500);
        assert_int_equal(hxs_config_set(&c, "SANDBOX_CPUS", "2", &err), 0);
        assert_int_equal(c.cpus_milli, 2000);
        assert_true(hxs_config_set(&c, "SANDBOX_CPUS", "1.", &err) < 0);
        assert_true(hxs_config_set(&c, "SANDBOX_CPUS", "abc", &err) < 0);
        assert_true(hxs_config_set(&c, "MAX_MEMORY_MB", "1M", &err) < 0); /* plain numbers only */
}

static void test_listen_and_backend(void **state)
{
        hxs_config c;
        hxs_error err = { 0 };
        hxs_config_defaults(&c);
        static const char *const good[] = { ":8080", "0.0.0.0:1", "[::1]:8080", "unix:/run/x.sock", "localhost:65535", "127.0.0.1:0" };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                assert_int_equal(hxs_config_set(&c, "LISTEN_ADDRESS", good[i], &err), 0);
        static const char *const bad[] = { "8080", ":0x50", "host:", ":70000", "unix:relative", ":-1" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_true(hxs_config_set(&c, "LISTEN_ADDRESS", bad[i], &err) < 0);
                assert_string_equal(err.field, "LISTEN_ADDRESS");
        }
        assert_int_equal(hxs_config_set(&c, "SANDBOX_BACKEND", "namespaces", &err), 0);
        assert_int_equal(c.backend, HXS_BACKEND_NAMESPACES);
        assert_true(hxs_config_set(&c, "SANDBOX_BACKEND", "docker", &err) < 0);
        assert_non_null(strstr(err.message, "auto, namespaces, qemu, firecracker"));
        assert_true(hxs_config_set(&c, "NO_SUCH_SETTING", "1", &err) < 0);
}

static void test_from_env(void **state)
{
        hxs_config c;
        hxs_error err = { 0 };
        setenv("MAX_MEMORY_MB", "1024", 1);
        setenv("MAX_EXECUTION_TIME", "10s", 1);
        assert_int_equal(hxs_config_from_env(&c, &err), 0);
        assert_int_equal(c.max_memory_mb, 1024);
        assert_int_equal(c.max_timeout_s, 10);
        assert_int_equal(c.default_timeout_s, 10); /* defaults follow a lower maximum */
        setenv("MAX_MEMORY_MB", "lots", 1);
        assert_true(hxs_config_from_env(&c, &err) < 0);
        assert_non_null(strstr(err.message, "MAX_MEMORY_MB"));
        unsetenv("MAX_MEMORY_MB");
        setenv("STATE_DIR", "relative/dir", 1);
        assert_true(hxs_config_from_env(&c, &err) < 0);
        assert_string_equal(err.field, "STATE_DIR");
        unsetenv("STATE_DIR");
        unsetenv("MAX_EXECUTION_TIME");
        /* the package index: empty, or an http(s) URL with a host */
        setenv("PACKAGES_INDEX_URL", "", 1);
        assert_int_equal(hxs_config_from_env(&c, &err), 0);
        setenv("PACKAGES_INDEX_URL", "https://127.0.0.1:1/simple/", 1);
        assert_int_equal(hxs_config_from_env(&c, &err), 0);
        assert_string_equal(c.packages_index_url, "https://127.0.0.1:1/simple/");
        static const char *const bad_urls[] = { "ftp://127.0.0.1/simple", "127.0.0.1/simple", "http://",
                                                "http:///simple", "http://127.0.0.1/a b", "file:///srv/simple",
                                                "--index-url=http://127.0.0.1/" };
        for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
                setenv("PACKAGES_INDEX_URL", bad_urls[i], 1);
                assert_true(hxs_config_from_env(&c, &err) < 0);
                assert_string_equal(err.field, "PACKAGES_INDEX_URL");
                assert_non_null(strstr(err.message, "http:// or https://"));
        }
        unsetenv("PACKAGES_INDEX_URL");
        /* the wheelhouse: an existing directory, by absolute path */
        setenv("PACKAGES_WHEELHOUSE", "/tmp", 1);
        assert_int_equal(hxs_config_from_env(&c, &err), 0);
        assert_string_equal(c.packages_wheelhouse, "/tmp");
        static const char *const bad_houses[] = { "relative/dir", "/no/such/wheelhouse", "/dev/null" };
        for (size_t i = 0; i < sizeof(bad_houses) / sizeof(bad_houses[0]); i++) {
                setenv("PACKAGES_WHEELHOUSE", bad_houses[i], 1);
                assert_true(hxs_config_from_env(&c, &err) < 0);
                assert_string_equal(err.field, "PACKAGES_WHEELHOUSE");
        }
        unsetenv("PACKAGES_WHEELHOUSE");
        setenv("PACKAGES_CACHE_DIR", "cache", 1);
        assert_true(hxs_config_from_env(&c, &err) < 0);
        assert_string_equal(err.field, "PACKAGES_CACHE_DIR");
        unsetenv("PACKAGES_CACHE_DIR");
        setenv("PACKAGES_CACHE_MB", "2000000", 1);
        assert_true(hxs_config_from_env(&c, &err) < 0);
        assert_string_equal(err.field, "PACKAGES_CACHE_MB");
        setenv("PACKAGES_CACHE_MB", "15", 1);
        assert_true(hxs_config_from_env(&c, &err) < 0);
        unsetenv("PACKAGES_CACHE_MB");
}

static void test_identity_settings(void **state)
{
        hxs_config c;
        hxs_error err = { 0 };

        hxs_config_defaults(&c);
        assert_false(c.allow_non_loopback);
        assert_int_equal(c.quota_concurrent, 0);
        assert_int_equal(c.quota_per_minute, 0);
        assert_int_equal(c.quota_queue, 16);
        assert_int_equal(c.metrics_callers, 20);
        assert_int_equal(c.execution_records, 1024);
        assert_string_equal(c.tls_cert_file, "");

        /* every numeric limit has a maximum */
        assert_int_equal(hxs_config_set(&c, "QUOTA_PER_MINUTE", "1000000", &err), 0);
        assert_true(hxs_config_set(&c, "QUOTA_PER_MINUTE", "1000001", &err) < 0);
        assert_string_equal(err.field, "QUOTA_PER_MINUTE");
        assert_true(hxs_config_set(&c, "QUOTA_CONCURRENT_PER_CALLER", "4097", &err) < 0);
        assert_true(hxs_config_set(&c, "QUOTA_QUEUE_PER_CALLER", "100001", &err) < 0);
        assert_true(hxs_config_set(&c, "METRICS_CALLERS", "1001", &err) < 0);
        assert_true(hxs_config_set(&c, "EXECUTION_RECORDS", "0", &err) < 0);
        assert_true(hxs_config_set(&c, "EXECUTION_RECORDS", "100001", &err) < 0);
        assert_true(hxs_config_set(&c, "ALLOW_NON_LOOPBACK", "maybe", &err) < 0);
        assert_int_equal(hxs_config_set(&c, "ALLOW_NON_LOOPBACK", "on", &err), 0);
        assert_true(c.allow_non_loopback);

        /* TLS files pair up; the error names the one that was set */
        setenv("TLS_CERT_FILE", "/etc/hexr/cert.pem", 1);
        assert_true(hxs_config_from_env(&c, &err) < 0);
        assert_string_equal(err.field, "TLS_CERT_FILE");
        assert_non_null(strstr(err.message, "TLS_KEY_FILE"));
        setenv("TLS_KEY_FILE", "/etc/hexr/key.pem", 1);
        assert_int_equal(hxs_config_from_env(&c, &err), 0);
        unsetenv("TLS_CERT_FILE");
        assert_true(hxs_config_from_env(&c, &err) < 0);
        assert_string_equal(err.field, "TLS_KEY_FILE");
        unsetenv("TLS_KEY_FILE");
        setenv("TLS_CLIENT_CA_FILE", "/etc/hexr/bundle.pem", 1);
        assert_true(hxs_config_from_env(&c, &err) < 0);
        assert_string_equal(err.field, "TLS_CLIENT_CA_FILE");
        unsetenv("TLS_CLIENT_CA_FILE");
        assert_int_equal(hxs_config_from_env(&c, &err), 0);
}

static void test_table(void **state)
{
        /* every row documented, and the table is what --help prints */
        assert_true(hxs_settings_count() >= 8);
        for (size_t i = 0; i < hxs_settings_count(); i++) {
                const hxs_setting_info *s = hxs_settings_get(i);
                assert_non_null(s->env);
                assert_non_null(s->help);
                assert_true(strlen(s->help) > 10);
                /* one line, and one cell of docs/configuration.md's table */
                assert_null(strpbrk(s->help, "\n|"));
                hxs_setting_range r;
                assert_int_equal(hxs_settings_range(i, &r), 0);
                assert_true(r.kind < HXS_SETTING_KIND_MAX);
                assert_true(r.min <= r.max);
        }
        assert_null(hxs_settings_get(hxs_settings_count()));
        hxs_setting_range r = { .kind = HXS_SETTING_TEXT, .min = 7, .max = 7 };
        assert_int_equal(hxs_settings_range(hxs_settings_count(), &r), -ENOENT);
        assert_int_equal(r.min, 7);
        /* the bounds are the table's, in the kind's unit */
        for (size_t i = 0; i < hxs_settings_count(); i++) {
                const char *env = hxs_settings_get(i)->env;
                assert_int_equal(hxs_settings_range(i, &r), 0);
                if (strcmp(env, "MAX_EXECUTION_TIME") == 0) {
                        assert_int_equal(r.kind, HXS_SETTING_DURATION);
                        assert_int_equal(r.min, 1);
                        assert_int_equal(r.max, 24 * 3600);
                } else if (strcmp(env, "MAX_BODY_BYTES") == 0) {
                        assert_int_equal(r.kind, HXS_SETTING_BYTES);
                        assert_int_equal(r.min, 1024);
                        assert_int_equal(r.max, 1024u << 20);
                } else if (strcmp(env, "SANDBOX_CPUS") == 0) {
                        assert_int_equal(r.kind, HXS_SETTING_CORES);
                        assert_int_equal(r.min, 10);
                } else if (strcmp(env, "SANDBOX_WARM") == 0) {
                        assert_int_equal(r.kind, HXS_SETTING_SWITCH);
                }
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),     cmocka_unit_test(test_durations),
                cmocka_unit_test(test_sizes_and_cpus), cmocka_unit_test(test_listen_and_backend),
                cmocka_unit_test(test_from_env),     cmocka_unit_test(test_table),
                cmocka_unit_test(test_identity_settings),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
