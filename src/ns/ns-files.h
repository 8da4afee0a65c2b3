/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Files in, for the namespace backend (ns-files.c): the request's files travel to the
 * sandbox in one sealed memfd, and the sandbox's set-up writes them into the working
 * directory once it is in its cgroups (their pages are the sandbox's), before the
 * program starts. Layout, per file: u32 path length, the path (normalised), u64 size,
 * the bytes; the end of the memfd ends the list.
 */
#pragma once

#include "engine/request.h"

/* Supervisor side: the memfd (O_CLOEXEC), or -errno. Files given as fds are copied in
 * the kernel (copy_file_range), from offset 0. */
int ns_files_bundle(const hxs_request *req);

/* The same bundle built piece by piece (the microVM's agent, as the files arrive):
 * a new memfd, each file's header then exactly `size` bytes of it appended, and the
 * seal before it is handed to the sandbox (the offset back at 0). -errno. */
int ns_files_new(void);
int ns_files_add(int fd, const char *path, uint64_t size);
int ns_files_append(int fd, const void *p, size_t n);
int ns_files_seal(int fd);

/* Sandbox side, no malloc: writes every file of the bundle under dir (its directories
 * made 0755, the files 0644, both owned by uid:gid). -errno with what failed in why. */
int ns_files_unpack(int fd, const char *dir, uid_t uid, gid_t gid, char *why, size_t why_size);
