/* SPDX-License-Identifier: Apache-2.0 */
/* Who is calling and may they (auth.c): mTLS, a trusted proxy's header, AUTH_ALLOW. */
#pragma once

#include <stdbool.h>

#include "hexr-sandbox/sandbox.h"
#include "server/call.h"
#include "server/identity.h"

struct server;

/* Who may call, as auth_setup read it from the settings. */
typedef struct auth_state {
        bool identity_on;               /* mTLS or trusted proxies: callers have IDs */
        allowlist allow;                /* AUTH_ALLOW */
        allowlist metrics_allow;        /* METRICS_ALLOW; empty: as AUTH_ALLOW */
        proxy_list proxies;             /* TRUSTED_PROXIES */
} auth_state;

int auth_setup(struct server *srv, hxs_error *err);        /* AUTH_ALLOW, TRUSTED_PROXIES */
void auth_cleanup(struct server *srv);
/* Who calls, into c->caller, and may they: 0, or -EACCES with a 403 prepared in c. */
int auth_check(call *c);
/* After auth_check: may c's caller read /metrics (METRICS_ALLOW)? Same answer. */
int auth_check_metrics(call *c);
