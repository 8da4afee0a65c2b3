/* SPDX-License-Identifier: Apache-2.0 */
/* The service's log (log.c): one JSON line per execution and per service event. */
#pragma once

#include "hexr-sandbox/sandbox.h"
#include "server/call.h"

void log_call(const call *c, const hxs_result *res, const char *outcome_text,
              const char *error_code);
void log_line(const char *event, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
