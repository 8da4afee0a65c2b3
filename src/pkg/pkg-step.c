/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=: the install step of an execution. When a request names packages the
 * image lacks and a wheelhouse or an index is configured, the execution first looks its
 * requirements up in the package cache (pkgcache.h). On a miss with an index, a
 * downloader (pip, wheels only) runs on the host as an unprivileged user, its pidfd,
 * output and timer in the execution's epoll fd; what it downloads becomes the
 * installer's wheelhouse. Then (or at once, from the wheelhouse) it runs the installer
 * (pkg-install.py) in a sandbox of its own, with the request's memory limit and
 * timeout, the wheelhouse read-only and an empty cache directory writable; that
 * sandbox's epoll fd sits inside the execution's, so the service's loop never waits
 * for it. When it ends, the set is committed to the cache on one of the cache's
 * worker threads (hashing the wheels and measuring the set cost what the caller
 * chose; the loop only waits for the job's eventfd, also in the execution's epoll
 * fd), and the program starts with whatever time is left, the set bound read-only at
 * /opt/packages. The installer's output never reaches the program's stdout: it
 * becomes an error message or nothing.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <linux/sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/jail.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "pkg/pkg-step.h"

extern const char embed_pkg_install_py[];

/* One execution's install step: the installer's sandbox, or before it the downloader,
 * after it the commit. */
struct pkg_step {
        hxs_exec *x;                    /* the execution it readies */
        hxs_exec *installer;            /* the installer's sandbox, while it runs */
        char request_key[65];
        char stage[512];                /* the install's directory in the cache, until committed */
        /* from an index: the downloader (pip, on the host, unprivileged) */
        bool fetching, fetch_reaped, fetch_timed_out;
        pid_t fetch_pid;
        int fetch_pidfd, fetch_out_fd, fetch_timer_fd, fetch_status;
        capbuf fetch_log;
        char fetch_dir[512];            /* where it downloads, then the installer's wheelhouse */
        cg_exec fetch_cg;               /* its own cgroup (memory, pids) */
        bool have_fetch_cg;
        /* the install's commit, on a worker (pkgcache.h), and its timer */
        pkg_commit *commit;
        int commit_timer_fd;
};

#define TAG_INSTALLER 100
#define TAG_FETCH_OUT 101
#define TAG_FETCH_PID 102
#define TAG_FETCH_TIMER 103
#define TAG_COMMIT 104
#define TAG_COMMIT_TIMER 105
#define FETCH_PIDS_MAX 64

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
        json_object_set_new(in, "max_files", json_integer((json_int_t)e->pkgcache.limit_inodes));
        char *text = in ? json_dumps(in, JSON_COMPACT) : NULL;
        json_decref(in);
        int q = text ? 0 : -ENOMEM;
        if (q == 0)
                q = hxs_request_set_code(r, embed_pkg_install_py, strlen(embed_pkg_install_py));
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

static int start_installer(pkg_step *s, const char *wheel_dir, hxs_error *err);
static int start_fetch(pkg_step *s, hxs_error *err);

/* The install step of x, its fds -1. */
static pkg_step *step_new(hxs_exec *x, const char *request_key)
{
        pkg_step *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->x = x;
        s->fetch_pidfd = s->fetch_out_fd = s->fetch_timer_fd = s->commit_timer_fd = -1;
        capbuf_init(&s->fetch_log, 64 << 10);
        snprintf(s->request_key, sizeof(s->request_key), "%s", request_key);
        return s;
}

/* A cached set for x, or its install step started (*ret). */
static int prepare(hxs_engine *e, hxs_exec *x, pkg_step **ret, hxs_error *err)
{
        pkgcache *c = &e->pkgcache;
        if (x->req->language != HXS_LANG_PYTHON)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "packages",
                                      "packages: only python executions can ask for packages");
        /* one spelling for one meaning: the key, the installer and pip see the same */
        int r = pkg_canonicalize(x->req);
        if (r < 0)
                return err_fail_field(err, r == -ENOMEM ? HXS_ERR_INTERNAL : HXS_ERR_INVALID, r, "packages",
                                      "packages: %s", r == -ENOMEM ? "out of memory" : "not a requirement");
        char key[65];
        r = pkgcache_request_key(c, x->req, key, err);
        if (r < 0)
                return r;
        if (pkgcache_lookup(c, key, &x->pkgs) == 1) {
                x->packages = HXS_PACKAGES_CACHED;
                return 0;
        }
        _cleanup_(pkg_step_freep) pkg_step *s = step_new(x, key);
        if (!s)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        r = pkgcache_stage(c, c->owner_uid, s->stage, err);
        if (r < 0)
                return r;
        x->packages = HXS_PACKAGES_INSTALLED;
        if (c->index_url[0]) {
                /* first the downloader, on the host; the installer once it is done */
                r = pkgcache_stage(c, c->fetch_uid, s->fetch_dir, err);
                if (r == 0)
                        r = start_fetch(s, err);
        } else {
                r = start_installer(s, c->wheelhouse, err);
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

int pkg_step_begin(hxs_engine *e, hxs_exec *x, pkg_step **ret, hxs_error *err)
{
        *ret = NULL;
        int r = pkg_check(&e->pkgs, x->req, err);
        if (r == 0) {
                if (x->req->n_packages > 0)
                        x->packages = HXS_PACKAGES_IMAGE;
                return 0;
        }
        if (r != -ENOENT || !e->pkgcache.enabled)
                return r;
        if (!(e->ops->features & BACKEND_INSTALLS_PACKAGES))
                /* the install step and the package mount are the namespace backend's: a
                 * microVM runs what its image has */
                return err_fail_field(err, HXS_ERR_NOT_FOUND, -ENOENT, "packages",
                                      "packages: \"%s\" is not in the microVM image, and the %s backend "
                                      "installs nothing (PACKAGES_WHEELHOUSE and PACKAGES_INDEX_URL serve "
                                      "the namespace backend)", err->subject, e->ops->name);
        /* not all in the image: a cached set, or an install step first */
        err_clear(err);
        return prepare(e, x, ret, err);
}

/* The installer's sandbox, with wheel_dir as its read-only /wheelhouse. */
static int start_installer(pkg_step *s, const char *wheel_dir, hxs_error *err)
{
        hxs_exec *x = s->x;
        hxs_engine *e = x->engine;
        int r;
        hxs_request *ireq;
        r = installer_request(x, &ireq);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        hxs_exec *ix;
        r = exec_new(e, ireq, &ix, err);
        if (r < 0)
                return r;
        snprintf(ix->wheelhouse_dir, sizeof(ix->wheelhouse_dir), "%s", wheel_dir);
        snprintf(ix->target_dir, sizeof(ix->target_dir), "%s", s->stage);
        ix->started = x->started;
        /* what the download left of the timeout (at least a moment: it then times out) */
        uint64_t used = hxs_exec_elapsed_ms(x), limit = (uint64_t)x->req->timeout_s * 1000;
        ix->budget_ms = used < limit ? limit - used : 1;
        r = exec_backend_start(ix, err);
        if (r < 0) {
                err_wrap(err, r, "packages: starting the installer");
                exec_free(ix);
                return r;
        }
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_INSTALLER };
        if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, ix->epfd, &ev) < 0) {
                r = err_fail(err, HXS_ERR_SETUP, -errno, "epoll: %s", strerror(errno));
                exec_free(ix);
                return r;
        }
        s->installer = ix;
        return 0;
}

static void drop_installer(pkg_step *s)
{
        hxs_exec *x = s->x;
        if (!s->installer)
                return;
        (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, s->installer->epfd, NULL);
        exec_free(s->installer);
        s->installer = NULL;
}

static void fetch_close(pkg_step *s)
{
        hxs_exec *x = s->x;
        if (s->fetch_pidfd >= 0 && !s->fetch_reaped) {
                siginfo_t si;
                (void)pidfd_send_signal(s->fetch_pidfd, SIGKILL, NULL, 0);
                (void)waitid((idtype_t)P_PIDFD, (id_t)s->fetch_pidfd, &si, WEXITED);
                s->fetch_reaped = true;
        }
        int *fds[] = { &s->fetch_pidfd, &s->fetch_out_fd, &s->fetch_timer_fd };
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                if (*fds[i] >= 0) {
                        (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, *fds[i], NULL);
                        close_fd(fds[i]);
                }
        if (s->have_fetch_cg) {
                /* whatever pip started goes with it */
                cg_exec_kill(&s->fetch_cg);
                if (cg_exec_remove(&s->fetch_cg) < 0)
                        cg_graveyard_add(&x->engine->graveyard, &s->fetch_cg);
                s->have_fetch_cg = false;
        }
        s->fetching = false;
}

static void commit_close(pkg_step *s)
{
        hxs_exec *x = s->x;
        if (s->commit) {
                (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, pkg_commit_fd(s->commit), NULL);
                pkg_commit_drop(&x->engine->pkgcache, s->commit); /* the worker cleans up */
                s->commit = NULL;
        }
        if (s->commit_timer_fd >= 0) {
                (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, s->commit_timer_fd, NULL);
                close_fd(&s->commit_timer_fd);
        }
}

/* Stops what is in progress and removes the stage and the downloads. Idempotent. */
static void abandon(pkg_step *s)
{
        hxs_exec *x = s->x;
        drop_installer(s);
        fetch_close(s);
        commit_close(s);
        if (s->stage[0]) {
                pkgcache_discard(&x->engine->pkgcache, s->stage);
                s->stage[0] = '\0';
        }
        if (s->fetch_dir[0]) {
                pkgcache_discard(&x->engine->pkgcache, s->fetch_dir);
                s->fetch_dir[0] = '\0';
        }
}

static void fetch_kill(pkg_step *s)
{
        if (s->fetch_pidfd >= 0 && !s->fetch_reaped)
                (void)pidfd_send_signal(s->fetch_pidfd, SIGKILL, NULL, 0);
        if (s->have_fetch_cg)
                cg_exec_kill(&s->fetch_cg); /* and whatever it started */
}

void pkg_step_kill(pkg_step *s)
{
        if (s->installer)
                exec_kill(s->installer);
        else if (s->fetching)
                fetch_kill(s);
        else if (s->commit)
                pkg_commit_cancel(s->commit); /* its fd reports it at once */
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

/* The program, with what the install left of the timeout. */
static void start_program(hxs_exec *x)
{
        hxs_error err = { 0 };
        uint64_t used = hxs_exec_elapsed_ms(x), limit = (uint64_t)x->req->timeout_s * 1000;
        if (used >= limit) {
                end_with_result(x, 0, false, true, false,
                                "hexr-sandbox: installing packages used the whole timeout\n");
                return;
        }
        x->budget_ms = limit - used;
        int r = exec_backend_start(x, &err);
        if (r < 0)
                end_with_error(x, &err);
}

/* The installer is done: the commit goes to a worker, with a timer for what is left. */
static void installed(pkg_step *s, const hxs_result *res)
{
        hxs_exec *x = s->x;
        hxs_engine *e = x->engine;
        hxs_error err = { 0 };
        json_t *rep = installer_report(res);
        json_t *wheels = json_object_get(rep, "wheels");
        size_t n = json_array_size(wheels);
        char **names = calloc(n + 1, sizeof(char *));
        if (!json_is_array(wheels) || !names) {
                int len;
                const char *l = last_line(res, &len);
                err_fail_field(&err, HXS_ERR_SETUP, -EIO, "packages",
                               "packages: the installer gave no list of wheels (%.*s)", len, l);
                goto fail;
        }
        for (size_t i = 0; i < n; i++) {
                const char *w = json_string_value(json_array_get(wheels, i));
                if (!w) {
                        err_fail_field(&err, HXS_ERR_SETUP, -EIO, "packages", "packages: the installer's list of wheels is malformed");
                        goto fail;
                }
                names[i] = (char *)w;
        }
        int r = pkgcache_commit_submit(&e->pkgcache, s->stage, s->fetch_dir,
                                       s->fetch_dir[0] ? s->fetch_dir : e->pkgcache.wheelhouse, s->request_key,
                                       names, n, &s->commit, &err);
        s->stage[0] = s->fetch_dir[0] = '\0'; /* the commit's now */
        free(names);
        names = NULL;
        json_decref(rep);
        rep = NULL;
        if (r < 0)
                goto fail;
        uint64_t used = hxs_exec_elapsed_ms(x), limit = (uint64_t)x->req->timeout_s * 1000;
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_COMMIT },
                           ev_tim = { .events = EPOLLIN, .data.u64 = TAG_COMMIT_TIMER };
        s->commit_timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (s->commit_timer_fd < 0 || timerfd_arm_ms(s->commit_timer_fd, used < limit ? limit - used : 0) < 0 ||
            epoll_ctl(x->epfd, EPOLL_CTL_ADD, pkg_commit_fd(s->commit), &ev) < 0 ||
            epoll_ctl(x->epfd, EPOLL_CTL_ADD, s->commit_timer_fd, &ev_tim) < 0) {
                err_fail(&err, HXS_ERR_SETUP, -errno, "packages: watching the commit: %s", strerror(errno));
                goto fail;
        }
        return;
fail:
        free(names);
        json_decref(rep);
        abandon(s);
        end_with_error(x, &err);
}

/* The commit's fd or its timer fired (or it was cancelled by a kill). */
static void commit_step(pkg_step *s)
{
        hxs_exec *x = s->x;
        struct epoll_event evs[2];
        bool timed_out = false;
        int n = epoll_wait(x->epfd, evs, ARRAY_SIZE(evs), 0);
        for (int i = 0; i < n; i++) {
                uint64_t v;
                if (evs[i].data.u64 == TAG_COMMIT)
                        (void)!read(pkg_commit_fd(s->commit), &v, sizeof(v));
                else if (evs[i].data.u64 == TAG_COMMIT_TIMER && read(s->commit_timer_fd, &v, sizeof(v)) == sizeof(v))
                        timed_out = true;
        }
        if (x->killed) {
                abandon(s);
                end_with_result(x, SIGKILL, true, false, false, "");
                return;
        }
        if (timed_out && !pkg_commit_done(s->commit)) {
                abandon(s);
                end_with_result(x, 0, false, true, false,
                                "hexr-sandbox: installing packages used the whole timeout\n");
                return;
        }
        if (!pkg_commit_done(s->commit))
                return;
        hxs_error err = { 0 };
        (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, pkg_commit_fd(s->commit), NULL);
        int r = pkg_commit_take(&x->engine->pkgcache, s->commit, &x->pkgs, &err);
        s->commit = NULL;
        commit_close(s);
        if (r < 0) {
                abandon(s);
                end_with_error(x, &err);
                return;
        }
        start_program(x);
        return;
}


/* The installer's sandbox changed: once it is over, its outcome decides. */
static void installer_step(pkg_step *s)
{
        hxs_exec *x = s->x;
        hxs_exec *ix = s->installer;
        /* x->epfd holds only the installer's epoll fd (level-triggered): its own
         * processing consumes the events */
        exec_process(ix);
        if (!hxs_exec_done(ix))
                return;
        hxs_result res = { 0 };
        hxs_error err = { 0 };
        int r = hxs_exec_take_result(ix, &res, &err);
        drop_installer(s);
        if (r < 0) {
                err_wrap(&err, r, "packages: the installer's sandbox");
                abandon(s);
                end_with_error(x, &err);
                return;
        }
        if (x->killed) {
                abandon(s);
                end_with_result(x, SIGKILL, true, false, false, "");
        } else if (res.timed_out) {
                abandon(s);
                end_with_result(x, 0, false, true, false,
                                "hexr-sandbox: installing packages used the whole timeout\n");
        } else if (res.oom_killed) {
                abandon(s);
                end_with_result(x, SIGKILL, true, false, true,
                                "hexr-sandbox: installing packages ran out of memory (memory_mb)\n");
        } else if (res.exit_code == 3) {
                /* the installer refused: a package not found, or one it cannot install */
                json_t *rep = installer_report(&res);
                const char *msg = json_string_value(json_object_get(rep, "message"));
                /* not found, or a wheel it will not install: either way a 422 naming it */
                err_fail_field(&err, HXS_ERR_NOT_FOUND, -ENOENT, "packages", "packages: %.300s",
                               msg ? msg : "the installer refused them");
                json_decref(rep);
                abandon(s);
                end_with_error(x, &err);
        } else if (res.exit_code == 4) {
                /* the operator's to fix: 500, saying what */
                json_t *rep = installer_report(&res);
                const char *msg = json_string_value(json_object_get(rep, "message"));
                err_fail_field(&err, HXS_ERR_SETUP, -EACCES, "packages",
                               "packages: the installer (uid %u) cannot read the wheelhouse (%.200s): make PACKAGES_WHEELHOUSE readable by others (chmod o+rx on it, o+r on its wheels)",
                               (unsigned)x->engine->pkgcache.owner_uid, msg ? msg : "");
                json_decref(rep);
                abandon(s);
                end_with_error(x, &err);
        } else if (res.exit_code != 0) {
                int len;
                const char *l = last_line(&res, &len);
                err_fail_field(&err, HXS_ERR_SETUP, -EIO, "packages",
                               "packages: the installer failed with exit code %d: %.*s", res.exit_code, len, l);
                abandon(s);
                end_with_error(x, &err);
        } else {
                installed(s, &res);
        }
        hxs_result_clear(&res);
        return;
}

/* ---- from an index: the downloader ------------------------------------------------- */

/* What the downloader runs: pip, wheels only (nothing is built, so no package code
 * runs), no cache, no prompts, into its directory. Dependencies are resolved by pip;
 * the installer then resolves again, offline, against what was downloaded and the
 * image. Built in the parent: the child only calls the kernel. */
static int fetch_argv(const pkg_step *s, char ***ret)
{
        const hxs_exec *x = s->x;
        const pkgcache *c = &x->engine->pkgcache;
        size_t n = 0, max = 32 + x->req->n_packages;
        char **argv = calloc(max, sizeof(char *));
        if (!argv)
                return -ENOMEM;
        const char *fixed[] = { "/usr/bin/python3", "-I", "-m", "pip", "download", "--only-binary=:all:",
                                "--no-cache-dir", "--disable-pip-version-check", "--no-input",
                                "--progress-bar", "off", "--dest", s->fetch_dir, "--index-url", c->index_url };
        for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
                argv[n++] = strdup(fixed[i]);
        if (strncmp(c->index_url, "http://", 7) == 0) {
                /* pip refuses plain http unless told; the operator chose this URL */
                const char *host = c->index_url + 7;
                argv[n++] = strdup("--trusted-host");
                argv[n++] = strndup(host, strcspn(host, "/?#"));
        }
        if (c->wheelhouse[0]) {
                argv[n++] = strdup("--find-links");
                argv[n++] = strdup(c->wheelhouse);
        }
        argv[n++] = strdup("--");
        for (size_t i = 0; i < x->req->n_packages; i++)
                argv[n++] = strdup(x->req->packages[i]);
        for (size_t i = 0; i < n; i++)
                if (!argv[i]) {
                        for (size_t j = 0; j < n; j++)
                                free(argv[j]);
                        free(argv);
                        return -ENOMEM;
                }
        *ret = argv;
        return 0;
}

static void free_argv(char **argv)
{
        for (char **p = argv; p && *p; p++)
                free(*p);
        free(argv);
}

typedef struct fetch_child_args {
        char **argv, **envp;
        const char *dir;
        int out;
        uid_t uid;
        pid_t parent;           /* the service: it must still be there once the death signal is set */
        rlim_t fsize, mem;
        const int *cg_tasks;    /* [n_cg_tasks] v1 tasks files to write "0" into */
        size_t n_cg_tasks;
} fetch_child_args;

/* A step failed: named on the output pipe, whose last line becomes the request's error
 * message (fetch_failed); the child ends with 126 (127: the exec itself). */
static _Noreturn void fetch_child_failed(int fd, const char *what, int r, int status)
{
        jail_say(fd, "the package downloader's jail", what, NULL, -r);
        _exit(status);
}

static void fetch_step_or_fail(int fd, jail_step step, int r)
{
        if (r < 0)
                fetch_child_failed(fd, jail_step_text(step), r, 126);
}

/* Between clone and exec, in a copy of the service: the steps of core/jail.h. An
 * unprivileged host user with a clean environment, in its own cgroup and session,
 * working in its own empty directory; dies with us. */
static _Noreturn void fetch_child(const fetch_child_args *a)
{
        const jail_rlimit limits[] = {
                { RLIMIT_FSIZE, a->fsize }, { RLIMIT_CORE, 0 }, { RLIMIT_NOFILE, 1024 }, { RLIMIT_AS, a->mem },
        };
        int fd = a->out;
        fetch_step_or_fail(fd, JAIL_CGROUP, jail_join_v1(a->cg_tasks, a->n_cg_tasks));
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0)
                fetch_child_failed(fd, "opening /dev/null", negative_errno(), 126);
        umask(022); /* the installer's sandbox user reads what it downloads */
        if (setsid() < 0)
                fetch_child_failed(fd, "leaving the service's session", negative_errno(), 126);
        const int fds[] = { devnull, a->out, a->out };
        fetch_step_or_fail(fd, JAIL_FDS, jail_arrange_fds(fds, ARRAY_SIZE(fds), ARRAY_SIZE(fds)));
        fd = 2;
        fetch_step_or_fail(fd, JAIL_CLOSE, jail_close_from(ARRAY_SIZE(fds), false));
        if (chdir(a->dir) < 0)
                fetch_child_failed(fd, "entering its download directory", negative_errno(), 126);
        /* best effort: a service without CAP_SETPCAP keeps the bounding set, and the
         * uid change and no_new_privs hold all the same */
        fetch_step_or_fail(fd, JAIL_BOUNDING, jail_drop_bounding(0, true));
        fetch_step_or_fail(fd, JAIL_SETID, jail_become(a->uid, a->uid, false));
        fetch_step_or_fail(fd, JAIL_CAPS, jail_set_caps(0));
        /* the death signal after the uid change, which clears it */
        fetch_step_or_fail(fd, JAIL_PDEATHSIG, jail_pdeathsig(a->parent, -1));
        fetch_step_or_fail(fd, JAIL_NNP, jail_no_new_privs());
        fetch_step_or_fail(fd, JAIL_RLIMITS, jail_rlimits(limits, ARRAY_SIZE(limits)));
        signal(SIGPIPE, SIG_DFL);
        execve(a->argv[0], a->argv, a->envp);
        fetch_child_failed(fd, jail_step_text(JAIL_EXEC), negative_errno(), 127);
}

/* The downloader's own cgroup (memory as its RLIMIT_AS, a few processes), joined at
 * birth: CLONE_INTO_CGROUP for v2, the child's own write for v1. */
static int spawn_fetch(pkg_step *s, const fetch_child_args *args_in, pid_t *ret_pid, int *ret_pidfd, hxs_error *err)
{
        hxs_exec *x = s->x;
        hxs_engine *e = x->engine;
        cg_limits lim = { .memory_bytes = (uint64_t)args_in->mem, .pids_max = FETCH_PIDS_MAX,
                          .cpus_milli = e->cfg.cpus_milli };
        int r = cg_exec_create(&e->cg, &lim, &s->fetch_cg, err);
        if (r < 0)
                return err_wrap(err, r, "packages: the downloader's cgroup");
        s->have_fetch_cg = true;
        cg_join join;
        r = cg_join_open(&s->fetch_cg, &join, err);
        if (r < 0)
                return err_wrap(err, r, "packages: the downloader's cgroup");
        unsigned joined = 0;
        for (cg_hier h = 0; h < CG_HIER_MAX; h++)
                if (join.v1_tasks[h] >= 0)
                        joined |= 1u << h;
        fetch_child_args args = *args_in;
        args.cg_tasks = join.v1_tasks;
        args.n_cg_tasks = CG_HIER_MAX;
        args.parent = getpid();
        int pidfd = -1;
        struct clone_args ca = { .flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&pidfd, .exit_signal = SIGCHLD };
        if (join.v2_dirfd >= 0) {
                ca.flags |= CLONE_INTO_CGROUP;
                ca.cgroup = (uint64_t)join.v2_dirfd;
        }
        long pid = syscall(SYS_clone3, &ca, sizeof(ca));
        if (pid < 0 && (ca.flags & CLONE_INTO_CGROUP) && (errno == EINVAL || errno == E2BIG)) {
                ca.flags &= ~(uint64_t)CLONE_INTO_CGROUP; /* before 5.7: moved by pid below */
                ca.cgroup = 0;
                pid = syscall(SYS_clone3, &ca, sizeof(ca));
        }
        if (pid == 0)
                fetch_child(&args);
        int saved = errno;
        if (pid > 0 && (ca.flags & CLONE_INTO_CGROUP))
                joined |= 1u << join.v2_hier;
        cg_join_close(&join);
        if (pid < 0)
                return err_fail(err, HXS_ERR_SETUP, -saved, "packages: clone3: %s", strerror(saved));
        *ret_pid = (pid_t)pid;
        *ret_pidfd = pidfd;
        r = cg_exec_attach(&s->fetch_cg, (pid_t)pid, joined, err);
        return r < 0 ? err_wrap(err, r, "packages: the downloader's cgroup") : 0;
}

static int start_fetch(pkg_step *s, hxs_error *err)
{
        hxs_exec *x = s->x;
        const hxs_engine *e = x->engine;
        const pkgcache *c = &e->pkgcache;
        char **argv = NULL;
        int r = fetch_argv(s, &argv);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        char home[600];
        snprintf(home, sizeof(home), "HOME=%s", s->fetch_dir);
        char *envp[] = { "PATH=/usr/bin:/bin", home, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", NULL };
        int out[2];
        if (pipe2(out, O_CLOEXEC) < 0) {
                r = -errno;
                free_argv(argv);
                return err_fail(err, HXS_ERR_SETUP, r, "packages: pipe: %s", strerror(-r));
        }
        /* pip resolves what looks like a file name against its working directory: its
         * own empty download directory, never the service's */
        fetch_child_args args = { .argv = argv, .envp = envp, .dir = s->fetch_dir, .out = out[1],
                                  .uid = c->fetch_uid, .fsize = (rlim_t)c->limit_bytes,
                                  .mem = (rlim_t)(x->req->memory_mb + 512) << 20 };
        pid_t pid = -1;
        r = spawn_fetch(s, &args, &pid, &s->fetch_pidfd, err);
        close(out[1]);
        free_argv(argv);
        if (pid < 0) {
                close(out[0]);
                fetch_close(s);
                return r;
        }
        s->fetch_pid = pid;
        s->fetch_out_fd = out[0];
        s->fetching = true;
        s->fetch_timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        uint64_t limit = (uint64_t)x->req->timeout_s * 1000;
        struct epoll_event ev_out = { .events = EPOLLIN, .data.u64 = TAG_FETCH_OUT },
                           ev_pid = { .events = EPOLLIN, .data.u64 = TAG_FETCH_PID },
                           ev_tim = { .events = EPOLLIN, .data.u64 = TAG_FETCH_TIMER };
        if (r < 0 || s->fetch_pidfd < 0 || s->fetch_timer_fd < 0 || timerfd_arm_ms(s->fetch_timer_fd, limit) < 0 ||
            fd_set_nonblock(s->fetch_out_fd) < 0 ||
            epoll_ctl(x->epfd, EPOLL_CTL_ADD, s->fetch_out_fd, &ev_out) < 0 ||
            epoll_ctl(x->epfd, EPOLL_CTL_ADD, s->fetch_pidfd, &ev_pid) < 0 ||
            epoll_ctl(x->epfd, EPOLL_CTL_ADD, s->fetch_timer_fd, &ev_tim) < 0) {
                if (r == 0)
                        r = err_fail(err, HXS_ERR_SETUP, -errno, "packages: watching the downloader: %s", strerror(errno));
                if (s->fetch_pidfd < 0) { /* cannot happen for our own child; reap it by pid */
                        kill(pid, SIGKILL);
                        (void)waitpid(pid, NULL, 0);
                        s->fetch_reaped = true;
                }
                fetch_close(s);
                return r;
        }
        return 0;
}

/* pip's reason, for a message: "No matching distribution found for NAME" names what
 * is missing (a requirement or a dependency); else its last line. */
static void fetch_failed(pkg_step *s)
{
        hxs_exec *x = s->x;
        hxs_error err = { 0 };
        size_t len = 0;
        char *log = capbuf_steal(&s->fetch_log, &len);
        const char *text = log ? log : "";
        const char *nm = strstr(text, "No matching distribution found for ");
        if (nm) {
                nm += strlen("No matching distribution found for ");
                int l = (int)strcspn(nm, "\n");
                err_fail_field(&err, HXS_ERR_NOT_FOUND, -ENOENT, "packages",
                               "packages: %.*s: no wheel for it in the package index", l > 200 ? 200 : l, nm);
        } else {
                const char *end = text + len;
                while (end > text && (end[-1] == '\n' || end[-1] == ' '))
                        end--;
                const char *line = end;
                while (line > text && line[-1] != '\n')
                        line--;
                int l = (int)(end - line) > 200 ? 200 : (int)(end - line);
                err_fail_field(&err, HXS_ERR_SETUP, -EIO, "packages",
                               "packages: downloading from the package index failed (exit %d): %.*s",
                               WIFEXITED(s->fetch_status) ? WEXITSTATUS(s->fetch_status) : 128 + WTERMSIG(s->fetch_status),
                               l, line);
        }
        free(log);
        abandon(s);
        end_with_error(x, &err);
}

static void fetch_step(pkg_step *s)
{
        hxs_exec *x = s->x;
        struct epoll_event evs[4];
        int n = epoll_wait(x->epfd, evs, ARRAY_SIZE(evs), 0);
        for (int i = 0; i < n; i++) {
                switch (evs[i].data.u64) {
                case TAG_FETCH_OUT:
                        for (int k = 0; k < 16 && s->fetch_out_fd >= 0; k++) {
                                ssize_t q = capbuf_read_fd(&s->fetch_log, s->fetch_out_fd);
                                if (q == -EAGAIN)
                                        break;
                                if (q <= 0) {
                                        (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, s->fetch_out_fd, NULL);
                                        close_fd(&s->fetch_out_fd);
                                }
                        }
                        break;
                case TAG_FETCH_PID: {
                        siginfo_t si = { 0 };
                        if (waitid((idtype_t)P_PIDFD, (id_t)s->fetch_pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid) {
                                s->fetch_reaped = true;
                                s->fetch_status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
                                (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, s->fetch_pidfd, NULL);
                        }
                        break;
                }
                case TAG_FETCH_TIMER: {
                        uint64_t ticks;
                        (void)!read(s->fetch_timer_fd, &ticks, sizeof(ticks));
                        s->fetch_timed_out = true;
                        fetch_kill(s);
                        break;
                }
                default:
                        break;
                }
        }
        /* done once pip is reaped and its output closed (it has no children that keep
         * the pipe open longer than the time limit: the timer kills its cgroup) */
        if (!s->fetch_reaped || s->fetch_out_fd >= 0) {
                if (s->fetch_reaped && s->fetch_timed_out && s->fetch_out_fd >= 0) {
                        (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, s->fetch_out_fd, NULL);
                        close_fd(&s->fetch_out_fd);
                } else {
                        return;
                }
        }
        bool oom = s->have_fetch_cg && cg_exec_oom_kills(&s->fetch_cg) > 0;
        fetch_close(s);
        if (x->killed) {
                abandon(s);
                end_with_result(x, SIGKILL, true, false, false, "");
        } else if (s->fetch_timed_out) {
                abandon(s);
                end_with_result(x, 0, false, true, false,
                                "hexr-sandbox: downloading packages used the whole timeout\n");
        } else if (oom) {
                abandon(s);
                end_with_result(x, SIGKILL, true, false, true,
                                "hexr-sandbox: downloading packages ran out of memory (memory_mb + 512 MiB)\n");
        } else if (!WIFEXITED(s->fetch_status) || WEXITSTATUS(s->fetch_status) != 0) {
                fetch_failed(s);
        } else {
                hxs_error err = { 0 };
                int r = start_installer(s, s->fetch_dir, &err);
                if (r < 0) {
                        abandon(s);
                        end_with_error(x, &err);
                }
        }
        return;
}

/* ---- the step, as the engine sees it ---------------------------------------------- */

static bool busy(const pkg_step *s)
{
        return s->installer || s->fetching || s->commit;
}

bool pkg_step_advance(pkg_step *s)
{
        if (s->fetching)
                fetch_step(s);
        else if (s->commit)
                commit_step(s);
        else if (s->installer)
                installer_step(s);
        return busy(s);
}

void pkg_step_free(pkg_step *s)
{
        if (!s)
                return;
        abandon(s);
        capbuf_free(&s->fetch_log);
        free(s);
}
