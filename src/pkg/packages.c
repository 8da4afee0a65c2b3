/* SPDX-License-Identifier: Apache-2.0 */
/*
 * packages=: a requested distribution that the image already has costs nothing. The
 * index of installed distributions is read once (dist-info / egg-info directory names
 * in the image's dist-packages), and each requirement is checked against it: name,
 * then version specifiers (==, !=, >=, <=, >, <, ~=; numeric release segments).
 * What the image lacks is installed from PACKAGES_WHEELHOUSE or PACKAGES_INDEX_URL
 * (pkgcache.c, pkg-step.c); without one, such a request is a 422 naming the package.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "pkg/packages.h"
#include "engine/request.h"

static const char *const site_dirs[] = {
        "/usr/lib/python3/dist-packages",
        "/usr/local/lib/python3.11/dist-packages",
        "/usr/lib/python3.11/site-packages",
};

void pkg_normalize(const char *name, size_t len, char *out, size_t size)
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
int pkg_version_cmp(const char *a, const char *b)
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

/* ---- requirement strings ---------------------------------------------------------- */

#define REQ_MAX_LEN 200
#define REQ_MAX_PARTS 64

static bool is_ws(char c)
{
        return c == ' ' || c == '\t';
}

static const char *skip_ws(const char *p)
{
        while (is_ws(*p))
                p++;
        return p;
}

static bool name_char(char c)
{
        return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* A PEP 508 name at p: a letter or digit, then letters, digits and -_. ending in a
 * letter or digit. Its length, 0 if none. */
static size_t name_len(const char *p)
{
        size_t n = 0;
        if (!isalnum((unsigned char)p[0]))
                return 0;
        while (name_char(p[n]))
                n++;
        while (n > 0 && !isalnum((unsigned char)p[n - 1]))
                n--;
        return n;
}

static bool ends_with_ci(const char *s, size_t len, const char *sfx)
{
        size_t sl = strlen(sfx);
        return len >= sl && strncasecmp(s + len - sl, sfx, sl) == 0;
}

/* What pip would take for a local file rather than a name. */
static bool archive_name(const char *s, size_t len)
{
        static const char *const exts[] = { ".whl", ".zip", ".tar", ".tgz", ".tar.gz", ".tbz", ".tar.bz2",
                                            ".txz", ".tar.xz", ".tlz", ".tar.lz", ".tar.lzma" };
        for (size_t i = 0; i < ARRAY_SIZE(exts); i++)
                if (ends_with_ci(s, len, exts[i]))
                        return true;
        return false;
}

static const char archive_rule[] =
        "it looks like an archive file (only names of distributions are installed, never URLs, paths or archive files)";

/* Why a string that is not a requirement is not one, when it looks like something
 * else pip would act on: a path, a URL, an archive, an option, a marker. */
static const char *refusal(const char *s)
{
        const char *t = skip_ws(s);
        size_t nl = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.");
        if (*t == '-')
                return "it is an option (options are not accepted)";
        if (strstr(s, "://") || strchr(s, '@') || strncasecmp(t, "file:", 5) == 0 ||
            (nl < strlen(t) && t[nl] == '+' && strchr(t + nl, ':')))
                return "it looks like a URL (only names of distributions are installed, never URLs, paths or archive files)";
        if (*t == '.' || *t == '/' || *t == '~' || strchr(s, '/') || strchr(s, '\\'))
                return "it looks like a path (only names of distributions are installed, never URLs, paths or archive files)";
        size_t tl = strlen(t);
        while (tl > 0 && is_ws(t[tl - 1]))
                tl--;
        /* pip looks at the whole string (and at the name, before any specifier) */
        if (archive_name(t, nl) || archive_name(t, tl))
                return archive_rule;
        if (strchr(s, ';'))
                return "environment markers are not accepted";
        return NULL;
}

typedef struct part {
        char text[REQ_MAX_LEN + 1];     /* canonical: extras normalized, specifiers without spaces */
} part;

static int cmp_part(const void *a, const void *b)
{
        return strcmp(((const part *)a)->text, ((const part *)b)->text);
}

/* Appends parts (sorted, each once) to out, separated by ','. */
static size_t put_parts(char *out, size_t o, size_t size, part *parts, size_t n)
{
        if (n > 1)
                qsort(parts, n, sizeof(*parts), cmp_part);
        for (size_t i = 0; i < n; i++) {
                if (i > 0 && strcmp(parts[i].text, parts[i - 1].text) == 0)
                        continue;
                int w = snprintf(out + o, size - o, "%s%s", i > 0 ? "," : "", parts[i].text);
                o = w < 0 || (size_t)w >= size - o ? size - 1 : o + (size_t)w;
        }
        return o;
}

int pkg_canonical(const char *s, char *out, size_t size, const char **why)
{
        static const char *const generic =
                "a requirement is a name with optional extras and version specifiers, such as numpy or pandas>=2,<3";
        size_t len = strlen(s);
        if (len == 0) {
                *why = "it is empty";
                return -EINVAL;
        }
        if (len > REQ_MAX_LEN) {
                *why = "it is longer than 200 characters";
                return -EINVAL;
        }
        const char *r = refusal(s);
        if (r) {
                *why = r;
                return -EINVAL;
        }
        *why = generic;
        const char *p = skip_ws(s);
        size_t nl = name_len(p);
        if (nl == 0 || name_char(p[nl]))
                return -EINVAL;
        if (nl > 63) { /* names are compared normalized in 64 bytes */
                *why = "its name is longer than 63 characters";
                return -EINVAL;
        }
        const char *name = p;
        p = skip_ws(p + nl);
        part extras[REQ_MAX_PARTS], specs[REQ_MAX_PARTS];
        size_t ne = 0, ns = 0;
        if (*p == '[') {
                p = skip_ws(p + 1);
                while (*p != ']') {
                        size_t el = name_len(p);
                        if (el == 0 || el > 63 || name_char(p[el]) || ne == REQ_MAX_PARTS)
                                return -EINVAL;
                        pkg_normalize(p, el, extras[ne++].text, sizeof(extras[0].text));
                        p = skip_ws(p + el);
                        if (*p == ',')
                                p = skip_ws(p + 1);
                        else if (*p != ']')
                                return -EINVAL;
                }
                p = skip_ws(p + 1);
        }
        /* specifiers: (==|!=|<=|>=|~=|<|>)version, comma separated (PEP 440's operators,
         * not "===" arbitrary equality, which matches any text) */
        static const char *const ops[] = { "==", "!=", "<=", ">=", "~=", "<", ">" };
        while (*p) {
                size_t ol = 0;
                for (size_t i = 0; i < ARRAY_SIZE(ops) && !ol; i++)
                        if (strncmp(p, ops[i], strlen(ops[i])) == 0)
                                ol = strlen(ops[i]);
                if (!ol || ns == REQ_MAX_PARTS)
                        return -EINVAL;
                const char *start = p;
                p = skip_ws(p + ol);
                /* a version starts with a digit (or v, as PEP 440 allows) */
                if (!isdigit((unsigned char)*p) && !(*p == 'v' && isdigit((unsigned char)p[1])))
                        return -EINVAL;
                while (isalnum((unsigned char)*p) || *p == '.' || *p == '*' || *p == '+' || *p == '!')
                        p++;
                size_t k = 0;
                for (const char *q = start; q < p; q++)
                        if (!is_ws(*q))
                                specs[ns].text[k++] = *q;
                specs[ns].text[k] = '\0';
                /* not a PEP 440 version anyway, and whichever specifier the canonical
                 * order puts last ends the string pip looks at */
                if (archive_name(specs[ns].text, k)) {
                        *why = archive_rule;
                        return -EINVAL;
                }
                ns++;
                p = skip_ws(p);
                if (*p == ',') {
                        p = skip_ws(p + 1);
                        if (!*p)
                                return -EINVAL;
                } else if (*p) {
                        return -EINVAL;
                }
        }
        char canon[64];
        pkg_normalize(name, nl, canon, sizeof(canon));
        size_t o = (size_t)snprintf(out, size, "%s", canon);
        if (o >= size)
                return -ENAMETOOLONG;
        if (ne) {
                o += (size_t)snprintf(out + o, size - o, "[");
                o = put_parts(out, o, size, extras, ne);
                if (o + 1 < size)
                        o += (size_t)snprintf(out + o, size - o, "]");
        }
        o = put_parts(out, o, size, specs, ns);
        if (o + 1 >= size)
                return -ENAMETOOLONG;
        *why = NULL;
        return 0;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int pkg_canonicalize(hxs_request *req)
{
        for (size_t i = 0; i < req->n_packages; i++) {
                char buf[REQ_MAX_LEN + 8];
                const char *why;
                int r = pkg_canonical(req->packages[i], buf, sizeof(buf), &why);
                if (r < 0)
                        return r;
                char *c = strdup(buf);
                if (!c)
                        return -ENOMEM;
                free(req->packages[i]);
                req->packages[i] = c;
        }
        if (req->n_packages > 1)
                qsort(req->packages, req->n_packages, sizeof(char *), cmp_str);
        size_t kept = 0;
        for (size_t i = 0; i < req->n_packages; i++) {
                if (kept > 0 && strcmp(req->packages[i], req->packages[kept - 1]) == 0) {
                        free(req->packages[i]);
                        continue;
                }
                req->packages[kept++] = req->packages[i];
        }
        req->n_packages = kept;
        return 0;
}

int pkg_index_load(pkg_index *ret, const char *rootfs)
{
        pkg_index idx = { 0 };
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
                                pkg_req *p = realloc(idx.pkgs, nc * sizeof(*p));
                                if (!p) {
                                        closedir(dir);
                                        pkg_index_free(&idx);
                                        return -ENOMEM;
                                }
                                idx.pkgs = p;
                                cap = nc;
                        }
                        pkg_req *p = &idx.pkgs[idx.n++];
                        pkg_normalize(n, (size_t)(dash - n), p->name, sizeof(p->name));
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

void pkg_index_free(pkg_index *idx)
{
        free(idx->pkgs);
        idx->pkgs = NULL;
        idx->n = 0;
}

static const pkg_req *find(const pkg_index *idx, const char *name)
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
                return pkg_version_cmp(version, want) == 0;
        }
        c = pkg_version_cmp(version, want);
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

int pkg_check(const pkg_index *idx, const hxs_request *req, hxs_error *err)
{
        if (req->n_packages == 0)
                return 0;
        if (req->language != HXS_LANG_PYTHON)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "packages",
                                      "packages: only python executions can ask for packages");
        for (size_t i = 0; i < req->n_packages; i++) {
                /* the canonical spelling (no spaces); as written if it is not a requirement */
                char canon[REQ_MAX_LEN + 8];
                const char *why, *r = req->packages[i];
                if (pkg_canonical(r, canon, sizeof(canon), &why) == 0)
                        r = canon;
                size_t nl = strcspn(r, "[=!<>~");
                char name[64];
                pkg_normalize(r, nl, name, sizeof(name));
                const pkg_req *p = find(idx, name);
                if (!p)
                        return err_fail_subject(err, HXS_ERR_NOT_FOUND, -ENOENT, "packages", r,
                                                "packages: \"%.64s\" is not in the image, and no package source is configured (PACKAGES_WHEELHOUSE, PACKAGES_INDEX_URL)",
                                                r);
                const char *spec = r + nl;
                if (*spec == '[')
                        spec = strchr(spec, ']') ? strchr(spec, ']') + 1 : spec + strlen(spec);
                char buf[256];
                snprintf(buf, sizeof(buf), "%s", spec);
                for (char *save, *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save))
                        if (!satisfies_one(p->version, s))
                                return err_fail_subject(err, HXS_ERR_NOT_FOUND, -ENOENT, "packages", r,
                                                        "packages: \"%.64s\" is not satisfied by the image's %s %s, and no package source is configured (PACKAGES_WHEELHOUSE, PACKAGES_INDEX_URL)",
                                                        r, p->name, p->version);
        }
        return 0;
}
