/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's seccomp policy, compiled once to BPF and loaded without allocating. */
#pragma once

#include <linux/filter.h>

#include "hexr-sandbox/sandbox.h"

typedef struct hxs_seccomp {
        struct sock_filter *insns;
        unsigned short len;
} hxs_seccomp;

int hxs_seccomp_build(hxs_seccomp *ret, hxs_error *err);
void hxs_seccomp_free(hxs_seccomp *s);
/* Loads it into the calling thread (no_new_privs must already be set). 0 or -errno. */
int hxs_seccomp_load(const hxs_seccomp *s);
