/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=: a requested distribution that the image already has costs nothing. The
 * index of installed distributions is read once (dist-info / egg-info directory names
 * in the image's dist-packages), and each requirement is checked against it: name,
 * then version specifiers (==, !=, >=, <=, >, <, ~=; numeric release segments).
 * What the image lacks is installed from PACKAGES_WHEELHOUSE or PACKAGES_INDEX_URL
 * (pkgcache.c, pkg-install.c); without one, such a request is a 422 naming the package.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/packages.h"
#include "engine/request.h"

static const char *const site_dirs[] = {
        "/usr/lib/python3/dist-packages",
        "/usr/local/lib/python3.11/dist-packages",
        "/usr/lib/python3.11/site-packages",
};

void hxs_pkg_normalize(const char *name, size_t len, char *out, size_t size)
{
        size_t o = 0;
        bool sep = false;
        for (size_t i = 0; i < len && o + 1 < size; i++) {
                char c = name[i];
                if (c == '-' || c == '_' || c == '.') {
                        sep = true;
                        continue;
                }
                if (sep && o > 0 && o + 1 < size)
                        out[o++] = '-';
                sep = false;
                if (o + 1 < size)
                        out[o++] = (char)tolower((unsigned char)c);
        }
        out[o] = '\0';
}

/* Compares dotted numeric releases: "1.10" > "1.9", "2" == "2.0". Non-numeric tails
 * (rc1, .post1) compare as text after the numbers. */
int hxs_pkg_version_cmp(const char *a, const char *b)
{
        while (*a || *b) {
                if (isdigit((unsigned char)*a) || isdigit((unsigned char)*b)) {
                        unsigned long long x = 0, y = 0;
                        while (isdigit((unsigned char)*a))
                                x = x * 10 + (unsigned long long)(*a++ - '0');
                        while (isdigit((unsigned char)*b))
                                y = y * 10 + (unsigned long long)(*b++ - '0');
                        if (x != y)
                                return x < y ? -1 : 1;
                } else if (*a != *b && *a != '.' && *b != '.') {
                        return strcmp(a, b) < 0 ? -1 : 1;
                }
                if (*a == '.')
                        a++;
                if (*b == '.')
                        b++;
                if (!isdigit((unsigned char)*a) && *a && *a != '.' && !isdigit((unsigned char)*b) && *b &&
                    *b != '.') {
                        int c = strcmp(a, b);
                        return c < 0 ? -1 : c > 0;
                }
                if (!*a && *b && !isdigit((unsigned char)*b))
                        return 1; /* 1.0 > 1.0rc1 */
                if (!*b && *a && !isdigit((unsigned char)*a))
                        return -1;
        }
        return 0;
}

int hxs_pkg_index_load(hxs_pkg_index *ret, const char *rootfs)
{
        hxs_pkg_index idx = { 0 };
        size_t cap = 0;
        for (size_t d = 0; d < ARRAY_SIZE(site_dirs); d++) {
                char path[512];
                snprintf(path, sizeof(path), "%s%s", rootfs, site_dirs[d]);
                DIR *dir = opendir(path);
                if (!dir)
                        continue;
                struct dirent *de;
                while ((de = readdir(dir))) {
                        const char *n = de->d_name;
                        size_t len = strlen(n);
                        size_t sfx = len > 10 && strcmp(n + len - 10, ".dist-info") == 0 ? 10
                                   : len > 9 && strcmp(n + len - 9, ".egg-info") == 0   ? 9
                                                                                        : 0;
                        if (!sfx)
                                continue;
                        /* "<name>-<version>[-pyX.Y].<sfx>" */
                        const char *dash = memchr(n, '-', len - sfx);
                        if (!dash)
                                continue;
                        if (idx.n == cap) {
                                size_t nc = cap ? cap * 2 : 128;
                                if (nc > 100000)
                                        break;
                                hxs_pkg *p = realloc(idx.pkgs, nc * sizeof(*p));
                                if (!p) {
                                        closedir(dir);
                                        hxs_pkg_index_free(&idx);
                                        return -ENOMEM;
                                }
                                idx.pkgs = p;
                                cap = nc;
                        }
                        hxs_pkg *p = &idx.pkgs[idx.n++];
                        hxs_pkg_normalize(n, (size_t)(dash - n), p->name, sizeof(p->name));
                        size_t vlen = strcspn(dash + 1, "-");
                        size_t vmax = (size_t)(n + len - sfx - (dash + 1));
                        if (vlen > vmax)
                                vlen = vmax;
                        snprintf(p->version, sizeof(p->version), "%.*s", (int)vlen, dash + 1);
                }
                closedir(dir);
        }
        *ret = idx;
        return 0;
}

void hxs_pkg_index_free(hxs_pkg_index *idx)
{
        free(idx->pkgs);
        idx->pkgs = NULL;
        idx->n = 0;
}

static const hxs_pkg *find(const hxs_pkg_index *idx, const char *name)
{
        for (size_t i = 0; i < idx->n; i++)
                if (strcmp(idx->pkgs[i].name, name) == 0)
                        return &idx->pkgs[i];
        return NULL;
}

/* Does `version` satisfy one specifier such as ">=1.5" or "~=2.1"? */
static bool satisfies_one(const char *version, const char *spec)
{
        char op[3] = { 0 };
        size_t ol = strspn(spec, "=!<>~");
        if (ol == 0 || ol > 2)
                return false;
        memcpy(op, spec, ol);
        const char *want = spec + ol;
        int c;
        if (strcmp(op, "==") == 0) {
                size_t wl = strlen(want);
                if (wl >= 2 && strcmp(want + wl - 2, ".*") == 0) /* ==1.5.* */
                        return strncmp(version, want, wl - 1) == 0 || strncmp(version, want, wl - 2) == 0;
                return hxs_pkg_version_cmp(version, want) == 0;
        }
        c = hxs_pkg_version_cmp(version, want);
        if (strcmp(op, "!=") == 0)
                return c != 0;
        if (strcmp(op, ">=") == 0)
                return c >= 0;
        if (strcmp(op, "<=") == 0)
                return c <= 0;
        if (strcmp(op, ">") == 0)
                return c > 0;
        if (strcmp(op, "<") == 0)
                return c < 0;
        if (strcmp(op, "~=") == 0) {
                /* ~=X.Y.Z means >=X.Y.Z and ==X.Y.* */
                if (c < 0)
                        return false;
                const char *last = strrchr(want, '.');
                if (!last)
                        return true;
                size_t pl = (size_t)(last - want);
                return strncmp(version, want, pl) == 0 && (version[pl] == '.' || version[pl] == '\0');
        }
        return false;
}

int hxs_pkg_check(const hxs_pkg_index *idx, const hxs_request *req, hxs_error *err)
{
        if (req->n_packages == 0)
                return 0;
        if (req->language != HXS_LANG_PYTHON)
                return hxs_fail_field(err, HXS_ERR_INVALID, -EINVAL, "packages",
                                      "packages: only python executions can ask for packages");
        for (size_t i = 0; i < req->n_packages; i++) {
                const char *r = req->packages[i];
                size_t nl = strcspn(r, "[=!<>~");
                char name[64];
                hxs_pkg_normalize(r, nl, name, sizeof(name));
                const hxs_pkg *p = find(idx, name);
                if (!p)
                        return hxs_fail_field(err, HXS_ERR_NOT_FOUND, -ENOENT, "packages",
                                              "packages: \"%.64s\" is not in the image, and no package source is configured (PACKAGES_WHEELHOUSE, PACKAGES_INDEX_URL)",
                                              r);
                const char *spec = r + nl;
                if (*spec == '[')
                        spec = strchr(spec, ']') ? strchr(spec, ']') + 1 : spec + strlen(spec);
                char buf[256];
                snprintf(buf, sizeof(buf), "%s", spec);
                for (char *save, *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save))
                        if (!satisfies_one(p->version, s))
                                return hxs_fail_field(err, HXS_ERR_NOT_FOUND, -ENOENT, "packages",
                                                      "packages: \"%.64s\" is not satisfied by the image's %s %s, and no package source is configured (PACKAGES_WHEELHOUSE, PACKAGES_INDEX_URL)",
                                                      r, p->name, p->version);
        }
        return 0;
}
