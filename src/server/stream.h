/* SPDX-License-Identifier: Apache-2.0 */
/* Server-Sent Events for POST /api/v1/exec with Accept: text/event-stream (stream.c):
 * the events' framing, the output chunks as text or base64, heartbeats, and the MHD
 * response that carries them. */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/call.h"

struct server;

/* Bytes a client may leave unread before output events are dropped from its stream
 * (never from the result, which keeps its own head and tail). */
#define STREAM_PENDING_MAX ((size_t)8 << 20)

/* The stream module's state: its streams (for heartbeats) and its deadline hook. */
typedef struct stream_state stream_state;

/* ---- the parts without a connection (unit-tested) --------------------------------- */

/* Growable text of events not yet written, capped by its owner. */
typedef struct sse_buf {
        char *data;
        size_t len, off, cap;
} sse_buf;

/* Appends "event: NAME\ndata: JSON\n\n"; json is one line (compact JSON). -ENOMEM. */
int sse_append_event(sse_buf *b, const char *name, const char *json);
/* Appends a comment ": TEXT\n\n" (heartbeats, notes a client ignores). -ENOMEM. */
int sse_append_comment(sse_buf *b, const char *text);
void sse_buf_free(sse_buf *b);

/* What is held back of one output stream: the start of a UTF-8 sequence that the next
 * chunk completes. */
typedef struct sse_utf8 {
        unsigned char held[4];
        size_t n_held;
} sse_utf8;

/* The data of an output event for the chunk (after what u holds): {"text": ...} when it
 * is valid UTF-8 up to an incomplete sequence at its end (held back in u), else
 * {"base64": ...} of all of it. *ret_json is malloc'ed, NULL when nothing is left to
 * send (all held back). flush: the stream ended, nothing is held back. -ENOMEM. */
int sse_output_json(sse_utf8 *u, const void *data, size_t len, bool flush, char **ret_json);

/* ---- streams of the service -------------------------------------------------------- */

int stream_setup(struct server *srv);      /* the heartbeat hook */
void stream_cleanup(struct server *srv);
/* Does the request ask for events (its Accept header names text/event-stream)? */
bool stream_wanted(struct MHD_Connection *conn);
/* c's execution started: it gets a stream (events are kept until the response is
 * queued). -ENOMEM. */
int stream_begin(call *c);
/* Queues the 200 text/event-stream response on c's connection (from the handler). */
enum MHD_Result stream_queue(call *c);
/* The engine's output callback (hxs_output_fn): userdata is the call. */
void stream_output(void *userdata, int stream, const void *data, size_t len);
/* Another event as it comes (a session's "display"): json is one line. Dropped, as
 * output is, when the client reads too slowly. */
void stream_event(call *c, const char *name, const char *json);
/* The execution ended: c->reply is the result (status 200) or an error reply; the
 * stream sends what is left, the file events, then "result" (or "error"), and ends. */
void stream_end(call *c);
/* The client went away: the stream ends without more events. */
void stream_gone(call *c);
/* MHD is done with c. NULL stream is fine. */
void stream_free(call *c);
