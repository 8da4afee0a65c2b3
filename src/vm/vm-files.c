/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The files of one execution across the VM's channel (vm.h): the request's files in,
 * one frame at a time as the channel takes them (a staged upload is read from its fd
 * frame by frame, never held whole), and the guest's files out into the result.
 *
 * The guest is hostile: every FILE_OUT is checked again against what the namespace
 * backend's files-out.c would have returned (a normalised path under output/ or
 * matching a return glob, in path order, each once, within MAX_RETURN_FILES and
 * MAX_RETURN_BYTES, no more bytes than announced). A frame that breaks a rule ends the
 * execution as a malformed frame does; nothing is allocated past the budgets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/files-out.h"
#include "engine/request.h"
#include "vm/vm.h"

/* ---- in ------------------------------------------------------------------------- */

static size_t put_frame(uint8_t *buf, hxp_type type, const void *p, size_t n)
{
        (void)hxp_header(buf, type, n); /* n <= HXP_PAYLOAD_MAX: cannot fail */
        if (n)
                memcpy(buf + HXP_HEADER_SIZE, p, n);
        return HXP_HEADER_SIZE + n;
}

/* The bytes of a staged file at off, straight into the frame's payload. */
static long read_chunk(const request_file *f, uint64_t off, uint8_t *payload, size_t n)
{
        if (f->fd < 0) {
                memcpy(payload, f->data + off, n);
                return (long)n;
        }
        size_t got = 0;
        while (got < n) {
                ssize_t r = pread(f->fd, payload + got, n - got, (off_t)(off + got));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : -EIO; /* shorter than it said */
                got += (size_t)r;
        }
        return (long)n;
}

long vm_files_next_frame(vm_files_tx *t, const hxs_request *req, uint8_t *buf)
{
        if (t->done)
                return 0;
        if (t->next >= req->n_files) {
                t->done = true;
                return (long)put_frame(buf, HXP_START, NULL, 0);
        }
        const request_file *f = &req->files[t->next];
        if (!t->begun) {
                hxp_builder b;
                hxp_builder_init(&b, buf + HXP_HEADER_SIZE, HXP_PAYLOAD_MAX);
                hxp_put_bytes(&b, HXP_FILE_PATH, f->path, strlen(f->path));
                hxp_put_u64(&b, HXP_FILE_SIZE, f->size);
                (void)hxp_header(buf, HXP_FILE, b.len);
                t->begun = true;
                t->off = 0;
                return (long)(HXP_HEADER_SIZE + b.len);
        }
        uint64_t left = f->size - t->off;
        size_t n = left < HXP_PAYLOAD_MAX ? (size_t)left : HXP_PAYLOAD_MAX;
        long r = n ? read_chunk(f, t->off, buf + HXP_HEADER_SIZE, n) : 0;
        if (r < 0)
                return r;
        t->off += n;
        if (t->off == f->size) {
                t->next++;
                t->begun = false;
        }
        if (n == 0) /* an empty file: its FILE frame was all of it */
                return vm_files_next_frame(t, req, buf);
        (void)hxp_header(buf, HXP_FILE_DATA, n);
        return (long)(HXP_HEADER_SIZE + n);
}

/* ---- out ------------------------------------------------------------------------ */

static bool wanted(const hxs_request *req, const char *path)
{
        if (strncmp(path, "output/", 7) == 0)
                return true;
        for (size_t i = 0; i < req->n_globs; i++)
                if (files_glob_match(req->return_globs[i], path))
                        return true;
        return false;
}

static int begin_file(vm_files_rx *rx, const hxp_frame *f, const hxs_request *req, const hxs_config *cfg,
                      hxs_result *res)
{
        hxp_file h;
        char path[HXP_PATH_MAX + 1], norm[REQUEST_PATH_MAX + 1];
        const char *why;
        if (rx->left > 0 || hxp_file_decode(f->payload, f->len, &h) < 0)
                return -EBADMSG;
        memcpy(path, h.path, h.path_len);
        path[h.path_len] = '\0';
        if (request_path_normalize(path, norm, sizeof(norm), &why) < 0 || strcmp(norm, path) != 0 ||
            !wanted(req, path))
                return -EBADMSG;
        /* in path order, each once: what files-out.c sends */
        if (res->n_files > 0 && strcmp(res->files[res->n_files - 1].path, path) >= 0)
                return -EBADMSG;
        if (res->n_files >= cfg->max_return_files || h.len > (uint64_t)cfg->max_return_bytes - rx->bytes)
                return -EBADMSG;
        hxs_file *files = realloc(res->files, (res->n_files + 1) * sizeof(*files));
        if (!files)
                return -ENOMEM;
        res->files = files;
        hxs_file *out = &files[res->n_files];
        *out = (hxs_file){ .size = h.size, .truncated = h.truncated != 0, .mime = files_mime(path) };
        out->path = strdup(path);
        out->data = h.len ? malloc((size_t)h.len) : NULL;
        if (!out->path || (h.len && !out->data)) {
                free(out->path);
                free(out->data);
                return -ENOMEM;
        }
        res->n_files++;
        rx->bytes += h.len;
        rx->left = h.len;
        return 0;
}

int vm_files_receive(vm_files_rx *rx, const hxp_frame *f, const hxs_request *req, const hxs_config *cfg,
                     hxs_result *res)
{
        if (f->type == HXP_FILE_OUT)
                return begin_file(rx, f, req, cfg, res);
        if (f->len > rx->left || res->n_files == 0)
                return -EBADMSG;
        if (f->len == 0)
                return 0;
        hxs_file *cur = &res->files[res->n_files - 1];
        memcpy(cur->data + cur->len, f->payload, f->len);
        cur->len += f->len;
        rx->left -= f->len;
        return 0;
}

void vm_files_end(vm_files_rx *rx, hxs_result *res)
{
        if (rx->left == 0 || res->n_files == 0)
                return;
        /* cut short (the agent gave up on a slow channel): not a file the program wrote */
        hxs_file *cur = &res->files[--res->n_files];
        free(cur->path);
        free(cur->data);
        *cur = (hxs_file){ 0 };
        rx->left = 0;
}
