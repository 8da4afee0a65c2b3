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
