/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP session tools over HTTP (mcp-sessions.c), on the service's sessions
 * (sessions.c): a session belongs to the caller that created it, as on
 * /api/v1/sessions, with the same quotas. */
#pragma once

#include "server/call.h"

/* c->mcp is a session tool's call: its reply is prepared now (CALL_REPLY), or c waits
 * for the session (CALL_RUNNING, suspended) or streams a cell's progress
 * (CALL_STREAMING, c->stream). */
void mcp_sessions_route(call *c);
/* The client cancelled c's call (notifications/cancelled): nothing more is asked of the
 * session for it, and its connection closes without an answer. */
void mcp_sessions_cancel_call(call *c);
