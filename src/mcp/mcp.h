/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MCP server's face (Model Context Protocol over JSON-RPC 2.0), without a
 * transport: mcp_handle takes one message from a client and says what to do with it
 * (send a reply, nothing, start a tool's work, end a run the client cancelled). A tool
 * call that runs code comes back as an mcp_run: the transport starts its request on the
 * engine as exec does, turns output into progress notifications through
 * mcp_run_progress and the end into the response through mcp_run_result. stdio
 * (src/cli/cli-mcp.c) and Streamable HTTP (src/server/mcp-route.c) share every line of
 * protocol code this way.
 *
 * Every text this module returns is one line of compact JSON (no '\n' in it), malloc'ed,
 * the caller's to free.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hexr-sandbox/sandbox.h"

/* Protocol versions, newest first: a client asking for another gets the newest. */
#define MCP_PROTOCOL_LATEST "2025-11-25"
bool mcp_version_supported(const char *version);

/* One client's protocol state (the negotiated version). cfg is kept, not copied: it
 * must outlive the session. NULL on ENOMEM. */
typedef struct mcp_session mcp_session;
mcp_session *mcp_session_new(const hxs_config *cfg);
void mcp_session_free(mcp_session *s);
/* The version initialize agreed on, or MCP_PROTOCOL_LATEST before it. */
const char *mcp_session_version(const mcp_session *s);

/* A tool call at work. Owned by the transport once handed out. */
typedef struct mcp_run mcp_run;

/* The tools, in tools/list's order. */
typedef enum mcp_tool {
        MCP_TOOL_RUN_CODE = 0,          /* one execution: mcp_run_request */
        MCP_TOOL_SESSION_CREATE,        /* hxs_session_start(mcp_run_request, mcp_run_limits) */
        MCP_TOOL_SESSION_EXEC,          /* hxs_session_exec(mcp_run_request: the cell) */
        MCP_TOOL_SESSION_WRITE_FILE,    /* hxs_session_put_file(mcp_run_path, mcp_run_data) */
        MCP_TOOL_SESSION_READ_FILE,     /* hxs_session_get_file(mcp_run_path) */
        MCP_TOOL_SESSION_LIST_FILES,    /* hxs_session_list_files(mcp_run_path) */
        MCP_TOOL_SESSION_CLOSE,         /* hxs_session_end_now(HXS_SESSION_DELETED) */
        MCP_TOOL_MAX,
} mcp_tool;

typedef enum mcp_action {
        MCP_ACT_NONE = 0,       /* nothing to send: a notification or a client's response */
        MCP_ACT_REPLY,          /* send reply (a response, or an error response) */
        MCP_ACT_RUN,            /* start run's request; its response comes from mcp_run_* */
        MCP_ACT_CANCEL,         /* end the run whose mcp_run_id is cancel_id; send nothing */
        MCP_ACT_MAX,
} mcp_action;

typedef struct mcp_outcome {
        mcp_action action;
        char *reply;            /* MCP_ACT_REPLY */
        size_t reply_len;
        mcp_run *run;           /* MCP_ACT_RUN */
        char *cancel_id;        /* MCP_ACT_CANCEL: the request id as compact JSON */
        const char *method;     /* static: the method for metrics and logs ("other" when
                                 * not one of ours, "invalid" when no method could be read) */
        const char *tool;       /* static: tools/call's tool when it is one of ours, else NULL */
        bool is_request;        /* the message was a request (it expects a response) */
} mcp_outcome;

/* Reads one message (untrusted bytes: strict JSON, duplicate keys refused) and fills
 * *ret. Returns 0, or -ENOMEM (then *ret is cleared). */
int mcp_handle(mcp_session *s, const char *msg, size_t len, mcp_outcome *ret);
/* Frees what *o still owns (a run not taken with TAKE_PTR), zeroes it. */
void mcp_outcome_clear(mcp_outcome *o);

/* The request to start (validated against the session's cfg, as POST /api/v1/exec
 * validates). Owned by the run. */
const hxs_request *mcp_run_request(const mcp_run *r);
/* The same, handed over: the caller frees it (hxs_request_free); the run keeps NULL. */
hxs_request *mcp_run_take_request(mcp_run *r);
/* The call's JSON-RPC id as compact JSON text, to match a notifications/cancelled. */
const char *mcp_run_id(const mcp_run *r);
/* The tool's name (static), for metrics and logs, and which it is. */
const char *mcp_run_tool(const mcp_run *r);
mcp_tool mcp_run_kind(const mcp_run *r);
/* Session tools: the session_id the call names ("" for session_create; the transport
 * decides whether the client may name it), session_create's limits, the file tools'
 * path (normalised for write; "" = the working directory for list), write's bytes. */
const char *mcp_run_session_id(const mcp_run *r);
const hxs_session_limits *mcp_run_limits(const mcp_run *r);
const char *mcp_run_path(const mcp_run *r);
const void *mcp_run_data(const mcp_run *r, size_t *ret_len);
/* Did the client ask for progress (a progressToken in _meta)? */
bool mcp_run_wants_progress(const mcp_run *r);
/* A notifications/progress carrying the chunk as its message, or NULL when the
 * client asked for none (or on ENOMEM: progress is best effort). */
char *mcp_run_progress(mcp_run *r, int stream, const void *data, size_t len, size_t *ret_len);
/* The response for the execution's result: a tool result with text, images, files and
 * structuredContent; isError when the program failed. NULL on ENOMEM. */
char *mcp_run_result(mcp_run *r, const hxs_result *res, size_t *ret_len);
/* The response when the sandbox could not run (err says why): a tool result with
 * isError, the reason as its text. NULL on ENOMEM. */
char *mcp_run_failed(mcp_run *r, const hxs_error *err, size_t *ret_len);
/* The response of a call the transport cannot carry out (a session id that is not the
 * client's, too many at once): a tool result with isError and message as its text. */
char *mcp_run_error(mcp_run *r, const char *message, size_t *ret_len);
/* Session tools' responses. session_create's (the session started, or failed to) and
 * session_close's: the session object as structuredContent; sid is the id the
 * transport gave it. */
char *mcp_run_session_result(mcp_run *r, const hxs_session *s, const char *sid, size_t *ret_len);
/* session_exec's: stdout, stderr, display outputs (images), the value, the exception,
 * the status, returned files; the cell result object as structuredContent; isError
 * unless the cell's status is ok. */
char *mcp_run_cell_result(mcp_run *r, const hxs_cell_result *res, const hxs_session *s, const char *sid,
                          size_t *ret_len);
/* The file tools': what was written, the file read (text, image or resource), the
 * entries; isError when the operation failed. */
char *mcp_run_file_result(mcp_run *r, const hxs_session_file_result *res, size_t *ret_len);
void mcp_run_free(mcp_run *r); /* NULL is fine */

/* Where a queued session operation's answer goes: session_exec's output and end go to
 * cell (cell.userdata given to each), the file tools' end to file with cell.userdata. */
typedef struct {
        hxs_cell_callbacks cell;
        hxs_session_file_fn file;
} mcp_session_sink;

/* Queues run's operation (session_exec or a file tool) in session s, which the
 * transport calls sid; *ret_op is its handle for hxs_session_cancel. Returns 0, or < 0
 * with message (message_len bytes) saying why, for mcp_run_error: the session has
 * ended, its queue is full, the cell was refused. */
int mcp_run_queue_in(mcp_run *run, hxs_session *s, const char *sid, const mcp_session_sink *sink, uint64_t *ret_op,
                     char *message, size_t message_len);

/* A JSON-RPC error response for a message that never reached mcp_handle (a transport's
 * own refusal: too long). id NULL: null. */
char *mcp_error_text(const char *id_json, int code, const char *message, size_t *ret_len);

#define MCP_PARSE_ERROR      (-32700)
#define MCP_INVALID_REQUEST  (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS   (-32602)
#define MCP_INTERNAL_ERROR   (-32603)
