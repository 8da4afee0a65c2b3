/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A deadline for reading each request. MHD's connection timeout only counts
 * inactivity, so a client that sends one byte of its headers (or body) every few
 * seconds would hold a connection forever, and MAX_CONNECTIONS such clients would lock
 * everyone else out. Every connection is tracked from MHD's connection notifications;
 * while it is reading a request (from its start, or from the end of the previous
 * one on a kept-alive connection) it has REQUEST_READ_TIMEOUT_S to deliver the whole
 * request. Past that its socket is shut down, and MHD closes the connection. A
 * request that was read whole (queued, running, or being answered) has no deadline.
 */
#include <stdlib.h>
#include <sys/socket.h>

#include "server/server.h"

struct conn_watch {
        struct conn_watch *prev, *next;
        int fd;
        uint64_t reading_since;         /* ms; 0: not reading a request */
};

static conn_watch *watch_of(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                 enum MHD_ConnectionNotificationCode toe)
{
        hxs_server *srv = cls;
        conn_watch *w = *socket_context;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *ci =
                        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                w = calloc(1, sizeof(*w));
                if (!w || !ci)
                        return free(w); /* untracked: MHD's own timeout still applies */
                w->fd = ci->connect_fd;
                w->reading_since = now_ms();
                w->next = srv->conns;
                if (srv->conns)
                        srv->conns->prev = w;
                srv->conns = w;
                *socket_context = w;
                return;
        }
        if (!w)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                srv->conns = w->next;
        if (w->next)
                w->next->prev = w->prev;
        free(w);
        *socket_context = NULL;
}

void conn_request_read(struct MHD_Connection *conn)
{
        conn_watch *w = watch_of(conn);
        if (w)
                w->reading_since = 0;
}

void conn_request_done(struct MHD_Connection *conn)
{
        conn_watch *w = watch_of(conn);
        if (w)
                w->reading_since = now_ms();
}

uint64_t conn_next_deadline(const hxs_server *srv)
{
        uint64_t next = UINT64_MAX;
        for (const conn_watch *w = srv->conns; w; w = w->next)
                if (w->reading_since && w->reading_since + REQUEST_READ_TIMEOUT_S * 1000 < next)
                        next = w->reading_since + REQUEST_READ_TIMEOUT_S * 1000;
        return next;
}

void conn_reap_slow(hxs_server *srv, uint64_t now)
{
        unsigned cut = 0;
        for (conn_watch *w = srv->conns; w; w = w->next) {
                if (!w->reading_since || now < w->reading_since + REQUEST_READ_TIMEOUT_S * 1000)
                        continue;
                /* MHD sees the end of the stream on its next run and closes it */
                (void)shutdown(w->fd, SHUT_RDWR);
                w->reading_since = 0;
                cut++;
        }
        if (cut)
                log_line("http", "closed %u connection%s that did not send a whole request within %us",
                         cut, cut == 1 ? "" : "s", REQUEST_READ_TIMEOUT_S);
}
