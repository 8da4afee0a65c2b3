/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A session tool's operation (session_exec or a file tool) queued in its session, and
 * the words a refusal is told in. Both transports queue this way; only where the
 * answer goes (sink) and which sessions a client may name are theirs.
 */
#include <errno.h>
#include <stdio.h>

#include "mcp/mcp.h"

static int queue(mcp_run *run, hxs_session *s, const mcp_session_sink *sink, uint64_t *ret_op, hxs_error *err)
{
        size_t len = 0;
        const void *data = mcp_run_data(run, &len);

        switch (mcp_run_kind(run)) {
        case MCP_TOOL_SESSION_EXEC:
                return hxs_session_exec(s, mcp_run_request(run), &sink->cell, ret_op, err);
        case MCP_TOOL_SESSION_WRITE_FILE:
                return hxs_session_put_file(s, mcp_run_path(run), data, len, sink->file, sink->cell.userdata, ret_op,
                                            err);
        case MCP_TOOL_SESSION_READ_FILE:
                return hxs_session_get_file(s, mcp_run_path(run), sink->file, sink->cell.userdata, ret_op, err);
        case MCP_TOOL_SESSION_LIST_FILES:
                return hxs_session_list_files(s, mcp_run_path(run), sink->file, sink->cell.userdata, ret_op, err);
        case MCP_TOOL_RUN_CODE:
        case MCP_TOOL_SESSION_CREATE:
        case MCP_TOOL_SESSION_CLOSE:
        case MCP_TOOL_MAX:
        default:
                snprintf(err->message, sizeof(err->message), "not a session operation");
                return -EINVAL;
        }
}

int mcp_run_queue_in(mcp_run *run, hxs_session *s, const char *sid, const mcp_session_sink *sink, uint64_t *ret_op,
                     char *message, size_t message_len)
{
        hxs_error err = { 0 };
        int r = queue(run, s, sink, ret_op, &err);
        if (r >= 0)
                return r;

        hxs_session_info in;
        hxs_session_get_info(s, &in);
        if (r == -ESHUTDOWN)
                snprintf(message, message_len, "session %s has ended: %s", sid, in.end_message);
        else if (r == -EBUSY)
                snprintf(message, message_len, "session %s has %d operations waiting already; retry when one has ended",
                         sid, HXS_SESSION_QUEUE_MAX);
        else
                snprintf(message, message_len, "%s", err.message[0] ? err.message : "the operation could not be queued");
        return r;
}
