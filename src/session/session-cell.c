/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One cell of a session: its files go in ("put", one at a time), its code runs
 * ("exec": stdout, stderr and display events, then "done" with the status, the last
 * expression's value and the exception), its files come out ("collect": output/ and
 * the return globs, within exec's budgets). At its time limit it is interrupted; the
 * session's timer kills the session when it does not stop (session.c). Everything the
 * driver says is bounded here: output as an execution's (head and tail), displays by
 * count and bytes, exceptions by length, files by exec's budgets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "engine/files-out.h"
#include "engine/json.h"
#include "engine/request.h"
#include "session/session.h"

static const item_ops cell_ops;

#define BUNDLE_KEYS_MAX 32
#define EXCEPTION_TEXT_MAX (64u << 10)

static const char *const status_names[HXS_CELL_STATUS_MAX] = {
        [HXS_CELL_OK] = "ok", [HXS_CELL_EXCEPTION] = "exception",
        [HXS_CELL_INTERRUPTED] = "interrupted", [HXS_CELL_SESSION_ENDED] = "session_ended",
};

const char *hxs_cell_status_name(hxs_cell_status status)
{
        return (unsigned)status < HXS_CELL_STATUS_MAX ? status_names[status] : "unknown";
}

void hxs_cell_result_clear(hxs_cell_result *res)
{
        if (!res)
                return;
        free(res->stdout_data);
        free(res->stderr_data);
        free(res->value_json);
        free(res->outputs_json);
        free(res->exception_json);
        for (size_t i = 0; i < res->n_files; i++) {
                free(res->files[i].path);
                free(res->files[i].data);
        }
        free(res->files);
        memset(res, 0, sizeof(*res));
}

int hxs_session_exec(hxs_session *s, const hxs_request *cell, const hxs_cell_callbacks *cb, uint64_t *ret_handle,
                     hxs_error *err)
{
        if (!cb || !cb->done)
                return err_fail(err, HXS_ERR_INVALID, -EINVAL, "a cell needs a done callback");
        hxs_request *req;
        int r = request_dup(cell, &req);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        req->language = s->language;
        req->memory_mb = s->memory_mb;
        if ((r = hxs_request_validate(req, s->cfg, err)) < 0) {
                hxs_request_free(req);
                return r;
        }
        for (size_t i = 0; i < req->n_files; i++) {
                uint64_t n = req->files[i].fd >= 0 ? req->files[i].size : req->files[i].len;
                if (n > SESSION_PUT_MAX) {
                        int e = err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "files",
                                               "files: %s: %llu bytes exceeds a session's maximum %u",
                                               req->files[i].path, (unsigned long long)n, SESSION_PUT_MAX);
                        hxs_request_free(req);
                        return e;
                }
        }
        session_item *it = calloc(1, sizeof(*it));
        if (!it) {
                hxs_request_free(req);
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        }
        it->kind = ITEM_CELL;
        it->ops = &cell_ops;
        it->req = req;
        it->cb = *cb;
        capbuf_init(&it->out, s->cfg->max_output_bytes);
        capbuf_init(&it->err, s->cfg->max_output_bytes);
        it->outputs = json_array();
        if (!it->outputs) {
                session_item_free(it);
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        }
        r = session_enqueue(s, it, ret_handle);
        if (r == -EBUSY)
                return err_fail(err, HXS_ERR_INTERNAL, r, "the session already has %d cells and file operations queued",
                                HXS_SESSION_QUEUE_MAX);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "the session has ended: %s", s->end_message);
        return 0;
}

static void cell_free(session_item *it)
{
        hxs_request_free(it->req);
        capbuf_free(&it->out);
        capbuf_free(&it->err);
        json_decref(it->outputs);
        json_decref(it->value);
        json_decref(it->exception);
        hxs_cell_result_clear(&it->res);
}

/* ---- the commands --------------------------------------------------------------- */

/* A file of the request, whatever holds its bytes. */
static int file_bytes(const request_file *f, unsigned char **ret, size_t *ret_len, bool *ret_owned)
{
        if (f->fd < 0) {
                *ret = f->data;
                *ret_len = f->len;
                *ret_owned = false;
                return 0;
        }
        unsigned char *p = malloc(f->size ? f->size : 1);
        if (!p)
                return -ENOMEM;
        size_t got = 0;
        while (got < f->size) {
                ssize_t n = pread(f->fd, p + got, f->size - got, (off_t)got);
                if (n <= 0) {
                        free(p);
                        return n < 0 ? -errno : -EIO;
                }
                got += (size_t)n;
        }
        *ret = p;
        *ret_len = got;
        *ret_owned = true;
        return 0;
}

static void send_put(hxs_session *s, session_item *it)
{
        const request_file *f = &it->req->files[it->next_file];
        snprintf(it->id, sizeof(it->id), "c%llup%zu", (unsigned long long)it->handle, it->next_file);
        unsigned char *data = NULL;
        size_t len = 0;
        bool owned = false;
        if (file_bytes(f, &data, &len, &owned) < 0) {
                session_end(s, HXS_SESSION_CRASHED, "the cell's file %s could not be read", f->path);
                return;
        }
        char *b64 = json_base64(data, len);
        if (owned)
                free(data);
        json_t *cmd = b64 ? json_pack("{s:s, s:s, s:s, s:s}", "op", "put", "id", it->id, "path", f->path,
                                      "base64", b64) : NULL;
        free(b64);
        s->deadline = session_now_ms() + SESSION_OP_MS;
        (void)proto_send(s, cmd);
}

static void deliver(hxs_session *s, session_item *it);

static void cancelled_result(session_item *it)
{
        it->res.status = HXS_CELL_INTERRUPTED;
        snprintf(it->res.error_type, sizeof(it->res.error_type), "cancelled");
        snprintf(it->res.error_message, sizeof(it->res.error_message), "interrupted: cancelled by its caller");
}

static void send_exec(hxs_session *s, session_item *it)
{
        if (it->interrupt_wanted) {
                /* interrupted before its code reached the driver: it never runs */
                cancelled_result(it);
                deliver(s, it);
                return;
        }
        it->phase = PHASE_EXEC;
        snprintf(it->id, sizeof(it->id), "c%llu", (unsigned long long)it->handle);
        json_t *cmd = json_pack("{s:s, s:s, s:o, s:I}", "op", "exec", "id", it->id, "code",
                                json_string_lossy(it->req->code, it->req->code_len), "timeout_ms",
                                (json_int_t)it->req->timeout_s * 1000);
        s->deadline = session_now_ms() + (uint64_t)it->req->timeout_s * 1000;
        (void)proto_send(s, cmd);
}

static void send_collect(hxs_session *s, session_item *it)
{
        it->phase = PHASE_COLLECT;
        snprintf(it->id, sizeof(it->id), "c%lluo", (unsigned long long)it->handle);
        json_t *globs = json_array();
        for (size_t i = 0; globs && i < it->req->n_globs; i++)
                json_array_append_new(globs, json_string_lossy(it->req->return_globs[i],
                                                               strlen(it->req->return_globs[i])));
        /* contents inline up to one read's worth (a line stays below SESSION_LINE_MAX);
         * the files past it come listed as truncated and are read in chunks (fetch) */
        uint64_t inline_max = s->cfg->max_return_bytes < SESSION_READ_CHUNK ? s->cfg->max_return_bytes :
                                                                               SESSION_READ_CHUNK;
        json_t *cmd = json_pack("{s:s, s:s, s:o, s:I, s:I}", "op", "collect", "id", it->id, "globs", globs,
                                "max_files", (json_int_t)s->cfg->max_return_files, "max_bytes",
                                (json_int_t)inline_max);
        s->deadline = session_now_ms() + SESSION_OP_MS;
        s->grace_deadline = 0;
        (void)proto_send(s, cmd);
}

static void cell_begin(hxs_session *s, session_item *it)
{
        s->cells++;
        it->res.cell = s->cells;
        it->began_ms = session_now_ms();
        if (it->interrupt_wanted) {
                send_exec(s, it);       /* answered at once: it never reaches the driver */
                return;
        }
        if (it->req->n_files > 0) {
                it->phase = PHASE_PUT;
                send_put(s, it);
        } else {
                send_exec(s, it);
        }
}

/* Interrupted by its caller: its code gets the driver's interrupt, once (the session's
 * timer gives it the grace a time limit gives); before its code ran, it never runs. */
static void cell_interrupt(hxs_session *s, session_item *it)
{
        if (it->phase != PHASE_EXEC || it->cancel_sent || it->interrupt_sent)
                return;
        it->cancel_sent = true;
        s->deadline = 0;
        s->grace_deadline = session_now_ms() + SESSION_INTERRUPT_GRACE_MS;
        (void)proto_send(s, json_pack("{s:s, s:s}", "op", "interrupt", "id", it->id));
}

static void cell_time_limit(hxs_session *s, session_item *it)
{
        it->interrupt_sent = true;
        (void)proto_send(s, json_pack("{s:s, s:s}", "op", "interrupt", "id", it->id));
}

/* ---- the result ----------------------------------------------------------------- */

static char *dump(json_t *v)
{
        return v && !json_is_null(v) ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* The result goes to its caller (unless cancelled), then the next item may run. */
static void deliver(hxs_session *s, session_item *it)
{
        hxs_cell_result *res = &it->res;
        res->execution_time_ms = session_now_ms() - it->began_ms;
        res->stdout_truncated = capbuf_truncated(&it->out);
        res->stderr_truncated = capbuf_truncated(&it->err);
        res->stdout_omitted = it->out.dropped;
        res->stderr_omitted = it->err.dropped;
        res->stdout_data = capbuf_steal(&it->out, &res->stdout_len);
        res->stderr_data = capbuf_steal(&it->err, &res->stderr_len);
        res->value_json = dump(it->value);
        res->outputs_json = dump(it->outputs);
        res->exception_json = dump(it->exception);
        if (!res->outputs_json)
                res->outputs_json = strdup("[]");
        /* the item is gone first: the caller sees the session as it is after the cell */
        bool tell = !it->cancelled;
        hxs_cell_callbacks cb = it->cb;
        hxs_cell_result out = *res;
        memset(res, 0, sizeof(*res));
        session_item_done(s);
        if (tell)
                cb.done(cb.userdata, &out);
        else
                hxs_cell_result_clear(&out);
}

static void cell_abort(hxs_session *s, session_item *it)
{
        it->res.status = HXS_CELL_SESSION_ENDED;
        bool stuck = s->end == HXS_SESSION_CELL_TIMEOUT && (it->interrupt_sent || it->cancel_sent);
        snprintf(it->res.error_type, sizeof(it->res.error_type), "%s",
                 !stuck ? "session_ended" : it->interrupt_sent ? "timeout" : "cancelled");
        snprintf(it->res.error_message, sizeof(it->res.error_message), "%s", s->end_message);
        if (!it->began_ms)
                it->began_ms = session_now_ms();
        deliver(s, it);
}

/* ---- what the driver says -------------------------------------------------------- */

/* A mime bundle from the driver: an object of strings, any JSON for a JSON type; other
 * values and keys past BUNDLE_KEYS_MAX dropped. NULL when it is not an object. */
static json_t *clean_bundle(json_t *in)
{
        if (!json_is_object(in))
                return NULL;
        json_t *out = json_object();
        const char *key;
        json_t *v;
        size_t n = 0;
        json_object_foreach(in, key, v) {
                if (!out || n >= BUNDLE_KEYS_MAX || strlen(key) > 128)
                        break;
                size_t kl = strlen(key);
                bool json_type = strcmp(key, "application/json") == 0 ||
                                 (kl > 5 && strcmp(key + kl - 5, "+json") == 0);
                if (json_type || json_is_string(v)) {
                        json_object_set(out, key, v);
                        n++;
                }
        }
        return out;
}

static json_t *bounded_string(json_t *obj, const char *key, size_t max)
{
        size_t n = 0;
        const char *v = proto_string(obj, key, &n);
        return json_string_lossy(v ? v : "", v ? (n < max ? n : max) : 0);
}

/* {"type", "message", "traceback"}, each a string, bounded. */
static json_t *clean_exception(json_t *in, size_t traceback_max)
{
        if (!json_is_object(in))
                return NULL;
        return json_pack("{s:o, s:o, s:o}", "type", bounded_string(in, "type", 256), "message",
                         bounded_string(in, "message", EXCEPTION_TEXT_MAX), "traceback",
                         bounded_string(in, "traceback", traceback_max));
}

static void on_output(hxs_session *s, session_item *it, int stream, json_t *obj)
{
        unsigned char *data;
        size_t len;
        if (proto_bytes(obj, &data, &len) < 0) {
                session_end(s, HXS_SESSION_PROTOCOL, "the driver sent output that is neither text nor base64");
                return;
        }
        (void)capbuf_append(stream == 1 ? &it->out : &it->err, data, len);
        if (!it->cancelled && it->cb.output)
                it->cb.output(it->cb.userdata, stream, data, len);
        free(data);
}

static void on_display(hxs_session *s, session_item *it, json_t *obj)
{
        json_t *data = clean_bundle(json_object_get(obj, "data"));
        if (!data) {
                session_end(s, HXS_SESSION_PROTOCOL, "the driver sent a display without a data object");
                return;
        }
        char *text = json_dumps(data, JSON_COMPACT);
        size_t n = text ? strlen(text) : 0;
        if (text && !it->cancelled && it->cb.display)
                it->cb.display(it->cb.userdata, text, n);
        free(text);
        /* the result keeps them within bounds; the stream had them all */
        if (json_array_size(it->outputs) < SESSION_DISPLAYS_MAX && it->display_bytes + n <= s->cfg->max_return_bytes) {
                it->display_bytes += n;
                json_array_append_new(it->outputs, json_pack("{s:s, s:O}", "type", "display", "data", data));
        }
        json_decref(data);
}

static void on_exec_done(hxs_session *s, session_item *it, json_t *obj)
{
        const char *st = proto_string(obj, "status", NULL);
        hxs_cell_result *res = &it->res;
        if (st && strcmp(st, "ok") == 0)
                res->status = HXS_CELL_OK;
        else if (st && strcmp(st, "exception") == 0)
                res->status = HXS_CELL_EXCEPTION;
        else if (st && strcmp(st, "interrupted") == 0)
                res->status = HXS_CELL_INTERRUPTED;
        else {
                session_end(s, HXS_SESSION_PROTOCOL, "the driver ended a cell with an unknown status");
                return;
        }
        json_t *value = json_object_get(obj, "value");
        if (value && !json_is_null(value) && !(it->value = clean_bundle(value))) {
                session_end(s, HXS_SESSION_PROTOCOL, "the driver sent a value that is not a mime bundle");
                return;
        }
        json_t *exc = json_object_get(obj, "exception");
        if (exc && !json_is_null(exc))
                it->exception = clean_exception(exc, s->cfg->max_output_bytes);
        if (it->interrupt_sent && res->status != HXS_CELL_OK) {
                snprintf(res->error_type, sizeof(res->error_type), "timeout");
                snprintf(res->error_message, sizeof(res->error_message),
                         "interrupted: time limit of %u s exceeded", it->req->timeout_s);
        } else if (it->cancel_sent && res->status != HXS_CELL_OK) {
                /* the driver's status stays (a cell that caught the interrupt says so) */
                snprintf(res->error_type, sizeof(res->error_type), "cancelled");
                snprintf(res->error_message, sizeof(res->error_message), "interrupted: cancelled by its caller");
        }
        send_collect(s, it);
}

static void on_put_done(hxs_session *s, session_item *it, json_t *obj)
{
        const char *st = proto_string(obj, "status", NULL);
        const char *path = it->req->files[it->next_file].path;
        if (st && strcmp(st, "ok") == 0) {
                if (++it->next_file < it->req->n_files)
                        send_put(s, it);
                else
                        send_exec(s, it);
                return;
        }
        /* the cell does not run without its files */
        json_t *e = json_object_get(obj, "error");
        it->res.status = HXS_CELL_EXCEPTION;
        it->exception = clean_exception(json_is_object(e) ? e : obj, 0);
        size_t n = 0;
        const char *msg = json_is_object(e) ? proto_string(e, "message", &n) : NULL;
        char m[160] = "";
        if (msg)
                utf8_lossy_copy(m, sizeof(m), msg, n);
        snprintf(it->res.error_type, sizeof(it->res.error_type), "files");
        snprintf(it->res.error_message, sizeof(it->res.error_message), "files: %s: %s", path,
                 m[0] ? m : "could not be written");
        deliver(s, it);
}

/* A file out: kept within exec's budgets (MAX_RETURN_FILES, MAX_RETURN_BYTES). */
static void on_file(hxs_session *s, session_item *it, json_t *obj)
{
        hxs_cell_result *res = &it->res;
        char path[REQUEST_PATH_MAX + 1];
        const char *p = proto_string(obj, "path", NULL);
        if (!p || !files_path_ok(p, path, sizeof(path)) || res->n_files >= s->cfg->max_return_files)
                return;
        unsigned char *data = NULL;
        size_t len = 0;
        json_t *size = json_object_get(obj, "size");
        bool truncated = json_is_true(json_object_get(obj, "truncated"));
        if (!truncated && proto_bytes(obj, &data, &len) < 0) {
                session_end(s, HXS_SESSION_PROTOCOL, "the driver sent a file that is neither text nor base64");
                return;
        }
        if (it->files_bytes + len > s->cfg->max_return_bytes) {
                free(data);
                data = NULL;
                len = 0;
                truncated = true;
        }
        if (res->n_files == it->cap_files) {
                size_t cap = it->cap_files ? it->cap_files * 2 : 8;
                hxs_file *f = realloc(res->files, cap * sizeof(*f));
                if (!f) {
                        free(data);
                        return;
                }
                res->files = f;
                it->cap_files = cap;
        }
        hxs_file *f = &res->files[res->n_files];
        *f = (hxs_file){ .path = strdup(path), .data = data, .len = len, .truncated = truncated,
                         .size = json_is_integer(size) && json_integer_value(size) >= 0 ?
                                 (uint64_t)json_integer_value(size) : len };
        if (!f->path) {
                free(data);
                return;
        }
        f->mime = files_mime(f->path);
        it->files_bytes += len;
        res->n_files++;
}

/* The next file collect listed without its content that still fits MAX_RETURN_BYTES:
 * read in chunks; when none is left, the result goes. */
static void next_fetch(hxs_session *s, session_item *it)
{
        hxs_cell_result *res = &it->res;
        for (; it->fetch < res->n_files; it->fetch++) {
                hxs_file *f = &res->files[it->fetch];
                if (!f->truncated || f->size > s->cfg->max_return_bytes - it->files_bytes)
                        continue;
                it->phase = PHASE_FETCH;
                it->fetch_failed = false;
                snprintf(it->id, sizeof(it->id), "c%llug%u", (unsigned long long)it->handle, it->reads++);
                files_send_read(s, it->id, f->path, f->len);
                return;
        }
        deliver(s, it);
}

static void on_fetch_file(hxs_session *s, session_item *it, json_t *obj)
{
        hxs_file *f = &it->res.files[it->fetch];
        if (it->fetch_failed)
                return;
        int r = files_append(obj, &f->data, &f->len, (size_t)f->size, &it->last_read);
        if (r == -EINVAL) {
                session_end(s, HXS_SESSION_PROTOCOL, "the driver sent a file that is neither text nor base64");
                return;
        }
        if (r < 0)
                it->fetch_failed = true; /* it grew, or no memory: listed as truncated */
}

static void on_fetch_done(hxs_session *s, session_item *it, json_t *obj)
{
        hxs_file *f = &it->res.files[it->fetch];
        const char *st = proto_string(obj, "status", NULL);
        bool ok = st && strcmp(st, "ok") == 0 && !it->fetch_failed;
        if (ok && f->len < f->size && it->last_read > 0) {
                snprintf(it->id, sizeof(it->id), "c%llug%u", (unsigned long long)it->handle, it->reads++);
                files_send_read(s, it->id, f->path, f->len);
                return;
        }
        if (ok && f->len == f->size) {
                f->truncated = false;
                it->files_bytes += f->len;
        } else {
                free(f->data);
                f->data = NULL;
                f->len = 0;
        }
        it->fetch++;
        next_fetch(s, it);
}

static void cell_event(hxs_session *s, session_item *it, const char *ev, json_t *obj)
{
        bool done = strcmp(ev, "done") == 0;
        switch (it->phase) {
        case PHASE_PUT:
                if (done)
                        on_put_done(s, it, obj);
                break;
        case PHASE_EXEC:
                if (strcmp(ev, "stdout") == 0)
                        on_output(s, it, 1, obj);
                else if (strcmp(ev, "stderr") == 0)
                        on_output(s, it, 2, obj);
                else if (strcmp(ev, "display") == 0)
                        on_display(s, it, obj);
                else if (done)
                        on_exec_done(s, it, obj);
                break;
        case PHASE_COLLECT:
                if (strcmp(ev, "file") == 0)
                        on_file(s, it, obj);
                else if (done)
                        next_fetch(s, it);
                break;
        case PHASE_FETCH:
                if (strcmp(ev, "file") == 0)
                        on_fetch_file(s, it, obj);
                else if (done)
                        on_fetch_done(s, it, obj);
                break;
        }
}

static const item_ops cell_ops = {
        .begin = cell_begin,
        .event = cell_event,
        .abort = cell_abort,
        .time_limit = cell_time_limit,
        .interrupt = cell_interrupt,
        .free = cell_free,
};
