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

/* The runtimes of the manifest in the root the backend runs: each interpreter and
 * each Python distribution with its version. What the namespace backend's health check
 * requires (the interpreters, the distributions) is MISSING when absent; a microVM
 * image is fixed when built, so what it lacks is only reported. */
static size_t probe_runtimes(const hxs_config *cfg, hxs_backend_kind backend, hxs_probe_item *items, size_t max,
                             size_t n, bool *runnable)
{
        hxs_runtime_info ri;
        hxs_error err = { 0 };
        if (hxs_runtime_info_load(cfg, backend, &ri, &err) < 0)
                return add(items, max, n, "runtimes", HXS_PROBE_MISSING, "%s", err.message);
        bool vm = backend == HXS_BACKEND_QEMU || backend == HXS_BACKEND_FIRECRACKER;
        hxs_probe_status absent = vm ? HXS_PROBE_DEGRADED : HXS_PROBE_MISSING;
        const char *fix = vm ? "not in the guest image: hexr-sandbox image build --force" : "scripts/setup.sh installs it";
        for (hxs_language l = 0; l < HXS_LANG_MAX; l++) {
                const char *deb = "", *deb_version = "?";
                for (size_t i = 0; i < ri.n; i++)
                        if (ri.pkgs[i].interpreter && ri.pkgs[i].language == l) {
                                deb = ri.pkgs[i].debian;
                                if (ri.pkgs[i].debian_version[0])
                                        deb_version = ri.pkgs[i].debian_version;
                        }
                char path[512];
                snprintf(path, sizeof(path), "%s%s", cfg->rootfs, ri.interpreter[l]);
                if (!vm && access(path, X_OK) < 0) {
                        n = add(items, max, n, hxs_language_name(l), HXS_PROBE_MISSING, "%s: %s (Debian package %s)",
                                path, strerror(errno), deb);
                        *runnable = false;
                } else {
                        n = add(items, max, n, hxs_language_name(l), HXS_PROBE_OK, "%s %s (Debian %s %s)",
                                ri.version[l][0] ? ri.version[l] : "(version unknown)", ri.interpreter[l], deb,
                                deb_version);
                }
        }
        for (size_t i = 0; i < ri.n; i++) {
                const hxs_runtime_package *p = &ri.pkgs[i];
                if (!p->distribution[0])
                        continue;
                char name[48];
                snprintf(name, sizeof(name), "python: %s", p->distribution);
                if (p->version[0]) {
                        n = add(items, max, n, name, HXS_PROBE_OK, "%s (import %s; Debian %s %s)", p->version,
                                p->import_name, p->debian, p->debian_version[0] ? p->debian_version : "?");
                } else {
                        n = add(items, max, n, name, absent, "absent (Debian package %s; %s)", p->debian, fix);
                        if (!vm)
                                *runnable = false;
                }
        }
        return add(items, max, n, "versions from", HXS_PROBE_OK, "%s", ri.source);
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
        return probe_runtimes(cfg, *ret_backend, items, max, n, ret_runnable);
}
