/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the output side of the JSON face. Program output is arbitrary bytes;
 * json_string_lossy, utf8_lossy_copy and result_to_json must always turn
 * it into valid UTF-8 and valid JSON.
 *
 * Input: byte 0 = flags, byte 1 = capacity for utf8_lossy_copy, the rest = the
 * output bytes (stdout; stderr is the same bytes from the middle on).
 *
 * Invariants:
 *  - the lossy string equals an independent reference conversion (each maximal
 *    ill-formed subpart replaced by U+FFFD, Unicode 15 section 3.9), is valid UTF-8,
 *    and equals the input whenever the input is valid UTF-8;
 *  - the copy into a buffer is NUL-terminated, within the buffer, valid UTF-8 without
 *    NUL, whole characters only, and exactly the longest prefix of the reference
 *    (with U+0000 replaced as well) that fits;
 *  - the result object dumps to valid UTF-8 JSON that jansson reads back to an equal
 *    object with the same stdout/stderr strings and scalar fields.
 */
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json.h"
#include "fuzz.h"


/* Strict UTF-8 (RFC 3629): no overlongs, surrogates or code points past U+10FFFF. */
static bool valid_utf8(const unsigned char *s, size_t n)
{
        size_t i = 0;
        while (i < n) {
                unsigned char b = s[i];
                uint32_t cp;
                size_t len;
                if (b < 0x80) {
                        i++;
                        continue;
                } else if ((b & 0xE0) == 0xC0) {
                        len = 2;
                        cp = b & 0x1F;
                } else if ((b & 0xF0) == 0xE0) {
                        len = 3;
                        cp = b & 0x0F;
                } else if ((b & 0xF8) == 0xF0) {
                        len = 4;
                        cp = b & 0x07;
                } else
                        return false;
                if (i + len > n)
                        return false;
                for (size_t k = 1; k < len; k++) {
                        if ((s[i + k] & 0xC0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i + k] & 0x3F);
                }
                if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
                    (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
                    (cp >= 0xD800 && cp <= 0xDFFF))
                        return false;
                i += len;
        }
        return true;
}

/* The reference conversion, written independently of json.c: at each position, the
 * longest prefix that could still start a well-formed character is either a whole
 * character (kept) or a maximal ill-formed subpart (one U+FFFD). */
typedef struct piece {
        size_t at, len; /* input bytes */
        bool bad;       /* replaced by U+FFFD */
} piece;

static size_t reference(const unsigned char *s, size_t n, piece *out)
{
        size_t np = 0, i = 0;
        while (i < n) {
                unsigned char b = s[i];
                size_t want;
                unsigned char lo = 0x80, hi = 0xBF;
                if (b <= 0x7F)
                        want = 1;
                else if (b >= 0xC2 && b <= 0xDF)
                        want = 2;
                else if (b == 0xE0)
                        want = 3, lo = 0xA0;
                else if (b == 0xED)
                        want = 3, hi = 0x9F;
                else if (b >= 0xE1 && b <= 0xEF)
                        want = 3;
                else if (b == 0xF0)
                        want = 4, lo = 0x90;
                else if (b == 0xF4)
                        want = 4, hi = 0x8F;
                else if (b >= 0xF1 && b <= 0xF3)
                        want = 4;
                else
                        want = 0; /* C0, C1, F5..FF, lone continuation bytes */
                size_t got = 1;
                if (want > 1) {
                        /* second byte has the special range, the others 80..BF */
                        if (i + 1 < n && s[i + 1] >= lo && s[i + 1] <= hi) {
                                got = 2;
                                while (got < want && i + got < n && s[i + got] >= 0x80 &&
                                       s[i + got] <= 0xBF)
                                        got++;
                        }
                }
                out[np].at = i;
                out[np].len = got;
                out[np].bad = want == 0 || got < want;
                np++;
                i += got;
        }
        return np;
}

static const char fffd[] = "\xEF\xBF\xBD";

static void check_lossy(const unsigned char *s, size_t n, const piece *pieces, size_t np)
{
        json_t *j = json_string_lossy((const char *)s, n);
        CHECK(j != NULL);
        const char *v = json_string_value(j);
        size_t vl = json_string_length(j);
        CHECK(valid_utf8((const unsigned char *)v, vl));

        size_t o = 0;
        for (size_t k = 0; k < np; k++) {
                if (pieces[k].bad) {
                        CHECK(o + 3 <= vl && memcmp(v + o, fffd, 3) == 0);
                        o += 3;
                } else {
                        CHECK(o + pieces[k].len <= vl &&
                              memcmp(v + o, s + pieces[k].at, pieces[k].len) == 0);
                        o += pieces[k].len;
                }
        }
        CHECK(o == vl);
        if (valid_utf8(s, n))
                CHECK(vl == n && (n == 0 || memcmp(v, s, n) == 0));

        /* As a JSON document and back. */
        char *text = json_dumps(j, JSON_ENCODE_ANY);
        CHECK(text != NULL);
        CHECK(valid_utf8((const unsigned char *)text, strlen(text)));
        json_t *back = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        CHECK(back != NULL && json_equal(j, back));
        json_decref(back);
        free(text);
        json_decref(j);
}

static void check_copy(const unsigned char *s, size_t n, const piece *pieces, size_t np,
                       size_t cap)
{
        char *dst = malloc(cap ? cap : 1);
        CHECK(dst != NULL);
        size_t o = utf8_lossy_copy(dst, cap, (const char *)s, n);
        if (cap == 0) {
                CHECK(o == 0);
                free(dst);
                return;
        }
        CHECK(o < cap);
        CHECK(dst[o] == '\0');
        CHECK(strlen(dst) == o);
        CHECK(valid_utf8((const unsigned char *)dst, o));

        /* The longest run of whole pieces (NUL replaced too) that leaves room for NUL. */
        size_t e = 0, k = 0;
        for (; k < np; k++) {
                bool bad = pieces[k].bad || s[pieces[k].at] == '\0';
                size_t len = bad ? 3 : pieces[k].len;
                if (e + len >= cap)
                        break;
                if (bad)
                        CHECK(memcmp(dst + e, fffd, 3) == 0);
                else
                        CHECK(memcmp(dst + e, s + pieces[k].at, len) == 0);
                e += len;
        }
        CHECK(e == o);
        free(dst);
}

static void check_result(const char *out, size_t out_len, const char *err, size_t err_len,
                         unsigned flags, unsigned extra)
{
        hxs_result res = { 0 };
        /* Copies, so that a read past the given lengths is caught. */
        res.stdout_data = (flags & 1) ? NULL : malloc(out_len ? out_len : 1);
        res.stderr_data = (flags & 2) ? NULL : malloc(err_len ? err_len : 1);
        if (res.stdout_data) {
                memcpy(res.stdout_data, out, out_len);
                res.stdout_len = out_len;
        }
        if (res.stderr_data) {
                memcpy(res.stderr_data, err, err_len);
                res.stderr_len = err_len;
        }
        res.exit_code = (flags & 4) ? 128 + (int)(extra & 31) : (int)extra - 128;
        res.signal = (flags & 8) ? (int)(extra & 63) : 0;
        res.execution_time_ms = (flags & 16) ? UINT64_MAX - extra : extra;
        res.memory_used_mb = (flags & 32) ? (uint64_t)LLONG_MAX + extra : extra;
        res.timed_out = flags & 64;
        res.oom_killed = flags & 128;
        res.stdout_truncated = extra & 1;
        res.stderr_truncated = extra & 2;
        const char *id = (extra & 4) ? "0123456789abcdef0123456789abcdef" : NULL;
        /* the end reason and its message (any bytes, cut at the field's size) */
        res.end = (hxs_end_reason)((extra >> 3) % HXS_END_MAX);
        size_t ml = err_len < sizeof(res.end_message) - 1 ? err_len : sizeof(res.end_message) - 1;
        memcpy(res.end_message, err, ml);
        res.end_message[ml] = '\0';
        res.stdout_omitted = (flags & 16) ? UINT64_MAX - extra : extra;
        res.stderr_omitted = extra >> 1;

        json_t *o = result_to_json(&res, id);
        CHECK(o != NULL);
        char *text = json_dumps(o, JSON_COMPACT);
        CHECK(text != NULL);
        /* the service's direct writer says exactly what jansson says */
        size_t direct_len = 0;
        char *direct = hxs_result_to_text(&res, id, &direct_len);
        CHECK(direct != NULL && direct_len == strlen(text) && memcmp(direct, text, direct_len) == 0);
        free(direct);
        CHECK(valid_utf8((const unsigned char *)text, strlen(text)));
        json_t *back = json_loads(text, JSON_ALLOW_NUL, NULL);
        CHECK(back != NULL && json_is_object(back) && json_equal(o, back));

        json_t *so = json_string_lossy(out, res.stdout_data ? out_len : 0);
        json_t *se = json_string_lossy(err, res.stderr_data ? err_len : 0);
        CHECK(so && se);
        CHECK(json_equal(json_object_get(back, "stdout"), so));
        CHECK(json_equal(json_object_get(back, "stderr"), se));
        json_decref(so);
        json_decref(se);
        CHECK(json_integer_value(json_object_get(back, "exit_code")) == res.exit_code);
        json_t *sig = json_object_get(back, "signal");
        CHECK(res.signal ? json_integer_value(sig) == res.signal : json_is_null(sig));
        CHECK(json_integer_value(json_object_get(back, "execution_time_ms")) >= 0);
        CHECK(json_integer_value(json_object_get(back, "memory_used_mb")) >= 0);
        CHECK(json_is_true(json_object_get(back, "timed_out")) == res.timed_out);
        CHECK(json_is_true(json_object_get(back, "oom_killed")) == res.oom_killed);
        CHECK(json_is_true(json_object_get(back, "stdout_truncated")) == res.stdout_truncated);
        CHECK(json_is_true(json_object_get(back, "stderr_truncated")) == res.stderr_truncated);
        CHECK((json_object_get(back, "id") != NULL) == (id != NULL));
        json_decref(back);
        json_decref(o);
        free(text);
        hxs_result_clear(&res);
        CHECK(res.stdout_data == NULL && res.stderr_data == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 2)
                return 0;
        unsigned flags = data[0], capbyte = data[1];
        const unsigned char *s = data + 2;
        size_t n = size - 2;

        piece *pieces = malloc((n ? n : 1) * sizeof(*pieces));
        CHECK(pieces != NULL);
        size_t np = reference(s, n, pieces);

        check_lossy(s, n, pieces, np);
        /* Small buffers (cuts inside characters), and one that always suffices. */
        check_copy(s, n, pieces, np, capbyte);
        check_copy(s, n, pieces, np, capbyte & 7);
        check_copy(s, n, pieces, np, n * 3 + 1);
        free(pieces);

        check_result((const char *)s, n, (const char *)s + n / 2, n - n / 2, flags, capbyte);
        return 0;
}
