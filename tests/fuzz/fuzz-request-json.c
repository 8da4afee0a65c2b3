/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: request bodies (POST /api/v1/exec, `exec --json`) through
 * hxs_request_from_json, which parses strictly and then runs hxs_request_validate.
 *
 * The input is the body, as is. Each body is parsed twice: against the default
 * configuration and against one with tiny limits, so that the size rules are reached
 * with small inputs.
 *
 * Invariants:
 *  - on failure, *ret is untouched, err names a field, the message is a non-empty
 *    NUL-terminated string, and the error reply built from it (as http.c does) is
 *    valid JSON;
 *  - on success, the request is within every configured limit, validating it again
 *    succeeds, request_dup copies it exactly, and the request written back as
 *    JSON parses again into an equal request (what we accept, we accept again).
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json.h"
#include "pkg/packages.h"
#include "engine/request.h"
#include "fuzz.h"


static hxs_config cfg_default, cfg_small;

static void set(hxs_config *cfg, const char *name, const char *value)
{
        hxs_error err = { 0 };
        if (hxs_config_set(cfg, name, value, &err) < 0) {
                fprintf(stderr, "fuzz setup: %s\n", err.message);
                abort();
        }
}

static void setup(void)
{
        static bool done;
        if (done)
                return;
        hxs_config_defaults(&cfg_default);
        cfg_small = cfg_default;
        set(&cfg_small, "MAX_CODE_BYTES", "16");
        set(&cfg_small, "MAX_STDIN_BYTES", "8");
        set(&cfg_small, "MAX_ENV_VARS", "2");
        set(&cfg_small, "MAX_ENV_BYTES", "24");
        set(&cfg_small, "MAX_PACKAGES", "2");
        set(&cfg_small, "MAX_EXECUTION_TIME", "5");
        set(&cfg_small, "DEFAULT_TIMEOUT", "3");
        set(&cfg_small, "MAX_MEMORY_MB", "64");
        set(&cfg_small, "DEFAULT_MEMORY_MB", "32");
        done = true;
}

static bool terminated(const char *s, size_t cap)
{
        return memchr(s, '\0', cap) != NULL;
}

static bool env_name_ok(const char *s)
{
        if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
                return false;
        for (const char *p = s + 1; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                      (*p >= '0' && *p <= '9') || *p == '_'))
                        return false;
        return true;
}

static bool bytes_equal(const char *a, size_t alen, const char *b, size_t blen)
{
        if (!a || !b)
                return a == b;
        return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static void check_equal(const hxs_request *a, const hxs_request *b)
{
        CHECK(a->language == b->language);
        CHECK(a->timeout_s == b->timeout_s);
        CHECK(a->memory_mb == b->memory_mb);
        CHECK(bytes_equal(a->code, a->code_len, b->code, b->code_len));
        CHECK(bytes_equal(a->stdin_data, a->stdin_len, b->stdin_data, b->stdin_len));
        CHECK(a->n_env == b->n_env);
        for (size_t i = 0; i < a->n_env; i++) {
                bool found = false;
                for (size_t j = 0; j < b->n_env; j++)
                        if (strcmp(a->env[i].name, b->env[j].name) == 0) {
                                CHECK(strcmp(a->env[i].value, b->env[j].value) == 0);
                                found = true;
                        }
                CHECK(found);
        }
        CHECK(a->n_packages == b->n_packages);
        for (size_t i = 0; i < a->n_packages; i++)
                CHECK(strcmp(a->packages[i], b->packages[i]) == 0);
}

static void check_accepted(hxs_request *req, const hxs_config *cfg)
{
        hxs_error err = { 0 };

        CHECK((unsigned)req->language < HXS_LANG_MAX);
        CHECK(req->code != NULL);
        CHECK(req->code[req->code_len] == '\0');
        CHECK(req->code_len <= cfg->max_code_bytes);
        CHECK(req->stdin_len <= cfg->max_stdin_bytes);
        CHECK(!req->stdin_data || req->stdin_data[req->stdin_len] == '\0');
        CHECK(req->timeout_s >= 1 && req->timeout_s <= cfg->max_timeout_s);
        CHECK(req->memory_mb >= 16 && req->memory_mb <= cfg->max_memory_mb);
        CHECK(hxs_request_timeout_s(req) == req->timeout_s);
        CHECK(hxs_request_memory_mb(req) == req->memory_mb);
        CHECK(req->n_env <= cfg->max_env_vars);
        size_t env_bytes = 0;
        for (size_t i = 0; i < req->n_env; i++) {
                CHECK(env_name_ok(req->env[i].name));
                for (size_t j = 0; j < i; j++)
                        CHECK(strcmp(req->env[i].name, req->env[j].name) != 0);
                env_bytes += strlen(req->env[i].name) + strlen(req->env[i].value) + 2;
        }
        CHECK(env_bytes <= cfg->max_env_bytes);
        CHECK(req->n_packages <= cfg->max_packages);
        for (size_t i = 0; i < req->n_packages; i++) {
                size_t len = strlen(req->packages[i]);
                CHECK(len >= 1 && len <= 200);
                /* Never an option, URL, path or marker for pip: spaces between the parts
                 * of a requirement are accepted, and what reaches pip is the canonical
                 * spelling, which has none. */
                CHECK(req->packages[i][0] != '-');
                CHECK(strpbrk(req->packages[i], "/\\:@;'\"$`") == NULL);
                char canon[256];
                const char *why = NULL;
                CHECK(pkg_canonical(req->packages[i], canon, sizeof(canon), &why) == 0);
                CHECK(canon[0] != '-' && canon[0] != '\0');
                CHECK(strpbrk(canon, " \t/\\:@;'\"$`") == NULL);
        }

        /* Validation is idempotent once defaults are applied. */
        CHECK(hxs_request_validate(req, cfg, &err) == 0);

        hxs_request *copy = NULL;
        CHECK(request_dup(req, &copy) == 0);
        check_equal(req, copy);
        hxs_request_free(copy);

        /* Written back as JSON, the request is accepted again, unchanged. */
        json_t *o = json_object(), *env = json_object(), *pkgs = json_array();
        CHECK(o && env && pkgs);
        CHECK(json_object_set_new(o, "code", json_stringn(req->code, req->code_len)) == 0);
        CHECK(json_object_set_new(o, "language",
                                  json_string(hxs_language_name(req->language))) == 0);
        CHECK(json_object_set_new(o, "timeout", json_integer(req->timeout_s)) == 0);
        CHECK(json_object_set_new(o, "memory_mb", json_integer(req->memory_mb)) == 0);
        for (size_t i = 0; i < req->n_env; i++)
                CHECK(json_object_set_new(env, req->env[i].name,
                                          json_string(req->env[i].value)) == 0);
        for (size_t i = 0; i < req->n_packages; i++)
                CHECK(json_array_append_new(pkgs, json_string(req->packages[i])) == 0);
        CHECK(json_object_set_new(o, "env_vars", env) == 0);
        CHECK(json_object_set_new(o, "packages", pkgs) == 0);
        if (req->stdin_data)
                CHECK(json_object_set_new(o, "stdin",
                                          json_stringn(req->stdin_data, req->stdin_len)) == 0);
        char *text = json_dumps(o, JSON_COMPACT);
        CHECK(text != NULL);
        json_decref(o);
        hxs_request *again = NULL;
        int r = hxs_request_from_json(text, strlen(text), cfg, &again, &err);
        if (r < 0)
                fprintf(stderr, "re-parse of %s failed: %s\n", text, err.message);
        CHECK(r == 0 && again != NULL);
        check_equal(req, again);
        hxs_request_free(again);
        free(text);
}

static void check_rejected(int r, const hxs_error *err)
{
        CHECK(r == -EINVAL || r == -E2BIG || r == -ENOMEM);
        CHECK(err->kind == HXS_ERR_INVALID || (r == -ENOMEM && err->kind == HXS_ERR_INTERNAL));
        CHECK(terminated(err->message, sizeof(err->message)));
        CHECK(err->message[0] != '\0');
        CHECK(terminated(err->field, sizeof(err->field)));
        CHECK(err->kind != HXS_ERR_INVALID || err->field[0] != '\0');

        /* The 400 reply quotes the message: it must make valid JSON. */
        json_t *o = json_pack("{s:{s:s,s:o*}}", "error", "code", "invalid_request", "message",
                              json_string_lossy(err->message, strlen(err->message)));
        CHECK(o != NULL);
        char *text = json_dumps(o, JSON_COMPACT);
        CHECK(text != NULL);
        json_t *back = json_loads(text, 0, NULL);
        CHECK(back != NULL && json_equal(o, back));
        json_decref(back);
        json_decref(o);
        free(text);
}

static void one(const char *body, size_t size, const hxs_config *cfg)
{
        hxs_request *req = NULL;
        hxs_error err;

        memset(&err, 0, sizeof(err));
        int r = hxs_request_from_json(body, size, cfg, &req, &err);
        if (r == 0) {
                CHECK(req != NULL);
                check_accepted(req, cfg);
                hxs_request_free(req);
        } else {
                CHECK(r < 0);
                CHECK(req == NULL);
                check_rejected(r, &err);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        setup();
        one((const char *)data, size, &cfg_default);
        one((const char *)data, size, &cfg_small);
        return 0;
}
