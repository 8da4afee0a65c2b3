/* SPDX-License-Identifier: Apache-2.0 */
/* The service's event loop knows fds, one timer and callbacks: a ready fd calls its
 * watch's callback, the hooks tick after every round's events in the order they were
 * added, the nearest hook deadline wakes the loop, and loop_stop ends it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <cmocka.h>

#include "server/loop.h"

typedef struct fixture {
        loop *l;
        watch w;
        int pipe[2];
        char trace[64];         /* what ran, in order: r = ready, a/b = hooks' ticks */
        size_t n;
        loop_hook a, b;
        uint64_t a_deadline;
        int a_ticks_left;       /* then a stops the loop */
} fixture;

static void note(fixture *f, char what)
{
        if (f->n + 1 < sizeof(f->trace))
                f->trace[f->n++] = what;
}

static void pipe_ready(watch *w, uint32_t events)
{
        fixture *f = loop_owner(w, fixture, w);
        char c;
        assert_true(events & EPOLLIN);
        assert_int_equal(read(w->fd, &c, 1), 1);
        note(f, 'r');
}

static uint64_t a_deadline(void *data)
{
        return ((fixture *)data)->a_deadline;
}

static void a_tick(void *data, uint64_t now)
{
        fixture *f = data;
        note(f, 'a');
        if (f->a_deadline != UINT64_MAX && now >= f->a_deadline)
                f->a_deadline = UINT64_MAX; /* due: done */
        if (--f->a_ticks_left == 0)
                loop_stop(f->l);
}

static void b_tick(void *data, uint64_t now)
{
        note(data, 'b');
}

static fixture *setup(int ticks)
{
        fixture *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        assert_int_equal(loop_new(&f->l), 0);
        assert_int_equal(pipe(f->pipe), 0);
        f->w.fd = -1;
        f->a_deadline = UINT64_MAX;
        f->a_ticks_left = ticks;
        f->a = (loop_hook){ .next_deadline = a_deadline, .tick = a_tick, .data = f };
        f->b = (loop_hook){ .tick = b_tick, .data = f };
        loop_hook_add(f->l, &f->a);
        loop_hook_add(f->l, &f->b);
        return f;
}

static void teardown(fixture *f)
{
        loop_del(f->l, &f->w);
        loop_del(f->l, &f->w); /* twice is harmless */
        loop_free(f->l);
        close(f->pipe[0]);
        close(f->pipe[1]);
        free(f);
}

static void test_ready_then_hooks_in_order(void **state)
{
        fixture *f = setup(1);

        assert_int_equal(loop_add(f->l, &f->w, f->pipe[0], EPOLLIN, pipe_ready), 0);
        assert_int_equal(f->w.fd, f->pipe[0]);
        assert_int_equal(write(f->pipe[1], "x", 1), 1);
        assert_int_equal(loop_run(f->l), 0);
        assert_string_equal(f->trace, "rab");
        teardown(f);
}

static void test_deadline_wakes_the_loop(void **state)
{
        fixture *f = setup(1);
        uint64_t start = now_ms();

        /* nothing to read: only the timer can end the first round's wait */
        assert_int_equal(loop_add(f->l, &f->w, f->pipe[0], EPOLLIN, pipe_ready), 0);
        f->a_deadline = start + 30;
        assert_int_equal(loop_run(f->l), 0);
        assert_true(now_ms() >= start + 30);
        assert_true(f->a_deadline == UINT64_MAX);
        assert_null(strchr(f->trace, 'r'));
        assert_string_equal(f->trace, "ab");
        teardown(f);
}

static void test_deleted_watch_is_quiet(void **state)
{
        fixture *f = setup(1);

        assert_int_equal(loop_add(f->l, &f->w, f->pipe[0], EPOLLIN, pipe_ready), 0);
        loop_del(f->l, &f->w);
        assert_int_equal(f->w.fd, -1);
        assert_int_equal(write(f->pipe[1], "x", 1), 1);
        f->a_deadline = now_ms(); /* one round, due at once */
        assert_int_equal(loop_run(f->l), 0);
        assert_string_equal(f->trace, "ab");
        teardown(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ready_then_hooks_in_order),
                cmocka_unit_test(test_deadline_wakes_the_loop),
                cmocka_unit_test(test_deleted_watch_is_quiet),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
