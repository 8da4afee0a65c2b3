/* SPDX-License-Identifier: Apache-2.0 */
/* The guest agent: PID 1 of a microVM. agent.c speaks the protocol (src/proto),
 * agent-boot.c turns the bare kernel into a machine with a root filesystem and a
 * channel to the host, agent-run.c runs one program the way the namespace backend
 * does (it calls the same ns_child_main) inside a cgroup of the guest. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hexr-sandbox/sandbox.h"
#include "proto/proto.h"

/* Bounds on what the host may send, whatever it claims in RUN. */
#define AGENT_CODE_MAX   (64u << 20)
#define AGENT_STDIN_MAX  (64u << 20)
#define AGENT_ENV_BYTES  (1u << 20)

/* Logs one line to the console (the VM's serial port). */
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- boot (agent-boot.c) ---------------------------------------------------- */

typedef struct agent_boot {
        char port_name[128];    /* hexr.port=: name of the virtio-serial port */
        unsigned vsock_port;    /* hexr.vsock=: listen on AF_VSOCK instead (0: no) */
} agent_boot;

/* hexr.verbose on the kernel command line: boot steps are logged with the time since
 * the kernel started. */
extern bool agent_verbose;
void agent_mark(const char *step);

/* Mounts, modules, the read-only root; the caller is then inside the real root.
 * On failure fills err and returns -errno. */
int boot_machine(agent_boot *ret, hxs_error *err);
/* The channel to the host: an open virtio port (O_NONBLOCK), or a listening vsock
 * socket (*ret_listening = true). */
int boot_channel(const agent_boot *b, int *ret_fd, bool *ret_listening, hxs_error *err);
/* Flushes the disks and powers the VM off (QEMU runs with -no-reboot). */
_Noreturn void boot_poweroff(void);

/* ---- one execution (agent-run.c) ------------------------------------------- */

typedef struct agent_job {
        pid_t pid;              /* PID 1 of the sandbox */
        int pidfd;
        int stdin_fd, stdout_fd, stderr_fd, report_fd, sync_fd; /* ours; -1 when closed */
        int cg_fd;
        int psi_fd;             /* memory.pressure trigger: POLLPRI when it thrashes */
        uint64_t started_ns;
} agent_job;

/* Starts the program described by run (code, stdin size and env already checked).
 * -errno with err filled when the sandbox could not be set up. */
int run_start(const hxp_run *run, const uint8_t *code, agent_job *ret, hxs_error *err);
/* Kills every process of the sandbox (cgroup.kill). */
void run_kill(agent_job *job);
/* After the sandbox's PID 1 has gone: memory figures from the cgroup. */
void run_stats(agent_job *job, uint32_t *ret_peak_kb, bool *ret_oom);
void run_close(agent_job *job);

uint64_t agent_now_ns(void);
