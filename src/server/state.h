/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The state the service's modules share: its settings, the engine, the loop, the
 * identities, admission's queues, the drain, the counters, and a pointer to the state
 * each module keeps to itself (callers.c, records.c, conn.c, tls.c). Each module
 * declares its own functions in its own header:
 *
 *   serve.c     the server's public face (serve.h): new, run, free
 *   listen.c    LISTEN_ADDRESS to a listening socket (TCP or unix)
 *   loop.c      the one epoll loop: fds, one timer, callbacks; nothing of the service
 *   call.c      one request's life: its error reply, its resume, engine errors as HTTP
 *   http.c      MHD access handler, routing, bodies, responses
 *   admission.c slots, the FIFO queue, executions and their end (result, kill, drain)
 *   metrics.c   counters and the Prometheus text
 *   log.c       one JSON line per execution
 *   tls.c       TLS/mTLS credentials, trust bundles per trust domain, their reload, a
 *               client certificate's SPIFFE ID (its own or one a proxy forwarded)
 *   identity.c  SPIFFE ID syntax, X-Forwarded-Client-Cert, AUTH_ALLOW, TRUSTED_PROXIES,
 *               SPIFFE_TRUST_BUNDLES, which trust domain a CA belongs to
 *   conn.c      connections: per-address limit, deadlines, slots kept for connections
 *               that got as far as a request, lingering close
 *   auth.c      who is calling (mTLS or a trusted proxy's header) and may they
 *   callers.c   per-caller state: quotas, fair queue, metrics labels
 *   records.c   the recent executions behind GET /api/v1/executions/{id}
 *   runtimes.c  GET /api/v1/runtimes: languages, versions, packages
 *   stream.c    Server-Sent Events of an execution: output, files, result, heartbeats
 *   sessions.c  the live sessions: owners, memory held, quotas, counters, the drain
 *   session-call.c the /api/v1/sessions routes over them
 *   mcp-route.c POST /mcp: the MCP server over Streamable HTTP (protocol: src/mcp)
 *
 * Threads: none. Everything runs on the loop; MHD is driven by it (MHD_USE_EPOLL without
 * an internal thread) and calls back into http.c from MHD_run only.
 */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "hexr-sandbox/sandbox.h"
#include "server/admission.h"
#include "server/auth.h"
#include "server/call.h"
#include "server/callers.h"
#include "server/conn.h"
#include "server/identity.h"
#include "server/listen.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/records.h"
#include "server/stream.h"
#include "server/tls.h"

typedef struct server {
        hxs_config cfg;
        hxs_engine *engine;
        struct MHD_Daemon *mhd;

        loop *loop;
        int sigfd;
        watch sig_watch, mhd_watch;
        loop_hook mhd_hook;
        loop_hook background_hook;      /* the engine's background work, after MHD (serve.c) */
        uint64_t background_ms;         /* its next round when nothing else comes first */
        loop_hook pool_hook;            /* logs the microVM pool's failed boots (serve.c) */
        uint64_t pool_check_ms;         /* when next; UINT64_MAX: no pool to watch */
        unsigned long pool_failures_logged;

        listener listen;                /* the socket MHD accepts on */

        tls_state *tls;                 /* NULL: plain HTTP */
        auth_state auth;                /* who may call */

        callers *callers;               /* quotas, fair turns, metrics labels */
        records *records;               /* recent executions */

        /* open connections: limits, deadlines, lingering closes (conn.c) */
        conn_state *conns;

        stream_state *streams;          /* event streams, their heartbeats */

        admission *adm;                 /* slots, the queue, the drain */
        struct sessions *sessions;      /* live sessions (sessions.c) */
        struct call_list mcp_calls;     /* POST /mcp tool calls in flight (mcp-route.c) */
        uint32_t n_held;                /* requests suspended or resumed, not yet completed */
        uint64_t upload_staged;         /* bytes of uploads staged under STATE_DIR (upload.c) */
        uint64_t last_request_ms;       /* the last request but /health and /metrics: a
                                         * drain ends DRAIN_QUIET after it */

        bool closing_on_purpose;        /* the handler returned MHD_NO to close: MHD's
                                         * "internal error" log line is expected */

        /* /health caches the engine check for a second */
        uint64_t health_checked_ms;
        int health_r;
        char health_message[400];

        metrics m;
} server;
