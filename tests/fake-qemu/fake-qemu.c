/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for QEMU, for testing the qemu driver (src/vm/qemu.c) and the microVM
 * backend's host side (src/vm/vm-backend.c) through the real service without booting a
 * guest (QEMU_BIN=<this>). Static, so it runs in QEMU's jail whatever that holds.
 *
 * It takes the command line the driver gives QEMU, finds the agent's channel
 * (-chardev socket,id=agent,fd=N) and plays the guest agent on it: READY to HELLO, and
 * after RUN, CODE, STDIN and START it does what the code says:
 *   flood                   writes empty STDOUT and READY frames as fast as the host
 *                           takes them, until the host goes (a hostile guest);
 *   anything else           one STDOUT frame describing the jail it found itself in
 *                           (ids, capabilities, for each line "connect PATH" of the
 *                           code whether a unix socket at PATH answered, the code, and
 *                           every file it can see outside /proc), then EXIT 0.
 * Then it exits, as a VM powers off. A kernel file that begins with "crash" makes it
 * die at once instead, saying so on stderr (a guest that never boots).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fake-agent.h"

static const char *kernel_path = "";

static _Noreturn void flood(int fd)
{
        static uint8_t buf[64 << 10];
        for (size_t i = 0; i + HXP_HEADER_SIZE <= sizeof(buf); i += HXP_HEADER_SIZE)
                (void)hxp_header(buf + i, (i / HXP_HEADER_SIZE) % 2 ? HXP_READY : HXP_STDOUT, 0);
        for (;;)
                fake_write_all(fd, buf, sizeof(buf));
}

/* ---- what the jail looks like from inside ------------------------------------------ */

typedef struct text {
        char buf[128 << 10];
        size_t len;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        if (t->len < sizeof(t->buf)) {
                int n = vsnprintf(t->buf + t->len, sizeof(t->buf) - t->len, fmt, ap);
                if (n > 0)
                        t->len = t->len + (size_t)n < sizeof(t->buf) ? t->len + (size_t)n : sizeof(t->buf) - 1;
        }
        va_end(ap);
}

static char type_of(mode_t m)
{
        return S_ISDIR(m) ? 'd' : S_ISREG(m) ? 'f' : S_ISLNK(m) ? 'l' : S_ISSOCK(m) ? 's' : S_ISCHR(m) ? 'c'
               : S_ISBLK(m) ? 'b' : S_ISFIFO(m) ? 'p' : '?';
}

/* Every entry below dir (but /proc), one "tree <type> <path>" line each. */
static void walk(text *t, const char *dir, int depth)
{
        DIR *d = opendir(dir);
        if (!d) {
                put(t, "tree ! %s %s\n", dir, strerrorname_np(errno));
                return;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, de->d_name);
                if (strcmp(path, "/proc") == 0)
                        continue;
                struct stat st;
                if (lstat(path, &st) < 0) {
                        put(t, "tree ! %s %s\n", path, strerrorname_np(errno));
                        continue;
                }
                put(t, "tree %c %s\n", type_of(st.st_mode), path);
                if (S_ISDIR(st.st_mode) && depth < 32)
                        walk(t, path, depth + 1);
        }
        closedir(d);
}

static const char *connect_result(const char *path)
{
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return strerrorname_np(errno);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        close(s);
        return r == 0 ? "ok" : strerrorname_np(e);
}

static void describe(text *t, const char *code, size_t code_len)
{
        char ids[256], kernel[64] = "";
        fake_ids(ids, sizeof(ids));
        int kfd = open(kernel_path, O_RDONLY | O_CLOEXEC);
        if (kfd < 0) {
                snprintf(kernel, sizeof(kernel), "(%s)", strerrorname_np(errno));
        } else {
                ssize_t n = read(kfd, kernel, sizeof(kernel) - 1);
                kernel[n > 0 ? n : 0] = '\0';
                kernel[strcspn(kernel, "\n")] = '\0';
                close(kfd);
        }
        put(t, "%s kernel=%s\n", ids, kernel);
        /* "connect PATH" lines of the code */
        const char *p = code, *end = code + code_len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (n > 8 && n < 200 && memcmp(p, "connect ", 8) == 0) {
                        char path[200];
                        snprintf(path, sizeof(path), "%.*s", (int)(n - 8), p + 8);
                        put(t, "connect %s %s\n", path, connect_result(path));
                }
                p += n + 1;
        }
        put(t, "code=%.*s\n", (int)(code_len > 2000 ? 2000 : code_len), code);
        walk(t, "/", 0); /* last: on a host's whole tree it fills what is left */
}

/* ---- START ------------------------------------------------------------------------------ */

static void on_start(int fd, const char *code, size_t code_len, bool have_run)
{
        static text out;
        (void)have_run;
        if (code_len >= 5 && memcmp(code, "flood", 5) == 0)
                flood(fd);
        describe(&out, code, code_len);
        fake_report_and_exit(fd, out.buf, out.len);
}

int main(int argc, char **argv)
{
        int chan = -1;
        for (int i = 1; i + 1 < argc; i++) {
                const char *fd = NULL;
                if (strcmp(argv[i], "-chardev") == 0 && strncmp(argv[i + 1], "socket,id=agent,", 16) == 0 &&
                    (fd = strstr(argv[i + 1], ",fd=")))
                        chan = atoi(fd + 4);
                if (strcmp(argv[i], "-kernel") == 0)
                        kernel_path = argv[i + 1];
        }
        if (chan < 0) {
                fprintf(stderr, "fake-qemu: no -chardev socket,id=agent,fd=N\n");
                return 2;
        }
        char head[5] = "";
        int kfd = open(kernel_path, O_RDONLY | O_CLOEXEC);
        if (kfd >= 0) {
                ssize_t n = read(kfd, head, sizeof(head));
                close(kfd);
                if (n == (ssize_t)sizeof(head) && memcmp(head, "crash", sizeof(head)) == 0) {
                        fprintf(stderr, "fake-qemu: the kernel crashed at boot\n");
                        return 1;
                }
        }
        signal(SIGPIPE, SIG_IGN);
        fake_agent(chan, "fake-qemu", on_start);
}
