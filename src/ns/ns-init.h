/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's init (src/ns/init/hxs-init.c), a static binary embedded in the library.
 * PID 1 of every namespace sandbox builds the root, forks the program, drops every
 * privilege and then execs it from a sealed memfd that the engine made at start (the
 * descriptor is opened before the root changes, so nothing in the sandbox's file system
 * is involved): PID 1 is then a fresh image, not a copy of the service or a template.
 */
#pragma once

/* Where the init finds the report pipe (argv[1] says so too). */
#define NS_INIT_REPORT_FD 3
/* Its one message: this byte, then the program's wait status (an int). The same as
 * NS_REPORT_STATUS (ns.h). */
#define NS_INIT_REPORT_STATUS 'S'

/* A sealed, executable memfd holding the init (O_CLOEXEC), or -errno. */
int ns_init_memfd(void);
