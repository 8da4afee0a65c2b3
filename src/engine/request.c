/* SPDX-License-Identifier: Apache-2.0 */
/* Describing one execution and checking it against the configured maxima. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "pkg/packages.h"
#include "engine/request.h"
#include "engine/runtime.h"

static const struct {
        const char *name;
        hxs_language lang;
} language_names[] = {
        { "python", HXS_LANG_PYTHON },  { "javascript", HXS_LANG_JAVASCRIPT },
        { "js", HXS_LANG_JAVASCRIPT },  { "node", HXS_LANG_JAVASCRIPT },
        { "bash", HXS_LANG_BASH },      { "shell", HXS_LANG_BASH },
        { "sh", HXS_LANG_BASH },
};

int hxs_language_parse(const char *name, hxs_language *ret)
{
        for (size_t i = 0; i < ARRAY_SIZE(language_names); i++)
                if (strcmp(name, language_names[i].name) == 0) {
                        *ret = language_names[i].lang;
                        return 0;
                }
        return -EINVAL;
}

const char *hxs_language_name(hxs_language lang)
{
        switch (lang) {
        case HXS_LANG_PYTHON: return "python";
        case HXS_LANG_JAVASCRIPT: return "javascript";
        case HXS_LANG_BASH: return "bash";
        case HXS_LANG_MAX: break;
        }
        return "unknown";
}

hxs_request *hxs_request_new(void)
{
        return calloc(1, sizeof(hxs_request));
}

void hxs_request_free(hxs_request *req)
{
        if (!req)
                return;
        free(req->code);
        free(req->stdin_data);
        for (size_t i = 0; i < req->n_env; i++) {
                free(req->env[i].name);
                free(req->env[i].value);
        }
        free(req->env);
        for (size_t i = 0; i < req->n_packages; i++)
                free(req->packages[i]);
        request_files_free(req);
        free(req->packages);
        strv_free(req->argv);
        free(req);
}

int hxs_request_set_language(hxs_request *req, hxs_language lang)
{
        if ((unsigned)lang >= HXS_LANG_MAX)
                return -EINVAL;
        req->language = lang;
        return 0;
}

static int set_bytes(char **dst, size_t *dst_len, const void *src, size_t len)
{
        char *p = malloc(len + 1);
        if (!p)
                return -ENOMEM;
        if (len)
                memcpy(p, src, len);
        p[len] = '\0';
        free(*dst);
        *dst = p;
        *dst_len = len;
        return 0;
}

int hxs_request_set_code(hxs_request *req, const void *code, size_t len)
{
        return set_bytes(&req->code, &req->code_len, code, len);
}

int hxs_request_set_stdin(hxs_request *req, const void *data, size_t len)
{
        return set_bytes(&req->stdin_data, &req->stdin_len, data, len);
}

void hxs_request_set_timeout_s(hxs_request *req, uint32_t seconds) { req->timeout_s = seconds; }
void hxs_request_set_memory_mb(hxs_request *req, uint32_t mb) { req->memory_mb = mb; }
hxs_language hxs_request_language(const hxs_request *req) { return req->language; }
uint32_t hxs_request_timeout_s(const hxs_request *req) { return req->timeout_s; }
uint32_t hxs_request_memory_mb(const hxs_request *req) { return req->memory_mb; }
size_t hxs_request_code_len(const hxs_request *req) { return req->code_len; }

int hxs_request_add_env(hxs_request *req, const char *name, const char *value)
{
        int r = array_grow((void **)&req->env, &req->cap_env, req->n_env, sizeof(*req->env));
        if (r < 0)
                return r;
        char *n = strdup(name), *v = strdup(value);
        if (!n || !v) {
                free(n);
                free(v);
                return -ENOMEM;
        }
        req->env[req->n_env++] = (env_var){ n, v };
        return 0;
}

int hxs_request_add_package(hxs_request *req, const char *requirement)
{
        int r = array_grow((void **)&req->packages, &req->cap_packages, req->n_packages,
                     sizeof(*req->packages));
        if (r < 0)
                return r;
        char *p = strdup(requirement);
        if (!p)
                return -ENOMEM;
        req->packages[req->n_packages++] = p;
        return 0;
}

int request_set_interactive(hxs_request *req, const char *const *argv)
{
        char **copy = NULL;
        if (argv) {
                size_t n = 0;
                while (argv[n])
                        n++;
                copy = calloc(n + 1, sizeof(*copy));
                if (!copy)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++)
                        if (!(copy[i] = strdup(argv[i]))) {
                                strv_free(copy);
                                return -ENOMEM;
                        }
        }
        strv_free(req->argv);
        req->argv = copy;
        req->interactive = true;
        return 0;
}

int request_dup(const hxs_request *src, hxs_request **ret)
{
        hxs_request *req = hxs_request_new();
        int r = -ENOMEM;
        if (!req)
                return r;
        req->language = src->language;
        req->timeout_s = src->timeout_s;
        req->memory_mb = src->memory_mb;
        if (src->code && (r = hxs_request_set_code(req, src->code, src->code_len)) < 0)
                goto fail;
        if (src->stdin_data &&
            (r = hxs_request_set_stdin(req, src->stdin_data, src->stdin_len)) < 0)
                goto fail;
        for (size_t i = 0; i < src->n_env; i++)
                if ((r = hxs_request_add_env(req, src->env[i].name, src->env[i].value)) < 0)
                        goto fail;
        for (size_t i = 0; i < src->n_packages; i++)
                if ((r = hxs_request_add_package(req, src->packages[i])) < 0)
                        goto fail;
        if ((r = request_files_dup(src, req)) < 0)
                goto fail;
        if (src->interactive &&
            (r = request_set_interactive(req, (const char *const *)src->argv)) < 0)
                goto fail;
        *ret = req;
        return 0;
fail:
        hxs_request_free(req);
        return r;
}

/* POSIX-portable names: a letter or underscore, then letters, digits, underscores. */
static bool env_name_ok(const char *s)
{
        if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
                return false;
        for (const char *p = s + 1; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '_'))
                        return false;
        return true;
}

/* Requirement strings: a distribution name, optional extras, optional version
 * specifiers, spaces between them allowed. No URLs, paths, archive files, options or
 * markers (pkg_canonical says which rule a string breaks). */
static bool requirement_ok(const char *s, const char **why)
{
        char canon[256];
        return pkg_canonical(s, canon, sizeof(canon), why) == 0;
}

int hxs_request_validate(hxs_request *req, const hxs_config *cfg, hxs_error *err)
{
        if ((unsigned)req->language >= HXS_LANG_MAX)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "language",
                                      "language: must be python, javascript or bash");
        if (!req->code)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "code", "code: is required");
        if (req->code_len > cfg->max_code_bytes)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "code",
                                      "code: %zu bytes exceeds the maximum %u", req->code_len,
                                      cfg->max_code_bytes);
        if (req->stdin_len > cfg->max_stdin_bytes)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "stdin",
                                      "stdin: %zu bytes exceeds the maximum %u", req->stdin_len,
                                      cfg->max_stdin_bytes);
        if (req->timeout_s == 0)
                req->timeout_s = cfg->default_timeout_s;
        if (req->timeout_s > cfg->max_timeout_s && !req->interactive)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "timeout",
                                      "timeout: %u exceeds the maximum %u seconds",
                                      req->timeout_s, cfg->max_timeout_s);
        if (req->memory_mb == 0)
                req->memory_mb = cfg->default_memory_mb;
        if (req->memory_mb > cfg->max_memory_mb)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "memory_mb",
                                      "memory_mb: %u exceeds the maximum %u", req->memory_mb,
                                      cfg->max_memory_mb);
        if (req->memory_mb < 16)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "memory_mb",
                                      "memory_mb: %u is below the minimum 16", req->memory_mb);
        if (req->n_env > cfg->max_env_vars)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "env_vars",
                                      "env_vars: %zu variables exceeds the maximum %u",
                                      req->n_env, cfg->max_env_vars);
        size_t env_bytes = 0;
        for (size_t i = 0; i < req->n_env; i++) {
                const env_var *e = &req->env[i];
                if (!env_name_ok(e->name))
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "env_vars",
                                              "env_vars: name \"%.64s\" must match [A-Za-z_][A-Za-z0-9_]*",
                                              e->name);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(req->env[j].name, e->name) == 0)
                                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "env_vars",
                                                      "env_vars: \"%.64s\" is set twice", e->name);
                env_bytes += strlen(e->name) + strlen(e->value) + 2;
        }
        if (env_bytes > cfg->max_env_bytes)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "env_vars",
                                      "env_vars: %zu bytes exceeds the maximum %u", env_bytes,
                                      cfg->max_env_bytes);
        if (req->n_packages > cfg->max_packages)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "packages",
                                      "packages: %zu entries exceeds the maximum %u",
                                      req->n_packages, cfg->max_packages);
        for (size_t i = 0; i < req->n_packages; i++) {
                const char *why;
                if (!requirement_ok(req->packages[i], &why))
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "packages",
                                              "packages: \"%.64s\" is not a requirement: %s", req->packages[i], why);
        }
        return request_files_validate(req, cfg, err);
}
