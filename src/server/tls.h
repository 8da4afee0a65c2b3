/* SPDX-License-Identifier: Apache-2.0 */
/* TLS/mTLS credentials, trust bundles per trust domain, their reload, and a client
 * certificate's SPIFFE ID (tls.c). */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "hexr-sandbox/sandbox.h"
#include "server/identity.h"

struct server;
typedef struct tls_state tls_state;

int tls_open(struct server *srv, hxs_error *err);  /* no-op without TLS_CERT_FILE */
bool tls_enabled(const struct server *srv);
bool tls_mutual(const struct server *srv);         /* client certificates verified */
bool tls_has_bundles(const struct server *srv);    /* some trust domain has CAs */
bool tls_has_bundle(const struct server *srv, const char *td);
void *tls_cert_callback(void);                  /* for MHD_OPTION_HTTPS_CERT_CALLBACK2 */
const char *tls_mhd_trust(const struct server *srv); /* for MHD_OPTION_HTTPS_MEM_TRUST */
/* SIGHUP: the certificates, keys and trust bundles again; a bad new file keeps the old
 * ones. Logs what happened. */
void tls_reload(struct server *srv);
void tls_close(struct server *srv);
/* The connection's verified client SPIFFE ID into ret, or -EACCES and err says why. */
int tls_peer_id(struct server *srv, struct MHD_Connection *conn, char *ret, size_t cap, hxs_error *err);
/* The SPIFFE ID of the certificate a proxy forwarded (x->cert and/or x->chain),
 * verified against its trust domain's bundle as a direct client's would be. */
int tls_verify_forwarded(struct server *srv, const xfcc_client *x, char *ret, size_t cap,
                         hxs_error *err);
