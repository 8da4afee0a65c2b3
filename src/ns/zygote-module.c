/* SPDX-License-Identifier: Apache-2.0 */
/*
 * _hxs_zygote: the C half of a warm template (see template.h and zygote.py).
 *
 * mother(sock, init_fd), in the mother: for each slot the engine names, forks a slot
 * template as a child of the engine (CLONE_PARENT) that takes the slot's owner uid and
 * drops every capability, then serves: for each request it clones a sandbox with the
 * same code as the cold path (ns_child_main, the same seccomp filter built by the same
 * function), again as a child of the engine, and answers with a pidfd of it. It returns
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
#include <signal.h>
#include <string.h>
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
static void reply(int sock, int32_t pid, int pidfd)
{
        template_reply r = { .pid = pid };
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

/* A slot template: for each request, a sandbox. Returns only in a sandbox's program. */
static PyObject *serve(int sock, int init_fd)
{
        /* children are the engine's (CLONE_PARENT); each sandbox resets this for itself */
        signal(SIGCHLD, SIG_IGN);
        if (send(sock, "R", 1, MSG_NOSIGNAL) != 1)
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
                        reply(sock, -EBADMSG, -1);
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
                        .memory_mb = req.memory_mb,
                };
                int pidfd = -1;
                /* CLONE_PARENT: the sandbox is the engine's child, as a cold one is */
                struct clone_args ca = { .flags = NS_CLONE_FLAGS | CLONE_PARENT | CLONE_PIDFD,
                                         .pidfd = (uint64_t)(uintptr_t)&pidfd };
                PyOS_BeforeFork();
                long pid = syscall(SYS_clone3, &ca, sizeof(ca));
                if (pid == 0) {
                        ns_program prog;
                        ns_child_main(&a, &prog);
                        /* only the program process gets here, fully restricted */
                        PyOS_AfterFork_Child();
                        rewrite_cmdline(prog.code_path);
                        return program_tuple(&prog);
                }
                int saved = errno;
                PyOS_AfterFork_Parent();
                close_fds(fds, nfds);
                reply(sock, pid > 0 ? (int32_t)pid : -saved, pid > 0 ? pidfd : -1);
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
                reply(sock, pid > 0 ? (int32_t)pid : -saved, pid > 0 ? pidfd : -1);
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
