/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host uids the engine runs things as, SANDBOX_UID_BASE + these (the same numbers
 * as gids): one per role, so that nothing compromised in one role runs as another's
 * uid (a uid can ptrace, signal and spend the per-user kernel budgets of its own
 * processes). The one place they are all listed:
 *      +0      a sandbox's root (its user namespace maps 0 here)
 *      +1000   the "sandbox" user programs run as (NS_SANDBOX_UID)
 *      +2000   warm templates (NS_TEMPLATE_UID)
 *      +3000   the package downloader (PKG_FETCH_UID)
 *      +3001   QEMU (VM_QEMU_UID)
 *      +3002   Firecracker (VM_FIRECRACKER_UID)
 *      +4000.. the owners of the sandboxes' user namespaces (NS_OWNER_UID)
 * Every QEMU shares +3001 (and every Firecracker +3002): each is PID 1 of a pid
 * namespace of its own, so none can see another to ptrace or signal it.
 */
#pragma once

#include <stddef.h>

#include "core/uidcheck.h"
#include "hexr-sandbox/sandbox.h"

#define NS_SANDBOX_UID 1000     /* the "sandbox" user inside */
#define NS_TEMPLATE_UID 2000    /* warm templates */
#define PKG_FETCH_UID 3000      /* the package downloader */
#define VM_QEMU_UID 3001u
#define VM_FIRECRACKER_UID 3002u
#define HOST_VMM_UIDS 3         /* + 3000 ... + 3002: downloader and VMMs */
/* Owners of the sandboxes' user namespaces: SANDBOX_UID_BASE + this onwards, a pool
 * of ns_owner_pool() uids (ns/owners.h). The kernel charges what a sandbox takes of
 * the counters it keeps per user (inotify instances and watches, namespaces, ...) at
 * every level of the user namespace chain, and at the host's level to the namespace's
 * owner: a uid no other live sandbox and no host process has, so no sandbox spends
 * host root's budget or another sandbox's. A cold sandbox is created by the service
 * with that effective uid; a warm one by the template of a warm slot, which runs as it. */
#define NS_OWNER_UID 4000
#define NS_WARM_SLOTS_MAX 64
#define NS_OWNER_POOL_MIN 1024

/* Warm slots (a template per kind each): SANDBOX_WARM_SLOTS, else one per execution
 * that may run at once (max_concurrent 0 counts as 2, the service's floor), never more
 * than may run at once; 0 when templates do not run. The service settles
 * SANDBOX_WARM_SLOTS 0 before the engine starts (budget.c).
 * The owner pool: room for that many and as many cold sandboxes again, several times
 * over, for the other engines on the host that share SANDBOX_UID_BASE. */
unsigned ns_warm_slots(const hxs_config *cfg);
unsigned ns_owner_pool(const hxs_config *cfg);
/* Every host uid range above, for the start-up check of core/uidcheck.h. */
#define HOST_UID_RANGES 5
size_t host_uid_ranges(const hxs_config *cfg, uid_range ret[HOST_UID_RANGES]);
