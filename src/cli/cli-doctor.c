/* SPDX-License-Identifier: Apache-2.0 */
/* `hexr-sandbox doctor`: what this host offers, which backend would run, and whether a
 * sandbox really starts (it runs one). Exits 1 when sandboxes cannot run. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "hexr-sandbox/sandbox.h"

int cli_doctor(int argc, char **argv)
{
        if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
                printf("usage: hexr-sandbox doctor\n\nChecks user namespaces, cgroups, seccomp, Landlock, KVM and the\n"
                       "runtimes, says which backend would run, and starts one sandbox.\n");
                return 0;
        }
        hxs_config cfg;
        hxs_error err = { 0 };
        if (hxs_config_from_env(&cfg, &err) < 0) {
                fprintf(stderr, "hexr-sandbox: %s\n", err.message);
                return 2;
        }
        hxs_probe_item items[64];
        hxs_backend_kind backend;
        bool runnable;
        size_t n = hxs_probe_host(&cfg, items, sizeof(items) / sizeof(items[0]), &backend, &runnable);
        static const char *const marks[] = { "ok", "MISSING", "-" };
        for (size_t i = 0; i < n; i++)
                printf("%-8s %-22s %s\n", marks[items[i].status], items[i].name, items[i].detail);

        hxs_container_report box;
        if (hxs_container_check(&cfg, &box)) {
                printf("%-8s %-22s %s: %s\n", marks[1], "container", box.why, box.lacks);
                runnable = false;
        } else if (box.why[0]) {
                printf("%-8s %-22s %s: capabilities, cgroups, namespaces and /proc as sandboxes need them\n",
                       marks[0], "container", box.why);
        }

        printf("\nbackend: %s (SANDBOX_BACKEND=%s)\n", hxs_backend_name(backend), hxs_backend_name(cfg.backend));
        if (!runnable) {
                printf("result: sandboxes cannot run on this host\n");
                return 1;
        }
        /* the proof: one real sandbox (no warm pool or templates for a single run) */
        cfg.vm_pool_size = 0;
        cfg.warm = false;
        hxs_engine *engine;
        if (hxs_engine_new(&cfg, &engine, &err) < 0) {
                printf("result: the engine cannot start: %s\n", err.message);
                return 1;
        }
        hxs_request *req = hxs_request_new();
        hxs_result res = { 0 };
        int r = -1;
        if (req && hxs_request_set_language(req, HXS_LANG_BASH) == 0 &&
            hxs_request_set_code(req, "echo ok", 7) == 0)
                r = hxs_run(engine, req, &res, &err);
        bool ok = r == 0 && res.exit_code == 0 && strcmp(res.stdout_data, "ok\n") == 0;
        if (ok)
                printf("result: a sandbox ran (%llu ms)\n", (unsigned long long)res.execution_time_ms);
        else
                printf("result: a test sandbox failed: %s\n", r < 0 ? err.message : res.stderr_data);
        hxs_result_clear(&res);
        hxs_request_free(req);
        hxs_engine_free(engine);
        return ok ? 0 : 1;
}
