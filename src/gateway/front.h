/* front.h — drover-gateway's HTTP server (front.c): the inference routes,
 * authenticated with the head's tokens (follow.h), served by the shared
 * gateway code (gateway.h). */
#ifndef DRV_GW_FRONT_H
#define DRV_GW_FRONT_H

#include "common/error.h"
#include "gateway/follow.h"
#include "gateway/gateway.h"

typedef struct drv_gw_front drv_gw_front_t;

/* Listen on "HOST:PORT" (IPv4 or [IPv6]; port 0: any) with threads MHD
 * threads. */
drv_gw_front_t *drv_gw_front_create(drv_gateway_t *g, drv_gw_follow_t *f, const char *listen,
                                    int threads, drv_error_t *err);
int drv_gw_front_port(const drv_gw_front_t *fr);
/* Stop serving (after drv_gateway_stop answered what it held). Accepts NULL. */
void drv_gw_front_destroy(drv_gw_front_t *fr);

#endif
