/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One request's life, as both http.c (which reads it and sends its reply) and
 * admission.c (which queues and runs it) see it: its error reply, an engine error as an
 * HTTP status and code (for an MCP tool call, its JSON-RPC response), and resuming the
 * suspended connection once the reply is ready. Neither module calls the other back: both call these.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "engine/json.h"
#include "mcp/mcp.h"
#include "server/call.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/state.h"

void call_set_error(call *c, unsigned status, const char *code, const char *message)
{
        json_t *o = json_pack("{s:{s:s,s:o*}}", "error", "code", code, "message",
                              json_string_lossy(message, strlen(message)));
        free(c->reply);
        c->reply = o ? json_dumps(o, JSON_COMPACT) : NULL;
        c->reply_len = c->reply ? strlen(c->reply) : 0;
        c->status = status;
        c->error_code = code;
        json_decref(o);
}

unsigned call_status_of(const hxs_error *err)
{
        switch (err->kind) {
        case HXS_ERR_INVALID: return 400;
        case HXS_ERR_NOT_FOUND: return 422;
        case HXS_ERR_NONE:
        case HXS_ERR_UNSUPPORTED:
        case HXS_ERR_SETUP:
        case HXS_ERR_INTERNAL:
        case HXS_ERR_KIND_MAX:
        default:
                return 500;
        }
}

const char *call_error_code_of(const hxs_error *err)
{
        switch (call_status_of(err)) {
        case 400: return "invalid_request";
        case 422: return "not_found";
        default: break;
        }
        /* sandbox_setup_failed, unsupported or internal; an unset kind is internal */
        return err->kind == HXS_ERR_NONE ? "internal" : hxs_error_kind_name(err->kind);
}

void call_set_engine_error(call *c, const hxs_error *err, const char *fallback)
{
        if (c->mcp) {
                free(c->reply);
                c->reply_len = 0;
                c->reply = mcp_run_failed(c->mcp, err, &c->reply_len);
                c->status = 200;
                c->error_code = call_error_code_of(err);
                return;
        }
        call_set_error(c, call_status_of(err), call_error_code_of(err),
                       err->message[0] ? err->message : fallback);
}

void call_set_result(call *c, const hxs_result *res)
{
        free(c->reply);
        c->reply_len = 0;
        c->reply = c->mcp ? mcp_run_result(c->mcp, res, &c->reply_len) :
                            hxs_result_to_text(res, c->id, &c->reply_len);
        c->status = 200;
}

void call_suspend(call *c, watch_ready_fn hangup)
{
        server *srv = c->srv;
        const union MHD_ConnectionInfo *ci;
        int r = -EBADF;

        MHD_suspend_connection(c->conn);
        c->suspended = true;
        if (!c->held) {
                c->held = true;
                srv->n_held++;
        }
        /* MHD stops watching a suspended connection: we notice a hang-up instead.
         * EPOLLRDHUP only, so bytes of a pipelined next request do not wake us. */
        ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
                r = loop_add(srv->loop, &c->client_watch, ci->connect_fd, EPOLLRDHUP, hangup);
        if (r < 0)
                log_line("warning", "request %s: cannot watch the client socket: %s", c->id,
                         strerror(-r));
}

void call_resume(call *c)
{
        server *srv = c->srv;

        loop_del(srv->loop, &c->client_watch);
        if (c->suspended) {
                c->suspended = false;
                MHD_resume_connection(c->conn);
        }
}

void call_reply_ready(call *c)
{
        c->state = CALL_REPLY;
        call_resume(c);
}
