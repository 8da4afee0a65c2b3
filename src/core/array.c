/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>

#include "core/array.h"

int array_grow(void **arr, size_t *cap, size_t n, size_t size)
{
        if (n < *cap)
                return 0;
        if (n >= 1u << 20)
                return -E2BIG;
        size_t ncap = *cap ? *cap * 2 : 8;
        void *p = realloc(*arr, ncap * size);
        if (!p)
                return -ENOMEM;
        *arr = p;
        *cap = ncap;
        return 0;
}
