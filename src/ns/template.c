/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Warm templates, engine side (see template.h). Each template is a Python process
 * started as an unprivileged host user (SANDBOX_UID_BASE + 2000) with a clean
 * environment, no descriptors but its control socket, a death signal tied to the
 * engine, and its own memory-capped cgroup. It becomes ready when its imports are done;
 * if it dies it is restarted with a back-off, and until then executions run cold.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "ns/cgroup.h"
#include "ns/template.h"

/* generated from src/ns/zygote.py */
extern const char hxs_zygote_py[];

#define RESTART_MIN_MS 500
#define RESTART_MAX_MS 30000
#define SPAWN_TIMEOUT_S 10

typedef struct template {
        template_kind kind;
        pid_t pid;
        int pidfd, sock;
        bool ready;
        cg_exec cg;
        bool have_cg;
        uint64_t backoff_ms;
        struct timespec not_before;     /* no restart before this */
} template;

struct hxs_templates {
        hxs_config cfg;
        cg_layout *cgl;
        char module_dir[320];
        template t[TEMPLATE_KIND_MAX];
        unsigned long restarts;
};

static const char *const kind_args[TEMPLATE_KIND_MAX] = { "plain", "sci" };

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs in the forked child: become the template. Never returns. */
static _Noreturn void exec_template(const hxs_templates *ts, const template *t, int sock, pid_t parent)
{
        uid_t uid = ts->cfg.uid_base + NS_TEMPLATE_UID;
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 || dup2(sock, 3) < 0)
                _exit(127);
        syscall(SYS_close_range, 4, ~0U, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* the interpreter must start as a cold one does, whatever the service inherited */
        ns_reset_signal_dispositions();
        if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
                _exit(127);
        /* after the uid change, which clears it */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                _exit(127);
        char *argv[] = { "python3", "-c", (char *)hxs_zygote_py, (char *)kind_args[t->kind],
                         (char *)ts->module_dir, NULL };
        char *envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent",
                         "OPENBLAS_NUM_THREADS=1", NULL };
        execve("/usr/bin/python3", argv, envp);
        _exit(127);
}

static void stop_template(template *t)
{
        if (t->pidfd >= 0) {
                (void)pidfd_send_signal(t->pidfd, SIGKILL, NULL, 0);
                close(t->pidfd);
                t->pidfd = -1;
        }
        if (t->pid > 0) {
                (void)waitpid(t->pid, NULL, 0);
                t->pid = 0;
        }
        close_fd(&t->sock);
        t->ready = false;
        if (t->have_cg) {
                cg_exec_kill(&t->cg);
                for (int i = 0; i < 100 && cg_exec_remove(&t->cg) == -EBUSY; i++)
                        usleep(2000);
                t->have_cg = false;
        }
}

static int start_template(hxs_templates *ts, template *t)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        /* its own memory-capped cgroup: a template cannot grow without bound */
        cg_limits lim = { .memory_bytes = (uint64_t)ts->cfg.template_memory_mb << 20,
                          .pids_max = 4096, .cpus_milli = 1000 * 64 };
        t->have_cg = cg_exec_create(ts->cgl, &lim, &t->cg, NULL) == 0;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pid == 0)
                exec_template(ts, t, sv[1], parent);
        close(sv[1]);
        t->pid = pid;
        t->sock = sv[0];
        t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (t->have_cg)
                (void)cg_exec_attach(&t->cg, pid, 0, NULL);
        struct timeval tv = { .tv_sec = SPAWN_TIMEOUT_S };
        (void)setsockopt(t->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        ts->restarts++;
        return 0;
}

/* Is the template alive and ready? Restarts a dead one when its back-off allows. */
static bool check_template(hxs_templates *ts, template *t)
{
        if (t->pid > 0) {
                struct pollfd p = { .fd = t->pidfd, .events = POLLIN };
                bool dead = t->pidfd < 0 || poll(&p, 1, 0) != 0;
                if (!dead) {
                        if (!t->ready) {
                                char c;
                                ssize_t n = recv(t->sock, &c, 1, MSG_DONTWAIT);
                                if (n == 1 && c == 'R') {
                                        t->ready = true;
                                        t->backoff_ms = 0;
                                } else if (n == 0) {
                                        dead = true;
                                }
                        }
                        if (!dead)
                                return t->ready;
                }
                stop_template(t);
                t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : RESTART_MIN_MS;
                if (t->backoff_ms > RESTART_MAX_MS)
                        t->backoff_ms = RESTART_MAX_MS;
                uint64_t nb = now_ms() + t->backoff_ms;
                t->not_before.tv_sec = (time_t)(nb / 1000);
                t->not_before.tv_nsec = (long)(nb % 1000) * 1000000;
                return false;
        }
        uint64_t nb = (uint64_t)t->not_before.tv_sec * 1000 + (uint64_t)t->not_before.tv_nsec / 1000000;
        if (now_ms() >= nb)
                (void)start_template(ts, t);
        return false;
}

/* The extension module is copied where the template's unprivileged user can read it,
 * whatever the permissions of the build or install directory. */
static int install_module(const hxs_config *cfg, char *dir, size_t size)
{
        char src[512], dst[600];
        ssize_t n = readlink("/proc/self/exe", src, sizeof(src) - 32);
        if (n < 0)
                return -errno;
        src[n] = '\0';
        char *slash = strrchr(src, '/');
        if (!slash)
                return -ENOENT;
        snprintf(slash + 1, sizeof(src) - (size_t)(slash + 1 - src), "_hxs_zygote.so");
        snprintf(dir, size, "%s/templates", cfg->state_dir);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        snprintf(dst, sizeof(dst), "%s/_hxs_zygote.so", dir);
        int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return -errno;
        char tmp[620];
        snprintf(tmp, sizeof(tmp), "%s.%d", dst, (int)getpid());
        /* a new file of our own, never one a link points to (a leftover of a crashed
         * process with our pid is removed first: unlink does not follow links) */
        (void)unlink(tmp);
        int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (out < 0) {
                int r = -errno;
                close(in);
                return r;
        }
        char buf[65536];
        int r = 0;
        for (;;) {
                ssize_t got = read(in, buf, sizeof(buf));
                if (got < 0) {
                        r = -errno;
                        break;
                }
                if (got == 0)
                        break;
                if (write(out, buf, (size_t)got) != got) {
                        r = -EIO;
                        break;
                }
        }
        close(in);
        if (fchmod(out, 0644) < 0 && r == 0)
                r = -errno;
        close(out);
        if (r == 0 && rename(tmp, dst) < 0)
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

int templates_new(const hxs_config *cfg, cg_layout *cgl, hxs_templates **ret, hxs_error *err)
{
        hxs_templates *ts = calloc(1, sizeof(*ts));
        if (!ts)
                return hxs_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        ts->cfg = *cfg;
        ts->cgl = cgl;
        int r = install_module(cfg, ts->module_dir, sizeof(ts->module_dir));
        if (r < 0) {
                free(ts);
                return hxs_fail(err, HXS_ERR_UNSUPPORTED, r,
                                "warm templates: cannot install the _hxs_zygote module: %s", strerror(-r));
        }
        for (int k = 0; k < TEMPLATE_KIND_MAX; k++) {
                template *t = &ts->t[k];
                t->kind = (template_kind)k;
                t->pidfd = t->sock = -1;
                (void)start_template(ts, t);
        }
        ts->restarts = 0;
        *ret = ts;
        return 0;
}

void templates_free(hxs_templates *ts)
{
        if (!ts)
                return;
        for (int k = 0; k < TEMPLATE_KIND_MAX; k++)
                stop_template(&ts->t[k]);
        free(ts);
}

template_kind template_pick(const hxs_request *req, bool installed_set)
{
        static const char *const heavy[] = { "pandas", "numpy", "scipy" };
        /* packages the image has are mostly numpy and friends; with an installed set,
         * they are mostly not, and the code says */
        if (req->n_packages > 0 && !installed_set)
                return TEMPLATE_PYTHON_SCI;
        for (size_t i = 0; i < ARRAY_SIZE(heavy); i++)
                if (memmem(req->code, req->code_len, heavy[i], strlen(heavy[i])))
                        return TEMPLATE_PYTHON_SCI;
        return TEMPLATE_PYTHON;
}

bool template_eligible(hxs_templates *ts, const hxs_request *req)
{
        if (!ts || req->language != HXS_LANG_PYTHON)
                return false;
        for (size_t i = 0; i < req->n_env; i++) {
                const char *n = req->env[i].name;
                if (strncmp(n, "PYTHON", 6) == 0 || strcmp(n, "LANG") == 0 || strncmp(n, "LC_", 3) == 0)
                        return false;
        }
        /* The interpreter reads a file with NUL bytes line by line as C strings (each
         * line ends at its NUL); compile() refuses such source. Cold is exact. */
        if (memchr(req->code, '\0', req->code_len))
                return false;
        return true;
}

int template_spawn(hxs_templates *ts, template_kind kind, const ns_child_args *args,
                   pid_t *ret_pid, int *ret_pidfd)
{
        template *t = &ts->t[kind];
        if (!check_template(ts, t))
                return -EAGAIN;

        template_request req = { .magic = TEMPLATE_MAGIC, .cfg = *args->cfg, .memory_mb = args->memory_mb };
        snprintf(req.mountpoint, sizeof(req.mountpoint), "%s", args->mountpoint);
        snprintf(req.code_name, sizeof(req.code_name), "%s", args->code_name);
        snprintf(req.pkgs_dir, sizeof(req.pkgs_dir), "%s", args->pkgs_dir ? args->pkgs_dir : "");
        int fds[6] = { args->payload_fd, args->sync_fd, args->report_fd, args->stdout_fd, args->stderr_fd,
                       args->stdin_fd };
        req.n_fds = args->stdin_fd >= 0 ? 6 : 5;

        union {
                char buf[CMSG_SPACE(sizeof(fds))];
                struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof(u));
        struct iovec iov = { .iov_base = &req, .iov_len = sizeof(req) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                              .msg_controllen = CMSG_SPACE(sizeof(int) * req.n_fds) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * req.n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * req.n_fds);

        int r;
        if (sendmsg(t->sock, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
                r = -errno;
                goto broken;
        }
        template_reply rep;
        ssize_t n = recv(t->sock, &rep, sizeof(rep), 0);
        if (n != sizeof(rep)) {
                r = n < 0 ? -errno : -EPIPE;
                goto broken;
        }
        if (rep.pid <= 0)
                return rep.pid < 0 ? rep.pid : -EIO;
        int pidfd = (int)syscall(SYS_pidfd_open, rep.pid, 0);
        if (pidfd < 0) {
                r = -errno;
                return r;
        }
        *ret_pid = rep.pid;
        *ret_pidfd = pidfd;
        return 0;
broken:
        /* a template that does not answer is replaced */
        stop_template(t);
        return r;
}

void templates_state(hxs_templates *ts, unsigned *ret_ready, unsigned *ret_total,
                     unsigned long *ret_restarts)
{
        unsigned ready = 0;
        if (ts)
                for (int k = 0; k < TEMPLATE_KIND_MAX; k++)
                        ready += check_template(ts, &ts->t[k]);
        *ret_ready = ready;
        *ret_total = ts ? TEMPLATE_KIND_MAX : 0;
        *ret_restarts = ts ? ts->restarts : 0;
}
