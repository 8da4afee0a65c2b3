/* SPDX-License-Identifier: Apache-2.0 */
/* The service's one event loop (loop.c) and its monotonic clock. */
#pragma once

#include <stdint.h>

struct hxs_server;

/* What an epoll registration points at (epoll_event.data.ptr). */
typedef enum watch_kind {
        WATCH_MHD,      /* MHD's own epoll fd */
        WATCH_SIGNAL,   /* signalfd */
        WATCH_TIMER,    /* timerfd: MHD's timeout and our deadlines */
        WATCH_EXEC,     /* an execution's fd (hxs_exec_fd) */
        WATCH_CLIENT,   /* a suspended connection's socket: did the client go away? */
        WATCH_LINGER,   /* a closed connection's socket, drained before the close (conn.c) */
        WATCH_KIND_MAX,
} watch_kind;

typedef struct watch {
        watch_kind kind;
        void *ptr;
        int fd;         /* -1 when not registered */
} watch;

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t now_ms(void);

int loop_add(struct hxs_server *srv, watch *w, int fd, uint32_t events);
void loop_del(struct hxs_server *srv, watch *w);
int loop_run(struct hxs_server *srv);
