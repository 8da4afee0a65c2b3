/* SPDX-License-Identifier: Apache-2.0 */
/* LISTEN_ADDRESS to a listening socket, TCP or unix (listen.c). */
#pragma once

#include "hexr-sandbox/sandbox.h"

struct hxs_server;

/* A listening socket for LISTEN_ADDRESS into srv->listen_fd, its text into
 * srv->listen_text (and srv->unix_path for unix:); err says why not. */
int listen_open(struct hxs_server *srv, const char *address, hxs_error *err);
/* Removes the unix socket file, if any. */
void listen_cleanup(struct hxs_server *srv);
