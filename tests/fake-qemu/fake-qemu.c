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
 *   files                   one STDOUT line per file in ("in PATH SIZE BYTES") and
 *                           the RUN's return budgets and globs, each file back as
 *                           output/PATH (FILE_OUT, FILE_DATA), then EXIT 0;
 *   stdin-echo              (a session: RUN interactive) every STDIN frame after START
 *                           back as STDOUT, "argv=..." first; at the empty STDIN,
 *                           "eof" and EXIT 0;
 *   hostile-files CASE      files out that break a rule (CASE: too-many, too-big,
 *                           past-budget, dotdot, absolute, unwanted, overrun,
 *                           unordered, duplicate, orphan-data, bad-tlv), then EXIT 0;
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

/* ---- files ------------------------------------------------------------------------------ */

static _Noreturn void send_exit(int fd)
{
        uint8_t ex[64];
        hxp_builder b;
        hxp_builder_init(&b, ex, sizeof(ex));
        hxp_put_u32(&b, HXP_EXIT_WAIT_STATUS, 0);
        hxp_put_u32(&b, HXP_EXIT_TIME_MS, 1);
        fake_send_frame(fd, HXP_EXIT, ex, b.len);
        exit(0);
}

/* FILE_OUT (path, size, len; truncated when len is 0 and size is not), then len bytes
 * of data (none when NULL; at most HXP_PAYLOAD_MAX: the tests keep budgets small). */
static void file_out(int fd, const char *path, uint64_t size, uint64_t len, const void *data)
{
        uint8_t buf[512];
        hxp_builder b;
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_bytes(&b, HXP_FILE_PATH, path, strlen(path));
        hxp_put_u64(&b, HXP_FILE_SIZE, size);
        hxp_put_u32(&b, HXP_FILE_TRUNCATED, len == 0 && size > 0);
        hxp_put_u64(&b, HXP_FILE_LEN, len);
        fake_send_frame(fd, HXP_FILE_OUT, buf, b.len);
        if (data && len > 0)
                fake_send_frame(fd, HXP_FILE_DATA, data, len < HXP_PAYLOAD_MAX ? (size_t)len : HXP_PAYLOAD_MAX);
}

static int by_path(const void *a, const void *b)
{
        return strcmp((*(const fake_file *const *)a)->path, (*(const fake_file *const *)b)->path);
}

static _Noreturn void echo_files(int fd)
{
        static text out;
        const hxp_run *run = fake_run();
        size_t n;
        const fake_file *f = fake_files(&n);
        put(&out, "return_files=%u return_bytes=%llu globs=", run->return_files,
            (unsigned long long)run->return_bytes);
        for (size_t i = 0; i < run->n_globs; i++)
                put(&out, "%s%.*s", i ? "," : "", (int)run->glob_len[i], (const char *)run->glob[i]);
        put(&out, "\n");
        for (size_t i = 0; i < n; i++)
                put(&out, "in %s %llu %.*s\n", f[i].path, (unsigned long long)f[i].size, (int)f[i].len, f[i].data);
        fake_send_frame(fd, HXP_STDOUT, out.buf, out.len);
        /* in path order, as the agent's files-out.c sends them */
        const fake_file *sorted[FAKE_FILES_MAX];
        for (size_t i = 0; i < n; i++)
                sorted[i] = &f[i];
        qsort(sorted, n, sizeof(*sorted), by_path);
        for (size_t i = 0; i < n; i++) {
                char path[300];
                snprintf(path, sizeof(path), "output/%s", sorted[i]->path);
                file_out(fd, path, sorted[i]->size, sorted[i]->len, sorted[i]->data);
        }
        send_exit(fd);
}

static _Noreturn void hostile_files(int fd, const char *c)
{
        static uint8_t big[HXP_PAYLOAD_MAX];
        const hxp_run *run = fake_run();
        char path[64];
        if (strcmp(c, "too-many") == 0) {
                for (uint32_t i = 0; i <= run->return_files; i++) {
                        snprintf(path, sizeof(path), "output/f%06u", i);
                        file_out(fd, path, 1, 1, "x");
                }
        } else if (strcmp(c, "too-big") == 0) {
                /* announces more than the whole budget; its bytes never come */
                file_out(fd, "output/big", run->return_bytes + 1, run->return_bytes + 1, big);
        } else if (strcmp(c, "past-budget") == 0) {
                uint64_t each = run->return_bytes / 2 + 1;
                file_out(fd, "output/a", each, each, big);
                file_out(fd, "output/b", each, each, big);
        } else if (strcmp(c, "dotdot") == 0) {
                file_out(fd, "output/../../etc/shadow", 4, 4, "root");
        } else if (strcmp(c, "absolute") == 0) {
                file_out(fd, "/etc/shadow", 4, 4, "root");
        } else if (strcmp(c, "unwanted") == 0) {
                file_out(fd, "secret.txt", 4, 4, "boom");
        } else if (strcmp(c, "overrun") == 0) {
                file_out(fd, "output/a", 3, 3, "abc");
                fake_send_frame(fd, HXP_FILE_DATA, "more", 4);
        } else if (strcmp(c, "unordered") == 0) {
                file_out(fd, "output/b", 1, 1, "b");
                file_out(fd, "output/a", 1, 1, "a");
        } else if (strcmp(c, "duplicate") == 0) {
                file_out(fd, "output/a", 1, 1, "a");
                file_out(fd, "output/a", 1, 1, "a");
        } else if (strcmp(c, "orphan-data") == 0) {
                fake_send_frame(fd, HXP_FILE_DATA, "data", 4);
        } else if (strcmp(c, "bad-tlv") == 0) {
                uint8_t junk[10] = { 1, 0, 200, 0, 0, 0, 'x' }; /* a path record past the payload */
                fake_send_frame(fd, HXP_FILE_OUT, junk, sizeof(junk));
        }
        send_exit(fd);
}

static _Noreturn void stdin_echo(int fd)
{
        static text out;
        const hxp_run *run = fake_run();
        put(&out, "interactive=%u argv=", run->interactive);
        for (size_t i = 0; i < run->n_argv; i++)
                put(&out, "%s%.*s", i ? " " : "", (int)run->argv_len[i], (const char *)run->argv[i]);
        put(&out, "\n");
        fake_send_frame(fd, HXP_STDOUT, out.buf, out.len);
        for (;;) {
                hxp_frame f;
                fake_next_frame(fd, &f);
                if (f.type != HXP_STDIN)
                        continue;
                if (f.len == 0)
                        break;
                fake_send_frame(fd, HXP_STDOUT, f.payload, f.len);
        }
        fake_send_frame(fd, HXP_STDOUT, "eof\n", 4);
        send_exit(fd);
}

/* ---- START ------------------------------------------------------------------------------ */

static void on_start(int fd, const char *code, size_t code_len, bool have_run)
{
        static text out;
        (void)have_run;
        if (code_len >= 5 && memcmp(code, "flood", 5) == 0)
                flood(fd);
        if (code_len == 5 && memcmp(code, "files", 5) == 0)
                echo_files(fd);
        if (code_len == 10 && memcmp(code, "stdin-echo", 10) == 0)
                stdin_echo(fd);
        if (code_len > 14 && code_len < 64 && memcmp(code, "hostile-files ", 14) == 0) {
                char c[64];
                snprintf(c, sizeof(c), "%.*s", (int)(code_len - 14), code + 14);
                hostile_files(fd, c);
        }
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
