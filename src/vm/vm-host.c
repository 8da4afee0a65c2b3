/* SPDX-License-Identifier: Apache-2.0 */
/* What the microVM backend needs from the host, checked once at start-up. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "vm/vm.h"

/* Runs a few real-mode instructions in a throw-away VM: `out` of 0x42 to port 0x10,
 * then `hlt`. /dev/kvm answering its API version is not enough: some hosts expose a
 * KVM (PVM, for one) that cannot run an ordinary guest kernel, and a VM would hang at
 * boot. 0 when the guest ran as it should, else a reason in why. */
static int kvm_run_probe(int kvm, char *why, size_t why_size)
{
        static const uint8_t code[] = { 0xb0, 0x42, 0xe6, 0x10, 0xf4 }; /* mov $0x42,%al; out %al,$0x10; hlt */
        int vm = -1, vcpu = -1, r = -1;
        void *mem = MAP_FAILED, *run = MAP_FAILED;
        long run_size = 0;

        vm = ioctl(kvm, KVM_CREATE_VM, 0);
        if (vm < 0) {
                snprintf(why, why_size, "KVM_CREATE_VM: %s", strerror(errno));
                goto out;
        }
        mem = mmap(NULL, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
                goto fail_errno;
        memcpy((uint8_t *)mem + 0x1000, code, sizeof(code));
        struct kvm_userspace_memory_region region = { .slot = 0, .guest_phys_addr = 0,
                                                      .memory_size = 0x2000,
                                                      .userspace_addr = (uint64_t)(uintptr_t)mem };
        if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
                goto fail_errno;
        vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
        run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
        if (vcpu < 0 || run_size <= 0)
                goto fail_errno;
        run = mmap(NULL, (size_t)run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
        if (run == MAP_FAILED)
                goto fail_errno;
        struct kvm_sregs sregs;
        if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0)
                goto fail_errno;
        sregs.cs.base = 0;
        sregs.cs.selector = 0;
        if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0)
                goto fail_errno;
        struct kvm_regs regs = { .rip = 0x1000, .rflags = 0x2 };
        if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0)
                goto fail_errno;
        struct kvm_run *kr = run;
        bool saw_out = false;
        for (int i = 0; i < 4; i++) {
                if (ioctl(vcpu, KVM_RUN, 0) < 0)
                        goto fail_errno;
                if (kr->exit_reason == KVM_EXIT_IO && kr->io.direction == KVM_EXIT_IO_OUT &&
                    kr->io.port == 0x10 && kr->io.size == 1 &&
                    *((uint8_t *)run + kr->io.data_offset) == 0x42) {
                        saw_out = true;
                        continue;
                }
                if (kr->exit_reason == KVM_EXIT_HLT && saw_out) {
                        r = 0;
                        goto out;
                }
                break;
        }
        snprintf(why, why_size, "/dev/kvm cannot run an ordinary guest (a test VM stopped with exit "
                 "reason %u; a paravirtual KVM such as PVM?)", kr->exit_reason);
        goto out;
fail_errno:
        snprintf(why, why_size, "/dev/kvm: a test VM failed: %s", strerror(errno));
out:
        if (run != MAP_FAILED)
                munmap(run, (size_t)run_size);
        if (mem != MAP_FAILED)
                munmap(mem, 0x2000);
        if (vcpu >= 0)
                close(vcpu);
        if (vm >= 0)
                close(vm);
        return r;
}

/* Hardware virtualisation as the CPU reports it (vmx: Intel VT-x, svm: AMD-V). A KVM
 * without it is a paravirtual one (PVM) that runs only guests built for it. */
static bool cpu_has_virt(void)
{
        FILE *f = fopen("/proc/cpuinfo", "re");
        if (!f)
                return false;
        char line[4096];
        bool found = false;
        while (!found && fgets(line, sizeof(line), f))
                if (strncmp(line, "flags", 5) == 0)
                        found = strstr(line, " vmx") || strstr(line, " svm");
        fclose(f);
        return found;
}

static bool kvm_check(char *why, size_t why_size)
{
        if (access("/dev/kvm", F_OK) == 0 && !cpu_has_virt()) {
                snprintf(why, why_size, "/dev/kvm is there but the CPU shows no vmx/svm: a paravirtual "
                         "KVM (such as PVM) that cannot boot the guest kernel");
                return false;
        }
        int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                snprintf(why, why_size, "/dev/kvm: %s", strerror(errno));
                return false;
        }
        int v = ioctl(fd, KVM_GET_API_VERSION, 0);
        int e = errno;
        if (v != KVM_API_VERSION) {
                close(fd);
                snprintf(why, why_size, "/dev/kvm: KVM_GET_API_VERSION gave %d (%s)", v,
                         v < 0 ? strerror(e) : "unexpected version");
                return false;
        }
        int r = kvm_run_probe(fd, why, why_size);
        close(fd);
        if (r < 0)
                return false;
        snprintf(why, why_size, "/dev/kvm runs guests");
        return true;
}

/* Checked once per process: the auto choice, vm_host_init and doctor all ask, and the
 * check boots a test VM. */
bool vm_kvm_usable(char *why, size_t why_size)
{
        static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        static int usable = -1;
        static char reason[200];
        pthread_mutex_lock(&mu);
        if (usable < 0)
                usable = kvm_check(reason, sizeof(reason));
        snprintf(why, why_size, "%s", reason);
        bool r = usable;
        pthread_mutex_unlock(&mu);
        return r;
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
                return err_fail_field(err, HXS_ERR_INVALID, -ENAMETOOLONG, "SANDBOX_VM_IMAGE_DIR",
                                      "SANDBOX_VM_IMAGE_DIR: path too long");
        if (access(out, R_OK) < 0)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -ENOENT, "SANDBOX_VM_IMAGE_DIR",
                                      "SANDBOX_VM_IMAGE_DIR: %s: %s (build the guest image with "
                                      "`hexr-sandbox image build`)", out, strerror(errno));
        return 0;
}

uint32_t vm_vmm_uid(const hxs_config *cfg, hxs_backend_kind kind)
{
        return cfg->uid_base + (kind == HXS_BACKEND_FIRECRACKER ? VM_FIRECRACKER_UID : VM_QEMU_UID);
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
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -ENOENT, bin_env, "%s: %s: %s",
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
                        return err_fail_field(err, HXS_ERR_UNSUPPORTED, -ENODEV, "SANDBOX_VM_ACCEL",
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
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -ENODEV, "SANDBOX_BACKEND",
                                      "SANDBOX_BACKEND: firecracker needs KVM (%s)", why);
        h->tsc_khz = host_tsc_khz();
        h->vmm_uid = vm_vmm_uid(cfg, kind);
        if (kind != HXS_BACKEND_FIRECRACKER)
                return vm_qemu_jail_files(h, err);
        return 0;
}
