/* overflow.c — nodepool priority with overflow (see overflow.h).
 *
 * Pure: the inputs are arguments; the only state written is each pool's
 * drv_nas_state_t, restored from a copy before every re-decision so that
 * the final one starts from the memory the pool had when called. One
 * scratch allocation per call, made before anything changes.
 */
#include "autoscale/overflow.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct move {
    int from, to;
    drv_nas_uncovered_t why;
    int count;
} move_t;

static void add_event(drv_nas_decision_t *d, int replicas, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_event(drv_nas_decision_t *d, int replicas, const char *fmt, ...)
{
    if (d->n_events == DRV_NAS_MAX_EVENTS)
        return;
    drv_nas_event_t *e = &d->events[d->n_events++];
    memset(e, 0, sizeof *e);
    snprintf(e->kind, sizeof e->kind, "overflow");
    e->replicas = replicas;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->reason, sizeof e->reason, fmt, ap);
    va_end(ap);
}

/* Why pool p cannot take them, as a readable phrase. */
static void why_text(const drv_nas_pool_t *p, drv_nas_uncovered_t why, char *buf, size_t n)
{
    switch (why) {
    case DRV_NAS_UNCOVERED_NO_FIT:
        snprintf(buf, n, "no instance type of %s holds them", p->name);
        break;
    case DRV_NAS_UNCOVERED_AT_MAX:
        snprintf(buf, n, "%s is at max_nodes (%d)", p->name, p->cfg->max_nodes);
        break;
    case DRV_NAS_UNCOVERED_BACKOFF:
        snprintf(buf, n, "every instance type of %s that would hold them is backing off "
                         "after a capacity error or provisioning timeout", p->name);
        break;
    }
}

static int check(const drv_nas_pool_t *pools, size_t n_pools, const drv_nas_want_t *wants,
                 size_t n_wants, drv_error_t *err)
{
    for (size_t p = 0; p < n_pools; p++)
        if (drv_nas_config_check(pools[p].cfg, err) < 0)
            return -1;
    for (size_t i = 0; i < n_wants; i++) {
        if (wants[i].n_pools > DRV_NAS_MAX_PRIO)
            return drv_err_invalid(err, "nodepools", "pending replica %zu lists %zu nodepools "
                                   "(at most %d)", i, wants[i].n_pools, DRV_NAS_MAX_PRIO);
        for (size_t k = 0; k < wants[i].n_pools; k++)
            if (wants[i].pools[k] < 0 || (size_t)wants[i].pools[k] >= n_pools)
                return drv_err_invalid(err, "nodepools", "pending replica %zu names nodepool "
                                       "index %d of %zu", i, wants[i].pools[k], n_pools);
    }
    return 0;
}

int drv_nas_decide_pools(const drv_nas_pool_t *pools, size_t n_pools, int64_t now,
                         const drv_nas_want_t *wants, size_t n_wants, drv_nas_decision_t *out,
                         int *at, bool *covered, drv_error_t *err)
{
    assert((pools || n_pools == 0) && (wants || n_wants == 0) && (out || n_pools == 0));
    if (check(pools, n_pools, wants, n_wants, err) < 0)
        return -1;
    drv_nas_state_t *saved = calloc(n_pools + 1, sizeof *saved);
    bool *dirty = calloc(n_pools + 1, sizeof *dirty);
    size_t *pos = calloc(n_wants + 1, sizeof *pos);
    size_t *idx = calloc(n_wants + 1, sizeof *idx);
    bool *cov = calloc(n_wants + 1, sizeof *cov);
    bool *pcov = calloc(n_wants + 1, sizeof *pcov);
    drv_sched_request_t *reqs = calloc(n_wants + 1, sizeof *reqs);
    move_t *moves = calloc(n_wants + 1, sizeof *moves);
    size_t n_moves = 0;
    int rc = -1;
    if (!saved || !dirty || !pos || !idx || !cov || !pcov || !reqs || !moves) {
        drv_err_internal(err, "out of memory");
        goto done;
    }
    for (size_t p = 0; p < n_pools; p++) {
        saved[p] = *pools[p].state;
        dirty[p] = true;
    }
    for (;;) {
        for (size_t p = 0; p < n_pools; p++) {
            if (!dirty[p])
                continue;
            size_t nr = 0;
            for (size_t i = 0; i < n_wants; i++)
                if (wants[i].n_pools > 0 && (size_t)wants[i].pools[pos[i]] == p) {
                    idx[nr] = i;
                    reqs[nr++] = wants[i].req;
                }
            *pools[p].state = saved[p];
            if (drv_nas_decide(pools[p].cfg, pools[p].state, now, pools[p].nodes,
                               pools[p].n_nodes, reqs, nr, pcov, &out[p], err) < 0) {
                for (size_t q = 0; q < n_pools; q++)
                    *pools[q].state = saved[q];
                goto done;
            }
            for (size_t j = 0; j < nr; j++)
                cov[idx[j]] = pcov[j];
            dirty[p] = false;
        }
        bool moved = false;
        for (size_t i = 0; i < n_wants; i++) {
            if (cov[i] || pos[i] + 1 >= wants[i].n_pools)
                continue;
            int from = wants[i].pools[pos[i]], to = wants[i].pools[pos[i] + 1];
            drv_nas_uncovered_t why =
                drv_nas_why_uncovered(pools[from].cfg, out[from].live_after, &wants[i].req);
            size_t m = 0;
            while (m < n_moves &&
                   !(moves[m].from == from && moves[m].to == to && moves[m].why == why))
                m++;
            if (m == n_moves)
                moves[n_moves++] = (move_t){.from = from, .to = to, .why = why};
            moves[m].count++;
            pos[i]++;
            dirty[from] = dirty[to] = true;
            moved = true;
        }
        if (!moved)
            break;
    }
    for (size_t m = 0; m < n_moves; m++) {
        const move_t *mv = &moves[m];
        char why[256];
        why_text(&pools[mv->from], mv->why, why, sizeof why);
        add_event(&out[mv->from], mv->count,
                  "%d pending replica(s) overflow to nodepool %s, next by priority: %s",
                  mv->count, pools[mv->to].name, why);
        add_event(&out[mv->to], mv->count,
                  "%d pending replica(s) overflow here from nodepool %s, higher by priority: %s",
                  mv->count, pools[mv->from].name, why);
    }
    for (size_t i = 0; i < n_wants; i++) {
        if (at)
            at[i] = wants[i].n_pools ? wants[i].pools[pos[i]] : -1;
        if (covered)
            covered[i] = cov[i];
    }
    rc = 0;
done:
    free(saved);
    free(dirty);
    free(pos);
    free(idx);
    free(cov);
    free(pcov);
    free(reqs);
    free(moves);
    return rc;
}
