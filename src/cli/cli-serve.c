/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hexr-sandbox serve`: the settings (environment, then --listen), the service
 * (src/server/serve.h), and the exit status: 0 after a clean stop (SIGTERM/SIGINT and
 * a drain), 1 when the service failed, 2 for invalid options or settings.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "hexr-sandbox/sandbox.h"
#include "server/serve.h"

#define EXIT_FAILURE_RUNTIME 1
#define EXIT_USAGE 2

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: hexr-sandbox serve [--listen ADDR]\n"
                "\n"
                "Runs the HTTP service: POST /api/v1/exec (alias POST /execute),\n"
                "GET /api/v1/executions/{id}, /api/v1/sessions (live sessions, docs/sessions.md),\n"
                "POST /mcp (MCP over Streamable HTTP, docs/mcp.md), GET /health, GET /metrics.\n"
                "Stops on SIGTERM or SIGINT after running executions finish (at most\n"
                "DRAIN_TIMEOUT; live sessions end first); SIGHUP reloads\n"
                "the TLS certificate and key and the trust bundles (TLS_CLIENT_CA_FILE,\n"
                "SPIFFE_TRUST_BUNDLES).\n"
                "\n"
                "Options:\n"
                "  -l, --listen ADDR   listen address, overrides LISTEN_ADDRESS\n"
                "                      (host:port, :port for every interface, or unix:/path)\n"
                "  -h, --help          this text\n"
                "\n"
                "Settings (environment variables):\n");
        cli_print_settings(f);
}

/* 0 to serve, 1 when --help was printed, -1 for bad usage (said on stderr). */
static int parse_args(int argc, char **argv, const char **ret_listen)
{
        static const struct option options[] = {
                { "listen", required_argument, NULL, 'l' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        int c;

        /* argv[0] is the verb; tolerate the full command line too. */
        if (argc > 1 && strcmp(argv[1], "serve") == 0 && strcmp(argv[0], "serve") != 0) {
                argc--;
                argv++;
        }
        optind = 0; /* GNU: start over, whatever parsed argv before us */
        while ((c = getopt_long(argc, argv, "+l:h", options, NULL)) != -1) {
                switch (c) {
                case 'l':
                        *ret_listen = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 1;
                default:
                        fprintf(stderr, "Try 'hexr-sandbox serve --help'.\n");
                        return -1;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "hexr-sandbox serve: unexpected argument '%s'\nTry 'hexr-sandbox serve --help'.\n",
                        argv[optind]);
                return -1;
        }
        return 0;
}

int cli_serve(int argc, char **argv)
{
        const char *listen = NULL;
        hxs_config cfg;
        hxs_error err = { 0 };
        server *srv = NULL;

        int r = parse_args(argc, argv, &listen);
        if (r != 0)
                return r > 0 ? 0 : EXIT_USAGE;

        r = hxs_config_from_env(&cfg, &err);
        if (r == 0 && listen)
                r = hxs_config_set(&cfg, "LISTEN_ADDRESS", listen, &err);
        if (r < 0) {
                fprintf(stderr, "hexr-sandbox: invalid setting: %s\n", err.message);
                return EXIT_USAGE;
        }
        /* In a container, refuse to start without what sandboxes need, rather than fail
         * every execution. */
        hxs_container_report box;
        if (hxs_container_check(&cfg, &box)) {
                fprintf(stderr, "hexr-sandbox: this container (%s) lacks what sandboxes need: %s. "
                        "See docs/deploy.md for the flags.\n", box.why, box.lacks);
                return EXIT_FAILURE_RUNTIME;
        }
        r = server_new(&cfg, &srv, &err);
        if (r < 0) {
                fprintf(stderr, "hexr-sandbox: %s\n", err.message);
                return err.kind == HXS_ERR_INVALID ? EXIT_USAGE : EXIT_FAILURE_RUNTIME;
        }
        fprintf(stderr, "hexr-sandbox: listening on %s\n", server_address(srv));
        r = server_run(srv);
        server_free(srv);
        return r < 0 ? EXIT_FAILURE_RUNTIME : 0;
}
