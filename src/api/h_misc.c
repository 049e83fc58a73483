/* h_misc.c — health check and the reserved inference paths. */
#include <stdio.h>
#include <string.h>

#include "api/handlers.h"

int drv_h_healthz(drv_req_t *req, drv_resp_t *resp)
{
    drv_resp_json(resp, 200, json_pack("{s:s, s:s}", "status", "ok", "role",
                                       drv_api_role(req->head)));
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
