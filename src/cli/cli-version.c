/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "cli/cli.h"
#include "hexr-sandbox/sandbox.h"

int hxs_cli_version(int argc, char **argv)
{
        printf("hexr-sandbox %s\n", hxs_version());
        return 0;
}

void hxs_cli_print_settings(void)
{
        for (size_t i = 0; i < hxs_settings_count(); i++) {
                const hxs_setting_info *s = hxs_settings_get(i);
                printf("  %-20s %-22s %s\n", s->env, s->default_text[0] ? s->default_text : "(unset)", s->help);
        }
}
