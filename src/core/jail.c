/* SPDX-License-Identifier: Apache-2.0 */
/* The between-clone-and-exec steps every host process of the service takes (jail.h):
 * raw system calls only, so that a clone of a threaded process may run them. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/macro.h"
#include "core/jail.h"

#define CAP_LAST 63 /* the bounding set's loop ends at EINVAL, or here */

static const char *const step_text[JAIL_STEP_MAX] = {
        [JAIL_CGROUP] = "joining its cgroups",
        [JAIL_FDS] = "arranging its descriptors",
        [JAIL_CLOSE] = "closing the other descriptors",
        [JAIL_PDEATHSIG] = "PR_SET_PDEATHSIG",
        [JAIL_RLIMITS] = "setting resource limits",
        [JAIL_BOUNDING] = "dropping capabilities from the bounding set",
        [JAIL_SETID] = "switching to its uid",
        [JAIL_CAPS] = "dropping capabilities",
        [JAIL_NNP] = "PR_SET_NO_NEW_PRIVS",
        [JAIL_EXEC] = "executing the binary",
};

const char *jail_step_text(int step)
{
        return step >= 0 && step < JAIL_STEP_MAX ? step_text[step] : NULL;
}

static int neg_errno(long r)
{
        return r < 0 ? negative_errno() : 0;
}

void jail_say(int fd, const char *who, const char *what, const char *path, int err)
{
        char num[16], *p = num + sizeof(num);
        unsigned e = err > 0 ? (unsigned)err : 0;
        do
                *--p = (char)('0' + e % 10);
        while ((e /= 10) && p > num);
        const char *parts[] = { "hexr-sandbox: ", who, ": ", what, path ? " " : "", path ? path : "",
                                ": errno ", p, "\n" };
        for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
                size_t n = parts[i] == p ? (size_t)(num + sizeof(num) - p) : strlen(parts[i]);
                if (write(fd, parts[i], n) < 0)
                        return;
        }
}

_Noreturn void jail_fail(int fd, int step, int r, int status)
{
        jail_report rep = { .step = step, .err = r < 0 ? -r : EIO };
        if (fd >= 0)
                (void)!write(fd, &rep, sizeof(rep));
        _exit(status);
}

int jail_join_v1(const int *tasks, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (tasks[i] >= 0 && write(tasks[i], "0", 1) != 1)
                        return negative_errno();
        return 0;
}

int jail_arrange_fds(const int *fds, unsigned n, unsigned cloexec_from)
{
        int src[16];
        if (n > ARRAY_SIZE(src))
                return -EINVAL;
        for (unsigned i = 0; i < n; i++) {
                src[i] = fds[i];
                if (src[i] >= 0 && (unsigned)src[i] < n && (src[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, (int)n)) < 0)
                        return negative_errno();
        }
        for (unsigned i = 0; i < n; i++) {
                if (src[i] < 0) {
                        (void)close((int)i);
                        continue;
                }
                /* dup3 clears CLOEXEC on the copy unless asked */
                if (dup3(src[i], (int)i, i >= cloexec_from ? O_CLOEXEC : 0) < 0)
                        return negative_errno();
        }
        return 0;
}

int jail_close_from(unsigned from, bool at_exec)
{
        return neg_errno(syscall(SYS_close_range, from, ~0U, at_exec ? CLOSE_RANGE_CLOEXEC : 0));
}

int jail_close_all_except(const int *keep, size_t n)
{
        int sorted[16];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                if (keep[i] < 0)
                        continue;
                if (m == ARRAY_SIZE(sorted))
                        return -EINVAL;
                sorted[m++] = keep[i];
        }
        for (size_t i = 1; i < m; i++)
                for (size_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
                        int t = sorted[j];
                        sorted[j] = sorted[j - 1];
                        sorted[j - 1] = t;
                }
        unsigned from = 0;
        for (size_t i = 0; i < m; i++) {
                if ((unsigned)sorted[i] > from &&
                    syscall(SYS_close_range, from, (unsigned)sorted[i] - 1, 0) < 0)
                        return negative_errno();
                from = (unsigned)sorted[i] + 1;
        }
        return neg_errno(syscall(SYS_close_range, from, ~0U, 0));
}

int jail_pdeathsig(pid_t parent, int parent_fd)
{
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return negative_errno();
        if (parent > 0 && (pid_t)syscall(SYS_getppid) != parent)
                return -ESRCH;
        if (parent_fd >= 0) {
                struct pollfd pfd = { .fd = parent_fd, .events = POLLIN };
                if (poll(&pfd, 1, 0) < 0)
                        return negative_errno();
                /* a pipe's write end reports POLLERR once no reader is left */
                if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))
                        return -ESRCH;
        }
        return 0;
}

int jail_rlimits(const jail_rlimit *limits, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct rlimit rl = { limits[i].value, limits[i].value };
                if (syscall(SYS_prlimit64, 0, limits[i].resource, &rl, NULL) < 0)
                        return negative_errno();
        }
        return 0;
}

int jail_drop_bounding(uint64_t keep, bool best_effort)
{
        for (int cap = 0; cap <= CAP_LAST; cap++) {
                if (keep & (UINT64_C(1) << cap))
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
                        if (errno == EINVAL)
                                break; /* past the kernel's last capability */
                        if (!(best_effort && errno == EPERM))
                                return negative_errno();
                }
        }
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return negative_errno();
        return 0;
}

int jail_become(uint32_t uid, uint32_t gid, bool keep_caps)
{
        if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, gid, gid, gid) < 0)
                return negative_errno();
        if (keep_caps && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                return negative_errno();
        if (syscall(SYS_setresuid, uid, uid, uid) < 0)
                return negative_errno();
        if (keep_caps && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
                return negative_errno();
        return 0;
}

int jail_set_caps(uint64_t keep)
{
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        uint32_t lo = (uint32_t)keep, hi = (uint32_t)(keep >> 32);
        struct __user_cap_data_struct data[2] = {
                { .effective = lo, .permitted = lo, .inheritable = lo },
                { .effective = hi, .permitted = hi, .inheritable = hi },
        };
        if (syscall(SYS_capset, &hdr, data) < 0)
                return negative_errno();
        if (!keep)
                return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL
                               ? negative_errno() : 0;
        for (int cap = 0; cap <= CAP_LAST; cap++)
                if ((keep & (UINT64_C(1) << cap)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
                        return negative_errno();
        return 0;
}

int jail_no_new_privs(void)
{
        return neg_errno(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
}
