/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=: the install step of an execution. When a request names packages the
 * image lacks and a wheelhouse is configured, the execution first looks its
 * requirements up in the package cache (pkgcache.h). On a miss it runs the installer
 * (pkg-install.py) in a sandbox of its own, with the request's memory limit and
 * timeout, the wheelhouse read-only and an empty cache directory writable; that
 * sandbox's epoll fd sits inside the execution's, so the service's loop never waits
 * for it. When it ends, the set is committed to the cache and the program starts with
 * whatever time is left, the set bound read-only at /opt/packages. The installer's
 * output never reaches the program's stdout: it becomes an error message or nothing.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/exec.h"

extern const char hxs_pkg_install_py[];

#define TAG_INSTALLER 100
#define INSTALL_MAX_FILES 200000

static int installer_request(const hxs_exec *x, hxs_request **ret)
{
        const hxs_engine *e = x->engine;
        hxs_request *r = hxs_request_new();
        if (!r)
                return -ENOMEM;
        json_t *in = json_object(), *reqs = json_array();
        for (size_t i = 0; in && reqs && i < x->req->n_packages; i++)
                json_array_append_new(reqs, json_string(x->req->packages[i]));
        json_object_set_new(in, "requirements", reqs);
        json_object_set_new(in, "max_bytes", json_integer((json_int_t)e->pkgcache.limit_bytes));
        json_object_set_new(in, "max_files", json_integer(INSTALL_MAX_FILES));
        char *text = in ? json_dumps(in, JSON_COMPACT) : NULL;
        json_decref(in);
        int q = text ? 0 : -ENOMEM;
        if (q == 0)
                q = hxs_request_set_code(r, hxs_pkg_install_py, strlen(hxs_pkg_install_py));
        if (q == 0)
                q = hxs_request_set_stdin(r, text, strlen(text));
        free(text);
        if (q < 0) {
                hxs_request_free(r);
                return q;
        }
        r->language = HXS_LANG_PYTHON;
        r->timeout_s = x->req->timeout_s;
        r->memory_mb = x->req->memory_mb;
        *ret = r;
        return 0;
}

int pkg_prepare(hxs_engine *e, hxs_exec *x, hxs_error *err)
{
        pkgcache *c = &e->pkgcache;
        if (x->req->language != HXS_LANG_PYTHON)
                return hxs_fail_field(err, HXS_ERR_INVALID, -EINVAL, "packages",
                                      "packages: only python executions can ask for packages");
        int r = pkgcache_request_key(c, x->req, x->request_key, err);
        if (r < 0)
                return r;
        if (pkgcache_lookup(c, x->request_key, &x->pkg) == 1) {
                snprintf(x->pkgs_dir, sizeof(x->pkgs_dir), "%s", x->pkg.path);
                x->packages = HXS_PACKAGES_CACHED;
                return 0;
        }
        r = pkgcache_stage(c, x->stage, err);
        if (r < 0)
                return r;
        hxs_request *ireq;
        r = installer_request(x, &ireq);
        if (r < 0)
                return hxs_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        hxs_exec *ix;
        r = exec_new(e, ireq, &ix, err);
        if (r < 0)
                return r;
        snprintf(ix->wheelhouse_dir, sizeof(ix->wheelhouse_dir), "%s", c->wheelhouse);
        snprintf(ix->target_dir, sizeof(ix->target_dir), "%s", x->stage);
        ix->started = x->started;
        r = e->ops->start(e, ix, err);
        if (r < 0) {
                hxs_wrap(err, r, "packages: starting the installer");
                hxs_exec_free(ix);
                return r;
        }
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_INSTALLER };
        if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, ix->epfd, &ev) < 0) {
                r = hxs_fail(err, HXS_ERR_SETUP, -errno, "epoll: %s", strerror(errno));
                hxs_exec_free(ix);
                return r;
        }
        x->installer = ix;
        x->packages = HXS_PACKAGES_INSTALLED;
        return 0;
}

static void drop_installer(hxs_exec *x)
{
        if (!x->installer)
                return;
        (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, x->installer->epfd, NULL);
        hxs_exec_free(x->installer);
        x->installer = NULL;
}

void pkg_abandon(hxs_exec *x)
{
        drop_installer(x);
        if (x->stage[0]) {
                pkgcache_discard(&x->engine->pkgcache, x->stage);
                x->stage[0] = '\0';
        }
}

static void end_with_error(hxs_exec *x, const hxs_error *err)
{
        x->setup_failed = true;
        x->setup_error = *err;
        x->done = true;
}

/* The install ended the execution without running the program (time, memory, kill):
 * a result like the program's own would be, with the reason on stderr. */
static void end_with_result(hxs_exec *x, int status, bool have_status, bool timed_out, bool oom, const char *why)
{
        hxs_result *res = &x->result;
        hxs_result_set_status(res, status, have_status, timed_out, oom);
        res->execution_time_ms = hxs_exec_elapsed_ms(x);
        res->stdout_data = calloc(1, 1);
        res->stderr_data = strdup(why);
        res->stderr_len = res->stderr_data ? strlen(why) : 0;
        res->packages = x->packages;
        x->done = true;
}

/* The installer's last stdout line, as JSON. */
static json_t *installer_report(const hxs_result *res)
{
        if (!res->stdout_data || res->stdout_len == 0)
                return NULL;
        const char *end = res->stdout_data + res->stdout_len;
        while (end > res->stdout_data && end[-1] == '\n')
                end--;
        const char *line = end;
        while (line > res->stdout_data && line[-1] != '\n')
                line--;
        return json_loadb(line, (size_t)(end - line), JSON_REJECT_DUPLICATES, NULL);
}

/* stderr's last line, for a message. */
static const char *last_line(const hxs_result *res, int *len)
{
        const char *s = res->stderr_data ? res->stderr_data : "";
        const char *end = s + res->stderr_len;
        while (end > s && end[-1] == '\n')
                end--;
        const char *line = end;
        while (line > s && line[-1] != '\n')
                line--;
        *len = (int)(end - line) > 200 ? 200 : (int)(end - line);
        return line;
}

static void installed(hxs_exec *x, const hxs_result *res)
{
        hxs_engine *e = x->engine;
        hxs_error err = { 0 };
        json_t *rep = installer_report(res);
        json_t *wheels = json_object_get(rep, "wheels");
        size_t n = json_array_size(wheels);
        char **names = calloc(n + 1, sizeof(char *));
        if (!json_is_array(wheels) || !names) {
                int len;
                const char *l = last_line(res, &len);
                hxs_fail_field(&err, HXS_ERR_SETUP, -EIO, "packages",
                               "packages: the installer gave no list of wheels (%.*s)", len, l);
                goto fail;
        }
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(wheels, i));
                if (!s) {
                        hxs_fail_field(&err, HXS_ERR_SETUP, -EIO, "packages", "packages: the installer's list of wheels is malformed");
                        goto fail;
                }
                names[i] = (char *)s;
        }
        int r = pkgcache_commit(&e->pkgcache, x->stage, x->request_key, names, n, &x->pkg, &err);
        x->stage[0] = '\0'; /* committed or removed */
        if (r < 0)
                goto fail;
        snprintf(x->pkgs_dir, sizeof(x->pkgs_dir), "%s", x->pkg.path);
        free(names);
        json_decref(rep);

        uint64_t used = hxs_exec_elapsed_ms(x), limit = (uint64_t)x->req->timeout_s * 1000;
        if (used >= limit) {
                end_with_result(x, 0, false, true, false,
                                "hexr-sandbox: installing packages used the whole timeout\n");
                return;
        }
        x->budget_ms = limit - used;
        r = e->ops->start(e, x, &err);
        if (r < 0)
                end_with_error(x, &err);
        return;
fail:
        free(names);
        json_decref(rep);
        pkg_abandon(x);
        end_with_error(x, &err);
}

int pkg_install_step(hxs_exec *x)
{
        hxs_exec *ix = x->installer;
        /* x->epfd holds only the installer's epoll fd (level-triggered): its own
         * processing consumes the events */
        hxs_exec_process(ix);
        if (!hxs_exec_done(ix))
                return 0;
        hxs_result res = { 0 };
        hxs_error err = { 0 };
        int r = hxs_exec_take_result(ix, &res, &err);
        drop_installer(x);
        if (r < 0) {
                hxs_wrap(&err, r, "packages: the installer's sandbox");
                pkg_abandon(x);
                end_with_error(x, &err);
                return 0;
        }
        if (x->killed) {
                pkg_abandon(x);
                end_with_result(x, SIGKILL, true, false, false, "");
        } else if (res.timed_out) {
                pkg_abandon(x);
                end_with_result(x, 0, false, true, false,
                                "hexr-sandbox: installing packages used the whole timeout\n");
        } else if (res.oom_killed) {
                pkg_abandon(x);
                end_with_result(x, SIGKILL, true, false, true,
                                "hexr-sandbox: installing packages ran out of memory (memory_mb)\n");
        } else if (res.exit_code == 3) {
                /* the installer refused: a package not found, or one it cannot install */
                json_t *rep = installer_report(&res);
                const char *msg = json_string_value(json_object_get(rep, "message"));
                /* not found, or a wheel it will not install: either way a 422 naming it */
                hxs_fail_field(&err, HXS_ERR_NOT_FOUND, -ENOENT, "packages", "packages: %.300s",
                               msg ? msg : "the installer refused them");
                json_decref(rep);
                pkg_abandon(x);
                end_with_error(x, &err);
        } else if (res.exit_code != 0) {
                int len;
                const char *l = last_line(&res, &len);
                hxs_fail_field(&err, HXS_ERR_SETUP, -EIO, "packages",
                               "packages: the installer failed with exit code %d: %.*s", res.exit_code, len, l);
                pkg_abandon(x);
                end_with_error(x, &err);
        } else {
                installed(x, &res);
        }
        hxs_result_clear(&res);
        return 0;
}
