/* SPDX-License-Identifier: Apache-2.0 */
/* packages=: which requested Python distributions the image already provides. */
#pragma once

#include "hexr-sandbox/sandbox.h"

typedef struct pkg_req {
        char name[64];          /* normalized: lower case, runs of -_. as one - */
        char version[32];
} pkg_req;

typedef struct pkg_index {
        pkg_req *pkgs;
        size_t n;
} pkg_index;

/* Lists the distributions installed in the image's dist-packages directories. */
int pkg_index_load(pkg_index *ret, const char *rootfs);
void pkg_index_free(pkg_index *idx);

/* Checks every requirement of the request against the image. 0 when all are
 * satisfied (nothing to install); -ENOENT with err (HXS_ERR_NOT_FOUND, naming the
 * package) otherwise, which the engine answers with an install step when a wheelhouse
 * is configured; -EINVAL for languages without packages. */
int pkg_check(const pkg_index *idx, const hxs_request *req, hxs_error *err);

/* The canonical spelling of requirement s (which two strings share exactly when they
 * ask for the same thing: names per PEP 503, extras normalized, sorted and once,
 * specifiers sorted and once, no whitespace): 0 with it in out, or -EINVAL with *why
 * (static text) saying which rule s breaks: not a requirement at all, or something pip
 * would take for a path, a URL, an archive file or an option. */
int pkg_canonical(const char *s, char *out, size_t size, const char **why);
/* Replaces req's requirements by their canonical spellings, sorted, each once. 0, or
 * -EINVAL (a requirement that is not one: validate first), -ENOMEM. */
int pkg_canonicalize(hxs_request *req);

/* Exposed for tests: PEP 503 name normalization, and a PEP 440 subset comparison
 * (numeric release segments) of "version OP spec". */
void pkg_normalize(const char *name, size_t len, char *out, size_t size);
int pkg_version_cmp(const char *a, const char *b);
