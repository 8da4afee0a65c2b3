/* SPDX-License-Identifier: Apache-2.0 */
/* The engine: picks a backend, owns host-wide state, runs executions through it. */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dircheck.h"
#include "core/error.h"
#include "core/uids.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "engine/runtime-info.h"

#ifndef HXS_VERSION
#define HXS_VERSION "0.0.0"
#endif

const char *hxs_version(void)
{
        return HXS_VERSION;
}

/* Everything a half-built engine holds goes; NULL is fine. */
static void engine_free(hxs_engine *e)
{
        if (!e)
                return;
        cg_graveyard_bury(&e->graveyard, true);
        if (e->ops)
                e->ops->fini(e->state);
        /* and what the backend's own end left there (its pre-started sandboxes) */
        cg_graveyard_bury(&e->graveyard, true);
        pkgcache_fini(&e->pkgcache);
        pkg_index_free(&e->pkgs);
        free(e);
}

static void engine_freep(hxs_engine **e) { engine_free(*e); }

/* The host uids every backend runs things as must be nobody else's; what the engine
 * keeps in STATE_DIR (the templates' module, the roots' mount point) must be
 * changeable by root only: from now on its resolved path is used. */
static int claim_host(hxs_engine *e, hxs_error *err)
{
        uid_range ranges[HOST_UID_RANGES];
        int r = uid_ranges_check(ranges, host_uid_ranges(&e->cfg, ranges), NULL, err);
        if (r < 0)
                return r;
        if (mkdir(e->cfg.state_dir, 0711) < 0 && errno != EEXIST)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "STATE_DIR", "STATE_DIR: %s: %s",
                                      e->cfg.state_dir, strerror(errno));
        char resolved[sizeof(e->cfg.state_dir)];
        r = dir_check_private(e->cfg.state_dir, "STATE_DIR", resolved, sizeof(resolved), err);
        if (r < 0)
                return r;
        memcpy(e->cfg.state_dir, resolved, sizeof(resolved));
        return 0;
}

int hxs_engine_new(const hxs_config *cfg, hxs_engine **ret, hxs_error *err)
{
        _cleanup_(engine_freep) hxs_engine *e = calloc(1, sizeof(*e));
        if (!e)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        e->cfg = *cfg;
        e->pkgcache = (pkgcache)PKGCACHE_INIT; /* engine_free may meet it before its init */
        int r = claim_host(e, err);
        if (r < 0)
                return r;
        const backend_entry *b = backend_pick(&e->cfg, e->backend_note, sizeof(e->backend_note));
        /* cgroups are host-wide: one layout, whichever backend; leftovers of dead
         * engines go now */
        r = cg_layout_init(&e->cg, err);
        if (r < 0)
                return r;
        (void)cg_sweep(&e->cg);
        e->kind = b->kind;
        e->env = (backend_env){ .cfg = &e->cfg, .kind = b->kind, .cg = &e->cg, .graveyard = &e->graveyard,
                                .runtimes = &e->runtimes };
        e->ops = b->ops;
        r = e->ops->init(&e->env, &e->state, err);
        if (r < 0)
                return r;
        r = runtime_manifest_parse(embed_runtimes_txt, &e->runtimes, err);
        if (r < 0)
                return r;
        e->runtimes_once = (pthread_once_t)PTHREAD_ONCE_INIT;
        r = pkg_index_load(&e->pkgs, cfg->rootfs);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        r = pkgcache_init(&e->pkgcache, cfg, &e->pkgs, e->ops->features & BACKEND_INSTALLS_PACKAGES, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(e);
        return 0;
}

void hxs_engine_free(hxs_engine *e)
{
        engine_free(e);
}

const hxs_config *hxs_engine_config(const hxs_engine *e) { return &e->cfg; }
const char *hxs_engine_backend_name(const hxs_engine *e) { return e->ops->name; }

void hxs_engine_stats_get(hxs_engine *e, hxs_engine_stats *ret)
{
        memset(ret, 0, sizeof(*ret));
        e->ops->stats(e->state, ret);
}

bool hxs_engine_background(hxs_engine *e)
{
        return e->ops->background ? e->ops->background(e->state) : false;
}

void hxs_engine_memory_room(hxs_engine *e, uint64_t mb)
{
        if (e->ops->memory_room)
                e->ops->memory_room(e->state, mb);
}

int hxs_engine_check(hxs_engine *e, hxs_error *err)
{
        runtime_info_versions_once(e); /* the check refreshes them */
        return e->ops->check(e->state, err);
}

/* ---- executions: the packages= step first, when there is one, then the backend (exec.c) */

static void exec_freep(hxs_exec **x) { hxs_exec_free(*x); }

int hxs_exec_start(hxs_engine *e, const hxs_request *req, hxs_exec **ret, hxs_error *err)
{
        hxs_request *copy;
        int r = request_dup(req, &copy);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        r = hxs_request_validate(copy, &e->cfg, err);
        if (r < 0) {
                hxs_request_free(copy);
                return r;
        }
        if (!(e->ops->features & BACKEND_FILES) && (copy->n_files > 0 || copy->n_globs > 0)) {
                /* a backend that cannot move files must say so, never drop them */
                hxs_request_free(copy);
                return err_fail_field(err, HXS_ERR_INVALID, -EOPNOTSUPP, "files",
                                      "files: the %s backend does not take files in or return them yet "
                                      "(files and return_files need the namespaces backend)", e->ops->name);
        }
        if (copy->interactive && !(e->ops->features & BACKEND_INTERACTIVE)) {
                hxs_request_free(copy);
                return err_fail(err, HXS_ERR_INVALID, -EOPNOTSUPP,
                                "sessions: the %s backend cannot stream stdin into a running program yet "
                                "(sessions need the namespaces backend)", e->ops->name);
        }
        _cleanup_(exec_freep) hxs_exec *x = NULL;
        r = exec_new(e, copy, &x, err);
        if (r < 0)
                return r;
        clock_gettime(CLOCK_MONOTONIC, &x->started); /* an install counts against the timeout */
        r = pkg_step_begin(e, x, &x->pkg, err);
        if (r == 0 && !x->pkg) /* nothing to install first: the program starts now */
                r = exec_backend_start(x, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}

int hxs_exec_process(hxs_exec *x)
{
        if (x->done)
                return 0;
        if (x->pkg) {
                if (!pkg_step_advance(x->pkg)) {
                        pkg_step_free(x->pkg);
                        x->pkg = NULL;
                }
                return 0;
        }
        return exec_process(x);
}

void hxs_exec_kill(hxs_exec *x)
{
        if (x->done)
                return;
        if (x->pkg) {
                x->killed = true;
                pkg_step_kill(x->pkg);
        } else {
                exec_kill(x);
        }
}

void hxs_exec_free(hxs_exec *x)
{
        if (!x)
                return;
        pkg_step_free(x->pkg);
        x->pkg = NULL;
        exec_free(x);
}

int hxs_run(hxs_engine *e, const hxs_request *req, hxs_result *ret, hxs_error *err)
{
        _cleanup_(exec_freep) hxs_exec *x = NULL;
        int r = hxs_exec_start(e, req, &x, err);
        if (r < 0)
                return r;
        while (!hxs_exec_done(x)) {
                struct epoll_event ev;
                int n = epoll_wait(hxs_exec_fd(x), &ev, 1, -1);
                if (n < 0 && errno != EINTR)
                        return err_fail(err, HXS_ERR_INTERNAL, -errno, "epoll_wait: %s", strerror(errno));
                hxs_exec_process(x);
        }
        return hxs_exec_take_result(x, ret, err);
}
