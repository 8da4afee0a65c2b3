/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's seccomp policy, compiled once to BPF and loaded without allocating. */
#pragma once

#include <linux/filter.h>
#include <stdint.h>
#include <stdio.h>

#include "hexr-sandbox/sandbox.h"

typedef struct hxs_seccomp {
        struct sock_filter *insns;
        unsigned short len;
} hxs_seccomp;

/* Compiles the policy and checks every rule of it on the result: fails rather than
 * return a program that lacks one. */
int hxs_seccomp_build(hxs_seccomp *ret, hxs_error *err);
void hxs_seccomp_free(hxs_seccomp *s);
/* Loads it into the calling thread (no_new_privs must already be set). 0 or -errno. */
int hxs_seccomp_load(const hxs_seccomp *s);

/* What the program answers to one call (arch: AUDIT_ARCH_*, nr as seccomp_data has
 * it, args may be NULL), without loading it: SECCOMP_RET_* with its data. */
uint32_t hxs_seccomp_eval(const hxs_seccomp *s, uint32_t arch, uint32_t nr, const uint64_t args[6]);

/* The policy as Markdown (docs/seccomp.md is this output). 0 or -EIO. */
int hxs_seccomp_describe(FILE *f);
