/* SPDX-License-Identifier: Apache-2.0 */
/* One request's life (call.c): an engine error becomes one HTTP status and one error
 * code, and an error reply is the API's {"error":{"code","message"}} object, valid JSON
 * whatever bytes the message quotes. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/call.h"

static void test_status_and_code_of_each_kind(void **state)
{
        static const struct {
                hxs_error_kind kind;
                unsigned status;
                const char *code;
        } want[] = {
                { HXS_ERR_NONE, 500, "internal" },
                { HXS_ERR_INVALID, 400, "invalid_request" },
                { HXS_ERR_NOT_FOUND, 422, "not_found" },
                { HXS_ERR_UNSUPPORTED, 500, NULL },
                { HXS_ERR_SETUP, 500, NULL },
                { HXS_ERR_INTERNAL, 500, NULL },
        };
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                hxs_error err = { .kind = want[i].kind };
                assert_int_equal(call_status_of(&err), want[i].status);
                /* a 500's code names the kind, as the library does */
                const char *code = want[i].code ? want[i].code : hxs_error_kind_name(want[i].kind);
                assert_string_equal(call_error_code_of(&err), code);
        }
}

static json_t *reply_of(const call *c)
{
        json_error_t jerr;
        json_t *o = json_loadb(c->reply, c->reply_len, 0, &jerr);
        assert_non_null(o);
        return o;
}

static void test_error_reply(void **state)
{
        call c = { 0 };
        hxs_error err = { .kind = HXS_ERR_INVALID };

        strcpy(err.message, "timeout: must be at most 30 \xff");
        call_set_engine_error(&c, &err, "unused");
        assert_int_equal(c.status, 400);
        assert_string_equal(c.error_code, "invalid_request");
        json_t *o = reply_of(&c);
        json_t *e = json_object_get(o, "error");
        assert_string_equal(json_string_value(json_object_get(e, "code")), "invalid_request");
        /* invalid UTF-8 is replaced, so the body stays JSON */
        assert_string_equal(json_string_value(json_object_get(e, "message")),
                            "timeout: must be at most 30 \xef\xbf\xbd");
        json_decref(o);

        /* no message: the fallback; a second error replaces the first reply */
        err = (hxs_error){ .kind = HXS_ERR_SETUP };
        call_set_engine_error(&c, &err, "the sandbox could not be set up");
        assert_int_equal(c.status, 500);
        o = reply_of(&c);
        e = json_object_get(o, "error");
        assert_string_equal(json_string_value(json_object_get(e, "message")), "the sandbox could not be set up");
        json_decref(o);
        free(c.reply);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_status_and_code_of_each_kind),
                cmocka_unit_test(test_error_reply),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
