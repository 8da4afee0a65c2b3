/* SPDX-License-Identifier: Apache-2.0 */
/* Filling hxs_error: formatted in place, never allocating, wrapped with context on the
 * way up. Every helper returns the negative errno it was given, so a failure site can
 * `return err_fail(err, ...)`. */
#pragma once

#include "hexr-sandbox/sandbox.h"
#include "core/macro.h"

/* Sets kind, errnum (from -ret) and the message; returns ret (a negative errno). */
int err_fail(hxs_error *err, hxs_error_kind kind, int ret, const char *fmt, ...) _printf_(4, 5);

/* Same, naming the request field or setting the message is about. */
int err_fail_field(hxs_error *err, hxs_error_kind kind, int ret, const char *field,
                   const char *fmt, ...) _printf_(5, 6);

/* Same, also naming the one thing it is about in err->subject (a package, a path), so
 * that no caller has to find it in the message. */
int err_fail_subject(hxs_error *err, hxs_error_kind kind, int ret, const char *field, const char *subject,
                     const char *fmt, ...) _printf_(6, 7);

/* Prefixes context to an already filled message: "creating cgroup: <old message>". */
int err_wrap(hxs_error *err, int ret, const char *fmt, ...) _printf_(3, 4);

void err_clear(hxs_error *err);
