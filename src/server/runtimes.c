/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /api/v1/runtimes: each language with its version and its packages, as the
 * engine read them from the sandbox root when it started (no interpreter runs per
 * request), and the short form /health carries.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/json.h"
#include "server/call.h"
#include "server/runtimes.h"
#include "server/state.h"

/* A version, or null when the root lacks it (or has no metadata to say). The root's
 * metadata is text the engine did not write: kept lossless only when it is UTF-8. */
static json_t *version_or_null(const char *v)
{
        return v[0] ? json_string_lossy(v, strlen(v)) : json_null();
}

static json_t *language_json(const hxs_runtime_info *ri, hxs_language l)
{
        const hxs_runtime_package *interp = NULL;
        json_t *pkgs = json_array(), *debs = json_array();
        for (size_t i = 0; i < ri->n; i++) {
                const hxs_runtime_package *p = &ri->pkgs[i];
                if (p->language != l)
                        continue;
                if (p->interpreter)
                        interp = p;
                json_array_append_new(debs, json_pack("{s:s,s:o}", "name", p->debian, "version",
                                                      version_or_null(p->debian_version)));
                if (p->distribution[0])
                        json_array_append_new(pkgs, json_pack("{s:s,s:s,s:o,s:s,s:o}", "name", p->distribution,
                                                              "import", p->import_name, "version",
                                                              version_or_null(p->version), "debian_package",
                                                              p->debian, "debian_version",
                                                              version_or_null(p->debian_version)));
        }
        return json_pack("{s:s,s:o,s:s,s:s?,s:o,s:o,s:o}", "language", hxs_language_name(l), "version",
                         version_or_null(ri->version[l]), "interpreter", ri->interpreter[l], "debian_package",
                         interp ? interp->debian : NULL, "debian_version",
                         version_or_null(interp ? interp->debian_version : ""), "packages", pkgs,
                         "debian_packages", debs);
}

json_t *runtimes_summary_json(const hxs_runtime_info *ri)
{
        json_t *o = json_object();
        for (hxs_language l = 0; l < HXS_LANG_MAX && o; l++)
                json_object_set_new(o, hxs_language_name(l), version_or_null(ri->version[l]));
        return o;
}

void reply_runtimes(call *c)
{
        server *srv = c->srv;
        const hxs_runtime_info *ri = hxs_engine_runtime_info(srv->engine);
        json_t *langs = json_array();
        for (hxs_language l = 0; l < HXS_LANG_MAX && langs; l++)
                json_array_append_new(langs, language_json(ri, l));
        json_t *o = json_pack("{s:s,s:o,s:o*}", "backend", hxs_engine_backend_name(srv->engine), "source",
                              json_string_lossy(ri->source, strnlen(ri->source, sizeof(ri->source))),
                              "runtimes", langs);
        free(c->reply);
        c->reply = o ? json_dumps(o, JSON_COMPACT) : NULL;
        c->reply_len = c->reply ? strlen(c->reply) : 0;
        c->status = 200;
        json_decref(o);
}
