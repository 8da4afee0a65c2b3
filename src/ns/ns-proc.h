/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a program learns about "its machine" (ns-proc.c): /proc, /sys and the uptime,
 * sized to the sandbox's own limits. Called by the sandbox's PID 1 while it builds the
 * root (ns-child.c): system calls only, no allocation. Each function returns 0 or
 * -errno, and on failure names the step that failed in why.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* What the synthesized files report. */
typedef struct ns_machine {
        unsigned ncpus;         /* CPUs shown: the CPU share rounded up (ns_machine_cpus) */
        uint64_t memory_kb;     /* MemTotal: the memory limit, at most the host's RAM */
} ns_machine;

/* CPUs a sandbox with this share (thousandths of a core; 0: no share set) is shown:
 * the share rounded up, at least 1, at most the CPUs it may run on. */
unsigned ns_machine_cpus(uint32_t cpus_milli);
/* Bytes the synthesized files need in the root tmpfs, for its size. */
size_t ns_machine_root_bytes(const ns_machine *m);

/* Mounts the sandbox's /proc on root/proc (an empty directory of the root tmpfs, which
 * is still writable): a procfs of the caller's pid namespace, every top-level entry
 * masked but an allow list, /proc/sys read-only, and cpuinfo, meminfo, stat, loadavg
 * and swaps replaced by files written for this sandbox. Where the kernel refuses a
 * full procfs (a host whose own /proc is partly hidden), the process-only one. */
int ns_proc_mount(const char *root, const ns_machine *m, char *why, size_t why_size);

/* Writes root/sys: the CPU topology nproc-like readers of sysfs look for, nothing else. */
int ns_sys_build(const char *root, const ns_machine *m, char *why, size_t why_size);

/* A time namespace for the caller's future children whose boot time is now, so that
 * /proc/uptime and process start times count from the sandbox's start. A kernel
 * without time namespaces leaves the host's uptime (not an error). */
int ns_time_start(char *why, size_t why_size);
