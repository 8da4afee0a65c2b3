/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a container must give the service for sandboxes to run: hxs_container_check
 * (sandbox.h, docs/deploy.md). Each check names the missing piece and the way to
 * provide it:
 *
 *   capabilities  CAP_SETUID/CAP_SETGID to write a sandbox's id maps to other host
 *                 uids; for warm templates also CAP_SYS_ADMIN (the id maps of user
 *                 namespaces a template creates, which the service does not own),
 *                 CAP_DAC_OVERRIDE (their map files belong to the template's uid) and
 *                 CAP_KILL (templates run as another uid)
 *   uid range     the sandbox, template and downloader uids mapped in our namespace
 *   cgroups       our own cgroup in each hierarchy the engine uses, present and writable
 *   namespaces    user, mount, pid, net, ipc, uts and cgroup namespaces can be made
 *   /proc         a process in a new user and pid namespace can mount its own /proc
 *                 (the kernel refuses while every proc mount here has masked paths)
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "core/macro.h"
#include "core/uids.h"
#include "hexr-sandbox/sandbox.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

static void item(char *msg, size_t cap, size_t *n, const char *fmt, ...) _printf_(4, 5);

static void item(char *msg, size_t cap, size_t *n, const char *fmt, ...)
{
        size_t len = strnlen(msg, cap);
        if (*n > 0 && len + 2 < cap) {
                memcpy(msg + len, "; ", 3);
                len += 2;
        }
        if (len < cap) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(msg + len, cap - len, fmt, ap);
                va_end(ap);
        }
        (*n)++;
}

/* Are we in a container? When so, ret_why says what shows it. */
static bool in_container(char *ret_why, size_t cap)
{
        const char *why = NULL;
        const char *env = getenv("container");

        if (env && env[0])
                why = "the container variable is set";
        else if (access("/run/.containerenv", F_OK) == 0)
                why = "/run/.containerenv exists";
        else if (access("/.dockerenv", F_OK) == 0)
                why = "/.dockerenv exists";
        else if (getenv("KUBERNETES_SERVICE_HOST"))
                why = "KUBERNETES_SERVICE_HOST is set";
        if (why)
                snprintf(ret_why, cap, "%s", why);
        return why != NULL;
}

static bool have_cap(unsigned long long eff, int c)
{
        return (eff >> c) & 1;
}

static void check_caps(const hxs_config *cfg, char *msg, size_t cap, size_t *n)
{
        static const struct {
                int cap;
                const char *name, *flag;
                bool warm_only;
        } need[] = {
                { CAP_SETUID, "CAP_SETUID", "SETUID", false },
                { CAP_SETGID, "CAP_SETGID", "SETGID", false },
                { CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "SYS_ADMIN", true },
                { CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE", "DAC_OVERRIDE", true },
                { CAP_KILL, "CAP_KILL", "KILL", true },
        };
        unsigned long long eff = 0;
        char line[256];
        bool warm = cfg->warm && (cfg->backend == HXS_BACKEND_NAMESPACES || cfg->backend == HXS_BACKEND_AUTO);

        FILE *f = fopen("/proc/self/status", "re");
        if (!f) {
                item(msg, cap, n, "capabilities: cannot read /proc/self/status: %s", strerror(errno));
                return;
        }
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "CapEff: %llx", &eff) == 1)
                        break;
        fclose(f);
        for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
                if (have_cap(eff, need[i].cap) || (need[i].warm_only && !warm))
                        continue;
                if (need[i].warm_only)
                        item(msg, cap, n,
                             "capability %s (warm templates, SANDBOX_WARM=on: add --cap-add %s, or set SANDBOX_WARM=off)",
                             need[i].name, need[i].flag);
                else
                        item(msg, cap, n, "capability %s (add --cap-add %s)", need[i].name, need[i].flag);
        }
}

/* Is [first, first+count) inside one extent of /proc/self/uid_map (or gid_map)? */
static int id_range_mapped(const char *file, unsigned long first, unsigned long count)
{
        char line[128];
        FILE *f = fopen(file, "re");
        if (!f)
                return -errno;
        int found = 0;
        while (fgets(line, sizeof(line), f)) {
                unsigned long inside, outside, len;
                if (sscanf(line, "%lu %lu %lu", &inside, &outside, &len) == 3 && first >= inside &&
                    first + count <= inside + len) {
                        found = 1;
                        break;
                }
        }
        fclose(f);
        return found;
}

static void check_ids(const hxs_config *cfg, char *msg, size_t cap, size_t *n)
{
        static const char *const maps[] = { "/proc/self/uid_map", "/proc/self/gid_map" };
        unsigned long count = PKG_FETCH_UID + 1;

        for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
                int r = id_range_mapped(maps[i], cfg->uid_base, count);
                if (r == 0)
                        item(msg, cap, n,
                             "ids %u..%lu are not mapped in this user namespace (%s): give the container a "
                             "larger id range or set SANDBOX_UID_BASE inside the one it has",
                             cfg->uid_base, cfg->uid_base + count - 1, maps[i]);
        }
}

/* Our cgroup in each hierarchy the engine uses must exist under /sys/fs/cgroup (it
 * does not with the host's cgroup namespace: the runtime mounts only our subtree)
 * and be writable (runtimes mount it read-only). */
static void check_cgroups(char *msg, size_t cap, size_t *n)
{
        static const char *const v1[] = { "memory", "pids", "cpu" };
        char line[600], path[800];
        bool any_v1 = false;
        char v2_own[512] = "";

        FILE *f = fopen("/proc/self/cgroup", "re");
        if (!f) {
                item(msg, cap, n, "cgroups: cannot read /proc/self/cgroup: %s", strerror(errno));
                return;
        }
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                char *ctrl = strchr(line, ':');
                char *own = ctrl ? strchr(ctrl + 1, ':') : NULL;
                if (!own)
                        continue;
                *own++ = '\0';
                ctrl++;
                if (ctrl[0] == '\0') {
                        snprintf(v2_own, sizeof(v2_own), "%s", own);
                        continue;
                }
                for (size_t i = 0; i < ARRAY_SIZE(v1); i++) {
                        /* "cpu,cpuacct" or "memory" */
                        char list[128];
                        snprintf(list, sizeof(list), ",%s,", ctrl);
                        char want[32];
                        snprintf(want, sizeof(want), ",%s,", v1[i]);
                        if (!strstr(list, want))
                                continue;
                        any_v1 = true;
                        snprintf(path, sizeof(path), "%s/%s%s", CGROUP_ROOT, v1[i], strcmp(own, "/") ? own : "");
                        if (access(path, F_OK) < 0)
                                item(msg, cap, n,
                                     "cgroup %s: %s (this container shares the host's cgroup namespace: run it with "
                                     "a private one, --cgroupns=private)", path, strerror(errno));
                        else if (access(path, W_OK) < 0)
                                item(msg, cap, n,
                                     "cgroup %s is not writable: %s (the runtime mounts cgroups read-only; the image's "
                                     "entrypoint remounts this container's own subtree writable when it starts with "
                                     "CAP_SYS_ADMIN and CAP_SETPCAP)", path, strerror(errno));
                }
        }
        fclose(f);
        if (any_v1 || !v2_own[0])
                return;
        snprintf(path, sizeof(path), "%s%s", CGROUP_ROOT, strcmp(v2_own, "/") ? v2_own : "");
        if (access(path, W_OK) < 0)
                item(msg, cap, n, "cgroup %s is not writable: %s (with a private cgroup namespace, the image's "
                     "entrypoint remounts it writable when it starts with CAP_SYS_ADMIN and CAP_SETPCAP)",
                     path, strerror(errno));
}

/* In a child: new namespaces as a sandbox gets them, then (as PID 1 of the new pid
 * namespace) a private /proc the way a sandbox mounts it. Reports the step that
 * failed and its errno through the pipe. */
enum { STEP_OK, STEP_UNSHARE, STEP_FORK, STEP_PRIVATE, STEP_PROC };

static _Noreturn void probe_child(int wfd)
{
        int report[2] = { STEP_OK, 0 };
        int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                    CLONE_NEWUTS | CLONE_NEWCGROUP;

        if (unshare(flags) < 0) {
                report[0] = STEP_UNSHARE;
                report[1] = errno;
        } else {
                pid_t pid = fork();
                if (pid < 0) {
                        report[0] = STEP_FORK;
                        report[1] = errno;
                } else if (pid == 0) {
                        int r[2] = { STEP_OK, 0 };
                        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                                r[0] = STEP_PRIVATE;
                                r[1] = errno;
                        } else if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                         "hidepid=invisible,subset=pid") < 0 &&
                                   mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
                                r[0] = STEP_PROC;
                                r[1] = errno;
                        }
                        _exit(write(wfd, r, sizeof(r)) == sizeof(r) ? 0 : 1);
                } else {
                        int st;
                        (void)waitpid(pid, &st, 0);
                        _exit(0);
                }
        }
        _exit(write(wfd, report, sizeof(report)) == sizeof(report) ? 0 : 1);
}

static void check_namespaces(char *msg, size_t cap, size_t *n)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                item(msg, cap, n, "namespaces: pipe: %s", strerror(errno));
                return;
        }
        pid_t pid = fork();
        if (pid < 0) {
                item(msg, cap, n, "namespaces: fork: %s", strerror(errno));
                close(p[0]);
                close(p[1]);
                return;
        }
        if (pid == 0) {
                close(p[0]);
                probe_child(p[1]);
        }
        close(p[1]);
        int report[2] = { -1, 0 };
        ssize_t got;
        do
                got = read(p[0], report, sizeof(report));
        while (got < 0 && errno == EINTR);
        close(p[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (got != sizeof(report)) {
                item(msg, cap, n, "namespaces: the probe process did not report");
                return;
        }
        switch (report[0]) {
        case STEP_OK:
                return;
        case STEP_UNSHARE:
                item(msg, cap, n,
                     "namespaces: cannot create user, mount, pid and net namespaces: %s (the runtime's seccomp "
                     "profile or a sysctl such as user.max_user_namespaces forbids them)",
                     strerror(report[1]));
                return;
        case STEP_PROC:
                item(msg, cap, n,
                     "/proc: a sandbox cannot mount its own /proc: %s (every proc mount of this container has "
                     "masked paths; the image's entrypoint mounts a visible one when it starts with CAP_SYS_ADMIN, "
                     "or run with --security-opt unmask=/proc/*)",
                     strerror(report[1]));
                return;
        default:
                item(msg, cap, n, "namespaces: setting up a test sandbox failed (step %d): %s", report[0],
                     strerror(report[1]));
                return;
        }
}

bool hxs_container_check(const hxs_config *cfg, hxs_container_report *ret)
{
        size_t n = 0;

        *ret = (hxs_container_report){ 0 };
        if (!in_container(ret->why, sizeof(ret->why)))
                return false;
        check_caps(cfg, ret->lacks, sizeof(ret->lacks), &n);
        check_ids(cfg, ret->lacks, sizeof(ret->lacks), &n);
        check_cgroups(ret->lacks, sizeof(ret->lacks), &n);
        check_namespaces(ret->lacks, sizeof(ret->lacks), &n);
        ret->missing = n;
        return n > 0;
}
