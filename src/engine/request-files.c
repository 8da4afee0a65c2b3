/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request's files: those it sends into the working directory (bytes, or an fd of the
 * caller's such as a multipart staging file), the globs of those it wants back, and the
 * one path rule both obey. Errors name the field ("files[3].path") and the path.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/array.h"
#include "core/error.h"
#include "engine/request.h"

int request_path_normalize(const char *in, char *out, size_t out_size, const char **why)
{
        size_t o = 0;
        if (!in[0]) {
                *why = "is empty";
                return -EINVAL;
        }
        if (in[0] == '/') {
                *why = "must be relative to the working directory";
                return -EINVAL;
        }
        for (const unsigned char *c = (const unsigned char *)in; *c; c++)
                if (*c < 0x20 || *c == 0x7f) {
                        *why = "contains a control character";
                        return -EINVAL;
                }
        for (const char *p = in; *p;) {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.') {
                        *why = "must not contain ..";
                        return -EINVAL;
                }
                if (n > 0 && !(n == 1 && p[0] == '.')) {
                        if (o + (o > 0) + n > REQUEST_PATH_MAX || o + (o > 0) + n >= out_size) {
                                *why = "is longer than 255 bytes";
                                return -EINVAL;
                        }
                        if (o > 0)
                                out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p += n;
                while (*p == '/')
                        p++;
        }
        if (o == 0) {
                *why = "names no file";
                return -EINVAL;
        }
        out[o] = '\0';
        return 0;
}

static int add_file(hxs_request *req, const char *path, const void *data, size_t len, int fd, uint64_t size)
{
        int r = array_grow((void **)&req->files, &req->cap_files, req->n_files, sizeof(*req->files));
        if (r < 0)
                return r;
        request_file f = { .path = strdup(path), .fd = -1, .len = len, .size = size };
        if (!f.path)
                return -ENOMEM;
        if (fd >= 0 && (f.fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
                r = -errno;
                free(f.path);
                return r;
        }
        if (fd < 0 && (f.data = malloc(len ? len : 1)) == NULL) {
                free(f.path);
                return -ENOMEM;
        }
        if (fd < 0 && len)
                memcpy(f.data, data, len);
        req->files[req->n_files++] = f;
        return 0;
}

int hxs_request_add_file(hxs_request *req, const char *path, const void *data, size_t len)
{
        return add_file(req, path, data, len, -1, len);
}

int hxs_request_add_file_fd(hxs_request *req, const char *path, int fd, uint64_t size)
{
        if (fd < 0)
                return -EBADF;
        return add_file(req, path, NULL, 0, fd, size);
}

int hxs_request_add_return_glob(hxs_request *req, const char *glob)
{
        int r = array_grow((void **)&req->return_globs, &req->cap_globs, req->n_globs,
                             sizeof(*req->return_globs));
        if (r < 0)
                return r;
        char *g = strdup(glob);
        if (!g)
                return -ENOMEM;
        req->return_globs[req->n_globs++] = g;
        return 0;
}

void request_files_free(hxs_request *req)
{
        for (size_t i = 0; i < req->n_files; i++) {
                free(req->files[i].path);
                free(req->files[i].data);
                if (req->files[i].fd >= 0)
                        close(req->files[i].fd);
        }
        free(req->files);
        req->files = NULL;
        req->n_files = req->cap_files = 0;
        for (size_t i = 0; i < req->n_globs; i++)
                free(req->return_globs[i]);
        free(req->return_globs);
        req->return_globs = NULL;
        req->n_globs = req->cap_globs = 0;
}

int request_files_dup(const hxs_request *src, hxs_request *dst)
{
        for (size_t i = 0; i < src->n_files; i++) {
                const request_file *f = &src->files[i];
                int r = add_file(dst, f->path, f->data, f->len, f->fd, f->size);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < src->n_globs; i++) {
                int r = hxs_request_add_return_glob(dst, src->return_globs[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

uint64_t request_files_bytes(const hxs_request *req)
{
        uint64_t n = 0;
        for (size_t i = 0; i < req->n_files; i++)
                n += req->files[i].size;
        return n;
}

static int cmp_paths(const void *a, const void *b)
{
        const request_file *const *x = a, *const *y = b;
        return strcmp((*x)->path, (*y)->path);
}

static int path_index(const hxs_request *req, const request_file *f)
{
        return (int)(f - req->files);
}

/* Two files on one path, or a file where another needs a directory ("a" and "a/b"). */
static int check_collisions(hxs_request *req, hxs_error *err)
{
        if (req->n_files < 2)
                return 0;
        request_file **sorted = malloc(req->n_files * sizeof(*sorted));
        if (!sorted)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        for (size_t i = 0; i < req->n_files; i++)
                sorted[i] = &req->files[i];
        qsort(sorted, req->n_files, sizeof(*sorted), cmp_paths);
        int r = 0;
        for (size_t i = 0; i < req->n_files && r == 0; i++) {
                request_file *f = sorted[i];
                char field[48];
                snprintf(field, sizeof(field), "files[%d].path", path_index(req, f));
                if (i > 0 && strcmp(sorted[i - 1]->path, f->path) == 0) {
                        r = err_fail_subject(err, HXS_ERR_INVALID, -EINVAL, field, f->path,
                                             "%s: \"%.200s\" is sent twice", field, f->path);
                        break;
                }
                /* each directory on its way must not be a file sent too */
                char prefix[REQUEST_PATH_MAX + 1];
                for (const char *s = strchr(f->path, '/'); s && r == 0; s = strchr(s + 1, '/')) {
                        size_t n = (size_t)(s - f->path);
                        memcpy(prefix, f->path, n);
                        prefix[n] = '\0';
                        request_file key = { .path = prefix }, *kp = &key;
                        if (bsearch(&kp, sorted, req->n_files, sizeof(*sorted), cmp_paths))
                                r = err_fail_subject(err, HXS_ERR_INVALID, -EINVAL, field, f->path,
                                                     "%s: \"%.200s\" needs the directory \"%s\", which is sent as a file",
                                                     field, f->path, prefix);
                }
        }
        free(sorted);
        return r;
}

static int validate_globs(hxs_request *req, hxs_error *err)
{
        if (req->n_globs > REQUEST_GLOBS_MAX)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "return_files",
                                      "return_files: %zu patterns exceeds the maximum %d", req->n_globs,
                                      REQUEST_GLOBS_MAX);
        for (size_t i = 0; i < req->n_globs; i++) {
                char field[48], norm[REQUEST_PATH_MAX + 1];
                const char *why;
                snprintf(field, sizeof(field), "return_files[%zu]", i);
                if (request_path_normalize(req->return_globs[i], norm, sizeof(norm), &why) < 0)
                        return err_fail_subject(err, HXS_ERR_INVALID, -EINVAL, field, req->return_globs[i],
                                                "%s: \"%.200s\" %s", field, req->return_globs[i], why);
                char *copy = strdup(norm);
                if (!copy)
                        return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
                free(req->return_globs[i]);
                req->return_globs[i] = copy;
        }
        return 0;
}

int request_files_validate(hxs_request *req, const hxs_config *cfg, hxs_error *err)
{
        if (req->n_files > cfg->max_files)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "files",
                                      "files: %zu files exceeds the maximum %" PRIu32 " (MAX_FILES)", req->n_files,
                                      cfg->max_files);
        uint64_t total = 0;
        for (size_t i = 0; i < req->n_files; i++) {
                request_file *f = &req->files[i];
                char field[48], norm[REQUEST_PATH_MAX + 1];
                const char *why;
                snprintf(field, sizeof(field), "files[%zu].path", i);
                if (request_path_normalize(f->path, norm, sizeof(norm), &why) < 0)
                        return err_fail_subject(err, HXS_ERR_INVALID, -EINVAL, field, f->path,
                                                "%s: \"%.200s\" %s", field, f->path, why);
                if (strcmp(norm, f->path) != 0) {
                        char *copy = strdup(norm);
                        if (!copy)
                                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
                        free(f->path);
                        f->path = copy;
                }
                if (f->size > cfg->max_file_bytes)
                        return err_fail_subject(err, HXS_ERR_INVALID, -E2BIG, field, f->path,
                                                "%s: \"%.200s\" is %" PRIu64 " bytes, over the maximum %" PRIu32
                                                " (MAX_FILE_BYTES)", field, f->path, f->size, cfg->max_file_bytes);
                total += f->size;
        }
        if (total > cfg->max_files_bytes)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "files",
                                      "files: %" PRIu64 " bytes in all exceeds the maximum %" PRIu32 " (MAX_FILES_BYTES)",
                                      total, cfg->max_files_bytes);
        if (total > (uint64_t)cfg->tmpfs_mb << 20)
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "files",
                                      "files: %" PRIu64 " bytes in all do not fit the working directory of %" PRIu32
                                      " MB (SANDBOX_TMPFS_MB)", total, cfg->tmpfs_mb);
        int r = check_collisions(req, err);
        if (r < 0)
                return r;
        return validate_globs(req, err);
}
