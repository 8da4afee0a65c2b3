/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4), for content keys of the package cache. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
        uint32_t h[8];
        uint64_t len;           /* bytes hashed so far */
        uint8_t buf[64];
        size_t n;               /* bytes waiting in buf */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final(sha256_ctx *c, uint8_t out[32]);
/* out: 64 lowercase hex digits and a NUL. */
void sha256_hex(const uint8_t digest[32], char out[65]);
/* Hashes a whole file; 0 or -errno. */
int sha256_file(int dirfd, const char *name, uint8_t out[32]);
