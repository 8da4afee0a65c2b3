/* SPDX-License-Identifier: Apache-2.0 */
/* Option values the verbs read the same way. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "cli/cli.h"

int cli_parse_u32(const char *s, uint32_t *ret)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-' || v > UINT32_MAX)
                return -EINVAL;
        *ret = (uint32_t)v;
        return 0;
}
