/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP routes of sessions (session-call.c), called by http.c: what the headers
 * decide, what the complete body starts, what is left when MHD is done with a request.
 *
 *   POST   /api/v1/sessions                   create (201, once its driver is ready)
 *   GET    /api/v1/sessions                   the caller's sessions
 *   GET    /api/v1/sessions/{id}              one session
 *   DELETE /api/v1/sessions/{id}              end it (204); 404 from then on
 *   POST   /api/v1/sessions/{id}/exec         a cell (JSON or multipart; SSE on request)
 *   POST   /api/v1/sessions/{id}/interrupt    interrupt the running cell (202); state kept
 *   PUT    /api/v1/sessions/{id}/files/{path} write a file (raw body, 201)
 *   GET    /api/v1/sessions/{id}/files/{path} read a file (its bytes)
 *   GET    /api/v1/sessions/{id}/files        list (?path=dir)
 */
#pragma once

#include <stdint.h>

#include "server/call.h"

#define SESSIONS_PREFIX "/api/v1/sessions"

/* 0: read the body, then session_call_complete; 1: a reply is prepared (sent once any
 * body is read); -1: an error reply is prepared. */
int session_call_headers(call *c, const char *method, const char *url, uint64_t length);
/* The body is in: c->state is CALL_REPLY (send it), or c is suspended waiting for the
 * session, or it streams (c->stream). */
void session_call_complete(call *c);
/* MHD is done with c: nothing of a session waits on it any more (its client went away:
 * a cell of its is interrupted, the session stays). */
void session_call_forget(call *c);
