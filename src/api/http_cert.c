/* http_cert.c — see http_cert.h. */
#include "api/http_cert.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHAIN 8

typedef struct certset {
    gnutls_pcert_st pcert[MAX_CHAIN];
    unsigned int n;
    gnutls_privkey_t key;
    struct certset *older;   /* replaced ones, newest first */
} certset_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static certset_t *g_cur;

static void certset_free(certset_t *cs)
{
    for (unsigned int i = 0; i < cs->n; i++)
        gnutls_pcert_deinit(&cs->pcert[i]);
    if (cs->key)
        gnutls_privkey_deinit(cs->key);
    free(cs);
}

int drv_http_cert_set(const char *cert_pem, const char *key_pem, drv_error_t *err)
{
    certset_t *cs = calloc(1, sizeof *cs);
    if (!cs)
        return drv_err_internal(err, "out of memory");
    gnutls_datum_t c = {(unsigned char *)cert_pem, (unsigned int)strlen(cert_pem)};
    gnutls_datum_t k = {(unsigned char *)key_pem, (unsigned int)strlen(key_pem)};
    cs->n = MAX_CHAIN;
    int r = gnutls_pcert_list_import_x509_raw(cs->pcert, &cs->n, &c, GNUTLS_X509_FMT_PEM, 0);
    if (r < 0) {
        cs->n = 0;
        certset_free(cs);
        return drv_err(err, 400, "invalid", "tls", "the API's TLS certificate does not "
                       "parse: %s", gnutls_strerror(r));
    }
    if ((r = gnutls_privkey_init(&cs->key)) < 0 ||
        (r = gnutls_privkey_import_x509_raw(cs->key, &k, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        certset_free(cs);
        return drv_err(err, 400, "invalid", "tls", "the API's TLS key does not parse: %s",
                       gnutls_strerror(r));
    }
    pthread_mutex_lock(&g_mu);
    cs->older = g_cur;
    g_cur = cs;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

int drv_http_cert_have(void)
{
    pthread_mutex_lock(&g_mu);
    int have = g_cur != NULL;
    pthread_mutex_unlock(&g_mu);
    return have;
}

int drv_http_cert_retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
                           const gnutls_pk_algorithm_t *algos, int nalgos,
                           gnutls_pcert_st **pcert, unsigned int *npcert,
                           gnutls_privkey_t *key)
{
    (void)s, (void)req_ca_dn, (void)nreqs, (void)algos, (void)nalgos;
    pthread_mutex_lock(&g_mu);
    certset_t *cs = g_cur;
    if (cs) {
        *pcert = cs->pcert;
        *npcert = cs->n;
        *key = cs->key;
    }
    pthread_mutex_unlock(&g_mu);
    return cs ? 0 : -1;
}

void drv_http_cert_clear(void)
{
    pthread_mutex_lock(&g_mu);
    certset_t *cs = g_cur;
    g_cur = NULL;
    pthread_mutex_unlock(&g_mu);
    while (cs) {
        certset_t *o = cs->older;
        certset_free(cs);
        cs = o;
    }
}
