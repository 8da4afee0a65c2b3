/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the settings parser, hxs_config_set and hxs_config_from_env.
 *
 * Input: up to 16 records "<selector byte><value bytes>" separated by NUL (an
 * environment value cannot hold NUL). The selector picks the setting
 * hxs_settings_get(selector % count); selector 0xFF instead takes "<NAME>=<value>" with
 * a fuzzed name.
 *
 * Invariants:
 *  - hxs_config_set succeeds: every field of the configuration is within its
 *    documented range (the table below restates config.c's bounds) and a string
 *    setting holds exactly the value;
 *  - it fails: -EINVAL, -ERANGE or -ENOENT, kind HXS_ERR_INVALID, err.field is the
 *    variable, err.message is NUL-terminated and names it, and the configuration is
 *    unchanged;
 *  - hxs_config_from_env, with the records in the environment, fails exactly when one
 *    of the values fails on its own, a path is not absolute or the TLS files do not pair
 *    up (certificate and key together, a client CA only with them); when it succeeds, the
 *    ranges hold and the defaults do not exceed the maxima.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hexr-sandbox/sandbox.h"
#include "fuzz.h"


enum kind { NUM, STR, BACKEND, ACCEL, LISTEN, BOOL };

/* The documented ranges (README/--help), restated independently of config.c. */
static const struct range {
        const char *env;
        enum kind kind;
        size_t offset;
        uint64_t min, max;
} ranges[] = {
#define N(e, f, lo, hi) { e, NUM, offsetof(hxs_config, f), lo, hi }
#define S(e, f) { e, STR, offsetof(hxs_config, f), 0, sizeof(((hxs_config *)0)->f) - 1 }
        N("MAX_EXECUTION_TIME", max_timeout_s, 1, 86400),
        N("MAX_MEMORY_MB", max_memory_mb, 16, 1048576),
        { "LISTEN_ADDRESS", LISTEN, offsetof(hxs_config, listen_address), 0, 255 },
        S("FIRECRACKER_BIN", firecracker_bin),
        { "SANDBOX_BACKEND", BACKEND, offsetof(hxs_config, backend), 0, HXS_BACKEND_MAX - 1 },
        S("QEMU_BIN", qemu_bin),
        S("SANDBOX_VM_IMAGE_DIR", vm_image_dir),
        { "SANDBOX_VM_ACCEL", ACCEL, offsetof(hxs_config, vm_accel), 0, HXS_VM_ACCEL_MAX - 1 },
        N("VM_POOL_SIZE", vm_pool_size, 0, 64),
        N("VM_POOL_MEMORY_MB", vm_pool_memory_mb, 0, 1048576),
        N("MAX_CONCURRENT", max_concurrent, 0, 4096),
        N("MAX_QUEUE", max_queue, 0, 100000),
        N("QUEUE_TIMEOUT", queue_timeout_s, 0, 3600),
        N("DEFAULT_TIMEOUT", default_timeout_s, 1, 86400),
        N("DEFAULT_MEMORY_MB", default_memory_mb, 16, 1048576),
        N("MAX_CODE_BYTES", max_code_bytes, 1, 256u << 20),
        N("MAX_OUTPUT_BYTES", max_output_bytes, 1024, 256u << 20),
        N("MAX_STDIN_BYTES", max_stdin_bytes, 0, 256u << 20),
        N("MAX_STREAM_BYTES", max_stream_bytes, 1024, 4095u << 20),
        N("MAX_FILES", max_files, 0, 10000),
        N("MAX_FILE_BYTES", max_file_bytes, 0, 1u << 30),
        N("MAX_FILES_BYTES", max_files_bytes, 0, 4095u << 20),
        N("MAX_RETURN_FILES", max_return_files, 0, 10000),
        N("MAX_RETURN_BYTES", max_return_bytes, 0, 1u << 30),
        N("MAX_ENV_VARS", max_env_vars, 0, 100000),
        N("MAX_ENV_BYTES", max_env_bytes, 0, 16u << 20),
        N("MAX_PACKAGES", max_packages, 0, 1000),
        N("MAX_BODY_BYTES", max_body_bytes, 1024, 1024u << 20),
        N("MAX_CONNECTIONS", max_connections, 4, 65536),
        N("MAX_CONNECTIONS_PER_ADDRESS", max_connections_per_address, 1, 65536),
        N("HANDSHAKE_TIMEOUT", handshake_timeout_s, 1, 60),
        N("DRAIN_TIMEOUT", drain_timeout_s, 0, 3600),
        N("SANDBOX_TMPFS_MB", tmpfs_mb, 1, 1048576),
        N("SANDBOX_PIDS_MAX", pids_max, 8, 1u << 22),
        N("SANDBOX_CPUS", cpus_milli, 10, 1024000),
        N("SANDBOX_NOFILE", nofile, 16, 1u << 20),
        N("SANDBOX_UID_BASE", uid_base, 1000, 4000000000u),
        N("SANDBOX_INOTIFY_INSTANCES", inotify_instances, 1, 65536),
        N("SANDBOX_INOTIFY_WATCHES", inotify_watches, 1, 1u << 22),
        { "SANDBOX_WARM", BOOL, offsetof(hxs_config, warm), 0, 1 },
        N("SANDBOX_TEMPLATE_MEMORY_MB", template_memory_mb, 64, 64 * 1024),
        S("SANDBOX_ROOTFS", rootfs),
        S("STATE_DIR", state_dir),
        S("PACKAGES_WHEELHOUSE", packages_wheelhouse),
        S("PACKAGES_INDEX_URL", packages_index_url),
        S("TLS_CERT_FILE", tls_cert_file),
        S("TLS_KEY_FILE", tls_key_file),
        S("TLS_CLIENT_CA_FILE", tls_client_ca_file),
        S("SPIFFE_TRUST_BUNDLES", spiffe_trust_bundles),
        S("SPIFFE_TRUST_DOMAIN", spiffe_trust_domain),
        S("AUTH_ALLOW", auth_allow),
        S("TRUSTED_PROXIES", trusted_proxies),
        { "ALLOW_NON_LOOPBACK", BOOL, offsetof(hxs_config, allow_non_loopback), 0, 1 },
        N("QUOTA_CONCURRENT_PER_CALLER", quota_concurrent, 0, 4096),
        N("QUOTA_RUNNING_PER_CALLER", quota_running, 0, 4096),
        N("QUOTA_PER_MINUTE", quota_per_minute, 0, 1000000),
        N("QUOTA_QUEUE_PER_CALLER", quota_queue, 0, 100000),
        S("METRICS_ALLOW", metrics_allow),
        N("METRICS_CALLERS", metrics_callers, 0, 1000),
        N("EXECUTION_RECORDS", execution_records, 1, 100000),
        S("PACKAGES_CACHE_DIR", packages_cache_dir),
        N("PACKAGES_CACHE_MB", packages_cache_mb, 16, 1048576),
#undef N
#undef S
};

#define N_RANGES (sizeof(ranges) / sizeof(ranges[0]))
#define MAX_RECORDS 16

static const struct range *range_of(const char *env)
{
        for (size_t i = 0; i < N_RANGES; i++)
                if (strcmp(ranges[i].env, env) == 0)
                        return &ranges[i];
        return NULL;
}

static bool is_setting(const char *env)
{
        for (size_t i = 0; i < hxs_settings_count(); i++)
                if (strcmp(hxs_settings_get(i)->env, env) == 0)
                        return true;
        return false;
}

static void unset_all(void)
{
        for (size_t i = 0; i < hxs_settings_count(); i++)
                unsetenv(hxs_settings_get(i)->env);
}

static void setup(void)
{
        static bool done;
        if (done)
                return;
        CHECK(hxs_settings_get(hxs_settings_count()) == NULL);
        for (size_t i = 0; i < N_RANGES; i++)
                CHECK(is_setting(ranges[i].env));
        hxs_config d;
        hxs_config_defaults(&d);
        for (size_t i = 0; i < hxs_settings_count(); i++) {
                const hxs_setting_info *s = hxs_settings_get(i);
                hxs_error err = { 0 };
                /* A new setting is fuzzed too, but its range is only checked once it
                 * is added to ranges[]. */
                if (!range_of(s->env))
                        fprintf(stderr, "fuzz-config: %s has no entry in ranges[]\n", s->env);
                CHECK(hxs_config_set(&d, s->env, s->default_text, &err) == 0);
        }
        unset_all();
        done = true;
}

static void check_ranges(const hxs_config *cfg)
{
        for (size_t i = 0; i < N_RANGES; i++) {
                const struct range *r = &ranges[i];
                const char *base = (const char *)cfg + r->offset;
                if (r->kind == NUM || r->kind == BACKEND || r->kind == ACCEL) {
                        uint32_t v;
                        memcpy(&v, base, sizeof(v));
                        if (v < r->min || v > r->max)
                                fprintf(stderr, "%s = %u outside %llu..%llu\n", r->env, v,
                                        (unsigned long long)r->min, (unsigned long long)r->max);
                        CHECK(v >= r->min && v <= r->max);
                } else if (r->kind == BOOL) {
                        unsigned char b;
                        memcpy(&b, base, 1);
                        CHECK(b <= 1);
                } else {
                        CHECK(memchr(base, '\0', r->max + 1) != NULL);
                }
        }
        /* LISTEN_ADDRESS is host:port with a port 0..65535 (0: any free port), or unix:/path. */
        const char *l = cfg->listen_address;
        if (strncmp(l, "unix:", 5) == 0) {
                CHECK(l[5] == '/');
        } else {
                const char *colon = strrchr(l, ':');
                CHECK(colon != NULL);
                char *end;
                unsigned long port = strtoul(colon + 1, &end, 10);
                CHECK(colon[1] >= '0' && colon[1] <= '9' && *end == '\0');
                CHECK(port <= 65535);
        }
}

static bool terminated(const char *s, size_t cap)
{
        return memchr(s, '\0', cap) != NULL;
}

/* One hxs_config_set on cfg, with the invariants. Returns its result. */
static int set_one(hxs_config *cfg, const char *name, const char *value)
{
        hxs_config before;
        hxs_error err;
        memcpy(&before, cfg, sizeof(before));
        memset(&err, 0, sizeof(err));

        int r = hxs_config_set(cfg, name, value, &err);
        const struct range *rg = range_of(name);
        if (r == 0) {
                CHECK(is_setting(name));
                check_ranges(cfg);
                if (!rg)
                        return 0;
                const char *base = (const char *)cfg + rg->offset;
                if (rg->kind == STR || rg->kind == LISTEN)
                        CHECK(strcmp(base, value) == 0);
                if (rg->kind == BACKEND)
                        CHECK(strcmp(hxs_backend_name(cfg->backend), value) == 0);
                if (rg->kind == ACCEL)
                        CHECK(strcmp(hxs_vm_accel_name(cfg->vm_accel), value) == 0);
                if (rg->kind == BOOL) {
                        bool on = strcmp(value, "on") == 0 || strcmp(value, "true") == 0 ||
                                  strcmp(value, "1") == 0 || strcmp(value, "yes") == 0;
                        bool off = strcmp(value, "off") == 0 || strcmp(value, "false") == 0 ||
                                   strcmp(value, "0") == 0 || strcmp(value, "no") == 0;
                        CHECK(on || off);
                        CHECK(*(const bool *)base == on);
                }
                /* Only the one field changed. */
                hxs_config tmp;
                memcpy(&tmp, cfg, sizeof(tmp));
                size_t width = rg->kind == STR || rg->kind == LISTEN ? rg->max + 1 :
                               rg->kind == BOOL ? sizeof(bool) : 4;
                memcpy((char *)&tmp + rg->offset, (const char *)&before + rg->offset, width);
                CHECK(memcmp(&tmp, &before, sizeof(tmp)) == 0);
                return 0;
        }
        CHECK(r == -EINVAL || r == -ERANGE || r == -ENOENT);
        CHECK(memcmp(cfg, &before, sizeof(before)) == 0);
        CHECK(err.kind == HXS_ERR_INVALID);
        CHECK(terminated(err.message, sizeof(err.message)));
        CHECK(terminated(err.field, sizeof(err.field)));
        if (is_setting(name)) {
                CHECK(r != -ENOENT);
                CHECK(strcmp(err.field, name) == 0);
                CHECK(strstr(err.message, name) != NULL);
        } else {
                CHECK(r == -ENOENT);
                /* Names the variable, as far as the message holds it. */
                size_t n = strlen(name);
                size_t room = sizeof(err.message) - 1;
                CHECK(strncmp(err.message, name, n < room ? n : room) == 0);
                CHECK(strncmp(err.field, name, sizeof(err.field) - 1) == 0);
        }
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        setup();

        /* Split into NUL-terminated records (a copy we may write into). */
        char *buf = malloc(size + 1);
        CHECK(buf != NULL);
        memcpy(buf, data, size);
        buf[size] = '\0';

        const char *names[MAX_RECORDS], *values[MAX_RECORDS];
        size_t n = 0, count = hxs_settings_count();
        for (size_t at = 0; at < size && n < MAX_RECORDS;) {
                unsigned char sel = (unsigned char)buf[at];
                char *rest = buf + at + 1;
                size_t len = strlen(rest);
                at += 1 + len + 1;
                if (sel == 0xFF) {
                        char *eq = strchr(rest, '=');
                        if (!eq)
                                continue;
                        *eq = '\0';
                        names[n] = rest;
                        values[n] = eq + 1;
                } else {
                        names[n] = hxs_settings_get(sel % count)->env;
                        values[n] = rest;
                }
                n++;
        }

        /* One after the other on one configuration. */
        hxs_config cfg;
        hxs_config_defaults(&cfg);
        check_ranges(&cfg);
        for (size_t i = 0; i < n; i++)
                set_one(&cfg, names[i], values[i]);

        /* The same through the environment: the last value of each variable counts. */
        bool expect_fail = false;
        hxs_config single;
        for (size_t i = 0; i < n; i++) {
                if (!is_setting(names[i]))
                        continue;
                CHECK(setenv(names[i], values[i], 1) == 0);
        }
        hxs_config_defaults(&single);
        for (size_t i = 0; i < count; i++) {
                const char *env = hxs_settings_get(i)->env;
                const char *v = getenv(env);
                if (v && set_one(&single, env, v) < 0)
                        expect_fail = true;
        }
        if (single.state_dir[0] != '/' || (single.rootfs[0] && single.rootfs[0] != '/') ||
            single.vm_image_dir[0] != '/' || single.qemu_bin[0] != '/' || single.firecracker_bin[0] != '/')
                expect_fail = true;
        /* TLS: certificate and key together; a client CA only with them */
        if (!single.tls_cert_file[0] != !single.tls_key_file[0] ||
            (single.tls_client_ca_file[0] && !single.tls_cert_file[0]))
                expect_fail = true;
        /* the whole-configuration rules of the package settings */
        struct stat st;
        if (single.packages_wheelhouse[0] &&
            (single.packages_wheelhouse[0] != '/' || stat(single.packages_wheelhouse, &st) < 0 || !S_ISDIR(st.st_mode)))
                expect_fail = true;
        if (single.packages_index_url[0]) {
                const char *u = single.packages_index_url;
                size_t sch = strncmp(u, "https://", 8) == 0 ? 8 : strncmp(u, "http://", 7) == 0 ? 7 : 0;
                bool ok = sch && u[sch] && u[sch] != '/';
                for (const char *ch = u; ok && *ch; ch++)
                        ok = (unsigned char)*ch > ' ' && (unsigned char)*ch < 0x7f;
                if (!ok)
                        expect_fail = true;
        }
        if (single.packages_cache_dir[0] != '/' || strstr(single.packages_cache_dir, "/../") ||
            strlen(single.packages_cache_dir) > 200)
                expect_fail = true;

        hxs_config env_cfg;
        hxs_error err;
        memset(&err, 0, sizeof(err));
        int r = hxs_config_from_env(&env_cfg, &err);
        CHECK((r < 0) == expect_fail);
        if (r == 0) {
                check_ranges(&env_cfg);
                CHECK(env_cfg.default_timeout_s <= env_cfg.max_timeout_s);
                CHECK(env_cfg.default_memory_mb <= env_cfg.max_memory_mb);
                CHECK(env_cfg.state_dir[0] == '/');
                CHECK(env_cfg.rootfs[0] == '\0' || env_cfg.rootfs[0] == '/');
        } else {
                CHECK(err.kind == HXS_ERR_INVALID);
                CHECK(terminated(err.message, sizeof(err.message)));
                CHECK(is_setting(err.field));
                CHECK(strstr(err.message, err.field) != NULL);
                CHECK(getenv(err.field) != NULL || strcmp(err.field, "STATE_DIR") == 0);
        }
        unset_all();
        free(buf);
        return 0;
}
