/* SPDX-License-Identifier: Apache-2.0 */
/* One execution on the engine's backend: created, started, driven, killed, its result
 * taken and freed. It knows nothing of the packages= step: engine.c runs that step
 * first, and the step runs its installer as an execution of this file, so the two
 * never call each other. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/exec.h"

/* An execution of an owned request, not started yet. */
int exec_new(hxs_engine *e, hxs_request *req, hxs_exec **ret, hxs_error *err)
{
        hxs_exec *x = calloc(1, sizeof(*x));
        if (!x) {
                hxs_request_free(req);
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        }
        x->engine = e;
        x->req = req;
        x->pkgs = (pkg_use)PKG_USE_INIT;
        capbuf_init(&x->out, e->cfg.max_output_bytes);
        capbuf_init(&x->err, e->cfg.max_output_bytes);
        x->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (x->epfd < 0) {
                int r = err_fail(err, HXS_ERR_SETUP, -errno, "epoll_create1: %s", strerror(errno));
                exec_free(x);
                return r;
        }
        *ret = x;
        return 0;
}

int exec_backend_start(hxs_exec *x, hxs_error *err)
{
        hxs_engine *e = x->engine;
        x->priv = calloc(1, e->ops->exec_size ? e->ops->exec_size : 1);
        if (!x->priv)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        return e->ops->start(e->state, x, err);
}

int exec_process(hxs_exec *x)
{
        if (x->done)
                return 0;
        return x->engine->ops->process(x);
}

void exec_kill(hxs_exec *x)
{
        if (x->done)
                return;
        x->killed = true;
        x->engine->ops->kill(x);
}

int hxs_exec_fd(const hxs_exec *x) { return x->epfd; }
bool hxs_exec_done(const hxs_exec *x) { return x->done; }

uint64_t hxs_exec_elapsed_ms(const hxs_exec *x)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (uint64_t)((now.tv_sec - x->started.tv_sec) * 1000 +
                          (now.tv_nsec - x->started.tv_nsec) / 1000000);
}

int hxs_exec_take_result(hxs_exec *x, hxs_result *ret, hxs_error *err)
{
        if (!x->done)
                return -EAGAIN;
        if (x->setup_failed) {
                if (err)
                        *err = x->setup_error;
                /* the reason's own errno (a package not found, a wheelhouse not readable,
                 * an fd limit...); a set-up step that only reports text counts as I/O */
                return x->setup_error.errnum > 0 ? -x->setup_error.errnum : -EIO;
        }
        if (x->taken)
                return -EALREADY;
        *ret = x->result;
        memset(&x->result, 0, sizeof(x->result));
        x->taken = true;
        return 0;
}

void exec_free(hxs_exec *x)
{
        if (!x)
                return;
        if (x->priv)
                x->engine->ops->release(x);
        free(x->priv);
        pkg_use_release(&x->pkgs);
        if (x->epfd >= 0)
                close(x->epfd);
        capbuf_free(&x->out);
        capbuf_free(&x->err);
        free(x->stdin_q);
        hxs_result_clear(&x->result);
        hxs_request_free(x->req);
        free(x);
}

/* ---- interactive stdin: a queue here, drained by the backend -------------------------- */

/* The backend hears of new bytes only once it runs the program (x->priv set by
 * exec_backend_start; a packages= step may still be running). */
static void stdin_kick(hxs_exec *x)
{
        if (x->priv && !x->done && x->engine->ops->stdin_more)
                x->engine->ops->stdin_more(x);
}

int exec_stdin_write(hxs_exec *x, const void *data, size_t len)
{
        if (!x->req->interactive)
                return -EINVAL;
        if (x->stdin_gone || x->stdin_closing || x->done)
                return -EPIPE;
        if (len == 0)
                return 0;
        size_t live = x->stdin_q_len - x->stdin_q_off;
        if (len > EXEC_STDIN_QUEUE_MAX - live)
                return -ENOBUFS;
        if (x->stdin_q_off > 0) { /* what was written goes first */
                memmove(x->stdin_q, x->stdin_q + x->stdin_q_off, live);
                x->stdin_q_len = live;
                x->stdin_q_off = 0;
        }
        if (live + len > x->stdin_q_cap) {
                size_t cap = x->stdin_q_cap ? x->stdin_q_cap : 4096;
                while (cap < live + len)
                        cap *= 2;
                char *q = realloc(x->stdin_q, cap);
                if (!q)
                        return -ENOMEM;
                x->stdin_q = q;
                x->stdin_q_cap = cap;
        }
        memcpy(x->stdin_q + x->stdin_q_len, data, len);
        x->stdin_q_len += len;
        stdin_kick(x);
        return 0;
}

void exec_stdin_close(hxs_exec *x)
{
        if (!x->req->interactive || x->stdin_closing || x->stdin_gone)
                return;
        x->stdin_closing = true;
        stdin_kick(x);
}

size_t exec_stdin_pending(const hxs_exec *x, const char **ret_data)
{
        *ret_data = x->stdin_q + x->stdin_q_off;
        return x->stdin_q_len - x->stdin_q_off;
}

void exec_stdin_consumed(hxs_exec *x, size_t n)
{
        x->stdin_q_off += n;
        if (x->stdin_q_off >= x->stdin_q_len)
                x->stdin_q_off = x->stdin_q_len = 0;
}

void exec_stdin_gone(hxs_exec *x)
{
        x->stdin_gone = true;
        free(x->stdin_q);
        x->stdin_q = NULL;
        x->stdin_q_len = x->stdin_q_off = x->stdin_q_cap = 0;
}
