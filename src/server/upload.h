/* SPDX-License-Identifier: Apache-2.0 */
/* multipart/form-data execution requests (upload.c): the "request" part is the JSON
 * request, each "files" part a file whose filename is its path in the sandbox; files
 * are streamed into unlinked files under STATE_DIR, never held in memory. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hexr-sandbox/sandbox.h"

typedef struct upload upload;

/* Is this Content-Type multipart/form-data (any case, parameters after it)? */
bool upload_is_multipart(const char *content_type);
/* The largest body a multipart request may have: its JSON part, its files, and room
 * for the parts' headers. */
uint64_t upload_body_max(const hxs_config *cfg);
/* A new upload for a request with that Content-Type. -EINVAL (err says why). The
 * bytes it stages are added to *staged (the service's, shared by all uploads) and
 * taken off it again when it fails or is freed; past UPLOAD_STAGING_BYTES, it fails. */
int upload_new(const hxs_config *cfg, uint64_t *staged, const char *content_type, upload **ret,
               hxs_error *err);
/* Closes the staged files, gives back their bytes; NULL is fine. Free it once the
 * request that holds the files ends, so the count stays true while it waits and runs. */
void upload_free(upload *u);
/* Body bytes as they come. 0, or an error (err filled: 400 or 413 kinds, -EBUSY past
 * UPLOAD_STAGING_BYTES); after an error the staged files are closed and the rest of the
 * body may be fed and is dropped. */
int upload_feed(upload *u, const char *data, size_t len, hxs_error *err);
/* The body is complete: the request, with its JSON part's fields and files and then
 * the staged files (handed over by fd), validated. */
int upload_finish(upload *u, hxs_request **ret, hxs_error *err);
