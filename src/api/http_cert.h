/* http_cert.h — the certificate droverd's API listener (libmicrohttpd over
 * GnuTLS, api/http.c) serves, replaceable while it runs: each TLS handshake
 * asks for the current one (a GnuTLS certificate callback), so a renewed
 * certificate (head/tls_renew.h) is served to the next connection while
 * connections already open keep theirs. GnuTLS's callback carries no
 * context, so the current certificate is this module's one process-wide
 * value (one TLS API listener a process), guarded by its own mutex;
 * replaced ones are kept until drv_http_cert_clear (a session may still
 * point at them), a few kilobytes a renewal. */
#ifndef DRV_API_HTTP_CERT_H
#define DRV_API_HTTP_CERT_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "common/error.h"

/* Parse cert_pem (a chain, leaf first) and key_pem and serve them from the
 * next handshake on. -1 with err (the old one stays) when they do not parse. */
int drv_http_cert_set(const char *cert_pem, const char *key_pem, drv_error_t *err);
/* Whether one is set. */
int drv_http_cert_have(void);
/* The callback for MHD_OPTION_HTTPS_CERT_CALLBACK. */
int drv_http_cert_retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
                           const gnutls_pk_algorithm_t *algos, int nalgos,
                           gnutls_pcert_st **pcert, unsigned int *npcert,
                           gnutls_privkey_t *key);
/* Free every certificate set (after the listener stopped). */
void drv_http_cert_clear(void);

#endif
