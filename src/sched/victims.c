/* victims.c — preemption victims for a gang that does not fit: the
 * preemptible running jobs of lower priority to stop, the set that loses
 * the least work (GPU-seconds since each one's last checkpoint), then the
 * fewest, checked by placement; and the priority a running job is weighed
 * at as a victim. See admit.h.
 *
 * Costs: a 0/1 min-cost cover over the candidates' GPUs (exact on the
 * count), then checked by placement; candidates are added by least work
 * lost until the gang fits, and victims it can do without are dropped.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/admit_int.h"
#include "sched/sched_int.h"

#define EPS ADMIT_EPS

double drv_admit_lost_work(const drv_admit_running_t *r, double now)
{
    double dt = now - r->last_checkpoint;
    return (dt > 0 ? dt : 0) * sched_gang_gpus(&r->gang);
}

int drv_admit_victim_priority(int priority, bool bounded, double wait_left, double wait_margin)
{
    return bounded && wait_left <= wait_margin + DRV_ADMIT_WAIT_GUARD ? INT_MAX : priority;
}

typedef struct vcand {
    size_t run;                 /* index into running */
    double lost;                /* GPU-seconds */
    int units;                  /* GPUs (rounded up) it frees for the gang */
    bool in;                    /* chosen */
} vcand_t;

static int by_lost(const void *x, const void *y)
{
    const vcand_t *a = x, *b = y;
    if (a->lost != b->lost)
        return a->lost < b->lost ? -1 : 1;
    if (a->units != b->units)
        return a->units > b->units ? -1 : 1;
    return (a->run > b->run) - (a->run < b->run);
}

static bool fits(const drv_sched_node_t *nodes, size_t n, const drv_gang_request_t *g,
                 const drv_place_policy_t *policy, drv_sched_choice_t *scratch)
{
    drv_gang_placement_t p = {.ranks = scratch};
    return drv_gang_place(nodes, n, g, policy, &p, NULL, 0) == 0;
}

/* 0/1 min-cost cover: mark (c[i].in) the candidates that free >= D units
 * with the least (lost, count), lexicographically, by a table over
 * (candidates so far, units freed capped at D). Too big a table: the
 * cheapest first (by_lost order) until D. 1 when even all fall short. */
#define COVER_MAX_CELLS (4u << 20)

typedef struct cell {
    double lost;
    int cnt;
} cell_t;

static bool better(cell_t a, cell_t b)
{
    return a.lost < b.lost - EPS || (fabs(a.lost - b.lost) <= EPS && a.cnt < b.cnt);
}

static int cover(vcand_t *c, size_t nc, int D)
{
    size_t W = (size_t)D + 1;
    if ((nc + 1) * W > COVER_MAX_CELLS) {
        int got = 0;
        for (size_t i = 0; i < nc && got < D; i++) {
            c[i].in = true;
            got += c[i].units;
        }
        return got >= D ? 0 : 1;
    }
    cell_t *t = malloc(sizeof *t * (nc + 1) * W);
    if (!t)
        return -1;
    for (size_t g = 0; g < W; g++)
        t[g] = (cell_t){g ? INFINITY : 0, 0};
    for (size_t i = 0; i < nc; i++) {
        cell_t *a = &t[i * W], *b = &t[(i + 1) * W];
        memcpy(b, a, sizeof *b * W);
        for (size_t g = 0; g < W; g++) {
            if (!isfinite(a[g].lost))
                continue;
            size_t to = g + (size_t)c[i].units < W ? g + (size_t)c[i].units : W - 1;
            cell_t v = {a[g].lost + c[i].lost, a[g].cnt + 1};
            if (better(v, b[to]))
                b[to] = v;
        }
    }
    int rc = 1;
    if (isfinite(t[nc * W + W - 1].lost)) {
        rc = 0;
        size_t g = W - 1;
        for (size_t i = nc; i-- > 0;) {
            cell_t here = t[(i + 1) * W + g];
            if (here.lost == t[i * W + g].lost && here.cnt == t[i * W + g].cnt)
                continue;       /* not taken */
            c[i].in = true;
            /* the g' it came from: the state that reaches g with c[i] */
            size_t from = W;
            for (size_t f = 0; f < W && from == W; f++) {
                size_t to = f + (size_t)c[i].units < W ? f + (size_t)c[i].units : W - 1;
                cell_t a = t[i * W + f];
                if (to == g && isfinite(a.lost) && fabs(a.lost + c[i].lost - here.lost) <= EPS &&
                    a.cnt + 1 == here.cnt)
                    from = f;
            }
            g = from < W ? from : 0;
        }
    }
    free(t);
    return rc;
}

int drv_admit_victims(drv_sched_node_t *nodes, size_t n, const drv_admit_running_t *running,
                      size_t n_running, const drv_gang_request_t *gang, int priority, double now,
                      const drv_place_policy_t *policy, size_t *victims, size_t *n_victims,
                      char *why, size_t why_len)
{
    *n_victims = 0;
    int rc = -1;
    drv_sched_choice_t *scratch = malloc(sizeof *scratch * (size_t)(gang->workers > 0 ? gang->workers : 1));
    vcand_t *c = malloc(sizeof *c * (n_running ? n_running : 1));
    if (!scratch || !c) {
        if (why && why_len)
            snprintf(why, why_len, "out of memory choosing preemption victims");
        goto done;
    }
    if (gang->workers < 1 || gang->workers > DRV_GANG_MAX_WORKERS) {
        if (why && why_len)
            snprintf(why, why_len, "a gang has 1 to %d workers, not %d", DRV_GANG_MAX_WORKERS,
                     gang->workers);
        goto done;
    }
    if (fits(nodes, n, gang, policy, scratch)) {
        rc = 0;
        goto done;
    }
    size_t nc = 0;
    for (size_t i = 0; i < n_running; i++) {
        const drv_admit_running_t *r = &running[i];
        if (!r->preemptible || r->priority >= priority || !r->ranks)
            continue;
        double h = sched_held_for(nodes, &r->gang, r->ranks, gang);
        if (h <= 0 && gang->worker.gpu_count > 0)
            continue;           /* frees nothing the gang could use */
        c[nc++] = (vcand_t){.run = i, .lost = drv_admit_lost_work(r, now),
                            .units = gang->worker.gpu_count > 0 ? (int)ceil(h - EPS) : 1};
    }
    qsort(c, nc, sizeof *c, by_lost);
    double need = sched_gang_gpus(gang) - sched_free_gpus(nodes, n, gang);
    int D = gang->worker.gpu_count > 0 ? (int)ceil(need - EPS) : 1;
    if (D < 1)
        D = 1;                  /* enough GPUs, badly spread: free at least one */
    int cr = cover(c, nc, D);
    if (cr < 0) {
        if (why && why_len)
            snprintf(why, why_len, "out of memory choosing preemption victims");
        goto done;
    }
    for (size_t i = 0; i < nc; i++)
        if (c[i].in)
            drv_gang_release(nodes, &running[c[i].run].gang, running[c[i].run].ranks);
    /* placement decides: add the cheapest others until it fits */
    bool ok = fits(nodes, n, gang, policy, scratch);
    for (size_t i = 0; i < nc && !ok; i++)
        if (!c[i].in) {
            c[i].in = true;
            drv_gang_release(nodes, &running[c[i].run].gang, running[c[i].run].ranks);
            ok = fits(nodes, n, gang, policy, scratch);
        }
    if (!ok) {
        for (size_t i = 0; i < nc; i++)
            if (c[i].in)
                drv_gang_commit(nodes, &running[c[i].run].gang, running[c[i].run].ranks);
        if (why && why_len) {
            char what[96];
            drv_gang_describe(gang, what, sizeof what);
            snprintf(why, why_len, "needs %s; preempting all %zu preemptible job(s) of lower "
                     "priority would not make room", what, nc);
        }
        goto done;
    }
    /* drop the victims it can do without, the most work lost first */
    for (size_t i = nc; i-- > 0;)
        if (c[i].in) {
            const drv_admit_running_t *r = &running[c[i].run];
            drv_gang_commit(nodes, &r->gang, r->ranks);
            if (fits(nodes, n, gang, policy, scratch))
                c[i].in = false;
            else
                drv_gang_release(nodes, &r->gang, r->ranks);
        }
    for (size_t i = nc; i-- > 0;)
        if (c[i].in)
            victims[(*n_victims)++] = c[i].run;
    rc = 0;
done:
    free(scratch);
    free(c);
    return rc;
}
