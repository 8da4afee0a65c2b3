/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/macro.h"
#include "engine/runtime.h"

const runtime_spec runtime_table[HXS_LANG_MAX] = {
        [HXS_LANG_PYTHON] = { "/usr/bin/python3", "main.py" },
        [HXS_LANG_JAVASCRIPT] = { "/usr/bin/node", "main.js" },
        [HXS_LANG_BASH] = { "/usr/bin/bash", "main.sh" },
};

int exec_env(const hxs_request *req, const char *pythonpath, char ***ret)
{
        /* MPLBACKEND: matplotlib draws with Agg (no display, no GUI toolkit probed), in
         * Python and in any Python a Bash or Node program starts */
        static const char *const fixed[] = { "PATH=/usr/local/bin:/usr/bin:/bin",
                                             ("HOME=" HXS_SANDBOX_HOME), "LANG=C.UTF-8", "MPLBACKEND=Agg" };
        size_t n = 0, max = ARRAY_SIZE(fixed) + req->n_env + 2;
        bool pythonpath_done = !pythonpath;
        char **env = calloc(max, sizeof(char *));
        if (!env)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(fixed); i++) {
                bool overridden = false;
                size_t nl = strcspn(fixed[i], "=");
                for (size_t j = 0; j < req->n_env; j++)
                        if (strlen(req->env[j].name) == nl && strncmp(req->env[j].name, fixed[i], nl) == 0)
                                overridden = true;
                if (!overridden && !(env[n++] = strdup(fixed[i])))
                        goto oom;
        }
        for (size_t j = 0; j < req->n_env; j++) {
                int q;
                if (pythonpath && strcmp(req->env[j].name, "PYTHONPATH") == 0) {
                        q = asprintf(&env[n], "PYTHONPATH=%s:%s", pythonpath, req->env[j].value);
                        pythonpath_done = true;
                } else {
                        q = asprintf(&env[n], "%s=%s", req->env[j].name, req->env[j].value);
                }
                if (q < 0) {
                        env[n] = NULL;
                        goto oom;
                }
                n++;
        }
        if (!pythonpath_done && asprintf(&env[n++], "PYTHONPATH=%s", pythonpath) < 0) {
                env[--n] = NULL;
                goto oom;
        }
        env[n] = NULL;
        *ret = env;
        return 0;
oom:
        for (size_t i = 0; i < n; i++)
                free(env[i]);
        free(env);
        return -ENOMEM;
}

void strv_free(char **v)
{
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}
