/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hexr-agent: PID 1 of a microVM. Boots the machine (agent-boot.c), waits for the
 * host on its channel, receives one execution, runs it (agent-run.c), streams its
 * output, reports how it ended and powers the VM off. A VM runs one execution.
 *
 * Everything that arrives on the channel is hostile: frames are parsed by src/proto
 * (shared with the host), payloads are bounded before anything is allocated, and
 * what does not fit the conversation is dropped. The channel is not a connection:
 * the host may go away and come back (a read of 0 on a virtio port means nobody is
 * connected), so the agent never gives up on it. A partial frame left by a host that
 * went away must not swallow the next host's HELLO: it is discarded when the agent
 * sees the disconnect, and, since a quick reconnect can hide the disconnect, when no
 * byte has arrived for STALL_MS while it is incomplete (the agent then skips to the
 * next magic byte). Until a conversation has begun (HELLO) anything that is not a
 * complete HELLO is skipped at once.
 *
 * The conversation, and what the agent does at each step:
 *
 *      WAIT_HELLO --HELLO--> WAIT_RUN --RUN--> LOADING --CODE/STDIN/FILE...START--> RUNNING
 *                              ^  HELLO (any state before RUNNING) starts over       |
 *                                                          FILE_OUT..., EXIT, power off
 *
 * Files in become the sandbox's files as on the host (agent-files.c). When the program
 * ends, the sandbox's PID 1 holds its working directory until the agent has taken the
 * files out; a program the sandbox ends is first frozen, so that its files are taken
 * as they are then. At the time limit the program gets SIGTERM and TERM_GRACE_MS to
 * flush what it printed (charts.py), as on the host, before the sandbox goes.
 *
 * A RUN, CODE, STDIN, FILE, FILE_DATA or START that breaks the rules (bad field, more bytes than
 * announced, START before everything arrived) ends the VM with an ERROR frame: the
 * host that sent it is broken, and a VM runs one execution anyway.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/macro.h"
#include "guest/agent.h"
#include "hexr-sandbox/sandbox.h"
#include "ns/ns.h"
#include "ns/ns-spawn.h"

#ifndef HXS_VERSION
#define HXS_VERSION "0"
#endif

#define OUT_CAP          (1u << 20)     /* frames queued for the host */
#define OUT_CHUNK        (64u << 10)    /* program output per frame */
#define OUT_RESERVE      (4u << 10)     /* room always kept for control frames */
#define HUP_BACKOFF_MS   20             /* how often to look for a host that left */
#define DRAIN_MS         5000           /* pipes still open this long after PID 1 died */
#define LINGER_MS        1000           /* after the last frame: for the host to hang up */
#define FLUSH_MS         10000          /* last frames: how long to wait for the host */
#define STALL_MS         2000           /* an incomplete frame this long without a byte is stale */
#define TERM_GRACE_MS    150            /* SIGTERM at the time limit, then this long to flush */
#define FILES_MS         60000          /* the files out: how long to wait for the host to take them */

typedef enum state { WAIT_HELLO, WAIT_RUN, LOADING, RUNNING } state;

static struct channel {
        int fd;                 /* virtio port or accepted vsock connection; -1: none */
        int listen_fd;          /* vsock only */
        bool hup;               /* virtio port with no host on the other side */
        uint64_t hup_until;
        uint8_t in[HXP_FRAME_MAX];
        size_t in_len;
        uint64_t last_rx_ns;    /* when the last byte arrived */
        uint8_t out[OUT_CAP];
        size_t out_off, out_len;
} ch = { .fd = -1, .listen_fd = -1 };

static struct conversation {
        state st;
        hxp_run run;
        uint8_t run_payload[HXP_PAYLOAD_MAX];
        uint8_t *code, *stdin_data;     /* a session's: a queue of stdin_cap bytes */
        size_t code_got, stdin_got, stdin_off, stdin_cap;
        bool stdin_ended;
        /* running */
        agent_job job;
        uint64_t deadline_ns, pid1_gone_ns, time_ns;
        bool timed_out, killed, reaped, thrashed;
        int pid1_status;        /* wait status of the sandbox's PID 1 (waitid) */
        uint64_t sent[2];       /* stdout, stderr bytes forwarded */
        uint64_t kill_at_ns;    /* the time limit's SIGTERM was sent: the sandbox goes then */
        char report[512];
        size_t report_len;
        agent_files_in fin;
        agent_files_out fout;
} cv = { .fin = { .fd = -1 } };

void agent_log(const char *fmt, ...)
{
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n > sizeof(buf) - 2)
                n = sizeof(buf) - 2;
        buf[n++] = '\n';
        (void)!write(STDERR_FILENO, "hexr-agent: ", 12);
        (void)!write(STDERR_FILENO, buf, (size_t)n);
}

/* ---- the channel ------------------------------------------------------------ */

static size_t out_free(void)
{
        return OUT_CAP - ch.out_len;
}

/* Queues one frame. Callers keep OUT_RESERVE free for control frames. */
static int send_frame(hxp_type type, const void *payload, size_t len)
{
        uint8_t h[HXP_HEADER_SIZE];
        if (hxp_header(h, type, len) < 0)
                return -EINVAL;
        if (out_free() < HXP_HEADER_SIZE + len)
                return -ENOBUFS;
        if (ch.out_off + ch.out_len + HXP_HEADER_SIZE + len > OUT_CAP) {
                memmove(ch.out, ch.out + ch.out_off, ch.out_len);
                ch.out_off = 0;
        }
        uint8_t *p = ch.out + ch.out_off + ch.out_len;
        memcpy(p, h, HXP_HEADER_SIZE);
        if (len)
                memcpy(p + HXP_HEADER_SIZE, payload, len);
        ch.out_len += HXP_HEADER_SIZE + len;
        return 0;
}

int agent_send(hxp_type type, const void *payload, size_t len)
{
        if (out_free() < HXP_HEADER_SIZE + len + OUT_RESERVE)
                return -ENOBUFS;
        return send_frame(type, payload, len);
}

static void send_error(const char *text)
{
        agent_log("error: %s", text);
        size_t len = strlen(text);
        if (len > 1024)
                len = 1024;
        (void)send_frame(HXP_ERROR, text, len);
}

static void host_gone(void)
{
        /* Whatever half frame it left must not swallow the next host's HELLO, and the
         * next host must not get the rest of a frame meant for this one: a host takes
         * a bad byte for a broken guest. */
        ch.in_len = 0;
        ch.out_off = ch.out_len = 0;
        if (ch.listen_fd >= 0) {
                close_fd(&ch.fd);
                return;
        }
        ch.hup = true;
        ch.hup_until = agent_now_ns() + HUP_BACKOFF_MS * 1000000ull;
}

static void flush_out(void)
{
        while (ch.fd >= 0 && ch.out_len > 0) {
                ssize_t n = write(ch.fd, ch.out + ch.out_off, ch.out_len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                host_gone();
                        return;
                }
                ch.out_off += (size_t)n;
                ch.out_len -= (size_t)n;
                ch.hup = false;
        }
        if (ch.out_len == 0)
                ch.out_off = 0;
}

/* ---- the conversation ------------------------------------------------------- */

static _Noreturn void finish(void);

static void reset_load(void)
{
        free(cv.code);
        free(cv.stdin_data);
        cv.code = cv.stdin_data = NULL;
        cv.code_got = cv.stdin_got = cv.stdin_off = cv.stdin_cap = 0;
        cv.stdin_ended = false;
        files_in_reset(&cv.fin);
}

static void stop_sandbox(void);

static _Noreturn void fail_conversation(const char *text)
{
        send_error(text);
        finish();
}

static const char *check_run(const hxp_run *r)
{
        if (r->language >= HXS_LANG_MAX)
                return "RUN: unknown language";
        if (r->timeout_ms == 0 || r->timeout_ms > 24u * 3600 * 1000)
                return "RUN: timeout_ms out of range";
        if (r->memory_mb < 4 || r->memory_mb > (1u << 20))
                return "RUN: memory_mb out of range";
        if (r->pids_max == 0 || r->pids_max > (1u << 22))
                return "RUN: pids_max out of range";
        if (r->nofile < 16 || r->nofile > (1u << 20))
                return "RUN: nofile out of range";
        if (r->tmpfs_mb == 0 || r->tmpfs_mb > (1u << 16))
                return "RUN: tmpfs_mb out of range";
        if (r->code_len > AGENT_CODE_MAX)
                return "RUN: code_len too large";
        if (r->stdin_len > AGENT_STDIN_MAX)
                return "RUN: stdin_len too large";
        if (r->interactive && r->stdin_len > 0)
                return "RUN: a session's stdin comes after START, not in stdin_len";
        return files_in_check_run(r);
}

static void on_run(const hxp_frame *f)
{
        memcpy(cv.run_payload, f->payload, f->len); /* cv.run points into it */
        if (hxp_run_decode(cv.run_payload, f->len, &cv.run) < 0)
                fail_conversation("RUN: malformed request");
        const char *why = check_run(&cv.run);
        if (why)
                fail_conversation(why);
        cv.code = malloc(cv.run.code_len ? cv.run.code_len : 1);
        cv.stdin_cap = cv.run.interactive ? AGENT_STDIN_QUEUE : cv.run.stdin_len;
        cv.stdin_data = malloc(cv.stdin_cap ? cv.stdin_cap : 1);
        if (!cv.code || !cv.stdin_data)
                fail_conversation("RUN: no memory for the code and stdin");
        cv.st = LOADING;
}

static void on_start(void)
{
        hxs_error err = { 0 };
        if (cv.code_got != cv.run.code_len)
                fail_conversation("START before all of the code arrived");
        if (cv.stdin_got != cv.run.stdin_len)
                fail_conversation("START before all of stdin arrived");
        const char *why = files_in_done(&cv.fin, &cv.run);
        if (why)
                fail_conversation(why);
        int r = run_start(&cv.run, cv.code, cv.fin.fd, &cv.job, &err);
        if (r < 0)
                fail_conversation(err.message);
        free(cv.code);
        cv.code = NULL;
        files_in_reset(&cv.fin); /* the sandbox has its copy */
        agent_mark("program started");
        cv.st = RUNNING;
        cv.deadline_ns = cv.job.started_ns + (uint64_t)cv.run.timeout_ms * 1000000ull;
}

/* A session's stdin after START: queued for feed_stdin; an empty frame closes it once
 * the queue is written. The channel is not read past AGENT_STDIN_HIGH (loop_once), so
 * the queue cannot fill unless the host floods it regardless. */
static void queue_stdin(const hxp_frame *f)
{
        if (cv.stdin_ended || cv.job.stdin_fd < 0)
                return; /* closed: by the host before, or by the program */
        if (f->len == 0) {
                cv.stdin_ended = true;
                return;
        }
        if (cv.stdin_off == cv.stdin_got)
                cv.stdin_off = cv.stdin_got = 0;
        if (f->len > cv.stdin_cap - cv.stdin_got) {
                memmove(cv.stdin_data, cv.stdin_data + cv.stdin_off, cv.stdin_got - cv.stdin_off);
                cv.stdin_got -= cv.stdin_off;
                cv.stdin_off = 0;
        }
        if (f->len > cv.stdin_cap - cv.stdin_got) {
                agent_log("STDIN: the host went on past the queue's bound");
                run_kill(&cv.job);
                return;
        }
        memcpy(cv.stdin_data + cv.stdin_got, f->payload, f->len);
        cv.stdin_got += f->len;
}

static void handle_frame(const hxp_frame *f)
{
        switch ((hxp_type)f->type) {
        case HXP_HELLO:
                if (f->len != 4)
                        return;
                if (cv.st == RUNNING) {
                        agent_log("HELLO while a program runs: ignored");
                        return;
                }
                reset_load();
                uint8_t ready[4 + 32];
                memcpy(ready, f->payload, 4);
                int n = snprintf((char *)ready + 4, sizeof(ready) - 4, "hexr-agent %s", HXS_VERSION);
                (void)send_frame(HXP_READY, ready, 4 + (size_t)n);
                agent_mark("HELLO answered");
                cv.st = WAIT_RUN;
                return;
        case HXP_RUN:
                if (cv.st == WAIT_RUN)
                        on_run(f);
                return;
        case HXP_CODE:
                if (cv.st != LOADING)
                        return;
                if (f->len > cv.run.code_len - cv.code_got)
                        fail_conversation("CODE: more bytes than code_len");
                memcpy(cv.code + cv.code_got, f->payload, f->len);
                cv.code_got += f->len;
                return;
        case HXP_STDIN:
                if (cv.st == RUNNING && cv.run.interactive) {
                        queue_stdin(f);
                        return;
                }
                if (cv.st != LOADING)
                        return;
                if (f->len == 0) {
                        cv.stdin_ended = true;
                        return;
                }
                if (cv.stdin_ended || f->len > cv.run.stdin_len - cv.stdin_got)
                        fail_conversation("STDIN: more bytes than stdin_len");
                memcpy(cv.stdin_data + cv.stdin_got, f->payload, f->len);
                cv.stdin_got += f->len;
                return;
        case HXP_FILE:
        case HXP_FILE_DATA: {
                if (cv.st != LOADING)
                        return;
                const char *why = f->type == HXP_FILE ? files_in_file(&cv.fin, &cv.run, f)
                                                      : files_in_data(&cv.fin, f);
                if (why)
                        fail_conversation(why);
                return;
        }
        case HXP_START:
                if (cv.st == LOADING)
                        on_start();
                return;
        case HXP_KILL:
                if (cv.st == RUNNING && !cv.killed && !cv.reaped) {
                        /* the host ended it (its output limit) but wants its files; or
                         * the client is gone and nothing is wanted */
                        bool keep = f->len == 4 && hxp_load_u32(f->payload) == HXP_KILL_KEEP_FILES;
                        cv.killed = true;
                        if (keep)
                                stop_sandbox();
                        else
                                run_kill(&cv.job);
                }
                return;
        case HXP_READY:
        case HXP_STDOUT:
        case HXP_STDERR:
        case HXP_EXIT:
        case HXP_ERROR:
        case HXP_FILE_OUT:
        case HXP_TYPE_MAX:
                return; /* the agent's own frame types: not from a host */
        }
}

/* Before a conversation, only a whole HELLO counts: any other header, even a valid
 * one, is skipped at once rather than waited for (its payload may never come, and a
 * fresh host's HELLO would be taken for it). */
static bool stray_before_hello(const uint8_t *p, size_t len)
{
        if (cv.st != WAIT_HELLO || len < 3)
                return false;
        if (p[2] != HXP_HELLO)
                return true;
        return len >= HXP_HEADER_SIZE && hxp_load_u32(p + 4) != 4;
}

static void process_input(void)
{
        size_t off = 0;
        while (off < ch.in_len) {
                hxp_frame f;
                const uint8_t *p = ch.in + off;
                size_t left = ch.in_len - off;
                long n = hxp_parse(p, left, &f);
                if (n < 0 || (n >= 0 && stray_before_hello(p, left))) {
                        off += hxp_resync(p, left);
                        continue;
                }
                if (n == 0)
                        break;
                handle_frame(&f);
                off += (size_t)n;
        }
        memmove(ch.in, ch.in + off, ch.in_len - off);
        ch.in_len -= off;
}

static void read_channel(void)
{
        /* a bounded number of reads per turn: a host that floods the channel must not
         * keep the loop from the program's pipes and its timeout */
        for (int turns = 0; turns < 16; turns++) {
                if (ch.fd < 0)
                        return;
                ssize_t n = read(ch.fd, ch.in + ch.in_len, sizeof(ch.in) - ch.in_len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                host_gone();
                        return;
                }
                if (n == 0) {
                        host_gone();
                        return;
                }
                ch.hup = false;
                ch.last_rx_ns = agent_now_ns();
                ch.in_len += (size_t)n;
                process_input();
                if (ch.in_len == sizeof(ch.in)) /* cannot happen: a whole frame fits */
                        ch.in_len = 0;
        }
}

/* A frame that stopped arriving half-way: its sender is gone. */
static void drop_stale_input(void)
{
        if (ch.in_len == 0 || agent_now_ns() - ch.last_rx_ns < STALL_MS * 1000000ull)
                return;
        agent_log("dropping a frame that stopped arriving");
        size_t skip = hxp_resync(ch.in, ch.in_len);
        memmove(ch.in, ch.in + skip, ch.in_len - skip);
        ch.in_len -= skip;
        process_input();
}

static void accept_host(void)
{
        int fd = accept4(ch.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
                return;
        /* one host at a time: the newest one wins */
        close_fd(&ch.fd);
        ch.fd = fd;
        ch.in_len = 0;
        ch.out_off = ch.out_len = 0;
}

/* ---- a running program ------------------------------------------------------ */

static void forward_output(int *fd, int stream)
{
        static uint8_t buf[OUT_CHUNK];
        uint64_t cap = (uint64_t)cv.run.output_max + 1;
        for (;;) {
                if (out_free() < OUT_CHUNK + HXP_HEADER_SIZE + OUT_RESERVE)
                        return; /* the host is slow: the program waits on its pipe */
                ssize_t n = read(*fd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                close_fd(fd);
                        return;
                }
                if (n == 0) {
                        close_fd(fd);
                        return;
                }
                uint64_t room = cap > cv.sent[stream] ? cap - cv.sent[stream] : 0;
                size_t keep = (uint64_t)n < room ? (size_t)n : (size_t)room;
                if (keep > 0) {
                        (void)send_frame(stream ? HXP_STDERR : HXP_STDOUT, buf, keep);
                        cv.sent[stream] += keep;
                }
        }
}

static void feed_stdin(void)
{
        agent_job *j = &cv.job;
        while (j->stdin_fd >= 0 && cv.stdin_off < cv.stdin_got) {
                ssize_t n = write(j->stdin_fd, cv.stdin_data + cv.stdin_off, cv.stdin_got - cv.stdin_off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                close_fd(&j->stdin_fd); /* EPIPE: it closed stdin */
                        return;
                }
                cv.stdin_off += (size_t)n;
        }
        if (!cv.run.interactive || cv.stdin_ended)
                close_fd(&j->stdin_fd);
}

/* A session's stdin: queued bytes (or its end) waiting for the pipe. */
static bool stdin_waiting(void)
{
        return !cv.run.interactive || cv.stdin_off < cv.stdin_got || cv.stdin_ended;
}

static void read_report(void)
{
        for (;;) {
                if (cv.report_len == sizeof(cv.report)) {
                        char sink[256];
                        ssize_t n = read(cv.job.report_fd, sink, sizeof(sink));
                        if (n == 0)
                                close_fd(&cv.job.report_fd);
                        if (n == 0 || (n < 0 && errno != EINTR))
                                break;
                        continue;
                }
                ssize_t n = read(cv.job.report_fd, cv.report + cv.report_len, sizeof(cv.report) - cv.report_len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n == 0)
                        close_fd(&cv.job.report_fd);
                if (n <= 0)
                        break;
                cv.report_len += (size_t)n;
        }
}

/* The report holds PID 1's status record (after a set-up error's text, if any). */
static bool report_has_status(bool *ret_setup_error)
{
        size_t off = 0;
        *ret_setup_error = cv.report_len >= 1 && cv.report[0] == NS_REPORT_ERROR;
        if (*ret_setup_error) {
                const char *nul = memchr(cv.report, '\0', cv.report_len);
                if (!nul)
                        return false;
                off = (size_t)(nul - cv.report) + 1;
        }
        return cv.report_len - off >= 1 + sizeof(int) && cv.report[off] == NS_REPORT_STATUS;
}

/* The program has ended and PID 1, having reported, holds on the sync pipe with the
 * working directory: the files out are taken now, then PID 1 is let go. */
static void release_pid1(void)
{
        bool setup_error;
        if (cv.job.sync_fd < 0 || !report_has_status(&setup_error))
                return;
        if (!setup_error)
                files_out_take(&cv.fout, cv.job.pid, &cv.run);
        close_fd(&cv.job.sync_fd);
}

/* A program the sandbox ends (time limit, memory): stopped where it is, its files
 * taken as they are then, then every process of it killed. */
static void stop_sandbox(void)
{
        agent_job *j = &cv.job;
        run_freeze(j);
        if (j->sync_fd >= 0)
                files_out_take(&cv.fout, j->pid, &cv.run);
        run_kill(j);
}

static void reap(void)
{
        siginfo_t si = { 0 };
        if (waitid(P_PIDFD, (id_t)cv.job.pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return;
        cv.reaped = true;
        cv.time_ns = agent_now_ns() - cv.job.started_ns;
        cv.pid1_gone_ns = agent_now_ns();
        cv.pid1_status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
        close_fd(&cv.job.pidfd);
        close_fd(&cv.job.sync_fd);
        run_kill(&cv.job); /* its pid namespace died with it; this is for certainty */
}

static void wait_channel(uint64_t until);

/* The files out, before EXIT: as many frames as the queue takes, then wait for the
 * host to take some. A host too slow for FILES_MS gets the rest cut (it drops a file
 * that EXIT interrupts). */
static void send_files(void)
{
        uint64_t until = agent_now_ns() + FILES_MS * 1000000ull;
        while (!files_out_send(&cv.fout) && agent_now_ns() < until) {
                flush_out();
                wait_channel(until);
        }
        if (cv.fout.next < cv.fout.res.n_files)
                agent_log("the host did not take the files out in time: %zu of %zu sent", cv.fout.next,
                          cv.fout.res.n_files);
}

/* PID 1's report, a sequence of records: 'E' text NUL (set-up failed, from PID 1 or
 * from the program before its exec) and 'S' + int (the program's wait status). Read
 * record by record: a status's bytes may well contain an 'E'. */
static void finish_run(void)
{
        uint32_t status = W_EXITCODE(0, SIGKILL);
        read_report();
        for (size_t i = 0; i < cv.report_len;) {
                const char *rec = cv.report + i;
                size_t left = cv.report_len - i;
                if (rec[0] == NS_REPORT_ERROR) {
                        char text[sizeof(cv.report) + 32];
                        size_t len = strnlen(rec + 1, left - 1);
                        snprintf(text, sizeof(text), "setting up the sandbox: %.*s", (int)len, rec + 1);
                        fail_conversation(text);
                }
                if (rec[0] != NS_REPORT_STATUS || left < 1 + sizeof(int))
                        break;
                int st;
                memcpy(&st, rec + 1, sizeof(int));
                status = (uint32_t)st;
                i += 1 + sizeof(int);
        }
        if (cv.timed_out || cv.killed || cv.thrashed)
                status = W_EXITCODE(0, SIGKILL);
        uint32_t peak_kb;
        bool oom;
        run_stats(&cv.job, &peak_kb, &oom);
        send_files();
        uint8_t buf[128];
        hxp_builder b;
        hxp_builder_init(&b, buf, sizeof(buf));
        hxp_put_u32(&b, HXP_EXIT_WAIT_STATUS, status);
        hxp_put_u32(&b, HXP_EXIT_TIMED_OUT, cv.timed_out);
        hxp_put_u32(&b, HXP_EXIT_OOM_KILLED, (oom || cv.thrashed) && !cv.timed_out);
        uint64_t ms = cv.time_ns / 1000000u;
        hxp_put_u32(&b, HXP_EXIT_TIME_MS, ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms);
        hxp_put_u32(&b, HXP_EXIT_MEMORY_KB, peak_kb);
        (void)send_frame(HXP_EXIT, buf, b.len);
        agent_mark("program ended");
        finish();
}

static bool run_done(void)
{
        const agent_job *j = &cv.job;
        if (!cv.reaped)
                return false;
        bool pipes_open = j->stdout_fd >= 0 || j->stderr_fd >= 0 || j->report_fd >= 0;
        return !pipes_open || agent_now_ns() - cv.pid1_gone_ns > DRAIN_MS * 1000000ull;
}

/* ---- the loop ---------------------------------------------------------------- */

static int ms_until(uint64_t t)
{
        uint64_t now = agent_now_ns();
        if (t <= now)
                return 0;
        uint64_t ms = (t - now + 999999) / 1000000;
        return ms > 60000 ? 60000 : (int)ms;
}

static void loop_once(void)
{
        struct pollfd p[9];
        enum { SLOT_CHAN, SLOT_LISTEN, SLOT_OUT, SLOT_ERR, SLOT_IN, SLOT_REPORT, SLOT_PID, SLOT_PSI,
               SLOT_MAX };
        int timeout = -1;
        uint64_t now = agent_now_ns();
        for (int i = 0; i < SLOT_MAX; i++)
                p[i] = (struct pollfd){ .fd = -1 };

        if (ch.hup && now >= ch.hup_until)
                ch.hup = false; /* look again: the host may be back */
        /* a session whose program does not read its stdin: the host waits */
        bool take = !(cv.st == RUNNING && cv.run.interactive && cv.stdin_got - cv.stdin_off > AGENT_STDIN_HIGH);
        if (ch.fd >= 0 && !ch.hup)
                p[SLOT_CHAN] = (struct pollfd){ .fd = ch.fd,
                                                .events = (take ? POLLIN : 0) | (ch.out_len ? POLLOUT : 0) };
        else if (ch.hup)
                timeout = ms_until(ch.hup_until);
        p[SLOT_LISTEN].fd = ch.listen_fd;
        p[SLOT_LISTEN].events = POLLIN;
        if (ch.in_len > 0) {
                int t = ms_until(ch.last_rx_ns + STALL_MS * 1000000ull);
                if (timeout < 0 || t < timeout)
                        timeout = t;
        }
        if (cv.st == RUNNING) {
                agent_job *j = &cv.job;
                bool room = out_free() >= OUT_CHUNK + HXP_HEADER_SIZE + OUT_RESERVE;
                p[SLOT_OUT] = (struct pollfd){ .fd = room ? j->stdout_fd : -1, .events = POLLIN };
                p[SLOT_ERR] = (struct pollfd){ .fd = room ? j->stderr_fd : -1, .events = POLLIN };
                p[SLOT_IN] = (struct pollfd){ .fd = stdin_waiting() ? j->stdin_fd : -1, .events = POLLOUT };
                p[SLOT_REPORT] = (struct pollfd){ .fd = j->report_fd, .events = POLLIN };
                p[SLOT_PID] = (struct pollfd){ .fd = j->pidfd, .events = POLLIN };
                p[SLOT_PSI] = (struct pollfd){ .fd = cv.thrashed ? -1 : j->psi_fd, .events = POLLPRI };
                uint64_t until = cv.reaped ? cv.pid1_gone_ns + DRAIN_MS * 1000000ull
                                 : cv.kill_at_ns ? cv.kill_at_ns
                                 : cv.timed_out || cv.killed ? now + 100 * 1000000ull
                                                             : cv.deadline_ns;
                int t = ms_until(until);
                if (timeout < 0 || t < timeout)
                        timeout = t;
        }
        if (poll(p, SLOT_MAX, timeout) < 0 && errno != EINTR)
                return;

        if (p[SLOT_LISTEN].revents & POLLIN)
                accept_host();
        if (p[SLOT_CHAN].revents & (POLLIN | POLLHUP | POLLERR))
                read_channel();
        drop_stale_input();
        if (cv.st == RUNNING) {
                agent_job *j = &cv.job;
                if (p[SLOT_OUT].revents)
                        forward_output(&j->stdout_fd, 0);
                if (p[SLOT_ERR].revents)
                        forward_output(&j->stderr_fd, 1);
                if (p[SLOT_IN].revents)
                        feed_stdin();
                if (p[SLOT_REPORT].revents) {
                        read_report();
                        release_pid1();
                }
                if (p[SLOT_PSI].revents & POLLPRI && !cv.reaped && !cv.timed_out && !cv.killed) {
                        agent_log("the program thrashes at its memory limit: killed as out of memory");
                        cv.thrashed = true;
                        stop_sandbox();
                }
                if (p[SLOT_PID].revents)
                        reap();
                if (!cv.reaped && !cv.timed_out && !cv.killed && agent_now_ns() >= cv.deadline_ns) {
                        /* a moment to flush what it printed (charts.py), then it goes */
                        cv.timed_out = true;
                        ns_term_program(j->pid);
                        cv.kill_at_ns = agent_now_ns() + TERM_GRACE_MS * 1000000ull;
                }
                if (cv.kill_at_ns && agent_now_ns() >= cv.kill_at_ns) {
                        cv.kill_at_ns = 0;
                        if (!cv.reaped)
                                stop_sandbox();
                }
                if (run_done())
                        finish_run();
        }
        flush_out();
}

/* Until the channel takes bytes again, or until, or a host that went away had a
 * moment to come back. */
static void wait_channel(uint64_t until)
{
        struct pollfd p = { .fd = ch.fd, .events = POLLOUT };
        if (ch.fd < 0 || ch.hup) {
                (void)poll(NULL, 0, HUP_BACKOFF_MS);
                ch.hup = false;
                if (ch.fd < 0 && ch.listen_fd >= 0) {
                        struct pollfd l = { .fd = ch.listen_fd, .events = POLLIN };
                        if (poll(&l, 1, 0) > 0)
                                accept_host();
                }
                return;
        }
        (void)poll(&p, 1, ms_until(until));
}

/* The last frames out, then power off. */
static _Noreturn void finish(void)
{
        uint64_t until = agent_now_ns() + FLUSH_MS * 1000000ull;
        if (cv.st == RUNNING && !cv.reaped) {
                run_kill(&cv.job);
                run_close(&cv.job);
        }
        while (ch.out_len > 0 && agent_now_ns() < until) {
                flush_out();
                if (ch.out_len == 0)
                        break;
                wait_channel(until);
        }
        if (ch.out_len > 0)
                agent_log("powering off with %zu bytes the host did not take", ch.out_len);
        /* A write to the port returns once the bytes are queued, not once the VMM has
         * passed them on: powering off at once could lose the last frame. The host
         * destroys the VM when EXIT arrives; wait for that (or its hang-up) a moment. */
        uint64_t linger = agent_now_ns() + LINGER_MS * 1000000ull;
        while (ch.fd >= 0 && !ch.hup && agent_now_ns() < linger) {
                struct pollfd p = { .fd = ch.fd, .events = POLLIN };
                if (poll(&p, 1, ms_until(linger)) <= 0)
                        continue;
                char drop[256];
                if ((p.revents & (POLLHUP | POLLERR)) || read(ch.fd, drop, sizeof(drop)) == 0)
                        break;
        }
        boot_poweroff();
}

/* Without /dev/console in the initramfs the kernel leaves fds 0-2 closed: the first
 * files opened would take them, and a log line would go to the host channel. */
static void hold_stdio(void)
{
        for (int fd = 0; fd < 3; fd++) {
                if (fcntl(fd, F_GETFD) >= 0)
                        continue;
                int n = open("/dev/console", O_RDWR | O_NOCTTY);
                if (n < 0)
                        n = open("/dev/null", O_RDWR);
                if (n >= 0 && n != fd) {
                        dup2(n, fd);
                        close(n);
                }
        }
}

int main(int argc, char **argv)
{
        hxs_error err = { 0 };
        agent_boot b;
        if (argc > 1 && strcmp(argv[1], "--version") == 0) {
                printf("hexr-agent %s\n", HXS_VERSION);
                return 0;
        }
        if (getpid() != 1) {
                fprintf(stderr, "hexr-agent: this is the init of a hexr-sandbox microVM; it runs only as PID 1\n");
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        hold_stdio();
        int r = boot_machine(&b, &err);
        hold_stdio();
        if (r < 0) {
                agent_log("boot failed: %s", err.message);
                boot_poweroff();
        }
        bool listening = false;
        int fd;
        if (boot_channel(&b, &fd, &listening, &err) < 0) {
                agent_log("no channel to the host: %s", err.message);
                boot_poweroff();
        }
        agent_mark("channel open");
        if (listening)
                ch.listen_fd = fd;
        else
                ch.fd = fd;
        for (;;)
                loop_once();
}
