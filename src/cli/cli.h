/* SPDX-License-Identifier: Apache-2.0 */
/* One function per verb; each returns the process exit status. */
#pragma once

#include <stdio.h>

/* Exit status of the CLI's own failures (bad usage, sandbox could not run), chosen like
 * `docker run` so it rarely collides with a program's own status. */
#define HXS_CLI_EXIT_FAILURE 125

int hxs_cli_exec(int argc, char **argv);
int hxs_cli_doctor(int argc, char **argv);
int hxs_cli_version(int argc, char **argv);
int hxs_cli_image(int argc, char **argv);
/* `serve [--listen ADDR]`: 0 after a clean stop, 1 when the service failed, 2 for
 * invalid options or settings. */
int hxs_cli_serve(int argc, char **argv);
int hxs_cli_settings(int argc, char **argv);
/* Prints every setting of the table, one row each: env, help, default, what it accepts
 * (cli-settings.c; the one printer, used by every --help). */
void hxs_cli_print_settings(FILE *f);
