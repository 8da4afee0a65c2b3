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

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "hexr-sandbox/sandbox.h"
#include "core/uids.h"
#include "core/cgroup.h"
#include "proto/proto.h"

/* Guest memory on top of the program's memory_mb: kernel, agent, page tables. */
#define VM_OVERHEAD_MB    128u
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
        uint32_t vmm_uid;               /* host uid of the hypervisor: VM_QEMU_UID or VM_FIRECRACKER_UID */
        char state_dir[256];            /* Firecracker jails live below */
        cg_layout *cg;                  /* the engine's, every hypervisor's cgroup is made in */
        /* QEMU only: what its jail holds (qemu-jail.c) */
        char exec_path[PATH_MAX];       /* QEMU_BIN with links resolved: executed in the jail */
        char jail[16384];               /* "<type><host path>\0"..., "\0": 'f' a file, 'd' a directory */
        size_t jail_len;
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
        /* the hypervisor's cgroups (vm_cgroup_create) */
        cg_exec cg;
        bool have_cg;
        /* Firecracker only: the jail directory to remove */
        char jail[300];
} vm_instance;

/* ---- host (vm-host.c) --------------------------------------------------------- */

/* Fills h from cfg: image files present, hypervisor executable, accelerator usable.
 * -errno with err naming the setting that is wrong. */
int vm_host_init(vm_host *h, const hxs_config *cfg, hxs_backend_kind kind, hxs_error *err);
/* The host uid the hypervisor of this backend runs as (see the uid layout above). */
uint32_t vm_vmm_uid(const hxs_config *cfg, hxs_backend_kind kind);
/* Is /dev/kvm there and answering KVM_GET_API_VERSION? (errno-style reason in why) */
bool vm_kvm_usable(char *why, size_t why_size);

/* ---- what this host offers (vm-probe.c) -------------------------------------- */

/* doctor's lines: KVM, QEMU, Firecracker, the guest image. */
size_t vm_probe(const hxs_config *cfg, hxs_probe_item *items, size_t max, size_t n);
/* Whether vm_host_init would succeed for that backend: 0, or its error. */
int vm_qemu_usable(const hxs_config *cfg, hxs_error *err);
int vm_firecracker_usable(const hxs_config *cfg, hxs_error *err);

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
 * thread). 0, or -ETIMEDOUT, -EPIPE (the VM died; err quotes its stderr), -EPROTO (the
 * agent reported an error) or -EBADMSG, with err filled. */
int vm_wait_ready(vm_instance *v, int timeout_ms, hxs_error *err);

/* ---- the files of one execution (vm-files.c) ---------------------------------- */

/* The request's files in, as frames: FILE, its FILE_DATA, ..., then START. */
typedef struct vm_files_tx {
        size_t next;                    /* the file being sent */
        bool begun;                     /* its FILE frame went */
        uint64_t off;                   /* its bytes sent */
        bool done;                      /* START went */
} vm_files_tx;
/* Writes the next frame into buf (HXP_FRAME_MAX bytes): its size; 0 once START went;
 * -errno when a staged file cannot be read. */
long vm_files_next_frame(vm_files_tx *t, const hxs_request *req, uint8_t *buf);

/* The guest's files out, as they arrive. */
typedef struct vm_files_rx {
        uint64_t left;                  /* bytes of the last file still to come */
        uint64_t bytes;                 /* announced, in all: within MAX_RETURN_BYTES */
} vm_files_rx;
/* A FILE_OUT or FILE_DATA frame into res->files: 0; -EBADMSG when the guest broke a
 * rule or a budget (the caller ends the execution); -ENOMEM. */
int vm_files_receive(vm_files_rx *rx, const hxp_frame *f, const hxs_request *req, const hxs_config *cfg,
                     hxs_result *res);
/* At EXIT: a file whose bytes did not all come is dropped. */
void vm_files_end(vm_files_rx *rx, hxs_result *res);

/* ---- the hypervisor process, for every driver (vm-hypervisor.c) --------------- */

/* Appends the hypervisor's stderr (what it said before dying) to buf. */
void vm_stderr_text(vm_instance *v, char *buf, size_t size);

/* Creates a cgroup with these limits in the engine's layout (h->cg): memory (guest
 * RAM plus the VMM's own), pids and a CPU share, joined at birth (see core/cgroup.h),
 * killed and removed with the VM. name gets its "<instance>-<seq>" (may be NULL). */
int vm_cgroup_create(const vm_host *h, const cg_limits *lim, cg_exec *ret, char *name, size_t name_size,
                     hxs_error *err);
/* Kills what is left in v->cg and removes it. Idempotent. */
void vm_cgroup_destroy(vm_instance *v);

/* ---- drivers ------------------------------------------------------------------ */

int vm_qemu_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *v, hxs_error *err);
/* Fills h->exec_path and h->jail: the host files QEMU's jail binds (qemu-jail.c). */
int vm_qemu_jail_files(vm_host *h, hxs_error *err);
int vm_firecracker_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *v, hxs_error *err);
void vm_firecracker_cleanup(vm_instance *v);

/* ---- cold starts off the event loop (vm-spawner.c) ---------------------------- */

typedef struct vm_spawner vm_spawner;
typedef struct vm_spawn_job vm_spawn_job;

int vm_spawner_new(const vm_host *h, vm_spawner **ret, hxs_error *err);
/* Waits for the starts under way (their VMs are destroyed). NULL is fine. */
void vm_spawner_free(vm_spawner *s);
/* Queues the start of a VM of ram_mb. *ret_fd (the job's) becomes readable when it is
 * done; then vm_spawn_job_take, or else vm_spawn_job_abandon. */
int vm_spawner_submit(vm_spawner *s, uint32_t ram_mb, vm_spawn_job **ret, int *ret_fd, hxs_error *err);
/* Once the fd was readable: 0 with the VM moved into *ret, or vm_spawn's -errno with
 * err filled; the job is freed either way. -EAGAIN (and nothing freed) if not done. */
int vm_spawn_job_take(vm_spawn_job *j, vm_instance *ret, hxs_error *err);
/* The execution ended first: the VM is destroyed as soon as it exists. NULL is fine. */
void vm_spawn_job_abandon(vm_spawn_job *j);

/* ---- pool (vm-pool.c) --------------------------------------------------------- */

typedef struct vm_pool vm_pool;

/* Keeps up to size VMs of ram_mb booted and READY, within budget_mb of guest RAM,
 * refilled by a thread. size 0: no pool (returns 0 with *ret NULL). */
int vm_pool_new(const vm_host *h, uint32_t size, uint32_t budget_mb, uint32_t ram_mb,
                vm_pool **ret, hxs_error *err);
void vm_pool_free(vm_pool *p);
/* Hands out a ready VM of at least ram_mb (moved into *ret). -EAGAIN if none. */
int vm_pool_take(vm_pool *p, uint32_t ram_mb, vm_instance *ret);
/* How it stands; ret_last_error gets why the last failed boot failed ("" if none). */
void vm_pool_state(vm_pool *p, unsigned *ret_ready, unsigned *ret_target,
                   unsigned long *ret_booted, unsigned long *ret_failed, char *ret_last_error, size_t size);
