/* route.c — the gateway thread's routing (see gateway.h for the whole
 * picture): the registry of deployments and replicas and its adoption of a
 * new routing table, the power-of-two-choices pick, the per-deployment
 * queues and cold starts, and answering a job (success or gateway error).
 *
 * Everything here runs on the gateway thread. The registry (g->deps and the
 * objects it points to) is changed only under reg_mu, so that readers on
 * other threads (metrics, demand) see whole objects.
 *
 * Invariants:
 *   - a job the gateway holds is on the active list and holds a reference;
 *     it is in at most one of: a deployment's queue (J_QUEUED), the parked
 *     list (J_PARKED), a replica connection (J_RUNNING);
 *   - rep->outstanding counts the jobs running on it; a replica or
 *     deployment object is freed (under reg_mu) only when no job points to
 *     it and the routing table no longer lists it;
 *   - dep->rt holds exactly the replicas listed, (ready or promoted) and
 *     not ejected.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gateway/gw_impl.h"

#define PARK_MAX 1024
#define PARK_WAIT_MS 3000

/* --- registry ------------------------------------------------------------------------- */

gw_dep_t *drv_gw_dep_find(drv_gateway_t *g, const char *key)
{
    size_t lo = 0, hi = g->n_deps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->deps[mid]->key, key);
        if (c == 0)
            return g->deps[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void drv_gw_rebuild_rt(gw_dep_t *d)
{
    if (d->cap_rt < d->n_reps) {
        size_t ncap = d->n_reps + 4;
        gw_rep_t **nr = realloc(d->rt, ncap * sizeof *nr);
        uint32_t *no = realloc(d->rt_out, ncap * sizeof *no);
        if (!nr || !no)
            abort();
        d->rt = nr;
        d->rt_out = no;
        d->cap_rt = ncap;
    }
    d->n_rt = 0;
    for (size_t i = 0; i < d->n_reps; i++) {
        gw_rep_t *r = d->reps[i];
        if (d->in_table && r->in_table && (r->ready || r->promoted) && !atomic_load(&r->ejected))
            d->rt[d->n_rt++] = r;
    }
}

static void rep_free(drv_gateway_t *g, gw_rep_t *r)
{
    drv_gw_probe_cancel(g, r);
    drv_gw_uc_forget(g, r);
    free(r->key);
    free(r->id);
    free(r->endpoint);
    free(r);
}

void drv_gw_dep_free(drv_gateway_t *g, gw_dep_t *d)
{
    for (size_t i = 0; i < d->n_reps; i++)
        rep_free(g, d->reps[i]);
    free(d->reps);
    free(d->rt);
    free(d->rt_out);
    free(d->key);
    free(d->owner);
    free(d->id);
    free(d->predict_path);
    free(d->health_path);
    free(d);
}

/* true when it changed */
static bool set_str(char **dst, const char *s)
{
    if (*dst && strcmp(*dst, s) == 0)
        return false;
    free(*dst);
    *dst = drv_strdup(s);
    return true;
}

static bool dep_busy(const gw_dep_t *d)
{
    return d->queue.n > 0 || atomic_load(&d->st.in_flight) > 0;
}

/* Merge the table's replicas of one deployment into d->reps (under reg_mu). */
static void merge_reps(drv_gateway_t *g, gw_dep_t *d, const drv_gw_table_t *t,
                       const drv_gw_tdep_t *td)
{
    size_t n_new = td ? td->n : 0;
    gw_rep_t **out = malloc((d->n_reps + n_new + 1) * sizeof *out);
    if (!out)
        abort();
    size_t i = 0, k = 0, n = 0;
    while (i < d->n_reps || k < n_new) {
        gw_rep_t *r = i < d->n_reps ? d->reps[i] : NULL;
        const drv_gw_trep_t *tr = k < n_new ? &t->reps[td->first + k] : NULL;
        int c = !r ? 1 : !tr ? -1 : strcmp(r->key, tr->key);
        if (c < 0) {   /* no longer listed */
            i++;
            r->in_table = false;
            r->ready = r->promoted = false;
            if (r->outstanding == 0)
                rep_free(g, r);
            else
                out[n++] = r;
            continue;
        }
        if (c > 0) {   /* new */
            r = calloc(1, sizeof *r);
            if (!r)
                abort();
            r->dep = d;
            drv_gw_window_init(&r->win, drv_gw_now_ms());
            r->key = drv_strdup(tr->key);
            r->id = drv_strdup(tr->id);
            k++;
        } else {
            i++;
            k++;
        }
        if (set_str(&r->endpoint, tr->endpoint))
            drv_gw_uc_forget(g, r);   /* kept-alive connections go to the old one */
        r->in_table = true;
        r->ready = tr->ready;
        if (r->ready)
            r->promoted = false;
        out[n++] = r;
    }
    free(d->reps);
    d->reps = out;
    d->n_reps = d->cap_reps = n;
}

static gw_dep_t *dep_new(drv_gateway_t *g, const drv_gw_tdep_t *td)
{
    gw_dep_t *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    d->key = drv_strdup(td->key);
    d->owner = drv_strdup(td->owner);
    d->id = drv_strdup(td->id);
    d->queue.cap = g->queue_max;
    drv_gw_window_init(&d->win, drv_gw_now_ms());
    return d;
}

/* --- answering ---------------------------------------------------------------------- */

static void count_answer(gw_dep_t *d, gw_rep_t *r, int status)
{
    int cls = status / 100 - 1;
    if (cls < 0 || cls > 4)
        cls = 4;
    if (d)
        gw_add(&d->st.by_class[cls], 1);
    if (r)
        gw_add(&r->st.by_class[cls], 1);
    if (status == 429 || status == 503) {
        if (d)
            gw_add(status == 429 ? &d->st.c429 : &d->st.c503, 1);
        if (r)
            gw_add(status == 429 ? &r->st.c429 : &r->st.c503, 1);
    }
}

/* The gateway is done with j: off the active list, its reference dropped. */
static void job_done(drv_gateway_t *g, drv_gw_job_t *j)
{
    j->state = J_DONE;
    drv_gw_fifo_remove(&g->active, &j->alink);
    drv_gw_job_unref(j);
}

/* Answer j with a gateway error (or cut its stream when headers went out). */
void drv_gw_fail(drv_gateway_t *g, drv_gw_job_t *j, int status, int reason, int retry_after,
                     const char *fmt, ...)
{
    gw_dep_t *d = j->dep;
    if (d)
        gw_add(&d->rejected[reason], 1);
    count_answer(d, NULL, status);
    pthread_mutex_lock(&j->mu);
    if (j->ready && j->mode == M_STREAM) {
        j->failed = true;   /* headers are out: end the stream with an error */
        j->eof = true;
    } else {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        drv_err(&j->err, status, "unavailable", "", "%s", msg);
        j->retry_after = retry_after;
        free(j->buf);
        j->buf = NULL;
        j->len = j->cap = j->off = 0;
        j->ready = true;
    }
    j->finished = true;
    drv_gw_wake_conn_locked(j);
    pthread_mutex_unlock(&j->mu);
    job_done(g, j);
}

void drv_gw_ok(drv_gateway_t *g, drv_gw_job_t *j)
{
    int64_t us = drv_gw_now_us() - j->t0_us;
    gw_dep_t *d = j->dep;
    gw_rep_t *r = j->rep;
    drv_gw_hist_observe(&d->st.latency, us);
    drv_gw_hist_observe(&r->st.latency, us);
    count_answer(d, r, j->status);
    if (j->status < 500 && j->start_us > 0) {   /* the replica served it: its service time */
        int64_t now = us + j->t0_us;
        int64_t svc = now - j->start_us, first = j->first_us > 0 ? j->first_us - j->start_us : svc;
        if (svc > 0) {
            uint64_t fms = (uint64_t)(first > 0 ? first : 0) / 1000;
            gw_add(&d->served_us, (uint64_t)svc);
            gw_add(&d->served_first_us, (uint64_t)(first > 0 ? first : 0));
            gw_add(&d->served_first_sq_ms2, fms * fms);
            gw_add(&d->served_sq_ms2, (uint64_t)(svc / 1000) * (uint64_t)(svc / 1000));
            gw_add(&d->served, 1);
            drv_gw_prompt_served(&d->prompt, j->prompt_est, first);
            if (j->kind == DRV_GW_OPENAI) {   /* generated tokens, the batch (gentok.h) */
                double batch = j->stop_us > j->start_us
                                   ? (double)(j->area1 - j->area0) /
                                         (double)(j->stop_us - j->start_us)
                                   : 0;
                drv_gw_gen_served(&d->gen, drv_gw_gen_count(&j->gen), batch,
                                  first > 0 ? svc - first : svc);
            }
        }
    }
    pthread_mutex_lock(&j->mu);
    if (j->mode == M_STREAM)
        j->eof = true;
    else
        j->ready = true;
    j->finished = true;
    drv_gw_wake_conn_locked(j);
    pthread_mutex_unlock(&j->mu);
    job_done(g, j);
}
/* --- dispatch ---------------------------------------------------------------------------- */

void drv_gw_update_expiry(drv_gateway_t *g, int64_t at)
{
    if (at < g->next_expiry_ms)
        g->next_expiry_ms = at;
}

gw_rep_t *drv_gw_pick(drv_gateway_t *g, gw_dep_t *d, const gw_rep_t *avoid)
{
    int skip = -1;
    for (size_t i = 0; i < d->n_rt; i++) {
        d->rt_out[i] = d->rt[i]->outstanding;
        if (d->rt[i] == avoid)
            skip = (int)i;
    }
    int i = drv_gw_p2c(d->rt_out, d->n_rt, (uint32_t)(d->max_conc > 0 ? d->max_conc : 0), skip,
                       &g->rng);
    return i < 0 ? NULL : d->rt[i];
}

void drv_gw_set_waiting(gw_dep_t *d)
{
    drv_gw_link_t *h = d->queue.head;
    atomic_store_explicit(&d->waiting_since_ms, h ? JOB_OF(h, qlink)->t0_us / 1000 : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&d->queued, (uint32_t)d->queue.n, memory_order_relaxed);
}

static void kick(drv_gateway_t *g, int64_t now)
{
    if (now - g->last_kick_ms >= 100) {
        g->last_kick_ms = now;
        if (g->kick_fn)
            g->kick_fn(g->kick_ctx);
    }
}

static void enqueue(drv_gateway_t *g, gw_dep_t *d, drv_gw_job_t *j)
{
    int64_t now = drv_gw_now_ms();
    bool cold = d->n_rt == 0;
    if (drv_gw_fifo_push(&d->queue, &j->qlink) < 0) {
        drv_gw_fail(g, j, 429, GW_R_QUEUE_FULL, 1,
                 "deployment '%s' has %zu requests waiting already; try again shortly", d->id,
                 d->queue.cap);
        return;
    }
    j->state = J_QUEUED;
    j->cold = cold;
    int64_t wait = cold ? d->cold_start_ms : DRV_GW_QUEUE_WAIT_MS;
    j->wait_deadline_ms = now + wait < j->deadline_ms ? now + wait : j->deadline_ms;
    drv_gw_update_expiry(g, j->wait_deadline_ms);
    drv_gw_set_waiting(d);
    if (cold && !d->cold_since_ms) {
        d->cold_since_ms = now;
        gw_add(&d->cold_starts, 1);
        atomic_store(&d->cold, true);
        g->next_probe_ms = 0;   /* probe starting replicas now */
        kick(g, now);           /* let the controller (autoscaler) see the demand */
    }
}

void drv_gw_drain(drv_gateway_t *g, gw_dep_t *d)
{
    bool took = false;
    while (d->queue.n) {
        gw_rep_t *r = drv_gw_pick(g, d, NULL);
        if (!r)
            break;
        drv_gw_job_t *j = JOB_OF(drv_gw_fifo_pop(&d->queue), qlink);
        took = true;
        drv_gw_start_transfer(g, j, r);
    }
    if (took)
        drv_gw_set_waiting(d);
}

void drv_gw_cold_over(gw_dep_t *d)
{
    if (d->n_rt > 0 && d->cold_since_ms) {
        int64_t us = (drv_gw_now_ms() - d->cold_since_ms) * 1000;
        drv_gw_hist_observe(&d->cold_hist, us);
        atomic_store_explicit(&d->cold_last_us, us, memory_order_relaxed);
        d->cold_since_ms = 0;
        atomic_store(&d->cold, false);
    }
}

void drv_gw_route(drv_gateway_t *g, drv_gw_job_t *j)
{
    if (atomic_load(&g->stopping)) {
        drv_gw_fail(g, j, 503, GW_R_SHUTDOWN, 5, "droverd is shutting down; try again shortly");
        return;
    }
    gw_dep_t *d = drv_gw_dep_find(g, j->key);
    if (!d || !d->in_table) {
        const char *id = strchr(j->key, '/');
        if (g->table_built_us > j->t0_us || g->parked.n >= PARK_MAX) {
            drv_gw_fail(g, j, 404, GW_R_NOT_FOUND, 0, "deployment '%s' not found",
                     id ? id + 1 : j->key);
            return;
        }
        /* maybe created a moment ago: wait for a table built after it came */
        drv_gw_fifo_push(&g->parked, &j->qlink);
        j->state = J_PARKED;
        int64_t now = drv_gw_now_ms();
        j->wait_deadline_ms = now + PARK_WAIT_MS;
        drv_gw_update_expiry(g, j->wait_deadline_ms);
        kick(g, now);
        return;
    }
    j->dep = d;
    gw_add(&d->arrivals, 1);
    int64_t now = drv_gw_now_ms();
    if (drv_gw_quiet_kick_due(d->last_arrival_ms, now))   /* after a quiet spell (gateway.h) */
        kick(g, now);
    d->last_arrival_ms = now;
    j->prompt_est = drv_gw_prompt_estimate((int64_t)j->body_len);
    drv_gw_prompt_arrive(&d->prompt, j->prompt_est);
    if (!d->enabled) {
        drv_gw_fail(g, j, 503, GW_R_DISABLED, 60, "deployment '%s' is disabled (enabled: false)",
                 d->id);
        return;
    }
    if (d->queue.n == 0) {   /* FIFO: nobody may overtake a waiting request */
        gw_rep_t *r = drv_gw_pick(g, d, NULL);
        if (r) {
            drv_gw_start_transfer(g, j, r);
            return;
        }
    }
    enqueue(g, d, j);
}

/* --- table adoption ------------------------------------------------------------------ */

void drv_gw_adopt(drv_gateway_t *g, drv_gw_table_t *t)
{
    g->table_gen++;
    g->table_built_us = t->built_us;
    pthread_mutex_lock(&g->reg_mu);
    gw_dep_t **out = malloc((g->n_deps + t->n_deps + 1) * sizeof *out);
    if (!out)
        abort();
    size_t i = 0, k = 0, n = 0;
    while (i < g->n_deps || k < t->n_deps) {
        gw_dep_t *d = i < g->n_deps ? g->deps[i] : NULL;
        const drv_gw_tdep_t *td = k < t->n_deps ? &t->deps[k] : NULL;
        int c = !d ? 1 : !td ? -1 : strcmp(d->key, td->key);
        if (c < 0) {   /* deleted */
            i++;
            d->in_table = false;
            merge_reps(g, d, t, NULL);
            drv_gw_rebuild_rt(d);
            if (!dep_busy(d) && d->n_reps == 0)
                drv_gw_dep_free(g, d);
            else
                out[n++] = d;
            continue;
        }
        if (c > 0)
            d = dep_new(g, td);
        else
            i++;
        k++;
        set_str(&d->predict_path, td->predict_path);
        set_str(&d->health_path, td->health_path);
        d->max_conc = td->max_concurrency;
        d->cold_start_ms = td->cold_start_ms;
        d->enabled = td->enabled;
        d->desired = td->desired_replicas;
        d->ready = td->ready_replicas;
        d->in_table = true;
        merge_reps(g, d, t, td);
        drv_gw_rebuild_rt(d);
        out[n++] = d;
    }
    free(g->deps);
    g->deps = out;
    g->n_deps = g->cap_deps = n;
    pthread_mutex_unlock(&g->reg_mu);
    drv_gw_table_free(t);

    /* what the new table changes for waiting requests */
    for (i = 0; i < g->n_deps; i++) {
        gw_dep_t *d = g->deps[i];
        if (!d->in_table || !d->enabled) {
            while (d->queue.n) {
                drv_gw_job_t *j = JOB_OF(drv_gw_fifo_pop(&d->queue), qlink);
                if (d->in_table)
                    drv_gw_fail(g, j, 503, GW_R_DISABLED, 60, "deployment '%s' is disabled", d->id);
                else
                    drv_gw_fail(g, j, 404, GW_R_NOT_FOUND, 0, "deployment '%s' was deleted", d->id);
            }
            drv_gw_set_waiting(d);
            continue;
        }
        drv_gw_cold_over(d);
        drv_gw_drain(g, d);
    }
    drv_gw_fifo_t parked = g->parked;
    memset(&g->parked, 0, sizeof g->parked);
    while (parked.n) {
        drv_gw_job_t *j = JOB_OF(drv_gw_fifo_pop(&parked), qlink);
        j->state = J_NEW;
        drv_gw_route(g, j);
    }
    g->next_probe_ms = 0;
}

