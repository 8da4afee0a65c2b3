/* SPDX-License-Identifier: Apache-2.0 */
/* What the Firecracker driver says to Firecracker and how it reads the answers
 * (src/vm/fc-api.c): the JSON bodies, the HTTP framing, the vsock handshake, with
 * the hostile answers a Firecracker under a guest's control could give. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "vm/fc-api.h"

static json_t *load(char *s)
{
        assert_non_null(s);
        json_error_t e;
        json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, &e);
        if (!j)
                fail_msg("%s: %s", s, e.text);
        free(s);
        return j;
}

static void test_bodies(void **state)
{
        json_t *j = load(fc_body_boot_source("/vmlinux", "/initramfs.img", "console=ttyS0 hexr.vsock=1024"));
        const char *k, *i, *a;
        assert_int_equal(json_unpack(j, "{s:s, s:s, s:s !}", "kernel_image_path", &k, "initrd_path", &i,
                                     "boot_args", &a), 0);
        assert_string_equal(k, "/vmlinux");
        assert_string_equal(i, "/initramfs.img");
        assert_string_equal(a, "console=ttyS0 hexr.vsock=1024");
        json_decref(j);

        /* a path with a quote, a backslash and a newline stays one string */
        j = load(fc_body_drive("root", "/a\"b\\c\nd", false, true));
        const char *id, *p;
        int root, ro;
        assert_int_equal(json_unpack(j, "{s:s, s:s, s:b, s:b !}", "drive_id", &id, "path_on_host", &p,
                                     "is_root_device", &root, "is_read_only", &ro), 0);
        assert_string_equal(p, "/a\"b\\c\nd");
        assert_false(root);
        assert_true(ro);
        json_decref(j);

        j = load(fc_body_machine_config(1, 4294967295u));
        json_int_t vc, mem;
        assert_int_equal(json_unpack(j, "{s:I, s:I !}", "vcpu_count", &vc, "mem_size_mib", &mem), 0);
        assert_int_equal(vc, 1);
        assert_true(mem == 4294967295LL); /* no sign trouble on the way */
        json_decref(j);

        j = load(fc_body_vsock(3, "/run/v.sock"));
        json_int_t cid;
        assert_int_equal(json_unpack(j, "{s:I, s:s !}", "guest_cid", &cid, "uds_path", &p), 0);
        assert_int_equal(cid, 3);
        assert_string_equal(p, "/run/v.sock");
        json_decref(j);

        char *s = fc_body_action("InstanceStart");
        assert_string_equal(s, "{\"action_type\":\"InstanceStart\"}");
        free(s);
}

static void test_request_head(void **state)
{
        char buf[512];
        int n = fc_http_head(buf, sizeof(buf), "PUT", "/drives/root", 42);
        assert_true(n > 0);
        assert_string_equal(buf, "PUT /drives/root HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n"
                                 "Content-Type: application/json\r\nContent-Length: 42\r\n\r\n");
        /* no header injection through the path, no relative paths, no overflow */
        assert_int_equal(fc_http_head(buf, sizeof(buf), "PUT", "/x HTTP/1.1\r\nEvil: 1", 0), -EINVAL);
        assert_int_equal(fc_http_head(buf, sizeof(buf), "PUT", "/x\x7f", 0), -EINVAL);
        assert_int_equal(fc_http_head(buf, sizeof(buf), "PUT", "x", 0), -EINVAL);
        assert_int_equal(fc_http_head(buf, 20, "PUT", "/actions", 0), -ENAMETOOLONG);
}

static long parse(const char *s, fc_http_response *r)
{
        return fc_http_parse(s, strlen(s), r);
}

static void test_response_ok(void **state)
{
        fc_http_response r;
        static const char ok[] = "HTTP/1.1 204 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n\r\n";
        assert_int_equal(parse(ok, &r), (long)strlen(ok));
        assert_int_equal(r.status, 204);
        assert_int_equal(r.body_len, 0);
        /* no reason phrase at all, HTTP/1.0 */
        assert_int_equal(parse("HTTP/1.0 204\r\n\r\n", &r), 16);
        static const char err[] = "HTTP/1.1 400 Bad Request\r\ncontent-length: 26\r\n\r\n"
                                  "{\"fault_message\":\"nope\"}  ";
        assert_int_equal(parse(err, &r), (long)strlen(err));
        assert_int_equal(r.status, 400);
        assert_int_equal(r.body_len, 26);
        assert_memory_equal(r.body, "{\"fault_message\":\"nope\"}", 24);
}

static void test_response_partial(void **state)
{
        fc_http_response r;
        static const char full[] = "HTTP/1.1 400 \r\nContent-Length: 4\r\n\r\nabcd";
        /* every prefix is "need more", never an error or a false success */
        for (size_t n = 0; n < sizeof(full) - 1; n++)
                assert_int_equal(fc_http_parse(full, n, &r), 0);
        assert_int_equal(fc_http_parse(full, sizeof(full) - 1, &r), (long)sizeof(full) - 1);
        /* what follows the response is not consumed here (the caller refuses it) */
        char more[128];
        snprintf(more, sizeof(more), "%sHTTP/1.1 204 \r\n\r\n", full);
        assert_int_equal(parse(more, &r), (long)sizeof(full) - 1);
}

static void test_response_hostile(void **state)
{
        fc_http_response r;
        static const char *const bad[] = {
                "HTTP/2 204 \r\n\r\n",
                "HTTP/1.1 20 \r\n\r\n",
                "HTTP/1.1 2040 \r\n\r\n",
                "HTTP/1.1 099 \r\n\r\n",
                "HTTP/1.1 600 \r\n\r\n",
                "HTTP/1.1 -04 \r\n\r\n",
                "http/1.1 204 \r\n\r\n",
                "HTTP/1.1 204 \n\n",                             /* bare LF */
                "HTTP/1.1 204 \rX\r\n\r\n",                      /* bare CR */
                "HTTP/1.1 204 \x01\r\n\r\n",                     /* control byte */
                "HTTP/1.1 204 \xc3\xa9\r\n\r\n",                 /* not ASCII */
                "HTTP/1.1 204 \r\nno colon\r\n\r\n",
                "HTTP/1.1 204 \r\n: empty name\r\n\r\n",
                "HTTP/1.1 204 \r\nContent-Length: 3\r\n\r\nabc", /* a 204 with a body */
                "HTTP/1.1 400 \r\n\r\n",                         /* a body without a length */
                "HTTP/1.1 400 \r\nContent-Length: -1\r\n\r\n",
                "HTTP/1.1 400 \r\nContent-Length: 1x\r\n\r\n",
                "HTTP/1.1 400 \r\nContent-Length: \r\n\r\n",
                "HTTP/1.1 400 \r\nContent-Length: 99999999999999999999999\r\n\r\n",
                "HTTP/1.1 400 \r\nContent-Length: 8193\r\n\r\n",
                "HTTP/1.1 400 \r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                "HTTP/1.1 400 \r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (parse(bad[i], &r) != -EBADMSG)
                        fail_msg("accepted: %s", bad[i]);
        /* a NUL in the head */
        assert_int_equal(fc_http_parse("HTTP/1.1 204 \0\r\n\r\n", 17, &r), -EBADMSG);
        /* a head that never ends: refused at the cap, not awaited forever */
        char *big = malloc(FC_HTTP_RESPONSE_MAX + 16);
        int n = snprintf(big, 64, "HTTP/1.1 204 \r\nX-Pad: ");
        memset(big + n, 'a', FC_HTTP_RESPONSE_MAX + 16 - (size_t)n);
        assert_int_equal(fc_http_parse(big, FC_HTTP_RESPONSE_MAX - 1, &r), 0);
        assert_int_equal(fc_http_parse(big, FC_HTTP_RESPONSE_MAX, &r), -EBADMSG);
        assert_int_equal(fc_http_parse(big, FC_HTTP_RESPONSE_MAX + 16, &r), -EBADMSG);
        free(big);
}

static void test_fault_message(void **state)
{
        char out[64];
        static const char body[] = "{\"fault_message\":\"bad \\\"kernel\\\"\\n\\u0007path\"}";
        fc_fault_message(body, strlen(body), out, sizeof(out));
        assert_string_equal(out, "bad \"kernel\"  path");
        /* not the JSON we know: the raw bytes, printable, truncated to fit */
        static const char raw[] = "oops\x1b[31m\nred";
        fc_fault_message(raw, strlen(raw), out, sizeof(out));
        assert_string_equal(out, "oops [31m red");
        char small[8];
        fc_fault_message("{\"fault_message\":\"0123456789\"}", 30, small, sizeof(small));
        assert_string_equal(small, "0123456");
        fc_fault_message("{\"fault_message\":7}", 19, out, sizeof(out));
        assert_string_equal(out, "{\"fault_message\":7}");
}

static void test_vsock_ok(void **state)
{
        uint32_t port = 0;
        assert_int_equal(fc_vsock_parse_ok("OK 1073741824\n", 14, &port), 1);
        assert_int_equal(port, 1073741824u);
        assert_int_equal(fc_vsock_parse_ok("OK 4294967295\n", 14, &port), 1);
        assert_int_equal(port, 4294967295u);
        static const char line[] = "OK 52\n";
        for (size_t n = 0; n < sizeof(line) - 1; n++)
                assert_int_equal(fc_vsock_parse_ok(line, n, &port), 0);
}

static void test_vsock_hostile(void **state)
{
        uint32_t port;
        static const char *const bad[] = {
                "OK\n", "OK \n", "OK garbage\n", "OK 12x\n", "OK 4294967296\n", "OK 99999999999\n",
                "OK  1\n", "OK -1\n", "OK 1\r\n", "ok 1\n", "KO 1\n", "\n", "NOT OK\n", "OK 1\nX",
                "OK 00000000001\n", "OK 1 \n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (fc_vsock_parse_ok(bad[i], strlen(bad[i]), &port) != -EPROTO)
                        fail_msg("accepted: %s", bad[i]);
        /* garbage is refused as soon as it shows, without waiting for a newline */
        assert_int_equal(fc_vsock_parse_ok("X", 1, &port), -EPROTO);
        assert_int_equal(fc_vsock_parse_ok("OK a", 4, &port), -EPROTO);
        /* a line that never ends is refused at the cap */
        char longline[FC_VSOCK_LINE_MAX + 8] = "OK ";
        memset(longline + 3, '0', sizeof(longline) - 3);
        assert_int_equal(fc_vsock_parse_ok(longline, sizeof(longline), &port), -EPROTO);
        assert_int_equal(fc_vsock_parse_ok(longline, 13, &port), 0);
        assert_int_equal(fc_vsock_parse_ok(longline, 14, &port), -EPROTO);
}

/* ---- the blocking helpers, against a socketpair peer ----------------------------------- */

static void pair(int sp[2])
{
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp), 0);
}

static void test_api_call(void **state)
{
        int sp[2];
        pair(sp);
        struct timespec dl;
        static const char ans[] = "HTTP/1.1 400 \r\nContent-Length: 28\r\n\r\n{\"fault_message\":\"no such\"} ";
        assert_int_equal(write(sp[1], ans, strlen(ans)), (ssize_t)strlen(ans));
        int status = 0;
        char fault[64];
        fc_deadline_in(&dl, 1000);
        assert_int_equal(fc_api_call(sp[0], "PUT", "/vsock", "{}", &dl, &status, fault, sizeof(fault)), 0);
        assert_int_equal(status, 400);
        assert_string_equal(fault, "no such");
        char req[512];
        ssize_t n = read(sp[1], req, sizeof(req) - 1);
        assert_true(n > 0);
        req[n] = '\0';
        assert_non_null(strstr(req, "PUT /vsock HTTP/1.1\r\n"));
        assert_non_null(strstr(req, "Content-Length: 2\r\n\r\n{}"));

        /* bytes after the answer: refused */
        static const char two[] = "HTTP/1.1 204 \r\n\r\nHTTP/1.1 204 \r\n\r\n";
        assert_int_equal(write(sp[1], two, strlen(two)), (ssize_t)strlen(two));
        fc_deadline_in(&dl, 1000);
        assert_int_equal(fc_api_call(sp[0], "PUT", "/actions", "{}", &dl, &status, NULL, 0), -EBADMSG);

        /* no answer: the deadline holds */
        fc_deadline_in(&dl, 50);
        assert_int_equal(fc_api_call(sp[0], "PUT", "/actions", "{}", &dl, &status, NULL, 0), -ETIMEDOUT);
        /* the peer goes away half-way */
        assert_int_equal(write(sp[1], "HTTP/1.1 20", 11), 11);
        close(sp[1]);
        fc_deadline_in(&dl, 1000);
        assert_int_equal(fc_api_call(sp[0], "PUT", "/actions", "{}", &dl, &status, NULL, 0), -EPIPE);
        close(sp[0]);
}

static void test_vsock_handshake(void **state)
{
        int sp[2];
        struct timespec dl;
        pair(sp);
        /* OK, then the agent's first bytes: the handshake must not eat them */
        assert_int_equal(write(sp[1], "OK 7\nHxyz", 9), 9);
        fc_deadline_in(&dl, 1000);
        assert_int_equal(fc_vsock_handshake(sp[0], 1024, &dl), 0);
        char buf[16];
        assert_int_equal(read(sp[0], buf, sizeof(buf)), 4);
        assert_memory_equal(buf, "Hxyz", 4);
        ssize_t n = read(sp[1], buf, sizeof(buf));
        assert_int_equal(n, 13);
        assert_memory_equal(buf, "CONNECT 1024\n", 13);
        close(sp[0]);
        close(sp[1]);

        /* Firecracker closes the connection: nobody listens in the guest yet */
        pair(sp);
        close(sp[1]);
        fc_deadline_in(&dl, 1000);
        assert_int_equal(fc_vsock_handshake(sp[0], 1024, &dl), -ECONNRESET);
        close(sp[0]);

        pair(sp);
        assert_int_equal(write(sp[1], "OK garbage\n", 11), 11);
        fc_deadline_in(&dl, 1000);
        assert_int_equal(fc_vsock_handshake(sp[0], 1024, &dl), -EPROTO);
        close(sp[0]);
        close(sp[1]);

        /* a reply that never comes */
        pair(sp);
        assert_int_equal(write(sp[1], "OK 1", 4), 4);
        fc_deadline_in(&dl, 50);
        assert_int_equal(fc_vsock_handshake(sp[0], 1024, &dl), -ETIMEDOUT);
        close(sp[0]);
        close(sp[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bodies),          cmocka_unit_test(test_request_head),
                cmocka_unit_test(test_response_ok),     cmocka_unit_test(test_response_partial),
                cmocka_unit_test(test_response_hostile), cmocka_unit_test(test_fault_message),
                cmocka_unit_test(test_vsock_ok),        cmocka_unit_test(test_vsock_hostile),
                cmocka_unit_test(test_api_call),        cmocka_unit_test(test_vsock_handshake),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
