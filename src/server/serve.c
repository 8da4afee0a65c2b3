/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service as a whole (serve.h): opens the engine and the listening socket, sets up
 * TLS and identities, starts MHD in external-epoll mode, runs the loop until a drain
 * completes, and takes everything down again. The `serve` verb (src/cli/cli-serve.c)
 * reads the settings and turns what happened into an exit status.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/error.h"
#include "server/admission.h"
#include "server/auth.h"
#include "server/budget.h"
#include "server/callers.h"
#include "server/conn.h"
#include "server/http.h"
#include "server/listen.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/records.h"
#include "server/serve.h"
#include "server/sessions.h"
#include "server/state.h"
#include "server/tls.h"

/* Idle and slow clients (slow-loris): a connection that moves no bytes for this long
 * is closed. A suspended connection (its sandbox runs) is not idle. */
#define CONNECTION_TIMEOUT_S 30u
/* Per-connection memory for MHD's buffers: headers must fit. */
#define CONNECTION_MEMORY_BYTES ((size_t)64 * 1024)

__attribute__((format(printf, 2, 0)))
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        server *srv = cls;
        char msg[512];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        size_t n = strlen(msg);
        while (n && msg[n - 1] == '\n')
                msg[--n] = '\0';
        if (srv->closing_on_purpose && strstr(msg, "Application reported internal error")) {
                srv->closing_on_purpose = false;
                return; /* we closed a connection whose client left: not news */
        }
        log_line("http", "%s", msg);
}

static void on_signals(watch *w, uint32_t events)
{
        server *srv = loop_owner(w, server, sig_watch);
        struct signalfd_siginfo si;

        while (read(srv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGTERM:
                case SIGINT:
                        admission_drain(srv, (int)si.ssi_signo);
                        sessions_drain(srv); /* they do not survive the service */
                        break;
                case SIGHUP:
                        /* Certificates rotate (short-lived SVIDs); other settings are
                         * read once, at start. */
                        tls_reload(srv);
                        break;
                default:
                        break;
                }
        }
}

static int setup_fds(server *srv)
{
        sigset_t mask;

        /* SIGPIPE: a client that left must not kill the service; writes get EPIPE. */
        signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return negative_errno();
        srv->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (srv->sigfd < 0)
                return negative_errno();
        int r = loop_new(&srv->loop);
        if (r == 0)
                r = loop_add(srv->loop, &srv->sig_watch, srv->sigfd, EPOLLIN, on_signals);
        return r;
}

static unsigned mhd_connections(server *srv)
{
        const union MHD_DaemonInfo *di =
                MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        return di ? di->num_connections : 0;
}

static uint64_t mhd_deadline(void *data)
{
        server *srv = data;
        MHD_UNSIGNED_LONG_LONG mhd_ms;

        if (MHD_get_timeout(srv->mhd, &mhd_ms) != MHD_YES)
                return UINT64_MAX;
        return now_ms() + mhd_ms;
}

/* Every round, after its events and the other hooks (so no event of the round points
 * at a request MHD frees in here): MHD's own work, then is the drain over?
 *
 * At MAX_CONNECTIONS, MHD takes its listening socket out of its epoll set and puts it
 * back at the start of a later MHD_run, once connections were cleaned up at the end of
 * an earlier one. Nothing would wake us for that later run (the socket is not in the
 * set), so when connections went away, run again right now. */
static void mhd_tick(void *data, uint64_t now)
{
        server *srv = data;
        unsigned before = mhd_connections(srv);

        MHD_run(srv->mhd);
        if (mhd_connections(srv) < before)
                MHD_run(srv->mhd);
        if (admission_done(srv) && sessions_done(srv))
                loop_stop(srv->loop);
}

/* MHD's epoll fd only wakes the loop: MHD_run happens in mhd_tick, every round. */
static void mhd_ready(watch *w, uint32_t events)
{
}

/* The microVM pool boots on its own thread and the library does not print: a failed
 * boot shows in /health and /metrics, and here as one log line each time the count has
 * risen since the last look, with the last reason. Looked at every POOL_CHECK_MS, and
 * never again once the first look finds no pool (the namespace backend has none). */
#define POOL_CHECK_MS 1000

static uint64_t pool_deadline(void *data)
{
        server *srv = data;
        return srv->pool_check_ms;
}

static void pool_tick(void *data, uint64_t now)
{
        server *srv = data;
        hxs_engine_stats st;

        if (now < srv->pool_check_ms)
                return;
        hxs_engine_stats_get(srv->engine, &st);
        if (st.vm_boot_failures > srv->pool_failures_logged) {
                log_line("vm_pool", "booting a microVM failed (%lu failed boots so far): %s",
                         st.vm_boot_failures, st.vm_last_boot_error);
                srv->pool_failures_logged = st.vm_boot_failures;
        }
        srv->pool_check_ms = st.vm_pool_target || st.vm_boot_failures ? now + POOL_CHECK_MS : UINT64_MAX;
}

/* The engine's background work (hxs_engine_background: refilling the pre-started
 * sandboxes) in the last hook of every round, after MHD's: replies first. And once a
 * second when nothing else wakes the loop, for a refill that failed and is due again. */
#define BACKGROUND_MS 1000
#define BACKGROUND_SOON_MS 1    /* when it said it has more to do */

static uint64_t background_deadline(void *data)
{
        server *srv = data;
        return srv->background_ms;
}

static void background_tick(void *data, uint64_t now)
{
        server *srv = data;
        if (admission_draining(srv)) { /* none would be used */
                srv->background_ms = UINT64_MAX;
                return;
        }
        srv->background_ms = now + (hxs_engine_background(srv->engine) ? BACKGROUND_SOON_MS : BACKGROUND_MS);
}

static void pool_watch(server *srv)
{
        srv->pool_check_ms = 0;
        srv->pool_hook = (loop_hook){ .next_deadline = pool_deadline, .tick = pool_tick, .data = srv };
        loop_hook_add(srv->loop, &srv->pool_hook);
}

/* TLS 1.2 and 1.3 only. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

static int start_mhd(server *srv)
{
        unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
        struct MHD_OptionItem tls_opts[4] = { { MHD_OPTION_END, 0, NULL } };
        size_t n = 0;

        if (tls_enabled(srv)) {
                flags |= MHD_USE_TLS;
                tls_opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_CERT_CALLBACK2, 0,
                                                          tls_cert_callback() };
                tls_opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0,
                                                          (void *)TLS_PRIORITIES };
                /* With a trust bundle MHD asks clients for a certificate (it verifies
                 * nothing: tls.c does, on every request). */
                if (tls_mhd_trust(srv))
                        tls_opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0,
                                                                  (void *)tls_mhd_trust(srv) };
                tls_opts[n] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
        }

        srv->mhd = MHD_start_daemon(
                flags, 0, conn_accept, srv, http_handler, srv,
                MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
                MHD_OPTION_ARRAY, tls_opts,
                MHD_OPTION_LISTEN_SOCKET, srv->listen.fd,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg.max_connections,
                MHD_OPTION_CONNECTION_TIMEOUT, CONNECTION_TIMEOUT_S,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONNECTION_MEMORY_BYTES,
                MHD_OPTION_NOTIFY_COMPLETED, http_completed, srv,
                MHD_OPTION_NOTIFY_CONNECTION, conn_notify, srv,
                MHD_OPTION_URI_LOG_CALLBACK, conn_request_line, srv,
                MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1,
                MHD_OPTION_END);
        if (!srv->mhd)
                return -EIO;
        srv->listen.fd = -1; /* MHD's now: MHD_stop_daemon closes it */

        const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        if (!di)
                return -EIO;
        int r = loop_add(srv->loop, &srv->mhd_watch, di->epoll_fd, EPOLLIN, mhd_ready);
        if (r < 0)
                return r;
        srv->mhd_hook = (loop_hook){ .next_deadline = mhd_deadline, .tick = mhd_tick, .data = srv };
        loop_hook_add(srv->loop, &srv->mhd_hook);
        return 0;
}

void server_free(server *srv)
{
        if (!srv)
                return;
        if (srv->mhd) {
                /* Anything still suspended is resumed and told, before MHD goes. */
                admission_abort_all(srv);
                MHD_run(srv->mhd);
                loop_del(srv->loop, &srv->mhd_watch);
                MHD_stop_daemon(srv->mhd);
                srv->mhd = NULL;
        }
        listen_cleanup(&srv->listen);
        close_fd(&srv->listen.fd);
        conn_cleanup(srv);
        stream_cleanup(srv);
        sessions_free(srv);             /* kills what is left, before the engine goes */
        admission_free(srv); /* after MHD: its last completions still reach admission */
        tls_close(srv);
        auth_cleanup(srv);
        callers_free(srv->callers);
        records_free(srv->records);
        if (srv->loop)
                loop_del(srv->loop, &srv->sig_watch);
        close_fd(&srv->sigfd);
        loop_free(srv->loop);
        srv->loop = NULL;
        hxs_engine_free(srv->engine);
        free(srv);
}

/* Is the listening socket reachable from loopback only? unix sockets count as local. */
static bool listen_is_local(const listener *l)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        if (l->unix_path[0])
                return true;
        if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0)
                return false;
        if (ss.ss_family == AF_INET)
                return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
        if (ss.ss_family == AF_INET6) {
                const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
                return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
        }
        return false;
}

/* The settings derived from the host (budget.h), before the engine sees them. */
static void settle(hxs_config *cfg)
{
        host_facts h;

        host_facts_read(&h);
        budget_settle(cfg, &h);
}

/* A setting the service itself checks (TLS, identities) is wrong: exit status 2. */
static int fail_setting(hxs_error *err, int r)
{
        err_wrap(err, r, "invalid setting");
        err->kind = HXS_ERR_INVALID;
        return r;
}

/* Everything the service needs, in order; err says what failed. */
static int open_all(server *srv, hxs_error *err)
{
        int r = setup_fds(srv);
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "setting up the event loop: %s", strerror(-r));
        r = hxs_engine_new(&srv->cfg, &srv->engine, err);
        if (r < 0)
                return err_wrap(err, r, "cannot start the engine");
        r = listen_open(&srv->listen, srv->cfg.listen_address, err);
        if (r < 0)
                return r;
        r = tls_open(srv, err);
        if (r == 0)
                r = auth_setup(srv, err);
        if (r < 0)
                return fail_setting(err, r);
        if (!srv->auth.identity_on && !srv->cfg.allow_non_loopback && !listen_is_local(&srv->listen))
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "LISTEN_ADDRESS",
                                      "invalid setting: LISTEN_ADDRESS %s is not loopback, and callers are not "
                                      "identified: anyone who reaches it could run code. Configure mTLS (TLS_CLIENT_CA_FILE) "
                                      "or a trusted proxy (TRUSTED_PROXIES) with AUTH_ALLOW, or set ALLOW_NON_LOOPBACK=on "
                                      "if something in front of the service authenticates callers.",
                                      srv->listen.text);
        /* One caller may not hold every slot while others wait (callers.c). */
        uint32_t share = srv->cfg.quota_running;
        if (!share && srv->auth.identity_on) {
                uint32_t max = srv->cfg.max_concurrent, keep = max / 4 ? max / 4 : 1;
                share = max > keep ? max - keep : 1;
        }
        /* Hooks tick in this order: admission (slots freed), conn (deadlines), streams,
         * the pool's log, MHD. */
        if (admission_setup(srv) < 0 || callers_new(&srv->cfg, &srv->m, share, &srv->callers) < 0 || records_new(srv->cfg.execution_records, &srv->records) < 0 ||
            conn_setup(srv) < 0 || stream_setup(srv) < 0 || sessions_setup(srv) < 0)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        if (share && share < srv->cfg.max_concurrent)
                callers_set_memory_share(srv->callers, (uint64_t)srv->cfg.memory_budget_mb * share /
                                                               srv->cfg.max_concurrent);
        pool_watch(srv);
        r = start_mhd(srv);
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "cannot start the HTTP server on %s", srv->listen.text);
        srv->background_ms = 0;
        srv->background_hook = (loop_hook){ .next_deadline = background_deadline, .tick = background_tick,
                                            .data = srv };
        loop_hook_add(srv->loop, &srv->background_hook);
        return 0;
}

int server_new(const hxs_config *cfg, server **ret, hxs_error *err)
{
        server *srv = calloc(1, sizeof(*srv));
        if (!srv)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        srv->sigfd = srv->listen.fd = -1;
        srv->sig_watch.fd = srv->mhd_watch.fd = -1;
        TAILQ_INIT(&srv->mcp_calls);
        srv->cfg = *cfg;
        settle(&srv->cfg);

        int r = open_all(srv, err);
        if (r < 0) {
                server_free(srv);
                return r;
        }
        *ret = srv;
        return 0;
}

const char *server_address(const server *srv)
{
        return srv->listen.text;
}

int server_run(server *srv)
{
        char running[64] = "";
        uint32_t share = callers_share(srv->callers);

        if (share && share < srv->cfg.max_concurrent)
                snprintf(running, sizeof(running), " (%u per caller)", share);
        log_line("start", "backend %s, max_concurrent %u%s, memory budget %u MB, max_queue %u, %s, callers %s, version %s",
                 hxs_engine_backend_name(srv->engine), srv->cfg.max_concurrent, running,
                 srv->cfg.memory_budget_mb, srv->cfg.max_queue,
                 tls_mutual(srv) ? "mTLS" : tls_enabled(srv) ? "TLS" : "plain HTTP",
                 srv->auth.identity_on ? "identified (AUTH_ALLOW)" : "anonymous", hxs_version());

        int r = loop_run(srv->loop);
        if (r < 0)
                log_line("fatal", "epoll_wait: %s", strerror(-r));
        log_line("stop", "stopped%s", r < 0 ? " after an error" : "");
        return r;
}
