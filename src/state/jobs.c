/* jobs.c — see jobs.h: training jobs' run state, its rendering, their
 * workers in the nodes' desired sets and in the scheduling snapshot, and
 * the agents' reports of them. */
#include "state/jobs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sched/shadow.h"
#include "state/events.h"
#include "state/nodes.h"
#include "common/json.h"

static int64_t iget(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

void drv_job_worker_id(const char *job_id, int attempt, int port_try, int rank, char *buf,
                       size_t len)
{
    if (port_try > 0)
        snprintf(buf, len, "%s-a%d-p%d-r%d", job_id, attempt, port_try, rank);
    else
        snprintf(buf, len, "%s-a%d-r%d", job_id, attempt, rank);
}

int drv_job_port_try(const drv_obj_t *job)
{
    int64_t t = iget(drv_job_run(job), "port_try");
    return t > 0 ? (int)t : 0;
}

void drv_job_current_worker(const drv_obj_t *job, int rank, char *buf, size_t len)
{
    drv_job_worker_id(job->id, drv_job_attempt(job), drv_job_port_try(job), rank, buf, len);
}

const json_t *drv_job_run(const drv_obj_t *job)
{
    return json_object_get(job->internal, "run");
}

const char *drv_job_state(const drv_obj_t *job)
{
    const char *s = drv_json_str(drv_job_run(job), "state");
    return s ? s : "queued";
}

int drv_job_attempt(const drv_obj_t *job)
{
    int64_t a = iget(drv_job_run(job), "attempt");
    return a > 0 ? (int)a : 1;
}

bool drv_job_state_active(const char *s)
{
    return s && (strcmp(s, "admitted") == 0 || strcmp(s, "starting") == 0 ||
                 strcmp(s, "running") == 0);
}

bool drv_job_state_final(const char *s)
{
    return s && (strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 ||
                 strcmp(s, "cancelled") == 0);
}

/* --- status ---------------------------------------------------------------- */

static json_t *render_status(const drv_obj_t *job, const json_t *prev)
{
    const json_t *run = drv_job_run(job);
    const char *state = drv_job_state(job);
    int attempt = drv_job_attempt(job);
    int64_t total = iget(job->spec, "workers");
    json_t *s = json_pack("{s:s, s:i, s:I, s:I, s:I}", "state", state, "attempt", attempt,
                          "restarts", (json_int_t)iget(run, "restarts"), "preemptions",
                          (json_int_t)iget(run, "preemptions"), "workers_total",
                          (json_int_t)total);
    if (drv_json_str(run, "reason"))
        json_object_set(s, "reason", json_object_get(run, "reason"));
    static const char *const times[] = {"admitted_at", "started_at", "finished_at", NULL};
    for (size_t i = 0; times[i]; i++)
        if (iget(run, times[i]) > 0) {
            char ts[32];
            drv_rfc3339(iget(run, times[i]), ts, sizeof ts);
            json_object_set_new(s, times[i], json_string(ts));
        }
    /* the wait bound (issue 15): written once at submission; after a
     * restart or preemption the deadline of this queueing is what is left
     * of its budget (drv_wait_requeued) */
    const json_t *wr = json_object_get(run, "wait");
    if (json_is_number(json_object_get(wr, "bound"))) {
        double b = json_number_value(json_object_get(wr, "bound"));
        double fs = json_number_value(json_object_get(wr, "fifo_start"));
        double sub = (double)job->created_at;
        double enq = iget(run, "enqueued_at") ? (double)iget(run, "enqueued_at") : sub;
        double dl = drv_wait_requeued(b, sub, enq, (double)iget(run, "queued_s"));
        char at[32], fst[32], dls[32];
        drv_rfc3339((int64_t)ceil(b), at, sizeof at);
        drv_rfc3339((int64_t)ceil(fs), fst, sizeof fst);
        drv_rfc3339((int64_t)ceil(dl), dls, sizeof dls);
        json_t *w = json_pack("{s:s, s:I, s:s, s:I, s:s}", "at", at, "epoch",
                              (json_int_t)ceil(b), "fifo_start", fst, "fifo_wait_seconds",
                              (json_int_t)ceil(fs - sub), "deadline", dls);
        if (!drv_job_state_active(state) && !drv_job_state_final(state))
            json_object_set_new(w, "due", json_boolean(json_is_true(
                                              json_object_get(json_object_get(prev, "wait_bound"),
                                                              "due"))));
        json_object_set_new(s, "wait_bound", w);
    } else if (drv_json_str(wr, "none")) {
        json_object_set(s, "wait_unbounded", json_object_get(wr, "none"));
    } else if (iget(job->spec, "timeout_seconds") <= 0) {
        json_object_set_new(s, "wait_unbounded",
                            json_string("no timeout_seconds: no run-time estimate for the FIFO "
                                        "shadow, so no wait bound"));
    }
    /* GPU-hours and cost: the ended placements', plus the current one's
     * in whole minutes (so that a running job re-renders once a minute) */
    const json_t *used = json_object_get(run, "used"), *rate = json_object_get(run, "rate");
    double gs = json_number_value(json_object_get(used, "gpu_seconds"));
    double usd = json_number_value(json_object_get(used, "cost_usd"));
    int64_t since = iget(run, "admitted_at"), now_s = drv_now_ms() / 1000;
    if (rate && drv_job_state_active(state) && since > 0 && now_s > since) {
        double mins = (double)((now_s - since) / 60 * 60);
        gs += json_number_value(json_object_get(rate, "gpus")) * mins;
        usd += json_number_value(json_object_get(rate, "usd_per_hour")) * mins / 3600.0;
    }
    json_object_set_new(s, "gpu_hours", json_real(round(gs / 3600.0 * 1e4) / 1e4));
    json_object_set_new(s, "cost_usd", json_real(round(usd * 1e4) / 1e4));
    const json_t *pl = json_object_get(run, "placement");
    if (json_array_size(pl) > 0 && drv_job_state_active(state)) {
        json_object_set(s, "placement", (json_t *)pl);
        if (drv_json_str(run, "master_addr"))
            json_object_set_new(s, "master", json_sprintf("%s:%lld", drv_json_str(run, "master_addr"),
                                                          (long long)iget(run, "master_port")));
    }
    /* reported workers of this attempt only */
    json_t *workers = json_object();
    int ready = 0;
    const char *key;
    json_t *w;
    char prefix[160];
    drv_job_current_worker(job, 0, prefix, sizeof prefix);
    prefix[strlen(prefix) - 1] = '\0';   /* "JOB-aA-r" (or "JOB-aA-pT-r"): any rank */
    json_object_foreach((json_t *)json_object_get(prev, "workers"), key, w) {
        const char *wid = drv_json_str(w, "id");
        if (!wid || strncmp(wid, prefix, strlen(prefix)) != 0)
            continue;
        json_object_set(workers, key, w);
        const char *ws = drv_json_str(w, "state");
        ready += ws && (strcmp(ws, "running") == 0 || strcmp(ws, "succeeded") == 0);
    }
    json_object_set_new(s, "workers", workers);
    json_object_set_new(s, "workers_ready", json_integer(drv_job_state_active(state) ? ready : 0));
    if (!drv_job_state_active(state) && !drv_job_state_final(state)) {
        const json_t *qp = json_object_get(prev, "queue_position");
        if (qp)
            json_object_set(s, "queue_position", (json_t *)qp);
        if (json_object_get(prev, "waiting"))
            json_object_set(s, "waiting", json_object_get(prev, "waiting"));
        if (json_object_get(prev, "provisioning"))
            json_object_set(s, "provisioning", json_object_get(prev, "provisioning"));
    }
    return s;
}

void drv_job_render(drv_state_t *st, drv_obj_t *job)
{
    json_t *s = render_status(job, job->status);
    if (json_equal(s, job->status))
        json_decref(s);
    else
        drv_state_set_status(st, job, s);
}

/* Render a changed copy of the status (prev, stolen); the state changes
 * only when the rendered status does. */
static void commit_status(drv_state_t *st, drv_obj_t *job, json_t *prev)
{
    json_t *s = render_status(job, prev);
    json_decref(prev);
    if (json_equal(s, job->status))
        json_decref(s);
    else
        drv_state_set_status(st, job, s);
}

/* Set (value) or drop (NULL) one soft fact in a copy of the status (prev,
 * stolen) and render it. */
static void set_fact(drv_state_t *st, drv_obj_t *job, json_t *prev, const char *key,
                     json_t *value)
{
    if (value)
        json_object_set_new(prev, key, value);
    else
        json_object_del(prev, key);
    commit_status(st, job, prev);
}

void drv_job_set_queue(drv_state_t *st, drv_obj_t *job, int position, const char *waiting)
{
    json_t *prev = job->status ? json_deep_copy(job->status) : json_object();
    if (position >= 0)
        json_object_set_new(prev, "queue_position", json_integer(position));
    else
        json_object_del(prev, "queue_position");
    set_fact(st, job, prev, "waiting", waiting ? json_string(waiting) : NULL);
}

void drv_job_set_wait_due(drv_state_t *st, drv_obj_t *job, bool due)
{
    const json_t *w = json_object_get(job->status, "wait_bound");
    if (!w || json_is_true(json_object_get(w, "due")) == due)
        return;
    json_t *prev = job->status ? json_deep_copy(job->status) : json_object();
    json_object_set_new(json_object_get(prev, "wait_bound"), "due", json_boolean(due));
    commit_status(st, job, prev);
}

void drv_job_set_provisioning(drv_state_t *st, drv_obj_t *job, const char *why)
{
    const json_t *cur = json_object_get(job->status, "provisioning");
    if (why ? cur && strcmp(json_string_value(cur) ? json_string_value(cur) : "", why) == 0
            : !cur)
        return;
    json_t *prev = job->status ? json_deep_copy(job->status) : json_object();
    set_fact(st, job, prev, "provisioning", why ? json_string(why) : NULL);
}

/* Tell every node of a placement that its desired set changed. */
static void touch_nodes(drv_head_t *head, const char *owner, const json_t *placement)
{
    size_t i;
    json_t *p;
    json_array_foreach(placement, i, p) {
        char key[192];
        snprintf(key, sizeof key, "%s/%s", owner, drv_json_str(p, "node") ? drv_json_str(p, "node") : "");
        drv_obj_t *n = drv_state_get(head->state, DRV_K_NODE, key);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = json_equal(json_object_get(json_array_get(placement, j), "node"),
                              json_object_get(p, "node"));
        if (n && !seen)
            drv_node_touch(head, n);
    }
}

json_t *drv_job_rate(drv_state_t *st, const char *owner, const json_t *placement)
{
    double gpus = 0, usd = 0;
    size_t r;
    const json_t *e;
    json_array_foreach(placement, r, e) {
        double w = 0;   /* the worker's GPUs: whole ones, or its shares' fractions */
        size_t k;
        const json_t *g;
        json_array_foreach(json_object_get(e, "gpus"), k, g) {
            int64_t pct = iget(g, "compute_percent");
            w += json_is_true(json_object_get(e, "whole")) || pct <= 0 || pct >= 100
                     ? 1.0 : (double)pct / 100.0;
        }
        char key[192];
        snprintf(key, sizeof key, "%s/%s", owner, drv_json_str(e, "node") ? drv_json_str(e, "node") : "");
        const drv_obj_t *n = drv_state_get(st, DRV_K_NODE, key);
        size_t ng = n ? json_array_size(json_object_get(n->status, "gpus")) : 0;
        double price = n ? json_number_value(json_object_get(
                               json_object_get(n->status, "cost"), "price_per_hour"))
                         : 0;
        gpus += w;
        if (ng > 0)
            usd += price * w / (double)ng;
    }
    return json_pack("{s:f, s:f}", "gpus", gpus, "usd_per_hour", usd);
}

/* The GPU time and cost of the gang's placement since it was admitted
 * (run.rate, set at admission), counted into run.used when it leaves. */
static void accrue(const json_t *old, json_t *run, int64_t now_s)
{
    const json_t *rate = json_object_get(old, "rate");
    int64_t secs = now_s - iget(old, "admitted_at");
    if (!rate || iget(old, "admitted_at") <= 0 || secs <= 0)
        return;
    const json_t *was = json_object_get(old, "used");
    double gs = json_number_value(json_object_get(was, "gpu_seconds")) +
                json_number_value(json_object_get(rate, "gpus")) * (double)secs;
    double usd = json_number_value(json_object_get(was, "cost_usd")) +
                 json_number_value(json_object_get(rate, "usd_per_hour")) * (double)secs / 3600.0;
    json_object_set_new(run, "used", json_pack("{s:f, s:f}", "gpu_seconds", gs, "cost_usd", usd));
}

/* A gang leaving its nodes (placement emptied): its GPU time and cost are
 * counted (run.used), and where its workers ran stays in run.last_workers
 * {attempt, port_try, nodes: [node by rank]}: their agents keep the
 * finished workers' logs, and `drover logs job/ID` reads them. */
static void gang_left(const drv_obj_t *job, json_t *run)
{
    const json_t *old = json_object_get(drv_job_run(job), "placement");
    if (json_array_size(old) == 0 || json_array_size(json_object_get(run, "placement")) > 0)
        return;
    accrue(drv_job_run(job), run, drv_now_ms() / 1000);
    json_object_del(run, "rate");
    json_t *nodes = json_array();
    size_t r;
    const json_t *e;
    json_array_foreach(old, r, e)
        json_array_append_new(nodes, json_string(drv_json_str(e, "node") ? drv_json_str(e, "node") : ""));
    json_object_set_new(run, "last_workers", json_pack("{s:i, s:i, s:o}", "attempt",
                                                       drv_job_attempt(job), "port_try",
                                                       drv_job_port_try(job), "nodes", nodes));
}

drv_obj_t *drv_job_put_run(drv_head_t *head, drv_obj_t *job, json_t *run, const char *type)
{
    drv_state_t *st = head->state;
    const char *was = drv_job_state(job);
    const char *now = drv_json_str(run, "state") ? drv_json_str(run, "state") : "queued";
    bool changed = strcmp(was, now) != 0;
    char owner[64], id[128], was_s[32];
    snprintf(owner, sizeof owner, "%s", job->owner);
    snprintf(id, sizeof id, "%s", job->id);
    snprintf(was_s, sizeof was_s, "%s", was);
    touch_nodes(head, job->owner, json_object_get(drv_job_run(job), "placement"));
    gang_left(job, run);
    if (!drv_job_run(job) && !json_object_get(run, "submit_seq"))   /* the creation's write */
        json_object_set_new(run, "submit_seq", json_integer((json_int_t)job->seq));
    json_t *internal = job->internal ? json_deep_copy(job->internal) : json_object();
    json_object_set_new(internal, "run", run);
    drv_obj_t *o = drv_obj_new(DRV_K_JOB, job->key, job->owner, job->id,
                               json_deep_copy(job->spec), internal);
    o->created_at = job->created_at;
    o->updated_at = drv_now_ms() / 1000;
    o->rv = job->rv + 1;
    json_t *prev = job->status ? json_incref(job->status) : NULL;
    o->status = render_status(o, prev);
    json_decref(prev);
    drv_state_put(st, o);   /* job is freed */
    touch_nodes(head, o->owner, json_object_get(drv_job_run(o), "placement"));
    /* another pass follows soon: what this change frees or asks for (a
     * restart, a preemption's head) is decided there, not 5 s later */
    drv_head_kick(head);
    if (changed || type) {
        const char *reason = drv_json_str(run, "reason");
        if (changed)
            drv_events_add(head->events, owner, "job", id, type ? type : now, "%s -> %s%s%s",
                           was_s, now, reason ? ": " : "", reason ? reason : "");
        else
            drv_events_add(head->events, owner, "job", id, type, "%s", reason ? reason : now);
    }
    return o;
}

/* --- scheduling ------------------------------------------------------------ */

void drv_job_request(const drv_obj_t *job, drv_sched_request_t *rq, const char **types,
                     size_t max_types)
{
    const json_t *res = json_object_get(job->spec, "resources");
    const json_t *gpu = json_object_get(res, "gpu");
    memset(rq, 0, sizeof *rq);
    rq->gpu_count = (int)iget(gpu, "count");
    rq->gpu_memory_mib = iget(gpu, "memory_mib");
    rq->compute_percent = (int)iget(gpu, "compute_percent");
    if (rq->compute_percent <= 0)
        rq->compute_percent = 100;
    rq->cpu_millis = iget(res, "cpu_millis");
    rq->memory_mib = iget(res, "memory_mib");
    size_t k;
    json_t *t;
    json_array_foreach(json_object_get(gpu, "types"), k, t) if (rq->n_gpu_types < max_types)
        types[rq->n_gpu_types++] = json_string_value(t);
    rq->gpu_types = types;
}

static int node_index(drv_state_t *st, const char *owner, const char *node, size_t n)
{
    if (!node)
        return -1;
    char key[192];
    snprintf(key, sizeof key, "%s/%s", owner, node);
    size_t i = drv_state_lower_bound(st, DRV_K_NODE, key);
    if (i >= n || i >= drv_state_count(st, DRV_K_NODE) ||
        strcmp(drv_state_at(st, DRV_K_NODE, i)->key, key) != 0)
        return -1;
    return (int)i;
}

/* Add (sign 1) or take back (sign -1) one placement's resources. */
static void hold(drv_state_t *st, const drv_obj_t *job, const json_t *placement,
                 drv_sched_node_t *nodes, size_t n, int sign)
{
    const json_t *res = json_object_get(job->spec, "resources");
    size_t r;
    json_t *p;
    json_array_foreach(placement, r, p) {
        int ni = node_index(st, job->owner, drv_json_str(p, "node"), n);
        if (ni < 0)
            continue;
        drv_sched_node_t *sn = &nodes[ni];
        sn->used_cpu_millis += sign * iget(res, "cpu_millis");
        sn->used_memory_mib += sign * iget(res, "memory_mib");
        bool whole = json_is_true(json_object_get(p, "whole"));
        size_t k;
        json_t *g;
        json_array_foreach(json_object_get(p, "gpus"), k, g) {
            for (int x = 0; x < sn->n_gpus; x++) {
                if (!sn->gpus[x].uuid || !drv_json_str(g, "uuid") ||
                    strcmp(sn->gpus[x].uuid, drv_json_str(g, "uuid")) != 0)
                    continue;
                sn->gpus[x].shares += sign;
                sn->gpus[x].used_memory_mib += sign * iget(g, "memory_mib");
                sn->gpus[x].used_compute += sign * (int)iget(g, "compute_percent");
                if (whole)
                    sn->gpus[x].exclusive = sign > 0;
            }
        }
    }
}

static const json_t *stopping_of(const drv_obj_t *job)
{
    const json_t *s = json_object_get(drv_job_run(job), "stopping");
    return json_array_size(s) > 0 ? s : NULL;
}

void drv_jobs_snapshot(drv_state_t *st, drv_sched_node_t *nodes, size_t n)
{
    for (size_t j = 0; j < drv_state_count(st, DRV_K_JOB); j++) {
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        if (drv_job_state_active(drv_job_state(job)))
            hold(st, job, json_object_get(drv_job_run(job), "placement"), nodes, n, 1);
        if (stopping_of(job))
            hold(st, job, stopping_of(job), nodes, n, 1);
    }
}

void drv_jobs_release_stopping(drv_state_t *st, drv_sched_node_t *nodes, size_t n)
{
    for (size_t j = 0; j < drv_state_count(st, DRV_K_JOB); j++) {
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        if (stopping_of(job))
            hold(st, job, stopping_of(job), nodes, n, -1);
    }
}

void drv_job_stop_placement(const drv_obj_t *job, json_t *run)
{
    const json_t *old = json_object_get(drv_job_run(job), "placement");
    json_t *stop = json_object_get(run, "stopping");
    if (!json_is_array(stop)) {
        stop = json_array();
        json_object_set_new(run, "stopping", stop);
    }
    size_t r;
    const json_t *p;
    json_array_foreach(old, r, p) {
        json_t *e = json_deep_copy(p);
        json_object_set_new(e, "attempt", json_integer(drv_job_attempt(job)));
        json_object_set_new(e, "port_try", json_integer(drv_job_port_try(job)));
        json_object_set_new(e, "rank", json_integer((json_int_t)r));
        json_array_append_new(stop, e);
    }
}

/* Whether a node's report lists this worker as not yet ended. */
static bool alive_in(const json_t *workers, const char *wid)
{
    size_t i;
    const json_t *w;
    json_array_foreach(workers, i, w) {
        const char *id = drv_json_str(w, "id"), *ws = drv_json_str(w, "state");
        if (id && strcmp(id, wid) == 0)
            return !ws || (strcmp(ws, "failed") != 0 && strcmp(ws, "succeeded") != 0);
    }
    return false;
}

bool drv_jobs_stopping_report(drv_head_t *head, const drv_obj_t *node, const json_t *workers)
{
    drv_state_t *st = head->state;
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s/", node->owner);
    size_t plen = strlen(prefix);
    bool changed = false;
    for (size_t j = drv_state_lower_bound(st, DRV_K_JOB, prefix);
         j < drv_state_count(st, DRV_K_JOB); j++) {
        drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        if (strncmp(job->key, prefix, plen) != 0)
            break;
        const json_t *stop = stopping_of(job);
        if (!stop)
            continue;
        json_t *left = json_array();
        size_t r;
        const json_t *e;
        json_array_foreach(stop, r, e) {
            char wid[192];
            drv_job_worker_id(job->id, (int)iget(e, "attempt"), (int)iget(e, "port_try"),
                              (int)iget(e, "rank"), wid, sizeof wid);
            const char *en = drv_json_str(e, "node");
            if (!en || strcmp(en, node->id) != 0 || alive_in(workers, wid))
                json_array_append(left, (json_t *)e);
        }
        if (json_array_size(left) == json_array_size(stop)) {
            json_decref(left);
            continue;
        }
        json_t *run = json_deep_copy(drv_job_run(job));
        if (json_array_size(left) > 0)
            json_object_set_new(run, "stopping", left);
        else {
            json_decref(left);
            json_object_del(run, "stopping");
        }
        drv_job_put_run(head, job, run, NULL);   /* the GPUs are free: a pass follows */
        changed = true;
    }
    return changed;
}

/* --- the agents' side ------------------------------------------------------ */

static json_t *worker_env(const drv_obj_t *job, const json_t *run, int rank)
{
    const json_t *pl = json_object_get(run, "placement");
    const char *node = drv_json_str(json_array_get(pl, (size_t)rank), "node");
    int world = (int)json_array_size(pl), local_rank = 0, local_world = 0, node_rank = -1,
        nnodes = 0;
    for (int r = 0; r < world; r++) {
        const char *rn = drv_json_str(json_array_get(pl, (size_t)r), "node");
        bool first = true;   /* the first rank of its node: a new node */
        for (int q = 0; q < r && first; q++)
            first = strcmp(drv_json_str(json_array_get(pl, (size_t)q), "node"), rn) != 0;
        if (first) {
            if (strcmp(rn, node) == 0)
                node_rank = nnodes;
            nnodes++;
        }
        if (strcmp(rn, node) == 0) {
            if (r < rank)
                local_rank++;
            local_world++;
        }
    }
    json_t *env = json_deep_copy(json_object_get(json_object_get(job->spec, "runtime"), "env"));
    if (!json_is_object(env)) {
        json_decref(env);
        env = json_object();
    }
    json_object_set_new(env, "MASTER_ADDR", json_string(drv_json_str(run, "master_addr")
                                                            ? drv_json_str(run, "master_addr")
                                                            : "127.0.0.1"));
    json_object_set_new(env, "MASTER_PORT", json_sprintf("%lld", (long long)iget(run, "master_port")));
    json_object_set_new(env, "WORLD_SIZE", json_sprintf("%d", world));
    json_object_set_new(env, "RANK", json_sprintf("%d", rank));
    json_object_set_new(env, "LOCAL_RANK", json_sprintf("%d", local_rank));
    json_object_set_new(env, "LOCAL_WORLD_SIZE", json_sprintf("%d", local_world));
    json_object_set_new(env, "NODE_RANK", json_sprintf("%d", node_rank));
    json_object_set_new(env, "NNODES", json_sprintf("%d", nnodes));
    json_object_set_new(env, "GROUP_RANK", json_sprintf("%d", node_rank));
    json_object_set_new(env, "DROVER_JOB_ID", json_string(job->id));
    json_object_set_new(env, "DROVER_JOB_ATTEMPT", json_sprintf("%d", drv_job_attempt(job)));
    return env;
}

void drv_jobs_desired(drv_head_t *head, const drv_obj_t *node, json_t *out)
{
    drv_state_t *st = head->state;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", node->owner);
    size_t plen = strlen(prefix);
    for (size_t j = drv_state_lower_bound(st, DRV_K_JOB, prefix);
         j < drv_state_count(st, DRV_K_JOB); j++) {
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        if (strncmp(job->key, prefix, plen) != 0)
            break;
        if (!drv_job_state_active(drv_job_state(job)))
            continue;
        const json_t *run = drv_job_run(job), *rt = json_object_get(job->spec, "runtime");
        const json_t *res = json_object_get(job->spec, "resources");
        /* (the schema fills an absent checkpoint: what the user gave says) */
        const json_t *ck = json_object_get(json_object_get(job->internal, "given"), "checkpoint")
                               ? json_object_get(job->spec, "checkpoint") : NULL;
        int attempt = drv_job_attempt(job);
        size_t r;
        json_t *p;
        json_array_foreach(json_object_get(run, "placement"), r, p) {
            if (!drv_json_str(p, "node") || strcmp(drv_json_str(p, "node"), node->id) != 0)
                continue;
            char wid[192], scope[256], local[256];
            drv_job_current_worker(job, (int)r, wid, sizeof wid);
            snprintf(scope, sizeof scope, "job:%s:%zu", job->id, r);   /* the storage layer's */
            snprintf(local, sizeof local, "%s/rank-%zu", job->id, r);
            json_t *uuids = json_array();
            size_t k;
            json_t *g;
            json_array_foreach(json_object_get(p, "gpus"), k, g)
                json_array_append(uuids, json_object_get(g, "uuid"));
            const json_t *g0 = json_array_get(json_object_get(p, "gpus"), 0);
            json_t *d = json_pack("{s:s, s:s, s:i, s:i, s:o, s:o, s:s, s:o, s:I, s:I, s:b, s:O, "
                                  "s:O}",
                                  "id", wid, "job", job->id, "rank", (int)r, "attempt", attempt,
                                  "command", json_object_get(rt, "command")
                                                 ? json_incref(json_object_get(rt, "command"))
                                                 : json_array(),   /* an image's own */
                                  "env",
                                  worker_env(job, run, (int)r), "health_path", "", "gpus",
                                  uuids, "gpu_memory_limit_mib",
                                  (json_int_t)iget(g0, "memory_mib"), "gpu_compute_percent",
                                  (json_int_t)iget(g0, "compute_percent"), "whole_gpu",
                                  json_is_true(json_object_get(p, "whole")), "cpu_millis",
                                  json_object_get(res, "cpu_millis"), "memory_mib",
                                  json_object_get(res, "memory_mib"));
            drv_node_desired_image(st, job->owner, rt, &(drv_preset_in_t){0}, d);   /* containers */
            if (r == 0)   /* rank 0's agent checks MASTER_PORT is free before it starts */
                json_object_set_new(d, "master_port", json_integer(iget(run, "master_port")));
            if (json_is_object(ck))
                /* the storage layer keeps the newest complete ones (issue 14) */
                json_object_set_new(d, "checkpoint", json_pack("{s:s, s:I}", "scope", scope,
                                                               "keep",
                                                               (json_int_t)iget(ck, "keep")));
            else
                json_object_set_new(d, "local_checkpoint", json_string(local));
            json_array_append_new(out, d);
        }
    }
}

bool drv_job_absorb_worker(drv_head_t *head, const drv_obj_t *node, const json_t *rep)
{
    drv_state_t *st = head->state;
    char key[256];
    snprintf(key, sizeof key, "%s/%s", node->owner, drv_json_str(rep, "job"));
    drv_obj_t *job = drv_state_get(st, DRV_K_JOB, key);
    if (!job || !drv_job_state_active(drv_job_state(job)))
        return false;
    const char *wid = drv_json_str(rep, "id");
    const json_t *pl = json_object_get(drv_job_run(job), "placement");
    int rank = -1;
    for (size_t r = 0; r < json_array_size(pl); r++) {
        char want[192];
        drv_job_current_worker(job, (int)r, want, sizeof want);
        if (strcmp(want, wid) == 0)
            rank = (int)r;
    }
    const char *pn = drv_json_str(json_array_get(pl, (size_t)(rank < 0 ? 0 : rank)), "node");
    if (rank < 0 || !pn || strcmp(pn, node->id) != 0)
        return false;   /* stale: another attempt's, or not this node's */
    const char *as = drv_json_str(rep, "state");
    /* the supervisor's "ready" is a worker that runs (workers have no health check) */
    const char *ws = strcmp(as, "ready") == 0 ? "running" : as;
    json_t *w = json_pack("{s:s, s:s, s:s}", "id", wid, "node", node->id, "state", ws);
    static const char *const copy[] = {"last_exit", "reason", "pid", "log_tail", "isolation",
                                       "oom_kills", NULL};
    for (size_t i = 0; copy[i]; i++)
        if (json_object_get(rep, copy[i]))
            json_object_set(w, copy[i], json_object_get(rep, copy[i]));
    char rk[16];
    snprintf(rk, sizeof rk, "%d", rank);
    if (json_equal(w, json_object_get(json_object_get(job->status, "workers"), rk))) {
        json_decref(w);
        return false;
    }
    json_t *prev = job->status ? json_deep_copy(job->status) : json_object();
    json_t *ws_obj = json_object_get(prev, "workers");
    if (!json_is_object(ws_obj)) {
        ws_obj = json_object();
        json_object_set_new(prev, "workers", ws_obj);
    }
    json_object_set_new(ws_obj, rk, w);
    drv_state_set_status(st, job, render_status(job, prev));
    json_decref(prev);
    return true;
}
