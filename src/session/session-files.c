/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The files of a live session: put, get and list, relative to its working directory,
 * with exec's path rule (engine/request.h) on the way in and on what the driver says
 * back (a path it names that breaks the rule is not listed). Sizes are bounded as
 * exec's files are: MAX_FILE_BYTES in and out, MAX_RETURN_FILES entries listed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/json.h"
#include "engine/request.h"
#include "session/session.h"

static const item_ops fileop_ops;

bool files_path_ok(const char *in, char *out, size_t out_size)
{
        const char *why;
        return out_size > REQUEST_PATH_MAX && request_path_normalize(in, out, out_size, &why) == 0;
}

void hxs_session_file_result_clear(hxs_session_file_result *res)
{
        if (!res)
                return;
        free(res->data);
        for (size_t i = 0; i < res->n_entries; i++)
                free(res->entries[i].path);
        free(res->entries);
        memset(res, 0, sizeof(*res));
}

static void fileop_free(session_item *it)
{
        free(it->data);
        hxs_session_file_result_clear(&it->fres);
}

/* A path the caller gave: "" or NULL only for a listing (the working directory). */
static int check_path(const char *path, bool empty_ok, char *out, hxs_error *err)
{
        if ((!path || !path[0]) && empty_ok) {
                out[0] = '\0';
                return 0;
        }
        const char *why = "is empty";
        if (!path || request_path_normalize(path, out, REQUEST_PATH_MAX + 1, &why) < 0)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "path", "path: %s %s", path ? path : "",
                                      why);
        return 0;
}

static int enqueue_op(hxs_session *s, item_kind kind, const char *path, const void *data, size_t len,
                      hxs_session_file_fn fn, void *userdata, uint64_t *ret_handle, hxs_error *err)
{
        if (!fn)
                return err_fail(err, HXS_ERR_INVALID, -EINVAL, "a file operation needs a callback");
        session_item *it = calloc(1, sizeof(*it));
        if (!it)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        it->kind = kind;
        it->ops = &fileop_ops;
        it->fn = fn;
        it->userdata = userdata;
        int r = check_path(path, kind == ITEM_LIST, it->path, err);
        size_t max = s->cfg->max_file_bytes < SESSION_PUT_MAX ? s->cfg->max_file_bytes : SESSION_PUT_MAX;
        if (r == 0 && kind == ITEM_PUT && len > max)
                r = err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "path", "%s: %zu bytes exceeds the maximum %zu",
                                   it->path, len, max);
        if (r == 0 && kind == ITEM_PUT && !(it->data = malloc(len ? len : 1)))
                r = err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        if (r < 0) {
                session_item_free(it);
                return r;
        }
        if (kind == ITEM_PUT) {
                if (len)
                        memcpy(it->data, data, len);
                it->len = len;
        }
        snprintf(it->fres.path, sizeof(it->fres.path), "%s", it->path);
        r = session_enqueue(s, it, ret_handle);
        if (r == -EBUSY)
                return err_fail(err, HXS_ERR_INTERNAL, r, "the session already has %d cells and file operations queued",
                                HXS_SESSION_QUEUE_MAX);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "the session has ended: %s", s->end_message);
        return 0;
}

int hxs_session_put_file(hxs_session *s, const char *path, const void *data, size_t len, hxs_session_file_fn fn,
                         void *userdata, uint64_t *ret_handle, hxs_error *err)
{
        return enqueue_op(s, ITEM_PUT, path, data, len, fn, userdata, ret_handle, err);
}

int hxs_session_get_file(hxs_session *s, const char *path, hxs_session_file_fn fn, void *userdata,
                         uint64_t *ret_handle, hxs_error *err)
{
        return enqueue_op(s, ITEM_GET, path, NULL, 0, fn, userdata, ret_handle, err);
}

int hxs_session_list_files(hxs_session *s, const char *path, hxs_session_file_fn fn, void *userdata,
                           uint64_t *ret_handle, hxs_error *err)
{
        return enqueue_op(s, ITEM_LIST, path, NULL, 0, fn, userdata, ret_handle, err);
}

void files_send_read(hxs_session *s, const char *id, const char *path, uint64_t offset)
{
        s->deadline = session_now_ms() + SESSION_OP_MS;
        (void)proto_send(s, json_pack("{s:s, s:s, s:s, s:I, s:I}", "op", "get", "id", id, "path", path,
                                      "offset", (json_int_t)offset, "max_bytes", (json_int_t)SESSION_READ_CHUNK));
}

int files_append(json_t *ev, unsigned char **data, size_t *len, size_t max, size_t *ret_got)
{
        unsigned char *chunk;
        size_t n;
        int r = proto_bytes(ev, &chunk, &n);
        if (r < 0)
                return r;
        *ret_got = n;
        if (n > max - (*len < max ? *len : max)) {
                free(chunk);
                return -E2BIG;
        }
        unsigned char *p = realloc(*data, *len + n + 1);
        if (!p) {
                free(chunk);
                return -ENOMEM;
        }
        memcpy(p + *len, chunk, n);
        *len += n;
        p[*len] = '\0';
        *data = p;
        free(chunk);
        return 0;
}

/* The next read of a get, its own id (a late answer to an earlier one is not taken). */
static void send_get(hxs_session *s, session_item *it)
{
        snprintf(it->id, sizeof(it->id), "f%llur%u", (unsigned long long)it->handle, it->reads++);
        files_send_read(s, it->id, it->path, it->fres.len);
}

static void fileop_begin(hxs_session *s, session_item *it)
{
        snprintf(it->id, sizeof(it->id), "f%llu", (unsigned long long)it->handle);
        json_t *cmd = NULL;
        if (it->kind == ITEM_PUT) {
                char *b64 = json_base64(it->data, it->len);
                cmd = b64 ? json_pack("{s:s, s:s, s:s, s:s}", "op", "put", "id", it->id, "path", it->path,
                                      "base64", b64) : NULL;
                free(b64);
        } else if (it->kind == ITEM_GET) {
                send_get(s, it);
                return;
        } else {
                cmd = json_pack("{s:s, s:s, s:s, s:I}", "op", "list", "id", it->id, "path", it->path,
                                "max_entries", (json_int_t)s->cfg->max_return_files);
        }
        s->deadline = session_now_ms() + SESSION_OP_MS;
        (void)proto_send(s, cmd);
}

static void deliver(hxs_session *s, session_item *it)
{
        bool tell = !it->cancelled;
        hxs_session_file_fn fn = it->fn;
        void *userdata = it->userdata;
        hxs_session_file_result out = it->fres;
        memset(&it->fres, 0, sizeof(it->fres));
        session_item_done(s);
        if (tell)
                fn(userdata, &out);
        else
                hxs_session_file_result_clear(&out);
}

static void fileop_abort(hxs_session *s, session_item *it)
{
        it->fres.status = -ESHUTDOWN;
        snprintf(it->fres.error_type, sizeof(it->fres.error_type), "session_ended");
        snprintf(it->fres.error_message, sizeof(it->fres.error_message), "%s", s->end_message);
        deliver(s, it);
}

/* The driver's error type to an errno a caller can map (404 for a missing file). */
static int error_errno(const char *type)
{
        if (!type)
                return -EIO;
        if (strcmp(type, "FileNotFoundError") == 0)
                return -ENOENT;
        if (strcmp(type, "IsADirectoryError") == 0)
                return -EISDIR;
        if (strcmp(type, "NotADirectoryError") == 0)
                return -ENOTDIR;
        if (strcmp(type, "PermissionError") == 0)
                return -EACCES;
        if (strcmp(type, "FileTooLarge") == 0 || strcmp(type, "OSError") == 0)
                return -EIO;
        return -EINVAL;
}

static void on_done(hxs_session *s, session_item *it, json_t *obj)
{
        const char *st = proto_string(obj, "status", NULL);
        if (!st || strcmp(st, "ok") != 0) {
                json_t *e = json_object_get(obj, "error");
                size_t n = 0;
                const char *type = json_is_object(e) ? proto_string(e, "type", &n) : NULL;
                if (type)
                        utf8_lossy_copy(it->fres.error_type, sizeof(it->fres.error_type), type, n);
                const char *msg = json_is_object(e) ? proto_string(e, "message", &n) : NULL;
                if (msg)
                        utf8_lossy_copy(it->fres.error_message, sizeof(it->fres.error_message), msg, n);
                else
                        snprintf(it->fres.error_message, sizeof(it->fres.error_message), "%s: failed", it->path);
                it->fres.status = error_errno(type);
        } else if (it->kind == ITEM_PUT) {
                it->fres.size = it->len;
        } else if (it->kind == ITEM_GET && !it->fres.truncated && it->fres.len < it->fres.size && it->last_read > 0) {
                send_get(s, it); /* the next chunk */
                return;
        }
        deliver(s, it);
}

static void on_file(hxs_session *s, session_item *it, json_t *obj)
{
        hxs_session_file_result *r = &it->fres;
        if (it->kind != ITEM_GET || r->truncated)
                return;
        json_t *size = json_object_get(obj, "size");
        if (json_is_integer(size) && json_integer_value(size) >= 0)
                r->size = (uint64_t)json_integer_value(size);
        if (r->size > s->cfg->max_file_bytes) {
                /* larger than a get may give: not read */
                r->truncated = true;
                free(r->data);
                r->data = NULL;
                r->len = 0;
                return;
        }
        int e = files_append(obj, &r->data, &r->len, s->cfg->max_file_bytes, &it->last_read);
        if (e == -E2BIG) {
                r->truncated = true;
                free(r->data);
                r->data = NULL;
                r->len = 0;
        } else if (e < 0) {
                session_end(s, HXS_SESSION_PROTOCOL, "the driver sent a file that is neither text nor base64");
        }
        if (!json_is_integer(size) && r->len > r->size)
                r->size = r->len;
}

static void on_entry(hxs_session *s, session_item *it, json_t *obj)
{
        hxs_session_file_result *r = &it->fres;
        char path[REQUEST_PATH_MAX + 1];
        const char *p = proto_string(obj, "path", NULL);
        const char *type = proto_string(obj, "type", NULL);
        if (it->kind != ITEM_LIST || !p || !files_path_ok(p, path, sizeof(path)) ||
            r->n_entries >= s->cfg->max_return_files)
                return;
        if (r->n_entries == it->cap_entries) {
                size_t cap = it->cap_entries ? it->cap_entries * 2 : 16;
                hxs_session_entry *e = realloc(r->entries, cap * sizeof(*e));
                if (!e)
                        return;
                r->entries = e;
                it->cap_entries = cap;
        }
        hxs_session_entry *e = &r->entries[r->n_entries];
        json_t *size = json_object_get(obj, "size");
        *e = (hxs_session_entry){ .path = strdup(path),
                                  .size = json_is_integer(size) && json_integer_value(size) >= 0 ?
                                          (uint64_t)json_integer_value(size) : 0 };
        if (!e->path)
                return;
        snprintf(e->type, sizeof(e->type), "%s",
                 type && (strcmp(type, "file") == 0 || strcmp(type, "dir") == 0) ? type : "other");
        r->n_entries++;
}

static void fileop_event(hxs_session *s, session_item *it, const char *ev, json_t *obj)
{
        if (strcmp(ev, "done") == 0)
                on_done(s, it, obj);
        else if (strcmp(ev, "file") == 0)
                on_file(s, it, obj);
        else if (strcmp(ev, "entry") == 0)
                on_entry(s, it, obj);
}

static const item_ops fileop_ops = {
        .begin = fileop_begin,
        .event = fileop_event,
        .abort = fileop_abort,
        .time_limit = NULL,
        .free = fileop_free,
};
