/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What is left of an ended sandbox once its answer is complete (the program's status
 * is in, its output pipes are closed): PID 1 on its way out (killed, its namespaces
 * being torn down), its cgroup, and the owner uid of its user namespace. None of that
 * is part of the execution's answer: a caller that runs work off the executions' paths
 * (hxs_engine_background) has it done there, after the reply. The order stays that of
 * an immediate release: PID 1 reaped, then the cgroup removed, then the uid given back.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "core/cgroup.h"
#include "ns/owners.h"

#define NS_REMAINS_MAX 32

typedef struct ns_remnant {
        int pidfd;                      /* PID 1, killed, not yet reaped; -1: reaped */
        cg_exec cg;
        bool have_cg;
        uid_t owner_uid;                /* 0: none */
} ns_remnant;

typedef struct ns_remains {
        bool deferred;                  /* a caller sweeps them (ns_remains_sweep) */
        unsigned n;
        ns_remnant left[NS_REMAINS_MAX];
} ns_remains;

/* Takes pidfd (-1: reaped already), cg (when have_cg) and owner_uid (when not 0): kept
 * for the caller's sweep when there is room, else released now. */
void ns_remains_add(ns_remains *r, cg_graveyard *g, ns_owners *o, int pidfd, const cg_exec *cg, bool have_cg,
                    uid_t owner_uid);

/* Releases what it keeps, waiting for each PID 1 (its teardown takes about a
 * millisecond; measured, waiting for it here served the next request sooner than
 * coming back for it); one that has not ended within a second stays, with its cgroup
 * and uid, for the next sweep (true: some stay). The first call marks r deferred (the
 * caller sweeps). */
bool ns_remains_sweep(ns_remains *r, cg_graveyard *g, ns_owners *o);

/* At the end: releases everything, waiting for each PID 1. */
void ns_remains_flush(ns_remains *r, cg_graveyard *g, ns_owners *o);
