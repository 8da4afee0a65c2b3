/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LISTEN_ADDRESS to one listening socket, which MHD then accepts on
 * (MHD_OPTION_LISTEN_SOCKET): "host:port", "[v6]:port", ":port" (every interface,
 * IPv6 and IPv4 on one dual-stack socket when the host has IPv6) or "unix:/path".
 * Binding it ourselves gives one code path for all three and the real port when 0 was
 * asked for.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/error.h"
#include "server/listen.h"

#define LISTEN_BACKLOG 512

static int fail_addr(hxs_error *err, int r, const char *address, const char *what)
{
        return err_fail_field(err, r == -EINVAL ? HXS_ERR_INVALID : HXS_ERR_SETUP, r,
                              "LISTEN_ADDRESS", "LISTEN_ADDRESS %s: %s: %s", address, what,
                              strerror(-r));
}

static int open_unix(listener *l, const char *address, hxs_error *err)
{
        const char *path = address + strlen("unix:");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;

        if (path[0] != '/' || strlen(path) >= sizeof(sa.sun_path))
                return fail_addr(err, -EINVAL, address, "needs an absolute path shorter than 108 bytes");
        memcpy(sa.sun_path, path, strlen(path) + 1);

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return fail_addr(err, negative_errno(), address, "socket");

        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode))
                        return fail_addr(err, -EEXIST, address, "exists and is not a socket");
                /* A socket file: in use if something accepts on it, else a stale leftover. */
                _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (probe < 0)
                        return fail_addr(err, negative_errno(), address, "socket");
                if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno != ECONNREFUSED)
                        return fail_addr(err, -EADDRINUSE, address, "another process listens there");
                if (unlink(path) < 0 && errno != ENOENT)
                        return fail_addr(err, negative_errno(), address, "removing the stale socket");
        }

        /* Owner and group only, from the start: no window where others may connect. */
        mode_t old = umask(0117);
        int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0)
                return fail_addr(err, negative_errno(), address, "bind");
        if (chmod(path, 0660) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
                r = negative_errno();
                unlink(path);
                return fail_addr(err, r, address, "listen");
        }
        snprintf(l->unix_path, sizeof(l->unix_path), "%s", path);
        snprintf(l->text, sizeof(l->text), "unix:%s", path);
        l->fd = TAKE_FD(fd);
        return 0;
}

static int bind_inet(const struct sockaddr *sa, socklen_t len, bool dual_stack)
{
        _cleanup_close_ int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int one = 1, zero = 0;

        if (fd < 0)
                return negative_errno();
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (sa->sa_family == AF_INET6)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one,
                                 sizeof(int));
        if (bind(fd, sa, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

/* What we print: the address actually bound, port included. */
static void describe(listener *l, int fd)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char host[INET6_ADDRSTRLEN] = "?";
        unsigned port = 0;

        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
                if (ss.ss_family == AF_INET) {
                        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
                        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
                        port = ntohs(in->sin_port);
                        snprintf(l->text, sizeof(l->text), "%s:%u", host, port);
                        return;
                }
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
                port = ntohs(in6->sin6_port);
        }
        snprintf(l->text, sizeof(l->text), "[%s]:%u", host, port);
}

static int open_inet(listener *l, const char *address, hxs_error *err)
{
        const char *colon = strrchr(address, ':');
        char host[256], port[8];
        int fd;

        if (!colon || (size_t)(colon - address) >= sizeof(host) || strlen(colon + 1) >= sizeof(port) ||
            !colon[1])
                return fail_addr(err, -EINVAL, address, "expected host:port, :port or unix:/path");
        memcpy(host, address, (size_t)(colon - address));
        host[colon - address] = '\0';
        snprintf(port, sizeof(port), "%s", colon + 1);
        char *end;
        unsigned long pnum = strtoul(port, &end, 10);
        if (*end || pnum > 65535)
                return fail_addr(err, -EINVAL, address, "bad port");

        if (host[0] == '\0') {
                /* Every interface: one dual-stack socket, or IPv4 alone without IPv6. */
                struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_addr = in6addr_any,
                                            .sin6_port = htons((uint16_t)pnum) };
                fd = bind_inet((struct sockaddr *)&in6, sizeof(in6), true);
                if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL) {
                        struct sockaddr_in in = { .sin_family = AF_INET,
                                                  .sin_addr.s_addr = htonl(INADDR_ANY),
                                                  .sin_port = htons((uint16_t)pnum) };
                        fd = bind_inet((struct sockaddr *)&in, sizeof(in), false);
                }
                if (fd < 0)
                        return fail_addr(err, fd, address, "bind");
        } else {
                /* "[::1]" brackets are ours to strip; getaddrinfo wants the bare address. */
                size_t hl = strlen(host);
                if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
                        memmove(host, host + 1, hl - 2);
                        host[hl - 2] = '\0';
                }
                struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                          .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
                struct addrinfo *res = NULL;
                int g = getaddrinfo(host, port, &hints, &res);
                if (g != 0)
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "LISTEN_ADDRESS",
                                              "LISTEN_ADDRESS %s: cannot resolve \"%s\": %s",
                                              address, host, gai_strerror(g));
                /* MHD takes one socket: a name ("localhost") binds its first IPv4
                 * address, so 127.0.0.1 clients find it; else its first IPv6 one. */
                fd = -EADDRNOTAVAIL;
                for (int pass = 0; pass < 2 && fd < 0; pass++)
                        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                                if ((ai->ai_family == AF_INET) != (pass == 0))
                                        continue;
                                fd = bind_inet(ai->ai_addr, ai->ai_addrlen, false);
                                if (fd >= 0)
                                        break;
                        }
                freeaddrinfo(res);
                if (fd < 0)
                        return fail_addr(err, fd, address, "bind");
        }
        describe(l, fd);
        l->fd = fd;
        return 0;
}

int listen_open(listener *l, const char *address, hxs_error *err)
{
        if (strncmp(address, "unix:", 5) == 0)
                return open_unix(l, address, err);
        return open_inet(l, address, err);
}

void listen_cleanup(listener *l)
{
        if (l->unix_path[0]) {
                (void)unlink(l->unix_path);
                l->unix_path[0] = '\0';
        }
}
