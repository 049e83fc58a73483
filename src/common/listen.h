/* listen.h — "HOST:PORT" listen addresses (IPv4, [IPv6] or localhost; port
 * 0: any free one), as droverd's --listen and --gateway-listen and
 * drover-gateway's --listen take them. Pure: no socket is opened.
 */
#ifndef DRV_LISTEN_H
#define DRV_LISTEN_H

#include <stdbool.h>

#include "common/error.h"

struct sockaddr_storage;

/* Parse listen into *ss; -1 with a 400 (field "listen") when malformed. */
int drv_listen_parse(const char *listen, struct sockaddr_storage *ss, drv_error_t *err);
/* Is listen a HOST:PORT drv_listen_parse accepts? */
int drv_listen_check(const char *listen, drv_error_t *err);
/* Would binding a and b collide: both parse to the same address and the
 * same port, and that port is not 0 (two port-0 addresses get two
 * different free ports)? false when either is malformed. */
bool drv_listen_same(const char *a, const char *b);

#endif
