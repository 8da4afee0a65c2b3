/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor side of a sandbox, once for the engine and the agent (ns-spawn.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/macro.h"
#include "ns/ns-spawn.h"
#include "ns/payload.h"

void ns_pid1_files_open(pid_t pid, ns_pid1_files *f)
{
        static const char *const names[NS_PID1_FILES] = { "uid_map", "gid_map", "oom_score_adj" };
        for (int i = 0; i < NS_PID1_FILES; i++) {
                if (f->fd[i] >= 0)
                        continue;
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, names[i]);
                f->fd[i] = open(path, O_WRONLY | O_CLOEXEC);
        }
}

void ns_pid1_files_close(ns_pid1_files *f)
{
        for (int i = 0; i < NS_PID1_FILES; i++)
                close_fd(&f->fd[i]);
}

static void pid1_filesp(ns_pid1_files *f)
{
        ns_pid1_files_close(f);
}

static int write_fd(int fd, const char *s)
{
        if (fd < 0)
                return -EBADF;
        ssize_t n = write(fd, s, strlen(s));
        return n == (ssize_t)strlen(s) ? 0 : n < 0 ? -errno : -EIO;
}

/* Root of the namespace and the sandbox user, each to a host uid (and gid) of its own. */
static int write_id_maps(const ns_pid1_files *f, uint32_t base, hxs_error *err)
{
        char map[128];
        snprintf(map, sizeof(map), "0 %u 1\n%d %u 1\n", base, NS_SANDBOX_UID, base + NS_SANDBOX_UID);
        int r = write_fd(f->fd[NS_PID1_UID_MAP], map);
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "writing the uid map: %s", strerror(-r));
        r = write_fd(f->fd[NS_PID1_GID_MAP], map);
        if (r < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "writing the gid map: %s", strerror(-r));
        return 0;
}

static int make_pipe(int fds[2])
{
        return pipe2(fds, O_CLOEXEC) < 0 ? -errno : 0;
}

/* The program's stdout and stderr: room for 1 MiB instead of 64 KiB, so that a program
 * printing a lot is not stopped every 64 KiB until the loop has read (the pages are
 * the writer's, charged to the sandbox, and only taken as it writes). Best effort:
 * pipe-max-size may be lower. */
#define OUTPUT_PIPE_BYTES (1 << 20)
static int make_output_pipe(int fds[2])
{
        int r = make_pipe(fds);
        if (r == 0)
                (void)fcntl(fds[1], F_SETPIPE_SZ, OUTPUT_PIPE_BYTES);
        return r;
}

/* The child may have failed first (its root could not be built), and our own step
 * then fails only as a consequence ("No such process", "Broken pipe"): its report
 * says why. It exits at once once its sync pipe is closed, so the wait is short. */
static void prefer_child_reason(const ns_child *c, hxs_error *err)
{
        if (c->pidfd < 0 || c->report_fd < 0)
                return;
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        if (poll(&p, 1, 250) <= 0)
                return;
        p = (struct pollfd){ .fd = c->report_fd, .events = POLLIN };
        if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN))
                return;
        char buf[512];
        ssize_t n = read(c->report_fd, buf, sizeof(buf) - 1);
        if (n < 2 || buf[0] != NS_REPORT_ERROR)
                return;
        buf[n] = '\0';
        err_fail(err, HXS_ERR_SETUP, -EIO, "setting up the sandbox: %s", buf + 1);
}

/* After the clone: the maps, 'm', the cgroups, the OOM score, non-blocking ends. */
static int hand_shake(const ns_spawn_args *a, ns_child *c, ns_pid1_files *files, hxs_error *err)
{
        int r;
        ns_pid1_files_open(c->pid, files); /* what the hook could not open, as ourselves */
        if ((r = write_id_maps(files, a->uid_base, err)) < 0)
                return r;
        /* maps done: the child builds its root while we move it into the cgroups */
        if (write(c->sync_fd, "m", 1) != 1) {
                r = negative_errno();
                return err_fail(err, HXS_ERR_SETUP, r, "starting the sandbox: %s", strerror(-r));
        }
        if (a->place && (r = a->place(a->ctx, c->pid, err)) < 0)
                return r;
        /* PID 1 must outlive the program under memory pressure, so that the status is
         * reported; the program resets its own score. */
        (void)write_fd(files->fd[NS_PID1_OOM], "-1000");
        if ((r = fd_set_nonblock(c->stdout_fd)) < 0 || (r = fd_set_nonblock(c->stderr_fd)) < 0 ||
            (r = fd_set_nonblock(c->report_fd)) < 0 || (c->stdin_fd >= 0 && (r = fd_set_nonblock(c->stdin_fd)) < 0))
                return err_fail(err, HXS_ERR_SETUP, r, "pipes: %s", strerror(-r));
        return 0;
}

int ns_spawn(const ns_spawn_args *a, ns_child *ret, hxs_error *err)
{
        _cleanup_pipe_ int sync_p[2] = { -1, -1 }, report_p[2] = { -1, -1 }, out_p[2] = { -1, -1 },
                           err_p[2] = { -1, -1 }, in_p[2] = { -1, -1 };
        _cleanup_close_ int payload_fd = -1;
        _cleanup_(pid1_filesp) ns_pid1_files files = { { -1, -1, -1 } };
        int r;

        *ret = (ns_child){ .pid = -1, .pidfd = -1, .sync_fd = -1, .report_fd = -1, .stdout_fd = -1,
                           .stderr_fd = -1, .stdin_fd = -1 };
        if ((r = make_pipe(sync_p)) < 0 || (r = make_pipe(report_p)) < 0 || (r = make_output_pipe(out_p)) < 0 ||
            (r = make_output_pipe(err_p)) < 0 || (a->with_stdin && (r = make_pipe(in_p)) < 0))
                return err_fail(err, HXS_ERR_SETUP, r, "creating pipes: %s", strerror(-r));
        if ((payload_fd = payload_create(a->code, a->code_len, a->envp)) < 0)
                return err_fail(err, HXS_ERR_SETUP, payload_fd, "writing the payload: %s", strerror(-payload_fd));

        ns_child_args child = a->child;
        child.payload_fd = payload_fd;
        child.sync_fd = sync_p[0];
        child.report_fd = report_p[1];
        child.stdin_fd = in_p[0];
        child.stdout_fd = out_p[1];
        child.stderr_fd = err_p[1];
        ns_born born = { .pid = -1, .pidfd = -1, .files = { { -1, -1, -1 } } };
        r = a->clone(a->ctx, &child, &born, err);
        files = born.files;
        if (r < 0)
                return r;

        /* the child's ends are the child's now */
        close_fd(&sync_p[0]);
        close_fd(&report_p[1]);
        close_fd(&out_p[1]);
        close_fd(&err_p[1]);
        close_fd(&in_p[0]);
        *ret = (ns_child){ .pid = born.pid, .pidfd = born.pidfd, .sync_fd = TAKE_FD(sync_p[1]),
                           .report_fd = TAKE_FD(report_p[0]), .stdout_fd = TAKE_FD(out_p[0]),
                           .stderr_fd = TAKE_FD(err_p[0]), .stdin_fd = TAKE_FD(in_p[1]) };
        r = hand_shake(a, ret, &files, err);
        if (r < 0)
                ns_child_abort(ret, err);
        return r;
}

void ns_child_abort(ns_child *c, hxs_error *err)
{
        close_fd(&c->sync_fd); /* the child reads EOF and exits, if it is still there */
        prefer_child_reason(c, err);
}

int ns_child_go(ns_child *c, hxs_error *err)
{
        if (write(c->sync_fd, "g", 1) != 1) {
                int r = negative_errno();
                err_fail(err, HXS_ERR_SETUP, r, "starting the sandbox: %s", strerror(-r));
                ns_child_abort(c, err);
                return r;
        }
        return 0;
}

void ns_child_close(ns_child *c)
{
        close_fd(&c->pidfd);
        close_fd(&c->sync_fd);
        close_fd(&c->report_fd);
        close_fd(&c->stdout_fd);
        close_fd(&c->stderr_fd);
        close_fd(&c->stdin_fd);
}

/* The pidfd is taken before the parent is checked, so that a pid reused meanwhile is
 * never signalled. */
void ns_term_program(pid_t pid1)
{
        char p[96], buf[64];
        snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)pid1, (int)pid1);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (n <= 0)
                return;
        buf[n] = '\0';
        pid_t child = (pid_t)strtol(buf, NULL, 10);
        if (child <= 0)
                return;
        _cleanup_close_ int cfd = (int)syscall(SYS_pidfd_open, child, 0);
        if (cfd < 0)
                return;
        snprintf(p, sizeof(p), "/proc/%d/status", (int)child);
        char status[4096];
        _cleanup_close_ int sfd = open(p, O_RDONLY | O_CLOEXEC);
        ssize_t sn = sfd >= 0 ? read(sfd, status, sizeof(status) - 1) : -1;
        if (sn <= 0)
                return;
        status[sn] = '\0';
        const char *pp = strstr(status, "\nPPid:");
        if (!pp || (pid_t)strtol(pp + 7, NULL, 10) != pid1)
                return;
        (void)syscall(SYS_pidfd_send_signal, cfd, SIGTERM, NULL, 0);
}

int ns_home_open(pid_t pid1)
{
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/root", (int)pid1);
        _cleanup_close_ int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int home = (int)syscall(SYS_openat2, root, NS_SANDBOX_HOME + 1, &how, sizeof(how));
        return home < 0 ? -errno : home;
}

int ns_code_fifo_open(pid_t pid1, const char *code_name)
{
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/root", (int)pid1);
        _cleanup_close_ int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        char rel[64];
        snprintf(rel, sizeof(rel), "code/%s", code_name);
        struct open_how how = { .flags = O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISFIFO(st.st_mode))
                return -EINVAL; /* never write the code anywhere else */
        return TAKE_FD(fd);
}
