/* SPDX-License-Identifier: Apache-2.0 */
/*
 * multipart/form-data (RFC 7578 over RFC 2046), streamed: the body is scanned for the
 * delimiter CRLF "--" boundary as it arrives, and a part's bytes are handed on as soon
 * as they cannot be the start of a delimiter. What is kept between two feeds is at most
 * a part's headers (MP_HEADERS_MAX) or the last delimiter-length - 1 bytes.
 *
 * The body is read as if it began with CRLF, so the first delimiter (which has none
 * before it) is found like the others. Preamble and epilogue are ignored; transport
 * padding (spaces, tabs) after a delimiter is allowed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/macro.h"
#include "server/multipart.h"

typedef enum mp_state {
        MP_PREAMBLE,
        MP_AFTER_DELIM,         /* "--" (the end) or CRLF (a part) follows */
        MP_HEADERS,
        MP_BODY,
        MP_END,
        MP_STATE_MAX,
} mp_state;

struct mp_parser {
        mp_callbacks cb;
        void *userdata;
        mp_state state;
        char delim[MP_BOUNDARY_MAX + 5];        /* CRLF "--" boundary */
        size_t delim_len;
        char *win;                              /* bytes not yet consumed */
        size_t len, cap;
};

static int bad(hxs_error *err, const char *what)
{
        return err_fail(err, HXS_ERR_INVALID, -EINVAL, "multipart body: %s", what);
}

int mp_boundary_of(const char *ct, char ret[MP_BOUNDARY_MAX + 1], hxs_error *err)
{
        static const char type[] = "multipart/form-data";

        if (!ct)
                return bad(err, "no Content-Type");
        ct += strspn(ct, " \t");
        if (strncasecmp(ct, type, strlen(type)) != 0)
                return bad(err, "Content-Type is not multipart/form-data");
        for (const char *p = ct + strlen(type); (p = strchr(p, ';'));) {
                p++;
                p += strspn(p, " \t");
                if (strncasecmp(p, "boundary=", 9) != 0)
                        continue;
                p += 9;
                size_t n;
                if (*p == '"') {
                        p++;
                        n = strcspn(p, "\"");
                        if (p[n] != '"')
                                return bad(err, "the boundary's quote is not closed");
                } else {
                        n = strcspn(p, " \t;");
                }
                if (n == 0 || n > MP_BOUNDARY_MAX)
                        return bad(err, "the boundary must be 1 to 70 characters");
                memcpy(ret, p, n);
                ret[n] = '\0';
                return 0;
        }
        return bad(err, "Content-Type has no boundary parameter");
}

int mp_new(const char *boundary, const mp_callbacks *cb, void *userdata, mp_parser **ret)
{
        size_t n = strlen(boundary);

        if (n == 0 || n > MP_BOUNDARY_MAX)
                return -EINVAL;
        mp_parser *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->cb = *cb;
        p->userdata = userdata;
        memcpy(p->delim, "\r\n--", 4);
        memcpy(p->delim + 4, boundary, n);
        p->delim_len = n + 4;
        p->cap = 4096;
        p->win = malloc(p->cap);
        if (!p->win) {
                free(p);
                return -ENOMEM;
        }
        memcpy(p->win, "\r\n", 2); /* see the top: the first delimiter has no CRLF */
        p->len = 2;
        *ret = p;
        return 0;
}

void mp_free(mp_parser *p)
{
        if (!p)
                return;
        free(p->win);
        free(p);
}

static const char *find(const char *hay, size_t n, const char *needle, size_t m)
{
        return m <= n ? memmem(hay, n, needle, m) : NULL;
}

/* One header parameter's value (name="value", or a token), from a Content-Disposition. */
static int param(const char *hdr, size_t hlen, const char *key, char *out, size_t cap, bool *found)
{
        size_t klen = strlen(key);

        *found = false;
        for (size_t i = 0; i < hlen; i++) {
                if (hdr[i] != ';')
                        continue;
                size_t j = i + 1;
                while (j < hlen && (hdr[j] == ' ' || hdr[j] == '\t'))
                        j++;
                if (hlen - j <= klen || strncasecmp(hdr + j, key, klen) != 0 || hdr[j + klen] != '=')
                        continue;
                j += klen + 1;
                size_t o = 0;
                bool quoted = j < hlen && hdr[j] == '"';
                for (j += quoted; j < hlen; j++) {
                        char ch = hdr[j];
                        if (quoted && ch == '"')
                                break;
                        if (!quoted && (ch == ';' || ch == ' ' || ch == '\t'))
                                break;
                        if (quoted && ch == '\\' && j + 1 < hlen)
                                ch = hdr[++j];
                        if (o + 1 >= cap)
                                return -ENAMETOOLONG;
                        out[o++] = ch;
                }
                if (quoted && (j >= hlen || hdr[j] != '"'))
                        return -EINVAL;
                out[o] = '\0';
                *found = true;
                return 0;
        }
        return 0;
}

/* The part's headers, hdr[0..n) without the blank line. */
static int parse_headers(const char *hdr, size_t n, mp_part *part, hxs_error *err)
{
        bool disposition = false, found;

        *part = (mp_part){ 0 };
        for (size_t at = 0; at < n;) {
                const char *eol = find(hdr + at, n - at, "\r\n", 2);
                size_t llen = eol ? (size_t)(eol - (hdr + at)) : n - at;
                const char *line = hdr + at;
                at += llen + 2;
                if (llen > 20 && strncasecmp(line, "Content-Disposition:", 20) == 0) {
                        size_t k = 20;
                        while (k < llen && (line[k] == ' ' || line[k] == '\t'))
                                k++;
                        if (llen - k < 9 || strncasecmp(line + k, "form-data", 9) != 0)
                                return bad(err, "a part's Content-Disposition is not form-data");
                        int r = param(line + k, llen - k, "name", part->name, sizeof(part->name), &found);
                        if (r < 0 || !found)
                                return bad(err, "a part's Content-Disposition has no valid name");
                        r = param(line + k, llen - k, "filename", part->filename, sizeof(part->filename),
                                  &part->has_filename);
                        if (r < 0)
                                return bad(err, "a part's filename is malformed or longer than 1024 bytes");
                        disposition = true;
                } else if (llen > 13 && strncasecmp(line, "Content-Type:", 13) == 0) {
                        size_t k = 13 + strspn(line + 13, " \t"), m = llen - k;
                        if (m >= sizeof(part->content_type))
                                m = sizeof(part->content_type) - 1;
                        memcpy(part->content_type, line + k, m);
                        part->content_type[m] = '\0';
                }
        }
        if (!disposition)
                return bad(err, "a part has no Content-Disposition header");
        return 0;
}

static void consume(mp_parser *p, size_t n)
{
        memmove(p->win, p->win + n, p->len - n);
        p->len -= n;
}

/* Moves the parse on with what win holds: 0 when it needs more bytes. */
static int step(mp_parser *p, bool *progress, hxs_error *err)
{
        const char *d;
        size_t keep = p->delim_len - 1;

        *progress = false;
        switch (p->state) {
        case MP_PREAMBLE:
                d = find(p->win, p->len, p->delim, p->delim_len);
                if (!d) {
                        if (p->len > keep)
                                consume(p, p->len - keep);
                        return 0;
                }
                consume(p, (size_t)(d - p->win) + p->delim_len);
                p->state = MP_AFTER_DELIM;
                break;
        case MP_AFTER_DELIM: {
                size_t k = 0;
                while (k < p->len && (p->win[k] == ' ' || p->win[k] == '\t'))
                        k++;
                if (k > 256)
                        return bad(err, "too much padding after a boundary");
                if (p->len - k < 2)
                        return 0;
                if (p->win[k] == '-' && p->win[k + 1] == '-') {
                        p->state = MP_END;
                        p->len = 0;
                        return 0;
                }
                if (p->win[k] != '\r' || p->win[k + 1] != '\n')
                        return bad(err, "a boundary is not followed by a line end");
                consume(p, k + 2);
                p->state = MP_HEADERS;
                break;
        }
        case MP_HEADERS: {
                mp_part part;
                size_t hlen;
                if (p->len >= 2 && p->win[0] == '\r' && p->win[1] == '\n') {
                        hlen = 0; /* no headers at all: refused below */
                } else {
                        d = find(p->win, p->len, "\r\n\r\n", 4);
                        if (!d) {
                                if (p->len > MP_HEADERS_MAX)
                                        return bad(err, "a part's headers are over 16 KiB");
                                return 0;
                        }
                        hlen = (size_t)(d - p->win);
                }
                int r = parse_headers(p->win, hlen, &part, err);
                if (r < 0)
                        return r;
                consume(p, hlen ? hlen + 4 : 2);
                r = p->cb.begin(p->userdata, &part, err);
                if (r < 0)
                        return r;
                p->state = MP_BODY;
                break;
        }
        case MP_BODY: {
                d = find(p->win, p->len, p->delim, p->delim_len);
                size_t n = d ? (size_t)(d - p->win) : (p->len > keep ? p->len - keep : 0);
                if (n) {
                        int r = p->cb.data(p->userdata, p->win, n, err);
                        if (r < 0)
                                return r;
                }
                if (!d) {
                        if (n)
                                consume(p, n);
                        return 0;
                }
                consume(p, n + p->delim_len);
                int r = p->cb.end(p->userdata, err);
                if (r < 0)
                        return r;
                p->state = MP_AFTER_DELIM;
                break;
        }
        case MP_END:
                p->len = 0; /* the epilogue */
                return 0;
        case MP_STATE_MAX:
        default:
                return bad(err, "internal state");
        }
        *progress = true;
        return 0;
}

int mp_feed(mp_parser *p, const char *data, size_t len, hxs_error *err)
{
        if (p->state == MP_END)
                return 0;
        if (p->len + len > p->cap) {
                size_t cap = p->cap;
                while (cap < p->len + len)
                        cap *= 2;
                char *w = realloc(p->win, cap);
                if (!w)
                        return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "multipart body: out of memory");
                p->win = w;
                p->cap = cap;
        }
        memcpy(p->win + p->len, data, len);
        p->len += len;
        for (bool progress = true; progress;) {
                int r = step(p, &progress, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int mp_finish(mp_parser *p, hxs_error *err)
{
        if (p->state != MP_END)
                return bad(err, "it ends before its closing boundary");
        return 0;
}
