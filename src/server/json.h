/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON face of the engine: request bodies in, result objects out. Shared by the
 * service (POST /api/v1/exec) and the CLI (`exec --json`), so both speak the same
 * object.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "hexr-sandbox/sandbox.h"

/* Parses a request body and validates it against cfg (hxs_request_validate).
 *
 * Strict: the top level must be an object; duplicate keys, unknown fields, trailing
 * garbage and invalid UTF-8 are rejected; "code" and "stdin" may contain U+0000,
 * nothing else may. Optional fields may be null (= not given).
 *
 * Returns 0 and a new request in *ret (the caller frees it with hxs_request_free), or
 * a negative errno with err filled: kind HXS_ERR_INVALID (400) and a message that
 * names the field, e.g. "timeout: must be an integer number of seconds". *ret is
 * written only on success. */
int hxs_request_from_json(const char *body, size_t len, const hxs_config *cfg,
                          hxs_request **ret, hxs_error *err);

/* The result object the API returns: stdout, stderr, exit_code, execution_time_ms,
 * memory_used_mb, timed_out, oom_killed, signal (null when 0), stdout_truncated,
 * stderr_truncated, id. Output is bytes: invalid UTF-8 is replaced with U+FFFD so the
 * JSON is always valid. id NULL leaves the "id" field out. Returns a new reference
 * (NULL on allocation failure). */
json_t *hxs_result_to_json(const hxs_result *res, const char *id);

/* The same object as json_dumps(hxs_result_to_json(res, id), JSON_COMPACT), byte for
 * byte, written directly (the outputs are converted once, not twice). Sets *ret_len;
 * NULL on allocation failure. */
char *hxs_result_to_text(const hxs_result *res, const char *id, size_t *ret_len);

/* Bytes to a JSON string, replacing each maximal invalid UTF-8 subsequence with U+FFFD
 * (the Unicode "best practice", as Python's errors="replace"). NULL on ENOMEM. */
json_t *hxs_json_string_lossy(const char *data, size_t len);

/* The same conversion into a caller buffer: writes at most cap bytes (whole
 * characters only, NUL-terminated when cap > 0) and returns the length written.
 * Used for log fields and error messages that may quote untrusted bytes. */
size_t hxs_utf8_lossy_copy(char *dst, size_t cap, const char *src, size_t len);
