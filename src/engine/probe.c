/* SPDX-License-Identifier: Apache-2.0 */
/* What this host offers each backend, for `doctor` and for the auto choice. */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include "core/error.h"
#include "core/fileio.h"
#include "engine/engine.h"
#include "vm/vm.h"

static size_t add(hxs_probe_item *items, size_t max, size_t n, const char *name,
                  hxs_probe_status st, const char *fmt, ...) _printf_(6, 7);

static size_t add(hxs_probe_item *items, size_t max, size_t n, const char *name,
                  hxs_probe_status st, const char *fmt, ...)
{
        if (n >= max)
                return n;
        hxs_probe_item *it = &items[n];
        snprintf(it->name, sizeof(it->name), "%s", name);
        it->status = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(it->detail, sizeof(it->detail), fmt, ap);
        va_end(ap);
        return n + 1;
}

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

size_t hxs_probe_host(const hxs_config *cfg, hxs_probe_item *items, size_t max,
                      hxs_backend_kind *ret_backend, bool *ret_runnable)
{
        size_t n = 0;
        bool ns_ok = true;
        char buf[256];

        if (geteuid() == 0)
                n = add(items, max, n, "privileges", HXS_PROBE_OK, "running as root: uid maps to %u..%u",
                        cfg->uid_base, cfg->uid_base + 1000);
        else {
                n = add(items, max, n, "privileges", HXS_PROBE_MISSING,
                        "not root: the namespace backend needs root to map the sandbox to unprivileged host uids and to manage cgroups");
                ns_ok = false;
        }

        int r = try_namespaces();
        if (r == 0)
                n = add(items, max, n, "namespaces", HXS_PROBE_OK, "user, pid, mount, net, ipc, uts, cgroup");
        else {
                n = add(items, max, n, "namespaces", HXS_PROBE_MISSING, "cannot create user/pid/mount/net namespaces (%s)",
                        strerror(-r));
                ns_ok = false;
        }

        cg_layout l;
        hxs_error err = { 0 };
        if (cg_layout_init(&l, &err) == 0) {
                cg_layout_describe(&l, buf, sizeof(buf));
                n = add(items, max, n, "cgroups", HXS_PROBE_OK, "%s", buf);
        } else {
                n = add(items, max, n, "cgroups", HXS_PROBE_MISSING, "%s", err.message);
                ns_ok = false;
        }

        hxs_seccomp sc;
        if (hxs_seccomp_build(&sc, &err) == 0) {
                n = add(items, max, n, "seccomp", HXS_PROBE_OK, "filter of %u instructions for x86_64, i386, x32",
                        sc.len);
                hxs_seccomp_free(&sc);
        } else {
                n = add(items, max, n, "seccomp", HXS_PROBE_MISSING, "%s", err.message);
                ns_ok = false;
        }

        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi > 0)
                n = add(items, max, n, "landlock", HXS_PROBE_OK, "ABI %ld (available; not needed by the mount-namespace root)", abi);
        else
                n = add(items, max, n, "landlock", HXS_PROBE_DEGRADED, "not available (%s); optional", strerror(errno));

        /* microVM backends: KVM, the hypervisors, the guest image */
        char why[160];
        bool kvm = vm_kvm_usable(why, sizeof(why));
        n = add(items, max, n, "kvm", kvm ? HXS_PROBE_OK : HXS_PROBE_DEGRADED, "%s%s", why,
                kvm ? "" : "; microVMs would run under TCG only (SANDBOX_VM_ACCEL=tcg), much slower");
        bool qemu = access(cfg->qemu_bin, X_OK) == 0;
        n = add(items, max, n, "qemu", qemu ? HXS_PROBE_OK : HXS_PROBE_DEGRADED, "%s%s%s", cfg->qemu_bin,
                qemu ? "" : ": ", qemu ? "" : strerror(errno));
        if (access(cfg->firecracker_bin, X_OK) == 0)
                n = add(items, max, n, "firecracker", HXS_PROBE_OK, "%s", cfg->firecracker_bin);
        else
                n = add(items, max, n, "firecracker", HXS_PROBE_DEGRADED, "%s: %s", cfg->firecracker_bin, strerror(errno));
        bool image = true;
        static const char *const image_files[] = { "vmlinux", "initramfs.img", "rootfs.ext4" };
        for (size_t i = 0; i < ARRAY_SIZE(image_files); i++) {
                char path[512];
                snprintf(path, sizeof(path), "%s/%s", cfg->vm_image_dir, image_files[i]);
                if (access(path, R_OK) < 0) {
                        n = add(items, max, n, "vm image", HXS_PROBE_DEGRADED,
                                "%s: %s (hexr-sandbox image build)", path, strerror(errno));
                        image = false;
                        break;
                }
        }
        if (image)
                n = add(items, max, n, "vm image", HXS_PROBE_OK, "%s", cfg->vm_image_dir);
        bool vm_ok = qemu && image;

        static const char *const runtimes[][2] = { { "python", "/usr/bin/python3" },
                                                   { "javascript", "/usr/bin/node" },
                                                   { "bash", "/usr/bin/bash" } };
        for (size_t i = 0; i < ARRAY_SIZE(runtimes); i++) {
                char path[512];
                snprintf(path, sizeof(path), "%s%s", cfg->rootfs, runtimes[i][1]);
                if (access(path, X_OK) == 0)
                        n = add(items, max, n, runtimes[i][0], HXS_PROBE_OK, "%s", path);
                else
                        n = add(items, max, n, runtimes[i][0], HXS_PROBE_DEGRADED, "%s: %s", path, strerror(errno));
        }

        /* the same choice as the engine's: auto takes a microVM only with KVM */
        switch (cfg->backend) {
        case HXS_BACKEND_QEMU:
                *ret_backend = HXS_BACKEND_QEMU;
                *ret_runnable = vm_ok && (kvm || cfg->vm_accel != HXS_VM_ACCEL_KVM);
                break;
        case HXS_BACKEND_FIRECRACKER:
                *ret_backend = HXS_BACKEND_FIRECRACKER;
                *ret_runnable = image && kvm && access(cfg->firecracker_bin, X_OK) == 0;
                break;
        case HXS_BACKEND_AUTO:
                if (vm_ok && kvm) {
                        *ret_backend = HXS_BACKEND_QEMU;
                        *ret_runnable = true;
                        break;
                }
                _fallthrough_;
        case HXS_BACKEND_NAMESPACES:
        case HXS_BACKEND_MAX:
        default:
                *ret_backend = HXS_BACKEND_NAMESPACES;
                *ret_runnable = ns_ok;
                break;
        }
        return n;
}
