/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the streaming multipart/form-data parser (src/server/multipart.c), which
 * reads what any client sends to POST /api/v1/exec.
 *
 * Input: a first byte that picks the feed size (1 to 256), then the body, parsed with
 * the boundary "XyZ".
 *
 * Invariants: the parser answers 0 or -EINVAL (with a message); callbacks come in
 * order (begin, data..., end), names are NUL-terminated within their buffers; the
 * bytes handed on as data never exceed the input; the same input cut into other feeds
 * gives the same parts and the same answer.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/multipart.h"
#include "fuzz.h"

typedef struct trace {
        bool in_part;
        size_t parts, bytes;
        uint64_t sum;           /* of the data's bytes, position-weighted per part */
} trace;

static int on_begin(void *ud, const mp_part *part, hxs_error *err)
{
        trace *t = ud;
        CHECK(!t->in_part);
        CHECK(memchr(part->name, '\0', sizeof(part->name)) != NULL);
        CHECK(memchr(part->filename, '\0', sizeof(part->filename)) != NULL);
        CHECK(memchr(part->content_type, '\0', sizeof(part->content_type)) != NULL);
        t->in_part = true;
        t->parts++;
        return 0;
}

static int on_data(void *ud, const char *data, size_t len, hxs_error *err)
{
        trace *t = ud;
        CHECK(t->in_part && len > 0);
        for (size_t i = 0; i < len; i++)
                t->sum = t->sum * 31 + (unsigned char)data[i];
        t->bytes += len;
        return 0;
}

static int on_end(void *ud, hxs_error *err)
{
        trace *t = ud;
        CHECK(t->in_part);
        t->in_part = false;
        return 0;
}

static int run(const char *body, size_t len, size_t step, trace *t)
{
        static const mp_callbacks cb = { on_begin, on_data, on_end };
        mp_parser *p = NULL;
        hxs_error err = { 0 };

        *t = (trace){ 0 };
        CHECK(mp_new("XyZ", &cb, t, &p) == 0);
        int r = 0;
        for (size_t at = 0; at < len && r == 0; at += step)
                r = mp_feed(p, body + at, len - at < step ? len - at : step, &err);
        if (r == 0)
                r = mp_finish(p, &err);
        CHECK(r == 0 || r == -EINVAL);
        CHECK(r == 0 || err.message[0]);
        CHECK(t->bytes <= len);
        mp_free(p);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t step = (size_t)data[0] + 1;
        const char *body = (const char *)data + 1;
        size_t len = size - 1;
        trace a, b;

        int ra = run(body, len, step, &a);
        int rb = run(body, len, len ? len : 1, &b);
        CHECK(ra == rb);
        if (ra == 0)
                CHECK(a.parts == b.parts && a.bytes == b.bytes && a.sum == b.sum);
        return 0;
}
