/* SPDX-License-Identifier: Apache-2.0 */
/* For the unit tests that run a real sandbox: its stdout as it comes
 * (hxs_exec_set_output), kept NUL-terminated; what would not fit is dropped. */
#pragma once

#include <stddef.h>
#include <string.h>

typedef struct seen {
        char out[1 << 16];
        size_t len;
} seen;

static inline void on_output(void *userdata, int stream, const void *data, size_t len)
{
        seen *s = userdata;
        if (stream != 1 || len > sizeof(s->out) - 1 - s->len)
                return;
        memcpy(s->out + s->len, data, len);
        s->len += len;
        s->out[s->len] = '\0';
}
