/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The owner uids of sandboxes' user namespaces (NS_OWNER_UID in ns.h). The kernel
 * charges what a sandbox takes of its per-user counters to the uid that owns its user
 * namespace, and that uid, seen from the host, may do anything in the namespace: so a
 * uid belongs to one user at a time, a cold sandbox or a warm slot (its templates and
 * the one sandbox they serve), and to nobody else on the host. Engines with the same
 * SANDBOX_UID_BASE share the pool: each uid a process holds is an open file description
 * lock on the uid's byte of one lock file, which the kernel drops when the process dies,
 * so another engine skips it and nothing is left over after a crash.
 */
#pragma once

#include <sys/types.h>

#include "hexr-sandbox/sandbox.h"

/* Where engines record the uids they hold (a root-owned file of its own). */
#define NS_OWNERS_LOCK "/run/hexr-sandbox-owners.lock"

typedef struct ns_owners ns_owners;

/* The pool of cfg (from SANDBOX_UID_BASE + NS_OWNER_UID, ns_owner_pool(cfg) uids).
 * lock_path NULL: NS_OWNERS_LOCK. */
int ns_owners_new(const hxs_config *cfg, const char *lock_path, ns_owners **ret, hxs_error *err);
void ns_owners_free(ns_owners *o);

/* A uid no one holds, now held once: 0, or -EBUSY when every uid of the pool is held
 * (by this engine or another). */
int ns_owner_take(ns_owners *o, uid_t *ret);
/* One more holder of a uid this engine holds. */
void ns_owner_hold(ns_owners *o, uid_t uid);
/* One holder fewer; when none is left the uid is free again, for every engine. */
void ns_owner_put(ns_owners *o, uid_t uid);
/* How many uids this engine holds (for tests and figures). */
unsigned ns_owners_held(const ns_owners *o);

/* For a moment, this thread (only) acts as uid: its effective uid and gid, its
 * permitted capabilities still effective, and the process dumpable, so that what it
 * clones is too and has its /proc files owned by uid. The kernel lets the owner of a
 * user namespace (seen from the host) set its id maps, signal and inspect what is in
 * it. Returns the dumpable flag to give back to ns_owner_unbecome, or -errno. */
int ns_owner_become(uid_t uid);
void ns_owner_unbecome(int dumpable);
