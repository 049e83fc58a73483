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

/* Fill pool p's nodes on their way (provisioning) with the requests not
 * yet done[], one node after another; how many they hold. */
static size_t fill_coming(const drv_nas_pool_t *p, const drv_sched_request_t *reqs, size_t n,
                          bool *done)
{
    size_t held = 0;
    for (size_t j = 0; j < p->n_nodes; j++)
        if (p->nodes[j].state == DRV_NAS_NODE_PROVISIONING && p->nodes[j].type)
            held += (size_t)drv_nas_node_fill(p->nodes[j].type, reqs, n, done);
    return held;
}

static bool lists_below(const drv_nas_want_t *w, int p)
{
    for (size_t k = 1; k < w->n_pools; k++)
        if (w->pools[k] == p)
            return true;
    return false;
}

/* hint[i]: a lower nodepool of want i's list whose nodes on their way
 * would hold it (it overflowed there on an earlier pass) when those of its
 * first would not; -1 otherwise. Two rounds over the nodepools: first
 * their nodes on the way take the replicas that list them first; then,
 * after those, the replicas still without one that list them lower. So a
 * replica waits for the node on its way instead of making its first
 * nodepool provision another once it can again (a backoff ran out), and
 * the hinted replicas of a nodepool fit its nodes on the way together.
 * Scratch: taken, done (n_wants), reqs, idx (n_wants). */
static void hints(const drv_nas_pool_t *pools, size_t n_pools, const drv_nas_want_t *wants,
                  size_t n_wants, int *hint, bool *taken, bool *done, drv_sched_request_t *reqs,
                  size_t *idx)
{
    for (size_t i = 0; i < n_wants; i++) {
        hint[i] = -1;
        taken[i] = false;
    }
    for (int round = 0; round < 2; round++)
        for (size_t p = 0; p < n_pools; p++) {
            size_t nr = 0, n_first = 0;
            for (size_t i = 0; i < n_wants; i++)
                if (wants[i].n_pools > 0 && (size_t)wants[i].pools[0] == p &&
                    (round == 0 || (taken[i] && hint[i] < 0))) {
                    idx[nr] = i;
                    reqs[nr++] = wants[i].req;
                }
            n_first = nr;
            for (size_t i = 0; round == 1 && i < n_wants; i++)
                if (!taken[i] && lists_below(&wants[i], (int)p)) {
                    idx[nr] = i;
                    reqs[nr++] = wants[i].req;
                }
            if (nr == 0 || (round == 1 && nr == n_first))
                continue;
            memset(done, 0, nr * sizeof *done);
            if (fill_coming(&pools[p], reqs, nr, done) == 0)
                continue;
            for (size_t m = round == 0 ? 0 : n_first; m < nr; m++) {
                if (!done[m])
                    continue;
                taken[idx[m]] = true;
                if (round == 1)
                    hint[idx[m]] = (int)p;
            }
        }
}

/* w's list as tried: its hint first (when it has one), then its nodepools. */
static size_t list_len(const drv_nas_want_t *w, int hint)
{
    return w->n_pools + (hint >= 0);
}

static int list_at(const drv_nas_want_t *w, int hint, size_t k)
{
    return hint < 0 ? w->pools[k] : k == 0 ? hint : w->pools[k - 1];
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
    /* a replica moves at most once per entry of its list (with its hint) */
    move_t *moves = calloc(n_wants * (DRV_NAS_MAX_PRIO + 1) + 1, sizeof *moves);
    int *hint = calloc(n_wants + 1, sizeof *hint);
    int *gangs = calloc(n_wants + 1, sizeof *gangs);
    size_t n_moves = 0;
    int rc = -1;
    if (!saved || !dirty || !pos || !idx || !cov || !pcov || !reqs || !moves || !hint ||
        !gangs) {
        drv_err_internal(err, "out of memory");
        goto done;
    }
    for (size_t p = 0; p < n_pools; p++) {
        saved[p] = *pools[p].state;
        dirty[p] = true;
    }
    hints(pools, n_pools, wants, n_wants, hint, cov, pcov, reqs, idx);
    memset(cov, 0, n_wants * sizeof *cov);
    for (;;) {
        for (size_t p = 0; p < n_pools; p++) {
            if (!dirty[p])
                continue;
            size_t nr = 0;
            for (size_t i = 0; i < n_wants; i++)
                if (wants[i].n_pools > 0 && (size_t)list_at(&wants[i], hint[i], pos[i]) == p) {
                    idx[nr] = i;
                    gangs[nr] = wants[i].gang;
                    reqs[nr++] = wants[i].req;
                }
            *pools[p].state = saved[p];
            if (drv_nas_decide_gangs(pools[p].cfg, pools[p].state, now, pools[p].nodes,
                                     pools[p].n_nodes, reqs, gangs, nr, pcov, &out[p],
                                     err) < 0) {
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
            if (cov[i] || pos[i] + 1 >= list_len(&wants[i], hint[i]))
                continue;
            int from = list_at(&wants[i], hint[i], pos[i]);
            int to = list_at(&wants[i], hint[i], pos[i] + 1);
            pos[i]++;
            dirty[from] = dirty[to] = true;
            moved = true;
            if (hint[i] >= 0 && pos[i] == 1)
                continue;   /* back to the top of its list: not an overflow */
            drv_nas_uncovered_t why =
                drv_nas_why_uncovered(pools[from].cfg, out[from].live_after, &wants[i].req);
            size_t m = 0;
            while (m < n_moves &&
                   !(moves[m].from == from && moves[m].to == to && moves[m].why == why))
                m++;
            if (m == n_moves)
                moves[n_moves++] = (move_t){.from = from, .to = to, .why = why};
            moves[m].count++;
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
            at[i] = wants[i].n_pools ? list_at(&wants[i], hint[i], pos[i]) : -1;
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
    free(hint);
    free(gangs);
    return rc;
}
