/* logserver.h — the agent's small HTTP endpoint for replica logs, read by
 * the head for `drover logs`. Guarded by a random key the agent reports in
 * its syncs (soft state on the head), so only the head can read. */
#ifndef DRV_LOGSERVER_H
#define DRV_LOGSERVER_H

#include "agent/supervisor.h"
#include "common/error.h"

typedef struct drv_logserver drv_logserver_t;

/* Listen on host:0 (an ephemeral port). */
drv_logserver_t *drv_logserver_create(drv_supervisor_t *sup, const char *host,
                                      drv_error_t *err);
void drv_logserver_destroy(drv_logserver_t *ls);
const char *drv_logserver_url(const drv_logserver_t *ls);  /* "http://HOST:PORT" */
const char *drv_logserver_key(const drv_logserver_t *ls);

#endif
