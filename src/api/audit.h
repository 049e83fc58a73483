/* audit.h — the audit log of writes (issue 18, item 3): every request on a
 * write route made with a user's token — who (user, token id), what
 * (method, path, the kind it touched, the answer's status), when, from
 * where (the client's address) — kept durably in the head's store as
 * records of kind "audit" (state/state.h DRV_K_AUDIT), so it survives a
 * restart and a standby (PostgreSQL) follows it like any record. An entry
 * is queued right after the write it describes and commits in the same
 * group commit (no fsync of its own); the answer does not wait for it.
 *
 * Never in it: bodies, query strings, headers — so no secret (a token's,
 * a credential's, a join token's) can reach it. Bounded: it holds at most
 * max_entries + max_entries / 100 entries (10,100 by default) and never
 * fewer than the newest max_entries (younger than max_age_s): an add that
 * finds it past that trims it back to max_entries at once, the deletes in
 * the same batch (one removal of a prefix, one statement on PostgreSQL,
 * instead of a delete per add); entries older than max_age_s go at every
 * add. Read by admins at GET /v1/audit, newest first, filtered and
 * paged. All calls take the state lock themselves (never call under it). */
#ifndef DRV_API_AUDIT_H
#define DRV_API_AUDIT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "state/state.h"

#define DRV_AUDIT_MAX_ENTRIES 10000            /* default count bound (~1.5 KiB each in memory) */
#define DRV_AUDIT_MAX_AGE_S (90LL * 86400)     /* default age bound: 90 days */
#define DRV_AUDIT_PAGE_MAX 1000                /* ?limit's bound */

typedef struct drv_audit drv_audit_t;

typedef struct drv_audit_query {
    const char *user;        /* NULL: everyone's */
    const char *kind;        /* the path's first segment after /v1/ (clusters, nodes, ...) */
    int64_t since_ms;        /* entries at or after (0: all) */
    const char *page_token;  /* continue below this entry (a next_page_token) */
    size_t limit;
} drv_audit_query_t;

/* max_entries >= 1, max_age_s >= 60 (0: the defaults). */
drv_audit_t *drv_audit_create(drv_state_t *st, size_t max_entries, int64_t max_age_s);
void drv_audit_destroy(drv_audit_t *a);
/* One entry (durable with the next commit); trims the oldest. */
void drv_audit_add(drv_audit_t *a, const char *user, const char *token_id, const char *method,
                   const char *path, int status, const char *remote);
/* {"items": [...newest first], "next_page_token"?}; NULL and err (400) for
 * a page_token this log did not hand out. */
json_t *drv_audit_list(drv_audit_t *a, const drv_audit_query_t *q, drv_error_t *err);

#endif
