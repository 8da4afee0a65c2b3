/* SPDX-License-Identifier: Apache-2.0 */
/* What this host offers the microVM backends: doctor's lines about them (KVM, the
 * hypervisors, the guest image), and whether each is usable. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/macro.h"
#include "engine/backend.h"
#include "vm/vm.h"

size_t vm_probe(const hxs_config *cfg, hxs_probe_item *items, size_t max, size_t n)
{
        char why[160];
        bool kvm = vm_kvm_usable(why, sizeof(why));
        n = probe_add(items, max, n, "kvm", kvm ? HXS_PROBE_OK : HXS_PROBE_DEGRADED, "%s%s", why,
                      kvm ? "" : "; microVMs would run under TCG only (SANDBOX_VM_ACCEL=tcg), much slower");
        bool qemu = access(cfg->qemu_bin, X_OK) == 0;
        n = probe_add(items, max, n, "qemu", qemu ? HXS_PROBE_OK : HXS_PROBE_DEGRADED, "%s%s%s", cfg->qemu_bin,
                      qemu ? "" : ": ", qemu ? "" : strerror(errno));
        if (access(cfg->firecracker_bin, X_OK) == 0)
                n = probe_add(items, max, n, "firecracker", HXS_PROBE_OK, "%s", cfg->firecracker_bin);
        else
                n = probe_add(items, max, n, "firecracker", HXS_PROBE_DEGRADED, "%s: %s", cfg->firecracker_bin,
                              strerror(errno));
        static const char *const image_files[] = { "vmlinux", "initramfs.img", "rootfs.ext4" };
        for (size_t i = 0; i < ARRAY_SIZE(image_files); i++) {
                char path[512];
                snprintf(path, sizeof(path), "%s/%s", cfg->vm_image_dir, image_files[i]);
                if (access(path, R_OK) < 0)
                        return probe_add(items, max, n, "vm image", HXS_PROBE_DEGRADED,
                                         "%s: %s (hexr-sandbox image build)", path, strerror(errno));
        }
        return probe_add(items, max, n, "vm image", HXS_PROBE_OK, "%s", cfg->vm_image_dir);
}

/* vm_host_init checks everything a microVM needs and keeps nothing. */
int vm_qemu_usable(const hxs_config *cfg, hxs_error *err)
{
        vm_host h;
        return vm_host_init(&h, cfg, HXS_BACKEND_QEMU, err);
}

int vm_firecracker_usable(const hxs_config *cfg, hxs_error *err)
{
        vm_host h;
        return vm_host_init(&h, cfg, HXS_BACKEND_FIRECRACKER, err);
}
