/* tls_renew.c — see tls_renew.h. */
#include "head/tls_renew.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "head/tls.h"

struct drv_tls_renew {
    drv_tls_renew_cfg_t cfg;
    drv_file_stamp_t cert_id, key_id;   /* --tls-cert/--tls-key as last read */
};

drv_tls_renew_t *drv_tls_renew_create(const drv_tls_renew_cfg_t *cfg)
{
    drv_tls_renew_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->cfg = *cfg;
    if (cfg->cert) {
        drv_file_stamp(cfg->cert, &r->cert_id);
        drv_file_stamp(cfg->key, &r->key_id);
    }
    return r;
}

int64_t drv_tls_renew_interval_ms(const drv_tls_renew_t *r)
{
    if (r->cfg.cert)
        return r->cfg.poll_ms > 0 ? r->cfg.poll_ms : DRV_TLS_FILE_POLL_MS;
    long life = r->cfg.life_s > 0 ? r->cfg.life_s : DRV_TLS_SERVER_DAYS * 86400L;
    int64_t ms = (int64_t)life * 100;   /* a tenth of its life */
    return ms > 86400000 ? 86400000 : ms < 1000 ? 1000 : ms;
}

int drv_tls_renew_check(drv_tls_renew_t *r, bool force, drv_error_t *err)
{
    const drv_tls_renew_cfg_t *c = &r->cfg;
    drv_file_stamp_t cid = {0, 0, 0}, kid = {0, 0, 0};
    if (c->cert) {
        bool changed = drv_file_stamp_changed(c->cert, &r->cert_id, &cid);
        changed = drv_file_stamp_changed(c->key, &r->key_id, &kid) || changed;
        if (!force && !changed)
            return 0;
    }
    drv_tls_material_t m;
    if (drv_tls_load(c->data_dir, !c->cert, c->cert, c->key, c->listen, c->advertise,
                     c->gateway_listen, c->life_s, &m, err) < 0)
        return -1;   /* (files half-written: the next poll tries again) */
    int rc = 0;
    if (c->cert || m.renewed || force) {
        if (drv_http_set_cert(c->http, m.cert_pem, m.key_pem, err) < 0 ||
            (c->gw && drv_gateway_link_set_cert(c->gw, m.cert_pem, m.key_pem, err) < 0)) {
            rc = -1;
            goto out;
        }
        if (c->cert) {
            r->cert_id = cid;
            r->key_id = kid;
        }
        if (c->ca_hash && strcmp(c->ca_hash, m.ca_hash) != 0)
            drv_warn("TLS: the new certificate's CA has pin %s, not %s: agents pinned to the "
                     "old one refuse it, and /v1/tls/ca serves the old CA until a restart",
                     m.ca_hash, c->ca_hash);
        int64_t na = drv_tls_not_after(m.cert_pem);
        drv_info("TLS: %s the server certificate (valid until %lld): new connections get it",
                 c->cert ? "read again" : m.renewed ? "renewed" : "reloaded", (long long)na);
        rc = 1;
    }
out:
    drv_tls_material_free(&m);
    return rc;
}

void drv_tls_renew_destroy(drv_tls_renew_t *r)
{
    free(r);
}
