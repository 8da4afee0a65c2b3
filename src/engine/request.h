/* SPDX-License-Identifier: Apache-2.0 */
/* The request model shared by the engine and its backends. */
#pragma once

#include "hexr-sandbox/sandbox.h"

typedef struct hxs_env_var {
        char *name;
        char *value;
} hxs_env_var;

struct hxs_request {
        hxs_language language;
        char *code;
        size_t code_len;
        char *stdin_data;
        size_t stdin_len;
        uint32_t timeout_s;
        uint32_t memory_mb;
        hxs_env_var *env;
        size_t n_env, cap_env;
        char **packages;
        size_t n_packages, cap_packages;
};

/* Deep copy (for an execution to own its request). */
int hxs_request_dup(const hxs_request *src, hxs_request **ret);
