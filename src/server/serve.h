/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP service's public face, used by the `serve` verb (src/cli/cli-serve.c):
 *
 *   server_new    opens everything the service needs for a configuration
 *   server_run    serves until SIGTERM/SIGINT and a drain (SIGHUP reloads TLS)
 *   server_free   takes it all down again
 *
 * The service blocks SIGTERM, SIGINT and SIGHUP (it reads them from a signalfd) and
 * ignores SIGPIPE, and it logs one JSON line per event on stderr.
 */
#pragma once

#include "hexr-sandbox/sandbox.h"

typedef struct server server;

/* The service for cfg (copied): engine, listening socket, TLS, identities, MHD.
 * Returns 0 and the server in *ret, or a negative errno and err: kind HXS_ERR_INVALID
 * when a setting is wrong (the message names it), another kind when the service could
 * not start. */
int server_new(const hxs_config *cfg, server **ret, hxs_error *err);

/* Where it listens: 127.0.0.1:8080, [::1]:8080 or unix:/path, the port the one bound. */
const char *server_address(const server *srv);

/* Serves until a drain completes: 0, or a negative errno when the loop failed. */
int server_run(server *srv);

/* Anything still running is killed and every waiting client answered. NULL is fine. */
void server_free(server *srv);
