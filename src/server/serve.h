/* SPDX-License-Identifier: Apache-2.0 */
/* The `serve` verb, called by src/cli/main.c. */
#pragma once

/* `hexr-sandbox serve [--listen ADDR] [--help]`. argv[0] is the verb ("serve"); options
 * follow. Returns the process exit status: 0 after a clean stop (SIGTERM/SIGINT and a
 * drain), 1 when the service failed, 2 for invalid options or settings. */
int hxs_cli_serve(int argc, char **argv);
