/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One HTTP request of the service, from its headers to its reply: the routes, where an
 * execution request is in its life, and the reply prepared for it.
 */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hexr-sandbox/sandbox.h"
#include "server/identity.h"
#include "server/loop.h"

struct server;
struct caller_state;
struct mcp_run;

typedef enum route {
        ROUTE_EXEC,     /* POST /api/v1/exec */
        ROUTE_EXECUTE,  /* POST /execute (alias) */
        ROUTE_HEALTH,   /* GET /health */
        ROUTE_METRICS,  /* GET /metrics */
        ROUTE_EXECUTIONS, /* GET /api/v1/executions/{id} */
        ROUTE_RUNTIMES, /* GET /api/v1/runtimes */
        ROUTE_SESSIONS, /* /api/v1/sessions and below (session-call.c) */
        ROUTE_MCP,      /* POST /mcp: the MCP server, Streamable HTTP (mcp-route.c) */
        ROUTE_OTHER,    /* anything else: 404 */
        ROUTE_MAX,
} route;

/* Where an execution request is in its life. */
typedef enum call_state {
        CALL_READING,   /* receiving the body */
        CALL_QUEUED,    /* suspended, waiting for a slot */
        CALL_RUNNING,   /* suspended, its sandbox runs */
        CALL_REPLY,     /* resumed with a response ready to queue */
        CALL_STREAMING, /* events requested and the execution ended: its last events
                         * are being written */
        CALL_GONE,      /* the client went away: close without a response */
        CALL_DONE,      /* response queued */
        CALL_STATE_MAX,
} call_state;

/* One HTTP request (MHD's per-request context). Execution requests use every field;
 * the others only route and reply. */
typedef struct call {
        struct server *srv;
        struct MHD_Connection *conn;
        route route;
        call_state state;
        bool is_exec;           /* POST to an exec route: body, queue, sandbox */
        bool suspended;
        bool held;              /* counted in srv->n_held until MHD completes it */
        char id[33];            /* request id: 128 random bits in hex */
        char caller[SPIFFE_ID_MAX + 1]; /* verified SPIFFE ID; "" when none (anonymous) */
        struct caller_state *cs; /* while queued or running: its caller's counters */
        int label;              /* its metrics label (callers.c) */

        /* body, capped at MAX_BODY_BYTES */
        char *body;
        size_t body_len, body_cap;
        uint64_t body_seen;     /* bytes received, kept counting past the cap */
        bool body_too_large;
        struct upload *upload;  /* multipart/form-data: its parts, its staged files */

        /* execution */
        bool parsed;            /* the body was a valid request: the fields below are set */
        hxs_request *req;
        hxs_exec *exec;
        hxs_language language;
        uint32_t timeout_s, memory_mb;
        size_t code_bytes;
        uint64_t received_ms;   /* monotonic: body complete */
        uint64_t started_ms;    /* monotonic: sandbox started */
        struct stream *stream;  /* Accept: text/event-stream, once its sandbox started */
        bool wants_stream;      /* asked for events (stream.c) */
        watch exec_watch;
        watch client_watch;
        /* POST /mcp whose message is a tool call: its run makes the reply (call.c) and
         * its progress events (stream.c); NULL for every other request */
        struct mcp_run *mcp;
        char mcp_key[SPIFFE_ID_MAX + 80]; /* caller, Mcp-Session-Id and the JSON-RPC id:
                                           * what a notifications/cancelled names */
        char mcp_session[33];   /* Mcp-Session-Id to send (initialize), "" for none */
        bool mcp_listed;        /* in srv->mcp_calls */
        TAILQ_ENTRY(call) mlink;
        TAILQ_ENTRY(call) link; /* in admission's queue or its running list */
        TAILQ_ENTRY(call) clink; /* in its caller's queue while queued */

        /* the reply, prepared before the connection is resumed */
        unsigned status;
        const char *error_code; /* static string, for the log; NULL on success */
        char *reply;            /* malloc'ed body (JSON) */
        size_t reply_len;
        unsigned retry_after_s; /* 0: no Retry-After */
        const char *allow;      /* Allow header for 405, else NULL */
        bool close;             /* Connection: close (the rest of the connection is not read) */
        const char *content_type; /* of the reply, static; NULL: application/json */

        /* sessions (session-call.c) */
        int session_route;      /* which of its routes */
        char session_id[33];    /* of the session it names (found again once the body is in) */
        struct live_session *session; /* what the request waits on, NULL once answered */
        uint64_t session_op;    /* its cell or file operation, for hxs_session_cancel */
        char session_path[256]; /* a file's path in the session */
        uint64_t body_limit;    /* the body's cap when it is not MAX_BODY_BYTES (0) */
        bool logged;
} call;

TAILQ_HEAD(call_list, call);

/* call.c: what http.c and admission.c both do with a request. */

/* Prepares an error reply {"error":{"code":..,"message":..}} in c. */
void call_set_error(call *c, unsigned status, const char *code, const char *message);
/* HTTP status for an engine error kind: 400, 422 or 500; and the error code of the
 * JSON body (invalid_request, not_found, sandbox_setup_failed...). 413 is the
 * service's own (a body over MAX_BODY_BYTES, http.c): no engine error maps to it. */
unsigned call_status_of(const hxs_error *err);
const char *call_error_code_of(const hxs_error *err);
/* The error reply for an engine error: its status, its code, its message (fallback
 * when it has none). For an MCP tool call: a tool result with isError, status 200 (the
 * call was answered; what went wrong is the tool's). */
void call_set_engine_error(call *c, const hxs_error *err, const char *fallback);
/* The reply for an execution's result: the API's result object, or for an MCP tool call
 * its JSON-RPC response. Status 200. */
void call_set_result(call *c, const hxs_result *res);
/* Suspends the connection (MHD stops serving it) and watches its socket for the client
 * going away: hangup is called then. */
void call_suspend(call *c, watch_ready_fn hangup);
/* Resumes the suspended connection (if it is) so MHD asks for the reply or notices the
 * state; stops watching its socket. */
void call_resume(call *c);
/* The reply is prepared: CALL_REPLY, and resumed. */
void call_reply_ready(call *c);
