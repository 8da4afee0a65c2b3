/* SPDX-License-Identifier: Apache-2.0 */
/* A streaming multipart/form-data parser (multipart.c): fed the body as it arrives, it
 * calls back at each part's start (with its headers' name, filename, content type),
 * for its bytes, and at its end. It keeps at most a part's headers and one delimiter's
 * worth of bytes, never a part's body. No I/O, no allocation per byte: fuzzed and
 * unit-tested. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

/* RFC 2046: a boundary is 1 to 70 characters. */
#define MP_BOUNDARY_MAX 70
/* The most a part's headers may take. */
#define MP_HEADERS_MAX 16384
/* The longest name or filename kept (longer: refused). */
#define MP_NAME_MAX 1024

typedef struct mp_part {
        char name[MP_NAME_MAX + 1];
        char filename[MP_NAME_MAX + 1]; /* "" when the part has none */
        bool has_filename;
        char content_type[128];         /* "" when not given */
} mp_part;

/* Each returns 0, or a negative errno with err filled (the parse stops there). */
typedef struct mp_callbacks {
        int (*begin)(void *userdata, const mp_part *part, hxs_error *err);
        int (*data)(void *userdata, const char *data, size_t len, hxs_error *err);
        int (*end)(void *userdata, hxs_error *err);
} mp_callbacks;

typedef struct mp_parser mp_parser;

/* The boundary parameter of a multipart/form-data Content-Type; -EINVAL (err says
 * why) when it is not one. */
int mp_boundary_of(const char *content_type, char ret[MP_BOUNDARY_MAX + 1], hxs_error *err);
int mp_new(const char *boundary, const mp_callbacks *cb, void *userdata, mp_parser **ret);
void mp_free(mp_parser *p); /* NULL is fine */
/* Body bytes, as they come. 0, or the negative errno of a callback or of bad syntax
 * (-EINVAL, err names what). */
int mp_feed(mp_parser *p, const char *data, size_t len, hxs_error *err);
/* The body is complete: 0 when its closing delimiter was seen, else -EINVAL. */
int mp_finish(mp_parser *p, hxs_error *err);
