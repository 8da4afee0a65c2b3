/* SPDX-License-Identifier: Apache-2.0 */
/* hexr-sandbox: one binary, one verb per file (and hexr-sandbox-http, the same with the
 * verbs that speak HTTP: cli-http.c). */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "cli/cli.h"
#include "hexr-sandbox/sandbox.h"

static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *help;
} verbs[] = {
        { "exec", cli_exec, "run code in a fresh sandbox and print what it printed" },
        { "serve", cli_serve, "run the HTTP service" },
        { "session", cli_session, "a sandbox that keeps its state: run cells read from stdin" },
        { "mcp", cli_mcp, "the MCP server over stdio (for agents' MCP clients)" },
        { "doctor", cli_doctor, "check which isolation features this host has" },
        { "image", cli_image, "build or inspect the microVM guest image" },
        { "settings", cli_settings, "print every setting; --markdown: docs/configuration.md" },
        { "version", cli_version, "print the version" },
};

static void usage(FILE *f)
{
        fprintf(f, "usage: hexr-sandbox VERB [OPTIONS]\n\nverbs:\n");
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
                fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].help);
        fprintf(f, "\n`hexr-sandbox VERB --help` for a verb's options.\n\nsettings (environment):\n");
        cli_print_settings(f);
}

char **cli_argv;

int main(int argc, char **argv)
{
        cli_argv = argv;
        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        /* the name ps and top show: argv[0]'s, as after any exec, also once handed to
         * hexr-sandbox-http (whose own would be cut to "hexr-sandbox-ht") */
        const char *slash = strrchr(argv[0], '/');
        (void)prctl(PR_SET_NAME, slash ? slash + 1 : argv[0]);
        if (strcmp(argv[1], "help") == 0 && argc > 2) {
                /* help VERB: the verb's own --help */
                for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
                        if (strcmp(argv[2], verbs[i].name) == 0)
                                return verbs[i].run(2, (char *[]){ argv[2], (char *)"--help", NULL });
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
                usage(stdout);
                return 0;
        }
        if (strcmp(argv[1], "--version") == 0)
                return cli_version(argc - 1, argv + 1);
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
                if (strcmp(argv[1], verbs[i].name) == 0)
                        return verbs[i].run(argc - 1, argv + 1);
        fprintf(stderr, "hexr-sandbox: unknown verb \"%s\"\n", argv[1]);
        usage(stderr);
        return 2;
}
