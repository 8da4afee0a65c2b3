/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The files of one execution inside the VM. In: FILE and FILE_DATA frames become the
 * namespace backend's own bundle (ns-files.h), which the sandbox's set-up writes into
 * the working directory as on the host; the host's checks are made again here (the
 * path rule of request-files.c, the counts and bytes RUN announced), since a host
 * that breaks them is broken. Out: once the program has ended, with the sandbox's
 * PID 1 still holding its working directory, files-out.c collects exactly what the
 * namespace backend would, and the frames go out as the channel takes them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/macro.h"
#include "engine/files-out.h"
#include "engine/request.h"
#include "guest/agent.h"
#include "ns/ns-files.h"
#include "ns/ns-spawn.h"

#define FILE_CHUNK (64u << 10)  /* bytes of a file per FILE_DATA frame */

/* ---- in --------------------------------------------------------------------------- */

void files_in_reset(agent_files_in *in)
{
        close_fd(&in->fd);
        *in = (agent_files_in){ .fd = -1 };
}

const char *files_in_check_run(const hxp_run *run)
{
        if (run->files > AGENT_FILES_MAX)
                return "RUN: more files than the agent takes";
        /* they are written into the home tmpfs, which holds no more */
        if (run->files_bytes > (uint64_t)run->tmpfs_mb << 20)
                return "RUN: the files are larger than the working directory";
        if (run->files == 0 && run->files_bytes > 0)
                return "RUN: files_bytes without files";
        return NULL;
}

const char *files_in_file(agent_files_in *in, const hxp_run *run, const hxp_frame *f)
{
        hxp_file h;
        char path[HXP_PATH_MAX + 1], norm[REQUEST_PATH_MAX + 1];
        const char *why;
        if (in->left > 0)
                return "FILE: the previous file is not complete";
        if (in->begun >= run->files)
                return "FILE: more files than RUN announced";
        if (hxp_file_decode(f->payload, f->len, &h) < 0)
                return "FILE: malformed";
        memcpy(path, h.path, h.path_len);
        path[h.path_len] = '\0';
        if (request_path_normalize(path, norm, sizeof(norm), &why) < 0 || strcmp(norm, path) != 0)
                return "FILE: a path the host must have refused";
        if (h.size > run->files_bytes - in->bytes)
                return "FILE: more bytes than RUN announced";
        if (in->fd < 0 && (in->fd = ns_files_new()) < 0)
                return "FILE: no memory for the files";
        if (ns_files_add(in->fd, path, h.size) < 0)
                return "FILE: no memory for the files";
        in->begun++;
        in->bytes += h.size;
        in->left = h.size;
        return NULL;
}

const char *files_in_data(agent_files_in *in, const hxp_frame *f)
{
        if (f->len > in->left)
                return "FILE_DATA: more bytes than the file's size";
        if (f->len > 0 && ns_files_append(in->fd, f->payload, f->len) < 0)
                return "FILE_DATA: no memory for the files";
        in->left -= f->len;
        return NULL;
}

const char *files_in_done(agent_files_in *in, const hxp_run *run)
{
        if (in->begun != run->files || in->left > 0 || in->bytes != run->files_bytes)
                return "START before all of the files arrived";
        if (in->fd >= 0 && ns_files_seal(in->fd) < 0)
                return "sealing the files";
        return NULL;
}

/* ---- out -------------------------------------------------------------------------- */

void files_out_take(agent_files_out *out, pid_t pid1, const hxp_run *run)
{
        char *globs[HXP_GLOBS_MAX];
        if (out->taken)
                return;
        out->taken = true;
        /* files-out.c asks a request and a configuration: the two budgets and the globs
         * of RUN, as the host resolved them */
        hxs_request req = { .return_globs = globs };
        for (size_t i = 0; i < run->n_globs; i++)
                if ((globs[req.n_globs] = strndup((const char *)run->glob[i], run->glob_len[i])))
                        req.n_globs++;
        hxs_config cfg = { .max_return_files = run->return_files,
                           .max_return_bytes = run->return_bytes > UINT32_MAX ? UINT32_MAX
                                                                              : (uint32_t)run->return_bytes };
        int home = cfg.max_return_files ? ns_home_open(pid1) : -1;
        if (home >= 0) {
                if (files_collect(home, &req, &cfg, &out->res) < 0)
                        agent_log("out of memory collecting the files out: some are left out");
                close(home);
        }
        for (size_t i = 0; i < req.n_globs; i++)
                free(globs[i]);
}

bool files_out_send(agent_files_out *out)
{
        while (out->next < out->res.n_files) {
                const hxs_file *f = &out->res.files[out->next];
                if (!out->begun) {
                        uint8_t buf[HXP_PATH_MAX + 64];
                        hxp_builder b;
                        hxp_builder_init(&b, buf, sizeof(buf));
                        hxp_put_bytes(&b, HXP_FILE_PATH, f->path, strlen(f->path));
                        hxp_put_u64(&b, HXP_FILE_SIZE, f->size);
                        hxp_put_u32(&b, HXP_FILE_TRUNCATED, f->truncated);
                        hxp_put_u64(&b, HXP_FILE_LEN, f->len);
                        if (b.overflow) { /* cannot happen: files-out.c keeps paths short */
                                out->next++;
                                continue;
                        }
                        if (agent_send(HXP_FILE_OUT, buf, b.len) < 0)
                                return false;
                        out->begun = true;
                        out->off = 0;
                }
                while (out->off < f->len) {
                        size_t n = f->len - out->off < FILE_CHUNK ? f->len - out->off : FILE_CHUNK;
                        if (agent_send(HXP_FILE_DATA, f->data + out->off, n) < 0)
                                return false;
                        out->off += n;
                }
                /* sent: its bytes are not needed any more */
                free(f->data);
                out->res.files[out->next].data = NULL;
                out->begun = false;
                out->next++;
        }
        return true;
}
