/* tls_renew.h — droverd's certificates renewed while it runs (issue 18,
 * item 1): with --tls, a check every tenth of the server certificate's life
 * (at most daily) makes a new one under the same CA when less than a third
 * of its life is left (head/tls.h, written atomically, the key 0600), so
 * pins hold; with --tls-cert/--tls-key, the files are read again when their
 * modification time, size or inode changes (polled every poll_ms,
 * droverd --tls-poll-seconds, 10 s by default) and on SIGHUP. Either way the new certificate goes into the running API
 * listener (api/http.h) and inference listener (head/gateway_link.h):
 * connections accepted from then on get it, open ones finish with theirs.
 * Runs on droverd's main thread (file I/O, no lock held). */
#ifndef DRV_HEAD_TLS_RENEW_H
#define DRV_HEAD_TLS_RENEW_H

#include <stdbool.h>
#include <stdint.h>

#include "api/http.h"
#include "common/error.h"
#include "head/gateway_link.h"

#define DRV_TLS_FILE_POLL_MS 10000

typedef struct drv_tls_renew drv_tls_renew_t;

typedef struct drv_tls_renew_cfg {
    const char *data_dir, *cert, *key;   /* cert/key: --tls-cert/--tls-key (NULL: --tls) */
    const char *listen, *advertise, *gateway_listen;
    long life_s;                         /* --tls: the server certificate's life (0: default) */
    int64_t poll_ms;                     /* --tls-cert: the files' poll (0: DRV_TLS_FILE_POLL_MS) */
    const char *ca_hash;                 /* the pin served now (a change is logged) */
    drv_http_t *http;
    drv_gateway_link_t *gw;              /* NULL: no inference listener */
} drv_tls_renew_cfg_t;

/* The strings of cfg are kept by pointer. NULL on OOM. */
drv_tls_renew_t *drv_tls_renew_create(const drv_tls_renew_cfg_t *cfg);
/* How long until the next check (ms). */
int64_t drv_tls_renew_interval_ms(const drv_tls_renew_t *r);
/* A check (force: SIGHUP, read the files whatever their times): 1 when a
 * new certificate is served now, 0 when nothing changed, -1 with err when
 * it could not be made or read (the old one stays served). */
int drv_tls_renew_check(drv_tls_renew_t *r, bool force, drv_error_t *err);
void drv_tls_renew_destroy(drv_tls_renew_t *r);

#endif
