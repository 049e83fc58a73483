/* tls.h — droverd's own certificates (`droverd --tls`): on first start a CA
 * and a server certificate in DATA_DIR/tls/ (ca.crt, ca.key, server.crt,
 * server.key, ca.hash; keys mode 0600), made with libcrypto. The server
 * certificate is made again (same CA) when it is missing, has less than a
 * third of its life left, or lacks one of the names asked for: at start,
 * and while running through head/tls_renew.h. */
#ifndef DRV_HEAD_TLS_H
#define DRV_HEAD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define DRV_TLS_CA_DAYS 3650
#define DRV_TLS_SERVER_DAYS 365

/* names: host names or IP addresses for the server certificate's SANs
 * ("localhost" and 127.0.0.1 are always added). Fills *renewed with 1 when
 * a server certificate was made this time. */
int drv_tls_auto(const char *dir, const char *const *names, size_t nnames, int *renewed,
                 drv_error_t *err);

/* The same with the server certificate's life in seconds (a certificate
 * is made again when less than a third of its life is left). */
int drv_tls_auto_life(const char *dir, const char *const *names, size_t nnames, long life_s,
                      int *renewed, drv_error_t *err);

/* Several --tls heads on one PostgreSQL store (store_url) share one CA
 * (store/pg_ca.h): this head offers its CA in dir (ca.crt, ca.key; made
 * now when it has none) and takes the database's. A head without a CA of
 * its own writes the database's into dir (server.crt then goes: the next
 * drv_tls_auto* issues one under it); a head whose own CA differs is
 * refused (its agents pin that CA): remove ca.crt and ca.key to take the
 * shared one. *taken: 1 when the CA came from another head. */
int drv_tls_share_ca(const char *dir, const char *store_url, int *taken, drv_error_t *err);

/* 0 when cert_pem's first certificate goes with key_pem; -1 with err. */
int drv_tls_pair_ok(const char *cert_pem, const char *key_pem, drv_error_t *err);
/* The notAfter of cert_pem's first certificate (seconds since the epoch; -1: unreadable). */
int64_t drv_tls_not_after(const char *cert_pem);

/* The whole of a (small) file, NUL-terminated; NULL with err filled. */
char *drv_tls_read_file(const char *path, drv_error_t *err);

#endif

/* What droverd serves TLS with: the certificate chain and key (PEM), the CA
 * clients pin (the last certificate of the chain; DATA_DIR/tls/ca.crt with
 * --tls), its pin, and a file holding that CA (for local agents). */
typedef struct drv_tls_material {
    char *cert_pem, *key_pem, *ca_pem;
    char ca_hash[80];
    char ca_file[600];
    int renewed;   /* --tls: the server certificate was made by this load */
} drv_tls_material_t;

/* --tls (auto: made in DATA_DIR/tls/ for the hosts of listen, advertise and
 * gateway_listen, the server certificate living life_s seconds; 0: the
 * default DRV_TLS_SERVER_DAYS) or --tls-cert/--tls-key (cert and key
 * given). Called again while running (head/tls_renew.h) it renews. */
int drv_tls_load(const char *data_dir, bool autotls, const char *cert, const char *key,
                 const char *listen, const char *advertise, const char *gateway_listen,
                 long life_s, drv_tls_material_t *m, drv_error_t *err);
void drv_tls_material_free(drv_tls_material_t *m);
