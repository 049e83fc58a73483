/* controller.h — the head's control loop: node lifecycle, the local
 * provider, replica counts, placement and status roll-ups. */
#ifndef DRV_CONTROLLER_H
#define DRV_CONTROLLER_H

#include "common/error.h"
#include "state/head.h"

typedef struct drv_controller drv_controller_t;

/* Start the loop thread (tick every 250 ms, or at once when kicked). */
drv_controller_t *drv_controller_create(drv_head_t *head, drv_error_t *err);
void drv_controller_destroy(drv_controller_t *c);
/* Stop the local provider's agents (they stop their replicas), waiting up
 * to wait_ms; their nodes stay registered, and the next start restarts them. */
void drv_controller_stop_local_agents(drv_controller_t *c, int wait_ms);
/* One pass, on the caller's thread (tests). */
void drv_controller_tick(drv_controller_t *c);

#endif
