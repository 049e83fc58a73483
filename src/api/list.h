/* list.h — the one list implementation: objects of a kind whose keys start
 * with a prefix, filtered, paginated by key (?limit=&page_token=), answered
 * as {"items": [...], "next_page_token": "..."} from cached renderings. */
#ifndef DRV_LIST_H
#define DRV_LIST_H

#include "api/api.h"
#include "state/state.h"

typedef bool (*drv_list_filter_fn)(const drv_obj_t *o, void *ctx);

/* Reads ?limit= and ?page_token=; the caller checked the other arguments.
 * Takes the read lock itself. Always fills resp. */
int drv_list_prefix(drv_req_t *req, drv_resp_t *resp, drv_kind_t kind, const char *prefix,
                    drv_list_filter_fn filter, void *ctx);

/* The common front of a list handler: reject query arguments not in
 * allowed, honour ?all_users=true (admins only: 403 otherwise) and fill
 * prefix with the caller's key prefix ("user/", or "" for all users).
 * Returns 0, or -1 after answering with the error. `what` names the
 * objects for the 403 ("tokens"). */
int drv_list_scope(drv_req_t *req, drv_resp_t *resp, const char *const *allowed,
                   const char *what, char *prefix, size_t prefix_len);

#endif
