/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The seccomp program a sandbox loads: the one the build compiled from the policy of
 * seccomp.c and checked rule by rule (hxs-seccomp-bpf writes it into the array
 * hxs_seccomp_bpf, seccomp-bpf-insns.c of the build tree). Compiling it with
 * libseccomp at every start cost a cold sandbox a sixth of its own CPU; the program
 * depends only on the policy tables, so one compilation per build is the same program.
 * ctest unit/seccomp checks that the array is what the policy compiles to now.
 *
 * This file is all a sandbox needs of seccomp: with it apart from seccomp.c, no program
 * but the build's tools and the tests links libseccomp (one shared library fewer for
 * every start of the CLI and the service to load).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <linux/seccomp.h>

#include "core/error.h"
#include "ns/seccomp.h"

extern const struct sock_filter hxs_seccomp_bpf[];
extern const unsigned short hxs_seccomp_bpf_len;

int sandbox_filter_build(sandbox_filter *ret, hxs_error *err)
{
        struct sock_filter *insns = malloc(hxs_seccomp_bpf_len * sizeof(*insns));
        if (!insns)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        memcpy(insns, hxs_seccomp_bpf, hxs_seccomp_bpf_len * sizeof(*insns));
        *ret = (sandbox_filter){ .insns = insns, .len = hxs_seccomp_bpf_len };
        return 0;
}

int sandbox_filter_load(const sandbox_filter *s)
{
        struct sock_fprog prog = { .len = s->len, .filter = s->insns };
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
                return -errno;
        return 0;
}
