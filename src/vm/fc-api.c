/* SPDX-License-Identifier: Apache-2.0 */
/* Firecracker's API and vsock handshake, host side (see fc-api.h). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "vm/fc-api.h"

/* ---- bodies ------------------------------------------------------------------------ */

/* jansson escapes the strings, so a path with a quote in it stays one string. */
static char *dump(json_t *obj)
{
        if (!obj)
                return NULL;
        char *s = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(obj);
        return s;
}

char *fc_body_boot_source(const char *kernel, const char *initrd, const char *boot_args)
{
        return dump(json_pack("{s:s, s:s, s:s}", "kernel_image_path", kernel, "initrd_path", initrd,
                              "boot_args", boot_args));
}

char *fc_body_drive(const char *drive_id, const char *path, bool is_root_device, bool read_only)
{
        return dump(json_pack("{s:s, s:s, s:b, s:b}", "drive_id", drive_id, "path_on_host", path,
                              "is_root_device", is_root_device, "is_read_only", read_only));
}

char *fc_body_machine_config(uint32_t vcpu_count, uint32_t mem_size_mib)
{
        return dump(json_pack("{s:I, s:I}", "vcpu_count", (json_int_t)vcpu_count, "mem_size_mib",
                              (json_int_t)mem_size_mib));
}

char *fc_body_vsock(uint32_t guest_cid, const char *uds_path)
{
        return dump(json_pack("{s:I, s:s}", "guest_cid", (json_int_t)guest_cid, "uds_path", uds_path));
}

char *fc_body_action(const char *action_type)
{
        return dump(json_pack("{s:s}", "action_type", action_type));
}

/* ---- HTTP ---------------------------------------------------------------------------- */

int fc_http_head(char *buf, size_t size, const char *method, const char *path, size_t body_len)
{
        for (const char *p = path; *p; p++)
                if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
                        return -EINVAL;
        if (path[0] != '/')
                return -EINVAL;
        int n = snprintf(buf, size,
                         "%s %s HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                         method, path, body_len);
        if (n < 0 || (size_t)n >= size)
                return -ENAMETOOLONG;
        return n;
}

static bool is_token_char(unsigned char c)
{
        return c > 0x20 && c < 0x7f && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* Content-Length: digits only, optional blanks around, at most FC_HTTP_RESPONSE_MAX. */
static int parse_length(const char *v, const char *end, size_t *ret)
{
        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        if (v == end)
                return -EBADMSG;
        size_t n = 0;
        for (; v < end; v++) {
                if (*v < '0' || *v > '9')
                        return -EBADMSG;
                n = n * 10 + (size_t)(*v - '0');
                if (n > FC_HTTP_RESPONSE_MAX)
                        return -EBADMSG;
        }
        *ret = n;
        return 0;
}

long fc_http_parse(const char *buf, size_t len, fc_http_response *ret)
{
        size_t scan = len < FC_HTTP_RESPONSE_MAX ? len : FC_HTTP_RESPONSE_MAX;
        size_t head_len = 0;
        /* the head: printable ASCII, lines ended by CRLF, ended by an empty line */
        for (size_t i = 0; i < scan; i++) {
                unsigned char c = (unsigned char)buf[i];
                if (c == '\r') {
                        if (i + 1 < scan && buf[i + 1] != '\n')
                                return -EBADMSG;
                        continue;
                }
                if (c == '\n') {
                        if (i == 0 || buf[i - 1] != '\r')
                                return -EBADMSG;
                        if (i >= 3 && buf[i - 2] == '\n') {
                                head_len = i + 1;
                                break;
                        }
                        continue;
                }
                if ((c < 0x20 && c != '\t') || c >= 0x7f)
                        return -EBADMSG;
        }
        if (head_len == 0)
                return len >= FC_HTTP_RESPONSE_MAX ? -EBADMSG : 0;

        /* status line: HTTP/1.x SSS[ reason] */
        const char *line_end = memmem(buf, head_len, "\r\n", 2);
        size_t sl = (size_t)(line_end - buf);
        if (sl < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
            buf[8] != ' ')
                return -EBADMSG;
        int status = 0;
        for (int i = 9; i < 12; i++) {
                if (buf[i] < '0' || buf[i] > '9')
                        return -EBADMSG;
                status = status * 10 + (buf[i] - '0');
        }
        if (status < 100 || status > 599 || (sl > 12 && buf[12] != ' '))
                return -EBADMSG;

        /* headers */
        bool have_length = false;
        size_t body_len = 0;
        const char *p = line_end + 2, *head_end = buf + head_len - 2;
        while (p < head_end) {
                const char *eol = p;
                while (*eol != '\r')
                        eol++;
                const char *colon = p;
                while (colon < eol && is_token_char((unsigned char)*colon))
                        colon++;
                if (colon == p || colon == eol || *colon != ':')
                        return -EBADMSG;
                size_t nlen = (size_t)(colon - p);
                if (nlen == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
                        size_t n;
                        if (parse_length(colon + 1, eol, &n) < 0 || (have_length && n != body_len))
                                return -EBADMSG;
                        have_length = true;
                        body_len = n;
                } else if (nlen == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) {
                        return -EBADMSG;
                }
                p = eol + 2;
        }
        bool no_body = status < 200 || status == 204 || status == 304;
        if (no_body ? body_len != 0 : !have_length)
                return -EBADMSG;
        if (head_len + body_len > FC_HTTP_RESPONSE_MAX)
                return -EBADMSG;
        if (len < head_len + body_len)
                return 0;
        ret->status = status;
        ret->body = buf + head_len;
        ret->body_len = body_len;
        return (long)(head_len + body_len);
}

static void printable(const char *s, size_t n, char *out, size_t size)
{
        if (size == 0)
                return;
        size_t o = 0;
        for (size_t i = 0; i < n && o + 1 < size; i++) {
                unsigned char c = (unsigned char)s[i];
                out[o++] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
        }
        while (o > 0 && out[o - 1] == ' ')
                o--;
        out[o] = '\0';
}

void fc_fault_message(const char *body, size_t len, char *out, size_t size)
{
        json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        json_t *m = json_is_object(j) ? json_object_get(j, "fault_message") : NULL;
        if (json_is_string(m))
                printable(json_string_value(m), json_string_length(m), out, size);
        else
                printable(body, len, out, size);
        json_decref(j);
}

/* ---- vsock -------------------------------------------------------------------------------- */

int fc_vsock_parse_ok(const char *buf, size_t len, uint32_t *ret_port)
{
        static const char prefix[] = "OK ";
        uint64_t port = 0;
        size_t digits = 0;
        for (size_t i = 0; i < len; i++) {
                char c = buf[i];
                if (i >= FC_VSOCK_LINE_MAX)
                        return -EPROTO;
                if (i < 3) {
                        if (c != prefix[i])
                                return -EPROTO;
                        continue;
                }
                if (c == '\n') {
                        if (digits == 0)
                                return -EPROTO;
                        *ret_port = (uint32_t)port;
                        return i + 1 == len ? 1 : -EPROTO; /* nothing may follow in buf */
                }
                if (c < '0' || c > '9' || ++digits > 10)
                        return -EPROTO;
                port = port * 10 + (uint64_t)(c - '0');
                if (port > UINT32_MAX)
                        return -EPROTO;
        }
        return len >= FC_VSOCK_LINE_MAX ? -EPROTO : 0;
}

/* ---- I/O ------------------------------------------------------------------------------------ */

void fc_deadline_in(struct timespec *ret, long ms)
{
        clock_gettime(CLOCK_MONOTONIC, ret);
        ret->tv_sec += ms / 1000;
        ret->tv_nsec += (ms % 1000) * 1000000L;
        if (ret->tv_nsec >= 1000000000L) {
                ret->tv_sec++;
                ret->tv_nsec -= 1000000000L;
        }
}

int fc_ms_left(const struct timespec *deadline)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long ms = (long long)(deadline->tv_sec - now.tv_sec) * 1000 +
                       (deadline->tv_nsec - now.tv_nsec) / 1000000;
        if (ms <= 0)
                return 0;
        return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Waits for events on fd until the deadline: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, const struct timespec *deadline)
{
        for (;;) {
                int left = fc_ms_left(deadline);
                if (left == 0)
                        return -ETIMEDOUT;
                struct pollfd pfd = { .fd = fd, .events = events };
                int r = poll(&pfd, 1, left);
                if (r > 0)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
}

static int send_all(int fd, const char *p, size_t n, const struct timespec *deadline)
{
        while (n > 0) {
                ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                int r = wait_fd(fd, POLLOUT, deadline);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        return errno == ECONNRESET ? -EPIPE : -errno;
                }
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* One read: > 0 bytes, -EPIPE at the end, -ETIMEDOUT, -errno. */
static ssize_t recv_some(int fd, char *buf, size_t size, const struct timespec *deadline)
{
        for (;;) {
                ssize_t n = recv(fd, buf, size, 0);
                if (n > 0)
                        return n;
                if (n == 0)
                        return -EPIPE;
                if (errno == EINTR)
                        continue;
                if (errno == ECONNRESET)
                        return -EPIPE;
                if (errno != EAGAIN)
                        return -errno;
                int r = wait_fd(fd, POLLIN, deadline);
                if (r < 0)
                        return r;
        }
}

int fc_api_call(int fd, const char *method, const char *path, const char *body,
                const struct timespec *deadline, int *ret_status, char *fault, size_t fault_size)
{
        char head[512];
        size_t body_len = body ? strlen(body) : 0;
        int n = fc_http_head(head, sizeof(head), method, path, body_len);
        if (n < 0)
                return n;
        int r = send_all(fd, head, (size_t)n, deadline);
        if (r == 0 && body_len)
                r = send_all(fd, body, body_len, deadline);
        if (r < 0)
                return r;
        char *buf = malloc(FC_HTTP_RESPONSE_MAX);
        if (!buf)
                return -ENOMEM;
        size_t len = 0;
        fc_http_response resp;
        long used;
        for (;;) {
                /* never full here: at the cap fc_http_parse has given its verdict */
                ssize_t got = recv_some(fd, buf + len, FC_HTTP_RESPONSE_MAX - len, deadline);
                if (got < 0) {
                        free(buf);
                        return (int)got;
                }
                len += (size_t)got;
                used = fc_http_parse(buf, len, &resp);
                if (used != 0)
                        break;
        }
        /* nothing is pipelined: bytes after the answer are not Firecracker's */
        if (used > 0 && (size_t)used != len)
                used = -EBADMSG;
        if (used > 0) {
                *ret_status = resp.status;
                if (fault && fault_size)
                        fault[0] = '\0';
                if (fault && (resp.status < 200 || resp.status > 299))
                        fc_fault_message(resp.body, resp.body_len, fault, fault_size);
        }
        free(buf);
        return used < 0 ? (int)used : 0;
}

int fc_vsock_handshake(int fd, uint32_t port, const struct timespec *deadline)
{
        char line[32];
        int n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
        int r = send_all(fd, line, (size_t)n, deadline);
        if (r < 0)
                return r == -EPIPE ? -ECONNRESET : r;
        char buf[FC_VSOCK_LINE_MAX];
        size_t len = 0;
        for (;;) {
                ssize_t got = recv_some(fd, buf + len, 1, deadline);
                if (got < 0)
                        return got == -EPIPE ? -ECONNRESET : (int)got;
                len++;
                uint32_t their_port;
                r = fc_vsock_parse_ok(buf, len, &their_port);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
}
