/* SPDX-License-Identifier: Apache-2.0 */
/* packages=: which requested Python distributions the image already provides. */
#pragma once

#include "hexr-sandbox/sandbox.h"

typedef struct hxs_pkg {
        char name[64];          /* normalized: lower case, runs of -_. as one - */
        char version[32];
} hxs_pkg;

typedef struct hxs_pkg_index {
        hxs_pkg *pkgs;
        size_t n;
} hxs_pkg_index;

/* Lists the distributions installed in the image's dist-packages directories. */
int hxs_pkg_index_load(hxs_pkg_index *ret, const char *rootfs);
void hxs_pkg_index_free(hxs_pkg_index *idx);

/* Checks every requirement of the request against the image. 0 when all are
 * satisfied (nothing to install); -ENOENT with err (HXS_ERR_NOT_FOUND, naming the
 * package) otherwise, which the engine answers with an install step when a wheelhouse
 * is configured; -EINVAL for languages without packages. */
int hxs_pkg_check(const hxs_pkg_index *idx, const hxs_request *req, hxs_error *err);

/* The canonical spelling of requirement s (which two strings share exactly when they
 * ask for the same thing: names per PEP 503, extras normalized, sorted and once,
 * specifiers sorted and once, no whitespace): 0 with it in out, or -EINVAL with *why
 * (static text) saying which rule s breaks: not a requirement at all, or something pip
 * would take for a path, a URL, an archive file or an option. */
int hxs_pkg_canonical(const char *s, char *out, size_t size, const char **why);
/* Replaces req's requirements by their canonical spellings, sorted, each once. 0, or
 * -EINVAL (a requirement that is not one: validate first), -ENOMEM. */
int hxs_pkg_canonicalize(hxs_request *req);

/* Exposed for tests: PEP 503 name normalization, and a PEP 440 subset comparison
 * (numeric release segments) of "version OP spec". */
void hxs_pkg_normalize(const char *name, size_t len, char *out, size_t size);
int hxs_pkg_version_cmp(const char *a, const char *b);
