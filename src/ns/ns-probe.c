/* SPDX-License-Identifier: Apache-2.0 */
/* What this host offers the namespace backend: doctor's lines about it, and whether
 * it is usable (root, the namespaces, the cgroups, the seccomp filter). */
#include <errno.h>
#include <linux/landlock.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "engine/backend.h"
#include "ns/ns-probe.h"
#include "ns/seccomp.h"

/* Can we create the namespaces a sandbox needs? Tried in a short-lived child. */
static int try_namespaces(void)
{
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
                            CLONE_NEWUTS | CLONE_NEWPID | CLONE_NEWCGROUP;
                _exit(unshare(flags) == 0 ? 0 : 1);
        }
        int st;
        if (waitpid(pid, &st, 0) < 0)
                return -errno;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPERM;
}

/* One line per thing the backend needs; *ok turns false when one is missing. */
static size_t ns_probe_items(hxs_probe_item *items, size_t max, size_t n, const hxs_config *cfg, bool *ok)
{
        char buf[256];
        if (geteuid() == 0)
                n = probe_add(items, max, n, "privileges", HXS_PROBE_OK, "running as root: uid maps to %u..%u",
                              cfg->uid_base, cfg->uid_base + 1000);
        else {
                n = probe_add(items, max, n, "privileges", HXS_PROBE_MISSING,
                              "not root: the namespace backend needs root to map the sandbox to unprivileged host uids and to manage cgroups");
                *ok = false;
        }

        int r = try_namespaces();
        if (r == 0)
                n = probe_add(items, max, n, "namespaces", HXS_PROBE_OK, "user, pid, mount, net, ipc, uts, cgroup");
        else {
                n = probe_add(items, max, n, "namespaces", HXS_PROBE_MISSING,
                              "cannot create user/pid/mount/net namespaces (%s)", strerror(-r));
                *ok = false;
        }

        cg_layout l;
        hxs_error err = { 0 };
        if (cg_layout_init(&l, &err) == 0) {
                cg_layout_describe(&l, buf, sizeof(buf));
                n = probe_add(items, max, n, "cgroups", HXS_PROBE_OK, "%s", buf);
        } else {
                n = probe_add(items, max, n, "cgroups", HXS_PROBE_MISSING, "%s", err.message);
                *ok = false;
        }

        sandbox_filter sc;
        if (sandbox_filter_build(&sc, &err) == 0) {
                n = probe_add(items, max, n, "seccomp", HXS_PROBE_OK, "filter of %u instructions for x86_64, i386, x32",
                              sc.len);
                sandbox_filter_free(&sc);
        } else {
                n = probe_add(items, max, n, "seccomp", HXS_PROBE_MISSING, "%s", err.message);
                *ok = false;
        }

        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi > 0)
                n = probe_add(items, max, n, "landlock", HXS_PROBE_OK,
                              "ABI %ld (available; not needed by the mount-namespace root)", abi);
        else
                n = probe_add(items, max, n, "landlock", HXS_PROBE_DEGRADED, "not available (%s); optional",
                              strerror(errno));
        return n;
}

size_t ns_probe(const hxs_config *cfg, hxs_probe_item *items, size_t max, size_t n)
{
        bool ok = true;
        return ns_probe_items(items, max, n, cfg, &ok);
}

int ns_usable(const hxs_config *cfg, hxs_error *err)
{
        hxs_probe_item items[8];
        bool ok = true;
        size_t n = ns_probe_items(items, ARRAY_SIZE(items), 0, cfg, &ok);
        for (size_t i = 0; i < n && !ok; i++)
                if (items[i].status == HXS_PROBE_MISSING)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, -ENOTSUP, "%s: %s", items[i].name,
                                        items[i].detail);
        return 0;
}
