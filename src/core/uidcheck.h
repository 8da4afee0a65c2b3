/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host uids (and the same gids) the engine runs sandboxes, templates, VMMs and the
 * downloader as must belong to nobody else: not to an account, and not to anyone's
 * subordinate ids, from which rootless containers (newuidmap) would run processes as
 * the same uid and could then signal, trace or write what belongs to a sandbox.
 * Checked at start (config.c); an overlap refuses to start, naming it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hexr-sandbox/sandbox.h"

typedef struct uid_range {
        uint32_t first, count;          /* [first, first + count) */
        const char *what;               /* for the message */
} uid_range;

/* The files consulted (NULL in any field: the system's /etc file). */
typedef struct id_files {
        const char *subuid, *subgid, *passwd, *group;
} id_files;

/* 0, or -EEXIST with err naming SANDBOX_UID_BASE, the range and the line it meets;
 * other -errno when a file exists but cannot be read. files may be NULL. */
int uid_ranges_check(const uid_range *ranges, size_t n, const id_files *files,
                         hxs_error *err);
