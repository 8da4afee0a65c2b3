/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The microVM backend: every execution runs in a fresh VM whose PID 1 is the guest
 * agent (guest/agent.c). A VM runs one execution and is destroyed; the pool only
 * boots VMs ahead of time, it never reuses one.
 *
 * The host side of one VM is a hypervisor process (QEMU here, Firecracker where it
 * is installed), reaped through a pidfd, and one byte stream to the agent (a
 * socketpair end that QEMU turns into a virtio-serial port). Drivers differ only in
 * how they start the hypervisor and connect the stream; everything after READY is
 * shared.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "hexr-sandbox/sandbox.h"
#include "ns/cgroup.h"
#include "proto/proto.h"

/* Guest memory on top of the program's memory_mb: kernel, agent, page tables. */
#define VM_OVERHEAD_MB    128u
/* The uid QEMU runs as: SANDBOX_UID_BASE + this (no sandbox or template uses it). */
#define VM_QEMU_UID       3000u
/* The virtio-serial port name the agent looks for (kernel parameter hexr.port). */
#define VM_PORT_NAME      "org.hexr.agent.0"

/* What the host resolved once at start-up. */
typedef struct vm_host {
        hxs_backend_kind kind;          /* QEMU or FIRECRACKER */
        char hypervisor[256];           /* QEMU_BIN or FIRECRACKER_BIN */
        char kernel[300];               /* image dir: vmlinux */
        char initrd[300];               /* image dir: initramfs.img */
        char rootfs[300];               /* image dir: rootfs.ext4 */
        bool kvm;                       /* -accel kvm (else TCG) */
        unsigned long tsc_khz;          /* for tsc_early_khz under TCG; 0 if unknown */
        uint32_t qemu_uid;              /* host uid for QEMU without KVM */
        char state_dir[256];            /* Firecracker jails live below */
} vm_host;

/* One VM, from spawn to destruction. */
typedef struct vm_instance {
        pid_t pid;
        int pidfd;                      /* hypervisor process */
        int chan;                       /* byte stream to the agent, non-blocking */
        int err_fd;                     /* hypervisor's stderr (for failure messages) */
        uint32_t ram_mb;
        uint32_t nonce;
        struct timespec spawned;
        /* incoming frames */
        uint8_t *rbuf;                  /* HXP_FRAME_MAX bytes */
        size_t rlen;                    /* bytes in rbuf */
        size_t roff;                    /* where the next frame starts: rbuf[roff..rlen) is unparsed */
        /* the hypervisor's cgroups (vm-cgroup.c) */
        cg_exec cg;
        bool have_cg;
        /* Firecracker only: the jail directory to remove */
        char jail[300];
} vm_instance;

/* ---- host (vm-host.c) --------------------------------------------------------- */

/* Fills h from cfg: image files present, hypervisor executable, accelerator usable.
 * -errno with err naming the setting that is wrong. */
int vm_host_init(vm_host *h, const hxs_config *cfg, hxs_backend_kind kind, hxs_error *err);
/* Is /dev/kvm there and answering KVM_GET_API_VERSION? (errno-style reason in why) */
bool vm_kvm_usable(char *why, size_t why_size);

/* ---- one VM (vm-instance.c) --------------------------------------------------- */

/* Starts a VM of ram_mb and sends HELLO. The agent answers READY once it has booted
 * (vm_read_frame). On failure nothing is left. */
int vm_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *ret, hxs_error *err);
/* Kills the hypervisor, reaps it, closes everything, removes what it left. Idempotent. */
void vm_destroy(vm_instance *v);
/* The next frame: 1 with a frame in *ret (valid until the next call), 0 when nothing
 * complete is there yet (at most one read() per call, so a caller that loops decides
 * how much it takes per turn), -EPIPE at end of stream, -EBADMSG for a frame that is
 * not valid (the guest is not trusted: the caller destroys the VM). Costs the frame's
 * own size, whatever else is buffered. */
int vm_read_frame(vm_instance *v, hxp_frame *ret);
/* Blocking: waits up to timeout_ms for READY with the right nonce (the pool's
 * thread). 0, -ETIMEDOUT, -EPIPE (the VM died; err_text gets its stderr). */
int vm_wait_ready(vm_instance *v, int timeout_ms, char *err_text, size_t err_size);
/* Appends the hypervisor's stderr (what it said before dying) to buf. */
void vm_stderr_text(vm_instance *v, char *buf, size_t size);

/* ---- the hypervisor's cgroups (vm-cgroup.c) ----------------------------------- */

/* Creates a cgroup with these limits in the layout every VM of the process shares;
 * name gets its "<instance>-<seq>" (may be NULL). */
int vm_cgroup_create(const cg_limits *lim, cg_exec *ret, char *name, size_t name_size, hxs_error *err);
/* Kills what is left in v->cg and removes it. Idempotent. */
void vm_cgroup_destroy(vm_instance *v);

/* ---- drivers ------------------------------------------------------------------ */

int vm_qemu_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *v, hxs_error *err);
int vm_firecracker_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *v, hxs_error *err);
void vm_firecracker_cleanup(vm_instance *v);

/* ---- pool (vm-pool.c) --------------------------------------------------------- */

typedef struct vm_pool vm_pool;

/* Keeps up to size VMs of ram_mb booted and READY, within budget_mb of guest RAM,
 * refilled by a thread. size 0: no pool (returns 0 with *ret NULL). */
int vm_pool_new(const vm_host *h, uint32_t size, uint32_t budget_mb, uint32_t ram_mb,
                vm_pool **ret, hxs_error *err);
void vm_pool_free(vm_pool *p);
/* Hands out a ready VM of at least ram_mb (moved into *ret). -EAGAIN if none. */
int vm_pool_take(vm_pool *p, uint32_t ram_mb, vm_instance *ret);
void vm_pool_state(vm_pool *p, unsigned *ret_ready, unsigned *ret_target,
                   unsigned long *ret_booted, unsigned long *ret_failed);
