/* resolver.h — a server's address for the HTTP client (http_client.c,
 * drover-agent's and the drover CLI's): a name lookup that a stop request
 * or a deadline ends, with its answer cached.
 *
 * getaddrinfo() cannot be bounded or interrupted, and a head name whose DNS
 * hangs must not hang the agent (its sync loop, its SIGTERM handling). So:
 *  - an address literal ("10.0.0.5", "::1") is parsed once at create
 *    (AI_NUMERICHOST) and never looked up;
 *  - a name is looked up on a detached thread of its own; the caller waits
 *    for it in steps of at most 200 ms, checking its stop flag and deadline,
 *    and may give up: the lookup stays pending and the next call waits on
 *    the same one (so a hung resolver costs one thread, not one per try);
 *    destroy abandons it, and whichever of the two lets go last frees it;
 *  - the answer is cached for DRV_RESOLVER_TTL_MS, or until the caller says
 *    connecting to every address failed (drv_resolver_stale); when a fresh
 *    lookup fails, or has not answered within a second, the previous
 *    addresses (if any) are used rather than none (a slow lookup goes on
 *    and a later get takes its answer).
 *
 * Not thread-safe: one owner thread per resolver (the client's).
 */
#ifndef DRV_RESOLVER_H
#define DRV_RESOLVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"

#define DRV_RESOLVER_TTL_MS 60000
#define DRV_RESOLVER_MAX_ADDRS 8

typedef struct drv_resolver drv_resolver_t;

typedef struct drv_addr {
    struct sockaddr_storage sa;  /* ss_family is the socket's family */
    socklen_t len;
} drv_addr_t;

/* host without brackets ("::1", "head.example"), port numeric ("7480"). */
drv_resolver_t *drv_resolver_create(const char *host, const char *port, drv_error_t *err);
/* Abandons a lookup still running (it frees itself when it ends). NULL is fine. */
void drv_resolver_destroy(drv_resolver_t *r);

/* The addresses to try (1..DRV_RESOLVER_MAX_ADDRS) into out[], *n set: 0,
 * or -1 with msg ("cannot resolve NAME: ...") when the lookup failed, timed
 * out at deadline (monotonic ms) or *stop became true. stop may be NULL. */
int drv_resolver_get(drv_resolver_t *r, int64_t deadline, const atomic_bool *stop,
                     drv_addr_t *out, size_t *n, char *msg, size_t ml);

/* No address answered: look the name up again at the next get (address
 * literals are not looked up, so for them this does nothing). */
void drv_resolver_stale(drv_resolver_t *r);

#endif
