/* SPDX-License-Identifier: Apache-2.0 */
/* hxs-seccomp-doc: prints the sandbox's seccomp policy as Markdown (docs/seccomp.md),
 * after building the filter from it (which checks every rule); exit 1 if that fails. */
#include <stdio.h>

#include "ns/seccomp.h"

int main(void)
{
        sandbox_filter s;
        hxs_error err = { 0 };
        if (sandbox_filter_compile(&s, &err) < 0) {
                fprintf(stderr, "hxs-seccomp-doc: %s\n", err.message);
                return 1;
        }
        sandbox_filter_free(&s);
        return sandbox_filter_describe(stdout) < 0 || fflush(stdout) != 0 ? 1 : 0;
}
