/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP API's session objects as jansson values (session-json.c), for the service;
 * the public header has them as text. */
#pragma once

#include <jansson.h>

#include "hexr-sandbox/sandbox.h"

/* {"id", "language", "state", "created_at", "expires_at", "idle_expires_at" (RFC 3339
 * UTC; null when busy or ended), "memory_mb", "cells", "idle_timeout", "lifetime",
 * "ended_reason", "ended_message"}. A new reference; NULL on ENOMEM. */
json_t *session_to_json(const hxs_session *s, const char *id);
/* A cell's result object; "session" when s is not NULL. */
json_t *cell_result_to_json(const hxs_cell_result *res, const hxs_session *s, const char *id);
/* "2026-12-01T15:04:05Z" */
void session_time_text(int64_t t, char *buf, size_t size);
