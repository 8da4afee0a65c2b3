/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A session's own state, shared by the files of src/session/: session.c runs the
 * driver's execution, the queue and the timers; session-proto.c reads the driver's
 * lines (hostile bytes) and writes commands; session-cell.c runs one cell (its files
 * in, the code, its files out) and builds its result; session-files.c the put, get and
 * list operations; session-json.c the API's objects; session-sync.c the blocking calls.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hexr-sandbox/sandbox.h"
#include "core/capbuf.h"
#include "core/macro.h"

#define SESSION_LINE_MAX (4u << 20)             /* a driver's line, then "protocol" */
#define SESSION_INTERRUPT_GRACE_MS 2000         /* a cell interrupted at its limit must stop within */
#define SESSION_READY_MS 60000                  /* the driver says "ready" within (packages: the lifetime) */
#define SESSION_OP_MS 30000                     /* a file operation (or a cell's files) is answered within */
#define SESSION_DISPLAYS_MAX 256                /* display outputs a cell keeps */
/* A file comes out in reads of at most this (its base64 line stays below SESSION_LINE_MAX). */
#define SESSION_READ_CHUNK (2u << 20)
/* A file goes in as one command: at most this (and MAX_FILE_BYTES), its base64 within
 * the execution's stdin queue (EXEC_STDIN_QUEUE_MAX). */
#define SESSION_PUT_MAX (128u << 20)
#define SESSION_DRIVER "/opt/hexr-session/driver.py"

typedef enum item_kind { ITEM_CELL, ITEM_PUT, ITEM_GET, ITEM_LIST } item_kind;

/* Where a running cell is: its files going in, its code, its files coming out. */
typedef enum cell_phase { PHASE_PUT, PHASE_EXEC, PHASE_COLLECT, PHASE_FETCH } cell_phase;

typedef struct session_item session_item;

/* What a kind of item does, called by session.c and session-proto.c through this
 * table only (cells: session-cell.c; file operations: session-files.c). */
typedef struct item_ops {
        void (*begin)(struct hxs_session *s, session_item *it);      /* send its first command */
        void (*event)(struct hxs_session *s, session_item *it, const char *ev, json_t *obj);
        void (*abort)(struct hxs_session *s, session_item *it);      /* the session ended: answer */
        void (*time_limit)(struct hxs_session *s, session_item *it); /* NULL: none of its own */
        /* its caller interrupted it (interrupt_wanted): called by each process while it
         * runs; NULL: it runs to its end (file operations are short) */
        void (*interrupt)(struct hxs_session *s, session_item *it);
        void (*free)(session_item *it);                             /* its own fields */
} item_ops;

/* One queued or running thing: a cell or a file operation. */
struct session_item {
        struct session_item *next;
        const item_ops *ops;
        item_kind kind;
        uint64_t handle;
        bool cancelled;                 /* nobody listens: no callback */
        char id[32];                    /* the command's id now in flight */
        /* a cell */
        hxs_request *req;               /* owned, validated */
        hxs_cell_callbacks cb;
        cell_phase phase;
        size_t next_file;               /* the next of req->files to put */
        bool interrupt_sent;            /* at its time limit */
        bool interrupt_wanted;          /* its caller interrupted it (or went away) */
        bool cancel_sent;               /* ... and the interrupt went to the driver */
        uint64_t began_ms;
        hxs_cell_result res;            /* filled as it goes */
        capbuf out, err;
        json_t *outputs;                /* [{"type":"display","data":{...}}] */
        size_t display_bytes;
        json_t *value, *exception;
        size_t cap_files;
        uint64_t files_bytes;
        size_t fetch;                   /* PHASE_FETCH: the file of res.files being read */
        size_t last_read;               /* bytes the last read gave (get, fetch) */
        unsigned reads;                 /* reads sent so far, for their ids */
        bool fetch_failed;              /* the file being read could not be taken whole */
        /* a file operation */
        char path[256];
        unsigned char *data;            /* put: the bytes */
        size_t len;
        hxs_session_file_fn fn;
        void *userdata;
        hxs_session_file_result fres;
        size_t cap_entries;
};

struct hxs_session {
        hxs_engine *engine;
        const hxs_config *cfg;
        hxs_exec *x;                    /* the driver's execution */
        int epfd, timer_fd;
        hxs_language language;
        uint32_t memory_mb;
        hxs_session_limits lim;
        bool ready;
        bool finished;                  /* the sandbox is gone, everything answered */
        hxs_session_end end;            /* set: ending (the sandbox is being killed) */
        char end_message[240];
        char version[64];
        uint64_t cells, next_handle;
        int64_t created_at;             /* realtime, s */
        uint64_t started_ms;            /* monotonic */
        uint64_t ready_deadline, idle_since, deadline, grace_deadline;
        session_item *head, *tail;      /* queued */
        size_t queued;
        session_item *running;
        char *line;                     /* a driver's line not complete yet */
        size_t line_len, line_cap;
        bool line_overflow;
};

/* session-base.c: what every file of a session may call. */
uint64_t session_now_ms(void);
/* Ends the session (kills the sandbox) with why and a message; the first reason stays. */
void session_end(hxs_session *s, hxs_session_end why, const char *fmt, ...) _printf_(3, 4);
/* The running item is over (its callback was called or it was cancelled): freed,
 * the next one may start. */
void session_item_done(hxs_session *s);
void session_item_free(session_item *it);
/* Queues it (-EBUSY full, -ESHUTDOWN ended: it is freed then); sets *ret_handle. */
int session_enqueue(hxs_session *s, session_item *it, uint64_t *ret_handle);

/* session-proto.c: the driver's stdout bytes, split into lines, each parsed: "ready"
 * first, the rest to the running item's event op. A bad line ends the session
 * ("protocol"). A command object is sent as one line (the reference is taken). */
void proto_feed(hxs_session *s, const char *data, size_t len);
int proto_send(hxs_session *s, json_t *cmd);
/* A string field (NULL when absent or not a string). */
const char *proto_string(json_t *obj, const char *key, size_t *ret_len);
/* A stdout/stderr/file event's bytes, from "text" or "base64" (a new buffer). */
int proto_bytes(json_t *ev, unsigned char **ret, size_t *ret_len);

/* session-files.c: a path from the driver, to a normalised relative one (false: not
 * one we take). */
bool files_path_ok(const char *in, char *out, size_t out_size);
/* Sends a read of path from offset (at most SESSION_READ_CHUNK), as command id. */
void files_send_read(hxs_session *s, const char *id, const char *path, uint64_t offset);
/* Appends a file event's bytes to *data (at most max in all; past it -E2BIG). */
int files_append(json_t *ev, unsigned char **data, size_t *len, size_t max, size_t *ret_got);
