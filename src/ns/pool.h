/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pre-started single-use sandboxes: which requests they may serve, how many are kept
 * (SANDBOX_POOL of each kind, within SANDBOX_POOL_MEMORY_MB), the taking and the
 * refilling. Each is a whole sandbox (new namespaces, tmpfs root and home, cgroup,
 * seccomp, no capabilities; a Python one cloned by a warm template of its kind) whose
 * interpreter waits on its code FIFO (ns.h, code_fifo); it serves one execution and is
 * destroyed. What a sandbox is and how it is started, checked and destroyed is the
 * backend's (the ops).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "hexr-sandbox/sandbox.h"

typedef struct ns_pool ns_pool;

/* What a pre-started sandbox is: a language, and for Python the warm template that
 * clones it (template.h: plain, or with the scientific stack imported). */
typedef enum ns_pool_kind {
        NS_POOL_PYTHON,
        NS_POOL_PYTHON_SCI,
        NS_POOL_JAVASCRIPT,
        NS_POOL_BASH,
        NS_POOL_KINDS,
} ns_pool_kind;

hxs_language ns_pool_language(ns_pool_kind k);

typedef struct ns_pool_ops {
        /* A new pre-started sandbox of that kind, with memory_mb: 0 and *ret, or -errno
         * (-EAGAIN: not now, and no failure: Python's templates are still starting). */
        int (*start)(void *ctx, ns_pool_kind kind, uint32_t memory_mb, void **ret, hxs_error *err);
        /* Hands sb over to arg (the execution): 1 taken, 0 not ready yet (it stays), -errno:
         * unusable (the pool destroys it). */
        int (*claim)(void *ctx, void *sb, void *arg);
        /* Still starting or waiting: false once it has ended (it never had code). */
        bool (*alive)(void *ctx, void *sb);
        void (*destroy)(void *ctx, void *sb);
} ns_pool_ops;

/* NULL (no pools) when SANDBOX_POOL or SANDBOX_POOL_MEMORY_MB is 0, or without warm
 * starts (SANDBOX_WARM off: the one-shot `exec` runs everything cold). */
ns_pool *ns_pool_new(const hxs_config *cfg, const ns_pool_ops *ops, void *ctx);
void ns_pool_free(ns_pool *p);  /* destroys every sandbox it holds */

/* The request runs from a pre-started sandbox exactly as it would cold (pool.c says
 * what differs and sends it cold). */
bool ns_pool_eligible(const ns_pool *p, const hxs_request *req);

/* A ready sandbox of that kind claimed for arg, or NULL (none ready: the caller runs
 * the request as without the pool). */
void *ns_pool_take(ns_pool *p, ns_pool_kind kind, void *arg);

/* Starts at most max sandboxes towards the target; called off the request's path
 * (after an execution is released, and at start-up). With empty_only, only for a
 * language that has none ready (requests are still coming: the others wait for a
 * pause). True when more are wanted and may be started now or at the pause (not while
 * a failed start is waited out). */
bool ns_pool_fill(ns_pool *p, unsigned max, bool empty_only);

/* What the caller's memory budget leaves the pools now (UINT64_MAX at first: only
 * SANDBOX_POOL_MEMORY_MB bounds them): ready ones beyond it are destroyed at once, the
 * languages in turn, and ns_pool_fill starts none that would not fit. */
void ns_pool_room(ns_pool *p, uint64_t mb);

void ns_pool_stats(const ns_pool *p, hxs_engine_stats *st);
