/* pg_ca.h — several `droverd --tls` heads on one PostgreSQL share one CA
 * (issue 17): the first head's generated CA (certificate and private key,
 * PEM) goes into the database's head_ca row (migration 4), and every other
 * head takes it from there and issues its own server certificate under it,
 * so that an agent pinned to the CA follows any head. The CA's key is then
 * in the database: protect the database as the secret it becomes (or give
 * every head --tls-cert/--tls-key signed by a CA of your own instead). */
#ifndef DRV_STORE_PG_CA_H
#define DRV_STORE_PG_CA_H

#include "common/error.h"

/* Offer (cert_pem, key_pem) as the heads' CA (INSERT ... ON CONFLICT DO
 * NOTHING, so two heads racing agree on one) and read the one the
 * database holds into *cert_out, *key_out (malloc'd). url: the store's
 * postgres:// URL; its own short connection. 0, or -1 with err. */
int drv_pg_ca_exchange(const char *url, const char *cert_pem, const char *key_pem,
                       char **cert_out, char **key_out, drv_error_t *err);

#endif
