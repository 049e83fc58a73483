/* tls.h — TLS for the gateway's own HTTP server (serve.c): a server
 * context (TLS 1.2 or later) from PEM in memory, and SSL_read/SSL_write
 * with recv(2)/send(2)'s conventions for its non-blocking loop. */
#ifndef DRV_GW_TLS_H
#define DRV_GW_TLS_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

/* A server context for cert_pem (a chain: leaf first) and key_pem. NULL
 * with err when they are not a usable pair. */
SSL_CTX *drv_gw_tls_ctx(const char *cert_pem, const char *key_pem, drv_error_t *err);
/* >0 bytes, 0 at the peer's close_notify, -1 with errno: EAGAIN to try
 * again when the socket is ready, ECONNRESET/EPIPE for a failed handshake
 * (plaintext, TLS < 1.2, an unknown CA) or a broken connection. */
ssize_t drv_gw_tls_recv(SSL *ssl, void *p, size_t n);
ssize_t drv_gw_tls_send(SSL *ssl, const void *p, size_t n);

#endif
