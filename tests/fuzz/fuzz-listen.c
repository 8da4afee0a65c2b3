/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: LISTEN_ADDRESS, as the service reads it: hxs_config_set (the syntax
 * check), then listen_open (src/server/listen.c: host, [v6] brackets, port, unix:
 * paths).
 *
 * listen_open binds real sockets and may touch the filesystem (a stale unix socket is
 * removed), so the link wraps (-Wl,--wrap) bind, listen, connect, unlink, chmod and
 * getaddrinfo: while the target runs they only record what they were asked, the
 * filesystem and the network stay untouched, and getaddrinfo never does DNS (numeric
 * hosts are parsed for real; host names "resolve" to 127.0.0.1).
 *
 * Input: the address (up to the first NUL or newline).
 *
 * Invariants: on failure err names LISTEN_ADDRESS and nothing is left open; on
 * success the socket is open, the printed address is a C string, a unix path is kept
 * verbatim; the host handed to getaddrinfo is the text before the last ':' (brackets
 * stripped) and the port bound is the one given; an address that hxs_config_set
 * accepts is never refused by listen_open for its syntax.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/listen.h"
#include "fuzz.h"


int __wrap_bind(int fd, const struct sockaddr *sa, socklen_t len);
int __real_bind(int fd, const struct sockaddr *sa, socklen_t len);
int __wrap_listen(int fd, int backlog);
int __real_listen(int fd, int backlog);
int __wrap_connect(int fd, const struct sockaddr *sa, socklen_t len);
int __real_connect(int fd, const struct sockaddr *sa, socklen_t len);
int __wrap_unlink(const char *path);
int __real_unlink(const char *path);
int __wrap_chmod(const char *path, mode_t mode);
int __real_chmod(const char *path, mode_t mode);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
int __real_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);

static struct {
        bool active;            /* inside listen_open: the wrappers fake */
        int binds;
        int bound_family;
        unsigned bound_port;
        bool resolved;
        char node[512], service[64];
} fx;

int __wrap_bind(int fd, const struct sockaddr *sa, socklen_t len)
{
        if (!fx.active)
                return __real_bind(fd, sa, len);
        fx.binds++;
        fx.bound_family = sa->sa_family;
        if (sa->sa_family == AF_INET) {
                CHECK(len >= sizeof(struct sockaddr_in));
                fx.bound_port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
        } else if (sa->sa_family == AF_INET6) {
                CHECK(len >= sizeof(struct sockaddr_in6));
                fx.bound_port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
        }
        return 0;
}

int __wrap_listen(int fd, int backlog)
{
        return fx.active ? 0 : __real_listen(fd, backlog);
}

int __wrap_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
        if (!fx.active)
                return __real_connect(fd, sa, len);
        errno = ECONNREFUSED; /* a stale socket: nobody listens */
        return -1;
}

int __wrap_unlink(const char *path)
{
        return fx.active ? 0 : __real_unlink(path);
}

int __wrap_chmod(const char *path, mode_t mode)
{
        return fx.active ? 0 : __real_chmod(path, mode);
}

static bool looks_like_name(const char *s)
{
        bool letter = false;
        for (const char *p = s; *p; p++) {
                if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.')
                        return false;
                letter |= isalpha((unsigned char)*p) != 0;
        }
        return letter;
}

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res)
{
        if (!fx.active)
                return __real_getaddrinfo(node, service, hints, res);
        CHECK(node && service && hints);
        fx.resolved = true;
        snprintf(fx.node, sizeof(fx.node), "%s", node);
        snprintf(fx.service, sizeof(fx.service), "%s", service);
        struct addrinfo h = *hints;
        h.ai_flags |= AI_NUMERICHOST;
        int r = __real_getaddrinfo(node, service, &h, res);
        if (r == EAI_NONAME && looks_like_name(node))
                r = __real_getaddrinfo("127.0.0.1", service, &h, res);
        return r;
}

static listener ls;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char address[512];
        size_t n = size < sizeof(address) - 1 ? size : sizeof(address) - 1;
        memcpy(address, data, n);
        address[n] = '\0';
        address[strcspn(address, "\n")] = '\0';

        hxs_config cfg;
        hxs_error err;
        hxs_config_defaults(&cfg);
        memset(&err, 0, sizeof(err));
        bool config_ok = hxs_config_set(&cfg, "LISTEN_ADDRESS", address, &err) == 0;

        memset(&ls, 0, sizeof(ls));
        ls.fd = -1;
        memset(&fx, 0, sizeof(fx));
        memset(&err, 0, sizeof(err));
        fx.active = true;
        int r = listen_open(&ls, address, &err);
        fx.active = false;

        bool is_unix = strncmp(address, "unix:", 5) == 0;
        if (r < 0) {
                CHECK(ls.fd == -1);
                CHECK(ls.unix_path[0] == '\0');
                CHECK(strcmp(err.field, "LISTEN_ADDRESS") == 0);
                CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
                CHECK(strncmp(err.message, "LISTEN_ADDRESS", 14) == 0);
                if (config_ok) {
                        /* Hosts are not checked by the configuration; the syntax is. */
                        if (strstr(err.message, "cannot resolve") == NULL && r == -EINVAL)
                                fprintf(stderr, "config accepts \"%s\", listen_open: %s\n",
                                        address, err.message);
                        CHECK(strstr(err.message, "cannot resolve") != NULL || r != -EINVAL);
                }
                return 0;
        }

        CHECK(ls.fd >= 0);
        CHECK(memchr(ls.text, '\0', sizeof(ls.text)) != NULL);
        CHECK(ls.text[0] != '\0');
        if (is_unix) {
                CHECK(strcmp(ls.unix_path, address + 5) == 0);
                CHECK(strncmp(ls.text, "unix:", 5) == 0 &&
                      strcmp(ls.text + 5, address + 5) == 0);
                CHECK(fx.binds == 1);
        } else {
                CHECK(ls.unix_path[0] == '\0');
                const char *colon = strrchr(address, ':');
                CHECK(colon != NULL);
                unsigned long port = strtoul(colon + 1, NULL, 10);
                CHECK(port <= 65535);
                CHECK(fx.binds >= 1);
                CHECK(fx.bound_port == port);
                char host[512];
                snprintf(host, sizeof(host), "%.*s", (int)(colon - address), address);
                size_t hl = strlen(host);
                if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
                        memmove(host, host + 1, hl - 2);
                        host[hl - 2] = '\0';
                }
                if (colon == address)
                        CHECK(!fx.resolved);
                else
                        CHECK(fx.resolved && strcmp(fx.node, host) == 0 &&
                              strcmp(fx.service, colon + 1) == 0);
        }
        close(ls.fd);
        fx.active = true;
        listen_cleanup(&ls);
        fx.active = false;
        CHECK(ls.unix_path[0] == '\0');
        return 0;
}
