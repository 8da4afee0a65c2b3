/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An execution request sent as multipart/form-data, for files too big for JSON: one
 * part name="request" (the JSON request; it may carry files and return_files of its
 * own) and parts name="files" whose filename is the file's path in the sandbox.
 *
 * The JSON part is kept, up to MAX_BODY_BYTES. Each file part is written as it arrives
 * into an unlinked file (O_TMPFILE) under STATE_DIR and handed to the request by fd, so
 * the service's memory never holds a file. The limits are checked while the bytes
 * come, so a client cannot fill the disk: more than MAX_FILES files, a file over
 * MAX_FILE_BYTES or all over MAX_FILES_BYTES is a 413 (-E2BIG; a file's naming
 * files[i].path, i counting the file parts); the request then drops the rest of the
 * body. The path rules themselves are the library's (hxs_request_validate).
 *
 * What all requests hold staged at once is bounded too, or the queue alone would let
 * callers fill STATE_DIR ((MAX_CONCURRENT + MAX_QUEUE) x MAX_FILES_BYTES): each
 * upload charges the bytes it writes to the service's counter and gives them back when
 * it is freed, which is when its request ends (refused, done, or its client gone: the
 * request's copies of the files live no longer). Bytes past UPLOAD_STAGING_BYTES are
 * -EBUSY, a 429; an upload that failed closes its files and gives its bytes back at
 * once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/macro.h"
#include "server/multipart.h"
#include "server/upload.h"

/* Room for the parts' own headers and delimiters, beyond their contents. */
#define PART_OVERHEAD ((uint64_t)MP_HEADERS_MAX + 256)

typedef struct staged {
        char path[MP_NAME_MAX + 1];
        int fd;
        uint64_t size;
} staged;

struct upload {
        const hxs_config *cfg;
        mp_parser *mp;
        bool failed;                    /* an error was reported: drop the rest */
        enum { PART_NONE, PART_REQUEST, PART_FILE } in;
        bool have_request;
        char *json;                     /* the request part */
        size_t json_len, json_cap;
        staged *files;
        size_t n_files;
        uint64_t files_bytes;
        uint64_t *staged;               /* the service's: all uploads' files_bytes */
        uint64_t charged;               /* what this upload added to *staged */
};

bool upload_is_multipart(const char *ct)
{
        static const char type[] = "multipart/form-data";

        if (!ct)
                return false;
        ct += strspn(ct, " \t");
        return strncasecmp(ct, type, strlen(type)) == 0 &&
               (ct[strlen(type)] == '\0' || ct[strlen(type)] == ';' || ct[strlen(type)] == ' ');
}

uint64_t upload_body_max(const hxs_config *cfg)
{
        return (uint64_t)cfg->max_body_bytes + cfg->max_files_bytes +
               ((uint64_t)cfg->max_files + 1) * PART_OVERHEAD;
}

static int too_large(hxs_error *err, size_t i, const char *path, const char *what, uint64_t max)
{
        char field[48];
        snprintf(field, sizeof(field), "files[%zu].path", i);
        err_fail_field(err, HXS_ERR_INVALID, -E2BIG, field, "%s: %s is over %s (%llu bytes)", field,
                       path, what, (unsigned long long)max);
        return -E2BIG;
}

static int part_begin(void *ud, const mp_part *part, hxs_error *err)
{
        upload *u = ud;

        if (strcmp(part->name, "request") == 0) {
                if (u->have_request)
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "body",
                                              "multipart body: more than one part named \"request\"");
                u->have_request = true;
                u->in = PART_REQUEST;
                return 0;
        }
        if (strcmp(part->name, "files") != 0)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "body",
                                      "multipart body: a part is named neither \"request\" (the JSON request) nor \"files\" (a file, its filename the path)");
        size_t i = u->n_files;
        char field[48];
        snprintf(field, sizeof(field), "files[%zu].path", i);
        if (!part->has_filename || !part->filename[0])
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, field,
                                      "%s: a \"files\" part needs a filename, the file's path in the sandbox", field);
        if (u->n_files >= u->cfg->max_files)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "files",
                                      "files: more than the maximum %u (MAX_FILES)", u->cfg->max_files);
        staged *f = realloc(u->files, (u->n_files + 1) * sizeof(*f));
        if (!f)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory while receiving files");
        u->files = f;
        f = &u->files[u->n_files];
        *f = (staged){ .fd = -1 };
        snprintf(f->path, sizeof(f->path), "%s", part->filename);
        f->fd = open(u->cfg->state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (f->fd < 0)
                return err_fail(err, HXS_ERR_INTERNAL, -errno, "staging an uploaded file under STATE_DIR: %s",
                                strerror(errno));
        u->n_files++;
        u->in = PART_FILE;
        return 0;
}

static int request_data(upload *u, const char *data, size_t len, hxs_error *err)
{
        if (u->json_len + len > u->cfg->max_body_bytes) {
                err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "body",
                               "body: the \"request\" part is over MAX_BODY_BYTES (%u bytes)", u->cfg->max_body_bytes);
                return -E2BIG;
        }
        if (u->json_len + len > u->json_cap) {
                size_t cap = u->json_cap ? u->json_cap : 4096;
                while (cap < u->json_len + len)
                        cap *= 2;
                char *p = realloc(u->json, cap);
                if (!p)
                        return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory while receiving the request");
                u->json = p;
                u->json_cap = cap;
        }
        memcpy(u->json + u->json_len, data, len);
        u->json_len += len;
        return 0;
}

static int file_data(upload *u, const char *data, size_t len, hxs_error *err)
{
        size_t i = u->n_files - 1;
        staged *f = &u->files[i];

        if (f->size + len > u->cfg->max_file_bytes)
                return too_large(err, i, f->path, "MAX_FILE_BYTES", u->cfg->max_file_bytes);
        if (u->files_bytes + len > u->cfg->max_files_bytes)
                return too_large(err, i, f->path, "MAX_FILES_BYTES, with the files before it",
                                 u->cfg->max_files_bytes);
        if (*u->staged + len > u->cfg->upload_staging_bytes)
                return err_fail_field(err, HXS_ERR_INVALID, -EBUSY, "files",
                                      "files: the service holds %llu bytes of uploads staged, and %s would take it over UPLOAD_STAGING_BYTES (%u bytes); retry later",
                                      (unsigned long long)*u->staged, f->path, u->cfg->upload_staging_bytes);
        *u->staged += len;      /* before writing: a failed write still staged some */
        u->charged += len;
        while (len) {
                ssize_t n = write(f->fd, data, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return err_fail(err, HXS_ERR_INTERNAL, n < 0 ? -errno : -EIO,
                                        "staging an uploaded file under STATE_DIR: %s",
                                        n < 0 ? strerror(errno) : "short write");
                data += n;
                len -= (size_t)n;
                f->size += (uint64_t)n;
                u->files_bytes += (uint64_t)n;
        }
        return 0;
}

static int part_data(void *ud, const char *data, size_t len, hxs_error *err)
{
        upload *u = ud;
        return u->in == PART_REQUEST ? request_data(u, data, len, err) : file_data(u, data, len, err);
}

static int part_end(void *ud, hxs_error *err)
{
        upload *u = ud;
        u->in = PART_NONE;
        return 0;
}

int upload_new(const hxs_config *cfg, uint64_t *staged_total, const char *content_type, upload **ret,
               hxs_error *err)
{
        static const mp_callbacks cb = { part_begin, part_data, part_end };
        char boundary[MP_BOUNDARY_MAX + 1];

        int r = mp_boundary_of(content_type, boundary, err);
        if (r < 0)
                return r;
        upload *u = calloc(1, sizeof(*u));
        if (!u)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        u->cfg = cfg;
        u->staged = staged_total;
        r = mp_new(boundary, &cb, u, &u->mp);
        if (r < 0) {
                free(u);
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        }
        *ret = u;
        return 0;
}

/* This upload's own fds of its files; the request's copies are the request's. */
static void close_files(upload *u)
{
        for (size_t i = 0; i < u->n_files; i++)
                if (u->files[i].fd >= 0) {
                        close(u->files[i].fd);
                        u->files[i].fd = -1;
                }
}

static void release(upload *u)
{
        *u->staged -= u->charged;
        u->charged = 0;
}

void upload_free(upload *u)
{
        if (!u)
                return;
        close_files(u);
        release(u);
        free(u->files);
        free(u->json);
        mp_free(u->mp);
        free(u);
}

int upload_feed(upload *u, const char *data, size_t len, hxs_error *err)
{
        if (u->failed)
                return 0; /* reported once; the rest of the body is dropped */
        int r = mp_feed(u->mp, data, len, err);
        if (r < 0) {
                u->failed = true;
                close_files(u); /* no request will have them */
                release(u);
        }
        return r;
}

int upload_finish(upload *u, hxs_request **ret, hxs_error *err)
{
        hxs_request *req = NULL;

        int r = mp_finish(u->mp, err);
        if (r < 0)
                return r;

        if (!u->have_request)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "body",
                                      "multipart body: no part named \"request\" (the JSON request, with at least \"code\")");
        r = hxs_request_from_json(u->json ? u->json : "", u->json_len, u->cfg, &req, err);
        free(u->json); /* the upload lives as long as the request: keep only its files */
        u->json = NULL;
        u->json_len = u->json_cap = 0;
        if (r < 0)
                return r;
        for (size_t i = 0; i < u->n_files; i++) {
                r = hxs_request_add_file_fd(req, u->files[i].path, u->files[i].fd, u->files[i].size);
                if (r < 0) {
                        hxs_request_free(req);
                        return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory while adding files");
                }
        }
        /* the files' own rules (paths, collisions with the JSON part's files, limits) */
        r = hxs_request_validate(req, u->cfg, err);
        if (r < 0) {
                hxs_request_free(req);
                return r;
        }
        *ret = req;
        return 0;
}
