/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The microVM backend behind the engine's table. An execution takes a booted VM from
 * the pool (or boots one), sends the request, turns the agent's frames into the same
 * result the namespace backend gives, and destroys the VM. Everything the guest
 * sends is hostile: a malformed frame ends the execution and the VM. The files in go
 * after the code and stdin, a frame at a time as the channel takes them, and the
 * files out come before EXIT (vm-files.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/macro.h"
#include "engine/backend.h"
#include "engine/output.h"
#include "engine/request.h"
#include "engine/runtime.h"
#include "vm/vm.h"

/* How long a VM may take to boot before the program's own time starts counting. */
#define BOOT_ALLOWANCE_KVM_MS   20000u
#define BOOT_ALLOWANCE_TCG_MS   90000u
/* How long the agent may take to report after the program's time is up. */
#define REPORT_GRACE_MS         10000u
/* What receive() takes from one VM per event-loop turn, as the namespace backend
 * bounds its reads: a guest that floods the channel (it is hostile) gets its share of
 * the loop and no more; the rest waits in the socket (level-triggered) for the next
 * turn, after every other connection, execution and timer had theirs. 1 MiB is 16 of
 * the agent's 64 KiB output frames; the frame count bounds a stream of tiny ones. */
#define RECEIVE_BUDGET_BYTES    (1u << 20)
#define RECEIVE_BUDGET_FRAMES   1024u

enum { TAG_CHAN = 1, TAG_PIDFD, TAG_TIMER, TAG_SPAWNED };

/* The backend's state, per engine. */
struct vm_backend {
        const hxs_config *cfg;
        vm_host host;
        vm_pool *pool;
        vm_spawner *spawner;    /* cold starts, when the pool has none */
};

/* One execution's VM (at x->priv). */
struct vm_exec {
        vm_instance vm;
        bool have_vm;
        bool pooled;
        const hxs_config *cfg;  /* the engine's */
        vm_spawn_job *job;      /* a cold start under way */
        int job_fd;
        int timer_fd;
        uint8_t *out;           /* frames still to send */
        size_t out_len, out_off, out_size;
        vm_files_tx tx;         /* the files in and START, once out is sent */
        vm_files_rx rx;         /* the files out */
        bool out_armed;         /* EPOLLOUT is on */
        bool got_exit;
        bool hv_exited;         /* the hypervisor is gone: what it wrote is still read */
        bool stopping;          /* past its output limit: KILL went, its files and EXIT come */
        bool stdin_closed;      /* a session's stdin: the empty STDIN went */
        hxp_exit ex;
};

static int epoll_set(int epfd, int op, int fd, uint32_t events, uint64_t tag)
{
        struct epoll_event ev = { .events = events, .data.u64 = tag };
        return epoll_ctl(epfd, op, fd, &ev) < 0 ? -errno : 0;
}

/* ---- the request, as frames ---------------------------------------------------- */

static int append_frame(uint8_t *buf, size_t *len, hxp_type type, const void *p, size_t n)
{
        int r = hxp_header(buf + *len, type, n);
        if (r < 0)
                return r;
        if (n)
                memcpy(buf + *len + HXP_HEADER_SIZE, p, n);
        *len += HXP_HEADER_SIZE + n;
        return 0;
}

static size_t chunked_size(size_t n)
{
        size_t frames = (n + HXP_PAYLOAD_MAX - 1) / HXP_PAYLOAD_MAX;
        return n + frames * HXP_HEADER_SIZE;
}

static int append_chunks(uint8_t *buf, size_t *len, hxp_type type, const uint8_t *p, size_t n)
{
        while (n > 0) {
                size_t c = n < HXP_PAYLOAD_MAX ? n : HXP_PAYLOAD_MAX;
                int r = append_frame(buf, len, type, p, c);
                if (r < 0)
                        return r;
                p += c;
                n -= c;
        }
        return 0;
}

/* RUN, CODE..., STDIN..., an empty STDIN: one buffer written as the VM reads; the
 * files and START follow (vm-files.c). */
static int build_request(const hxs_config *cfg, hxs_exec *x, hxs_error *err)
{
        const hxs_request *req = x->req;
        char **env = NULL;
        int r = exec_env(req, NULL, &env);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "out of memory");
        size_t n_env = 0;
        while (env[n_env])
                n_env++;
        uint8_t *run = malloc(HXP_PAYLOAD_MAX);
        if (!run) {
                strv_free(env);
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        }
        hxp_builder b;
        hxp_builder_init(&b, run, HXP_PAYLOAD_MAX);
        uint64_t timeout_ms = (uint64_t)hxs_request_timeout_s(req) * 1000;
        hxp_put_u32(&b, HXP_RUN_LANGUAGE, (uint32_t)req->language);
        hxp_put_u32(&b, HXP_RUN_TIMEOUT_MS, (uint32_t)timeout_ms);
        hxp_put_u32(&b, HXP_RUN_MEMORY_MB, hxs_request_memory_mb(req));
        hxp_put_u32(&b, HXP_RUN_PIDS_MAX, cfg->pids_max);
        hxp_put_u32(&b, HXP_RUN_NOFILE, cfg->nofile);
        hxp_put_u32(&b, HXP_RUN_TMPFS_MB, cfg->tmpfs_mb);
        /* all the program may print (MAX_STREAM_BYTES), not only what the result keeps:
         * the engine keeps the head and the tail, streams the rest, and past it ends
         * the program (stop_program) */
        /* a session's output is bounded by its session manager, cell by cell */
        hxp_put_u32(&b, HXP_RUN_OUTPUT_MAX, req->interactive ? UINT32_MAX : cfg->max_stream_bytes);
        hxp_put_u32(&b, HXP_RUN_CODE_LEN, (uint32_t)req->code_len);
        hxp_put_u32(&b, HXP_RUN_STDIN_LEN, (uint32_t)req->stdin_len);
        hxp_put_u32(&b, HXP_RUN_FILES, (uint32_t)req->n_files);
        hxp_put_u64(&b, HXP_RUN_FILES_BYTES, request_files_bytes(req));
        hxp_put_u32(&b, HXP_RUN_RETURN_FILES, cfg->max_return_files);
        hxp_put_u64(&b, HXP_RUN_RETURN_BYTES, cfg->max_return_bytes);
        for (size_t i = 0; i < req->n_globs; i++)
                hxp_put_bytes(&b, HXP_RUN_RETURN_GLOB, req->return_globs[i], strlen(req->return_globs[i]));
        size_t n_argv = 0;
        if (req->interactive) {
                hxp_put_u32(&b, HXP_RUN_INTERACTIVE, 1);
                for (; req->argv && req->argv[n_argv]; n_argv++)
                        hxp_put_bytes(&b, HXP_RUN_ARGV, req->argv[n_argv], strlen(req->argv[n_argv]));
        }
        for (size_t i = 0; i < n_env; i++)
                hxp_put_bytes(&b, HXP_RUN_ENV, env[i], strlen(env[i]));
        strv_free(env);
        if (n_argv > HXP_ARGV_MAX) {
                free(run);
                return err_fail(err, HXS_ERR_INVALID, -E2BIG, "argv: more than the microVM backend takes (%u)",
                                HXP_ARGV_MAX);
        }
        if (b.overflow || n_env > HXP_ENV_MAX) {
                free(run);
                return err_fail_field(err, HXS_ERR_INVALID, -E2BIG, "env_vars",
                                      "env_vars: more than the microVM backend takes (%u variables, "
                                      "%u bytes in all)", HXP_ENV_MAX, HXP_PAYLOAD_MAX - 1024);
        }
        struct vm_exec *vx = x->priv;
        size_t total = HXP_HEADER_SIZE + b.len + chunked_size(req->code_len) +
                       chunked_size(req->stdin_len) + HXP_HEADER_SIZE;
        vx->out = malloc(total);
        if (!vx->out) {
                free(run);
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        }
        vx->out_len = 0;
        vx->out_size = total;
        r = append_frame(vx->out, &vx->out_len, HXP_RUN, run, b.len);
        free(run);
        if (r == 0)
                r = append_chunks(vx->out, &vx->out_len, HXP_CODE, (const uint8_t *)req->code, req->code_len);
        if (r == 0)
                r = append_chunks(vx->out, &vx->out_len, HXP_STDIN, (const uint8_t *)req->stdin_data,
                                  req->stdin_len);
        /* a session's stdin goes on after START (vm_stdin_more) */
        if (r == 0 && !req->interactive)
                r = append_frame(vx->out, &vx->out_len, HXP_STDIN, NULL, 0);
        if (r < 0)
                return err_fail(err, HXS_ERR_INTERNAL, r, "building the microVM request");
        return 0;
}

/* ---- executions ------------------------------------------------------------------ */

static void set_failure(hxs_exec *x, const char *what, const char *detail)
{
        if (x->setup_failed)
                return;
        x->setup_failed = true;
        err_fail(&x->setup_error, HXS_ERR_SETUP, -EIO, "%s%s", what, detail);
}

static void finish(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        hxs_result *res = &x->result;
        res->execution_time_ms = hxs_exec_elapsed_ms(x);
        if (vx->got_exit) {
                hxs_result_set_status(res, (int)vx->ex.wait_status, true, vx->ex.timed_out != 0,
                                      vx->ex.oom_killed != 0 && !vx->ex.timed_out);
                res->memory_used_mb = ((uint64_t)vx->ex.memory_kb + 1023) / 1024;
                x->setup_failed = false;
        } else if (x->timed_out) {
                hxs_result_set_status(res, 0, false, true, false);
                x->setup_failed = false;
        } else if (x->killed || x->output_limited) {
                hxs_result_set_status(res, SIGKILL, true, false, false);
                x->setup_failed = false;
        } else {
                set_failure(x, "the microVM stopped without reporting a result", "");
        }
        res->warm = vx->pooled;
        exec_result_output(x);
        x->done = true;
        if (vx->job) {
                (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, vx->job_fd, NULL);
                vm_spawn_job_abandon(vx->job);
                vx->job = NULL;
        }
        /* one VM, one execution: it goes now, whatever the agent does next */
        if (vx->have_vm) {
                (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, vx->vm.chan, NULL);
                (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, vx->vm.pidfd, NULL);
                vm_destroy(&vx->vm);
                vx->have_vm = false;
        }
}

/* The VM is there: its channel and its process join the execution's events. */
static int watch_vm(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        vx->have_vm = true;
        vx->out_armed = true;
        int r;
        if ((r = epoll_set(x->epfd, EPOLL_CTL_ADD, vx->vm.chan, EPOLLIN | EPOLLOUT, TAG_CHAN)) < 0 ||
            (r = epoll_set(x->epfd, EPOLL_CTL_ADD, vx->vm.pidfd, EPOLLIN, TAG_PIDFD)) < 0)
                return r;
        return 0;
}

static int vm_start(void *state, hxs_exec *x, hxs_error *err)
{
        struct vm_backend *b = state;
        struct vm_exec *vx = x->priv;
        vx->timer_fd = vx->job_fd = -1;
        vx->cfg = b->cfg;
        clock_gettime(CLOCK_MONOTONIC, &x->started);
        int r = build_request(b->cfg, x, err);
        if (r < 0)
                return r;
        uint32_t ram = hxs_request_memory_mb(x->req) + VM_OVERHEAD_MB;
        if (b->pool && vm_pool_take(b->pool, ram, &vx->vm) == 0) {
                vx->pooled = true;
                if ((r = watch_vm(x)) < 0)
                        return err_fail(err, HXS_ERR_SETUP, r, "epoll: %s", strerror(-r));
        } else {
                /* booted by a thread: the loop goes on meanwhile, the boot counts
                 * against the execution's time (the allowance below) */
                r = vm_spawner_submit(b->spawner, ram, &vx->job, &vx->job_fd, err);
                if (r < 0)
                        return r;
                if ((r = epoll_set(x->epfd, EPOLL_CTL_ADD, vx->job_fd, EPOLLIN, TAG_SPAWNED)) < 0)
                        return err_fail(err, HXS_ERR_SETUP, r, "epoll: %s", strerror(-r));
        }
        uint64_t limit = (uint64_t)hxs_request_timeout_s(x->req) * 1000 + REPORT_GRACE_MS;
        if (!vx->pooled)
                limit += b->host.kvm ? BOOT_ALLOWANCE_KVM_MS : BOOT_ALLOWANCE_TCG_MS;
        vx->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (vx->timer_fd < 0 || timerfd_arm_ms(vx->timer_fd, limit) < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "timerfd: %s", strerror(errno));
        if ((r = epoll_set(x->epfd, EPOLL_CTL_ADD, vx->timer_fd, EPOLLIN, TAG_TIMER)) < 0)
                return err_fail(err, HXS_ERR_SETUP, r, "epoll: %s", strerror(-r));
        return 0;
}

/* The cold start is done: the VM, or why there is none. False when the execution is
 * over. */
static bool spawned(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, vx->job_fd, NULL);
        hxs_error err = { 0 };
        int r = vm_spawn_job_take(vx->job, &vx->vm, &err);
        if (r == -EAGAIN) /* cannot happen: the fd is written once it is done */
                return epoll_set(x->epfd, EPOLL_CTL_ADD, vx->job_fd, EPOLLIN, TAG_SPAWNED) == 0;
        vx->job = NULL;
        vx->job_fd = -1;
        if (r < 0) {
                x->setup_failed = true;
                x->setup_error = err;
                return false;
        }
        r = watch_vm(x);
        if (r < 0) {
                set_failure(x, "epoll: ", strerror(-r));
                return false;
        }
        return true;
}

/* The next frame of the files in (or START) into out, once what it held has gone:
 * false when there is none, or when a staged file could not be read (the execution
 * fails). */
static bool next_frame(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        if (vx->tx.done)
                return false;
        if (vx->out_size < HXP_FRAME_MAX) {
                uint8_t *p = realloc(vx->out, HXP_FRAME_MAX);
                if (!p) {
                        set_failure(x, "sending the files: ", strerror(ENOMEM));
                        return false;
                }
                vx->out = p;
                vx->out_size = HXP_FRAME_MAX;
        }
        long n = vm_files_next_frame(&vx->tx, x->req, vx->out);
        if (n < 0) {
                set_failure(x, "reading a file to send: ", strerror((int)-n));
                return false;
        }
        vx->out_len = (size_t)n;
        vx->out_off = 0;
        return n > 0;
}

/* A session's stdin, once the request and START have gone: the queued bytes as STDIN
 * frames, and an empty one when it is closed, into out. False when there is nothing
 * to send. */
static bool stdin_frames(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        if (!x->req->interactive || !vx->tx.done || vx->stdin_closed)
                return false;
        const char *data;
        size_t n = exec_stdin_pending(x, &data);
        if (n == 0 && !x->stdin_closing)
                return false;
        if (vx->out_size < HXP_FRAME_MAX) {
                uint8_t *p = realloc(vx->out, HXP_FRAME_MAX);
                if (!p)
                        return false; /* it stays queued: the next call tries again */
                vx->out = p;
                vx->out_size = HXP_FRAME_MAX;
        }
        if (n > HXP_PAYLOAD_MAX)
                n = HXP_PAYLOAD_MAX;
        (void)hxp_header(vx->out, HXP_STDIN, n);
        if (n)
                memcpy(vx->out + HXP_HEADER_SIZE, data, n);
        vx->out_len = HXP_HEADER_SIZE + n;
        vx->out_off = 0;
        if (n) {
                exec_stdin_consumed(x, n);
        } else { /* closed, all written: the empty frame ends the program's stdin */
                vx->stdin_closed = true;
                exec_stdin_gone(x);
        }
        return true;
}

/* Returns false when the execution cannot go on (a file that cannot be read). */
static bool send_pending(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        for (;;) {
                while (vx->out_off < vx->out_len) {
                        ssize_t w = write(vx->vm.chan, vx->out + vx->out_off, vx->out_len - vx->out_off);
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                if (errno == EAGAIN)
                                        return true;
                                goto gone; /* the reader or the pidfd will say so */
                        }
                        vx->out_off += (size_t)w;
                }
                if (!next_frame(x)) {
                        if (x->setup_failed)
                                return false;
                        vx->tx.done = true;
                        if (!stdin_frames(x))
                                break;
                }
        }
gone:
        vx->out_off = vx->out_len;
        if (vx->out_armed) {
                (void)epoll_set(x->epfd, EPOLL_CTL_MOD, vx->vm.chan, EPOLLIN, TAG_CHAN);
                vx->out_armed = false;
        }
        free(vx->out);
        vx->out = NULL;
        vx->out_len = vx->out_off = vx->out_size = 0;
        vx->tx.done = true;
        return true;
}

/* BACKEND_INTERACTIVE: bytes were queued (or a close): out again as the channel takes
 * them, after the request if that is still going. */
static void vm_stdin_more(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        if (!vx->have_vm || x->done)
                return; /* once the VM is there and START went, send_pending takes them */
        if (!vx->out_armed) {
                (void)epoll_set(x->epfd, EPOLL_CTL_MOD, vx->vm.chan, EPOLLIN | EPOLLOUT, TAG_CHAN);
                vx->out_armed = true;
        }
}

/* Past its output limit: the agent stops the program, sends its files and EXIT
 * (KILL with HXP_KILL_KEEP_FILES), within REPORT_GRACE_MS. False when that cannot be
 * asked (the channel is full or gone): the VM goes now, without the files. */
static bool stop_program(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        uint8_t f[HXP_HEADER_SIZE + 4];
        if (vx->out || hxp_header(f, HXP_KILL, 4) < 0)
                return false; /* cannot happen: the program runs once all was sent */
        hxp_store_u32(f + HXP_HEADER_SIZE, HXP_KILL_KEEP_FILES);
        ssize_t w = write(vx->vm.chan, f, sizeof(f));
        if (w != (ssize_t)sizeof(f) || timerfd_arm_ms(vx->timer_fd, REPORT_GRACE_MS) < 0)
                return false;
        vx->stopping = true;
        return true;
}

/* Frames from the agent, at most one budget's worth. Returns true when the execution
 * is over. */
static bool receive(hxs_exec *x, const hxs_config *cfg)
{
        struct vm_exec *vx = x->priv;
        size_t bytes = 0;
        for (unsigned frames = 0; frames < RECEIVE_BUDGET_FRAMES && bytes < RECEIVE_BUDGET_BYTES; frames++) {
                hxp_frame f;
                int r = vm_read_frame(&vx->vm, &f);
                if (r == 0)
                        return false;
                if (r < 0) {
                        if (r == -EBADMSG)
                                set_failure(x, "the microVM's agent sent a malformed frame", "");
                        return true;
                }
                bytes += HXP_HEADER_SIZE + f.len;
                switch (f.type) {
                case HXP_READY:
                        break;
                case HXP_STDOUT:
                case HXP_STDERR:
                        if (vx->stopping)
                                break; /* what it printed past its output limit */
                        /* past MAX_STREAM_BYTES the program goes, its files come first */
                        if (exec_output(x, f.type == HXP_STDOUT ? 1 : 2, f.payload, f.len) && !stop_program(x))
                                return true;
                        break;
                case HXP_FILE_OUT:
                case HXP_FILE_DATA:
                        r = vm_files_receive(&vx->rx, &f, x->req, cfg, &x->result);
                        if (r == -ENOMEM) {
                                set_failure(x, "receiving the files: ", strerror(ENOMEM));
                                return true;
                        }
                        if (r < 0) {
                                set_failure(x, "the microVM's agent sent files out of bounds", "");
                                return true;
                        }
                        break;
                case HXP_EXIT:
                        vm_files_end(&vx->rx, &x->result);
                        if (hxp_exit_decode(f.payload, f.len, &vx->ex) < 0) {
                                set_failure(x, "the microVM's agent sent a malformed result", "");
                                return true;
                        }
                        vx->got_exit = true;
                        return true;
                case HXP_ERROR: {
                        char msg[300];
                        size_t n = f.len < sizeof(msg) - 1 ? f.len : sizeof(msg) - 1;
                        memcpy(msg, f.payload, n);
                        msg[n] = '\0';
                        for (char *p = msg; *p; p++)
                                if ((unsigned char)*p < 0x20)
                                        *p = ' ';
                        set_failure(x, "setting up the microVM: ", msg);
                        return true;
                }
                default:
                        set_failure(x, "the microVM's agent sent an unexpected frame", "");
                        return true;
                }
        }
        return false; /* budget spent: the channel is still readable, the loop comes back */
}

static int vm_process(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        struct epoll_event evs[4];
        int n = epoll_wait(x->epfd, evs, ARRAY_SIZE(evs), 0);
        bool over = false, readable = false;
        for (int i = 0; i < n; i++) {
                switch (evs[i].data.u64) {
                case TAG_TIMER:
                        x->timed_out = x->timed_out || !vx->stopping; /* else the output limit's */
                        over = true;
                        break;
                case TAG_SPAWNED:
                        if (!spawned(x))
                                over = true;
                        break;
                case TAG_PIDFD:
                        /* what it wrote before it went is read below, a budget per turn (the
                         * socket holds a bounded amount once its writer is gone), then the
                         * end of the stream ends the execution */
                        vx->hv_exited = true;
                        (void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, vx->vm.pidfd, NULL);
                        readable = true;
                        break;
                case TAG_CHAN:
                        if ((evs[i].events & EPOLLOUT) && !send_pending(x))
                                over = true;
                        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                                readable = true;
                        break;
                }
        }
        if (readable && !over)
                over = receive(x, vx->cfg);
        if (over && !x->done)
                finish(x);
        return 0;
}

static void vm_kill(hxs_exec *x)
{
        if (!x->done)
                finish(x);
}

static void vm_release(hxs_exec *x)
{
        struct vm_exec *vx = x->priv;
        vm_spawn_job_abandon(vx->job);
        if (vx->have_vm)
                vm_destroy(&vx->vm);
        if (vx->timer_fd >= 0)
                close(vx->timer_fd);
        free(vx->out);
        vx->out = NULL;
}

/* ---- engine ------------------------------------------------------------------------ */

static int vm_init(const backend_env *env, void **ret_state, hxs_error *err)
{
        struct vm_backend *b = calloc(1, sizeof(*b));
        if (!b)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        *ret_state = b;
        const hxs_config *cfg = b->cfg = env->cfg;
        int r = vm_host_init(&b->host, cfg, env->kind, err);
        b->host.cg = env->cg; /* before the spawner and the pool copy the host */
        if (r == 0)
                r = vm_spawner_new(&b->host, &b->spawner, err);
        if (r < 0)
                return r;
        return vm_pool_new(&b->host, cfg->vm_pool_size, cfg->vm_pool_memory_mb,
                           cfg->max_memory_mb + VM_OVERHEAD_MB, &b->pool, err);
}

static void vm_fini(void *state)
{
        struct vm_backend *b = state;
        if (!b)
                return;
        vm_pool_free(b->pool);
        vm_spawner_free(b->spawner);
        free(b);
}

static int vm_check(void *state, hxs_error *err)
{
        struct vm_backend *b = state;
        const vm_host *h = &b->host;
        const char *files[] = { h->hypervisor, h->kernel, h->initrd, h->rootfs };
        for (size_t i = 0; i < ARRAY_SIZE(files); i++)
                if (access(files[i], R_OK) < 0)
                        return err_fail(err, HXS_ERR_UNSUPPORTED, -errno, "%s: %s", files[i], strerror(errno));
        return 0;
}

static void vm_stats(void *state, hxs_engine_stats *st)
{
        struct vm_backend *b = state;
        st->vm_accel = b->host.kvm ? "kvm" : "tcg";
        if (b->pool)
                vm_pool_state(b->pool, &st->vm_pool_ready, &st->vm_pool_target,
                              &st->vm_booted, &st->vm_boot_failures, st->vm_last_boot_error,
                              sizeof(st->vm_last_boot_error));
}

const backend_ops qemu_backend = {
        .name = "qemu",
        .features = BACKEND_BUILT_IMAGE | BACKEND_FILES | BACKEND_INTERACTIVE,
        .exec_size = sizeof(struct vm_exec),
        .usable = vm_qemu_usable, .probe = vm_probe,
        .init = vm_init, .fini = vm_fini, .check = vm_check, .stats = vm_stats,
        .start = vm_start, .process = vm_process, .kill = vm_kill, .release = vm_release,
        .stdin_more = vm_stdin_more,
};

const backend_ops firecracker_backend = {
        .name = "firecracker",
        .features = BACKEND_BUILT_IMAGE | BACKEND_FILES | BACKEND_INTERACTIVE,
        .exec_size = sizeof(struct vm_exec),
        .usable = vm_firecracker_usable, .probe = NULL, /* qemu's lines cover it */
        .init = vm_init, .fini = vm_fini, .check = vm_check, .stats = vm_stats,
        .start = vm_start, .process = vm_process, .kill = vm_kill, .release = vm_release,
        .stdin_more = vm_stdin_more,
};
