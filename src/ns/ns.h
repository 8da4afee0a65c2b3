/* SPDX-License-Identifier: Apache-2.0 */
/* The namespace backend: what the cloned child does, and what it is told. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hexr-sandbox/sandbox.h"
#include "ns/seccomp.h"

#define NS_SANDBOX_UID 1000     /* the "sandbox" user inside */
#define NS_SANDBOX_HOME "/home/sandbox"

/* Messages on the report pipe (child -> supervisor). */
#define NS_REPORT_ERROR  'E'    /* followed by text: set-up failed */
#define NS_REPORT_STATUS 'S'    /* followed by an int wait status of the program */

/* Everything the child needs, prepared by the supervisor before clone so the child
 * only copies and calls the kernel. Pointers stay valid in the child (it is a copy of
 * the supervisor's memory). */
typedef struct ns_child_args {
        const hxs_config *cfg;
        const hxs_seccomp *seccomp;
        const char *mountpoint;         /* empty directory the new root is built on */
        const char *code;
        size_t code_len;
        const char *code_name;          /* "main.py" */
        char *const *argv;              /* interpreter argv (absolute path first) */
        char *const *envp;
        int sync_fd;                    /* read: one byte "go" once maps and cgroups are set */
        int report_fd;                  /* write: NS_REPORT_* messages, O_CLOEXEC */
        int stdin_fd, stdout_fd, stderr_fd; /* stdin_fd < 0: /dev/null */
} ns_child_args;

/* Runs in the cloned child; never returns. */
_Noreturn void ns_child_main(const ns_child_args *a);
