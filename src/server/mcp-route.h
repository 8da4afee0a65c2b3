/* SPDX-License-Identifier: Apache-2.0 */
/* POST /mcp, the MCP server's Streamable HTTP transport (mcp-route.c): the headers it
 * checks, one JSON-RPC message per request, and the tool calls in flight that a
 * notifications/cancelled may name. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "server/call.h"

/* The request's headers: 0 to read the body, else c holds the error reply (405 not
 * POST, 403 an Origin not allowed, 400 an MCP-Protocol-Version we do not speak, 415 not
 * JSON, 413 too large). */
int mcp_route_headers(call *c, const char *method, uint64_t length);
/* The body is in: c's reply is prepared (CALL_REPLY), or its tool call was handed to
 * admission as an execution request is (queued, running or already refused). */
void mcp_route_body(call *c);
/* MHD is done with c: out of the calls in flight, its run freed. */
void mcp_route_forget(call *c);

/* Is a browser's Origin allowed? allowed is MCP_ALLOWED_ORIGINS: a comma-separated list
 * of origins, or "" for loopback only (http or https, localhost, 127.0.0.1 or [::1],
 * any port). */
bool mcp_origin_allowed(const char *origin, const char *allowed);
