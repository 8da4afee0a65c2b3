/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What each language offers: the runtime manifest built into the library, with the
 * versions the sandbox's root holds. Read once at start, from that root's metadata
 * only (no interpreter is run): the dpkg database for the Debian versions, the
 * dist-info / egg-info directories of dist-packages for the Python distributions (the
 * index of packages.c); for the microVM backends, the guest image's manifest.json,
 * which the image builder writes from the same two sources.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/engine.h"
#include "pkg/packages.h"
#include "engine/runtime-info.h"
#include "engine/runtime.h"

#define DPKG_STATUS "/var/lib/dpkg/status"

/* Copies one word of a manifest line; -E2BIG if it does not fit. */
static int copy_word(char *dst, size_t size, const char *w, size_t len)
{
        if (len >= size)
                return -E2BIG;
        memcpy(dst, w, len);
        dst[len] = '\0';
        return 0;
}

static int parse_line(const char *line, size_t len, unsigned lineno, hxs_runtime_info *ri, hxs_error *err)
{
        const char *words[5];
        size_t lens[5], n = 0;
        const char *p = line, *end = line + len;
        const char *hash = memchr(line, '#', len);
        if (hash)
                end = hash;
        while (p < end) {
                while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
                        p++;
                if (p >= end)
                        break;
                const char *w = p;
                while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
                        p++;
                if (n == ARRAY_SIZE(words))
                        return err_fail(err, HXS_ERR_INTERNAL, -EINVAL,
                                        "runtime manifest, line %u: too many words", lineno);
                words[n] = w;
                lens[n++] = (size_t)(p - w);
        }
        if (n == 0)
                return 0;
        if (n != 2 && n != 4)
                return err_fail(err, HXS_ERR_INTERNAL, -EINVAL,
                                "runtime manifest, line %u: expected LANGUAGE PACKAGE [DISTRIBUTION IMPORT]",
                                lineno);
        if (ri->n == HXS_RUNTIME_PACKAGES_MAX)
                return err_fail(err, HXS_ERR_INTERNAL, -E2BIG, "runtime manifest, line %u: more than %d packages",
                                lineno, HXS_RUNTIME_PACKAGES_MAX);
        hxs_runtime_package *pkg = &ri->pkgs[ri->n];
        memset(pkg, 0, sizeof(*pkg));
        pkg->language = HXS_LANG_MAX;
        if (!(lens[0] == 3 && memcmp(words[0], "any", 3) == 0)) {
                hxs_language l;
                for (l = 0; l < HXS_LANG_MAX; l++)
                        if (strlen(hxs_language_name(l)) == lens[0] &&
                            memcmp(hxs_language_name(l), words[0], lens[0]) == 0)
                                break;
                if (l == HXS_LANG_MAX)
                        return err_fail(err, HXS_ERR_INTERNAL, -EINVAL,
                                        "runtime manifest, line %u: language \"%.*s\" is not python, javascript, bash or any",
                                        lineno, (int)lens[0], words[0]);
                pkg->language = l;
        }
        if (copy_word(pkg->debian, sizeof(pkg->debian), words[1], lens[1]) < 0 ||
            (n == 4 && (copy_word(pkg->distribution, sizeof(pkg->distribution), words[2], lens[2]) < 0 ||
                        copy_word(pkg->import_name, sizeof(pkg->import_name), words[3], lens[3]) < 0)))
                return err_fail(err, HXS_ERR_INTERNAL, -E2BIG, "runtime manifest, line %u: a name is too long",
                                lineno);
        if (n == 4 && pkg->language != HXS_LANG_PYTHON)
                return err_fail(err, HXS_ERR_INTERNAL, -EINVAL,
                                "runtime manifest, line %u: only python packages name a distribution", lineno);
        bool first = true;
        for (size_t i = 0; i < ri->n; i++) {
                if (strcmp(ri->pkgs[i].debian, pkg->debian) == 0)
                        return err_fail(err, HXS_ERR_INTERNAL, -EINVAL,
                                        "runtime manifest, line %u: %s is listed twice", lineno, pkg->debian);
                if (ri->pkgs[i].language == pkg->language)
                        first = false;
        }
        pkg->interpreter = first && pkg->language != HXS_LANG_MAX;
        if (pkg->interpreter && n == 4)
                return err_fail(err, HXS_ERR_INTERNAL, -EINVAL,
                                "runtime manifest, line %u: the first package of a language is its interpreter, not a distribution",
                                lineno);
        ri->n++;
        return 0;
}

int runtime_manifest_parse(const char *text, hxs_runtime_info *ret, hxs_error *err)
{
        hxs_runtime_info ri;
        memset(&ri, 0, sizeof(ri));
        unsigned lineno = 0;
        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                int r = parse_line(p, len, ++lineno, &ri, err);
                if (r < 0)
                        return r;
                p += len + (nl ? 1 : 0);
        }
        for (hxs_language l = 0; l < HXS_LANG_MAX; l++) {
                bool found = false;
                for (size_t i = 0; i < ri.n; i++)
                        found |= ri.pkgs[i].language == l;
                if (!found)
                        return err_fail(err, HXS_ERR_INTERNAL, -EINVAL, "runtime manifest: no package for %s",
                                        hxs_language_name(l));
                ri.interpreter[l] = runtime_table[l].path;
        }
        *ret = ri;
        return 0;
}

void runtime_upstream_version(const char *debian, char *buf, size_t size)
{
        const char *start = debian;
        size_t digits = strspn(debian, "0123456789");
        if (digits > 0 && debian[digits] == ':')
                start = debian + digits + 1;
        const char *dash = strrchr(start, '-');
        size_t len = dash ? (size_t)(dash - start) : strlen(start);
        snprintf(buf, size, "%.*s", (int)len, start);
}

static hxs_runtime_package *find_debian(hxs_runtime_info *ri, const char *name, size_t len)
{
        for (size_t i = 0; i < ri->n; i++)
                if (strlen(ri->pkgs[i].debian) == len && memcmp(ri->pkgs[i].debian, name, len) == 0)
                        return &ri->pkgs[i];
        return NULL;
}

/* "Field: value" at the start of line, else NULL. */
static const char *field_value(const char *line, const char *field)
{
        size_t fl = strlen(field);
        if (strncmp(line, field, fl) != 0 || line[fl] != ':')
                return NULL;
        line += fl + 1;
        while (*line == ' ' || *line == '\t')
                line++;
        return line;
}

static void strip_newline(char *s)
{
        s[strcspn(s, "\r\n")] = '\0';
}

int runtime_read_dpkg_status(hxs_runtime_info *ri, const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        char *line = NULL;
        size_t cap = 0;
        char name[128] = "", version[64] = "";
        bool installed = false;
        for (;;) {
                ssize_t n = getline(&line, &cap, f);
                if (n < 0 || line[0] == '\n') {
                        /* end of a stanza: the first installed entry of a name counts */
                        hxs_runtime_package *p = installed && version[0] ? find_debian(ri, name, strlen(name)) : NULL;
                        if (p && !p->debian_version[0])
                                snprintf(p->debian_version, sizeof(p->debian_version), "%s", version);
                        name[0] = version[0] = '\0';
                        installed = false;
                        if (n < 0)
                                break;
                        continue;
                }
                strip_newline(line);
                const char *v;
                if ((v = field_value(line, "Package")))
                        snprintf(name, sizeof(name), "%s", v);
                else if ((v = field_value(line, "Version")))
                        snprintf(version, sizeof(version), "%s", v);
                else if ((v = field_value(line, "Status")))
                        installed = strlen(v) >= 10 && strcmp(v + strlen(v) - 10, " installed") == 0;
        }
        free(line);
        fclose(f);
        return 0;
}

/* Distribution versions from an index of a root's dist-packages. */
static void versions_from_index(hxs_runtime_info *ri, const pkg_index *idx)
{
        for (size_t i = 0; i < ri->n; i++) {
                hxs_runtime_package *p = &ri->pkgs[i];
                if (!p->distribution[0])
                        continue;
                char norm[64];
                pkg_normalize(p->distribution, strlen(p->distribution), norm, sizeof(norm));
                p->version[0] = '\0';
                for (size_t j = 0; j < idx->n; j++)
                        if (strcmp(idx->pkgs[j].name, norm) == 0) {
                                snprintf(p->version, sizeof(p->version), "%s", idx->pkgs[j].version);
                                break;
                        }
        }
}

static void language_versions(hxs_runtime_info *ri)
{
        for (size_t i = 0; i < ri->n; i++)
                if (ri->pkgs[i].interpreter)
                        runtime_upstream_version(ri->pkgs[i].debian_version, ri->version[ri->pkgs[i].language],
                                                 sizeof(ri->version[0]));
}

/* The namespace backend's root: the host's (rootfs "") or SANDBOX_ROOTFS. */
static void load_root(hxs_runtime_info *ri, const char *rootfs)
{
        char path[512];
        const char *where = rootfs[0] ? rootfs : "/";
        snprintf(path, sizeof(path), "%s" DPKG_STATUS, rootfs);
        int r = runtime_read_dpkg_status(ri, path);
        pkg_index idx = { 0 };
        if (pkg_index_load(&idx, rootfs) == 0) {
                versions_from_index(ri, &idx);
                pkg_index_free(&idx);
        }
        if (r < 0)
                snprintf(ri->source, sizeof(ri->source),
                         "the Python dist-packages of the root %s; it has no dpkg database (%s: %s), so no Debian versions",
                         where, path, strerror(-r));
        else
                snprintf(ri->source, sizeof(ri->source), "the dpkg database (%s) and the Python dist-packages of the root %s",
                         path, where);
}

/* The microVM backends' root: what the image builder recorded of it. */
static void load_image(hxs_runtime_info *ri, const char *image_dir)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/manifest.json", image_dir);
        json_error_t jerr;
        json_t *m = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (!m) {
                snprintf(ri->source, sizeof(ri->source),
                         "no guest image manifest at %s (%s; hexr-sandbox image build), so no versions", path, jerr.text);
                return;
        }
        json_t *debs = json_object_get(m, "packages"), *dists = json_object_get(m, "python_distributions");
        for (size_t i = 0; i < ri->n; i++) {
                hxs_runtime_package *p = &ri->pkgs[i];
                const char *v = json_string_value(json_object_get(debs, p->debian));
                if (v)
                        snprintf(p->debian_version, sizeof(p->debian_version), "%s", v);
                if (!p->distribution[0])
                        continue;
                char norm[64];
                pkg_normalize(p->distribution, strlen(p->distribution), norm, sizeof(norm));
                v = json_string_value(json_object_get(dists, norm));
                if (v)
                        snprintf(p->version, sizeof(p->version), "%s", v);
        }
        snprintf(ri->source, sizeof(ri->source), "the guest image's manifest (%s)%s", path,
                 json_is_object(dists) ? "" : ", which lists no Python distributions (rebuild it)");
        json_decref(m);
}

/* The versions of a parsed manifest's packages, from the root `backend` runs in. */
static void load_versions(const hxs_config *cfg, hxs_backend_kind backend, hxs_runtime_info *ri)
{
        if (backend == HXS_BACKEND_QEMU || backend == HXS_BACKEND_FIRECRACKER)
                load_image(ri, cfg->vm_image_dir);
        else
                load_root(ri, cfg->rootfs);
        language_versions(ri);
}

int hxs_runtime_info_load(const hxs_config *cfg, hxs_backend_kind backend, hxs_runtime_info *ret, hxs_error *err)
{
        int r = runtime_manifest_parse(embed_runtimes_txt, ret, err);
        if (r < 0)
                return r;
        load_versions(cfg, backend, ret);
        return 0;
}

/* pthread_once's routine takes no argument: the engine being loaded, under the once */
static _Thread_local hxs_engine *loading;

static void load_engine_versions(void)
{
        load_versions(&loading->cfg, loading->kind, &loading->runtimes);
}

void runtime_info_versions_once(hxs_engine *e)
{
        loading = e;
        (void)pthread_once(&e->runtimes_once, load_engine_versions);
        loading = NULL;
}

const hxs_runtime_info *hxs_engine_runtime_info(hxs_engine *e)
{
        runtime_info_versions_once(e);
        return &e->runtimes;
}

int runtime_check_distributions(hxs_runtime_info *ri, const char *rootfs, hxs_error *err)
{
        pkg_index idx = { 0 };
        int r = pkg_index_load(&idx, rootfs);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        versions_from_index(ri, &idx);
        pkg_index_free(&idx);

        char missing[300] = "";
        size_t used = 0, n_missing = 0;
        for (size_t i = 0; i < ri->n; i++) {
                const hxs_runtime_package *p = &ri->pkgs[i];
                if (!p->distribution[0] || p->version[0])
                        continue;
                int w = snprintf(missing + used, sizeof(missing) - used, "%s%s (%s)", n_missing ? ", " : "",
                                 p->distribution, p->debian);
                if (w > 0)
                        used = used + (size_t)w < sizeof(missing) ? used + (size_t)w : sizeof(missing) - 1;
                n_missing++;
        }
        if (n_missing == 0)
                return 0;
        return err_fail(err, HXS_ERR_UNSUPPORTED, -ENOENT,
                        "the sandbox root %s lacks %zu Python distribution%s of the runtime: %s; scripts/setup.sh installs them",
                        rootfs[0] ? rootfs : "/", n_missing, n_missing == 1 ? "" : "s", missing);
}
