/* SPDX-License-Identifier: Apache-2.0 */
/*
 * _hxs_zygote: the C half of a warm template (see template.h and zygote.py).
 *
 * serve(fd) answers the engine's requests on the control socket: for each, it clones
 * a sandbox with the same code as the cold path (ns_child_main, the same seccomp
 * filter built by the same function) and replies with its pid. It returns only in the
 * program process of a new sandbox, once every restriction is in place, giving Python
 * the code path and the environment; the template itself never runs a request's code
 * and never holds one (code and environment travel in a memfd it does not read).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ns/ns.h"
#include "ns/template.h"

static hxs_seccomp filter;

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

static void reply(int sock, int32_t pid)
{
        template_reply r = { .pid = pid };
        (void)!send(sock, &r, sizeof(r), MSG_NOSIGNAL);
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

static PyObject *zygote_serve(PyObject *self, PyObject *args)
{
        int sock;
        if (!PyArg_ParseTuple(args, "i", &sock))
                return NULL;
        if (!single_threaded()) {
                PyErr_SetString(PyExc_RuntimeError, "a template must be single-threaded");
                return NULL;
        }
        hxs_error err = { 0 };
        if (hxs_seccomp_build(&filter, &err) < 0) {
                PyErr_SetString(PyExc_RuntimeError, err.message);
                return NULL;
        }
        /* children are reaped by the kernel; each sandbox resets this for itself */
        signal(SIGCHLD, SIG_IGN);
        if (send(sock, "R", 1, MSG_NOSIGNAL) != 1)
                return PyErr_SetFromErrno(PyExc_OSError);

        for (;;) {
                template_request req;
                int fds[6] = { -1, -1, -1, -1, -1, -1 };
                union {
                        char buf[CMSG_SPACE(sizeof(fds))];
                        struct cmsghdr align;
                } u;
                struct iovec iov = { .iov_base = &req, .iov_len = sizeof(req) };
                struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                                      .msg_controllen = sizeof(u.buf) };
                ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        _exit(0); /* the engine is gone */
                int nfds = 0;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                                for (int i = 0; i < k && nfds < 6; i++)
                                        memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        }
                if (n != sizeof(req) || req.magic != TEMPLATE_MAGIC || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
                    nfds != (int)req.n_fds || nfds < 5) {
                        close_fds(fds, nfds);
                        reply(sock, -EBADMSG);
                        continue;
                }
                req.mountpoint[sizeof(req.mountpoint) - 1] = '\0';
                req.code_name[sizeof(req.code_name) - 1] = '\0';
                req.pkgs_dir[sizeof(req.pkgs_dir) - 1] = '\0';
                ns_child_args a = {
                        .cfg = &req.cfg, .seccomp = &filter, .mountpoint = req.mountpoint,
                        .interpreter = "/usr/bin/python3", .code_name = req.code_name,
                        .payload_fd = fds[0], .sync_fd = fds[1], .report_fd = fds[2],
                        .stdout_fd = fds[3], .stderr_fd = fds[4], .stdin_fd = nfds > 5 ? fds[5] : -1,
                        .warm = true, .pkgs_dir = req.pkgs_dir[0] ? req.pkgs_dir : NULL,
                        .memory_mb = req.memory_mb,
                };
                struct clone_args ca = { .flags = NS_CLONE_FLAGS, .exit_signal = SIGCHLD };
                PyOS_BeforeFork();
                long pid = syscall(SYS_clone3, &ca, sizeof(ca));
                if (pid == 0) {
                        ns_program prog;
                        ns_child_main(&a, &prog);
                        /* only the program process gets here, fully restricted */
                        PyOS_AfterFork_Child();
                        return program_tuple(&prog);
                }
                int saved = errno;
                PyOS_AfterFork_Parent();
                close_fds(fds, nfds);
                reply(sock, pid > 0 ? (int32_t)pid : -saved);
        }
}

static PyMethodDef methods[] = {
        { "serve", zygote_serve, METH_VARARGS, "Serve the engine on fd; returns only in a sandboxed program." },
        { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = { PyModuleDef_HEAD_INIT, "_hxs_zygote", NULL, -1, methods,
                                     NULL, NULL, NULL, NULL };

PyMODINIT_FUNC PyInit__hxs_zygote(void);
PyMODINIT_FUNC PyInit__hxs_zygote(void)
{
        return PyModule_Create(&module);
}
