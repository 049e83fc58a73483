/* h_misc.c — health check, the TLS CA, and the reserved inference paths. */
#include <stdio.h>
#include <string.h>

#include "api/handlers.h"
#include "state/head.h"

int drv_h_healthz(drv_req_t *req, drv_resp_t *resp)
{
    drv_resp_json(resp, 200, json_pack("{s:s, s:s}", "status", "ok", "role",
                                       drv_api_role(req->head)));
    return 0;
}

/* The CA (PEM) a client pins before it trusts this head: open, since a
 * client checks what it gets against the pin it was given out of band. */
int drv_h_tls_ca(drv_req_t *req, drv_resp_t *resp)
{
    const char *pem = req->head->cfg.tls_ca_pem;
    if (!pem) {
        drv_error_t err;
        drv_err_not_found(&err, "this head does not serve TLS (start droverd with --tls or "
                          "--tls-cert/--tls-key)");
        drv_resp_error(resp, &err);
        return 0;
    }
    char *b = strdup(pem);
    if (!b) {
        drv_error_t err;
        drv_err_internal(&err, "out of memory");
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_resp_raw(resp, 200, "application/x-pem-file", b, strlen(b));
    return 0;
}

int drv_h_predict_reserved(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    drv_err(&err, 503, "unavailable", "",
            "the inference gateway is not part of this droverd yet; no replica can serve");
    drv_resp_error(resp, &err);
    resp->retry_after = 30;
    return 0;
}
