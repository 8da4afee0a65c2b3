/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's one event loop: one epoll set of watched fds, one timerfd armed for
 * the nearest deadline of the registered hooks, and the rounds described in loop.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/macro.h"
#include "server/loop.h"

struct loop {
        int epfd;
        int timerfd;
        watch timer;
        loop_hook *hooks, **hooks_tail;
        bool stop;
};

uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The timer only wakes the loop: the hooks' ticks run every round anyway. */
static void timer_ready(watch *w, uint32_t events)
{
        uint64_t expirations;
        (void)events;
        if (read(w->fd, &expirations, sizeof(expirations)) < 0)
                return; /* EAGAIN: nothing to clear */
}

void loop_free(loop *l)
{
        if (!l)
                return;
        if (l->timerfd >= 0)
                close(l->timerfd);
        if (l->epfd >= 0)
                close(l->epfd);
        free(l);
}

int loop_new(loop **ret)
{
        loop *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->hooks_tail = &l->hooks;
        l->timer.fd = -1;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        l->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        int r = l->epfd < 0 || l->timerfd < 0 ? negative_errno() : 0;
        if (r == 0)
                r = loop_add(l, &l->timer, l->timerfd, EPOLLIN, timer_ready);
        if (r < 0) {
                loop_free(l);
                return r;
        }
        *ret = l;
        return 0;
}

int loop_add(loop *l, watch *w, int fd, uint32_t events, watch_ready_fn ready)
{
        struct epoll_event ev = { .events = events, .data.ptr = w };
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
                return negative_errno();
        w->fd = fd;
        w->ready = ready;
        return 0;
}

void loop_del(loop *l, watch *w)
{
        if (w->fd < 0)
                return;
        /* The fd may already be gone (closed by its owner); epoll then forgot it too. */
        (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
        w->fd = -1;
}

void loop_hook_add(loop *l, loop_hook *h)
{
        h->next = NULL;
        *l->hooks_tail = h;
        l->hooks_tail = &h->next;
}

void loop_stop(loop *l)
{
        l->stop = true;
}

/* One relative timer for the nearest deadline of every hook. */
static void arm_timer(loop *l)
{
        uint64_t now = now_ms(), deadline = UINT64_MAX;

        for (loop_hook *h = l->hooks; h; h = h->next) {
                uint64_t d = h->next_deadline ? h->next_deadline(h->data) : UINT64_MAX;
                if (d < deadline)
                        deadline = d;
        }
        struct itimerspec its = { 0 };
        if (deadline != UINT64_MAX) {
                uint64_t rel = deadline > now ? deadline - now : 0;
                its.it_value.tv_sec = (time_t)(rel / 1000);
                its.it_value.tv_nsec = (long)(rel % 1000) * 1000000;
                if (rel == 0)
                        its.it_value.tv_nsec = 1; /* 0 would disarm: fire now instead */
        }
        (void)timerfd_settime(l->timerfd, 0, &its, NULL);
}

int loop_run(loop *l)
{
        struct epoll_event events[64];

        while (!l->stop) {
                arm_timer(l);
                int n = epoll_wait(l->epfd, events, (int)ARRAY_SIZE(events), -1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                for (int i = 0; i < n; i++) {
                        watch *w = events[i].data.ptr;
                        if (w->ready)
                                w->ready(w, events[i].events);
                }
                for (loop_hook *h = l->hooks; h; h = h->next)
                        if (h->tick)
                                h->tick(h->data, now_ms());
        }
        return 0;
}
