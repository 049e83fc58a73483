/* list.c — see list.h. */
#include "api/list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "state/head.h"
#include "store/store.h"

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf_t;

static void sb_add(sbuf_t *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (ncap < b->n + n + 1)
            ncap *= 2;
        char *ns = realloc(b->s, ncap);
        if (!ns)
            abort();
        b->s = ns;
        b->cap = ncap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

int drv_list_scope(drv_req_t *req, drv_resp_t *resp, const char *const *allowed,
                   const char *what, char *prefix, size_t prefix_len)
{
    drv_error_t err;
    bool all = false;
    if (drv_req_check_query(req, allowed, &err) < 0 ||
        drv_req_query_bool(req, "all_users", &all, &err) < 0) {
        drv_resp_error(resp, &err);
        return -1;
    }
    if (all && !req->who->admin) {
        drv_err(&err, 403, "permission_denied", "all_users", "only admins may list all %s",
                what);
        drv_resp_error(resp, &err);
        return -1;
    }
    snprintf(prefix, prefix_len, "%s%s", all ? "" : req->who->user, all ? "" : "/");
    return 0;
}

int drv_list_prefix(drv_req_t *req, drv_resp_t *resp, drv_kind_t kind, const char *prefix,
                    drv_list_filter_fn filter, void *ctx)
{
    drv_error_t err;
    int64_t limit = 100;
    if (drv_req_query_int(req, "limit", 1, 1000, &limit, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    const char *page = drv_req_query(req, "page_token");
    size_t plen = strlen(prefix);
    if (page && (strlen(page) > 255 || strncmp(page, prefix, plen) != 0)) {
        drv_err_invalid(&err, "page_token", "page_token is not one this list handed out");
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_state_t *st = req->head->state;
    sbuf_t b = {0};
    uint64_t maxseq = 0;
    int64_t n = 0;
    bool more = false;
    const drv_obj_t *last = NULL;
    /* the prefix's range ends where the prefix with its last byte bumped starts */
    char end_key[300];
    snprintf(end_key, sizeof end_key, "%s", prefix);
    if (plen)
        end_key[plen - 1]++;
    drv_state_rdlock(st);
    size_t first = drv_state_lower_bound(st, kind, page ? page : prefix);
    size_t end = plen ? drv_state_lower_bound(st, kind, end_key) : drv_state_count(st, kind);
    size_t need = 16;
    for (size_t i = first; i < end && (int64_t)(i - first) <= limit; i++)
        need += drv_state_at(st, kind, i)->rendered_len + 1;
    b.s = malloc(need + 320);
    b.cap = b.s ? need + 320 : 0;
    sb_add(&b, "{\"items\":[", 10);
    for (size_t i = first; i < end; i++) {
        drv_obj_t *o = drv_state_at(st, kind, i);
        if ((page && strcmp(o->key, page) <= 0) || (filter && !filter(o, ctx)))
            continue;
        if (n == limit) {
            more = true;
            break;
        }
        if (n)
            sb_add(&b, ",", 1);
        sb_add(&b, o->rendered, o->rendered_len);
        if (o->seq > maxseq)
            maxseq = o->seq;
        last = o;
        n++;
    }
    json_t *tok = more ? json_string(last->key) : NULL;
    drv_state_unlock(st);
    sb_add(&b, "]", 1);
    if (more) {
        char *t = drv_json_dump(tok, NULL);
        json_decref(tok);
        sb_add(&b, ",\"next_page_token\":", 19);
        sb_add(&b, t, strlen(t));
        free(t);
    }
    sb_add(&b, "}", 1);
    drv_resp_raw(resp, 200, "application/json", b.s, b.n);
    resp->wait_seq = maxseq > drv_store_committed(req->head->store) ? maxseq : 0;
    return 0;
}
