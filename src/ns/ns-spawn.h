/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor side of a sandbox, from the pipes to the hand-shake, written once for
 * the namespace backend (cold and warm) and the microVM's agent: the pipes and the
 * payload, the clone (by a hook: the engine clones as the namespace's owner or asks a
 * template, the agent clones into its cgroup), the uid/gid maps, the 'm' byte, the
 * move into the cgroups (a hook again), PID 1's OOM score, and then, once the caller
 * watches the descriptors, the 'g' byte (ns_child_go).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "ns/ns.h"

/* The files of a new sandbox's PID 1 the supervisor writes: its id maps and its OOM
 * score. A hook may open them while it is the namespace's owner (the kernel lets the
 * owner set a namespace's maps without CAP_SYS_ADMIN); what it has not opened,
 * ns_spawn opens as itself. */
enum { NS_PID1_UID_MAP, NS_PID1_GID_MAP, NS_PID1_OOM, NS_PID1_FILES };
typedef struct ns_pid1_files {
        int fd[NS_PID1_FILES];          /* -1: not open */
} ns_pid1_files;
void ns_pid1_files_open(pid_t pid, ns_pid1_files *f);
void ns_pid1_files_close(ns_pid1_files *f);

/* A new sandbox's PID 1, as the clone hook hands it back. */
typedef struct ns_born {
        pid_t pid;
        int pidfd;
        ns_pid1_files files;            /* what the hook could open already */
} ns_born;

typedef struct ns_spawn_args {
        ns_child_args child;            /* everything but the descriptors ns_spawn makes */
        const char *code;               /* the payload (payload.h) */
        size_t code_len;
        char *const *envp;
        bool with_stdin;                /* a pipe for stdin; else the child's is /dev/null */
        uint32_t uid_base;              /* the maps: 0 and NS_SANDBOX_UID to uid_base + the same */
        /* Clones the child, which runs ns_child_main(child) (fds filled in), or has it
         * cloned. 0 and *ret filled, or -errno with err filled. */
        int (*clone)(void *ctx, const ns_child_args *child, ns_born *ret, hxs_error *err);
        /* After the maps and 'm': places the child in its cgroups (NULL: born there). */
        int (*place)(void *ctx, pid_t pid, hxs_error *err);
        void *ctx;
} ns_spawn_args;

/* The supervisor's ends. */
typedef struct ns_child {
        pid_t pid;                      /* -1: none */
        int pidfd;
        int sync_fd;                    /* write: 'g' (ns_child_go); kept open while it runs */
        int report_fd, stdout_fd, stderr_fd; /* read, non-blocking */
        int stdin_fd;                   /* write, non-blocking; -1 without stdin */
} ns_child;

/* Up to, not including, 'g'. On failure after the clone, *ret still holds the child
 * (its sync pipe closed, so it exits): the caller kills and reaps it and closes the
 * rest, and err prefers the child's own reason when it reported one. */
int ns_spawn(const ns_spawn_args *a, ns_child *ret, hxs_error *err);

/* Lets the child run the request; on failure, as ns_child_abort. */
int ns_child_go(ns_child *c, hxs_error *err);

/* Gives up on a spawned child: its sync pipe closed (it exits), and err replaced by
 * the child's own reason when it reported one (a root it could not build makes our
 * next step fail only as a consequence: "Broken pipe"). */
void ns_child_abort(ns_child *c, hxs_error *err);

/* Closes every descriptor of c (the pid stays: reaping is the caller's). */
void ns_child_close(ns_child *c);

/* ---- once the program runs ------------------------------------------------------ */

/* SIGTERM to the program, the only child of the sandbox's PID 1 (pid1): the time
 * limit's first step, a moment for it to flush before the sandbox is killed. PID 1
 * runs as another user than the program and has no capability: it cannot pass it on
 * itself. Nothing happens when there is no such child (any more). */
void ns_term_program(pid_t pid1);

/* The sandbox's working directory, opened through the root of its PID 1 (alive, or
 * frozen) without following any symlink: for the files out (files-out.h), which go
 * with PID 1. -errno when it is not there. */
int ns_home_open(pid_t pid1);

/* The write end of a pre-started sandbox's code FIFO (/code/<code_name>, ns.h), opened
 * through the root of PID 1 without following any symlink and without blocking: -ENXIO
 * while the interpreter has not opened it yet (the sandbox is not ready), -errno else. */
int ns_code_fifo_open(pid_t pid1, const char *code_name);
