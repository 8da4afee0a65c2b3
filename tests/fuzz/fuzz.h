/* SPDX-License-Identifier: Apache-2.0 */
/* What every fuzz target shares: the entry point and the invariant check. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant: when it does not hold, say which and abort (libFuzzer keeps the input). */
#define CHECK(cond)                                                                     \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__,      \
                                __LINE__, #cond);                                       \
                        abort();                                                        \
                }                                                                       \
        } while (0)
