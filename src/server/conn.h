/* SPDX-License-Identifier: Apache-2.0 */
/* Connections (conn.c): per-address limit, deadlines, slots kept for connections that
 * got as far as a request, lingering close. */
#pragma once

#include <microhttpd.h>
#include <stdint.h>
#include <sys/socket.h>

struct server;
typedef struct conn_state conn_state;

/* A connection must deliver each request whole within this. */
#define REQUEST_READ_TIMEOUT_S 30u

/* Its state, and its deadlines registered with the loop. */
int conn_setup(struct server *srv);
void conn_cleanup(struct server *srv);
/* MHD's accept policy (MHD_start_daemon's apc), connection notifications and URI
 * log callback (which marks the request line as received). */
enum MHD_Result conn_accept(void *cls, const struct sockaddr *sa, socklen_t len);
void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                 enum MHD_ConnectionNotificationCode toe);
void *conn_request_line(void *cls, const char *uri, struct MHD_Connection *conn);
void conn_request_read(struct MHD_Connection *conn);    /* read whole: no deadline */
void conn_request_done(struct MHD_Connection *conn);    /* answered: the next one's clock starts */
void conn_linger(struct MHD_Connection *conn);          /* unread bytes: close lingering */
void conn_stats(const struct server *srv, uint32_t *ret_fresh, uint32_t *ret_established,
                uint32_t *ret_lingering);
