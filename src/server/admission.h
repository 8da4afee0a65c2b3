/* SPDX-License-Identifier: Apache-2.0 */
/* Admission (admission.c): slots, the queue, executions and their end. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "server/call.h"

struct hxs_server;

/* Registers admission's deadlines (queue timeouts, the drain's) with the loop. */
void admission_setup(struct hxs_server *srv);
void admission_submit(call *c);                 /* body parsed into c->req */
void admission_forget(call *c);                 /* MHD is done with c: drop what is left */
void admission_drain(struct hxs_server *srv);   /* SIGTERM/SIGINT */
bool admission_drained(struct hxs_server *srv);
void admission_abort_all(struct hxs_server *srv); /* last resort at exit */
