/* SPDX-License-Identifier: Apache-2.0 */
/* hxs-seccomp-doc: prints the sandbox's seccomp policy as Markdown (docs/seccomp.md),
 * after building the filter from it (which checks every rule); exit 1 if that fails. */
#include <stdio.h>

#include "ns/seccomp.h"

int main(void)
{
        hxs_seccomp s;
        hxs_error err = { 0 };
        if (hxs_seccomp_build(&s, &err) < 0) {
                fprintf(stderr, "hxs-seccomp-doc: %s\n", err.message);
                return 1;
        }
        hxs_seccomp_free(&s);
        return hxs_seccomp_describe(stdout) < 0 || fflush(stdout) != 0 ? 1 : 0;
}
