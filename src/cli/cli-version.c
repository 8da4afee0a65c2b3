/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "cli/cli.h"
#include "hexr-sandbox/sandbox.h"

int cli_version(int argc, char **argv)
{
        printf("hexr-sandbox %s\n", hxs_version());
        return 0;
}
