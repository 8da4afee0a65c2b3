/* SPDX-License-Identifier: Apache-2.0 */
/* The one maker of ids (see randid.h). */
#include "core/randid.h"

#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

void randid_make(char id[RANDID_LEN + 1])
{
        static const char hex[] = "0123456789abcdef";
        static uint64_t fallback;
        uint8_t b[RANDID_LEN / 2];

        if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
                struct timespec ts;
                (void)clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
                uint64_t n = __atomic_add_fetch(&fallback, 1, __ATOMIC_RELAXED);
                memcpy(b, &t, 8);
                memcpy(b + 8, &n, 8);
        }
        for (size_t i = 0; i < sizeof(b); i++) {
                id[2 * i] = hex[b[i] >> 4];
                id[2 * i + 1] = hex[b[i] & 15];
        }
        id[RANDID_LEN] = '\0';
}
