/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS and mTLS through libmicrohttpd's GnuTLS backend, the trust bundles of the SPIFFE
 * trust domains, and the caller's SPIFFE ID from a client certificate (the
 * connection's own, or one a trusted proxy forwarded in X-Forwarded-Client-Cert).
 *
 * Trust bundles are kept per trust domain: a certificate naming spiffe://td/... is
 * verified against the CAs of td only, never against all of them, so a CA that may
 * issue for one trust domain cannot mint identities of another (X509-SVID, section 5).
 * An ID whose trust domain has no bundle is refused. Where each CA comes from:
 *
 *   SPIFFE_TRUST_BUNDLES  td=/file.pem: every certificate of the file is a trust anchor
 *                         of td (roots and intermediates alike); one naming another
 *                         trust domain in a spiffe:// URI SAN stops the start.
 *   TLS_CLIENT_CA_FILE    each CA belongs to the trust domain its spiffe:// URI SAN
 *                         names; without one, to its issuer's when the issuer is in the
 *                         same file, else to the service's own trust domain
 *                         (SPIFFE_TRUST_DOMAIN, or that of TLS_CERT_FILE's SPIFFE ID).
 *                         What cannot be attributed stops the start (identity.c,
 *                         ca_trust_domain, has the rules).
 *
 * MHD only *requests* a client certificate (it trusts nothing): every request's peer
 * chain is verified here (chain to a CA of the ID's trust domain, validity dates, key
 * purpose TLS client given explicitly, not a CA itself and not able to sign
 * certificates, exactly one URI SAN that is a SPIFFE ID). A certificate that is
 * self-signed, from another trust domain's CA, expired, or names two identities gives
 * no caller.
 *
 * Reload (SIGHUP): MHD 0.9.75 cannot swap a running daemon's credentials, but asks
 * a callback for the server certificate on every handshake
 * (MHD_OPTION_HTTPS_CERT_CALLBACK2). The callback hands each handshake its own copy of
 * the current certificate and key (GnuTLS frees it with the session), so a reload
 * affects new handshakes only and open connections keep theirs. The trust bundles are
 * ours and are swapped whole with the certificate; verification runs on the loop,
 * between reloads.
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
#include "server/log.h"
#include "server/state.h"
#include "server/tls.h"

/* PEM files larger than this are not certificates we want. */
#define PEM_MAX ((size_t)1 << 20)
/* Certificates in a server chain, and in a client's. */
#define CHAIN_MAX 16
/* CA certificates in one bundle file. */
#define BUNDLE_CAS_MAX 512
/* URI SANs read from one certificate. */
#define URIS_MAX 8

typedef struct trust_domain {
        char name[SPIFFE_TD_MAX + 1];
        gnutls_x509_trust_list_t list;  /* its CAs (the list owns them) */
        unsigned n_cas;
} trust_domain;

struct tls_state {
        gnutls_datum_t cert;    /* server chain, PEM; empty without TLS */
        gnutls_datum_t key;     /* its key, PEM */
        trust_domain *domains;  /* client CAs by trust domain; none: no mTLS */
        size_t n_domains;
        char own_td[SPIFFE_TD_MAX + 1]; /* "" when unknown */
        char *ca_for_mhd;       /* the CAs MHD was started with (it keeps the pointer) */
        unsigned reloads;
};

/* The handshake callback has only the session: one daemon per process. */
static tls_state *current;

static int read_pem(const char *path, gnutls_datum_t *ret, hxs_error *err, const char *setting)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0) {
                int r = negative_errno();
                return err_fail_field(err, HXS_ERR_INVALID, r, setting, "%s: %s: %s", setting, path,
                                      strerror(-r));
        }
        if (!S_ISREG(st.st_mode) || (size_t)st.st_size > PEM_MAX || st.st_size == 0) {
                err_fail(err, HXS_ERR_INVALID, -EINVAL, "%s: %s: not a regular file of 1 to %zu bytes", setting, path, PEM_MAX);
                return -EINVAL;
        }
        unsigned char *buf = gnutls_malloc((size_t)st.st_size + 1);
        if (!buf) {
                err_fail(err, HXS_ERR_INVALID, -ENOMEM, "%s: out of memory", setting);
                return -ENOMEM;
        }
        size_t got = 0;
        while (got < (size_t)st.st_size) {
                ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        err_fail(err, HXS_ERR_INVALID, -EINVAL, "%s: %s: short read", setting, path);
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

static void domains_free(trust_domain *d, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (d[i].list)
                        gnutls_x509_trust_list_deinit(d[i].list, 1);
        free(d);
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
        domains_free(t->domains, t->n_domains);
        free(t->ca_for_mhd);
        free(t);
}

static const trust_domain *domain_find(const tls_state *t, const char *name)
{
        for (size_t i = 0; t && i < t->n_domains; i++)
                if (strcmp(t->domains[i].name, name) == 0)
                        return &t->domains[i];
        return NULL;
}

/* The trust list of name, created when new. NULL: out of memory. */
static trust_domain *domain_get(tls_state *t, const char *name)
{
        trust_domain *d = (trust_domain *)domain_find(t, name);
        if (d)
                return d;
        d = realloc(t->domains, (t->n_domains + 1) * sizeof(*d));
        if (!d)
                return NULL;
        t->domains = d;
        d = &t->domains[t->n_domains];
        memset(d, 0, sizeof(*d));
        if (gnutls_x509_trust_list_init(&d->list, 0) < 0)
                return NULL;
        snprintf(d->name, sizeof(d->name), "%s", name);
        t->n_domains++;
        return d;
}

/* A certificate's URI SANs: up to URIS_MAX, each at most SPIFFE_ID_MAX bytes (longer
 * ones, or more, are an error: -E2BIG). */
typedef struct uri_sans {
        size_t n;
        char v[URIS_MAX][SPIFFE_ID_MAX + 1];
        size_t len[URIS_MAX];
        const char *ptr[URIS_MAX];
} uri_sans;

static int cert_uris(gnutls_x509_crt_t crt, uri_sans *u)
{
        u->n = 0;
        for (unsigned i = 0;; i++) {
                char buf[SPIFFE_ID_MAX + 1];
                size_t sz = sizeof(buf) - 1;
                unsigned critical = 0;
                int t = gnutls_x509_crt_get_subject_alt_name(crt, i, buf, &sz, &critical);
                if (t == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
                        return 0;
                if (t < 0)
                        return -E2BIG;
                if (t != GNUTLS_SAN_URI)
                        continue;
                if (u->n == URIS_MAX)
                        return -E2BIG;
                memcpy(u->v[u->n], buf, sz);
                u->v[u->n][sz] = '\0';
                u->len[u->n] = sz;
                u->ptr[u->n] = u->v[u->n];
                u->n++;
        }
}

/* "CN=x,O=y" of crt, for messages. */
static void cert_name(gnutls_x509_crt_t crt, char *buf, size_t cap)
{
        gnutls_datum_t dn = { 0 };
        if (gnutls_x509_crt_get_dn3(crt, &dn, 0) >= 0 && dn.data)
                snprintf(buf, cap, "%.*s", (int)(dn.size > 160 ? 160 : dn.size), (const char *)dn.data);
        else
                snprintf(buf, cap, "(unnamed)");
        gnutls_free(dn.data);
}

/* Imports every certificate of a PEM text. */
static int import_all(const gnutls_datum_t *pem, unsigned max, gnutls_x509_crt_t **ret, unsigned *ret_n)
{
        gnutls_x509_crt_t *crts = NULL;
        unsigned n = 0;
        int r = gnutls_x509_crt_list_import2(&crts, &n, pem, GNUTLS_X509_FMT_PEM, 0);
        if (r < 0)
                return r;
        if (n == 0 || n > max) {
                for (unsigned i = 0; i < n; i++)
                        gnutls_x509_crt_deinit(crts[i]);
                gnutls_free(crts);
                return n == 0 ? GNUTLS_E_NO_CERTIFICATE_FOUND : GNUTLS_E_CERTIFICATE_LIST_UNSORTED;
        }
        *ret = crts;
        *ret_n = n;
        return 0;
}

static void free_crts(gnutls_x509_crt_t *crts, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                if (crts[i])
                        gnutls_x509_crt_deinit(crts[i]);
        gnutls_free(crts);
}

/*
 * One bundle file into t: every certificate a CA, each attributed to a trust domain
 * (bundle_td for a SPIFFE_TRUST_BUNDLES file, else by ca_trust_domain's rules with its
 * issuer inside the file), then handed to that trust domain's list.
 */
static int load_bundle(tls_state *t, const char *setting, const char *path, const char *bundle_td,
                       hxs_error *err)
{
        gnutls_datum_t pem = { 0 };
        gnutls_x509_crt_t *crts = NULL;
        unsigned n = 0;
        char (*td)[SPIFFE_TD_MAX + 1] = NULL;
        int *issuer = NULL;
        uri_sans *u = malloc(sizeof(*u));
        char name[200];
        hxs_error why = { 0 };
        int r;

        if (!u) {
                err_fail(err, HXS_ERR_INVALID, -ENOMEM, "%s: out of memory", setting);
                return -ENOMEM;
        }
        r = read_pem(path, &pem, err, setting);
        if (r < 0)
                goto out;
        r = import_all(&pem, BUNDLE_CAS_MAX, &crts, &n);
        if (r < 0) {
                err_fail(err, HXS_ERR_INVALID, -EINVAL, "%s: %s: %s", setting, path,
                         r == GNUTLS_E_NO_CERTIFICATE_FOUND ? "no certificate in it" :
                         r == GNUTLS_E_CERTIFICATE_LIST_UNSORTED ? "more than 512 certificates" :
                                                                   gnutls_strerror(r));
                r = -EINVAL;
                goto out;
        }
        td = calloc(n, sizeof(*td));
        issuer = calloc(n, sizeof(*issuer));
        if (!td || !issuer) {
                err_fail(err, HXS_ERR_INVALID, -ENOMEM, "%s: out of memory", setting);
                r = -ENOMEM;
                goto out;
        }
        for (unsigned i = 0; i < n; i++) {
                unsigned critical = 0;
                if (gnutls_x509_crt_get_ca_status(crts[i], &critical) <= 0) {
                        cert_name(crts[i], name, sizeof(name));
                        err_fail(err, HXS_ERR_INVALID, -EINVAL, "%s: %s: \"%s\" is not a CA certificate (basicConstraints CA:TRUE); "
                                 "a bundle holds its trust domain's CAs", setting, path, name);
                        r = -EINVAL;
                        goto out;
                }
                issuer[i] = -1;
                if (gnutls_x509_crt_check_issuer(crts[i], crts[i]))
                        continue; /* self-issued: a root */
                for (unsigned j = 0; j < n; j++)
                        if (j != i && gnutls_x509_crt_check_issuer(crts[i], crts[j])) {
                                issuer[i] = (int)j;
                                break;
                        }
        }
        /* Issuers first, so that an intermediate can inherit (passes: at most n). */
        for (unsigned pass = 0, left = n; left && pass <= n; pass++) {
                left = 0;
                for (unsigned i = 0; i < n; i++) {
                        if (td[i][0])
                                continue;
                        int j = issuer[i];
                        bool ready = bundle_td || j < 0 || td[j][0] || pass == n;
                        if (!ready) {
                                left++;
                                continue;
                        }
                        if (cert_uris(crts[i], u) < 0) {
                                cert_name(crts[i], name, sizeof(name));
                                err_fail(err, HXS_ERR_INVALID, -EINVAL, "%s: %s: CA \"%s\": unreadable or too many URI SANs", setting,
                                         path, name);
                                r = -EINVAL;
                                goto out;
                        }
                        ca_facts f = { .uris = u->ptr, .uri_lens = u->len, .n_uris = u->n,
                                       .bundle_td = bundle_td,
                                       .issuer_td = j >= 0 && td[j][0] ? td[j] : NULL,
                                       .own_td = t->own_td[0] ? t->own_td : NULL };
                        if (ca_trust_domain(&f, td[i], sizeof(td[i]), &why) < 0) {
                                cert_name(crts[i], name, sizeof(name));
                                err_fail(err, HXS_ERR_INVALID, -EINVAL, "%s: %s: CA \"%s\": %s", setting, path, name, why.message);
                                r = -EINVAL;
                                goto out;
                        }
                }
        }
        for (unsigned i = 0; i < n; i++) {
                trust_domain *d = domain_get(t, td[i]);
                if (!d || gnutls_x509_trust_list_add_cas(d->list, &crts[i], 1, 0) != 1) {
                        err_fail(err, HXS_ERR_INVALID, -ENOMEM, "%s: %s: cannot add a CA (out of memory)", setting, path);
                        r = -ENOMEM;
                        goto out;
                }
                crts[i] = NULL; /* the list owns it */
                d->n_cas++;
        }
        /* MHD is given every CA too, only so that it asks for client certificates. */
        size_t old = t->ca_for_mhd ? strlen(t->ca_for_mhd) : 0;
        char *all = realloc(t->ca_for_mhd, old + pem.size + 2);
        if (!all) {
                err_fail(err, HXS_ERR_INVALID, -ENOMEM, "%s: out of memory", setting);
                r = -ENOMEM;
                goto out;
        }
        memcpy(all + old, pem.data, pem.size);
        all[old + pem.size] = '\n';
        all[old + pem.size + 1] = '\0';
        t->ca_for_mhd = all;
        r = 0;
out:
        if (crts)
                free_crts(crts, n);
        gnutls_free(pem.data);
        free(td);
        free(issuer);
        free(u);
        return r;
}

/* The service's own trust domain: SPIFFE_TRUST_DOMAIN, else that of the SPIFFE ID in
 * TLS_CERT_FILE's first certificate (when it names exactly one). */
static int own_trust_domain(const hxs_config *cfg, tls_state *t, hxs_error *err)
{
        const char *rule = NULL;
        const char *v = cfg->spiffe_trust_domain;

        t->own_td[0] = '\0';
        if (v[0]) {
                if (strncmp(v, "spiffe://", 9) == 0) {
                        err_fail(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_DOMAIN: \"%.200s\": write the trust domain without spiffe://", v);
                        return -EINVAL;
                }
                if (trust_domain_check(v, strlen(v), &rule) < 0) {
                        err_fail(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_DOMAIN: \"%.200s\": %s", v, rule);
                        return -EINVAL;
                }
                snprintf(t->own_td, sizeof(t->own_td), "%s", v);
                return 0;
        }
        if (!t->cert.data)
                return 0;
        gnutls_x509_crt_t crt = NULL;
        uri_sans *u = malloc(sizeof(*u));
        if (!u)
                return 0;
        if (gnutls_x509_crt_init(&crt) >= 0 &&
            gnutls_x509_crt_import(crt, &t->cert, GNUTLS_X509_FMT_PEM) >= 0 && cert_uris(crt, u) == 0) {
                char td[SPIFFE_TD_MAX + 1], found[SPIFFE_TD_MAX + 1] = "";
                bool two = false;
                for (size_t i = 0; i < u->n; i++)
                        if (spiffe_trust_domain(u->v[i], u->len[i], td, sizeof(td)) == 0) {
                                two |= found[0] && strcmp(found, td) != 0;
                                memcpy(found, td, sizeof(td));
                        }
                if (!two)
                        memcpy(t->own_td, found, sizeof(found));
        }
        if (crt)
                gnutls_x509_crt_deinit(crt);
        free(u);
        return 0;
}

/* Reads and checks the server's files and the trust bundles into a new state;
 * nothing is swapped here. */
static int state_load(const hxs_config *cfg, tls_state **ret, hxs_error *err)
{
        tls_state *t = calloc(1, sizeof(*t));
        gnutls_certificate_credentials_t cred = NULL;
        bundle_list bl = { 0 };
        int r = 0;

        if (!t) {
                err_fail(err, HXS_ERR_INVALID, -ENOMEM, "TLS: out of memory");
                return -ENOMEM;
        }
        if (cfg->tls_cert_file[0]) {
                r = read_pem(cfg->tls_cert_file, &t->cert, err, "TLS_CERT_FILE");
                if (r == 0)
                        r = read_pem(cfg->tls_key_file, &t->key, err, "TLS_KEY_FILE");
                if (r < 0)
                        goto fail;
                /* Each file on its own first: gnutls_certificate_set_x509_key_mem2 leaks what it
                 * parsed when a certificate does not decode (GnuTLS 3.7.9). */
                gnutls_x509_crt_t *crts = NULL;
                unsigned n_crts = 0;
                r = import_all(&t->cert, CHAIN_MAX, &crts, &n_crts);
                if (r >= 0)
                        free_crts(crts, n_crts);
                if (r < 0) {
                        err_fail(err, HXS_ERR_INVALID, -EINVAL, "TLS_CERT_FILE: %s: %s", cfg->tls_cert_file,
                                 r == GNUTLS_E_NO_CERTIFICATE_FOUND || r == GNUTLS_E_CERTIFICATE_LIST_UNSORTED ?
                                 "not 1 to 16 PEM certificates" : gnutls_strerror(r));
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
                        err_fail(err, HXS_ERR_INVALID, -EINVAL, "TLS_KEY_FILE: %s: %s (an unencrypted PEM key is needed)",
                                 cfg->tls_key_file, gnutls_strerror(r));
                        r = -EINVAL;
                        goto fail;
                }
                /* Does the key belong to the certificate? GnuTLS checks when both are set. */
                if (gnutls_certificate_allocate_credentials(&cred) < 0) {
                        err_fail(err, HXS_ERR_INVALID, -ENOMEM, "TLS: out of memory");
                        r = -ENOMEM;
                        goto fail;
                }
                r = gnutls_certificate_set_x509_key_mem2(cred, &t->cert, &t->key, GNUTLS_X509_FMT_PEM, NULL, 0);
                gnutls_certificate_free_credentials(cred);
                if (r < 0) {
                        err_fail(err, HXS_ERR_INVALID, -EINVAL, "TLS_CERT_FILE, TLS_KEY_FILE: %s and %s: %s", cfg->tls_cert_file,
                                 cfg->tls_key_file, gnutls_strerror(r));
                        r = -EINVAL;
                        goto fail;
                }
        }
        r = own_trust_domain(cfg, t, err);
        if (r < 0)
                goto fail;
        r = bundles_parse(cfg->spiffe_trust_bundles, &bl, err);
        if (r < 0)
                goto fail;
        for (size_t i = 0; i < bl.n; i++) {
                r = load_bundle(t, "SPIFFE_TRUST_BUNDLES", bl.e[i].path, bl.e[i].td, err);
                if (r < 0)
                        goto fail;
        }
        if (cfg->tls_client_ca_file[0]) {
                r = load_bundle(t, "TLS_CLIENT_CA_FILE", cfg->tls_client_ca_file, NULL, err);
                if (r < 0)
                        goto fail;
        }
        bundles_free(&bl);
        *ret = t;
        return 0;
fail:
        bundles_free(&bl);
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

        if (!t || !t->cert.data)
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

/* "prod.example (2 CAs), partner.example (1 CA)" */
static void domains_text(const tls_state *t, char *buf, size_t cap)
{
        size_t o = 0;
        buf[0] = '\0';
        for (size_t i = 0; t && i < t->n_domains && o < cap; i++) {
                int n = snprintf(buf + o, cap - o, "%s%s (%u CA%s)", i ? ", " : "", t->domains[i].name,
                                 t->domains[i].n_cas, t->domains[i].n_cas == 1 ? "" : "s");
                if (n < 0)
                        break;
                o += (size_t)n;
        }
        if (o >= cap && cap > 4)
                memcpy(buf + cap - 4, "...", 4);
}

int tls_open(server *srv, hxs_error *err)
{
        char domains[1024];
        const hxs_config *cfg = &srv->cfg;

        if (!cfg->tls_cert_file[0] && !cfg->spiffe_trust_bundles[0]) {
                /* nothing to load; still, a bad value must not pass unnoticed */
                const char *rule = NULL;
                if (cfg->spiffe_trust_domain[0] &&
                    (strncmp(cfg->spiffe_trust_domain, "spiffe://", 9) == 0 ||
                     trust_domain_check(cfg->spiffe_trust_domain, strlen(cfg->spiffe_trust_domain), &rule) < 0))
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SPIFFE_TRUST_DOMAIN",
                                              "SPIFFE_TRUST_DOMAIN: \"%.200s\": %s", cfg->spiffe_trust_domain,
                                              rule ? rule : "write the trust domain without spiffe://");
                return 0;
        }
        int r = state_load(cfg, &srv->tls, err);
        if (r < 0)
                return r;
        current = srv->tls;
        if (srv->tls->n_domains) {
                domains_text(srv->tls, domains, sizeof(domains));
                log_line("start", "trust bundles: %s; own trust domain %s", domains,
                         srv->tls->own_td[0] ? srv->tls->own_td : "unknown");
        }
        return 0;
}

bool tls_enabled(const server *srv)
{
        return srv->tls && srv->tls->cert.data;
}

bool tls_mutual(const server *srv)
{
        return tls_enabled(srv) && srv->tls->n_domains > 0;
}

bool tls_has_bundles(const server *srv)
{
        return srv->tls && srv->tls->n_domains > 0;
}

bool tls_has_bundle(const server *srv, const char *td)
{
        return domain_find(srv->tls, td) != NULL;
}

void *tls_cert_callback(void)
{
        return (void *)cert_callback;
}

const char *tls_mhd_trust(const server *srv)
{
        return tls_enabled(srv) ? srv->tls->ca_for_mhd : NULL;
}

void tls_reload(server *srv)
{
        tls_state *t = NULL;
        hxs_error err = { 0 };
        char done[512];

        if (!srv->tls) {
                log_line("reload", "SIGHUP: %s; other settings are read once, at start",
                         "no TLS and no trust bundles configured: nothing to reload");
                return;
        }
        if (state_load(&srv->cfg, &t, &err) < 0) {
                /* the old certificates stay */
                log_line("reload", "SIGHUP: keeping the current certificates: %s", err.message);
                return;
        }
        /* MHD keeps the start-time bundle's pointer: it stays with the new state. */
        char *keep = srv->tls->ca_for_mhd;
        srv->tls->ca_for_mhd = NULL;
        free(t->ca_for_mhd);
        t->ca_for_mhd = keep;
        t->reloads = srv->tls->reloads + 1;
        state_free(srv->tls);
        srv->tls = t;
        current = t;
        char domains[600];
        domains_text(t, domains, sizeof(domains));
        snprintf(done, sizeof(done), "certificates reloaded (%u since start)%s%s", t->reloads,
                 domains[0] ? "; trust bundles: " : "", domains);
        log_line("reload", "SIGHUP: %s; other settings are read once, at start", done);
}

void tls_close(server *srv)
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

/* Does the leaf name TLS client authentication in its extended key usage? 1 yes,
 * 0 it names others, -1 it has none. */
static int leaf_client_auth(gnutls_x509_crt_t crt)
{
        bool any = false;
        for (unsigned i = 0;; i++) {
                char oid[128];
                size_t sz = sizeof(oid);
                unsigned critical = 0;
                int r = gnutls_x509_crt_get_key_purpose_oid(crt, i, oid, &sz, &critical);
                if (r == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
                        return any ? 0 : -1;
                if (r < 0)
                        return 0; /* unreadable: not the client purpose */
                any = true;
                if (strcmp(oid, GNUTLS_KP_TLS_WWW_CLIENT) == 0)
                        return 1;
        }
}

/*
 * An X509-SVID presented by a client (crts[0] the leaf, then what it sent of its
 * chain): its one SPIFFE ID into ret, verified against the CAs of that ID's trust
 * domain only. -EACCES with err saying why otherwise.
 */
static int verify_svid(const tls_state *t, gnutls_x509_crt_t *crts, unsigned n, char *ret, size_t cap,
                       hxs_error *err)
{
        unsigned critical = 0, status = 0, usage = 0;
        uri_sans *u = NULL;
        char td[SPIFFE_TD_MAX + 1];
        int r = -EACCES;

        ret[0] = '\0';
        if (gnutls_x509_crt_get_ca_status(crts[0], &critical) > 0) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate is a CA certificate");
                return -EACCES;
        }
        int ca = leaf_client_auth(crts[0]);
        if (ca < 0) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate has no extended key usage: an X509-SVID used "
                         "by a client must name id-kp-clientAuth");
                return -EACCES;
        }
        if (ca == 0) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate is not for TLS client authentication");
                return -EACCES;
        }
        if (gnutls_x509_crt_get_key_usage(crts[0], &usage, &critical) >= 0 &&
            (usage & (GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN))) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate may sign certificates (key usage keyCertSign "
                         "or cRLSign): not an X509-SVID leaf");
                return -EACCES;
        }
        u = malloc(sizeof(*u));
        if (!u) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "out of memory");
                return -ENOMEM;
        }
        if (cert_uris(crts[0], u) < 0 && u->n <= 1) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate has an unreadable or over-long subject alternative name");
                goto out;
        }
        if (u->n > 1) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate has more than one URI SAN (one SPIFFE ID is required)");
                goto out;
        }
        if (u->n == 0) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate has no URI SAN (no SPIFFE ID)");
                goto out;
        }
        if (memchr(u->v[0], '\0', u->len[0]) || spiffe_id_check(u->v[0], u->len[0], NULL) < 0 ||
            spiffe_trust_domain(u->v[0], u->len[0], td, sizeof(td)) < 0) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate's URI SAN is not a valid SPIFFE ID");
                goto out;
        }
        if (u->len[0] >= cap) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate's SPIFFE ID is too long");
                goto out;
        }
        const trust_domain *d = domain_find(t, td);
        if (!d) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate's trust domain %s has no trust bundle here "
                         "(SPIFFE_TRUST_BUNDLES, TLS_CLIENT_CA_FILE)", td);
                goto out;
        }
        gnutls_typed_vdata_st vdata = { .type = GNUTLS_DT_KEY_PURPOSE_OID,
                                        .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT };
        if (gnutls_x509_trust_list_verify_crt2(d->list, crts, n, &vdata, 1, 0, &status, NULL) < 0) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate does not verify");
                goto out;
        }
        if (status != 0) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "%s%s%s", status_reason(status),
                         status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA) ?
                         " of its trust domain " : "",
                         status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA) ? td : "");
                goto out;
        }
        memcpy(ret, u->v[0], u->len[0] + 1);
        r = 0;
out:
        free(u);
        return r;
}

int tls_peer_id(server *srv, struct MHD_Connection *conn, char *ret, size_t cap, hxs_error *err)
{
        const union MHD_ConnectionInfo *ci;
        gnutls_session_t session;
        gnutls_x509_crt_t crts[CHAIN_MAX] = { 0 };
        const gnutls_datum_t *peers;
        unsigned n = 0;
        int r = -EACCES;

        ret[0] = '\0';
        if (!tls_mutual(srv)) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "mTLS is not configured");
                return -EACCES;
        }
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        if (!ci || !ci->tls_session) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "no TLS session");
                return -EACCES;
        }
        session = ci->tls_session;
        if (gnutls_certificate_type_get(session) != GNUTLS_CRT_X509) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate is not X.509");
                return -EACCES;
        }
        peers = gnutls_certificate_get_peers(session, &n);
        if (!peers || n == 0) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "no client certificate");
                return -EACCES;
        }
        if (n > CHAIN_MAX) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate chain is too long");
                return -EACCES;
        }
        for (unsigned i = 0; i < n; i++) {
                if (gnutls_x509_crt_init(&crts[i]) < 0 ||
                    gnutls_x509_crt_import(crts[i], &peers[i], GNUTLS_X509_FMT_DER) < 0) {
                        err_fail(err, HXS_ERR_INVALID, -EACCES, "the client certificate does not parse");
                        goto out;
                }
        }
        r = verify_svid(srv->tls, crts, n, ret, cap, err);
out:
        for (unsigned i = 0; i < n && i < CHAIN_MAX; i++)
                if (crts[i])
                        gnutls_x509_crt_deinit(crts[i]);
        return r;
}

int tls_verify_forwarded(server *srv, const xfcc_client *x, char *ret, size_t cap, hxs_error *err)
{
        gnutls_x509_crt_t *chain = NULL, *leaf = NULL;
        unsigned n_chain = 0, n_leaf = 0;
        int r = -EACCES;

        ret[0] = '\0';
        if (!tls_has_bundles(srv)) {
                err_fail(err, HXS_ERR_INVALID, -EACCES, "no trust bundles are configured to verify it (SPIFFE_TRUST_BUNDLES, "
                         "TLS_CLIENT_CA_FILE)");
                return -EACCES;
        }
        if (x->chain) {
                gnutls_datum_t d = { (unsigned char *)x->chain, (unsigned)x->chain_len };
                if (import_all(&d, CHAIN_MAX, &chain, &n_chain) < 0) {
                        err_fail(err, HXS_ERR_INVALID, -EACCES, "Chain is not 1 to %d PEM certificates", CHAIN_MAX);
                        goto out;
                }
        }
        if (x->cert) {
                gnutls_datum_t d = { (unsigned char *)x->cert, (unsigned)x->cert_len };
                if (import_all(&d, 1, &leaf, &n_leaf) < 0) {
                        err_fail(err, HXS_ERR_INVALID, -EACCES, "Cert is not one PEM certificate");
                        goto out;
                }
                if (chain && !gnutls_x509_crt_equals(chain[0], leaf[0])) {
                        err_fail(err, HXS_ERR_INVALID, -EACCES, "Cert is not the first certificate of Chain");
                        goto out;
                }
        }
        r = chain ? verify_svid(srv->tls, chain, n_chain, ret, cap, err) :
                    verify_svid(srv->tls, leaf, n_leaf, ret, cap, err);
out:
        if (chain)
                free_crts(chain, n_chain);
        if (leaf)
                free_crts(leaf, n_leaf);
        return r;
}
