/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up checks of the directories the service trusts or hands to unprivileged users. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "hexr-sandbox/sandbox.h"

/* A directory only root can change: path (which must exist) and every directory
 * above it belong to root (or the service's own user) and are not writable by group
 * or others, except that a directory above it may be sticky (/tmp): there nobody can
 * rename or remove what is not theirs. Otherwise an error naming `setting`, the
 * directory at fault and what to change. ret_real (size bytes) gets the resolved path,
 * which is the one checked. */
int dir_check_private(const char *path, const char *setting, char *ret_real, size_t size, hxs_error *err);

/* What host user uid (gid = uid, no supplementary groups) can do with dir, tried in
 * a child process that becomes that user: with `list`, list it and open each entry
 * whose name ends in `suffix` for reading (at most max_entries of them); without,
 * only reach it. 0, or -errno with the path that failed in bad. */
int dir_try_as(uid_t uid, const char *dir, bool list, const char *suffix, unsigned max_entries,
               char *bad, size_t bad_size);
