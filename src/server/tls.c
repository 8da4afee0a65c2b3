/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS and mTLS through libmicrohttpd's GnuTLS backend, and the caller's SPIFFE ID from
 * its client certificate.
 *
 * MHD only *requests* a client certificate (it trusts nothing): every request's peer
 * chain is verified here against our own trust list (chain to a trusted CA, validity
 * dates, key purpose TLS client, not a CA itself, exactly one URI SAN that is a SPIFFE
 * ID). A certificate that is self-signed, from another CA, expired, or names two
 * identities gives no caller.
 *
 * Reload (SIGHUP): MHD 0.9.75 cannot swap a running daemon's credentials, but asks
 * a callback for the server certificate on every handshake
 * (MHD_OPTION_HTTPS_CERT_CALLBACK2). The callback hands each handshake its own copy of
 * the current certificate and key (GnuTLS frees it with the session), so a reload
 * affects new handshakes only and open connections keep theirs. The trust list is
 * ours and is swapped whole; verification runs on the loop, between reloads.
 */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/macro.h"
#include "server/identity.h"
#include "server/server.h"

/* PEM files larger than this are not certificates we want. */
#define PEM_MAX ((size_t)1 << 20)
/* Certificates in a server chain, and in a client's. */
#define CHAIN_MAX 16

struct tls_state {
        gnutls_datum_t cert;    /* server chain, PEM */
        gnutls_datum_t key;     /* its key, PEM */
        gnutls_x509_trust_list_t trust; /* client CAs; NULL without mTLS */
        char *ca_for_mhd;       /* the CA bundle MHD was started with (it keeps the pointer) */
        unsigned reloads;
};

/* The handshake callback has only the session: one daemon per process. */
static tls_state *current;

static int read_pem(const char *path, gnutls_datum_t *ret, char *msg, size_t cap, const char *setting)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0) {
                snprintf(msg, cap, "%s: %s: %s", setting, path, strerror(errno));
                return -errno;
        }
        if (!S_ISREG(st.st_mode) || (size_t)st.st_size > PEM_MAX || st.st_size == 0) {
                snprintf(msg, cap, "%s: %s: not a regular file of 1 to %zu bytes", setting, path, PEM_MAX);
                return -EINVAL;
        }
        unsigned char *buf = gnutls_malloc((size_t)st.st_size + 1);
        if (!buf) {
                snprintf(msg, cap, "%s: out of memory", setting);
                return -ENOMEM;
        }
        size_t got = 0;
        while (got < (size_t)st.st_size) {
                ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        snprintf(msg, cap, "%s: %s: short read", setting, path);
                        gnutls_free(buf);
                        return -EIO;
                }
                got += (size_t)n;
        }
        buf[got] = '\0';
        ret->data = buf;
        ret->size = (unsigned)got;
        return 0;
}

static void state_free(tls_state *t)
{
        if (!t)
                return;
        gnutls_free(t->cert.data);
        if (t->key.data) {
                gnutls_memset(t->key.data, 0, t->key.size);
                gnutls_free(t->key.data);
        }
        if (t->trust)
                gnutls_x509_trust_list_deinit(t->trust, 1);
        free(t->ca_for_mhd);
        free(t);
}

/* Reads and checks the three files into a new state; nothing is swapped here. */
static int state_load(const hxs_config *cfg, tls_state **ret, char *msg, size_t cap)
{
        tls_state *t = calloc(1, sizeof(*t));
        gnutls_certificate_credentials_t cred = NULL;
        gnutls_datum_t ca = { 0 };
        int r;

        if (!t) {
                snprintf(msg, cap, "TLS: out of memory");
                return -ENOMEM;
        }
        r = read_pem(cfg->tls_cert_file, &t->cert, msg, cap, "TLS_CERT_FILE");
        if (r == 0)
                r = read_pem(cfg->tls_key_file, &t->key, msg, cap, "TLS_KEY_FILE");
        if (r < 0)
                goto fail;
        /* Each file on its own first: gnutls_certificate_set_x509_key_mem2 leaks what it
         * parsed when a certificate does not decode (GnuTLS 3.7.9). */
        gnutls_x509_crt_t *crts = NULL;
        unsigned n_crts = 0;
        r = gnutls_x509_crt_list_import2(&crts, &n_crts, &t->cert, GNUTLS_X509_FMT_PEM, 0);
        if (r >= 0) {
                for (unsigned i = 0; i < n_crts; i++)
                        gnutls_x509_crt_deinit(crts[i]);
                gnutls_free(crts);
        }
        if (r < 0 || n_crts == 0 || n_crts > CHAIN_MAX) {
                snprintf(msg, cap, "TLS_CERT_FILE: %s: %s", cfg->tls_cert_file,
                         r < 0 ? gnutls_strerror(r) : "not 1 to 16 PEM certificates");
                r = -EINVAL;
                goto fail;
        }
        gnutls_privkey_t key = NULL;
        r = gnutls_privkey_init(&key);
        if (r >= 0)
                r = gnutls_privkey_import_x509_raw(key, &t->key, GNUTLS_X509_FMT_PEM, NULL, 0);
        if (key)
                gnutls_privkey_deinit(key);
        if (r < 0) {
                snprintf(msg, cap, "TLS_KEY_FILE: %s: %s (an unencrypted PEM key is needed)",
                         cfg->tls_key_file, gnutls_strerror(r));
                r = -EINVAL;
                goto fail;
        }
        /* Does the key belong to the certificate? GnuTLS checks when both are set. */
        if (gnutls_certificate_allocate_credentials(&cred) < 0) {
                snprintf(msg, cap, "TLS: out of memory");
                r = -ENOMEM;
                goto fail;
        }
        r = gnutls_certificate_set_x509_key_mem2(cred, &t->cert, &t->key, GNUTLS_X509_FMT_PEM, NULL, 0);
        gnutls_certificate_free_credentials(cred);
        if (r < 0) {
                snprintf(msg, cap, "TLS_CERT_FILE, TLS_KEY_FILE: %s and %s: %s", cfg->tls_cert_file,
                         cfg->tls_key_file, gnutls_strerror(r));
                r = -EINVAL;
                goto fail;
        }

        if (cfg->tls_client_ca_file[0]) {
                r = read_pem(cfg->tls_client_ca_file, &ca, msg, cap, "TLS_CLIENT_CA_FILE");
                if (r < 0)
                        goto fail;
                if (gnutls_x509_trust_list_init(&t->trust, 0) < 0) {
                        snprintf(msg, cap, "TLS: out of memory");
                        r = -ENOMEM;
                        goto fail;
                }
                r = gnutls_x509_trust_list_add_trust_mem(t->trust, &ca, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
                if (r <= 0) {
                        snprintf(msg, cap, "TLS_CLIENT_CA_FILE: %s: %s", cfg->tls_client_ca_file,
                                 r < 0 ? gnutls_strerror(r) : "no certificate in it");
                        r = -EINVAL;
                        goto fail;
                }
                t->ca_for_mhd = strndup((const char *)ca.data, ca.size);
                if (!t->ca_for_mhd) {
                        snprintf(msg, cap, "TLS: out of memory");
                        r = -ENOMEM;
                        goto fail;
                }
        }
        gnutls_free(ca.data);
        *ret = t;
        return 0;
fail:
        gnutls_free(ca.data);
        state_free(t);
        return r < 0 ? r : -EINVAL;
}

static int cert_callback(gnutls_session_t session, const struct gnutls_cert_retr_st *info,
                         gnutls_pcert_st **certs, unsigned int *certs_length,
                         gnutls_ocsp_data_st **ocsp, unsigned int *ocsp_length,
                         gnutls_privkey_t *privkey, unsigned int *flags)
{
        tls_state *t = current;
        gnutls_pcert_st *list = NULL;
        gnutls_privkey_t key = NULL;
        unsigned n = CHAIN_MAX;

        if (!t)
                return -1;
        /* No CA names in the CertificateRequest: they would be those of the bundle at
         * start, and some clients (Go) send no certificate when the names do not match. */
        gnutls_certificate_send_x509_rdn_sequence(session, 1);

        list = gnutls_malloc(sizeof(*list) * CHAIN_MAX);
        if (!list)
                return -1;
        if (gnutls_pcert_list_import_x509_raw(list, &n, &t->cert, GNUTLS_X509_FMT_PEM, 0) < 0)
                goto fail_list;
        if (gnutls_privkey_init(&key) < 0)
                goto fail_certs;
        if (gnutls_privkey_import_x509_raw(key, &t->key, GNUTLS_X509_FMT_PEM, NULL, 0) < 0)
                goto fail_key;
        *certs = list;
        *certs_length = n;
        *ocsp = NULL;
        *ocsp_length = 0;
        *privkey = key;
        *flags = GNUTLS_CERT_RETR_DEINIT_ALL; /* the session owns this copy */
        return 0;
fail_key:
        gnutls_privkey_deinit(key);
fail_certs:
        for (unsigned i = 0; i < n; i++)
                gnutls_pcert_deinit(&list[i]);
fail_list:
        gnutls_free(list);
        return -1;
}

int tls_open(hxs_server *srv, hxs_error *err)
{
        char msg[400];

        if (!srv->cfg.tls_cert_file[0])
                return 0;
        int r = state_load(&srv->cfg, &srv->tls, msg, sizeof(msg));
        if (r < 0)
                return hxs_fail(err, HXS_ERR_INVALID, r, "%s", msg);
        current = srv->tls;
        return 0;
}

bool tls_enabled(const hxs_server *srv)
{
        return srv->tls != NULL;
}

bool tls_mutual(const hxs_server *srv)
{
        return srv->tls && srv->tls->trust;
}

void *tls_cert_callback(void)
{
        return (void *)cert_callback;
}

const char *tls_mhd_trust(const hxs_server *srv)
{
        return srv->tls ? srv->tls->ca_for_mhd : NULL;
}

int tls_reload(hxs_server *srv, char *msg, size_t cap)
{
        tls_state *t = NULL;

        if (!srv->tls) {
                snprintf(msg, cap, "no TLS configured: nothing to reload");
                return 0;
        }
        int r = state_load(&srv->cfg, &t, msg, cap);
        if (r < 0)
                return r; /* the old certificates stay */
        /* MHD keeps the start-time bundle's pointer: it stays with the new state. */
        char *keep = srv->tls->ca_for_mhd;
        srv->tls->ca_for_mhd = NULL;
        free(t->ca_for_mhd);
        t->ca_for_mhd = keep;
        t->reloads = srv->tls->reloads + 1;
        state_free(srv->tls);
        srv->tls = t;
        current = t;
        snprintf(msg, cap, "certificates reloaded (%u since start)", t->reloads);
        return 0;
}

void tls_close(hxs_server *srv)
{
        if (current == srv->tls)
                current = NULL;
        state_free(srv->tls);
        srv->tls = NULL;
}

static const char *status_reason(unsigned status)
{
        if (status & GNUTLS_CERT_EXPIRED)
                return "the client certificate (or one in its chain) has expired";
        if (status & GNUTLS_CERT_NOT_ACTIVATED)
                return "the client certificate (or one in its chain) is not valid yet";
        if (status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA))
                return "the client certificate is not issued by a trusted CA";
        if (status & GNUTLS_CERT_PURPOSE_MISMATCH)
                return "the client certificate is not for TLS client authentication";
        if (status & GNUTLS_CERT_REVOKED)
                return "the client certificate is revoked";
        return "the client certificate does not verify";
}

int tls_peer_id(hxs_server *srv, struct MHD_Connection *conn, char *ret, size_t cap,
                const char **ret_why)
{
        const union MHD_ConnectionInfo *ci;
        gnutls_session_t session;
        gnutls_x509_crt_t crts[CHAIN_MAX] = { 0 };
        const gnutls_datum_t *peers;
        unsigned n = 0, status = 0, n_uri = 0;
        const char *why = NULL;
        char uri[SPIFFE_ID_MAX + 1];
        size_t uri_len = 0;
        int r = -EACCES;

        ret[0] = '\0';
        if (!tls_mutual(srv)) {
                *ret_why = "mTLS is not configured";
                return -EACCES;
        }
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        if (!ci || !ci->tls_session) {
                *ret_why = "no TLS session";
                return -EACCES;
        }
        session = ci->tls_session;
        if (gnutls_certificate_type_get(session) != GNUTLS_CRT_X509) {
                *ret_why = "the client certificate is not X.509";
                return -EACCES;
        }
        peers = gnutls_certificate_get_peers(session, &n);
        if (!peers || n == 0) {
                *ret_why = "no client certificate";
                return -EACCES;
        }
        if (n > CHAIN_MAX) {
                *ret_why = "the client certificate chain is too long";
                return -EACCES;
        }
        for (unsigned i = 0; i < n; i++) {
                if (gnutls_x509_crt_init(&crts[i]) < 0 ||
                    gnutls_x509_crt_import(crts[i], &peers[i], GNUTLS_X509_FMT_DER) < 0) {
                        why = "the client certificate does not parse";
                        goto out;
                }
        }
        gnutls_typed_vdata_st vdata = { .type = GNUTLS_DT_KEY_PURPOSE_OID,
                                        .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT };
        if (gnutls_x509_trust_list_verify_crt2(srv->tls->trust, crts, n, &vdata, 1, 0, &status,
                                               NULL) < 0) {
                why = "the client certificate does not verify";
                goto out;
        }
        if (status != 0) {
                why = status_reason(status);
                goto out;
        }
        unsigned critical = 0;
        if (gnutls_x509_crt_get_ca_status(crts[0], &critical) > 0) {
                why = "the client certificate is a CA certificate";
                goto out;
        }
        for (unsigned i = 0;; i++) {
                char buf[SPIFFE_ID_MAX + 1];
                size_t sz = sizeof(buf) - 1;
                int t = gnutls_x509_crt_get_subject_alt_name(crts[0], i, buf, &sz, &critical);
                if (t == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
                        break;
                if (t < 0) {
                        why = "the client certificate has an unreadable or over-long subject alternative name";
                        goto out;
                }
                if (t != GNUTLS_SAN_URI)
                        continue;
                if (++n_uri > 1) {
                        why = "the client certificate has more than one URI SAN (one SPIFFE ID is required)";
                        goto out;
                }
                memcpy(uri, buf, sz);
                uri_len = sz;
        }
        if (n_uri == 0) {
                why = "the client certificate has no URI SAN (no SPIFFE ID)";
                goto out;
        }
        if (memchr(uri, '\0', uri_len) || spiffe_id_check(uri, uri_len, NULL) < 0) {
                why = "the client certificate's URI SAN is not a valid SPIFFE ID";
                goto out;
        }
        if (uri_len >= cap) {
                why = "the client certificate's SPIFFE ID is too long";
                goto out;
        }
        memcpy(ret, uri, uri_len);
        ret[uri_len] = '\0';
        r = 0;
out:
        for (unsigned i = 0; i < n && i < CHAIN_MAX; i++)
                if (crts[i])
                        gnutls_x509_crt_deinit(crts[i]);
        *ret_why = why;
        return r;
}
