/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's seccomp policy, compiled once to BPF and loaded without allocating. */
#pragma once

#include <linux/filter.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hexr-sandbox/sandbox.h"

typedef struct sandbox_filter {
        struct sock_filter *insns;
        unsigned short len;
} sandbox_filter;

/* The program the build compiled from the policy (seccomp-bpf.c): a copy of it,
 * without libseccomp. Fails only for want of memory. It, sandbox_filter_load and
 * sandbox_filter_free are all a sandbox uses: the rest (seccomp.c) is for the build's
 * tools and the tests, and only they link libseccomp. */
int sandbox_filter_build(sandbox_filter *ret, hxs_error *err);
/* Compiles the policy with libseccomp and checks every rule of it on the result:
 * fails rather than return a program that lacks one (the build runs this). */
int sandbox_filter_compile(sandbox_filter *ret, hxs_error *err);
/* Every rule of the policy, evaluated on s for every ABI. 0, or fails naming the rule. */
int sandbox_filter_verify(const sandbox_filter *s, hxs_error *err);
static inline void sandbox_filter_free(sandbox_filter *s)
{
        free(s->insns);
        s->insns = NULL;
        s->len = 0;
}
/* Loads it into the calling thread (no_new_privs must already be set). 0 or -errno. */
int sandbox_filter_load(const sandbox_filter *s);

/* What the program answers to one call (arch: AUDIT_ARCH_*, nr as seccomp_data has
 * it, args may be NULL), without loading it: SECCOMP_RET_* with its data. */
uint32_t sandbox_filter_eval(const sandbox_filter *s, uint32_t arch, uint32_t nr, const uint64_t args[6]);
/* How many instructions the program runs to answer that call with all-zero arguments:
 * what attaching it costs per number, and a call the kernel's cache cannot answer. */
size_t sandbox_filter_steps(const sandbox_filter *s, uint32_t arch, uint32_t nr);

/* The policy as Markdown (docs/seccomp.md is this output). 0 or -EIO. */
int sandbox_filter_describe(FILE *f);
