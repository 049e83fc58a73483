/* aws_index.c — see aws_index.h. Pure: owns no data; the caller's arrays. */
#include "provider/aws_index.h"

#include <stdlib.h>
#include <string.h>

bool drv_aws_live_state(const char *state)
{
    return strcmp(state, "terminated") != 0 && strcmp(state, "shutting-down") != 0;
}

static int key_cmp(const char *o1, const char *n1, const char *o2, const char *n2)
{
    int c = strcmp(o1, o2);
    return c ? c : strcmp(n1, n2);
}

int drv_aws_inst_cmp(const void *a, const void *b)
{
    const drv_ec2_instance_t *x = &((const drv_aws_inst_t *)a)->x,
                             *y = &((const drv_aws_inst_t *)b)->x;
    int c = key_cmp(x->owner, x->node, y->owner, y->node);
    return c ? c : strcmp(x->id, y->id);
}

int drv_aws_ref_cmp(const void *a, const void *b)
{
    const drv_node_ref_t *x = a, *y = b;
    return key_cmp(x->owner, x->node_id, y->owner, y->node_id);
}

/* First index of v (sorted) whose (owner, node[, id]) is not below the key
 * (id NULL: the node's first). */
static size_t inst_lower(const drv_aws_inst_t *v, size_t n, const char *owner, const char *node,
                         const char *id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const drv_ec2_instance_t *x = &v[mid].x;
        int c = key_cmp(x->owner, x->node, owner, node);
        if (c == 0 && id)
            c = strcmp(x->id, id);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

drv_aws_inst_t *drv_aws_inst_of_node(drv_aws_inst_t *v, size_t n, const char *owner,
                                     const char *node)
{
    for (size_t i = inst_lower(v, n, owner, node, NULL);
         i < n && key_cmp(v[i].x.owner, v[i].x.node, owner, node) == 0; i++)
        if (drv_aws_live_state(v[i].x.state))
            return &v[i];
    return NULL;
}

drv_aws_inst_t *drv_aws_inst_find(drv_aws_inst_t *v, size_t n, const char *owner,
                                  const char *node, const char *id)
{
    size_t i = inst_lower(v, n, owner, node, id);
    if (i < n && key_cmp(v[i].x.owner, v[i].x.node, owner, node) == 0 &&
        strcmp(v[i].x.id, id) == 0)
        return &v[i];
    return NULL;
}

drv_aws_inst_t *drv_aws_inst_insert(drv_aws_inst_t *v, size_t *n, const drv_aws_inst_t *in)
{
    size_t at = inst_lower(v, *n, in->x.owner, in->x.node, in->x.id);
    memmove(&v[at + 1], &v[at], (*n - at) * sizeof *v);
    v[at] = *in;
    (*n)++;
    return &v[at];
}

static size_t ref_lower(const drv_node_ref_t *v, size_t lo, size_t n, const char *owner,
                        const char *node)
{
    size_t hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_cmp(v[mid].owner, v[mid].node_id, owner, node) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool ref_at(const drv_node_ref_t *v, size_t n, size_t i, const char *owner,
                   const char *node)
{
    return i < n && key_cmp(v[i].owner, v[i].node_id, owner, node) == 0;
}

bool drv_aws_refs_has(const drv_node_ref_t *v, size_t n, const char *owner, const char *node)
{
    return ref_at(v, n, ref_lower(v, 0, n, owner, node), owner, node);
}

void drv_aws_refs_add(drv_node_ref_t *v, size_t *n, const char *owner, const char *node)
{
    size_t at = ref_lower(v, 0, *n, owner, node);
    memmove(&v[at + 1], &v[at], (*n - at) * sizeof *v);
    memset(&v[at], 0, sizeof *v);
    strncpy(v[at].owner, owner, sizeof v[at].owner - 1);
    strncpy(v[at].node_id, node, sizeof v[at].node_id - 1);
    (*n)++;
}

bool drv_aws_refs_remove(drv_node_ref_t *v, size_t *n, const char *owner, const char *node)
{
    size_t at = ref_lower(v, 0, *n, owner, node);
    if (!ref_at(v, *n, at, owner, node))
        return false;
    memmove(&v[at], &v[at + 1], (*n - at - 1) * sizeof *v);
    (*n)--;
    return true;
}

bool drv_aws_refs_walk(const drv_node_ref_t *v, size_t n, size_t *at, const char *owner,
                       const char *node)
{
    while (*at < n && key_cmp(v[*at].owner, v[*at].node_id, owner, node) < 0)
        (*at)++;
    return ref_at(v, n, *at, owner, node);
}

/* --- the listing merge --------------------------------------------------------------- */

typedef struct by_id {
    const char *id;
    size_t i;                    /* index in its array: ties in input order */
} by_id_t;

static int by_id_cmp(const void *a, const void *b)
{
    const by_id_t *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* The n ids at first, first + stride, ... with their indices, sorted by
 * id. NULL: no memory. */
static by_id_t *sort_ids(const char *first, size_t stride, size_t n)
{
    by_id_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        v[i] = (by_id_t){first + i * stride, i};
    qsort(v, n, sizeof *v, by_id_cmp);
    return v;
}

drv_aws_inst_t *drv_aws_merge_listing(const drv_aws_inst_t *old, size_t n_old, size_t acct,
                                      const drv_ec2_instance_t *listed, size_t n_listed,
                                      int64_t started_ms, int64_t now_ms, int64_t visible_ms,
                                      size_t *n_out)
{
    drv_aws_inst_t *nv = calloc(n_old + n_listed + 1, sizeof *nv);
    by_id_t *kid = NULL, *oid = NULL, *lid = NULL;
    if (!nv)
        goto error;
    /* keep other accounts' instances, ours launched recently, and ours
     * this listing may have missed (aws_index.h) */
    size_t k = 0;
    for (size_t i = 0; i < n_old; i++) {
        if (old[i].acct != acct || old[i].added_ms >= started_ms ||
            (old[i].added_ms > 0 && now_ms - old[i].added_ms < visible_ms))
            nv[k++] = old[i];
        else if (old[i].missed + 1 < DRV_AWS_MISSES_GONE) {
            nv[k] = old[i];
            nv[k++].missed++;
        }
    }
    const size_t kept = k;
    kid = sort_ids(nv[0].x.id, sizeof *nv, kept);
    oid = sort_ids(n_old ? old[0].x.id : NULL, sizeof *old, n_old);
    lid = sort_ids(n_listed ? listed[0].id : NULL, sizeof *listed, n_listed);
    if (!kid || !oid || !lid)
        goto error;
    size_t kp = 0, op = 0;
    for (size_t l = 0; l < n_listed;) {
        const char *id = lid[l].id;
        size_t last = lid[l].i;  /* of several listings of one id, the last wins */
        for (l++; l < n_listed && strcmp(lid[l].id, id) == 0; l++)
            last = lid[l].i;
        while (kp < kept && strcmp(kid[kp].id, id) < 0)
            kp++;
        bool dup = false;
        for (size_t j = kp; j < kept && strcmp(kid[j].id, id) == 0; j++) {
            nv[kid[j].i].x = listed[last];   /* the listing knows better than our guess */
            nv[kid[j].i].added_ms = 0;
            nv[kid[j].i].missed = 0;
            dup = true;
        }
        if (dup)
            continue;
        drv_aws_inst_t *in = &nv[k++];
        in->x = listed[last];
        in->acct = acct;
        /* carry orphan timers over */
        while (op < n_old && strcmp(oid[op].id, id) < 0)
            op++;
        for (size_t j = op; j < n_old && strcmp(oid[j].id, id) == 0; j++) {
            in->orphan_since_ms = old[oid[j].i].orphan_since_ms;
            in->terminate_sent_ms = old[oid[j].i].terminate_sent_ms;
        }
    }
    free(kid);
    free(oid);
    free(lid);
    qsort(nv, k, sizeof *nv, drv_aws_inst_cmp);
    *n_out = k;
    return nv;
error:
    free(kid);
    free(oid);
    free(lid);
    free(nv);
    return NULL;
}
