/* list.c — see list.h. */
#include "api/list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "head/head.h"
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
    sb_add(&b, "{\"items\":[", 10);
    uint64_t maxseq = 0;
    int64_t n = 0;
    bool more = false;
    char last[256] = "";
    drv_state_rdlock(st);
    for (size_t i = drv_state_lower_bound(st, kind, page ? page : prefix);
         i < drv_state_count(st, kind); i++) {
        drv_obj_t *o = drv_state_at(st, kind, i);
        if (strncmp(o->key, prefix, plen) != 0)
            break;
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
        snprintf(last, sizeof last, "%s", o->key);
        n++;
    }
    drv_state_unlock(st);
    sb_add(&b, "]", 1);
    if (more) {
        json_t *tok = json_string(last);
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
