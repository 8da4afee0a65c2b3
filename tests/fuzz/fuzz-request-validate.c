/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: hxs_request_validate on requests built with the setters (what the CLI
 * and library callers do, without the JSON layer's filtering: env names and package
 * strings are any C strings), against fuzzed limits; then pkg_check of what was
 * accepted against a small image index.
 *
 * Input, consumed front to back (missing bytes read as 0):
 *   limits: max timeout, default timeout, max memory (x16 MB), default memory,
 *           max code, max stdin, max env vars, max env bytes (x4), max packages
 *   request: language (0..3; 3 = out of range), timeout, memory (u16), flags,
 *           code and stdin (length byte + bytes), env count, each name and value
 *           (length byte + bytes, cut at NUL), package count, each requirement.
 *
 * Invariants: on success, every limit holds, env names are POSIX names without
 * duplicates, requirements can never be a pip option, URL, path or marker, validating
 * again succeeds and pkg_check answers 0 or -ENOENT (python) / -EINVAL (others);
 * on failure, -EINVAL or -E2BIG with err naming the field.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pkg/packages.h"
#include "engine/request.h"
#include "fuzz.h"


typedef struct reader {
        const uint8_t *p;
        size_t n;
} reader;

static unsigned u8(reader *r)
{
        if (!r->n)
                return 0;
        r->n--;
        return *r->p++;
}

static unsigned u16(reader *r)
{
        unsigned hi = u8(r);
        return hi << 8 | u8(r);
}

/* A length byte, then that many bytes (fewer at the end). Returns a malloc'ed copy
 * of exactly *len bytes plus a NUL. */
static char *bytes(reader *r, size_t *len)
{
        size_t n = u8(r);
        if (n > r->n)
                n = r->n;
        char *s = malloc(n + 1);
        CHECK(s != NULL);
        memcpy(s, r->p, n);
        s[n] = '\0';
        r->p += n;
        r->n -= n;
        *len = n;
        return s;
}

static bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool env_name_ok(const char *s)
{
        if (!(is_alpha(s[0]) || s[0] == '_'))
                return false;
        for (const char *p = s + 1; *p; p++)
                if (!(is_alpha(*p) || is_digit(*p) || *p == '_'))
                        return false;
        return true;
}

/* An accepted requirement may have spaces between its parts; the canonical spelling,
 * which is what reaches pip, has none and starts with the name. */
static void check_requirement(const char *s)
{
        size_t len = strlen(s);
        CHECK(len >= 1 && len <= 200);
        for (const char *p = s; *p; p++)
                CHECK(is_alpha(*p) || is_digit(*p) || strchr("-_.[],=!<>~*+ \t", *p));
        char canon[256];
        const char *why = NULL;
        CHECK(pkg_canonical(s, canon, sizeof(canon), &why) == 0);
        CHECK(is_alpha(canon[0]) || is_digit(canon[0]));
        for (const char *p = canon; *p; p++)
                CHECK(is_alpha(*p) || is_digit(*p) || strchr("-_.[],=!<>~*+", *p));
}

static const pkg_req image[] = {
        { "numpy", "1.24.2" }, { "pandas", "1.5.3" }, { "requests", "2.28.1" },
        { "six", "1.16.0" },   { "pyyaml", "6.0" },   { "zope-interface", "5.5.2" },
        { "pre", "1.0rc1" },   { "post", "2.0.post1" }, { "empty", "" },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        reader rd = { data, size };
        hxs_config cfg;
        hxs_error err;
        size_t len;

        /* Limits within the documented ranges, defaults clamped as config.c does. */
        hxs_config_defaults(&cfg);
        cfg.max_timeout_s = 1 + u8(&rd);
        cfg.default_timeout_s = 1 + u8(&rd);
        cfg.max_memory_mb = 16 + 16 * u8(&rd);
        cfg.default_memory_mb = 16 + u8(&rd);
        cfg.max_code_bytes = 1 + u8(&rd);
        cfg.max_stdin_bytes = u8(&rd);
        cfg.max_env_vars = u8(&rd) % 20;
        cfg.max_env_bytes = 4 * u8(&rd);
        cfg.max_packages = u8(&rd) % 10;
        if (cfg.default_timeout_s > cfg.max_timeout_s)
                cfg.default_timeout_s = cfg.max_timeout_s;
        if (cfg.default_memory_mb > cfg.max_memory_mb)
                cfg.default_memory_mb = cfg.max_memory_mb;

        hxs_request *req = hxs_request_new();
        CHECK(req != NULL);
        unsigned lang = u8(&rd) % 4;
        if (lang < HXS_LANG_MAX)
                CHECK(hxs_request_set_language(req, (hxs_language)lang) == 0);
        else {
                CHECK(hxs_request_set_language(req, (hxs_language)lang) == -EINVAL);
                req->language = (hxs_language)lang; /* a caller that bypasses the setter */
        }
        hxs_request_set_timeout_s(req, u8(&rd));
        hxs_request_set_memory_mb(req, u16(&rd));
        unsigned flags = u8(&rd);
        char *s = bytes(&rd, &len);
        if (!(flags & 1))
                CHECK(hxs_request_set_code(req, s, len) == 0);
        free(s);
        s = bytes(&rd, &len);
        if (flags & 2)
                CHECK(hxs_request_set_stdin(req, s, len) == 0);
        free(s);
        unsigned n_env = u8(&rd) % 24;
        for (unsigned i = 0; i < n_env; i++) {
                char *name = bytes(&rd, &len), *value = bytes(&rd, &len);
                CHECK(hxs_request_add_env(req, name, value) == 0);
                free(name);
                free(value);
        }
        unsigned n_pkg = u8(&rd) % 12;
        for (unsigned i = 0; i < n_pkg; i++) {
                char *p = bytes(&rd, &len);
                CHECK(hxs_request_add_package(req, p) == 0);
                free(p);
        }

        memset(&err, 0, sizeof(err));
        int r = hxs_request_validate(req, &cfg, &err);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -E2BIG);
                CHECK(err.kind == HXS_ERR_INVALID);
                CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
                CHECK(err.field[0] != '\0');
                CHECK(strncmp(err.message, err.field, strlen(err.field)) == 0);
                hxs_request_free(req);
                return 0;
        }

        CHECK((unsigned)req->language < HXS_LANG_MAX);
        CHECK(req->code != NULL && req->code_len <= cfg.max_code_bytes);
        CHECK(req->stdin_len <= cfg.max_stdin_bytes);
        CHECK(req->timeout_s >= 1 && req->timeout_s <= cfg.max_timeout_s);
        CHECK(req->memory_mb >= 16 && req->memory_mb <= cfg.max_memory_mb);
        CHECK(req->n_env <= cfg.max_env_vars);
        size_t env_bytes = 0;
        for (size_t i = 0; i < req->n_env; i++) {
                CHECK(env_name_ok(req->env[i].name));
                for (size_t j = 0; j < i; j++)
                        CHECK(strcmp(req->env[i].name, req->env[j].name) != 0);
                env_bytes += strlen(req->env[i].name) + strlen(req->env[i].value) + 2;
        }
        CHECK(env_bytes <= cfg.max_env_bytes);
        CHECK(req->n_packages <= cfg.max_packages);
        for (size_t i = 0; i < req->n_packages; i++)
                check_requirement(req->packages[i]);

        memset(&err, 0, sizeof(err));
        CHECK(hxs_request_validate(req, &cfg, &err) == 0);

        pkg_index idx = { (pkg_req *)image, sizeof(image) / sizeof(image[0]) };
        memset(&err, 0, sizeof(err));
        r = pkg_check(&idx, req, &err);
        if (req->n_packages == 0)
                CHECK(r == 0);
        else if (req->language != HXS_LANG_PYTHON)
                CHECK(r == -EINVAL && err.kind == HXS_ERR_INVALID);
        else if (r < 0) {
                CHECK(r == -ENOENT && err.kind == HXS_ERR_NOT_FOUND);
                CHECK(strcmp(err.field, "packages") == 0);
                CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
        }
        hxs_request_free(req);
        return 0;
}
