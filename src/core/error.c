/* SPDX-License-Identifier: Apache-2.0 */
/* The error type threaded through every fallible call that a human reads. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static const char *const kind_names[HXS_ERR_KIND_MAX] = {
        [HXS_ERR_NONE] = "none",
        [HXS_ERR_INVALID] = "invalid_request",
        [HXS_ERR_UNSUPPORTED] = "unsupported",
        [HXS_ERR_NOT_FOUND] = "not_found",
        [HXS_ERR_SETUP] = "sandbox_setup_failed",
        [HXS_ERR_INTERNAL] = "internal",
};

const char *hxs_error_kind_name(hxs_error_kind kind)
{
        if ((unsigned)kind >= HXS_ERR_KIND_MAX)
                return "internal";
        return kind_names[kind];
}

void err_clear(hxs_error *err)
{
        if (err)
                memset(err, 0, sizeof(*err));
}

__attribute__((format(printf, 5, 0)))
static void vfill(hxs_error *err, hxs_error_kind kind, int ret, const char *field,
                  const char *fmt, va_list ap)
{
        err->kind = kind;
        err->errnum = ret < 0 ? -ret : 0;
        snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        err->subject[0] = '\0';
}

int err_fail(hxs_error *err, hxs_error_kind kind, int ret, const char *fmt, ...)
{
        if (err) {
                va_list ap;
                va_start(ap, fmt);
                vfill(err, kind, ret, NULL, fmt, ap);
                va_end(ap);
        }
        return ret;
}

int err_fail_field(hxs_error *err, hxs_error_kind kind, int ret, const char *field,
                   const char *fmt, ...)
{
        if (err) {
                va_list ap;
                va_start(ap, fmt);
                vfill(err, kind, ret, field, fmt, ap);
                va_end(ap);
        }
        return ret;
}

int err_fail_subject(hxs_error *err, hxs_error_kind kind, int ret, const char *field, const char *subject,
                     const char *fmt, ...)
{
        if (err) {
                va_list ap;
                va_start(ap, fmt);
                vfill(err, kind, ret, field, fmt, ap);
                va_end(ap);
                snprintf(err->subject, sizeof(err->subject), "%s", subject ? subject : "");
        }
        return ret;
}

int err_wrap(hxs_error *err, int ret, const char *fmt, ...)
{
        if (!err)
                return ret;
        char prefix[160], old[sizeof(err->message)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);
        memcpy(old, err->message, sizeof(old));
        snprintf(err->message, sizeof(err->message), "%s: %s", prefix, old);
        if (err->kind == HXS_ERR_NONE)
                err->kind = HXS_ERR_INTERNAL;
        return ret;
}
