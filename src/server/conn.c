/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connections, before and after MHD handles them: who may hold the MAX_CONNECTIONS
 * slots, how long each may take, and how they end.
 *
 * Identity is only known once a request's headers are in, so slots must not go to
 * whoever opens connections fastest:
 *
 *   - one IP address holds at most MAX_CONNECTIONS_PER_ADDRESS connections (the
 *     addresses TRUSTED_PROXIES lists are not limited: behind a proxy, connection
 *     admission is the proxy's job; unix socket peers are not limited either);
 *   - a new connection must finish its TLS handshake and send its request line within
 *     HANDSHAKE_TIMEOUT ("fresh" until then);
 *   - fresh connections may hold at most MAX_CONNECTIONS less a quarter (at least one
 *     slot is kept for connections that got as far as a request). When they hold
 *     that many, a new connection replaces the oldest fresh one, and when an address
 *     is at its limit, its own oldest fresh connection; an address whose connections
 *     have all sent a request is refused.
 *
 * Then, while a connection is reading a request (from its start, or from the end of
 * the previous one on a kept-alive connection) it has REQUEST_READ_TIMEOUT_S to
 * deliver the whole request: MHD's connection timeout only counts inactivity, so a
 * client that sends one byte every few seconds would hold a connection forever. A
 * request that was read whole (queued, running, or being answered) has no deadline.
 * A connection cut for any of these reasons has its socket shut down; MHD then closes
 * it.
 *
 * Lingering close: when MHD closes a connection whose client is still sending (a
 * reply queued before the body was read, a body refused half-way, anything left
 * unread in the socket), closing at once would make the kernel answer the client's
 * next bytes with a reset, and a client that writes its whole body before reading
 * (urllib, requests) would never see the reply. So at MHD's close notification the
 * socket is duplicated, its write side shut down, and the rest read and dropped until
 * the client closes, LINGER_IDLE_MS pass without data, or LINGER_MAX_MS in all.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/auth.h"
#include "server/conn.h"
#include "server/identity.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/state.h"

#define ADDR_BUCKETS 1024u
#define LINGER_IDLE_MS 5000u
#define LINGER_MAX_MS 30000u
/* Reads per lingering socket per loop turn, and their size. */
#define LINGER_READS 16
#define LINGER_CHUNK 65536

typedef struct addr_node addr_node;
typedef struct conn_watch conn_watch;

struct conn_watch {
        struct conn_watch *prev, *next; /* every tracked connection */
        int fd;
        uint64_t started;               /* ms: accepted */
        uint64_t reading_since;         /* ms; 0: not reading a request */
        bool request_line;              /* it sent its first request line */
        bool cut;                       /* shut down by us: counts for nothing any more */
        bool linger;                    /* close lingering (see above) */
        addr_node *addr;                /* its address's count; NULL: not limited */
        TAILQ_ENTRY(conn_watch) fresh;  /* fresh connections, oldest first */
        TAILQ_ENTRY(conn_watch) addr_fresh; /* the same, of its address */
};
TAILQ_HEAD(watch_list, conn_watch);

struct addr_node {
        addr_node *next;
        int family;
        uint8_t addr[16];
        uint32_t count;                 /* its connections that are not cut */
        struct watch_list fresh;
};

typedef struct lingerer {
        struct lingerer *prev, *next;
        server *srv;
        watch w;
        uint64_t until, idle_until;
} lingerer;

struct conn_state {
        loop_hook hook;                 /* deadlines: reading, handshakes, lingering, logging */
        conn_watch *all;
        uint32_t n_all;                 /* not cut */
        struct watch_list fresh;
        uint32_t n_fresh;
        addr_node *buckets[ADDR_BUCKETS];
        lingerer *lingering;
        uint32_t n_lingering;
        uint64_t logged_ms;             /* the cut/refused counts below were last logged */
        uint64_t unlogged[CONN_CUT_MAX];
};

static uint64_t next_deadline(void *data);
static void reap_slow(void *data, uint64_t now);

int conn_setup(server *srv)
{
        srv->conns = calloc(1, sizeof(*srv->conns));
        if (!srv->conns)
                return -ENOMEM;
        TAILQ_INIT(&srv->conns->fresh);
        srv->conns->hook = (loop_hook){ .next_deadline = next_deadline, .tick = reap_slow, .data = srv };
        loop_hook_add(srv->loop, &srv->conns->hook);
        return 0;
}

static void linger_end(server *srv, lingerer *l);

void conn_cleanup(server *srv)
{
        conn_state *cs = srv->conns;
        if (!cs)
                return;
        while (cs->lingering)
                linger_end(srv, cs->lingering);
        /* MHD_stop_daemon told us of every close already; what is left is memory */
        for (unsigned b = 0; b < ADDR_BUCKETS; b++)
                while (cs->buckets[b]) {
                        addr_node *n = cs->buckets[b];
                        cs->buckets[b] = n->next;
                        free(n);
                }
        free(cs);
        srv->conns = NULL;
}

/* ---- addresses -------------------------------------------------------------------- */

/* The address of sa as a key (IPv4-mapped IPv6 as IPv4); false for other families. */
static bool addr_key(const struct sockaddr *sa, int *family, uint8_t addr[16])
{
        memset(addr, 0, 16);
        if (!sa)
                return false;
        if (sa->sa_family == AF_INET) {
                *family = AF_INET;
                memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
                return true;
        }
        if (sa->sa_family == AF_INET6) {
                const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
                if (IN6_IS_ADDR_V4MAPPED(a6)) {
                        *family = AF_INET;
                        memcpy(addr, a6->s6_addr + 12, 4);
                } else {
                        *family = AF_INET6;
                        memcpy(addr, a6->s6_addr, 16);
                }
                return true;
        }
        return false;
}

static unsigned addr_hash(int family, const uint8_t addr[16])
{
        uint32_t h = 2166136261u ^ (uint32_t)family;
        for (int i = 0; i < 16; i++)
                h = (h ^ addr[i]) * 16777619u;
        return h & (ADDR_BUCKETS - 1);
}

/* The node of sa when connections from it are limited (not a trusted proxy), created
 * when create; NULL otherwise. */
static addr_node *addr_node_of(server *srv, const struct sockaddr *sa, bool create)
{
        conn_state *cs = srv->conns;
        int family = 0;
        uint8_t addr[16];

        if (!addr_key(sa, &family, addr) || proxies_match(&srv->auth.proxies, sa))
                return NULL;
        unsigned b = addr_hash(family, addr);
        for (addr_node *n = cs->buckets[b]; n; n = n->next)
                if (n->family == family && memcmp(n->addr, addr, 16) == 0)
                        return n;
        if (!create)
                return NULL;
        addr_node *n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        n->family = family;
        memcpy(n->addr, addr, 16);
        TAILQ_INIT(&n->fresh);
        n->next = cs->buckets[b];
        cs->buckets[b] = n;
        return n;
}

static void addr_release(server *srv, addr_node *n)
{
        conn_state *cs = srv->conns;
        if (--n->count)
                return;
        unsigned b = addr_hash(n->family, n->addr);
        for (addr_node **p = &cs->buckets[b]; *p; p = &(*p)->next)
                if (*p == n) {
                        *p = n->next;
                        free(n);
                        return;
                }
}

/* ---- fresh connections and cuts ------------------------------------------------- */

static void unfresh(conn_state *cs, conn_watch *w)
{
        if (w->request_line || w->cut)
                return;
        TAILQ_REMOVE(&cs->fresh, w, fresh);
        cs->n_fresh--;
        if (w->addr)
                TAILQ_REMOVE(&w->addr->fresh, w, addr_fresh);
}

/* w counts for nothing from now on; MHD closes it once it sees the shutdown. */
static void cut(server *srv, conn_watch *w, conn_cut why)
{
        conn_state *cs = srv->conns;

        unfresh(cs, w);
        w->cut = true;
        w->reading_since = 0;
        cs->n_all--;
        if (w->addr) {
                addr_release(srv, w->addr);
                w->addr = NULL;
        }
        (void)shutdown(w->fd, SHUT_RDWR);
        metrics_connection_cut(&srv->m, why);
        cs->unlogged[why]++;
}

/* Slots connections without a request line may hold. */
static uint32_t fresh_max(const server *srv)
{
        uint32_t max = srv->cfg.max_connections, keep = max / 4 ? max / 4 : 1;
        return max > keep ? max - keep : 1;
}

enum MHD_Result conn_accept(void *cls, const struct sockaddr *sa, socklen_t len)
{
        server *srv = cls;
        conn_state *cs = srv->conns;

        if (!cs)
                return MHD_YES;
        addr_node *n = addr_node_of(srv, sa, false);
        if (n && n->count >= srv->cfg.max_connections_per_address) {
                conn_watch *oldest = TAILQ_FIRST(&n->fresh);
                if (!oldest) {
                        metrics_connection_cut(&srv->m, CONN_CUT_ADDRESS_LIMIT);
                        cs->unlogged[CONN_CUT_ADDRESS_LIMIT]++;
                        return MHD_NO;
                }
                cut(srv, oldest, CONN_CUT_REPLACED);
        }
        if (cs->n_fresh >= fresh_max(srv))
                cut(srv, TAILQ_FIRST(&cs->fresh), CONN_CUT_REPLACED);
        return MHD_YES;
}

/* ---- MHD's notifications ---------------------------------------------------------- */

static conn_watch *watch_of(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

static void linger_start(server *srv, int fd);

void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                 enum MHD_ConnectionNotificationCode toe)
{
        server *srv = cls;
        conn_state *cs = srv->conns;
        conn_watch *w = *socket_context;

        if (!cs)
                return;
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *ci =
                        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *ai =
                        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
                w = calloc(1, sizeof(*w));
                if (!w || !ci)
                        return free(w); /* untracked: MHD's own timeout still applies */
                w->fd = ci->connect_fd;
                w->started = w->reading_since = now_ms();
                w->addr = ai ? addr_node_of(srv, ai->client_addr, true) : NULL;
                if (w->addr) {
                        w->addr->count++;
                        TAILQ_INSERT_TAIL(&w->addr->fresh, w, addr_fresh);
                }
                TAILQ_INSERT_TAIL(&cs->fresh, w, fresh);
                cs->n_fresh++;
                cs->n_all++;
                w->next = cs->all;
                if (cs->all)
                        cs->all->prev = w;
                cs->all = w;
                *socket_context = w;
                return;
        }
        if (!w)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                cs->all = w->next;
        if (w->next)
                w->next->prev = w->prev;
        int unread = 0;
        bool linger = !w->cut && (w->linger || (ioctl(w->fd, FIONREAD, &unread) == 0 && unread > 0));
        if (!w->cut) {
                unfresh(cs, w);
                cs->n_all--;
                if (w->addr)
                        addr_release(srv, w->addr);
        }
        /* MHD closes its descriptor right after this notification */
        if (linger)
                linger_start(srv, w->fd);
        free(w);
        *socket_context = NULL;
}

void *conn_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
        server *srv = cls;
        conn_watch *w = watch_of(conn);

        if (w && srv->conns && !w->request_line) {
                unfresh(srv->conns, w);
                w->request_line = true;
        }
        return NULL; /* no per-request context yet: http_handler makes it */
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
        if (w && !w->cut)
                w->reading_since = now_ms();
}

void conn_linger(struct MHD_Connection *conn)
{
        conn_watch *w = watch_of(conn);
        if (w)
                w->linger = true;
}

/* ---- lingering close -------------------------------------------------------------- */

static void linger_ready(watch *w, uint32_t events);

static void linger_start(server *srv, int fd)
{
        conn_state *cs = srv->conns;
        uint64_t now = now_ms();

        if (cs->n_lingering >= srv->cfg.max_connections)
                return; /* enough: this one closes at once */
        lingerer *l = calloc(1, sizeof(*l));
        if (!l)
                return;
        int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        l->srv = srv;
        l->w.fd = -1;
        if (dup < 0 || loop_add(srv->loop, &l->w, dup, EPOLLIN | EPOLLRDHUP, linger_ready) < 0) {
                if (dup >= 0)
                        close(dup);
                free(l);
                return;
        }
        /* MHD shut the write side already (TLS: after its close_notify); make sure */
        (void)shutdown(dup, SHUT_WR);
        l->until = now + LINGER_MAX_MS;
        l->idle_until = now + LINGER_IDLE_MS;
        l->next = cs->lingering;
        if (cs->lingering)
                cs->lingering->prev = l;
        cs->lingering = l;
        cs->n_lingering++;
}

static void linger_end(server *srv, lingerer *l)
{
        conn_state *cs = srv->conns;
        int fd = l->w.fd;

        loop_del(srv->loop, &l->w);
        if (fd >= 0)
                close(fd);
        if (l->prev)
                l->prev->next = l->next;
        else
                cs->lingering = l->next;
        if (l->next)
                l->next->prev = l->prev;
        cs->n_lingering--;
        free(l);
}

/* The client sent more, or closed: drop what it sent. */
static void linger_ready(watch *w, uint32_t events)
{
        static char sink[LINGER_CHUNK];
        lingerer *l = loop_owner(w, lingerer, w);
        server *srv = l->srv;

        for (int i = 0; i < LINGER_READS; i++) {
                ssize_t n = read(l->w.fd, sink, sizeof(sink));
                if (n > 0) {
                        l->idle_until = now_ms() + LINGER_IDLE_MS;
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                linger_end(srv, l); /* the client closed, or the socket failed */
                return;
        }
}

/* ---- deadlines -------------------------------------------------------------------- */

static uint64_t next_deadline(void *data)
{
        const server *srv = data;
        const conn_state *cs = srv->conns;
        uint64_t next = UINT64_MAX;

        if (!cs)
                return next;
        for (const conn_watch *w = cs->all; w; w = w->next)
                if (w->reading_since && w->reading_since + REQUEST_READ_TIMEOUT_S * 1000 < next)
                        next = w->reading_since + REQUEST_READ_TIMEOUT_S * 1000;
        const conn_watch *oldest = TAILQ_FIRST(&cs->fresh);
        if (oldest && oldest->started + (uint64_t)srv->cfg.handshake_timeout_s * 1000 < next)
                next = oldest->started + (uint64_t)srv->cfg.handshake_timeout_s * 1000;
        for (const lingerer *l = cs->lingering; l; l = l->next) {
                uint64_t t = l->until < l->idle_until ? l->until : l->idle_until;
                if (t < next)
                        next = t;
        }
        /* counts still to be logged: at most once a second */
        for (int i = 0; i < CONN_CUT_MAX; i++)
                if (cs->unlogged[i] && cs->logged_ms + 1000 < next)
                        next = cs->logged_ms + 1000;
        return next;
}

static const char *const cut_text[CONN_CUT_MAX] = {
        [CONN_CUT_ADDRESS_LIMIT] = "refused: their address was at MAX_CONNECTIONS_PER_ADDRESS, all of them past their request line",
        [CONN_CUT_REPLACED] = "replaced by newer ones: they had sent no request line and the slots for such connections were taken",
        [CONN_CUT_HANDSHAKE] = "closed: no TLS handshake and request line within HANDSHAKE_TIMEOUT",
        [CONN_CUT_REQUEST] = "closed: no whole request within the request-read deadline",
};

static void reap_slow(void *data, uint64_t now)
{
        server *srv = data;
        conn_state *cs = srv->conns;
        conn_watch *w;

        if (!cs)
                return;
        for (w = cs->all; w; w = w->next)
                if (!w->cut && w->reading_since && now >= w->reading_since + REQUEST_READ_TIMEOUT_S * 1000)
                        cut(srv, w, CONN_CUT_REQUEST);
        while ((w = TAILQ_FIRST(&cs->fresh)) && now >= w->started + (uint64_t)srv->cfg.handshake_timeout_s * 1000)
                cut(srv, w, CONN_CUT_HANDSHAKE);
        for (lingerer *l = cs->lingering, *next; l; l = next) {
                next = l->next;
                if (now >= l->until || now >= l->idle_until)
                        linger_end(srv, l);
        }
        if (now < cs->logged_ms + 1000)
                return;
        for (int i = 0; i < CONN_CUT_MAX; i++) {
                if (!cs->unlogged[i])
                        continue;
                log_line("http", "%llu connection%s %s", (unsigned long long)cs->unlogged[i],
                         cs->unlogged[i] == 1 ? "" : "s", cut_text[i]);
                cs->unlogged[i] = 0;
                cs->logged_ms = now;
        }
}

void conn_stats(const server *srv, uint32_t *ret_fresh, uint32_t *ret_established,
                uint32_t *ret_lingering)
{
        const conn_state *cs = srv->conns;
        *ret_fresh = cs ? cs->n_fresh : 0;
        *ret_established = cs ? cs->n_all - cs->n_fresh : 0;
        *ret_lingering = cs ? cs->n_lingering : 0;
}
