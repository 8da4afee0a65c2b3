/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request bodies to hxs_request, results to JSON, and the lossy UTF-8 conversion that
 * lets program output (bytes) travel in JSON (text). Every rejection names the field
 * and the rule, because an LLM reading the 400 must be able to fix its request.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/error.h"
#include "engine/json.h"

/* ---- UTF-8 --------------------------------------------------------------------- */

/* Length of the well-formed character at p (1..4), or minus the length of the maximal
 * ill-formed subpart starting there (Unicode 15, section 3.9, "U+FFFD substitution of
 * maximal subparts"), which is what Python's errors="replace" does too. */
static int utf8_char(const unsigned char *p, size_t n)
{
        unsigned char b = p[0];
        unsigned char lo = 0x80, hi = 0xBF;
        int need;

        if (b < 0x80)
                return 1;
        if (b >= 0xC2 && b <= 0xDF)
                need = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
                need = 2;
                if (b == 0xE0)
                        lo = 0xA0;      /* no overlong forms */
                else if (b == 0xED)
                        hi = 0x9F;      /* no surrogates */
        } else if (b >= 0xF0 && b <= 0xF4) {
                need = 3;
                if (b == 0xF0)
                        lo = 0x90;
                else if (b == 0xF4)
                        hi = 0x8F;      /* nothing above U+10FFFF */
        } else
                return -1;              /* 80..C1, F5..FF: never valid */

        for (int i = 1; i <= need; i++) {
                if ((size_t)i >= n)
                        return -i;      /* truncated at the end */
                unsigned char c = p[i];
                if (c < lo || c > hi)
                        return -i;
                lo = 0x80;
                hi = 0xBF;
        }
        return need + 1;
}

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

json_t *json_string_lossy(const char *data, size_t len)
{
        const unsigned char *p = (const unsigned char *)data;
        size_t i = 0;

        /* Fast path: program output is nearly always valid. */
        while (i < len) {
                int c = utf8_char(p + i, len - i);
                if (c < 0)
                        break;
                i += (size_t)c;
        }
        if (i == len)
                return json_stringn_nocheck(len ? data : "", len);

        /* Worst case every byte becomes U+FFFD (3 bytes). */
        if (len > (SIZE_MAX - 1) / 3)
                return NULL;
        char *out = malloc(len * 3 + 1);
        if (!out)
                return NULL;
        memcpy(out, data, i);
        size_t o = i;
        while (i < len) {
                int c = utf8_char(p + i, len - i);
                if (c > 0) {
                        memcpy(out + o, p + i, (size_t)c);
                        o += (size_t)c;
                        i += (size_t)c;
                } else {
                        memcpy(out + o, replacement, 3);
                        o += 3;
                        i += (size_t)-c;
                }
        }
        json_t *s = json_stringn_nocheck(out, o);
        free(out);
        return s;
}

size_t utf8_lossy_copy(char *dst, size_t cap, const char *src, size_t len)
{
        const unsigned char *p = (const unsigned char *)src;
        size_t o = 0, i = 0;

        if (cap == 0)
                return 0;
        while (i < len) {
                int c = utf8_char(p + i, len - i);
                const char *piece = (const char *)p + i;
                size_t plen = c > 0 ? (size_t)c : 3;
                if (c < 0 || p[i] == '\0') {
                        /* A C string cannot hold U+0000: it is replaced as well. */
                        piece = replacement;
                        plen = 3;
                }
                if (o + plen >= cap)
                        break;
                memcpy(dst + o, piece, plen);
                o += plen;
                i += c > 0 ? (size_t)c : (size_t)-c;
        }
        dst[o] = '\0';
        return o;
}

/* ---- requests ------------------------------------------------------------------ */

static const char *const known_fields[] = {
        "code", "language", "timeout", "memory_mb", "env_vars", "packages", "stdin",
        "files", "return_files",
};

#define FIELD_LIST "code, language, timeout, memory_mb, env_vars, packages, stdin, files, return_files"

static int invalid(hxs_error *err, const char *field, const char *fmt, ...) _printf_(3, 4);
static int invalid(hxs_error *err, const char *field, const char *fmt, ...)
{
        char msg[sizeof(err->message)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, field, "%s", msg);
}

static int no_memory(hxs_error *err)
{
        return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory while reading the request");
}

/* An untrusted name made safe and short for a message: printable ASCII, the rest as
 * \xNN, cut with "..." when too long. */
static const char *quote_name(char *buf, size_t cap, const char *name)
{
        if (!*name)
                return "\"\" (the empty name)";
        size_t o = 0;
        const char *p = name;
        for (; *p; p++) {
                unsigned char c = (unsigned char)*p;
                char piece[5];
                size_t n;
                if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
                        piece[0] = (char)c;
                        n = 1;
                } else
                        n = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", c);
                if (o + n + 4 > cap)
                        break;
                memcpy(buf + o, piece, n);
                o += n;
        }
        if (*p) {
                memcpy(buf + o, "...", 3);
                o += 3;
        }
        buf[o] = '\0';
        return buf;
}

/* jansson words a duplicate as: duplicate object key near '"name"'. */
static int duplicate_key(const json_error_t *jerr, hxs_error *err)
{
        char key[64] = "";
        const char *start = strstr(jerr->text, "near '\"");
        if (start) {
                start += strlen("near '\"");
                const char *end = strstr(start, "\"'");
                size_t n = end ? (size_t)(end - start) : strlen(start);
                if (n >= sizeof(key))
                        n = sizeof(key) - 1;
                memcpy(key, start, n);
                key[n] = '\0';
        }
        char q[80];
        quote_name(q, sizeof(q), key);
        return invalid(err, key[0] && strlen(key) < sizeof(err->field) ? key : "body",
                       "%s: appears more than once in the body (line %d, column %d)", q,
                       jerr->line, jerr->column);
}

/* Integer seconds/megabytes: rejects reals (1.5 and 1.0 alike), booleans, strings. */
static int get_positive(const json_t *v, const char *field, const char *unit, uint32_t max,
                        uint32_t *ret, hxs_error *err)
{
        if (json_is_real(v)) {
                /* 1.0 is shown as 1.0, not as a "1" that looks like what we ask for */
                double d = json_real_value(v);
                char num[40];
                if (d > -1e15 && d < 1e15 && (double)(long long)d == d)
                        snprintf(num, sizeof(num), "%lld.0", (long long)d);
                else
                        snprintf(num, sizeof(num), "%g", d);
                return invalid(err, field, "%s: must be an integer number of %s (got %s)", field,
                               unit, num);
        }
        if (!json_is_integer(v))
                return invalid(err, field, "%s: must be an integer number of %s (got %s)", field,
                               unit,
                               json_is_boolean(v) ? "a boolean" :
                               json_is_string(v) ? "a string" :
                               json_is_array(v) ? "an array" : "an object");
        json_int_t n = json_integer_value(v);
        if (n <= 0)
                return invalid(err, field, "%s: must be greater than 0 (got %lld)", field,
                               (long long)n);
        if ((unsigned long long)n > max)
                return invalid(err, field, "%s: %lld exceeds the maximum %u %s", field,
                               (long long)n, max, unit);
        *ret = (uint32_t)n;
        return 0;
}

static int get_env(hxs_request *req, const json_t *v, hxs_error *err)
{
        const char *name;
        json_t *val;
        char q[80];

        if (!json_is_object(v))
                return invalid(err, "env_vars",
                               "env_vars: must be an object mapping names to string values");
        json_object_foreach((json_t *)v, name, val) {
                if (!json_is_string(val))
                        return invalid(err, "env_vars", "env_vars: value of \"%s\" must be a string",
                                       quote_name(q, sizeof(q), name));
                if (strlen(json_string_value(val)) != json_string_length(val))
                        return invalid(err, "env_vars",
                                       "env_vars: value of \"%s\" must not contain NUL (\\u0000)",
                                       quote_name(q, sizeof(q), name));
                if (hxs_request_add_env(req, name, json_string_value(val)) < 0)
                        return no_memory(err);
        }
        return 0;
}

static int get_packages(hxs_request *req, const json_t *v, hxs_error *err)
{
        size_t i;
        json_t *p;

        if (!json_is_array(v))
                return invalid(err, "packages", "packages: must be an array of strings");
        json_array_foreach(v, i, p) {
                if (!json_is_string(p))
                        return invalid(err, "packages", "packages[%zu]: must be a string", i);
                if (strlen(json_string_value(p)) != json_string_length(p))
                        return invalid(err, "packages",
                                       "packages[%zu]: must not contain NUL (\\u0000)", i);
                if (hxs_request_add_package(req, json_string_value(p)) < 0)
                        return no_memory(err);
        }
        return 0;
}

/* Strict base64 (RFC 4648, padding required, no whitespace) into a new buffer. */
int json_base64_decode(const char *in, size_t n, unsigned char **ret, size_t *ret_len)
{
        if (n % 4)
                return -EINVAL;
        unsigned char *out = malloc(n / 4 * 3 + 1);
        size_t o = 0;
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i += 4) {
                uint32_t v = 0;
                int pad = 0;
                for (int k = 0; k < 4; k++) {
                        char ch = in[i + k];
                        int d = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26 :
                                ch >= '0' && ch <= '9' ? ch - '0' + 52 : ch == '+' ? 62 : ch == '/' ? 63 : -1;
                        if (ch == '=' && i + 4 == n && k >= 2 && (k == 3 || in[i + 3] == '=')) {
                                pad++;
                                d = 0;
                        } else if (d < 0 || pad) {
                                free(out);
                                return -EINVAL;
                        }
                        v = v << 6 | (uint32_t)d;
                }
                out[o++] = (unsigned char)(v >> 16);
                if (pad < 2)
                        out[o++] = (unsigned char)(v >> 8);
                if (pad < 1)
                        out[o++] = (unsigned char)v;
        }
        *ret = out;
        *ret_len = o;
        return 0;
}

/* files: [{"path", "content", "encoding": "utf-8" | "base64"}]; the path rules and the
 * limits are hxs_request_validate's (it names files[i].path). */
static int get_file(hxs_request *req, size_t i, const json_t *f, hxs_error *err)
{
        char field[48];
        const char *key;
        json_t *v;

        snprintf(field, sizeof(field), "files[%zu]", i);
        if (!json_is_object(f))
                return invalid(err, field, "%s: must be an object {\"path\", \"content\", \"encoding\"}", field);
        json_object_foreach((json_t *)f, key, v)
                if (strcmp(key, "path") != 0 && strcmp(key, "content") != 0 && strcmp(key, "encoding") != 0)
                        return invalid(err, field, "%s: unknown field (the fields are path, content, encoding)",
                                       field);
        const json_t *path = json_object_get(f, "path"), *content = json_object_get(f, "content"),
                     *enc = json_object_get(f, "encoding");
        snprintf(field, sizeof(field), "files[%zu].path", i);
        if (!json_is_string(path) || strlen(json_string_value(path)) != json_string_length(path))
                return invalid(err, field, "%s: is required, a string without NUL", field);
        snprintf(field, sizeof(field), "files[%zu].encoding", i);
        bool b64 = false;
        if (enc && !json_is_null(enc)) {
                if (!json_is_string(enc) || (strcmp(json_string_value(enc), "utf-8") != 0 &&
                                             strcmp(json_string_value(enc), "base64") != 0))
                        return invalid(err, field, "%s: must be \"utf-8\" or \"base64\"", field);
                b64 = strcmp(json_string_value(enc), "base64") == 0;
        }
        snprintf(field, sizeof(field), "files[%zu].content", i);
        if (!json_is_string(content))
                return invalid(err, field, "%s: is required, a string (%s)", field,
                               b64 ? "base64" : "the file's text");
        if (!b64)
                return hxs_request_add_file(req, json_string_value(path), json_string_value(content),
                                            json_string_length(content)) < 0 ? no_memory(err) : 0;
        unsigned char *data = NULL;
        size_t len = 0;
        int r = json_base64_decode(json_string_value(content), json_string_length(content), &data, &len);
        if (r == -ENOMEM)
                return no_memory(err);
        if (r < 0)
                return invalid(err, field, "%s: is not valid base64 (RFC 4648, with padding, no line breaks)",
                               field);
        r = hxs_request_add_file(req, json_string_value(path), data, len);
        free(data);
        return r < 0 ? no_memory(err) : 0;
}

static int get_files(hxs_request *req, const json_t *v, hxs_error *err)
{
        size_t i;
        json_t *f;

        if (!json_is_array(v))
                return invalid(err, "files", "files: must be an array of {\"path\", \"content\", \"encoding\"}");
        json_array_foreach(v, i, f) {
                int r = get_file(req, i, f, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int get_return_files(hxs_request *req, const json_t *v, hxs_error *err)
{
        size_t i;
        json_t *g;

        if (!json_is_array(v))
                return invalid(err, "return_files", "return_files: must be an array of glob strings");
        json_array_foreach(v, i, g) {
                char field[48];
                snprintf(field, sizeof(field), "return_files[%zu]", i);
                if (!json_is_string(g) || !json_string_length(g) ||
                    strlen(json_string_value(g)) != json_string_length(g))
                        return invalid(err, field, "%s: must be a non-empty string without NUL", field);
                if (hxs_request_add_return_glob(req, json_string_value(g)) < 0)
                        return no_memory(err);
        }
        return 0;
}

static int fill_request(hxs_request *req, json_t *root, const hxs_config *cfg, hxs_error *err)
{
        const char *key;
        json_t *v;
        char q[80];
        int r;

        /* Unknown fields first: a typo must not be reported as a missing field. */
        json_object_foreach(root, key, v) {
                bool known = false;
                for (size_t i = 0; i < ARRAY_SIZE(known_fields); i++)
                        if (strcmp(key, known_fields[i]) == 0)
                                known = true;
                if (!known)
                        return invalid(err, key[0] && strlen(key) < sizeof(err->field) ? key : "body",
                                       "%s: unknown field (the fields are " FIELD_LIST ")",
                                       quote_name(q, sizeof(q), key));
        }

        v = json_object_get(root, "code");
        if (!v || json_is_null(v))
                return invalid(err, "code", "code: is required (the program to run, a string)");
        if (!json_is_string(v))
                return invalid(err, "code", "code: must be a string");
        if (hxs_request_set_code(req, json_string_value(v), json_string_length(v)) < 0)
                return no_memory(err);

        v = json_object_get(root, "language");
        if (v && !json_is_null(v)) {
                hxs_language lang;
                if (!json_is_string(v))
                        return invalid(err, "language", "language: must be a string");
                if (strlen(json_string_value(v)) != json_string_length(v))
                        return invalid(err, "language", "language: must not contain NUL (\\u0000)");
                if (hxs_language_parse(json_string_value(v), &lang) < 0)
                        return invalid(err, "language",
                                       "language: \"%s\" is not supported (python, javascript, bash; aliases js, node, shell, sh)",
                                       quote_name(q, sizeof(q), json_string_value(v)));
                hxs_request_set_language(req, lang);
        }

        v = json_object_get(root, "timeout");
        if (v && !json_is_null(v)) {
                uint32_t t;
                r = get_positive(v, "timeout", "seconds", cfg->max_timeout_s, &t, err);
                if (r < 0)
                        return r;
                hxs_request_set_timeout_s(req, t);
        }

        v = json_object_get(root, "memory_mb");
        if (v && !json_is_null(v)) {
                uint32_t mb;
                r = get_positive(v, "memory_mb", "megabytes", cfg->max_memory_mb, &mb, err);
                if (r < 0)
                        return r;
                hxs_request_set_memory_mb(req, mb);
        }

        v = json_object_get(root, "env_vars");
        if (v && !json_is_null(v) && (r = get_env(req, v, err)) < 0)
                return r;

        v = json_object_get(root, "packages");
        if (v && !json_is_null(v) && (r = get_packages(req, v, err)) < 0)
                return r;

        v = json_object_get(root, "stdin");
        if (v && !json_is_null(v)) {
                if (!json_is_string(v))
                        return invalid(err, "stdin", "stdin: must be a string");
                if (hxs_request_set_stdin(req, json_string_value(v), json_string_length(v)) < 0)
                        return no_memory(err);
        }

        v = json_object_get(root, "files");
        if (v && !json_is_null(v) && (r = get_files(req, v, err)) < 0)
                return r;

        v = json_object_get(root, "return_files");
        if (v && !json_is_null(v) && (r = get_return_files(req, v, err)) < 0)
                return r;

        return hxs_request_validate(req, cfg, err);
}

int hxs_request_from_json(const char *body, size_t len, const hxs_config *cfg,
                          hxs_request **ret, hxs_error *err)
{
        json_error_t jerr;
        char text[sizeof(jerr.text) + 16];

        if (len == 0)
                return invalid(err, "body", "body: is empty; expected a JSON object with at least \"code\"");

        json_t *root = json_loadb(body, len,
                                  JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
        if (!root) {
                if (json_error_code(&jerr) == json_error_duplicate_key)
                        return duplicate_key(&jerr, err);
                /* jansson may quote the offending bytes, which need not be UTF-8. */
                utf8_lossy_copy(text, sizeof(text), jerr.text, strlen(jerr.text));
                /* Two refusals jansson makes before any field rule runs, said in our terms. */
                const char *hint = "";
                if (strstr(jerr.text, "NUL byte in object key"))
                        hint = " (names cannot hold U+0000: env_vars names and field names alike)";
                else if (strstr(jerr.text, "too big integer"))
                        hint = " (beyond 64 bits; timeout and memory_mb are small positive integers)";
                return invalid(err, "body", "body: invalid JSON at line %d, column %d: %s%s",
                               jerr.line, jerr.column, text, hint);
        }
        if (!json_is_object(root)) {
                json_decref(root);
                return invalid(err, "body", "body: must be a JSON object");
        }

        hxs_request *req = hxs_request_new();
        if (!req) {
                json_decref(root);
                return no_memory(err);
        }
        int r = fill_request(req, root, cfg, err);
        json_decref(root);
        if (r < 0) {
                hxs_request_free(req);
                return r;
        }
        *ret = req;
        return 0;
}

/* ---- results ------------------------------------------------------------------- */

/* json_object_set_new that remembers a failure instead of leaking or crashing. */
static void put(json_t *obj, const char *key, json_t *value, bool *ok)
{
        if (!value || json_object_set_new(obj, key, value) < 0)
                *ok = false;
}

static long long clamp_ll(uint64_t v) { return v > LLONG_MAX ? LLONG_MAX : (long long)v; }

/* ---- files out ---------------------------------------------------------------- */

char *json_base64(const unsigned char *p, size_t n)
{
        static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char *out = malloc((n + 2) / 3 * 4 + 1);
        if (!out)
                return NULL;
        size_t o = 0, i = 0;
        for (; i + 2 < n; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
                out[o++] = tbl[v >> 18];
                out[o++] = tbl[(v >> 12) & 63];
                out[o++] = tbl[(v >> 6) & 63];
                out[o++] = tbl[v & 63];
        }
        if (i < n) {
                uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
                out[o++] = tbl[v >> 18];
                out[o++] = tbl[(v >> 12) & 63];
                out[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
                out[o++] = '=';
        }
        out[o] = '\0';
        return out;
}

static bool valid_utf8(const unsigned char *p, size_t n)
{
        for (size_t i = 0; i < n;) {
                int c = utf8_char(p + i, n - i);
                if (c <= 0)
                        return false;
                i += (size_t)c;
        }
        return true;
}

/* {"path", "size", "mime", "encoding", "content", "truncated"}: the content as text
 * when it is text (a text/ type, valid UTF-8), else base64; "" when truncated. */
static json_t *file_to_json(const hxs_file *f)
{
        json_t *o = json_object();
        bool ok = o != NULL;
        if (!o)
                return NULL;
        bool text = strncmp(f->mime, "text/", 5) == 0 && valid_utf8(f->data, f->len);
        put(o, "path", json_string_lossy(f->path, strlen(f->path)), &ok);
        put(o, "size", json_integer(clamp_ll(f->size)), &ok);
        put(o, "mime", json_string(f->mime), &ok);
        put(o, "encoding", json_string(text ? "utf-8" : "base64"), &ok);
        if (text) {
                put(o, "content", json_stringn((const char *)(f->data ? f->data : (const unsigned char *)""), f->len), &ok);
        } else {
                char *b = json_base64(f->data, f->len);
                put(o, "content", b ? json_string(b) : NULL, &ok);
                free(b);
        }
        put(o, "truncated", json_boolean(f->truncated), &ok);
        if (!ok) {
                json_decref(o);
                return NULL;
        }
        return o;
}

json_t *files_to_json(const hxs_file *files, size_t n)
{
        json_t *a = json_array();
        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_t *f = file_to_json(&files[i]);
                if (!f || json_array_append_new(a, f) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

/* null when the program ended by itself, else {"type", "message"} */
static json_t *end_to_json(const hxs_result *res)
{
        if (res->end == HXS_END_EXITED)
                return json_null();
        json_t *e = json_object();
        bool ok = e != NULL;
        if (!e)
                return NULL;
        put(e, "type", json_string(hxs_end_reason_name(res->end)), &ok);
        put(e, "message", json_string_lossy(res->end_message,
                                                strnlen(res->end_message, sizeof(res->end_message))), &ok);
        if (!ok) {
                json_decref(e);
                return NULL;
        }
        return e;
}

json_t *result_to_json(const hxs_result *res, const char *id)
{
        json_t *o = json_object();
        bool ok = o != NULL;
        if (!o)
                return NULL;

        put(o, "stdout", json_string_lossy(res->stdout_data ? res->stdout_data : "",
                                               res->stdout_data ? res->stdout_len : 0), &ok);
        put(o, "stderr", json_string_lossy(res->stderr_data ? res->stderr_data : "",
                                               res->stderr_data ? res->stderr_len : 0), &ok);
        put(o, "exit_code", json_integer(res->exit_code), &ok);
        put(o, "execution_time_ms",
            json_integer(res->execution_time_ms > LLONG_MAX ? LLONG_MAX :
                         (json_int_t)res->execution_time_ms), &ok);
        put(o, "memory_used_mb",
            json_integer(res->memory_used_mb > LLONG_MAX ? LLONG_MAX :
                         (json_int_t)res->memory_used_mb), &ok);
        put(o, "timed_out", json_boolean(res->timed_out), &ok);
        put(o, "oom_killed", json_boolean(res->oom_killed), &ok);
        put(o, "signal", res->signal ? json_integer(res->signal) : json_null(), &ok);
        put(o, "stdout_truncated", json_boolean(res->stdout_truncated), &ok);
        put(o, "stderr_truncated", json_boolean(res->stderr_truncated), &ok);
        put(o, "stdout_omitted_bytes", json_integer(clamp_ll(res->stdout_omitted)), &ok);
        put(o, "stderr_omitted_bytes", json_integer(clamp_ll(res->stderr_omitted)), &ok);
        put(o, "error", end_to_json(res), &ok);
        put(o, "files", files_to_json(res->files, res->n_files), &ok);
        if (id)
                put(o, "id", json_string(id), &ok);
        if (!ok) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* ---- the result as text, in one pass ------------------------------------------ */

/* Each string as jansson would dump json_string_lossy() of it: U+FFFD for each
 * maximal invalid subsequence, the escapes json_dumps() uses. Large program output is
 * the common case: it is converted once, straight into the reply, instead of into a
 * jansson string and again out, and read once (no counting pass before the copy). */
/* Bytes copied as they are: printable ASCII but the quote and the backslash. */
static inline bool plain_byte(unsigned char b)
{
        return b >= 0x20 && b < 0x80 && b != '"' && b != '\\';
}

/* The end of the run of plain bytes from i, eight at a time: program output is mostly
 * such runs, and a byte at a time made this the service's hottest loop for large
 * outputs. A word is all plain when no byte has its high bit set, none is below 0x20
 * and none equals '"' or '\\' (the has-zero-byte test on the word XOR each). */
static size_t plain_run_end(const unsigned char *p, size_t i, size_t len)
{
        const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;

#ifdef __SSE2__
        /* sixteen at a time where the machine has it (every x86-64): as a signed byte,
         * one below 0x20 is a control byte or has its high bit set; the first byte that
         * is not plain ends the run, found from the mask without going back */
        const __m128i below = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
        while (i + 16 <= len) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
                __m128i bad = _mm_or_si128(_mm_cmplt_epi8(v, below),
                                           _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));
                unsigned mask = (unsigned)_mm_movemask_epi8(bad);
                if (mask)
                        return i + (size_t)__builtin_ctz(mask);
                i += 16;
        }
#endif
        while (i + 8 <= len) {
                uint64_t w, q, s;
                memcpy(&w, p + i, 8);
                q = w ^ (ones * '"');
                s = w ^ (ones * '\\');
                uint64_t bad = (w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((s - ones) & ~s)) & highs;
                if (bad)
                        break;
                i += 8;
        }
        while (i < len && plain_byte(p[i]))
                i++;
        return i;
}

/* The reply as it is written: one pass, into a buffer sized for the usual case (a few
 * escapes) and grown only when the output is full of them. */
typedef struct text_buf {
        char *p;
        size_t len, cap;
        bool failed;
} text_buf;

/* Room for n more bytes (and the final NUL); false once out of memory. */
static bool tb_room(text_buf *t, size_t n)
{
        if (t->failed)
                return false;
        if (n < t->cap - t->len)
                return true;
        size_t cap = t->cap;
        while (n >= cap - t->len) {
                if (cap > SIZE_MAX / 2) {
                        t->failed = true;
                        return false;
                }
                cap *= 2;
        }
        char *p = realloc(t->p, cap);
        if (!p) {
                t->failed = true;
                return false;
        }
        t->p = p;
        t->cap = cap;
        return true;
}

static void tb_put(text_buf *t, const void *data, size_t n)
{
        if (!tb_room(t, n))
                return;
        memcpy(t->p + t->len, data, n);
        t->len += n;
}

static void put_string(text_buf *t, const char *data, size_t len)
{
        static const char hex[] = "0123456789ABCDEF";
        const unsigned char *p = (const unsigned char *)data;
        size_t i = 0;

        tb_put(t, "\"", 1);
        while (i < len && !t->failed) {
                unsigned char b = p[i];
                if (plain_byte(b)) {
                        /* the common run: plain ASCII, copied as is */
                        size_t j = plain_run_end(p, i + 1, len);
                        tb_put(t, p + i, j - i);
                        i = j;
                        continue;
                }
                if (b < 0x80) {
                        char esc = b == '"' ? '"' : b == '\\' ? '\\' : b == '\b' ? 'b' : b == '\f' ? 'f' :
                                   b == '\n' ? 'n' : b == '\r' ? 'r' : b == '\t' ? 't' : 0;
                        if (esc) {
                                char e[2] = { '\\', esc };
                                tb_put(t, e, 2);
                        } else {
                                char u[6] = { '\\', 'u', '0', '0', hex[b >> 4], hex[b & 15] };
                                tb_put(t, u, 6);
                        }
                        i++;
                        continue;
                }
                int c = utf8_char(p + i, len - i);
                tb_put(t, c > 0 ? (const char *)p + i : replacement, c > 0 ? (size_t)c : 3);
                i += c > 0 ? (size_t)c : (size_t)-c;
        }
        tb_put(t, "\"", 1);
}

static void put_text(text_buf *t, const char *s) { tb_put(t, s, strlen(s)); }

char *hxs_result_to_text(const hxs_result *res, const char *id, size_t *ret_len)
{
        const char *so = res->stdout_data ? res->stdout_data : "";
        const char *se = res->stderr_data ? res->stderr_data : "";
        size_t sol = res->stdout_data ? res->stdout_len : 0, sel = res->stderr_data ? res->stderr_len : 0;
        long long etime = res->execution_time_ms > LLONG_MAX ? LLONG_MAX : (long long)res->execution_time_ms;
        long long mem = res->memory_used_mb > LLONG_MAX ? LLONG_MAX : (long long)res->memory_used_mb;
        char sig[24] = "null";
        if (res->signal)
                snprintf(sig, sizeof(sig), "%d", res->signal);

        /* everything between the two outputs and the error */
        char tail[400];
        int tl = snprintf(tail, sizeof(tail),
                          ",\"exit_code\":%d,\"execution_time_ms\":%lld,\"memory_used_mb\":%lld,"
                          "\"timed_out\":%s,\"oom_killed\":%s,\"signal\":%s,"
                          "\"stdout_truncated\":%s,\"stderr_truncated\":%s,"
                          "\"stdout_omitted_bytes\":%lld,\"stderr_omitted_bytes\":%lld,\"error\":",
                          res->exit_code, etime, mem, res->timed_out ? "true" : "false",
                          res->oom_killed ? "true" : "false", sig,
                          res->stdout_truncated ? "true" : "false",
                          res->stderr_truncated ? "true" : "false",
                          clamp_ll(res->stdout_omitted), clamp_ll(res->stderr_omitted));
        if (tl < 0 || (size_t)tl >= sizeof(tail))
                return NULL;
        /* the files, through jansson: they are few, and their content is base64 or text */
        char *files = NULL;
        if (res->n_files > 0) {
                json_t *fa = files_to_json(res->files, res->n_files);
                files = fa ? json_dumps(fa, JSON_COMPACT) : NULL;
                json_decref(fa);
                if (!files)
                        return NULL;
        }
        const char *ft = files ? files : "[]";
        size_t fl = strlen(ft);

        /* sized for the outputs as they are plus one escape in sixteen bytes: a newline
         * every line of text fits without growing */
        text_buf t = { .cap = sol + sol / 16 + sel + sel / 16 + (size_t)tl + fl + 1024 };
        t.p = malloc(t.cap);
        t.failed = t.p == NULL;
        put_text(&t, "{\"stdout\":");
        put_string(&t, so, sol);
        put_text(&t, ",\"stderr\":");
        put_string(&t, se, sel);
        tb_put(&t, tail, (size_t)tl);
        /* error: null, or the end reason and its message (plain ASCII, escaped anyway) */
        if (res->end == HXS_END_EXITED) {
                put_text(&t, "null");
        } else {
                put_text(&t, "{\"type\":\"");
                put_text(&t, hxs_end_reason_name(res->end));
                put_text(&t, "\",\"message\":");
                put_string(&t, res->end_message, strnlen(res->end_message, sizeof(res->end_message)));
                put_text(&t, "}");
        }
        put_text(&t, ",\"files\":");
        tb_put(&t, ft, fl);
        free(files);
        if (id) {
                put_text(&t, ",\"id\":");
                put_string(&t, id, strlen(id));
        }
        put_text(&t, "}");
        if (t.failed) {
                free(t.p);
                return NULL;
        }
        t.p[t.len] = '\0';
        *ret_len = t.len;
        return t.p;
}
