/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Walking directory trees that someone else filled (an installer's output, a cache):
 * removing them and adding up what they occupy, at any depth. Both walks keep one
 * directory open at a time and their way back in memory (the identity of every
 * directory above, checked when they climb back through ".."), so neither the
 * depth of a tree nor the descriptor limit stops them; neither follows a symbolic link
 * or enters another filesystem. Safe to call from any thread.
 */
#pragma once

#include <stdint.h>

typedef struct tree_usage {
        uint64_t bytes;         /* allocated blocks, in bytes */
        uint64_t inodes;        /* files, directories and links, the top included */
} tree_usage;

/* Removes name below dirfd (a file, or a directory and everything in it). 0 when it
 * is gone; -errno (the tree is partly removed) when something cannot be: an entry
 * the kernel refuses to unlink, a mount inside it (-EXDEV), a directory moved while
 * the walk was in it (-ESTALE). */
int tree_remove_at(int dirfd, const char *name);

/* What name below dirfd occupies. -E2BIG as soon as it holds more than max_inodes
 * inodes (the walk stops there: nothing bigger is ever fully listed); -ESTALE when the
 * tree changed under the walk. */
int tree_measure_at(int dirfd, const char *name, uint64_t max_inodes, tree_usage *ret);
