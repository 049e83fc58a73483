/* audit.h — the audit log of writes (issue 18, item 3): every request on a
 * write route made with a user's token — who (user, token), what (method,
 * path, answer status), when, from where (the client's address) — kept in
 * memory, the newest AUDIT_CAP, and read by admins at GET /v1/audit. Not
 * durable yet: a restart starts it empty. Thread-safe (its own mutex; no
 * I/O under it). */
#ifndef DRV_API_AUDIT_H
#define DRV_API_AUDIT_H

#include <jansson.h>
#include <stddef.h>

#define DRV_AUDIT_CAP 10000

typedef struct drv_audit drv_audit_t;

drv_audit_t *drv_audit_create(void);
void drv_audit_destroy(drv_audit_t *a);
void drv_audit_add(drv_audit_t *a, const char *user, const char *token_id, const char *method,
                   const char *path, int status, const char *remote);
/* The newest limit entries (newest first), of one user when user is not NULL. */
json_t *drv_audit_list(drv_audit_t *a, const char *user, size_t limit);

#endif
