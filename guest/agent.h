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
/* A session's stdin, queued for the program: past the first the channel is not read
 * (the host waits), and a turn of reads takes at most 16 frames more than that. */
#define AGENT_STDIN_HIGH (1u << 20)
#define AGENT_STDIN_QUEUE (AGENT_STDIN_HIGH + 17u * HXP_PAYLOAD_MAX)

#define AGENT_FILES_MAX  10000u        /* MAX_FILES' maximum */

/* Logs one line to the console (the VM's serial port). */
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Queues a frame for the host, keeping room for the control frames that end the
 * conversation: -ENOBUFS when it does not fit now (the caller tries again once the
 * channel took some). */
int agent_send(hxp_type type, const void *payload, size_t len);

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

/* Starts the program described by run (code, stdin size and env already checked),
 * with the files of files_fd (a sealed bundle, ns-files.h; -1: none; the caller's).
 * -errno with err filled when the sandbox could not be set up. */
int run_start(const hxp_run *run, const uint8_t *code, int files_fd, agent_job *ret, hxs_error *err);
/* Kills every process of the sandbox (cgroup.kill). */
void run_kill(agent_job *job);
/* Stops every process of the sandbox where it is (cgroup.freeze), waiting a moment
 * for the kernel to say so: its PID 1 then still holds the working directory, for the
 * files out of a program ended by the sandbox. run_kill after it. */
void run_freeze(agent_job *job);
/* After the sandbox's PID 1 has gone: memory figures from the cgroup. */
void run_stats(agent_job *job, uint32_t *ret_peak_kb, bool *ret_oom);
void run_close(agent_job *job);

uint64_t agent_now_ns(void);

/* ---- files in and out (agent-files.c) ------------------------------------------ */

typedef struct agent_files_in {
        int fd;                 /* the bundle being written (ns-files.h); -1: none yet */
        uint32_t begun;         /* FILE frames taken */
        uint64_t bytes;         /* their sizes, in all */
        uint64_t left;          /* bytes of the current file still to come */
} agent_files_in;

void files_in_reset(agent_files_in *in);
/* RUN's files fields within the agent's bounds: NULL, or why not. */
const char *files_in_check_run(const hxp_run *run);
/* A FILE frame, a FILE_DATA frame, START: NULL, or why the host broke the rules. */
const char *files_in_file(agent_files_in *in, const hxp_run *run, const hxp_frame *f);
const char *files_in_data(agent_files_in *in, const hxp_frame *f);
const char *files_in_done(agent_files_in *in, const hxp_run *run);

typedef struct agent_files_out {
        bool taken;
        hxs_result res;         /* only files, n_files (files-out.c fills them) */
        size_t next;            /* the file being sent */
        bool begun;             /* its FILE_OUT is queued */
        size_t off;             /* its bytes queued */
} agent_files_out;

/* Once the program has ended and before its PID 1 (pid1) lets go: what files-out.c
 * collects, within RUN's budgets. Once. */
void files_out_take(agent_files_out *out, pid_t pid1, const hxp_run *run);
/* Queues the files' frames as the channel has room; true once all are queued. */
bool files_out_send(agent_files_out *out);
