/* SPDX-License-Identifier: Apache-2.0 */
/* GET /api/v1/runtimes, and the languages' versions for /health (runtimes.c). */
#pragma once

#include "hexr-sandbox/sandbox.h"
#include "server/call.h"

struct json_t;

void reply_runtimes(call *c);
struct json_t *runtimes_summary_json(const hxs_runtime_info *ri);
