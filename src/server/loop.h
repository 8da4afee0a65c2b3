/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's one event loop (loop.c): file descriptors, one timer and callbacks,
 * nothing else. Each module registers its own fds (a watch with a ready callback) and
 * its own deadlines (a hook); the loop does not know what any of them is.
 *
 * One round: arm the timer for the nearest deadline of every hook, wait, call the
 * ready callback of each fd that has events, then each hook's tick in the order the
 * hooks were added. A callback must not free a watch another event of the same round
 * may still name: the service frees its requests in a tick (MHD_run), after the events.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct loop loop;
typedef struct watch watch;

/* events: the epoll events the fd reported. */
typedef void (*watch_ready_fn)(watch *w, uint32_t events);

struct watch {
        int fd;                 /* -1 when not registered */
        watch_ready_fn ready;
};

/* The struct a watch (or hook) is a member of. */
#define loop_owner(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* A module's deadlines. next_deadline: the nearest one (monotonic ms), UINT64_MAX for
 * none; tick: what is due at now. Either may be NULL. */
typedef struct loop_hook {
        uint64_t (*next_deadline)(void *data);
        void (*tick)(void *data, uint64_t now);
        void *data;
        struct loop_hook *next; /* the loop's list */
} loop_hook;

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t now_ms(void);

int loop_new(loop **ret);
void loop_free(loop *l);        /* NULL is fine; watches are the owners' to delete */
/* Watches fd for events; ready is called with w. */
int loop_add(loop *l, watch *w, int fd, uint32_t events, watch_ready_fn ready);
void loop_del(loop *l, watch *w); /* not registered is fine */
/* Hooks run in the order they were added, after every round's events. */
void loop_hook_add(loop *l, loop_hook *h);
/* loop_run returns after the current round. */
void loop_stop(loop *l);
/* 0 after loop_stop, or the negative errno of a failed epoll_wait. */
int loop_run(loop *l);
