/* http_gateway.h — libmicrohttpd glue for gateway jobs (http_gateway.c;
 * the flow is in gateway/gateway.h). http.c calls these. */
#ifndef DRV_HTTP_GATEWAY_H
#define DRV_HTTP_GATEWAY_H

#include <stddef.h>

#include "gateway/gateway.h"

struct MHD_Connection;

/* On the connection's thread, right after MHD_suspend_connection(): the
 * job takes the body (malloc'd, may be NULL) and goes to the gateway. */
void drv_gw_job_start(drv_gw_job_t *j, struct MHD_Connection *c, char *body, size_t len);
/* When the gateway resumed the connection: queue the answer, with the CORS
 * headers of origin (a head's, from http.c; NULL: none). */
int drv_gw_job_respond(drv_gw_job_t *j, struct MHD_Connection *c, const char *origin);
/* The CORS headers of an answer to origin, a head's (http.c; NULL: none). */
struct MHD_Response;
void drv_http_cors(struct MHD_Response *mr, const char *origin);

#endif
