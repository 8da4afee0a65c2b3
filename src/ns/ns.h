/* SPDX-License-Identifier: Apache-2.0 */
/* The namespace backend: what the cloned child does, and what it is told. */
#pragma once

#include "engine/drivers.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/uids.h"
#include "ns/payload.h"

#include "hexr-sandbox/sandbox.h"
#include "ns/seccomp.h"

/* The namespaces every sandbox gets at clone (the cgroup namespace follows once the
 * supervisor has moved it into its cgroup). */
#define NS_CLONE_FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | \
                        CLONE_NEWIPC | CLONE_NEWUTS)
#define NS_SANDBOX_HOME "/home/sandbox"
#define NS_PACKAGES_DIR "/opt/packages" /* an installed package set, on PYTHONPATH */
#define NS_PTYS_MAX 16          /* pseudo-terminals one sandbox may hold at once */

/* Messages on the report pipe (child -> supervisor). */
#define NS_REPORT_ERROR  'E'    /* followed by text: set-up failed */
#define NS_REPORT_STATUS 'S'    /* followed by an int wait status of the program */

/* The settings the child reads, and nothing else: copied into every warm request, so
 * small and free of anything a template must not hold (index URLs, key files). */
typedef struct ns_limits {
        uint32_t tmpfs_mb;              /* SANDBOX_TMPFS_MB: /tmp and home each; RLIMIT_FSIZE */
        uint32_t nofile;                /* SANDBOX_NOFILE: RLIMIT_NOFILE */
        uint32_t cpus_milli;            /* SANDBOX_CPUS: the CPUs the synthesized /proc shows */
        uint32_t inotify_instances;     /* the user namespace's own counters; 0: left alone */
        uint32_t inotify_watches;
        char rootfs[256];               /* SANDBOX_ROOTFS: "" = the host's /usr */
} ns_limits;

static inline void ns_limits_of(const hxs_config *cfg, ns_limits *ret)
{
        _Static_assert(sizeof(ret->rootfs) == sizeof(cfg->rootfs), "SANDBOX_ROOTFS fits");
        *ret = (ns_limits){ .tmpfs_mb = cfg->tmpfs_mb, .nofile = cfg->nofile, .cpus_milli = cfg->cpus_milli,
                            .inotify_instances = cfg->inotify_instances, .inotify_watches = cfg->inotify_watches };
        memcpy(ret->rootfs, cfg->rootfs, sizeof(ret->rootfs));
}

/* What a cold Python gets as its sitecustomize, in the root's /etc/python3.X: a loader
 * (sitecustomize.py) that runs the hooks (hxs_charts.py, charts.py in the tree) from the
 * code compiled at build time (hxs_charts.pyc; empty: none), else from their source.
 * The loader compiled too (loader_pyc; empty: none), shown where the build's Python
 * looks for its bytecode (loader_cache, a path under /usr). */
typedef struct ns_python_site {
        const char *loader, *hooks;
        const unsigned char *hooks_pyc, *loader_pyc;
        size_t hooks_pyc_len, loader_pyc_len;
        const char *loader_cache;
} ns_python_site;

/* the one built in (src/ns/python-site.c) */
ns_python_site ns_python_site_builtin(void);

/* Everything the child needs, prepared before clone so the child only calls the kernel
 * (it may be a copy of a threaded process: no malloc, no locks). */
typedef struct ns_child_args {
        const ns_limits *limits;
        const sandbox_filter *seccomp;
        const char *mountpoint;         /* empty directory the new root is built on */
        const char *interpreter;        /* absolute path, exec'd (cold) */
        const char *code_name;          /* "main.py": the code goes to /code/<code_name> */
        char *const *argv;              /* NULL-terminated, exec'd (argv[0] is interpreter);
                                         * NULL: { interpreter, /code/<code_name> } */
        const ns_python_site *site;     /* Python's sitecustomize, in /etc/python3.X; NULL: the host's */
        /* interactive (sessions): the drivers, read-only in DRIVERS_DIR; NULL: none */
        const driver_file *drivers;
        size_t drivers_bytes;           /* their size in all, for the root's tmpfs */
        int payload_fd;                 /* sealed memfd: code and environment (payload.h) */
        bool has_files;                 /* files_fd is set: */
        int files_fd;                   /* sealed memfd: the files in (ns-files.h) */
        int init_fd;                    /* the static init PID 1 becomes (ns-init.h), -1: none */
        int sync_fd;                    /* read: 'm' once the id maps are written, 'g' once in the cgroups */
        int report_fd;                  /* write: NS_REPORT_* messages, O_CLOEXEC */
        int stdin_fd, stdout_fd, stderr_fd; /* stdin_fd < 0: /dev/null */
        bool warm;                      /* return into the caller instead of exec'ing */
        /* warm: PID 1 runs in the template's own memory (CLONE_VM, the template stopped
         * until PID 1 execs its init); the payload's view is kept here, in that memory,
         * for the template to unmap afterwards. NULL: PID 1 has a memory of its own. */
        payload_view *warm_payload;
        uint32_t memory_mb;             /* the memory limit, for /proc/meminfo (0: the host's RAM) */
        bool code_fifo;                 /* /code/<code_name> is a FIFO the supervisor writes the
                                         * code into later (a pre-started sandbox, pool.h) */
        /* packages= (NULL: none): host directories bound into the root */
        const char *pkgs_dir;           /* read-only at NS_PACKAGES_DIR */
        const char *wheelhouse_dir;     /* installer: read-only at /wheelhouse */
        const char *target_dir;         /* installer: writable at /target */
        /* v1 `tasks` files of the sandbox's cgroups, opened by the engine: the child
         * joins them itself, first thing (see cg_join in cgroup.h). */
        int cg_self[4];
        unsigned n_cg_self;
} ns_child_args;

/* The room a session's drivers take in the root's tmpfs (ns_child_args.drivers_bytes). */
size_t ns_drivers_bytes(const driver_file *drivers);

/* What a warm program process is left with when ns_child_main returns to it. */
typedef struct ns_program {
        char **env;                     /* NAME=VALUE strings, NULL-terminated */
        char code_path[64];             /* "/code/main.py" */
} ns_program;

/* Runs in the cloned child. Cold: never returns (PID 1 stays init, the program
 * execs). Warm: returns only in the program process, with every restriction in place
 * (user, capabilities, no_new_privs, seccomp, rlimits, stdio, cwd), and *ret filled. */
void ns_child_main(const ns_child_args *a, ns_program *ret);

/* Every signal's disposition back to SIG_DFL, through the system call: libc refuses
 * to touch the two real-time signals it reserves, which a parent may have ignored
 * and exec would keep ignored. */
void ns_reset_signal_dispositions(void);
