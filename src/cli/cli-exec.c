/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hexr-sandbox exec [-l LANG] [-t SECONDS] [-m MB] [-e NAME=VALUE]... [--backend B]
 *                   [--stdin FILE] [--file LOCAL[:PATH]]... [--return GLOB]... [--out DIR]
 *                   [--json] (-c CODE | FILE | -)
 *
 * Prints the sandbox's stdout and stderr to its own and exits with the sandbox's exit
 * code; --json prints the result object the API returns instead. Reads every setting of
 * the configuration table from the environment, like the service.
 */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/macro.h"
#include "hexr-sandbox/sandbox.h"

static void request_freep(hxs_request **p) { hxs_request_free(*p); }

static void usage(FILE *f)
{
        fprintf(f,
                "usage: hexr-sandbox exec [OPTIONS] (-c CODE | FILE | -)\n\n"
                "  -l, --language LANG    python (default), javascript|js|node, bash|shell|sh\n"
                "  -t, --timeout SECONDS  time limit (default DEFAULT_TIMEOUT, at most MAX_EXECUTION_TIME)\n"
                "  -m, --memory MB        memory limit (default DEFAULT_MEMORY_MB, at most MAX_MEMORY_MB)\n"
                "  -e, --env NAME=VALUE   environment variable for the code (repeatable)\n"
                "  -c, --code CODE        the code itself\n"
                "      --stdin FILE       feed FILE to the program's stdin (- for ours)\n"
                "      --backend B        auto, namespaces, qemu, firecracker (as SANDBOX_BACKEND)\n"
                "      --file LOCAL[:PATH] send a file into the working directory, at PATH (default:\n"
                "                         its name; repeatable)\n"
                "      --return GLOB      also return the files matching GLOB (besides output/; repeatable)\n"
                "      --out DIR          write the returned files under DIR\n"
                "      --json             print the API's result object\n\n"
                "Exit status: the program's own; 124 time limit; 137 memory limit; 128+N signal N;\n"
                "%d when the sandbox could not run.\n",
                HXS_CLI_EXIT_FAILURE);
}

/* Reads a whole file (or stdin for "-") up to max bytes. */
static int read_all(const char *path, size_t max, char **ret, size_t *ret_len)
{
        int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = 0, cap = 65536;
        char *buf = malloc(cap);
        int r = 0;
        if (!buf) {
                r = -ENOMEM;
                goto out;
        }
        for (;;) {
                if (len == cap) {
                        if (cap > max) {
                                r = -E2BIG;
                                goto out;
                        }
                        char *nb = realloc(buf, cap * 2);
                        if (!nb) {
                                r = -ENOMEM;
                                goto out;
                        }
                        buf = nb;
                        cap *= 2;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        goto out;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > max) {
                        r = -E2BIG;
                        goto out;
                }
        }
        *ret = TAKE_PTR(buf);
        *ret_len = len;
out:
        free(buf);
        if (fd != STDIN_FILENO)
                close(fd);
        return r;
}

static void write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                p += w;
                n -= (size_t)w;
        }
}

/* Plain mode: the program's bytes go to ours as they are read (up to MAX_STREAM_BYTES),
 * then, for a killed program, the engine's line saying why. */
static void print_output(void *userdata, int stream, const void *data, size_t len)
{
        (void)userdata;
        write_all(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, data, len);
}

static int run_streaming(hxs_engine *engine, const hxs_request *req, hxs_result *res, hxs_error *err)
{
        hxs_exec *x;
        int r = hxs_exec_start(engine, req, &x, err);
        if (r < 0)
                return r;
        hxs_exec_set_output(x, print_output, NULL);
        while (!hxs_exec_done(x)) {
                struct pollfd p = { .fd = hxs_exec_fd(x), .events = POLLIN };
                if (poll(&p, 1, -1) < 0 && errno != EINTR) {
                        r = -errno;
                        err->kind = HXS_ERR_INTERNAL;
                        err->errnum = -r;
                        snprintf(err->message, sizeof(err->message), "poll: %s", strerror(-r));
                        hxs_exec_free(x);
                        return r;
                }
                hxs_exec_process(x);
        }
        r = hxs_exec_take_result(x, res, err);
        hxs_exec_free(x);
        return r;
}

_printf_(1, 2) static int fail(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "hexr-sandbox exec: ");
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return HXS_CLI_EXIT_FAILURE;
}

int cli_exec(int argc, char **argv)
{
        static const struct option opts[] = {
                { "language", required_argument, NULL, 'l' }, { "timeout", required_argument, NULL, 't' },
                { "memory", required_argument, NULL, 'm' },   { "env", required_argument, NULL, 'e' },
                { "code", required_argument, NULL, 'c' },     { "backend", required_argument, NULL, 'B' },
                { "stdin", required_argument, NULL, 'S' },    { "json", no_argument, NULL, 'J' },
                { "file", required_argument, NULL, 'F' },     { "return", required_argument, NULL, 'R' },
                { "out", required_argument, NULL, 'O' },
                { "help", no_argument, NULL, 'h' },           { 0 },
        };
        hxs_config cfg;
        hxs_error err = { 0 };
        if (hxs_config_from_env(&cfg, &err) < 0)
                return fail("%s", err.message);

        _cleanup_(request_freep) hxs_request *req = hxs_request_new();
        const char *code_arg = NULL, *stdin_path = NULL, *out_dir = NULL;
        char why[600];
        bool json = false;
        int c, r;
        if (!req)
                return fail("%s", "out of memory");
        optind = 1;
        while ((c = getopt_long(argc, argv, "+l:t:m:e:c:h", opts, NULL)) != -1) {
                switch (c) {
                case 'l': {
                        hxs_language lang;
                        if (hxs_language_parse(optarg, &lang) < 0)
                                return fail("language: \"%s\" is not python, javascript (js, node) or bash (shell, sh)", optarg);
                        hxs_request_set_language(req, lang);
                        break;
                }
                case 't': {
                        uint32_t v;
                        if (cli_parse_u32(optarg, &v) < 0 || v == 0)
                                return fail("timeout: \"%s\" is not a positive whole number of seconds", optarg);
                        hxs_request_set_timeout_s(req, v);
                        break;
                }
                case 'm': {
                        uint32_t v;
                        if (cli_parse_u32(optarg, &v) < 0 || v == 0)
                                return fail("memory_mb: \"%s\" is not a positive whole number of MB", optarg);
                        hxs_request_set_memory_mb(req, v);
                        break;
                }
                case 'F':
                        if (cli_add_file(req, optarg, why, sizeof(why)) < 0)
                                return fail("%s", why);
                        break;
                case 'R':
                        if (hxs_request_add_return_glob(req, optarg) < 0)
                                return fail("%s", "out of memory");
                        break;
                case 'O':
                        out_dir = optarg;
                        break;
                case 'e': {
                        char *eq = strchr(optarg, '=');
                        if (!eq)
                                return fail("env_vars: \"%s\" is not NAME=VALUE", optarg);
                        *eq = '\0';
                        if (hxs_request_add_env(req, optarg, eq + 1) < 0)
                                return fail("%s", "out of memory");
                        break;
                }
                case 'c':
                        code_arg = optarg;
                        break;
                case 'B':
                        if (hxs_config_set(&cfg, "SANDBOX_BACKEND", optarg, &err) < 0)
                                return fail("%s", err.message);
                        break;
                case 'S':
                        stdin_path = optarg;
                        break;
                case 'J':
                        json = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return HXS_CLI_EXIT_FAILURE;
                }
        }

        if (code_arg && optind < argc)
                return fail("%s", "give the code with -c or as FILE, not both");
        if (!code_arg && optind != argc - 1) {
                usage(stderr);
                return HXS_CLI_EXIT_FAILURE;
        }
        if (code_arg) {
                r = hxs_request_set_code(req, code_arg, strlen(code_arg));
        } else {
                _cleanup_free_ char *code = NULL;
                size_t len = 0;
                r = read_all(argv[optind], (size_t)cfg.max_code_bytes, &code, &len);
                if (r == -E2BIG) {
                        fprintf(stderr, "hexr-sandbox exec: code: larger than the maximum %u bytes\n", cfg.max_code_bytes);
                        return HXS_CLI_EXIT_FAILURE;
                }
                if (r < 0)
                        return fail("cannot read %s", argv[optind]);
                r = hxs_request_set_code(req, code, len);
        }
        if (r < 0)
                return fail("%s", "out of memory");
        if (stdin_path) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                if (read_all(stdin_path, (size_t)cfg.max_stdin_bytes, &data, &len) < 0)
                        return fail("cannot read stdin from %s (or it is larger than MAX_STDIN_BYTES)", stdin_path);
                if (hxs_request_set_stdin(req, data, len) < 0)
                        return fail("%s", "out of memory");
        }
        /* one execution: a warm template would cost more than it saves */
        cfg.warm = false;
        cfg.vm_pool_size = 0;
        /* check the request before creating anything, for a clear message */
        if (hxs_request_validate(req, &cfg, &err) < 0)
                return fail("%s", err.message);

        hxs_engine *engine;
        if (hxs_engine_new(&cfg, &engine, &err) < 0)
                return fail("%s", err.message);
        /* This process then only waits for the sandbox, as long as it runs: give back
         * what setting up the engine freed (compiling the seccomp filter, probing the
         * host), which would otherwise stay dirty in its heap for every sandbox. */
        malloc_trim(0);
        hxs_result res = { 0 };
        r = json ? hxs_run(engine, req, &res, &err) : run_streaming(engine, req, &res, &err);
        hxs_engine_free(engine);
        if (r < 0)
                return fail("%s", err.message);

        if (json) {
                size_t len = 0;
                char *text = hxs_result_to_text(&res, NULL, &len);
                if (!text) {
                        hxs_result_clear(&res);
                        return fail("out of memory writing the result");
                }
                write_all(STDOUT_FILENO, text, len);
                write_all(STDOUT_FILENO, "\n", 1);
                free(text);
        }
        /* in plain mode everything, the kill line included, was printed as it came */
        if (out_dir && cli_write_files(out_dir, &res, why, sizeof(why)) < 0) {
                hxs_result_clear(&res);
                return fail("%s", why);
        }
        int code = res.exit_code;
        hxs_result_clear(&res);
        return code;
}
