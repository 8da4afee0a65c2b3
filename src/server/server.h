/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's internal model, shared by its files:
 *
 *   serve.c     `hexr-sandbox serve`: options, configuration, start, stop
 *   listen.c    LISTEN_ADDRESS to a listening socket (TCP or unix)
 *   loop.c      the one epoll loop: MHD, signals, timers, executions, client sockets
 *   http.c      MHD access handler, routing, bodies, responses
 *   admission.c slots, the FIFO queue, executions and their end (result, kill, drain)
 *   metrics.c   counters and the Prometheus text
 *   log.c       one JSON line per execution
 *   json.c      request and result JSON (shared with the CLI)
 *   tls.c       TLS/mTLS credentials, their reload, the client certificate's SPIFFE ID
 *   identity.c  SPIFFE ID syntax, X-Forwarded-Client-Cert, AUTH_ALLOW, TRUSTED_PROXIES
 *   auth.c      who is calling (mTLS or a trusted proxy's header) and may they
 *   callers.c   per-caller state: quotas, fair queue, metrics labels
 *   records.c   the recent executions behind GET /api/v1/executions/{id}
 *   runtimes.c  GET /api/v1/runtimes: languages, versions, packages
 *
 * Threads: none. Everything runs on the loop; MHD is driven by it (MHD_USE_EPOLL without
 * an internal thread) and calls back into http.c from MHD_run only.
 */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hexr-sandbox/sandbox.h"
#include "server/identity.h"
#include "server/serve.h"

struct hxs_server;

/* What an epoll registration points at (epoll_event.data.ptr). */
typedef enum watch_kind {
        WATCH_MHD,      /* MHD's own epoll fd */
        WATCH_SIGNAL,   /* signalfd */
        WATCH_TIMER,    /* timerfd: MHD's timeout and our deadlines */
        WATCH_EXEC,     /* an execution's fd (hxs_exec_fd) */
        WATCH_CLIENT,   /* a suspended connection's socket: did the client go away? */
        WATCH_KIND_MAX,
} watch_kind;

typedef struct watch {
        watch_kind kind;
        void *ptr;
        int fd;         /* -1 when not registered */
} watch;

typedef enum route {
        ROUTE_EXEC,     /* POST /api/v1/exec */
        ROUTE_EXECUTE,  /* POST /execute (alias) */
        ROUTE_HEALTH,   /* GET /health */
        ROUTE_METRICS,  /* GET /metrics */
        ROUTE_EXECUTIONS, /* GET /api/v1/executions/{id} */
        ROUTE_RUNTIMES, /* GET /api/v1/runtimes */
        ROUTE_OTHER,    /* anything else: 404 */
        ROUTE_MAX,
} route;

/* Where an execution request is in its life. */
typedef enum call_state {
        CALL_READING,   /* receiving the body */
        CALL_QUEUED,    /* suspended, waiting for a slot */
        CALL_RUNNING,   /* suspended, its sandbox runs */
        CALL_REPLY,     /* resumed with a response ready to queue */
        CALL_GONE,      /* the client went away: close without a response */
        CALL_DONE,      /* response queued */
        CALL_STATE_MAX,
} call_state;

/* Execution outcomes, as counted in hexr_sandbox_executions_total. */
typedef enum outcome {
        OUTCOME_OK,            /* exit 0 */
        OUTCOME_ERROR,         /* non-zero exit status */
        OUTCOME_TIMEOUT,       /* time limit */
        OUTCOME_OOM,           /* memory limit */
        OUTCOME_KILLED,        /* ended by a signal: its own, a client gone, a drain */
        OUTCOME_SETUP_FAILED,  /* the sandbox could not be set up */
        OUTCOME_MAX,
} outcome;

/* Why a request was turned away, as counted in hexr_sandbox_rejected_requests_total. */
typedef enum reject_reason {
        REJECT_INVALID,         /* 400 */
        REJECT_TOO_LARGE,       /* 413 */
        REJECT_MEDIA_TYPE,      /* 415 */
        REJECT_NOT_FOUND,       /* 422: a package that does not exist */
        REJECT_OVERLOADED,      /* 429: no slot and the queue is full */
        REJECT_QUEUE_TIMEOUT,   /* 429: waited QUEUE_TIMEOUT for a slot */
        REJECT_DRAINING,        /* 503 */
        REJECT_FORBIDDEN,       /* 403: no identity, or one AUTH_ALLOW does not list */
        REJECT_QUOTA,           /* 429: the caller's own quota */
        REJECT_REASON_MAX,
} reject_reason;

/* One HTTP request (MHD's per-request context). Execution requests use every field;
 * the others only route and reply. */
typedef struct call {
        struct hxs_server *srv;
        struct MHD_Connection *conn;
        route route;
        call_state state;
        bool is_exec;           /* POST to an exec route: body, queue, sandbox */
        bool suspended;
        bool held;              /* counted in srv->n_held until MHD completes it */
        char id[33];            /* request id: 128 random bits in hex */
        char caller[SPIFFE_ID_MAX + 1]; /* verified SPIFFE ID; "" when none (anonymous) */
        struct caller_state *cs; /* while queued or running: its caller's counters */
        int label;              /* its metrics label (callers.c) */

        /* body, capped at MAX_BODY_BYTES */
        char *body;
        size_t body_len, body_cap;
        uint64_t body_seen;     /* bytes received, kept counting past the cap */
        bool body_too_large;

        /* execution */
        bool parsed;            /* the body was a valid request: the fields below are set */
        hxs_request *req;
        hxs_exec *exec;
        hxs_language language;
        uint32_t timeout_s, memory_mb;
        size_t code_bytes;
        uint64_t received_ms;   /* monotonic: body complete */
        uint64_t started_ms;    /* monotonic: sandbox started */
        watch exec_watch;
        watch client_watch;
        TAILQ_ENTRY(call) link; /* in srv->queue or srv->running */
        TAILQ_ENTRY(call) clink; /* in its caller's queue while queued */

        /* the reply, prepared before the connection is resumed */
        unsigned status;
        const char *error_code; /* static string, for the log; NULL on success */
        char *reply;            /* malloc'ed body (JSON) */
        size_t reply_len;
        unsigned retry_after_s; /* 0: no Retry-After */
        const char *allow;      /* Allow header for 405, else NULL */
        bool logged;
} call;

TAILQ_HEAD(call_list, call);

/* Per-caller counters and sub-queue (callers.c). */
typedef struct caller_state {
        char *id;                       /* SPIFFE ID, "" for anonymous */
        uint32_t running, queued;
        uint64_t tokens_milli;          /* QUOTA_PER_MINUTE bucket, thousandths */
        uint64_t refilled_ms;
        int label;                      /* metrics label index; the "other" index if none */
        struct call_list queue;         /* its waiting calls, oldest first */
        bool in_rr;
        TAILQ_ENTRY(caller_state) link;         /* srv->callers */
        TAILQ_ENTRY(caller_state) rr_link;      /* srv->rr: callers with waiting calls */
} caller_state;
TAILQ_HEAD(caller_list, caller_state);

/* Callers tracked at once; idle ones are forgotten to make room. */
#define CALLERS_MAX 4096u

/* One recent execution (records.c). */
typedef struct exec_record {
        char id[33];                    /* "" = free slot */
        char *caller;
        hxs_language language;
        const char *outcome;            /* static */
        const char *error_code;         /* static or NULL */
        bool ran;                       /* the fields below are set */
        int exit_code, signal;
        bool timed_out, oom_killed, stdout_truncated, stderr_truncated;
        uint64_t execution_time_ms, memory_used_mb, stdout_bytes, stderr_bytes, queue_ms;
        int64_t finished_unix_ms;
} exec_record;

typedef struct metrics {
        uint64_t executions[HXS_LANG_MAX][OUTCOME_MAX];
        uint64_t rejected[REJECT_REASON_MAX];
        uint64_t duration_buckets[16];  /* cumulative counts per le bound */
        uint64_t duration_count;
        double duration_sum_s;
        uint64_t http[ROUTE_MAX][600];  /* by status code */
        /* per caller label: [METRICS_CALLERS + 1], the last is "other" */
        char **caller_labels;
        uint32_t n_caller_labels;
        uint32_t caller_other;          /* index of "other": METRICS_CALLERS */
        uint64_t (*caller_executions)[OUTCOME_MAX];
        uint64_t *caller_rejected;      /* quota */
        uint64_t packages[HXS_PACKAGES_SOURCE_MAX]; /* executions with packages=, by where they came from */
        /* time from the whole request to its sandbox starting (autoscaling) */
        uint64_t queue_wait_buckets[16];
        uint64_t queue_wait_count;
        double queue_wait_sum_s;
} metrics;

/* A connection must deliver each request whole within this (conn.c). */
#define REQUEST_READ_TIMEOUT_S 30u

typedef struct conn_watch conn_watch;
typedef struct tls_state tls_state;

typedef struct hxs_server {
        hxs_config cfg;
        hxs_engine *engine;
        struct MHD_Daemon *mhd;

        int epfd;
        int sigfd;
        int timerfd;
        watch mhd_watch, sig_watch, timer_watch;

        /* listening */
        int listen_fd;                  /* handed to MHD, which closes it */
        char unix_path[108];            /* socket file to remove on exit, "" if TCP */
        char listen_text[300];          /* what we print: 127.0.0.1:8080, unix:/x */

        /* identity */
        tls_state *tls;                 /* NULL: plain HTTP */
        bool identity_on;               /* mTLS or trusted proxies: callers have IDs */
        allowlist allow;
        proxy_list proxies;

        /* callers (callers.c) and recent executions (records.c) */
        struct caller_list callers;
        struct caller_list rr;
        uint32_t n_callers;
        exec_record *records;
        uint32_t n_records, next_record;

        /* open connections, for the request-read deadline (conn.c) */
        conn_watch *conns;

        /* admission */
        struct call_list queue;         /* CALL_QUEUED in arrival order (timeouts);
                                         * served round-robin by caller (callers.c) */
        struct call_list running;       /* CALL_RUNNING */
        uint32_t n_queued, n_running;
        uint32_t n_held;                /* suspended or resumed, not yet completed */

        /* stopping */
        bool draining;
        bool killed_on_drain;
        uint64_t drain_deadline_ms;     /* then running executions are killed */
        uint64_t exit_deadline_ms;      /* then we stop whatever is left */
        bool stop;
        bool closing_on_purpose;        /* the handler returned MHD_NO to close: MHD's
                                         * "internal error" log line is expected */

        /* /health caches the engine check for a second */
        uint64_t health_checked_ms;
        int health_r;
        char health_message[400];

        metrics m;
} hxs_server;

/* loop.c */
uint64_t now_ms(void);
int loop_add(hxs_server *srv, watch *w, int fd, uint32_t events);
void loop_del(hxs_server *srv, watch *w);
int loop_run(hxs_server *srv);

/* listen.c: a listening socket for LISTEN_ADDRESS; err says why not. */
int listen_open(hxs_server *srv, const char *address, hxs_error *err);
void listen_cleanup(hxs_server *srv);

/* conn.c */
void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                 enum MHD_ConnectionNotificationCode toe);
void conn_request_read(struct MHD_Connection *conn);    /* read whole: no deadline */
void conn_request_done(struct MHD_Connection *conn);    /* answered: the next one's clock starts */
uint64_t conn_next_deadline(const hxs_server *srv);
void conn_reap_slow(hxs_server *srv, uint64_t now);

/* http.c */
enum MHD_Result http_handler(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **req_cls);
void http_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                    enum MHD_RequestTerminationCode toe);
/* Prepares an error reply {"error":{"code":..,"message":..}} in c. */
void call_set_error(call *c, unsigned status, const char *code, const char *message);
/* HTTP status for an engine error kind: 400, 413, 422 or 500; and the error code of
 * the JSON body (invalid_request, too_large, not_found, sandbox_setup_failed...). */
unsigned http_status_of(const hxs_error *err);
const char *http_error_code_of(const hxs_error *err);
/* The reply is ready: resume the suspended connection so MHD asks for it. */
void call_resume(call *c);

/* admission.c */
void admission_submit(call *c);                 /* body parsed into c->req */
void admission_exec_event(call *c);             /* c->exec's fd is readable */
void admission_client_event(call *c);           /* the client's socket hung up */
void admission_forget(call *c);                 /* MHD is done with c: drop what is left */
void admission_tick(hxs_server *srv, uint64_t now); /* queue timeouts, slots, drain */
void admission_drain(hxs_server *srv);          /* SIGTERM/SIGINT */
uint64_t admission_next_deadline(hxs_server *srv); /* UINT64_MAX if none */
bool admission_drained(hxs_server *srv);
void admission_abort_all(hxs_server *srv);      /* last resort at exit */

/* tls.c */
int tls_open(hxs_server *srv, hxs_error *err);  /* no-op without TLS_CERT_FILE */
bool tls_enabled(const hxs_server *srv);
bool tls_mutual(const hxs_server *srv);         /* client certificates verified */
void *tls_cert_callback(void);                  /* for MHD_OPTION_HTTPS_CERT_CALLBACK2 */
const char *tls_mhd_trust(const hxs_server *srv); /* for MHD_OPTION_HTTPS_MEM_TRUST */
int tls_reload(hxs_server *srv, char *msg, size_t cap); /* SIGHUP; msg says what happened */
void tls_close(hxs_server *srv);
/* The connection's verified client SPIFFE ID into ret, or -EACCES and *ret_why. */
int tls_peer_id(hxs_server *srv, struct MHD_Connection *conn, char *ret, size_t cap,
                const char **ret_why);

/* auth.c */
int auth_setup(hxs_server *srv, hxs_error *err);        /* AUTH_ALLOW, TRUSTED_PROXIES */
void auth_cleanup(hxs_server *srv);
/* Who calls, into c->caller, and may they: 0, or -EACCES with a 403 prepared in c. */
int auth_check(call *c);

/* callers.c */
int callers_setup(hxs_server *srv);
void callers_cleanup(hxs_server *srv);
/* The caller's state, created if new; NULL when CALLERS_MAX are all busy. */
caller_state *callers_get(hxs_server *srv, const char *id);
/* Takes one execution from the per-minute bucket: true, or false and the seconds
 * until one is there. */
bool callers_take_token(hxs_server *srv, caller_state *cs, uint64_t now, unsigned *ret_wait_s);
void callers_enqueue(hxs_server *srv, call *c);
void callers_unqueue(hxs_server *srv, call *c);
call *callers_next(hxs_server *srv);            /* next waiting call, round-robin by caller */
const char *callers_label(const metrics *m, int label);

/* records.c */
int records_setup(hxs_server *srv);
void records_cleanup(hxs_server *srv);
void records_add(hxs_server *srv, const call *c, const hxs_result *res, const char *outcome_text,
                 const char *error_code);
const exec_record *records_find(const hxs_server *srv, const char *id, const char *caller);
char *records_to_json(const exec_record *r, size_t *ret_len);

/* runtimes.c: GET /api/v1/runtimes, and the languages' versions for /health */
void reply_runtimes(call *c);
struct json_t *runtimes_summary_json(const hxs_runtime_info *ri);

/* metrics.c */
void metrics_execution(metrics *m, hxs_language lang, outcome o, uint64_t duration_ms);
void metrics_caller_execution(metrics *m, int label, outcome o);
void metrics_caller_quota(metrics *m, int label);
void metrics_reject(metrics *m, reject_reason r);
void metrics_http(metrics *m, route rt, unsigned status);
void metrics_queue_wait(metrics *m, uint64_t wait_ms);  /* a sandbox is starting */
char *metrics_render(const hxs_server *srv, size_t *ret_len);
outcome outcome_of(const hxs_result *res);
const char *outcome_name(outcome o);

/* log.c */
void log_call(const call *c, const hxs_result *res, const char *outcome_text,
              const char *error_code);
void log_line(const char *event, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
