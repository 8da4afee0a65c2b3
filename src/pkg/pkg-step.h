/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=, as the engine sees it: the step that readies an execution's packages
 * before its program starts. The engine calls through these four as it calls through
 * the backend table; what the step sets on the execution is what the backend mounts
 * (x->pkgs, and for the installer's own sandbox x->wheelhouse_dir and x->target_dir).
 */
#pragma once

#include <stdbool.h>

#include "hexr-sandbox/sandbox.h"

typedef struct pkg_step pkg_step;

/* What x's packages need before it runs. 0 with *ret NULL: nothing to do (none asked
 * for, all in the image, or a cached set, held in x->pkgs): start the program. 0 with
 * *ret: an install step is under way on x's fd. -errno with err: x cannot run (err's
 * subject names the package when one is missing). */
int pkg_step_begin(hxs_engine *e, hxs_exec *x, pkg_step **ret, hxs_error *err);
/* Advances it on an event of x's fd. false once it is over: then it has started the
 * program on the backend or ended x (x->done), and is only to be freed. */
bool pkg_step_advance(pkg_step *s);
/* Ends it early (x->killed says why); x's fd then reports the end. */
void pkg_step_kill(pkg_step *s);
/* Stops what is under way, removes what it staged. NULL is fine. */
void pkg_step_free(pkg_step *s);

static inline void pkg_step_freep(pkg_step **s) { pkg_step_free(*s); }
