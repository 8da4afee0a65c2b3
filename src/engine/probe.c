/* SPDX-License-Identifier: Apache-2.0 */
/* What this host offers each backend, for `doctor` and for the auto choice. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "engine/backend.h"
#include "pkg/pkgcache.h"

size_t probe_add(hxs_probe_item *items, size_t max, size_t n, const char *name, hxs_probe_status st,
                 const char *fmt, ...)
{
        if (n >= max)
                return n;
        hxs_probe_item *it = &items[n];
        snprintf(it->name, sizeof(it->name), "%s", name);
        it->status = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(it->detail, sizeof(it->detail), fmt, ap);
        va_end(ap);
        return n + 1;
}

/* The runtimes of the manifest in the root the backend runs: each interpreter and
 * each Python distribution with its version. What the namespace backend's health check
 * requires (the interpreters, the distributions) is MISSING when absent; a microVM
 * image is fixed when built, so what it lacks is only reported. */
static size_t probe_runtimes(const hxs_config *cfg, const backend_entry *b, hxs_probe_item *items, size_t max,
                             size_t n, bool *runnable)
{
        hxs_runtime_info ri;
        hxs_error err = { 0 };
        if (hxs_runtime_info_load(cfg, b->kind, &ri, &err) < 0)
                return probe_add(items, max, n, "runtimes", HXS_PROBE_MISSING, "%s", err.message);
        bool vm = b->ops->features & BACKEND_BUILT_IMAGE;
        hxs_probe_status absent = vm ? HXS_PROBE_DEGRADED : HXS_PROBE_MISSING;
        const char *fix = vm ? "not in the guest image: hexr-sandbox image build --force" : "scripts/setup.sh installs it";
        for (hxs_language l = 0; l < HXS_LANG_MAX; l++) {
                const char *deb = "", *deb_version = "?";
                for (size_t i = 0; i < ri.n; i++)
                        if (ri.pkgs[i].interpreter && ri.pkgs[i].language == l) {
                                deb = ri.pkgs[i].debian;
                                if (ri.pkgs[i].debian_version[0])
                                        deb_version = ri.pkgs[i].debian_version;
                        }
                char path[512];
                snprintf(path, sizeof(path), "%s%s", cfg->rootfs, ri.interpreter[l]);
                if (!vm && access(path, X_OK) < 0) {
                        n = probe_add(items, max, n, hxs_language_name(l), HXS_PROBE_MISSING, "%s: %s (Debian package %s)",
                                path, strerror(errno), deb);
                        *runnable = false;
                } else {
                        n = probe_add(items, max, n, hxs_language_name(l), HXS_PROBE_OK, "%s %s (Debian %s %s)",
                                ri.version[l][0] ? ri.version[l] : "(version unknown)", ri.interpreter[l], deb,
                                deb_version);
                }
        }
        for (size_t i = 0; i < ri.n; i++) {
                const hxs_runtime_package *p = &ri.pkgs[i];
                if (!p->distribution[0])
                        continue;
                char name[48];
                snprintf(name, sizeof(name), "python: %s", p->distribution);
                if (p->version[0]) {
                        n = probe_add(items, max, n, name, HXS_PROBE_OK, "%s (import %s; Debian %s %s)", p->version,
                                p->import_name, p->debian, p->debian_version[0] ? p->debian_version : "?");
                } else {
                        n = probe_add(items, max, n, name, absent, "absent (Debian package %s; %s)", p->debian, fix);
                        if (!vm)
                                *runnable = false;
                }
        }
        return probe_add(items, max, n, "versions from", HXS_PROBE_OK, "%s", ri.source);
}

size_t hxs_probe_host(const hxs_config *cfg, hxs_probe_item *items, size_t max,
                      hxs_backend_kind *ret_backend, bool *ret_runnable)
{
        size_t n = 0, n_backends;
        const backend_entry *table = backends_table(&n_backends);
        for (size_t i = 0; i < n_backends; i++)
                if (table[i].ops->probe)
                        n = table[i].ops->probe(cfg, items, max, n);
        /* the same choice as the engine's */
        hxs_config resolved = *cfg;
        char note[240];
        hxs_error why = { 0 };
        const backend_entry *b = backend_pick(&resolved, note, sizeof(note));
        *ret_backend = b->kind;
        *ret_runnable = b->ops->usable(&resolved, &why) == 0;
        n = probe_runtimes(&resolved, b, items, max, n, ret_runnable);
        if (cfg->packages_wheelhouse[0]) {
                hxs_error werr = { 0 };
                if (pkgcache_check_wheelhouse(cfg, &werr) == 0)
                        n = probe_add(items, max, n, "wheelhouse", HXS_PROBE_OK, "%s", cfg->packages_wheelhouse);
                else
                        n = probe_add(items, max, n, "wheelhouse", HXS_PROBE_MISSING, "%s", werr.message);
        }
        return n;
}
