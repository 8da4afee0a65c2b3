/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-ins' guest agent (see fake-agent.h). */
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fake-agent.h"

void fake_write_all(int fd, const void *p, size_t n)
{
        const char *c = p;
        while (n > 0) {
                ssize_t w = write(fd, c, n); /* SIGPIPE is ignored; write counts in /proc/PID/io */
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        exit(0); /* the host is gone: so is the VM */
                c += w;
                n -= (size_t)w;
        }
}

void fake_send_frame(int fd, hxp_type type, const void *p, size_t n)
{
        uint8_t h[HXP_HEADER_SIZE];
        if (hxp_header(h, type, n) < 0) {
                fprintf(stderr, "fake agent: a frame of %zu bytes is too long\n", n);
                exit(1);
        }
        fake_write_all(fd, h, sizeof(h));
        if (n)
                fake_write_all(fd, p, n);
}

static hxp_run run;
static uint8_t run_payload[HXP_PAYLOAD_MAX]; /* run points into it */
static fake_file files[FAKE_FILES_MAX];
static size_t n_files;

const hxp_run *fake_run(void)
{
        return &run;
}

const fake_file *fake_files(size_t *ret_n)
{
        *ret_n = n_files;
        return files;
}

static void take_file(const hxp_frame *f)
{
        hxp_file h;
        if (hxp_file_decode(f->payload, f->len, &h) < 0) {
                fprintf(stderr, "fake agent: a malformed FILE from the host\n");
                exit(1);
        }
        if (n_files == FAKE_FILES_MAX)
                return;
        fake_file *ff = &files[n_files++];
        memcpy(ff->path, h.path, h.path_len);
        ff->path[h.path_len] = '\0';
        ff->size = h.size;
        ff->len = 0;
}

static void take_file_data(const hxp_frame *f)
{
        if (n_files == 0)
                return;
        fake_file *ff = &files[n_files - 1];
        size_t c = f->len < sizeof(ff->data) - ff->len ? f->len : sizeof(ff->data) - ff->len;
        memcpy(ff->data + ff->len, f->payload, c);
        ff->len += c;
}

static uint8_t in_buf[HXP_FRAME_MAX * 2];
static size_t in_len, in_used;

void fake_next_frame(int fd, hxp_frame *ret)
{
        memmove(in_buf, in_buf + in_used, in_len - in_used); /* the frame before: done with */
        in_len -= in_used;
        in_used = 0;
        long used;
        while ((used = hxp_parse(in_buf, in_len, ret)) == 0) {
                ssize_t n = read(fd, in_buf + in_len, sizeof(in_buf) - in_len);
                if (n <= 0)
                        exit(0); /* the host is gone */
                in_len += (size_t)n;
        }
        if (used < 0) {
                fprintf(stderr, "fake agent: a malformed frame from the host\n");
                exit(1);
        }
        in_used = (size_t)used;
}

_Noreturn void fake_agent(int fd, const char *ready_text, fake_start_fn on_start)
{
        static char code[4096];
        size_t code_len = 0;
        bool have_run = false;
        for (;;) {
                hxp_frame f;
                fake_next_frame(fd, &f);
                switch (f.type) {
                case HXP_HELLO: {
                        uint8_t ready[4 + 64];
                        size_t t = strlen(ready_text) < 64 ? strlen(ready_text) : 64;
                        memcpy(ready, f.payload, 4);
                        memcpy(ready + 4, ready_text, t);
                        fake_send_frame(fd, HXP_READY, ready, 4 + t);
                        break;
                }
                case HXP_RUN:
                        memcpy(run_payload, f.payload, f.len);
                        have_run = hxp_run_decode(run_payload, f.len, &run) == 0;
                        break;
                case HXP_FILE:
                        take_file(&f);
                        break;
                case HXP_FILE_DATA:
                        take_file_data(&f);
                        break;
                case HXP_CODE: {
                        size_t c = f.len < sizeof(code) - code_len ? f.len : sizeof(code) - code_len;
                        memcpy(code + code_len, f.payload, c);
                        code_len += c;
                        break;
                }
                case HXP_START:
                        if (!have_run) {
                                static const char msg[] = "fake agent: no valid RUN";
                                fake_send_frame(fd, HXP_ERROR, msg, sizeof(msg) - 1);
                                exit(0);
                        }
                        on_start(fd, code, code_len, have_run);
                        exit(0);
                default:
                        break;
                }
        }
}

void fake_ids(char *out, size_t size)
{
        uid_t ru, eu, su;
        gid_t rg, eg, sg;
        getresuid(&ru, &eu, &su);
        getresgid(&rg, &eg, &sg);
        struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct caps[2] = { { 0, 0, 0 }, { 0, 0, 0 } };
        syscall(SYS_capget, &hdr, caps);
        int bounding = 0;
        for (int c = 0; c <= 63; c++)
                if (prctl(PR_CAPBSET_READ, c) == 1)
                        bounding++;
        int pdeathsig = 0;
        prctl(PR_GET_PDEATHSIG, &pdeathsig);
        snprintf(out, size, "pid=%d uid=%u,%u,%u gid=%u,%u,%u groups=%d nnp=%d caps=%x,%x,%x bounding=%d pdeathsig=%d",
                 (int)getpid(), ru, eu, su, rg, eg, sg, getgroups(0, NULL), prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
                 caps[0].effective | caps[1].effective, caps[0].permitted | caps[1].permitted,
                 caps[0].inheritable | caps[1].inheritable, bounding, pdeathsig);
}

_Noreturn void fake_report_and_exit(int fd, const char *text, size_t len)
{
        fake_send_frame(fd, HXP_STDOUT, text, len);
        uint8_t ex[64];
        hxp_builder b;
        hxp_builder_init(&b, ex, sizeof(ex));
        hxp_put_u32(&b, HXP_EXIT_WAIT_STATUS, 0);
        hxp_put_u32(&b, HXP_EXIT_TIME_MS, 1);
        fake_send_frame(fd, HXP_EXIT, ex, b.len);
        exit(0); /* the VM powers off */
}
