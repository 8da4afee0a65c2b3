/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The steps between clone (or fork) and exec, written once for every process the
 * service starts on the host: a sandbox's PID 1 and program (ns-child.c), the warm
 * templates' mother (template.c), QEMU and Firecracker (vm/), the package downloader.
 * Each caller runs the steps in the order its own security argument needs; each step
 * returns 0 or -errno, and a failure is reported by the step's name (jail_step_text).
 *
 * Everything here is async-signal-safe: raw system calls (glibc's set*id would signal
 * threads that exist only in the parent), no malloc, no locks, no stdio. The caller
 * may be a clone of a threaded process.
 *
 * In core, not ns/: both backends and the package step use it, and neither backend
 * reaches into the other.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

typedef enum jail_step {
        JAIL_CGROUP,            /* joining v1 cgroups through their tasks files */
        JAIL_FDS,               /* arranging descriptors */
        JAIL_CLOSE,             /* closing every other descriptor */
        JAIL_PDEATHSIG,         /* the parent-death signal, and the parent still there */
        JAIL_RLIMITS,
        JAIL_BOUNDING,          /* emptying the bounding and ambient sets */
        JAIL_SETID,             /* setgroups, setresgid, setresuid */
        JAIL_CAPS,              /* capset */
        JAIL_NNP,               /* no_new_privs */
        JAIL_EXEC,
        JAIL_STEP_MAX,
} jail_step;

/* "dropping capabilities" ...; NULL for a number that is no step. */
const char *jail_step_text(int step);

/* What a child writes to its report pipe when a step fails (jail_fail); the pipe is
 * O_CLOEXEC, so end-of-file without a report means it exec'd. */
typedef struct jail_report {
        int step;               /* a jail_step, or a caller's own number from JAIL_STEP_MAX on */
        int err;                /* errno */
} jail_report;

/* For a child whose failure is read as text (its stderr is a pipe the service reads):
 * "hexr-sandbox: <who>: <what>[ <path>]: errno N\n" to fd, without stdio. */
void jail_say(int fd, const char *who, const char *what, const char *path, int err);

/* Writes {step, -r} to fd (if >= 0) and ends the process with `status`. */
_Noreturn void jail_fail(int fd, int step, int r, int status);

/* Writes "0" (this process) to each v1 `tasks` file; entries < 0 are skipped. */
int jail_join_v1(const int *tasks, size_t n);

/* fds[i] becomes descriptor i, for i < n (fds[i] < 0: i is closed), O_CLOEXEC from
 * `cloexec_from` on. Sources below n are moved out of the way first, so no dup
 * clobbers another. The sources themselves stay open. */
int jail_arrange_fds(const int *fds, unsigned n, unsigned cloexec_from);

/* Every descriptor from `from` on: closed now, or at exec (the report pipe lives on). */
int jail_close_from(unsigned from, bool at_exec);

/* Every descriptor but those in keep[] (entries < 0 ignored, at most 16). */
int jail_close_all_except(const int *keep, size_t n);

/* SIGKILL when the parent thread dies. Set it after any uid change, which clears it.
 * Then proves the parent did not die before: `parent` > 0 must still be our parent
 * (same pid namespace); `parent_fd` >= 0, a pipe or socket whose other end only the
 * parent holds, must not be hung up (a child in a pid namespace of its own sees
 * getppid() 0). -ESRCH: the parent is gone. */
int jail_pdeathsig(pid_t parent, int parent_fd);

typedef struct jail_rlimit {
        int resource;           /* RLIMIT_* */
        rlim_t value;           /* soft and hard */
} jail_rlimit;
int jail_rlimits(const jail_rlimit *limits, size_t n);

/* Empties the bounding set but for `keep` (bits CAP_*), and the ambient set. With
 * `best_effort`, EPERM (no CAP_SETPCAP) is not a failure: no_new_privs and the uid
 * change still hold what was not dropped. */
int jail_drop_bounding(uint64_t keep, bool best_effort);

/* setgroups(0), setresgid(gid), setresuid(uid). `keep_caps`: the permitted set
 * survives a change from root (PR_SET_KEEPCAPS around it); otherwise it clears every
 * capability. */
int jail_become(uint32_t uid, uint32_t gid, bool keep_caps);

/* Effective, permitted and inheritable sets to `keep` exactly, and the ambient set
 * raised to it, so that `keep` survives exec (empty: nothing survives). */
int jail_set_caps(uint64_t keep);

int jail_no_new_privs(void);
