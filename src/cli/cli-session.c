/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hexr-sandbox session [-l LANG] [-m MB] [-p PACKAGE]... [-e NAME=VALUE]... [-t SECONDS]
 *                      [--file LOCAL[:PATH]]... [--backend B] [--json]
 *
 * A local session with the library (docs/sessions.md): one sandbox that keeps its state
 * while cells run in it, read from stdin. A cell ends at a line that is only `%%`, and
 * at the end of the input; on a terminal an empty line ends it too. Each cell's stdout
 * and stderr are printed as they come, then its value (text/plain), its display
 * outputs (their text/plain, or the types they carry) and its exception's traceback
 * (on stderr); --json prints each cell's result object (the API's) instead.
 *
 * Exit status: 0 when every cell ran without an exception, 1 when one raised or was
 * interrupted, 125 when the session could not start or ended before the input did.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/macro.h"
#include "hexr-sandbox/sandbox.h"

static void usage(FILE *f)
{
        fprintf(f,
                "usage: hexr-sandbox session [OPTIONS] < CELLS\n\n"
                "Runs cells, read from stdin, in one sandbox that keeps its state between them.\n"
                "A cell ends at a line that is only %%%% (and at the end of the input); on a\n"
                "terminal an empty line ends it too.\n\n"
                "  -l, --language LANG    python (default), javascript|js|node, bash|shell|sh\n"
                "  -m, --memory MB        memory limit of the whole session (default DEFAULT_MEMORY_MB)\n"
                "  -p, --package REQ      a Python package the session installs first (repeatable)\n"
                "  -e, --env NAME=VALUE   environment variable (repeatable)\n"
                "  -t, --timeout SECONDS  each cell's time limit: interrupted at it (default DEFAULT_TIMEOUT)\n"
                "      --file LOCAL[:PATH] send a file into the working directory first (repeatable)\n"
                "      --backend B        auto, namespaces, qemu, firecracker (as SANDBOX_BACKEND)\n"
                "      --json             print each cell's result object (the API's), one per line\n\n"
                "Exit status: 0 when no cell raised; 1 when one raised or was interrupted; %d when\n"
                "the session could not start or ended before the input did.\n",
                HXS_CLI_EXIT_FAILURE);
}

typedef struct opts {
        hxs_request *req;
        uint32_t timeout_s;
        const char *backend;
        bool json;
} opts;

static int fail(const char *fmt, ...) _printf_(1, 2);
static int fail(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "hexr-sandbox session: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return HXS_CLI_EXIT_FAILURE;
}

/* 0, or the exit status of a usage error (2) or --help (0, with *done). */
static int parse(int argc, char **argv, opts *o, bool *done)
{
        static const struct option longopts[] = {
                { "language", required_argument, NULL, 'l' }, { "memory", required_argument, NULL, 'm' },
                { "package", required_argument, NULL, 'p' },  { "env", required_argument, NULL, 'e' },
                { "timeout", required_argument, NULL, 't' },  { "file", required_argument, NULL, 'F' },
                { "backend", required_argument, NULL, 'B' },  { "json", no_argument, NULL, 'J' },
                { "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 },
        };
        char why[300];
        int c;
        uint32_t mb;
        hxs_language lang;
        while ((c = getopt_long(argc, argv, "+l:m:p:e:t:h", longopts, NULL)) != -1) {
                switch (c) {
                case 'l':
                        if (hxs_language_parse(optarg, &lang) < 0 || hxs_request_set_language(o->req, lang) < 0)
                                return fail("unknown language \"%s\"", optarg), 2;
                        break;
                case 'm':
                        if (cli_parse_u32(optarg, &mb) < 0)
                                return fail("--memory: \"%s\" is not a number of MB", optarg), 2;
                        hxs_request_set_memory_mb(o->req, mb);
                        break;
                case 'p':
                        if (hxs_request_add_package(o->req, optarg) < 0)
                                return fail("%s", "out of memory"), 2;
                        break;
                case 'e': {
                        char *eq = strchr(optarg, '=');
                        if (!eq)
                                return fail("--env: \"%s\" is not NAME=VALUE", optarg), 2;
                        *eq = '\0';
                        if (hxs_request_add_env(o->req, optarg, eq + 1) < 0)
                                return fail("%s", "out of memory"), 2;
                        break;
                }
                case 't':
                        if (cli_parse_u32(optarg, &o->timeout_s) < 0 || o->timeout_s == 0)
                                return fail("--timeout: \"%s\" is not a number of seconds", optarg), 2;
                        break;
                case 'F':
                        if (cli_add_file(o->req, optarg, why, sizeof(why)) < 0)
                                return fail("%s", why), 2;
                        break;
                case 'B':
                        o->backend = optarg;
                        break;
                case 'J':
                        o->json = true;
                        break;
                case 'h':
                        usage(stdout);
                        *done = true;
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                usage(stderr);
                return 2;
        }
        return 0;
}

/* ---- printing a cell ---------------------------------------------------------------- */

static void on_output(void *userdata, int stream, const void *data, size_t len)
{
        (void)userdata;
        fwrite(data, 1, len, stream == 1 ? stdout : stderr);
        fflush(stream == 1 ? stdout : stderr);
}

/* A bundle as a line: its text/plain, else the types it has. */
static void print_bundle(FILE *f, json_t *bundle, const char *prefix)
{
        json_t *plain = json_object_get(bundle, "text/plain");
        if (json_is_string(plain)) {
                fprintf(f, "%s%s\n", prefix, json_string_value(plain));
                return;
        }
        const char *key;
        json_t *v;
        fprintf(f, "%s[", prefix);
        bool first = true;
        json_object_foreach(bundle, key, v) {
                fprintf(f, "%s%s", first ? "" : ", ", key);
                first = false;
        }
        fprintf(f, "]\n");
}

static void print_cell(const hxs_cell_result *r)
{
        json_t *outputs = r->outputs_json ? json_loads(r->outputs_json, 0, NULL) : NULL;
        size_t i;
        json_t *o;
        json_array_foreach(outputs, i, o)
                print_bundle(stdout, json_object_get(o, "data"), "");
        json_decref(outputs);
        json_t *value = r->value_json ? json_loads(r->value_json, 0, NULL) : NULL;
        if (value)
                print_bundle(stdout, value, "");
        json_decref(value);
        json_t *exc = r->exception_json ? json_loads(r->exception_json, 0, NULL) : NULL;
        const char *tb = json_string_value(json_object_get(exc, "traceback"));
        if (tb && tb[0])
                fputs(tb, stderr);
        else if (exc)
                fprintf(stderr, "%s: %s\n", json_string_value(json_object_get(exc, "type")) ?: "Error",
                        json_string_value(json_object_get(exc, "message")) ?: "");
        json_decref(exc);
        if (r->error_type[0])
                fprintf(stderr, "hexr-sandbox: %s\n", r->error_message);
        fflush(stdout);
        fflush(stderr);
}

/* ---- the loop -------------------------------------------------------------------- */

typedef struct cell_buf {
        char *data;
        size_t len, cap;
} cell_buf;

static int cell_append(cell_buf *b, const char *p, size_t n)
{
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 4096;
                while (cap < b->len + n + 1)
                        cap *= 2;
                char *d = realloc(b->data, cap);
                if (!d)
                        return -ENOMEM;
                b->data = d;
                b->cap = cap;
        }
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

/* Runs the cell; 0 ok, 1 it raised or was interrupted, 125 the session is gone. */
static int run_cell(hxs_session *s, const opts *o, const char *code, size_t len)
{
        hxs_request *cell = hxs_request_new();
        hxs_cell_result r;
        hxs_error err = { 0 };
        if (!cell || hxs_request_set_code(cell, code, len) < 0) {
                hxs_request_free(cell);
                return fail("%s", "out of memory");
        }
        hxs_request_set_timeout_s(cell, o->timeout_s);
        int ret = hxs_session_run(s, cell, o->json ? NULL : on_output, NULL, &r, &err);
        hxs_request_free(cell);
        if (ret < 0)
                return fail("%s", err.message);
        if (o->json) {
                size_t n;
                char *text = hxs_cell_result_to_text(&r, s, NULL, &n);
                if (text)
                        printf("%s\n", text);
                free(text);
                fflush(stdout);
        } else {
                print_cell(&r);
        }
        int status = r.status == HXS_CELL_OK ? 0 : r.status == HXS_CELL_SESSION_ENDED ? HXS_CLI_EXIT_FAILURE : 1;
        hxs_cell_result_clear(&r);
        return status;
}

/* Reads cells from stdin and runs each; the worst status. */
static int loop(hxs_session *s, const opts *o)
{
        bool tty = isatty(STDIN_FILENO);
        cell_buf cell = { 0 };
        char *line = NULL;
        size_t cap = 0;
        int worst = 0, n = 1;
        bool more = true;
        while (more && worst != HXS_CLI_EXIT_FAILURE) {
                if (tty)
                        fprintf(stderr, cell.len ? "...   " : "[%d]: ", n);
                ssize_t got = getline(&line, &cap, stdin);
                more = got >= 0;
                bool mark = more && (strcmp(line, "%%\n") == 0 || strcmp(line, "%%") == 0);
                bool blank = more && tty && (strcmp(line, "\n") == 0);
                if (more && !mark && !blank && cell_append(&cell, line, (size_t)got) < 0) {
                        worst = fail("%s", "out of memory");
                        break;
                }
                if ((mark || blank || !more) && cell.len > 0) {
                        int r = run_cell(s, o, cell.data, cell.len);
                        worst = r > worst ? r : worst;
                        cell.len = 0;
                        n++;
                }
        }
        free(line);
        free(cell.data);
        return worst;
}

static void request_freep(hxs_request **p) { hxs_request_free(*p); }

int cli_session(int argc, char **argv)
{
        _cleanup_(request_freep) hxs_request *req = hxs_request_new();
        if (!req)
                return fail("%s", "out of memory");
        opts o = { .req = req };
        bool done = false;
        int r = parse(argc, argv, &o, &done);
        if (r != 0 || done)
                return r;
        hxs_config cfg;
        hxs_error err = { 0 };
        if (hxs_config_from_env(&cfg, &err) < 0 ||
            (o.backend && hxs_config_set(&cfg, "SANDBOX_BACKEND", o.backend, &err) < 0))
                return fail("%s", err.message);
        /* one session: a warm template or a pool would cost more than it saves */
        cfg.warm = false;
        cfg.vm_pool_size = 0;
        /* the driver's pipe must not kill us when it goes: its end is reported */
        signal(SIGPIPE, SIG_IGN);
        hxs_engine *engine;
        if (hxs_engine_new(&cfg, &engine, &err) < 0)
                return fail("%s", err.message);
        hxs_session *s;
        r = hxs_session_start(engine, req, NULL, &s, &err);
        if (r == 0 && (r = hxs_session_wait_ready(s, &err)) < 0)
                hxs_session_free(s);
        if (r < 0) {
                hxs_engine_free(engine);
                return fail("%s", err.message);
        }
        int status = loop(s, &o);
        hxs_session_free(s);
        hxs_engine_free(engine);
        return status;
}
