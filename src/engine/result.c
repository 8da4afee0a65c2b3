/* SPDX-License-Identifier: Apache-2.0 */
/* Results and the one exit-code convention every backend reports through. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "hexr-sandbox/sandbox.h"

void hxs_result_clear(hxs_result *res)
{
        if (!res)
                return;
        free(res->stdout_data);
        free(res->stderr_data);
        for (size_t i = 0; i < res->n_files; i++) {
                free(res->files[i].path);
                free(res->files[i].data);
        }
        free(res->files);
        memset(res, 0, sizeof(*res));
}

void hxs_result_set_status(hxs_result *res, int wait_status, bool have_status,
                           bool timed_out, bool oom_killed)
{
        res->timed_out = false;
        res->oom_killed = false;
        res->signal = 0;
        if (timed_out) {
                /* The time limit wins: whatever the program was doing, we stopped it. */
                res->timed_out = true;
                res->exit_code = HXS_EXIT_TIMEOUT;
                res->signal = SIGKILL;
                return;
        }
        if (oom_killed) {
                res->oom_killed = true;
                res->exit_code = HXS_EXIT_OOM;
                res->signal = SIGKILL;
                return;
        }
        if (!have_status) {
                /* The sandbox died without reporting: treat as killed. */
                res->exit_code = 128 + SIGKILL;
                res->signal = SIGKILL;
                return;
        }
        if (WIFEXITED(wait_status)) {
                res->exit_code = WEXITSTATUS(wait_status);
        } else if (WIFSIGNALED(wait_status)) {
                res->signal = WTERMSIG(wait_status);
                res->exit_code = 128 + res->signal;
        } else {
                res->exit_code = 128 + SIGKILL;
                res->signal = SIGKILL;
        }
}

const char *hxs_packages_source_name(hxs_packages_source s)
{
        switch (s) {
        case HXS_PACKAGES_NONE: return "none";
        case HXS_PACKAGES_IMAGE: return "image";
        case HXS_PACKAGES_CACHED: return "cached";
        case HXS_PACKAGES_INSTALLED: return "installed";
        case HXS_PACKAGES_SOURCE_MAX: break;
        }
        return "unknown";
}
