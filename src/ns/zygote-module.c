/* SPDX-License-Identifier: Apache-2.0 */
/*
 * _hxs_zygote: the C half of a warm template (see template.h and zygote.py).
 *
 * mother(sock, init_fd), in the mother: for each slot the engine names, forks a slot
 * template as a child of the engine (CLONE_PARENT) that takes the slot's owner uid and
 * drops every capability, then serves: for each request it clones a sandbox with the
 * same code as the cold path (ns_child_main, the same seccomp filter built by the same
 * function), again as a child of the engine, whose PID 1 answers with a pidfd of itself
 * (see "PID 1 in the template's memory" below). It returns
 * only in the program process of a new sandbox, once every restriction is in place,
 * giving Python the code path and the environment; no template ever runs a request's
 * code or holds one (code and environment travel in a memfd it does not read).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/prctl.h>
#include <linux/sched.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "ns/ns.h"
#include "ns/template.h"

static sandbox_filter filter;

/* More than one thread would make clone's copy of malloc's state unsafe. */
static int single_threaded(void)
{
        int n = 0;
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Threads: %d", &n) == 1)
                        break;
        fclose(f);
        return n == 1;
}

static void close_fds(int *fds, int n)
{
        for (int i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

/* One reply, with the pidfd if there is one (-1: none). */
static void reply(int sock, uint32_t seq, int32_t pid, int pidfd)
{
        template_reply r = { .pid = pid, .seq = seq };
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof(u));
        struct iovec iov = { .iov_base = &r, .iov_len = sizeof(r) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (pidfd >= 0) {
                msg.msg_control = u.buf;
                msg.msg_controllen = sizeof(u.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &pidfd, sizeof(int));
        }
        (void)!sendmsg(sock, &msg, MSG_NOSIGNAL);
}

/* Receives a message of exactly `len` bytes and up to max_fds descriptors. Returns the
 * number of descriptors, -1 for a malformed message (its descriptors closed), -2 when
 * the engine is gone. */
static int receive(int sock, void *buf, size_t len, int *fds, int max_fds)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * 8)];
                struct cmsghdr align;
        } u;
        for (;;) {
                struct iovec iov = { .iov_base = buf, .iov_len = len };
                struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                                      .msg_controllen = sizeof(u.buf) };
                ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -2;
                int nfds = 0, extra = 0;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                                for (int i = 0; i < k; i++) {
                                        int fd;
                                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                        if (nfds < max_fds)
                                                fds[nfds++] = fd;
                                        else {
                                                close(fd);
                                                extra++;
                                        }
                                }
                        }
                if ((size_t)n != len || extra || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                        close_fds(fds, nfds);
                        return -1;
                }
                return nfds;
        }
}

static PyObject *program_tuple(const ns_program *prog)
{
        PyObject *env = PyList_New(0);
        if (!env)
                return NULL;
        for (char **e = prog->env; e && *e; e++) {
                PyObject *b = PyBytes_FromString(*e);
                if (!b || PyList_Append(env, b) < 0) {
                        Py_XDECREF(b);
                        Py_DECREF(env);
                        return NULL;
                }
                Py_DECREF(b);
        }
        return Py_BuildValue("(sN)", prog->code_path, env);
}

/* The program's /proc/self/cmdline is its own copy of the template's arguments (the
 * zygote's source, the state directory): rewritten in place to what a cold start
 * shows, and the kernel told where it now ends (PR_SET_MM_MAP needs no privilege when
 * it does not change the executable); if that is refused, the rest stays zeroed. */
static void rewrite_cmdline(const char *code_path)
{
        char buf[2048];
        if (read_file("/proc/self/stat", buf, sizeof(buf)) <= 0)
                return;
        /* the fields after the command's ")", numbered as in proc(5) */
        unsigned long long f[52] = { 0 };
        const char *p = strrchr(buf, ')');
        for (int field = 3; p && field <= 51; field++) {
                p = strchr(p + 1, ' ');
                if (p)
                        f[field] = strtoull(p + 1, NULL, 10);
        }
        unsigned long long start = f[48], end = f[49];
        if (!p || end <= start)
                return;
        char *area = (char *)(uintptr_t)start;
        size_t len = (size_t)(end - start);
        char want[128];
        int n = snprintf(want, sizeof(want), "/usr/bin/python3%c%s", '\0', code_path);
        if (n < 0 || (size_t)n + 1 > len)
                return;
        memset(area, 0, len);
        memcpy(area, want, (size_t)n + 1);
        struct prctl_mm_map map = {
                .start_code = f[26], .end_code = f[27], .start_stack = f[28], .start_data = f[45],
                .end_data = f[46], .start_brk = f[47], .brk = (uint64_t)syscall(SYS_brk, 0),
                .arg_start = start, .arg_end = start + (uint64_t)n + 1, .env_start = f[50], .env_end = f[51],
                .exe_fd = (uint32_t)-1,
        };
        (void)prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&map, sizeof(map), 0);
}

/* ---- PID 1 in the template's memory ------------------------------------------------- */

/* A warm sandbox's PID 1 is cloned with CLONE_VM | CLONE_VFORK: it runs in the
 * template's own memory, on a stack of its own, while the template is stopped until PID 1
 * execs its init (or dies). So the program PID 1 forks is the one copy of the template's
 * address space an execution costs (a PID 1 of its own would be a second one, of the
 * whole template, only to be thrown away at its exec), and it is a copy of a template
 * that is not running. What PID 1 leaves in that memory, the template clears before it
 * serves again: its stack is replaced by fresh pages, the payload it mapped is unmapped,
 * and it keeps nothing else (ns-child.c and the code it calls use no heap, and no static
 * buffer: ns-files.c lets the kernel copy the files). */
#define PID1_STACK_SIZE ((size_t)1 << 20)
#define PID1_GUARD_SIZE ((size_t)64 << 10)

static char *pid1_stack;                /* PID1_STACK_SIZE, above a PROT_NONE guard */
static payload_view pid1_payload;       /* what PID 1 mapped (ns_child_args.warm_payload) */
static volatile sig_atomic_t pid1_replied; /* PID 1 has told the engine who it is */
static uint32_t pid1_seq;               /* the request PID 1 answers (template_reply.seq) */
static sigjmp_buf to_serve;             /* where the program goes on, in the template's frames */
static ns_program program;              /* the program's own copy, written after its fork */

struct pid1_start {
        const ns_child_args *args;
        int sock;
};

static int map_pid1_stack(void)
{
        int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK;
        if (!pid1_stack) {
                char *m = mmap(NULL, PID1_GUARD_SIZE + PID1_STACK_SIZE, PROT_NONE, fl | MAP_NORESERVE, -1, 0);
                if (m == MAP_FAILED)
                        return -1;
                pid1_stack = m + PID1_GUARD_SIZE;
        }
        return mmap(pid1_stack, PID1_STACK_SIZE, PROT_READ | PROT_WRITE, fl | MAP_FIXED, -1, 0) == MAP_FAILED ? -1
                                                                                                           : 0;
}

/* After PID 1 has exec'd or died: nothing of its request stays in the template. */
static void forget_pid1(void)
{
        payload_unmap(&pid1_payload);
        if (map_pid1_stack() < 0)
                _exit(1); /* a stack we could not clear: the engine replaces us */
}

/* PID 1 tells the engine who it is, as the template would once clone returned: the
 * template cannot while PID 1 runs. The pid is the engine's view of it (the host's
 * /proc is still mounted: nothing has changed the root yet). */
static void announce(int sock)
{
        char path[64], buf[512];
        int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        const char *p = pidfd >= 0 && read_file(path, buf, sizeof(buf)) > 0 ? strstr(buf, "\nPid:") : NULL;
        long pid = p ? strtol(p + 5, NULL, 10) : 0;
        if (pid <= 0)
                _exit(127); /* the template then answers with its own pidfd */
        reply(sock, pid1_seq, (int32_t)pid, pidfd);
        close(pidfd);
        pid1_replied = 1;
}

static int pid1_main(void *arg)
{
        const struct pid1_start *st = arg;
        announce(st->sock);
        ns_child_main(st->args, &program);
        /* only the program process gets here, fully restricted: on into Python, in the
         * template's frames (its copy of them) where serve cloned */
        siglongjmp(to_serve, 1);
}

/* A slot template: for each request, a sandbox. Returns only in a sandbox's program. */
static PyObject *serve(int sock, int init_fd)
{
        /* children are the engine's (CLONE_PARENT); each sandbox resets this for itself */
        signal(SIGCHLD, SIG_IGN);
        if (map_pid1_stack() < 0 || send(sock, "R", 1, MSG_NOSIGNAL) != 1)
                _exit(0);
        for (;;) {
                template_request req;
                int fds[7] = { -1, -1, -1, -1, -1, -1, -1 };
                int nfds = receive(sock, &req, sizeof(req), fds, 7);
                if (nfds == -2)
                        _exit(0); /* the engine is gone */
                int with_files = req.has_files ? 1 : 0;
                if (nfds < 0 || req.magic != TEMPLATE_MAGIC || nfds != (int)req.n_fds || nfds < 5 + with_files) {
                        close_fds(fds, nfds > 0 ? nfds : 0);
                        reply(sock, req.seq, -EBADMSG, -1);
                        continue;
                }
                req.mountpoint[sizeof(req.mountpoint) - 1] = '\0';
                req.code_name[sizeof(req.code_name) - 1] = '\0';
                req.pkgs_dir[sizeof(req.pkgs_dir) - 1] = '\0';
                req.limits.rootfs[sizeof(req.limits.rootfs) - 1] = '\0';
                ns_child_args a = {
                        .limits = &req.limits, .seccomp = &filter, .mountpoint = req.mountpoint,
                        .interpreter = "/usr/bin/python3", .code_name = req.code_name,
                        .payload_fd = fds[0], .sync_fd = fds[1], .report_fd = fds[2],
                        .stdout_fd = fds[3], .stderr_fd = fds[4], .stdin_fd = nfds - with_files > 5 ? fds[5] : -1,
                        .has_files = with_files, .files_fd = with_files ? fds[nfds - 1] : -1,
                        .init_fd = init_fd, .warm = true, .pkgs_dir = req.pkgs_dir[0] ? req.pkgs_dir : NULL,
                        .memory_mb = req.memory_mb, .warm_payload = &pid1_payload,
                        .code_fifo = req.code_fifo != 0,
                };
                struct pid1_start st = { .args = &a, .sock = sock };
                int pidfd = -1;
                pid1_replied = 0;
                pid1_seq = req.seq;
                if (sigsetjmp(to_serve, 0)) {
                        /* the program (pid1_main), in its copy of this frame: only
                         * statics are to be trusted here */
                        PyOS_AfterFork_Child();
                        rewrite_cmdline(program.code_path);
                        return program_tuple(&program);
                }
                /* CLONE_PARENT: the sandbox is the engine's child, as a cold one is; no
                 * exit signal, as before, the engine waits on the pidfd */
                PyOS_BeforeFork();
                int pid = clone(pid1_main, pid1_stack + PID1_STACK_SIZE,
                                NS_CLONE_FLAGS | CLONE_PARENT | CLONE_PIDFD | CLONE_VM | CLONE_VFORK, &st, &pidfd);
                int saved = errno;
                PyOS_AfterFork_Parent();
                /* PID 1 changed its ids in our memory (CLONE_VM), which made that memory
                 * undumpable; the next PID 1 runs in it too, and the engine (as the
                 * owner uid, without CAP_SYS_PTRACE under the systemd unit) must be able
                 * to look at it: dumpable again, as become_slot made it */
                (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
                forget_pid1();
                close_fds(fds, nfds);
                /* PID 1 answered for itself, unless it died first. Killed between its
                 * answer and noting it (the engine may kill it as soon as it has the
                 * answer), it answered twice: the engine drops the late one (its seq) */
                if (!pid1_replied)
                        reply(sock, req.seq, pid > 0 ? (int32_t)pid : -saved, pid > 0 ? pidfd : -1);
                if (pidfd >= 0)
                        close(pidfd);
        }
}

/* In the new slot template: the slot's uid, no capability, its socket at
 * TEMPLATE_SOCK_FD. Returns only in a sandbox's program (see serve). */
static PyObject *become_slot(const template_slot_request *req, int sock, pid_t engine)
{
        uid_t owner = req->owner;
        /* the real ids stay the templates'; the effective one owns what it clones */
        if (setgroups(0, NULL) < 0 || setresgid((gid_t)-1, owner, owner) < 0 ||
            setresuid((uid_t)-1, owner, owner) < 0)
                _exit(127);
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct none[2] = { { 0 } };
        if (syscall(SYS_capset, &hdr, none) < 0 || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                _exit(127);
        /* after the uid change, which clears it; the engine is our parent */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != engine)
                _exit(127);
        /* dumpable (the uid change cleared that too), so that the sandboxes it clones
         * are, until they change their own uids: the engine, as their namespace's owner,
         * may then look at them and write their id maps without further privilege */
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
                _exit(127);
        if (dup3(sock, TEMPLATE_SOCK_FD, O_CLOEXEC) < 0) /* over the mother's socket */
                _exit(127);
        close(sock);
        return serve(TEMPLATE_SOCK_FD, TEMPLATE_INIT_FD);
}

static PyObject *zygote_mother(PyObject *self, PyObject *args)
{
        int sock;
        if (!PyArg_ParseTuple(args, "i", &sock))
                return NULL;
        if (!single_threaded()) {
                PyErr_SetString(PyExc_RuntimeError, "a template must be single-threaded");
                return NULL;
        }
        hxs_error err = { 0 };
        if (sandbox_filter_build(&filter, &err) < 0) {
                PyErr_SetString(PyExc_RuntimeError, err.message);
                return NULL;
        }
        pid_t engine = getppid();
        for (;;) {
                template_slot_request req;
                int fd = -1;
                int nfds = receive(sock, &req, sizeof(req), &fd, 1);
                if (nfds == -2)
                        _exit(0); /* every slot forked, or the engine is gone */
                if (nfds != 1 || req.magic != TEMPLATE_SLOT_MAGIC) {
                        if (nfds == 1)
                                close(fd);
                        _exit(1); /* the engine replaces this generation */
                }
                int pidfd = -1;
                struct clone_args ca = { .flags = CLONE_PARENT | CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&pidfd };
                PyOS_BeforeFork();
                long pid = syscall(SYS_clone3, &ca, sizeof(ca));
                if (pid == 0) {
                        PyOS_AfterFork_Child();
                        return become_slot(&req, fd, engine);
                }
                int saved = errno;
                PyOS_AfterFork_Parent();
                close(fd);
                reply(sock, 0, pid > 0 ? (int32_t)pid : -saved, pid > 0 ? pidfd : -1);
                if (pidfd >= 0)
                        close(pidfd);
                if (pid < 0)
                        _exit(1);
        }
}

static PyMethodDef methods[] = {
        { "mother", zygote_mother, METH_VARARGS,
          "Fork the slot templates the engine asks for on fd; returns only in a sandboxed program." },
        { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = { PyModuleDef_HEAD_INIT, "_hxs_zygote", NULL, -1, methods,
                                     NULL, NULL, NULL, NULL };

PyMODINIT_FUNC PyInit__hxs_zygote(void);
PyMODINIT_FUNC PyInit__hxs_zygote(void)
{
        return PyModule_Create(&module);
}
