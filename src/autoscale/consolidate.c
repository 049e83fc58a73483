/* consolidate.c — node consolidation decisions (see consolidate.h).
 *
 * Pure: every input is an argument; the snapshot is copied once before the
 * simulations change it, and after a failed try only the nodes it touched
 * are put back (one scratch allocation per call, made before anything
 * else). No clock, no I/O, no locks.
 */
#include "autoscale/consolidate.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t allocated_mib(const drv_sched_node_t *n)
{
    int64_t m = 0;
    for (int g = 0; g < n->n_gpus; g++)
        m += n->gpus[g].used_memory_mib;
    return m;
}

/* Simulate moving every replica of node cand elsewhere, on sim (a copy of
 * the snapshot). true when all fit; the moves go to out. */
static bool simulate(const drv_place_policy_t *pol, drv_sched_node_t *sim,
                     const drv_cons_node_t *info, size_t n_nodes, const drv_cons_replica_t *reps,
                     size_t n_reps, int cand, drv_cons_pick_t *out)
{
    out->n_moves = 0;
    sim[cand].schedulable = false;
    for (size_t r = 0; r < n_reps; r++) {
        if (reps[r].node != cand)
            continue;
        for (size_t j = 0; j < n_nodes; j++)
            sim[j].pool = (int)j == cand || info[j].pool < 0 ? -1 : reps[r].rank[info[j].pool];
        drv_sched_choice_t ch;
        char why[64];
        if (pol->place(sim, n_nodes, &reps[r].req, &ch, why, sizeof why) < 0)
            return false;
        drv_sched_commit(sim, &reps[r].req, &ch);
        out->replica[out->n_moves] = (int)r;
        out->target[out->n_moves] = ch.node;
        out->n_moves++;
    }
    return true;
}

static void describe_pick(const drv_sched_node_t *nodes, drv_cons_pick_t *out)
{
    char targets[160] = "";
    size_t len = 0;
    for (size_t k = 0; k < out->n_moves; k++) {
        bool seen = false;
        for (size_t j = 0; j < k && !seen; j++)
            seen = out->target[j] == out->target[k];
        if (seen || len >= sizeof targets - 1)
            continue;
        len += (size_t)snprintf(targets + len, sizeof targets - len, "%s%s", len ? ", " : "",
                                nodes[out->target[k]].id ? nodes[out->target[k]].id : "?");
    }
    snprintf(out->reason, sizeof out->reason,
             "node %s is under-used: its %zu replica(s) fit on %s; starting them there, the "
             "node goes once they are ready", nodes[out->node].id ? nodes[out->node].id : "?",
             out->n_moves, targets);
}

int drv_cons_pick(const drv_place_policy_t *policy, const drv_sched_node_t *nodes,
                  const drv_cons_node_t *info, size_t n_nodes, const drv_cons_pool_t *pools,
                  size_t n_pools, const drv_cons_replica_t *reps, size_t n_reps,
                  size_t n_pending, drv_cons_pick_t *out, drv_error_t *err)
{
    assert(out && (nodes || n_nodes == 0) && (reps || n_reps == 0));
    memset(out, 0, sizeof *out);
    out->node = -1;
    for (size_t i = 0; i < n_nodes; i++)
        if (info[i].pool >= (int)n_pools)
            return drv_err_invalid(err, "pool", "node %zu names pool %d of %zu", i,
                                   info[i].pool, n_pools);
    for (size_t r = 0; r < n_reps; r++)
        if (reps[r].node < 0 || (size_t)reps[r].node >= n_nodes || !reps[r].rank)
            return drv_err_invalid(err, "node", "replica %zu names node %d of %zu", r,
                                   reps[r].node, n_nodes);
    if (n_pending > 0) {
        snprintf(out->reason, sizeof out->reason,
                 "%zu replica(s) pending: no consolidation while room is short", n_pending);
        return 0;
    }
    const drv_place_policy_t *pol = policy ? policy : drv_place_policy(NULL);
    /* scratch: a copy of the snapshot, then per node: replicas, a not-ready
     * flag (as a count) and whether it was tried */
    size_t n = n_nodes ? n_nodes : 1;
    drv_sched_node_t *sim = malloc(n * sizeof *sim);
    int *cnt = calloc(3 * n, sizeof *cnt);
    if (!sim || !cnt) {
        free(sim);
        free(cnt);
        return drv_err_internal(err, "out of memory");
    }
    int *starting = cnt + n, *tried = cnt + 2 * n;
    for (size_t r = 0; r < n_reps; r++) {
        cnt[reps[r].node]++;
        starting[reps[r].node] += !reps[r].ready;
    }
    snprintf(out->reason, sizeof out->reason, "no node of a nodepool with consolidation can "
                                              "be emptied onto the others");
    for (int t = 0; t < DRV_CONS_MAX_TRIES; t++) {
        int best = -1;
        for (size_t i = 0; i < n_nodes; i++) {
            const drv_cons_pool_t *p = info[i].pool >= 0 ? &pools[info[i].pool] : NULL;
            if (tried[i] || !p || !p->enabled || p->live - 1 < p->min_nodes ||
                !nodes[i].schedulable || cnt[i] == 0 || cnt[i] > DRV_CONS_MAX_REPLICAS ||
                starting[i] > 0)
                continue;
            if (best < 0 || cnt[i] < cnt[best] ||
                (cnt[i] == cnt[best] && allocated_mib(&nodes[i]) < allocated_mib(&nodes[best])))
                best = (int)i;
        }
        if (best < 0)
            break;
        tried[best] = 1;
        if (t == 0)
            memcpy(sim, nodes, n_nodes * sizeof *sim);
        if (simulate(pol, sim, info, n_nodes, reps, n_reps, best, out)) {
            out->node = best;
            describe_pick(nodes, out);
            break;
        }
        /* undo the try: only the candidate and the nodes it committed to
         * changed (besides pool, which every placement sets afresh) */
        sim[best] = nodes[best];
        for (size_t k = 0; k < out->n_moves; k++)
            sim[out->target[k]] = nodes[out->target[k]];
        out->n_moves = 0;
    }
    free(sim);
    free(cnt);
    return 0;
}

drv_cons_step_t drv_cons_progress(const drv_cons_watch_t *w, char *why, size_t why_len)
{
    int64_t place_to = w->place_timeout_ms > 0 ? w->place_timeout_ms
                                               : DRV_CONS_DEFAULT_PLACE_TIMEOUT_MS;
    int64_t ready_to = w->ready_timeout_ms > 0 ? w->ready_timeout_ms
                                               : DRV_CONS_DEFAULT_READY_TIMEOUT_MS;
    if (!w->node_ok) {
        snprintf(why, why_len, "the node is no longer ready and schedulable; its replicas stay");
        return DRV_CONS_ABORT;
    }
    bool all = true;
    int unplaced = 0, ready = 0;
    for (size_t i = 0; i < w->n_deps; i++) {
        int need = w->deps[i].ready_before < w->deps[i].desired ? w->deps[i].ready_before
                                                                 : w->deps[i].desired;
        all &= w->deps[i].ready_new >= need;
        unplaced += w->deps[i].unplaced;
        ready += w->deps[i].ready_new;
    }
    if (all) {
        snprintf(why, why_len, "the new replicas are ready (%d ready elsewhere, as many as "
                               "before); stopping the old ones and removing the node", ready);
        return DRV_CONS_DONE;
    }
    if (unplaced > 0 && w->elapsed_ms >= place_to) {
        snprintf(why, why_len, "%d new replica(s) found no room within %llds; the old ones "
                               "stay", unplaced, (long long)(place_to / 1000));
        return DRV_CONS_ABORT;
    }
    if (w->elapsed_ms >= ready_to) {
        snprintf(why, why_len, "the new replicas were not ready within %llds; the old ones "
                               "stay", (long long)(ready_to / 1000));
        return DRV_CONS_ABORT;
    }
    return DRV_CONS_WAIT;
}
