/* SPDX-License-Identifier: Apache-2.0 */
/* What every backend runs: the interpreter of each language, the name its program
 * file gets, and the environment the program sees. One table, so a program behaves
 * the same in a namespace sandbox and in a microVM. */
#pragma once

#include "engine/request.h"

#define HXS_SANDBOX_UID  1000                   /* the "sandbox" user inside */
#define HXS_SANDBOX_HOME "/home/sandbox"

typedef struct runtime_spec {
        const char *path;       /* absolute path of the interpreter, inside the root */
        const char *file;       /* the program's file name under /code */
} runtime_spec;

extern const runtime_spec runtime_table[HXS_LANG_MAX];

/* A fixed PATH, HOME, LANG and MPLBACKEND, then the request's variables (which may
 * override them). Nothing of the host's. With pythonpath (an installed package set's
 * directory), PYTHONPATH starts with it, before the request's own PYTHONPATH if any.
 * A NULL-terminated vector; free with strv_free. */
int exec_env(const hxs_request *req, const char *pythonpath, char ***ret);
void strv_free(char **v);
