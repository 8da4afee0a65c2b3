/* SPDX-License-Identifier: Apache-2.0 */
/* Growing an array by one element, with a hard cap on the count (array.c). */
#pragma once

#include <stddef.h>

/* Makes room in *arr (of *cap elements of `size` bytes, n used) for one more: doubles,
 * from 8. -E2BIG at 2^20 elements, -ENOMEM. */
int array_grow(void **arr, size_t *cap, size_t n, size_t size);
