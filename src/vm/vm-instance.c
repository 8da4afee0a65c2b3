/* SPDX-License-Identifier: Apache-2.0 */
/* One microVM's life on the host side, whatever the hypervisor: the driver starts it
 * (vm_qemu_spawn, vm_firecracker_spawn), then HELLO, READY, frames and destruction. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "vm/vm.h"

static int write_all(int fd, const uint8_t *p, size_t n, int timeout_ms)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EAGAIN) {
                        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                        int r = poll(&pfd, 1, timeout_ms);
                        if (r == 0)
                                return -ETIMEDOUT;
                        if (r < 0 && errno != EINTR)
                                return -errno;
                        continue;
                }
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* A hypervisor that has closed its channel is given this long to exit. */
#define EXIT_WAIT_MS 2000

/* The VM is gone before READY: what the hypervisor said on its way out. */
static int stopped_early(vm_instance *v, int r, hxs_error *err)
{
        char said[300] = "";
        vm_stderr_text(v, said, sizeof(said));
        return err_fail(err, HXS_ERR_SETUP, r, "the microVM stopped before its agent was ready: %s", said);
}

int vm_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *v, hxs_error *err)
{
        memset(v, 0, sizeof(*v));
        v->pid = -1;
        v->pidfd = v->chan = v->err_fd = -1;
        v->ram_mb = ram_mb;
        v->rbuf = malloc(HXP_FRAME_MAX);
        if (!v->rbuf)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        if (getrandom(&v->nonce, sizeof(v->nonce), 0) != sizeof(v->nonce))
                v->nonce = (uint32_t)time(NULL) ^ (uint32_t)getpid();
        clock_gettime(CLOCK_MONOTONIC, &v->spawned);
        int r = h->kind == HXS_BACKEND_FIRECRACKER ? vm_firecracker_spawn(h, ram_mb, v, err)
                                                   : vm_qemu_spawn(h, ram_mb, v, err);
        if (r < 0) {
                vm_destroy(v);
                return r;
        }
        /* HELLO waits in the stream until the agent has booted and opens its port */
        uint8_t hello[HXP_HEADER_SIZE + 4];
        hxp_header(hello, HXP_HELLO, 4);
        hxp_store_u32(hello + HXP_HEADER_SIZE, v->nonce);
        r = write_all(v->chan, hello, sizeof(hello), 5000);
        if (r == -EPIPE || r == -ECONNRESET) {
                /* the hypervisor has gone already (a kernel that crashed at boot): the
                 * reason is what it said on its way out, all of it in its stderr once it
                 * has exited, not the channel it closed */
                struct pollfd p = { .fd = v->pidfd, .events = POLLIN };
                if (v->pidfd >= 0)
                        (void)poll(&p, 1, EXIT_WAIT_MS);
                r = stopped_early(v, r, err);
                vm_destroy(v);
                return r;
        }
        if (r < 0) {
                vm_destroy(v);
                return err_fail(err, HXS_ERR_SETUP, r, "starting the microVM: sending HELLO: %s",
                                strerror(-r));
        }
        return 0;
}

void vm_destroy(vm_instance *v)
{
        if (v->pidfd >= 0) {
                (void)pidfd_send_signal(v->pidfd, SIGKILL, NULL, 0);
                siginfo_t si;
                while (waitid(P_PIDFD, (id_t)v->pidfd, &si, WEXITED) < 0 && errno == EINTR)
                        ;
                close(v->pidfd);
                v->pidfd = -1;
        }
        if (v->chan >= 0)
                close(v->chan);
        if (v->err_fd >= 0)
                close(v->err_fd);
        v->chan = v->err_fd = -1;
        vm_cgroup_destroy(v);
        if (v->jail[0])
                vm_firecracker_cleanup(v);
        free(v->rbuf);
        v->rbuf = NULL;
        v->rlen = v->roff = 0;
        v->pid = -1;
}

/* The buffer holds rbuf[roff..rlen): frames are parsed where they lie and roff moves
 * past them, so a frame costs its own size. Only the incomplete rest is moved to the
 * front, just before a read: every byte is moved at most once. */
int vm_read_frame(vm_instance *v, hxp_frame *ret)
{
        bool have_read = false;
        for (;;) {
                long n = hxp_parse(v->rbuf + v->roff, v->rlen - v->roff, ret);
                if (n < 0)
                        return -EBADMSG;
                if (n > 0) {
                        v->roff += (size_t)n;
                        return 1;
                }
                if (have_read)
                        return 0; /* one read per call: the caller decides whether to go on */
                if (v->roff == v->rlen) {
                        v->roff = v->rlen = 0;
                } else if (v->roff > 0) {
                        memmove(v->rbuf, v->rbuf + v->roff, v->rlen - v->roff);
                        v->rlen -= v->roff;
                        v->roff = 0;
                }
                if (v->rlen == HXP_FRAME_MAX)
                        return -EBADMSG; /* cannot happen: a valid header fits its frame */
                ssize_t got = read(v->chan, v->rbuf + v->rlen, HXP_FRAME_MAX - v->rlen);
                if (got == 0)
                        return -EPIPE;
                if (got < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return errno == ECONNRESET ? -EPIPE : -errno;
                }
                v->rlen += (size_t)got;
                have_read = true;
        }
}

int vm_wait_ready(vm_instance *v, int timeout_ms, hxs_error *err)
{
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                hxp_frame f;
                int r = vm_read_frame(v, &f);
                if (r > 0) {
                        if (f.type == HXP_READY && f.len >= 4 && hxp_load_u32(f.payload) == v->nonce)
                                return 0;
                        if (f.type == HXP_ERROR)
                                return err_fail(err, HXS_ERR_SETUP, -EPROTO, "the guest agent: %.*s",
                                                (int)(f.len > 300 ? 300 : f.len), (const char *)f.payload);
                        /* a stale frame: skipped, but a stream of them does not stop the clock */
                }
                if (r == -EPIPE)
                        return stopped_early(v, r, err);
                if (r == -EBADMSG)
                        return err_fail(err, HXS_ERR_SETUP, r, "the guest agent sent a malformed frame");
                if (r < 0)
                        return err_fail(err, HXS_ERR_SETUP, r, "the microVM stopped before its agent was ready: %s",
                                        strerror(-r));
                clock_gettime(CLOCK_MONOTONIC, &now);
                long left = timeout_ms - ((now.tv_sec - start.tv_sec) * 1000 +
                                          (now.tv_nsec - start.tv_nsec) / 1000000);
                if (left <= 0)
                        return err_fail(err, HXS_ERR_SETUP, -ETIMEDOUT, "the microVM's agent was not ready after %d ms",
                                        timeout_ms);
                if (r > 0)
                        continue;
                struct pollfd pfd[2] = { { .fd = v->chan, .events = POLLIN },
                                         { .fd = v->pidfd, .events = POLLIN } };
                if (poll(pfd, 2, (int)left) < 0 && errno != EINTR) {
                        int e = errno;
                        return err_fail(err, HXS_ERR_SETUP, -e, "waiting for the microVM's agent: %s", strerror(e));
                }
                if ((pfd[1].revents & POLLIN) && !(pfd[0].revents & POLLIN))
                        return stopped_early(v, -EPIPE, err);
        }
}
