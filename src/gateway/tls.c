/* tls.c — see tls.h. */
#include "gateway/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdint.h>

/* like recv(2): >0 bytes, 0 at the end, -1 with errno (EAGAIN: try later) */
ssize_t drv_gw_tls_recv(SSL *ssl, void *p, size_t n)
{
    ERR_clear_error();
    int r = SSL_read(ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
    if (r > 0)
        return r;
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    errno = ECONNRESET;   /* a failed handshake (plaintext, TLS < 1.2, ...) ends here */
    return -1;
}

ssize_t drv_gw_tls_send(SSL *ssl, const void *p, size_t n)
{
    ERR_clear_error();
    int r = SSL_write(ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
    if (r > 0)
        return r;
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    errno = EPIPE;
    return -1;
}

/* a server context for cert_pem (chain) and key_pem: TLS 1.2 or later */
SSL_CTX *drv_gw_tls_ctx(const char *cert_pem, const char *key_pem, drv_error_t *err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    BIO *cb = BIO_new_mem_buf(cert_pem, -1), *kb = BIO_new_mem_buf(key_pem, -1);
    X509 *x = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    if (!ctx || !x || !k || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_use_certificate(ctx, x) != 1 || SSL_CTX_use_PrivateKey(ctx, k) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        drv_err(err, 400, "invalid", "tls", "the gateway's TLS certificate and key are not "
                "a usable PEM pair (%s)", ERR_reason_error_string(ERR_peek_last_error()));
        SSL_CTX_free(ctx);
        ctx = NULL;
        goto out;
    }
    for (X509 *extra; (extra = PEM_read_bio_X509(cb, NULL, NULL, NULL));)   /* the chain */
        if (SSL_CTX_add_extra_chain_cert(ctx, extra) != 1)
            X509_free(extra);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
out:
    ERR_clear_error();   /* the end of the chain reads as an error */
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(cb);
    BIO_free(kb);
    return ctx;
}
