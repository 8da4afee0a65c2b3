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
        hxs_result_clear(&x->result);
        hxs_request_free(x->req);
        free(x);
}
