/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON face of the library, the parts that speak jansson: result objects and the
 * lossy UTF-8 conversion that lets bytes travel in JSON. Requests from JSON and
 * results to JSON text, which the CLI uses too, are in the public header.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "hexr-sandbox/sandbox.h"

/* The result object the API returns: stdout, stderr, exit_code, execution_time_ms,
 * memory_used_mb, timed_out, oom_killed, signal (null when 0), stdout_truncated,
 * stderr_truncated, id. Output is bytes: invalid UTF-8 is replaced with U+FFFD so the
 * JSON is always valid. id NULL leaves the "id" field out. Returns a new reference
 * (NULL on allocation failure). */
json_t *result_to_json(const hxs_result *res, const char *id);

/* Bytes to a JSON string, replacing each maximal invalid UTF-8 subsequence with U+FFFD
 * (the Unicode "best practice", as Python's errors="replace"). NULL on ENOMEM. */
json_t *json_string_lossy(const char *data, size_t len);

/* The same conversion into a caller buffer: writes at most cap bytes (whole
 * characters only, NUL-terminated when cap > 0) and returns the length written.
 * Used for log fields and error messages that may quote untrusted bytes. */
size_t utf8_lossy_copy(char *dst, size_t cap, const char *src, size_t len);

/* Strict base64 (RFC 4648, padding required, no whitespace) into a new buffer (a NUL
 * after the bytes); -EINVAL or -ENOMEM. */
int json_base64_decode(const char *in, size_t n, unsigned char **ret, size_t *ret_len);
/* Bytes as base64 with padding, a new NUL-terminated string; NULL on ENOMEM. */
char *json_base64(const unsigned char *p, size_t n);
/* The result's "files" array: {"path", "size", "mime", "encoding", "content",
 * "truncated"} each; NULL on ENOMEM. */
json_t *files_to_json(const hxs_file *files, size_t n);
