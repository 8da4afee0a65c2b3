/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's one event loop. Everything that can happen is an fd in one epoll set:
 * MHD's own epoll fd (connections, the listening socket, its resume pipe), a signalfd,
 * a timerfd carrying both MHD's timeout and our deadlines, each running execution's fd,
 * and the socket of each suspended connection (MHD does not watch those, so we do, to
 * notice a client that went away).
 *
 * Calls are freed only by MHD's completion callback, which runs inside MHD_run. MHD_run
 * is called once per round, after every event of the round was handled, so an event
 * never points at freed memory.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/macro.h"
#include "server/admission.h"
#include "server/conn.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/state.h"
#include "server/tls.h"

uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int loop_add(hxs_server *srv, watch *w, int fd, uint32_t events)
{
        struct epoll_event ev = { .events = events, .data.ptr = w };
        if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
                return negative_errno();
        w->fd = fd;
        return 0;
}

void loop_del(hxs_server *srv, watch *w)
{
        if (w->fd < 0)
                return;
        /* The fd may already be gone (closed by its owner); epoll then forgot it too. */
        (void)epoll_ctl(srv->epfd, EPOLL_CTL_DEL, w->fd, NULL);
        w->fd = -1;
}

/* One relative timer for the nearest of MHD's timeout and our own deadlines. */
static void arm_timer(hxs_server *srv)
{
        uint64_t now = now_ms(), deadline = admission_next_deadline(srv);
        uint64_t reads = conn_next_deadline(srv);
        if (reads < deadline)
                deadline = reads;
        MHD_UNSIGNED_LONG_LONG mhd_ms;

        if (MHD_get_timeout(srv->mhd, &mhd_ms) == MHD_YES && now + mhd_ms < deadline)
                deadline = now + mhd_ms;

        struct itimerspec its = { 0 };
        if (deadline != UINT64_MAX) {
                uint64_t rel = deadline > now ? deadline - now : 0;
                its.it_value.tv_sec = (time_t)(rel / 1000);
                its.it_value.tv_nsec = (long)(rel % 1000) * 1000000;
                if (rel == 0)
                        its.it_value.tv_nsec = 1; /* 0 would disarm: fire now instead */
        }
        (void)timerfd_settime(srv->timerfd, 0, &its, NULL);
}

static void on_signals(hxs_server *srv)
{
        struct signalfd_siginfo si;

        while (read(srv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGTERM:
                case SIGINT:
                        if (!srv->draining) {
                                log_line("drain", "%s: finishing %u running executions (at most %us), refusing new ones",
                                         strsignal((int)si.ssi_signo), srv->n_running,
                                         srv->cfg.drain_timeout_s);
                                admission_drain(srv);
                        } else if (srv->drain_deadline_ms > now_ms()) {
                                /* Asked twice: stop waiting for running executions. */
                                log_line("drain", "%s again: killing running executions now",
                                         strsignal((int)si.ssi_signo));
                                srv->drain_deadline_ms = now_ms();
                        }
                        break;
                case SIGHUP: {
                        /* Certificates rotate (short-lived SVIDs); other settings are
                         * read once, at start. A bad new file keeps the old ones. */
                        char msg[512];
                        if (tls_reload(srv, msg, sizeof(msg)) < 0)
                                log_line("reload", "SIGHUP: keeping the current certificates: %s", msg);
                        else
                                log_line("reload", "SIGHUP: %s; other settings are read once, at start", msg);
                        break;
                }
                default:
                        break;
                }
        }
}

static unsigned mhd_connections(hxs_server *srv)
{
        const union MHD_DaemonInfo *di =
                MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        return di ? di->num_connections : 0;
}

/* At MAX_CONNECTIONS, MHD takes its listening socket out of its epoll set and puts it
 * back at the start of a later MHD_run, once connections were cleaned up at the end of
 * an earlier one. Nothing would wake us for that later run (the socket is not in the
 * set), so when connections went away, run again right now. */
static void run_mhd(hxs_server *srv)
{
        unsigned before = mhd_connections(srv);
        MHD_run(srv->mhd);
        if (mhd_connections(srv) < before)
                MHD_run(srv->mhd);
}

int loop_run(hxs_server *srv)
{
        struct epoll_event events[64];

        while (!srv->stop) {
                arm_timer(srv);
                int n = epoll_wait(srv->epfd, events, (int)ARRAY_SIZE(events), -1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = negative_errno();
                        log_line("fatal", "epoll_wait: %s", strerror(-r));
                        return r;
                }
                for (int i = 0; i < n; i++) {
                        watch *w = events[i].data.ptr;
                        uint64_t expirations;
                        switch (w->kind) {
                        case WATCH_MHD:
                                break; /* MHD_run below, every round */
                        case WATCH_TIMER:
                                if (read(srv->timerfd, &expirations, sizeof(expirations)) < 0)
                                        break; /* EAGAIN: nothing to clear */
                                break;
                        case WATCH_SIGNAL:
                                on_signals(srv);
                                break;
                        case WATCH_EXEC:
                                admission_exec_event(w->ptr);
                                break;
                        case WATCH_CLIENT:
                                admission_client_event(w->ptr);
                                break;
                        case WATCH_LINGER:
                                conn_linger_event(srv, w->ptr);
                                break;
                        case WATCH_KIND_MAX:
                        default:
                                break;
                        }
                }
                admission_tick(srv, now_ms());
                conn_reap_slow(srv, now_ms());
                run_mhd(srv);

                if (srv->draining) {
                        if (admission_drained(srv))
                                srv->stop = true;
                        else if (now_ms() >= srv->exit_deadline_ms) {
                                log_line("drain", "giving up on %u executions and %u replies still in flight",
                                         srv->n_running, srv->n_held);
                                srv->stop = true;
                        }
                }
        }
        return 0;
}
