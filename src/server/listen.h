/* SPDX-License-Identifier: Apache-2.0 */
/* LISTEN_ADDRESS to a listening socket, TCP or unix (listen.c). */
#pragma once

#include "hexr-sandbox/sandbox.h"

typedef struct listener {
        int fd;                         /* -1: none; handed to MHD, which closes it */
        char unix_path[108];            /* socket file to remove on exit, "" if TCP */
        char text[300];                 /* what we print: 127.0.0.1:8080, unix:/x */
} listener;

/* A listening socket for LISTEN_ADDRESS into *l; err says why not (HXS_ERR_INVALID:
 * the address itself is wrong). */
int listen_open(listener *l, const char *address, hxs_error *err);
/* Removes the unix socket file, if any. */
void listen_cleanup(listener *l);
