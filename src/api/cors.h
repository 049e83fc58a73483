/* cors.h — the web console across several heads (PostgreSQL; api/cors.c):
 * a console loaded from one head calls the API of another (the leader,
 * after its own head stood by or died), so every head allows the other
 * heads' origins — exactly those of their advertised URLs, never any
 * other: in CORS every head's of the heads table (a dead head's too, until
 * its row is dropped a day after it was last seen: its pages still call),
 * in the console's Content-Security-Policy the roster's (heads seen in the
 * last 60 s). On SQLite there is one head: same origin only, as before. */
#ifndef DRV_API_CORS_H
#define DRV_API_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "api/api.h"
#include "state/head.h"

/* What an answer to a head's origin exposes besides the safelisted headers. */
#define DRV_CORS_EXPOSE "X-Drover-Leader, ETag, Retry-After, Location"

/* Is origin ("http://host:port", as a browser sends it) a head's (one of
 * the heads table, dead or alive)? */
bool drv_cors_origin_ok(const drv_head_t *h, const char *origin);
/* The live heads' origins (the roster's), space-separated, into out ("" on
 * SQLite). */
void drv_cors_origins(const drv_head_t *h, char *out, size_t n);
/* OPTIONS (a browser's preflight): 204, with the methods and headers the
 * console sends when the origin is a head's (send_resp adds the origin). */
void drv_cors_preflight(const drv_req_t *req, drv_resp_t *resp);

#endif
