/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Warm templates, engine side (see template.h). For each kind, a generation: one mother
 * (a Python process started as SANDBOX_UID_BASE + 2000 with only CAP_SETUID and
 * CAP_SETGID, a clean environment, its control socket and the sandbox init as its only
 * descriptors, a death signal tied to the engine) and the slot templates it forks, all
 * in one memory-capped cgroup. A kind is ready when all its slot templates are; if one
 * of them dies or answers what it must not, its generation is replaced, with a
 * back-off, and until then executions run cold.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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
#include "core/cgroup.h"
#include "core/jail.h"
#include "ns/owners.h"
#include "ns/template.h"

/* generated from src/ns/zygote.py */
extern const char embed_zygote_py[];
/* generated from src/ns/charts.py */
extern const char embed_charts_py[];

#define RESTART_MIN_MS 500
#define RESTART_MAX_MS 30000
#define SPAWN_TIMEOUT_S 10
/* A request has at most two answers: one late answer is waiting at most. */
#define STALE_ANSWERS_MAX 4

typedef struct slot_template {
        uid_t owner;            /* the owner uid it runs as and holds (owners.h), 0: none */
        pid_t pid;              /* 0: not known yet (the mother has not answered) */
        int pidfd, sock;
        bool ready;
} slot_template;

typedef struct generation {
        bool running;
        pid_t mother;           /* 0 once reaped */
        int mother_pidfd, mother_sock;
        unsigned answered;      /* slots the mother has forked */
        slot_template slot[NS_WARM_SLOTS_MAX];
        cg_exec cg;
        bool have_cg;
        uint64_t backoff_ms;
        uint64_t not_before_ms; /* no restart before this */
} generation;

struct ns_templates {
        hxs_config cfg;
        cg_layout *cgl;
        ns_owners *owners;
        char module_dir[320];
        int init_fd;
        unsigned n_slots;
        bool busy[NS_WARM_SLOTS_MAX]; /* a live sandbox holds the slot */
        generation gen[TEMPLATE_KIND_MAX];
        unsigned long restarts;
        uint32_t seq;                   /* the last template_request's */
};

static const char *const kind_args[TEMPLATE_KIND_MAX] = { "plain", "sci" };

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- checking what a process is ----------------------------------------------------- */

/* The "Name:\t<number>" line of a /proc status-like file, or -1. */
static long long status_number(const char *text, const char *name)
{
        size_t n = strlen(name);
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, name, n) == 0 && p[n] == ':') {
                        char *end;
                        long long v = strtoll(p + n + 1, &end, 10);
                        return end == p + n + 1 ? -1 : v;
                }
        return -1;
}

static pid_t pidfd_pid(int pidfd)
{
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        if (read_file(path, buf, sizeof(buf)) <= 0)
                return -1;
        long long pid = status_number(buf, "Pid");
        return pid > 0 && pid <= INT32_MAX ? (pid_t)pid : -1;
}

int template_check_child(int pidfd, pid_t pid, uid_t owner)
{
        char path[64], buf[4096];
        /* a pidfd, of the process named, ... */
        if (pid <= 0 || pidfd_pid(pidfd) != pid)
                return -EPERM;
        /* ... a child of ours (so its pid cannot be reused while we have not reaped it) ... */
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (read_file(path, buf, sizeof(buf)) <= 0 || status_number(buf, "PPid") != getpid())
                return -EPERM;
        /* ... in a user namespace of its own, which the slot's owner uid owns (looked
         * at as that owner, who may; a process in any other namespace the service, if
         * it lacks CAP_SYS_PTRACE, may not even look at) ... */
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        int dumpable = ns_owner_become(owner);
        if (dumpable < 0)
                return -EPERM;
        int ns = open(path, O_RDONLY | O_CLOEXEC);
        ns_owner_unbecome(dumpable);
        if (ns < 0)
                return -EPERM;
        uid_t got = (uid_t)-1;
        struct stat theirs, ours;
        bool ok = ioctl(ns, NS_GET_OWNER_UID, &got) == 0 && got == owner && fstat(ns, &theirs) == 0 &&
                  stat("/proc/self/ns/user", &ours) == 0 && theirs.st_ino != ours.st_ino;
        close(ns);
        /* ... and still the same process now that we have looked */
        if (!ok || pidfd_send_signal(pidfd, 0, NULL, 0) < 0)
                return -EPERM;
        return 0;
}

/* A slot template that says it is ready: our child, real uid the templates', every
 * other uid and gid its slot's owner, no capability left. */
static bool slot_template_sane(pid_t pid, uid_t ruid, uid_t owner)
{
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (read_file(path, buf, sizeof(buf)) <= 0 || status_number(buf, "PPid") != getpid())
                return false;
        unsigned r, e, s, f;
        const char *u = strstr(buf, "\nUid:"), *g = strstr(buf, "\nGid:");
        if (!u || sscanf(u, "\nUid: %u %u %u %u", &r, &e, &s, &f) != 4 || r != ruid || e != owner ||
            s != owner || f != owner)
                return false;
        if (!g || sscanf(g, "\nGid: %u %u %u %u", &r, &e, &s, &f) != 4 || e != owner || s != owner ||
            f != owner)
                return false;
        static const char *const caps[] = { "\nCapInh:", "\nCapPrm:", "\nCapEff:", "\nCapAmb:" };
        for (size_t i = 0; i < ARRAY_SIZE(caps); i++) {
                const char *c = strstr(buf, caps[i]);
                unsigned long long v;
                if (!c || sscanf(c + strlen(caps[i]), " %llx", &v) != 1 || v != 0)
                        return false;
        }
        return true;
}

/* Receives one message and at most one descriptor (more, or a truncated message: -EBADMSG,
 * with nothing kept). *ret_fd is -1 when none came. */
static ssize_t recv_with_fd(int sock, void *buf, size_t len, int flags, int *ret_fd)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * 4)];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = buf, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                              .msg_controllen = sizeof(u.buf) };
        *ret_fd = -1;
        ssize_t n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        int fds[4], nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        for (int i = 0; i < k && nfds < 4; i++)
                                memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                }
        if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || nfds > 1) {
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return -EBADMSG;
        }
        if (nfds == 1)
                *ret_fd = fds[0];
        return n;
}

static int send_with_fds(int sock, const void *buf, size_t len, const int *fds, unsigned n)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * 8)];
                struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof(u));
        struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                              .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : negative_errno();
}

/* ---- a generation: the mother and its slot templates -------------------------------- */

/* Runs in the forked child: become the mother. Never returns. */
static _Noreturn void exec_mother(const ns_templates *ts, template_kind kind, int sock, pid_t parent)
{
        uid_t uid = ts->cfg.uid_base + NS_TEMPLATE_UID;
        /* Only CAP_SETUID and CAP_SETGID survive, as ambient capabilities across exec:
         * the mother gives each slot template its uid with them. */
        const uint64_t keep = (UINT64_C(1) << CAP_SETUID) | (UINT64_C(1) << CAP_SETGID);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        /* 0-2 /dev/null, the control socket and the init where the templates expect them */
        _Static_assert(TEMPLATE_SOCK_FD == 3 && TEMPLATE_INIT_FD == 4, "the mother's descriptors follow stdio");
        const int fds[] = { null, null, null, sock, ts->init_fd };
        if (null < 0 || jail_arrange_fds(fds, ARRAY_SIZE(fds), ARRAY_SIZE(fds)) < 0 ||
            jail_close_from(ARRAY_SIZE(fds), false) < 0)
                _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* the interpreter must start as a cold one does, whatever the service inherited */
        ns_reset_signal_dispositions();
        /* `-c`: the working directory is on sys.path; "/" is root's */
        if (chdir("/") < 0)
                _exit(127);
        /* The bounding set keeps the two as well, where the service may change it
         * (CAP_SETPCAP); no_new_privs keeps any exec from gaining what it still holds.
         * The death signal after the uid change, which clears it. */
        if (jail_drop_bounding(keep, true) < 0 || jail_become(uid, uid, true) < 0 || jail_set_caps(keep) < 0 ||
            jail_no_new_privs() < 0 || jail_pdeathsig(parent, -1) < 0)
                _exit(127);
        char *argv[] = { "python3", "-c", (char *)embed_zygote_py, (char *)kind_args[kind],
                         (char *)ts->module_dir, (char *)embed_charts_py, NULL };
        char *envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent",
                         "OPENBLAS_NUM_THREADS=1", NULL };
        execve("/usr/bin/python3", argv, envp);
        _exit(127);
}

static void kill_reap(pid_t *pid, int *pidfd)
{
        if (*pidfd >= 0)
                (void)pidfd_send_signal(*pidfd, SIGKILL, NULL, 0);
        if (*pid > 0)
                (void)waitpid(*pid, NULL, 0);
        close_fd(pidfd);
        *pid = 0;
}

static void stop_generation(ns_templates *ts, generation *g)
{
        /* the cgroup first: it also holds slot templates whose pid we never learnt */
        if (g->have_cg)
                cg_exec_kill(&g->cg);
        kill_reap(&g->mother, &g->mother_pidfd);
        close_fd(&g->mother_sock);
        for (unsigned i = 0; i < NS_WARM_SLOTS_MAX; i++) {
                slot_template *t = &g->slot[i];
                kill_reap(&t->pid, &t->pidfd);
                close_fd(&t->sock);
                t->ready = false;
                /* a sandbox it cloned may hold its uid a while longer */
                if (t->owner)
                        ns_owner_put(ts->owners, t->owner);
                t->owner = 0;
        }
        if (g->have_cg) {
                for (int i = 0; i < 100 && cg_exec_remove(&g->cg) == -EBUSY; i++)
                        usleep(2000);
                g->have_cg = false;
        }
        g->running = false;
        g->answered = 0;
}

static void broken(ns_templates *ts, generation *g)
{
        stop_generation(ts, g);
        g->backoff_ms = g->backoff_ms ? g->backoff_ms * 2 : RESTART_MIN_MS;
        if (g->backoff_ms > RESTART_MAX_MS)
                g->backoff_ms = RESTART_MAX_MS;
        g->not_before_ms = now_ms() + g->backoff_ms;
}

static int start_generation(ns_templates *ts, template_kind kind)
{
        generation *g = &ts->gen[kind];
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        /* its own memory-capped cgroup: the templates cannot grow without bound */
        cg_limits lim = { .memory_bytes = (uint64_t)ts->cfg.template_memory_mb << 20,
                          .pids_max = 4096, .cpus_milli = 1000 * 64 };
        g->have_cg = cg_exec_create(ts->cgl, &lim, &g->cg, NULL) == 0;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pid == 0)
                exec_mother(ts, kind, sv[1], parent);
        close(sv[1]);
        g->running = true;
        g->mother = pid;
        g->mother_sock = sv[0];
        g->mother_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (g->have_cg)
                (void)cg_exec_attach(&g->cg, pid, 0, NULL);
        ts->restarts++;
        /* every slot's request now: the mother reads them once its imports are done */
        for (unsigned i = 0; i < ts->n_slots; i++) {
                int s[2], r = ns_owner_take(ts->owners, &g->slot[i].owner);
                if (r < 0) {
                        g->slot[i].owner = 0;
                        broken(ts, g); /* every owner uid in use: later */
                        return r;
                }
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s) < 0) {
                        r = -errno;
                        broken(ts, g);
                        return r;
                }
                template_slot_request req = { .magic = TEMPLATE_SLOT_MAGIC, .slot = i,
                                              .owner = g->slot[i].owner };
                r = send_with_fds(g->mother_sock, &req, sizeof(req), &s[1], 1);
                close(s[1]);
                g->slot[i].sock = s[0];
                if (r < 0) {
                        broken(ts, g);
                        return r;
                }
                struct timeval tv = { .tv_sec = SPAWN_TIMEOUT_S };
                (void)setsockopt(s[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        }
        return 0;
}

/* The mother's answers (a forked slot template each): checked, then kept. */
static bool collect_answers(ns_templates *ts, generation *g)
{
        while (g->mother_sock >= 0 && g->answered < ts->n_slots) {
                template_reply rep;
                int fd;
                ssize_t n = recv_with_fd(g->mother_sock, &rep, sizeof(rep), MSG_DONTWAIT, &fd);
                if (n == -EAGAIN || n == -EINTR)
                        return true;
                slot_template *t = &g->slot[g->answered];
                if (n != sizeof(rep) || fd < 0 || rep.pid <= 0 || pidfd_pid(fd) != rep.pid) {
                        close_fd(&fd);
                        return false; /* the mother died, or answered nonsense */
                }
                t->pid = rep.pid;
                t->pidfd = fd;
                /* our child (CLONE_PARENT): its pid is ours to reap */
                char path[64], buf[2048];
                snprintf(path, sizeof(path), "/proc/%d/status", (int)rep.pid);
                if (read_file(path, buf, sizeof(buf)) <= 0 || status_number(buf, "PPid") != getpid())
                        return false;
                g->answered++;
        }
        if (g->mother_sock >= 0 && g->answered == ts->n_slots)
                close_fd(&g->mother_sock); /* the mother exits at that */
        return true;
}

/* Is generation g usable? Restarts a dead one when its back-off allows. */
static bool check_generation(ns_templates *ts, template_kind kind)
{
        generation *g = &ts->gen[kind];
        if (!g->running) {
                if (now_ms() >= g->not_before_ms)
                        (void)start_generation(ts, kind);
                return false;
        }
        if (!collect_answers(ts, g)) {
                broken(ts, g);
                return false;
        }
        if (g->mother > 0) {
                /* it exits once it has forked every slot's template: reap it */
                struct pollfd p = { .fd = g->mother_pidfd, .events = POLLIN };
                if (g->mother_pidfd < 0 || poll(&p, 1, 0) != 0) {
                        kill_reap(&g->mother, &g->mother_pidfd);
                        if (g->answered < ts->n_slots) {
                                broken(ts, g); /* gone before it forked them all */
                                return false;
                        }
                }
        }
        bool all = g->answered == ts->n_slots;
        struct pollfd p[NS_WARM_SLOTS_MAX];
        for (unsigned i = 0; i < g->answered; i++)
                p[i] = (struct pollfd){ .fd = g->slot[i].pidfd, .events = POLLIN };
        if (g->answered && poll(p, g->answered, 0) > 0) {
                broken(ts, g); /* a slot template died */
                return false;
        }
        uid_t ruid = ts->cfg.uid_base + NS_TEMPLATE_UID;
        for (unsigned i = 0; i < g->answered; i++) {
                slot_template *t = &g->slot[i];
                if (t->ready)
                        continue;
                char c;
                ssize_t n = recv(t->sock, &c, 1, MSG_DONTWAIT);
                if (n == 1 && c == 'R' && slot_template_sane(t->pid, ruid, t->owner)) {
                        t->ready = true;
                } else if (n >= 0 || (errno != EAGAIN && errno != EINTR)) {
                        broken(ts, g);
                        return false;
                } else {
                        all = false;
                }
        }
        if (all)
                g->backoff_ms = 0;
        return all;
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

int templates_new(const hxs_config *cfg, cg_layout *cgl, int init_fd, ns_owners *owners, ns_templates **ret,
                  hxs_error *err)
{
        ns_templates *ts = calloc(1, sizeof(*ts));
        if (!ts)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        ts->cfg = *cfg;
        ts->cgl = cgl;
        ts->owners = owners;
        ts->init_fd = init_fd;
        ts->n_slots = ns_warm_slots(cfg);
        if (ts->n_slots == 0) {
                free(ts);
                return err_fail(err, HXS_ERR_UNSUPPORTED, -EINVAL, "warm templates: no warm slots");
        }
        int r = install_module(cfg, ts->module_dir, sizeof(ts->module_dir));
        if (r < 0) {
                free(ts);
                return err_fail(err, HXS_ERR_UNSUPPORTED, r,
                                "warm templates: cannot install the _hxs_zygote module: %s", strerror(-r));
        }
        for (int k = 0; k < TEMPLATE_KIND_MAX; k++) {
                generation *g = &ts->gen[k];
                g->mother_pidfd = g->mother_sock = -1;
                for (unsigned i = 0; i < NS_WARM_SLOTS_MAX; i++)
                        g->slot[i].pidfd = g->slot[i].sock = -1;
                (void)start_generation(ts, (template_kind)k);
        }
        ts->restarts = 0;
        *ret = ts;
        return 0;
}

void templates_free(ns_templates *ts)
{
        if (!ts)
                return;
        for (int k = 0; k < TEMPLATE_KIND_MAX; k++)
                stop_generation(ts, &ts->gen[k]);
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

bool template_eligible(ns_templates *ts, const hxs_request *req)
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

bool template_ready(ns_templates *ts, template_kind kind)
{
        if (!ts || !check_generation(ts, kind))
                return false;
        for (unsigned i = 0; i < ts->n_slots; i++)
                if (!ts->busy[i] && ts->gen[kind].slot[i].ready)
                        return true;
        return false;
}

int template_spawn(ns_templates *ts, template_kind kind, const ns_child_args *args,
                   pid_t *ret_pid, int *ret_pidfd, int *ret_slot, uid_t *ret_owner)
{
        generation *g = &ts->gen[kind];
        if (!check_generation(ts, kind))
                return -EAGAIN;
        unsigned i = 0;
        while (i < ts->n_slots && (ts->busy[i] || !g->slot[i].ready))
                i++;
        if (i == ts->n_slots)
                return -EAGAIN;
        slot_template *t = &g->slot[i];

        /* only the limits the child reads: every warm program is a copy of the
         * template's memory, which must hold none of the service's settings */
        template_request req = { .magic = TEMPLATE_MAGIC, .seq = ++ts->seq, .limits = *args->limits,
                                 .memory_mb = args->memory_mb, .code_fifo = args->code_fifo };
        snprintf(req.mountpoint, sizeof(req.mountpoint), "%s", args->mountpoint);
        snprintf(req.code_name, sizeof(req.code_name), "%s", args->code_name);
        snprintf(req.pkgs_dir, sizeof(req.pkgs_dir), "%s", args->pkgs_dir ? args->pkgs_dir : "");
        int fds[7] = { args->payload_fd, args->sync_fd, args->report_fd, args->stdout_fd, args->stderr_fd,
                       args->stdin_fd };
        req.n_fds = args->stdin_fd >= 0 ? 6 : 5;
        if (args->has_files) {
                fds[req.n_fds++] = args->files_fd;
                req.has_files = 1;
        }

        int r = send_with_fds(t->sock, &req, sizeof(req), fds, req.n_fds);
        if (r < 0)
                goto fail;
        template_reply rep;
        int pidfd = -1;
        ssize_t n = recv_with_fd(t->sock, &rep, sizeof(rep), 0, &pidfd);
        /* a late second answer to an earlier request (template.h): not this one's */
        for (unsigned late = 0; n == sizeof(rep) && rep.seq != req.seq && late < STALE_ANSWERS_MAX; late++) {
                close_fd(&pidfd);
                n = recv_with_fd(t->sock, &rep, sizeof(rep), 0, &pidfd);
        }
        if (n != sizeof(rep) || rep.seq != req.seq) {
                close_fd(&pidfd);
                r = n < 0 ? (int)n : -EPIPE;
                goto fail;
        }
        if (rep.pid <= 0 && pidfd < 0)
                return rep.pid < 0 ? rep.pid : -EIO; /* it could not clone: run cold */
        /* Only a process we can prove it made for this slot: our child (it cloned with
         * CLONE_PARENT), in a new user namespace its owner uid owns. A template that
         * names anything else is not believed, and is replaced. */
        if (pidfd < 0 || template_check_child(pidfd, rep.pid, t->owner) < 0) {
                close_fd(&pidfd);
                r = -EPERM;
                goto fail;
        }
        ts->busy[i] = true;
        /* the sandbox holds the uid too: it may outlive this generation */
        ns_owner_hold(ts->owners, t->owner);
        *ret_pid = rep.pid;
        *ret_pidfd = pidfd;
        *ret_slot = (int)i;
        *ret_owner = t->owner;
        return 0;
fail:
        /* a template that does not answer, or not as it must, is replaced */
        broken(ts, g);
        return r;
}

void templates_release(ns_templates *ts, int slot)
{
        if (ts && slot >= 0 && (unsigned)slot < NS_WARM_SLOTS_MAX)
                ts->busy[slot] = false;
}

void templates_state(ns_templates *ts, unsigned *ret_ready, unsigned *ret_total,
                     unsigned long *ret_restarts)
{
        unsigned ready = 0;
        if (ts)
                for (int k = 0; k < TEMPLATE_KIND_MAX; k++)
                        ready += check_generation(ts, (template_kind)k);
        *ret_ready = ready;
        *ret_total = ts ? TEMPLATE_KIND_MAX : 0;
        *ret_restarts = ts ? ts->restarts : 0;
}
