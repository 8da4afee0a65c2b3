/* SPDX-License-Identifier: Apache-2.0 */
/* The blocking calls over the event-driven session (a CLI, MCP over stdio): each
 * drives hxs_session_process on the session's fd until its answer is in. */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "core/error.h"
#include "session/session.h"

/* One turn: wait for the fd (at most a second: the timers are in it anyway). */
static void turn(hxs_session *s)
{
        struct pollfd p = { .fd = hxs_session_fd(s), .events = POLLIN };
        (void)poll(&p, 1, 1000);
        hxs_session_process(s);
}

static int ended(hxs_session *s, hxs_error *err)
{
        return err_fail(err, HXS_ERR_SETUP, -ESHUTDOWN, "the session has ended: %s", s->end_message);
}

int hxs_session_wait_ready(hxs_session *s, hxs_error *err)
{
        while (!s->ready && !s->end)
                turn(s);
        return s->end ? ended(s, err) : 0;
}

typedef struct cell_wait {
        bool done;
        hxs_cell_result *ret;
        hxs_output_fn output;
        void *userdata;
} cell_wait;

static void cell_output(void *userdata, int stream, const void *data, size_t len)
{
        cell_wait *w = userdata;
        w->output(w->userdata, stream, data, len);
}

static void cell_done(void *userdata, hxs_cell_result *res)
{
        cell_wait *w = userdata;
        *w->ret = *res;
        w->done = true;
}

int hxs_session_run(hxs_session *s, const hxs_request *cell, hxs_output_fn output, void *userdata,
                    hxs_cell_result *ret, hxs_error *err)
{
        cell_wait w = { .ret = ret, .output = output, .userdata = userdata };
        hxs_cell_callbacks cb = { .output = output ? cell_output : NULL, .done = cell_done, .userdata = &w };
        memset(ret, 0, sizeof(*ret));
        int r = hxs_session_exec(s, cell, &cb, NULL, err);
        if (r < 0)
                return r;
        while (!w.done)
                turn(s);
        return 0;
}

typedef struct file_wait {
        bool done;
        hxs_session_file_result *ret;
} file_wait;

static void file_done(void *userdata, hxs_session_file_result *res)
{
        file_wait *w = userdata;
        *w->ret = *res;
        w->done = true;
}

static int file_wait_for(hxs_session *s, file_wait *w, hxs_error *err)
{
        while (!w->done)
                turn(s);
        if (w->ret->status < 0)
                return err_fail(err, w->ret->status == -ESHUTDOWN ? HXS_ERR_SETUP : HXS_ERR_NOT_FOUND,
                                w->ret->status, "%s", w->ret->error_message);
        return 0;
}

int hxs_session_put_file_sync(hxs_session *s, const char *path, const void *data, size_t len,
                              hxs_session_file_result *ret, hxs_error *err)
{
        file_wait w = { .ret = ret };
        memset(ret, 0, sizeof(*ret));
        int r = hxs_session_put_file(s, path, data, len, file_done, &w, NULL, err);
        return r < 0 ? r : file_wait_for(s, &w, err);
}

int hxs_session_get_file_sync(hxs_session *s, const char *path, hxs_session_file_result *ret, hxs_error *err)
{
        file_wait w = { .ret = ret };
        memset(ret, 0, sizeof(*ret));
        int r = hxs_session_get_file(s, path, file_done, &w, NULL, err);
        return r < 0 ? r : file_wait_for(s, &w, err);
}

int hxs_session_list_files_sync(hxs_session *s, const char *path, hxs_session_file_result *ret, hxs_error *err)
{
        file_wait w = { .ret = ret };
        memset(ret, 0, sizeof(*ret));
        int r = hxs_session_list_files(s, path, file_done, &w, NULL, err);
        return r < 0 ? r : file_wait_for(s, &w, err);
}
