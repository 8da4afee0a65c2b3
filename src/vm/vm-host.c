/* SPDX-License-Identifier: Apache-2.0 */
/* What the microVM backend needs from the host, checked once at start-up. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/error.h"
#include "vm/vm.h"

bool vm_kvm_usable(char *why, size_t why_size)
{
        int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                snprintf(why, why_size, "/dev/kvm: %s", strerror(errno));
                return false;
        }
        int v = ioctl(fd, KVM_GET_API_VERSION, 0);
        int e = errno;
        close(fd);
        if (v != KVM_API_VERSION) {
                snprintf(why, why_size, "/dev/kvm: KVM_GET_API_VERSION gave %d (%s)", v,
                         v < 0 ? strerror(e) : "unexpected version");
                return false;
        }
        snprintf(why, why_size, "/dev/kvm usable");
        return true;
}

/* The guest's TSC under TCG runs at the host's rate; without tsc_early_khz the guest
 * kernel hangs calibrating it. A hypervisor reports the rate as "cpu MHz". */
static unsigned long host_tsc_khz(void)
{
        FILE *f = fopen("/proc/cpuinfo", "re");
        if (!f)
                return 0;
        char line[256];
        unsigned long khz = 0;
        while (fgets(line, sizeof(line), f)) {
                double mhz;
                if (sscanf(line, "cpu MHz : %lf", &mhz) == 1 && mhz > 1.0 && mhz < 100000.0) {
                        khz = (unsigned long)(mhz * 1000.0 + 0.5);
                        break;
                }
        }
        fclose(f);
        return khz;
}

static int need_file(const char *dir, const char *name, char *out, size_t size, hxs_error *err)
{
        int n = snprintf(out, size, "%s/%s", dir, name);
        if (n < 0 || (size_t)n >= size)
                return hxs_fail_field(err, HXS_ERR_INVALID, -ENAMETOOLONG, "SANDBOX_VM_IMAGE_DIR",
                                      "SANDBOX_VM_IMAGE_DIR: path too long");
        if (access(out, R_OK) < 0)
                return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, -ENOENT, "SANDBOX_VM_IMAGE_DIR",
                                      "SANDBOX_VM_IMAGE_DIR: %s: %s (build the guest image with "
                                      "`hexr-sandbox image build`)", out, strerror(errno));
        return 0;
}

int vm_host_init(vm_host *h, const hxs_config *cfg, hxs_backend_kind kind, hxs_error *err)
{
        memset(h, 0, sizeof(*h));
        h->kind = kind;
        const char *bin = kind == HXS_BACKEND_FIRECRACKER ? cfg->firecracker_bin : cfg->qemu_bin;
        const char *bin_env = kind == HXS_BACKEND_FIRECRACKER ? "FIRECRACKER_BIN" : "QEMU_BIN";
        snprintf(h->hypervisor, sizeof(h->hypervisor), "%s", bin);
        snprintf(h->state_dir, sizeof(h->state_dir), "%s", cfg->state_dir);
        if (access(bin, X_OK) < 0)
                return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, -ENOENT, bin_env, "%s: %s: %s",
                                      bin_env, bin, strerror(errno));
        int r = need_file(cfg->vm_image_dir, "vmlinux", h->kernel, sizeof(h->kernel), err);
        if (r == 0)
                r = need_file(cfg->vm_image_dir, "initramfs.img", h->initrd, sizeof(h->initrd), err);
        if (r == 0)
                r = need_file(cfg->vm_image_dir, "rootfs.ext4", h->rootfs, sizeof(h->rootfs), err);
        if (r < 0)
                return r;
        char why[160];
        bool kvm = vm_kvm_usable(why, sizeof(why));
        switch (cfg->vm_accel) {
        case HXS_VM_ACCEL_KVM:
                if (!kvm)
                        return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, -ENODEV, "SANDBOX_VM_ACCEL",
                                              "SANDBOX_VM_ACCEL: kvm asked for, but %s", why);
                h->kvm = true;
                break;
        case HXS_VM_ACCEL_TCG:
                h->kvm = false;
                break;
        case HXS_VM_ACCEL_AUTO:
        case HXS_VM_ACCEL_MAX:
                h->kvm = kvm;
                break;
        }
        if (kind == HXS_BACKEND_FIRECRACKER && !h->kvm)
                return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, -ENODEV, "SANDBOX_BACKEND",
                                      "SANDBOX_BACKEND: firecracker needs KVM (%s)", why);
        h->tsc_khz = host_tsc_khz();
        h->qemu_uid = cfg->uid_base + VM_QEMU_UID;
        return 0;
}
