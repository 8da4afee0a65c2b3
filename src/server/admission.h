/* SPDX-License-Identifier: Apache-2.0 */
/* Admission (admission.c): slots, the queue, executions and their end. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "server/call.h"

struct hxs_server;

void admission_submit(call *c);                 /* body parsed into c->req */
void admission_exec_event(call *c);             /* c->exec's fd is readable */
void admission_client_event(call *c);           /* the client's socket hung up */
void admission_forget(call *c);                 /* MHD is done with c: drop what is left */
void admission_tick(struct hxs_server *srv, uint64_t now); /* queue timeouts, slots, drain */
void admission_drain(struct hxs_server *srv);   /* SIGTERM/SIGINT */
uint64_t admission_next_deadline(struct hxs_server *srv); /* UINT64_MAX if none */
bool admission_drained(struct hxs_server *srv);
void admission_abort_all(struct hxs_server *srv); /* last resort at exit */
