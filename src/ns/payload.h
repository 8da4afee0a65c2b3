/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-execution payload (code and environment) travels to the sandbox in a sealed
 * memfd, never through the memory of a process that other sandboxes are copies of:
 * a warm template forks every Python execution, so nothing one request sent may sit
 * in the template's heap for the next to find.
 *
 * Layout (host byte order): u32 code_len, code bytes, u32 n_env, then n_env times
 * (u32 len, "NAME=VALUE" bytes, no NUL).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Supervisor side: a sealed, read-only memfd holding the code and the environment the
 * program gets (NULL-terminated "NAME=VALUE" strings). Returns the fd or -errno. */
int payload_create(const char *code, size_t code_len, char *const *envp);

/* Sandbox side, no malloc (it runs between clone and exec in a copy of a possibly
 * threaded process): maps the memfd and points into it. env is an array of n_env+1
 * pointers to NUL-terminated strings, itself in an anonymous mapping. */
typedef struct payload_view {
        const char *code;
        size_t code_len;
        char **env;
        size_t n_env;
        /* payload_map's two mappings (NULL: none), for payload_unmap */
        void *map, *mem;
        size_t map_len, mem_len;
} payload_view;

/* Parses an in-memory payload of `size` bytes, writing the NUL-terminated env strings
 * into `scratch` (at least size + n_env bytes) and pointers into `ptrs` (n_env + 1).
 * Returns 0 or -EINVAL when the bytes are not a well-formed payload. */
int payload_parse(const uint8_t *data, size_t size, payload_view *ret, char *scratch,
                  size_t scratch_size, char **ptrs, size_t max_ptrs);

/* Maps fd and parses it (scratch and pointers in fresh anonymous mappings). */
int payload_map(int fd, payload_view *ret);

/* Undoes payload_map (nothing if it mapped nothing) and clears the view. A warm PID 1
 * maps the payload in the template's own memory (it shares it until it execs): the
 * template unmaps it then, so that no later execution forked from it finds it. */
void payload_unmap(payload_view *pl);
