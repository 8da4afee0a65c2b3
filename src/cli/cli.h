/* SPDX-License-Identifier: Apache-2.0 */
/* One function per verb; each returns the process exit status. */
#pragma once

#include <stdint.h>
#include <stdio.h>

/* Exit status of the CLI's own failures (bad usage, sandbox could not run), chosen like
 * `docker run` so it rarely collides with a program's own status. */
#define HXS_CLI_EXIT_FAILURE 125

/* main's argv, for the verbs handed to hexr-sandbox-http (cli-http.c) */
extern char **cli_argv;

int cli_exec(int argc, char **argv);
int cli_doctor(int argc, char **argv);
int cli_version(int argc, char **argv);
int cli_image(int argc, char **argv);
/* `serve [--listen ADDR]`: 0 after a clean stop, 1 when the service failed, 2 for
 * invalid options or settings. */
int cli_serve(int argc, char **argv);
int cli_settings(int argc, char **argv);
/* `session`: cells from stdin in one session (cli-session.c); 0, 1 (a cell raised),
 * 125 (the session could not start or ended). */
int cli_session(int argc, char **argv);
/* `mcp`: the MCP server over stdio (cli-mcp.c); 0 at the end of stdin. */
int cli_mcp(int argc, char **argv);

/* exec's files (cli-exec-files.c): --file LOCAL[:PATH] added to req, and the result's
 * files written under dir (--out). -errno with the reason in why. */
#include "hexr-sandbox/sandbox.h"
int cli_add_file(hxs_request *req, const char *arg, char *why, size_t why_size);
int cli_write_files(const char *dir, const hxs_result *res, char *why, size_t why_size);
/* Prints every setting of the table, one row each: env, help, default, what it accepts
 * (cli-settings.c; the one printer, used by every --help). */
void cli_print_settings(FILE *f);
/* A decimal number 0..UINT32_MAX, nothing before or after it (cli-args.c); -EINVAL. */
int cli_parse_u32(const char *s, uint32_t *ret);
