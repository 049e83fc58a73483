/* jobs_ctl.c — see jobs_ctl.h: following running gangs and admitting
 * queued ones, on the controller's thread under the state write lock. */
#include "head/jobs_ctl.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "sched/admit.h"
#include "sched/shadow.h"
#include "state/jobs.h"
#include "state/nodes.h"
#include "common/json.h"

/* A waiting job rises one priority level per this many seconds waited
 * (drv_admit_effective_priority), so low-priority gangs reach the head of
 * the queue and its reservation; chosen in drover-sim jobs on tuning seeds
 * (docs/benchmarks.md, bench/jobs). */
#define JOB_AGING_SECONDS 600.0

/* How an agent whose node lease ran out reports the job workers it stopped
 * (src/agent/node_lease.c): a lost node's restart, not the program's failure. */
#define LEASE_REASON "the node's lease ran out"

static int64_t iget(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static const drv_obj_t *node_of(drv_state_t *st, const char *owner, const char *id)
{
    char key[192];
    snprintf(key, sizeof key, "%s/%s", owner, id ? id : "");
    return drv_state_get(st, DRV_K_NODE, key);
}

/* The job goes on after a failure: again through the queue (attempt + 1)
 * while it has restarts left, else failed. */
static drv_obj_t *gang_failed(drv_head_t *head, drv_obj_t *job, const char *why)
{
    json_t *run = json_deep_copy(drv_job_run(job));
    int64_t restarts = iget(run, "restarts"), max = iget(job->spec, "max_restarts");
    int64_t now = drv_now_ms() / 1000;
    json_object_set_new(run, "placement", json_array());
    if (restarts < max) {
        json_object_set_new(run, "state", json_string("restarting"));
        json_object_set_new(run, "enqueued_at", json_integer(now));   /* its wait bound */
        json_object_set_new(run, "attempt", json_integer(drv_job_attempt(job) + 1));
        json_object_set_new(run, "restarts", json_integer(restarts + 1));
        json_object_set_new(run, "reason",
                            json_sprintf("%s; the whole gang restarts (restart %lld of %lld)",
                                         why, (long long)restarts + 1, (long long)max));
    } else {
        json_object_set_new(run, "state", json_string("failed"));
        json_object_set_new(run, "finished_at", json_integer(now));
        json_object_set_new(run, "reason",
                            json_sprintf("%s; no restarts left (max_restarts %lld)", why,
                                         (long long)max));
    }
    drv_info("job %s/%s: %s", job->owner, job->id, drv_json_str(run, "reason"));
    return drv_job_put_run(head, job, run, NULL);
}

static int pick_port(const drv_head_t *head, const drv_obj_t *job, const char *node,
                     int port_try);

/* Rank 0's agent found MASTER_PORT in use on its node (another program's,
 * a dying gang's): the same placement starts again with another port, as
 * new worker ids (run.port_try + 1) — not a restart against max_restarts,
 * nor a new attempt (its capacity stays held). After DRV_JOBS_PORT_RETRIES
 * in one attempt it is a failure as any other. NULL: not such a failure. */
static drv_obj_t *port_retry(drv_head_t *head, drv_obj_t *job, const char *reason)
{
    int port = 0;
    char tail[64] = "";
    if (!reason || sscanf(reason, "MASTER_PORT %d is in use%63[^\n]", &port, tail) < 1 ||
        !strstr(reason, " is in use") || drv_job_port_try(job) >= DRV_JOBS_PORT_RETRIES)
        return NULL;
    json_t *run = json_deep_copy(drv_job_run(job));
    int t = drv_job_port_try(job) + 1;
    const char *n0 = drv_json_str(json_array_get(json_object_get(run, "placement"), 0), "node");
    int next = pick_port(head, job, n0 ? n0 : "", t);
    json_object_set_new(run, "port_try", json_integer(t));
    json_object_set_new(run, "master_port", json_integer(next));
    json_object_set_new(run, "state", json_string("starting"));
    json_object_del(run, "started_at");
    json_object_set_new(run, "reason",
                        json_sprintf("MASTER_PORT %d was in use on node %s: the gang starts "
                                     "again on port %d (port try %d of %d, not a restart)",
                                     port, n0 ? n0 : "?", next, t, DRV_JOBS_PORT_RETRIES));
    drv_info("job %s/%s: %s", job->owner, job->id, drv_json_str(run, "reason"));
    return drv_job_put_run(head, job, run, "port_in_use");
}

/* When this head's controller first ran (monotonic ms): the nodes known
 * before it carry a made-up last sync until they sync again. */
static int64_t boot_mono;

/* A node of the gang that has been silent past its lease and the lease's
 * grace (agent/node_lease.h): whatever it still runs, its job workers are
 * gone, so the gang may run elsewhere — long before the node is lost
 * (node_lost_ms). Only for a node that synced with this head. */
static bool past_lease(const drv_head_t *head, const drv_obj_t *n, int64_t *silent_ms)
{
    int64_t seen = n->soft.seen_ms;
    *silent_ms = drv_mono_ms() - seen;
    return seen > boot_mono && n->soft.node_state == DRV_NODE_NOT_READY &&
           *silent_ms > (int64_t)head->cfg.node_timeout_ms + DRV_JOB_LEASE_GRACE_MS +
                            DRV_JOB_LEASE_MARGIN_MS;
}

bool drv_jobs_node_replaceable(drv_head_t *head, const drv_obj_t *node)
{
    int64_t silent;
    if (!boot_mono || !past_lease(head, node, &silent))
        return false;
    drv_state_t *st = head->state;
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s/", node->owner);
    for (size_t j = drv_state_lower_bound(st, DRV_K_JOB, prefix);
         j < drv_state_count(st, DRV_K_JOB); j++) {
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        if (strncmp(job->key, prefix, strlen(prefix)) != 0)
            break;
        const char *s = drv_job_state(job);
        if (drv_job_state_final(s) || drv_job_state_active(s))
            continue;
        size_t r;
        const json_t *n;
        json_array_foreach(json_object_get(json_object_get(drv_job_run(job), "last_workers"),
                                           "nodes"), r, n)
            if (json_string_value(n) && strcmp(json_string_value(n), node->id) == 0)
                return true;
    }
    return false;
}

/* 1. a running gang: its workers' reports and its nodes */
static void follow(drv_head_t *head, drv_obj_t *job, int64_t now_ms)
{
    drv_state_t *st = head->state;
    const json_t *run = drv_job_run(job);
    const json_t *pl = json_object_get(run, "placement");
    const json_t *ws = json_object_get(job->status, "workers");
    size_t w = json_array_size(pl);
    char why[400];
    for (size_t r = 0; r < w; r++) {
        const char *nid = drv_json_str(json_array_get(pl, r), "node");
        const drv_obj_t *n = node_of(st, job->owner, nid);
        const char *ns = n ? drv_node_state_name(n) : "gone";
        int64_t silent = 0;
        if (!n || strcmp(ns, "lost") == 0 || strcmp(ns, "terminating") == 0) {
            snprintf(why, sizeof why, "node %s of rank %zu is %s", nid ? nid : "?", r, ns);
            gang_failed(head, job, why);
            return;
        }
        if (past_lease(head, n, &silent)) {
            snprintf(why, sizeof why, "node %s of rank %zu has been silent for %.1f s, past "
                     "its lease (node_timeout_ms %d + %d ms grace): its workers are stopped",
                     nid, r, (double)silent / 1000.0, head->cfg.node_timeout_ms,
                     DRV_JOB_LEASE_GRACE_MS);
            gang_failed(head, job, why);
            return;
        }
    }
    size_t running = 0, done = 0;
    for (size_t r = 0; r < w; r++) {
        char rk[16];
        snprintf(rk, sizeof rk, "%zu", r);
        const json_t *x = json_object_get(ws, rk);
        const char *xs = drv_json_str(x, "state");
        if (xs && strcmp(xs, "failed") == 0) {
            const char *reason = drv_json_str(x, "reason"), *exit = drv_json_str(x, "last_exit");
            if (r == 0 && port_retry(head, job, reason))
                return;
            if (reason && strncmp(reason, LEASE_REASON, strlen(LEASE_REASON)) == 0)
                snprintf(why, sizeof why, "node %s of rank %zu lost its lease (cut off from "
                         "the head, its agent stopped the worker): %s", drv_json_str(x, "node"), r,
                         reason);
            else
                snprintf(why, sizeof why, "rank %zu on node %s failed: %s", r, drv_json_str(x, "node"),
                         reason ? reason : exit ? exit : "no reason given");
            gang_failed(head, job, why);
            return;
        }
        running += xs && strcmp(xs, "running") == 0;
        done += xs && strcmp(xs, "succeeded") == 0;
    }
    int64_t now = now_ms / 1000;
    int64_t timeout = iget(job->spec, "timeout_seconds");
    int64_t since = iget(run, "started_at") ? iget(run, "started_at") : iget(run, "admitted_at");
    if (timeout > 0 && since > 0 && now - since > timeout) {
        json_t *nr = json_deep_copy(run);
        json_object_set_new(nr, "state", json_string("failed"));
        json_object_set_new(nr, "placement", json_array());
        json_object_set_new(nr, "finished_at", json_integer(now));
        json_object_set_new(nr, "reason", json_sprintf("ran past its timeout_seconds (%lld s); "
                                                       "its workers were stopped",
                                                       (long long)timeout));
        drv_job_put_run(head, job, nr, NULL);
        return;
    }
    if (w > 0 && done == w) {
        json_t *nr = json_deep_copy(run);
        json_object_set_new(nr, "state", json_string("succeeded"));
        json_object_set_new(nr, "placement", json_array());
        json_object_set_new(nr, "finished_at", json_integer(now));
        json_object_set_new(nr, "reason", json_sprintf("all %zu rank(s) exited with status 0 "
                                                       "(attempt %d)", w, drv_job_attempt(job)));
        drv_job_put_run(head, job, nr, NULL);
        return;
    }
    if (strcmp(drv_job_state(job), "running") != 0 && w > 0 && running + done == w) {
        json_t *nr = json_deep_copy(run);
        json_object_set_new(nr, "state", json_string("running"));
        json_object_set_new(nr, "started_at", json_integer(now));
        json_object_set_new(nr, "reason", json_sprintf("all %zu worker(s) started (attempt %d)",
                                                       w, drv_job_attempt(job)));
        drv_job_put_run(head, job, nr, NULL);
        return;
    }
    drv_job_render(st, job);
}

/* 2. admission ---------------------------------------------------------------- */

typedef struct pass {
    drv_head_t *head;
    drv_sched_node_t *nodes;     /* the copy admission commits to */
    size_t n;
    size_t n_pools;              /* the nodepool collection's size */
    int **pool_ranks;            /* per gang built: by nodepool index */
    size_t n_ranks, cap_ranks;
    const char **types;          /* per gang: 32 slots */
} pass_t;

static int *new_ranks(pass_t *p)
{
    if (p->n_ranks == p->cap_ranks) {
        p->cap_ranks = p->cap_ranks ? 2 * p->cap_ranks : 16;
        p->pool_ranks = realloc(p->pool_ranks, p->cap_ranks * sizeof *p->pool_ranks);
        if (!p->pool_ranks)
            abort();
    }
    int *r = malloc((p->n_pools ? 2 * p->n_pools : 1) * sizeof *r);
    if (!r)
        abort();
    for (size_t i = 0; i < 2 * p->n_pools; i++)
        r[i] = -1;
    return p->pool_ranks[p->n_ranks++] = r;
}

/* The gang of an object with a `nodepools` list (a job, or a deployment
 * for its owed replicas): pool ranks by nodepool index. A node without a
 * container engine is in pool n_pools + its nodepool's index (admit()), which
 * a gang that runs an image (containers) does not take. */
static void gang_of(pass_t *p, const drv_obj_t *o, bool image, drv_gang_request_t *g)
{
    drv_state_t *st = p->head->state;
    int *pr = new_ranks(p);
    int rank[16];
    size_t npl = drv_deployment_ranks(o, rank, 16);
    const json_t *pls = json_object_get(o->spec, "nodepools");
    for (size_t a = 0; a < npl; a++) {
        const json_t *pl = json_array_get(pls, a);
        char key[256];
        snprintf(key, sizeof key, "%s/%s/%s", o->owner, drv_json_str(pl, "cluster"), drv_json_str(pl, "nodepool"));
        size_t i = drv_state_lower_bound(st, DRV_K_NODEPOOL, key);
        if (i < p->n_pools && strcmp(drv_state_at(st, DRV_K_NODEPOOL, i)->key, key) == 0) {
            pr[i] = rank[a];
            if (!image)
                pr[p->n_pools + i] = rank[a];
        }
    }
    g->pool_rank = pr;
    g->n_pool_rank = 2 * p->n_pools;
    g->pool_names = NULL;
    g->n_pool_names = 0;
}

/* The snapshot's choice for each rank of a placement (running jobs). */
static drv_sched_choice_t *choices_of(pass_t *p, const drv_obj_t *job)
{
    drv_state_t *st = p->head->state;
    const json_t *pl = json_object_get(drv_job_run(job), "placement");
    drv_sched_choice_t *ch = calloc(json_array_size(pl) + 1, sizeof *ch);
    if (!ch)
        abort();
    for (size_t r = 0; r < json_array_size(pl); r++) {
        const json_t *e = json_array_get(pl, r);
        char key[192];
        snprintf(key, sizeof key, "%s/%s", job->owner, drv_json_str(e, "node"));
        size_t ni = drv_state_lower_bound(st, DRV_K_NODE, key);
        ch[r].node = ni < p->n ? (int)ni : 0;
        ch[r].whole = json_is_true(json_object_get(e, "whole"));
        size_t k;
        json_t *g;
        json_array_foreach(json_object_get(e, "gpus"), k, g) {
            for (int x = 0; x < p->nodes[ch[r].node].n_gpus && ch[r].n_gpus < DRV_SCHED_MAX_GPUS;
                 x++)
                if (p->nodes[ch[r].node].gpus[x].uuid && drv_json_str(g, "uuid") &&
                    strcmp(p->nodes[ch[r].node].gpus[x].uuid, drv_json_str(g, "uuid")) == 0)
                    ch[r].gpus[ch[r].n_gpus++] = x;
            ch[r].gpu_memory_mib = iget(g, "memory_mib");
            ch[r].compute_percent = (int)iget(g, "compute_percent");
        }
    }
    return ch;
}

/* A MASTER_PORT on rank 0's node that no other active gang there uses.
 * The sequence is salted per head process, so heads that share machines
 * (tests with the local provider, or several clusters' jobs with the same
 * id on one node) do not all try the same ports in the same order. */
static int pick_port(const drv_head_t *head, const drv_obj_t *job, const char *node,
                     int port_try)
{
    drv_state_t *st = head->state;
    static unsigned salt;
    if (!salt)
        salt = (unsigned)drv_now_ms() * 2654435761u | 1u;
    int base = head->cfg.job_port_min, count = head->cfg.job_port_max - base + 1;
    if (base <= 0 || count <= 0) {
        base = DRV_JOBS_PORT_BASE;
        count = DRV_JOBS_PORT_COUNT;
    }
    unsigned h = ((unsigned)drv_key_hash(job->key) ^ salt) +
                 (unsigned)drv_job_attempt(job) * 7919u + (unsigned)port_try * 104729u;
    for (int k = 0; k < count; k++) {
        int port = base + (int)((h + (unsigned)k) % (unsigned)count);
        bool taken = false;
        for (size_t j = 0; j < drv_state_count(st, DRV_K_JOB) && !taken; j++) {
            const drv_obj_t *o = drv_state_at(st, DRV_K_JOB, j);
            const json_t *run = drv_job_run(o);
            if (o == job || !drv_job_state_active(drv_job_state(o)) ||
                strcmp(o->owner, job->owner) != 0)
                continue;
            const char *n0 = drv_json_str(json_array_get(json_object_get(run, "placement"), 0), "node");
            taken = n0 && strcmp(n0, node) == 0 && iget(run, "master_port") == port;
        }
        if (!taken)
            return port;
    }
    return base;
}

static drv_obj_t *admit_one(pass_t *p, drv_obj_t *job, const drv_gang_request_t *g,
                            const drv_sched_choice_t *ranks, bool backfilled, int64_t now_ms)
{
    drv_head_t *head = p->head;
    json_t *pl = json_array();
    char nodes_desc[256] = "";
    for (int r = 0; r < g->workers; r++) {
        const drv_sched_choice_t *c = &ranks[r];
        const drv_sched_node_t *sn = &p->nodes[c->node];
        json_t *gpus = json_array();
        for (int k = 0; k < c->n_gpus; k++) {
            const drv_sched_gpu_t *gg = &sn->gpus[c->gpus[k]];
            json_array_append_new(gpus, json_pack("{s:i, s:s, s:I, s:i}", "index", gg->index,
                                                  "uuid", gg->uuid ? gg->uuid : "", "memory_mib",
                                                  (json_int_t)c->gpu_memory_mib,
                                                  "compute_percent", c->compute_percent));
        }
        json_array_append_new(pl, json_pack("{s:i, s:s, s:o, s:b}", "rank", r, "node", sn->id,
                                            "gpus", gpus, "whole",
                                            c->whole && g->worker.gpu_count > 0));
        if (r == 0 || ranks[r - 1].node != c->node) {
            size_t l = strlen(nodes_desc);
            snprintf(nodes_desc + l, sizeof nodes_desc - l, "%s%s", l ? ", " : "", sn->id);
        }
    }
    const char *n0 = p->nodes[ranks[0].node].id;
    const drv_obj_t *node0 = node_of(head->state, job->owner, n0);
    const char *addr = node0 ? drv_json_str(node0->status, "address") : NULL;
    if (!addr || !addr[0])
        addr = "127.0.0.1";
    const json_t *old = drv_job_run(job);
    json_t *run = old ? json_deep_copy(old) : json_pack("{s:i, s:i, s:i}", "attempt", 1,
                                                          "restarts", 0, "preemptions", 0);
    json_object_set_new(run, "state", json_string("admitted"));
    json_object_set_new(run, "placement", pl);
    json_object_set_new(run, "master_addr", json_string(addr));
    json_object_del(run, "port_try");   /* a new attempt starts with its first port */
    json_object_set_new(run, "master_port", json_integer(pick_port(head, job, n0, 0)));
    json_object_set_new(run, "admitted_at", json_integer(now_ms / 1000));
    /* the seconds it queued, for its wait bound once it queues again */
    int64_t enq = iget(run, "enqueued_at") ? iget(run, "enqueued_at") : job->created_at;
    if (now_ms / 1000 > enq)
        json_object_set_new(run, "queued_s",
                            json_integer(iget(run, "queued_s") + now_ms / 1000 - enq));
    json_object_set_new(run, "rate", drv_job_rate(head->state, job->owner, pl));
    json_object_del(run, "started_at");
    json_object_set_new(run, "reason",
                        json_sprintf("%s%d worker(s) on %s",
                                     backfilled ? "backfilled behind the queue's head: " : "",
                                     g->workers, nodes_desc));
    job = drv_job_put_run(head, job, run, NULL);
    run = json_deep_copy(drv_job_run(job));
    json_object_set_new(run, "state", json_string("starting"));
    json_object_set_new(run, "reason", json_sprintf("attempt %d: its workers are sent to "
                                                    "their nodes (master %s:%lld)",
                                                    drv_job_attempt(job), addr,
                                                    (long long)iget(run, "master_port")));
    return drv_job_put_run(head, job, run, NULL);
}

/* A preemptible running job makes room for a higher-priority one: it
 * leaves its nodes (its workers get SIGTERM, the agent's grace period,
 * then SIGKILL) and queues again as attempt + 1, resuming from its
 * checkpoints; a preemption is not a restart (max_restarts). */
static void preempt(drv_head_t *head, drv_obj_t *job, const char *for_what)
{
    json_t *run = json_deep_copy(drv_job_run(job));
    drv_job_stop_placement(job, run);   /* held until its workers are gone */
    json_object_set_new(run, "state", json_string("preempted"));
    json_object_set_new(run, "placement", json_array());
    json_object_set_new(run, "attempt", json_integer(drv_job_attempt(job) + 1));
    json_object_set_new(run, "preemptions", json_integer(iget(run, "preemptions") + 1));
    json_object_set_new(run, "enqueued_at", json_integer(drv_now_ms() / 1000));
    json_object_set_new(run, "reason",
                        json_sprintf("preempted for %s; it queues again and resumes from its "
                                     "checkpoints", for_what));
    drv_info("job %s/%s: %s", job->owner, job->id, drv_json_str(run, "reason"));
    drv_job_put_run(head, job, run, NULL);
}

/* A copy of the pass's snapshot without the stopping placements
 * (drv_jobs_release_stopping). */
static drv_sched_node_t *future(const pass_t *p)
{
    drv_sched_node_t *f = malloc((p->n ? p->n : 1) * sizeof *f);
    if (!f)
        abort();
    memcpy(f, p->nodes, p->n * sizeof *f);
    drv_jobs_release_stopping(p->head->state, f, p->n);
    return f;
}

/* The queue's head does not fit: stop the preemptible running jobs of
 * lower priority that lose the least work, if that makes it fit
 * (drv_admit_victims on the pass's snapshot, admitted gangs included). */
static void make_room(pass_t *p, const drv_admit_job_t *hj, bool due,
                      const drv_admit_running_t *running, const size_t *ridx, size_t nr,
                      const drv_place_policy_t *policy, double now)
{
    bool any = false;
    /* a head due by its wait bound outranks every preemptible job (drover-sim's rule) */
    int prio = due ? INT_MAX : drv_admit_effective_priority(hj, now, JOB_AGING_SECONDS);
    for (size_t i = 0; i < nr; i++)
        any |= running[i].preemptible && running[i].priority < prio;
    if (!any)
        return;
    size_t *victims = calloc(nr + 1, sizeof *victims), nv = 0;
    char why[256];
    if (!victims)
        abort();
    char for_what[192];
    if (due)
        snprintf(for_what, sizeof for_what, "job %s (due by its wait bound)", hj->id);
    else
        snprintf(for_what, sizeof for_what, "job %s (priority %d)", hj->id, prio);
    /* victims on what the nodes hold once the stopping workers are gone:
     * none when those already make room (the head is placed once they go) */
    drv_sched_node_t *fut = future(p);
    if (drv_admit_victims(fut, p->n, running, nr, &hj->gang, prio, now, policy,
                          victims, &nv, why, sizeof why) == 0) {
        for (size_t k = 0; k < nv; k++)
            preempt(p->head, drv_state_at(p->head->state, DRV_K_JOB, ridx[victims[k]]),
                    for_what);
    }
    free(fut);
    free(victims);
}

/* Deployments' replicas still owed come before any job: each is placed on
 * the snapshot (so no job takes its room), preempting preemptible running
 * jobs when it fits no other way; the victims leave running[] (the arrays
 * are compacted, *nr updated). */
static void reserve_first(pass_t *p, const drv_admit_reserve_t *reserve, size_t nres,
                          drv_admit_running_t *running, size_t *ridx,
                          drv_sched_choice_t **chs, size_t *nr,
                          const drv_place_policy_t *policy, double now)
{
    size_t *victims = calloc(*nr + 1, sizeof *victims);
    bool *gone = calloc(*nr + 1, sizeof *gone);
    if (!victims || !gone)
        abort();
    /* fut: the snapshot once the stopping workers are gone. A replica that
     * fits only there waits for them (no more victims); its place is held
     * on both, so no job takes it meanwhile */
    drv_sched_node_t *fut = future(p);
    for (size_t r = 0; r < nres; r++) {
        const drv_gang_request_t *g = &reserve[r].replicas;
        drv_sched_choice_t ch;
        drv_gang_placement_t gp = {.ranks = &ch};
        char why[256];
        if (drv_gang_place(p->nodes, p->n, g, policy, &gp, why, sizeof why) == 0) {
            drv_gang_commit(p->nodes, g, &ch);
            drv_gang_commit(fut, g, &ch);
            continue;
        }
        if (drv_gang_place(fut, p->n, g, policy, &gp, why, sizeof why) == 0) {
            drv_gang_commit(fut, g, &ch);
            drv_gang_commit(p->nodes, g, &ch);
            continue;
        }
        size_t nv = 0;
        if (*nr == 0 || drv_admit_victims(fut, p->n, running, *nr, g, INT_MAX, now, policy,
                                          victims, &nv, why, sizeof why) < 0 || nv == 0)
            continue;
        char for_what[192];
        snprintf(for_what, sizeof for_what, "deployment %s's replicas", reserve[r].deployment);
        for (size_t k = 0; k < nv; k++) {
            preempt(p->head, drv_state_at(p->head->state, DRV_K_JOB, ridx[victims[k]]),
                    for_what);
            gone[victims[k]] = true;
        }
        size_t w = 0;   /* the victims leave running[] */
        for (size_t i = 0; i < *nr; i++) {
            if (gone[i]) {
                free(chs[i]);
                continue;
            }
            running[w] = running[i];
            ridx[w] = ridx[i];
            chs[w] = chs[i];
            w++;
        }
        *nr = w;
        memset(gone, 0, (*nr + 1) * sizeof *gone);
        if (drv_gang_place(fut, p->n, g, policy, &gp, why, sizeof why) == 0) {
            drv_gang_commit(fut, g, &ch);
            drv_gang_commit(p->nodes, g, &ch);   /* over the victims' stopping GPUs */
        }
    }
    free(fut);
    free(victims);
    free(gone);
}

/* The head of the queue, waiting for room: one want per worker for the
 * node autoscaler (its nodepools by priority, as a deployment's). */
static void want_nodes(drv_head_t *head, const char *key, drv_pending_t **out, size_t *n_out)
{
    const drv_obj_t *job = drv_state_get(head->state, DRV_K_JOB, key);
    if (!job || drv_job_state_active(drv_job_state(job)) || drv_job_state_final(drv_job_state(job)))
        return;
    size_t w = (size_t)iget(job->spec, "workers");
    *out = calloc(w + 1, sizeof **out);
    if (!*out)
        abort();
    for (size_t i = 0; i < w; i++) {
        drv_pending_t *p = &(*out)[i];
        snprintf(p->deployment_key, sizeof p->deployment_key, "%s", job->key);
        drv_job_request(job, &p->req, p->types, sizeof p->types / sizeof p->types[0]);
        p->gang = (int)(drv_key_hash(job->key) & 0x7fffffff) | 1;   /* all or none */
    }
    *n_out = w;
}

/* 2a. wait bounds (issue 15) ------------------------------------------------ */

/* A job's wait bound: submit + WAIT_FACTOR x max(its FIFO wait, WAIT_FLOOR_S),
 * its FIFO start from a shadow of strict submit order (sched/shadow.h), as
 * in drover-sim jobs. */
#define WAIT_FACTOR 2.0
#define WAIT_FLOOR_S 600.0

/* run.wait: {fifo_start, bound} (epoch seconds) or {none: why}, written
 * once when the job is first seen queued; NULL before. */
static const json_t *wait_rec(const drv_obj_t *job)
{
    return json_object_get(drv_job_run(job), "wait");
}

/* Queued, with a run-time estimate (timeout_seconds), no bound yet. */
static bool wants_bound(const drv_obj_t *job)
{
    const char *s = drv_job_state(job);
    return !drv_job_state_final(s) && !drv_job_state_active(s) && !wait_rec(job) &&
           iget(job->spec, "timeout_seconds") > 0;
}

/* Every node of the placement is still known (its choices point at it). */
static bool placement_known(drv_state_t *st, const drv_obj_t *job)
{
    size_t r;
    const json_t *e;
    json_array_foreach(json_object_get(drv_job_run(job), "placement"), r, e)
        if (!node_of(st, job->owner, drv_json_str(e, "node")))
            return false;
    return true;
}

static void clamp_used(drv_sched_node_t *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        drv_sched_node_t *nd = &nodes[i];
        nd->used_cpu_millis = nd->used_cpu_millis < 0 ? 0 : nd->used_cpu_millis;
        nd->used_memory_mib = nd->used_memory_mib < 0 ? 0 : nd->used_memory_mib;
        for (int g = 0; g < nd->n_gpus; g++) {
            drv_sched_gpu_t *x = &nd->gpus[g];
            x->shares = x->shares < 0 ? 0 : x->shares;
            x->used_memory_mib = x->used_memory_mib < 0 ? 0 : x->used_memory_mib;
            x->used_compute = x->used_compute < 0 ? 0 : x->used_compute;
        }
    }
}

/* One owner's jobs that lack a bound get one: a fresh shadow over the
 * owner's nodes as FIFO could use them (base: the replicas, no job), the
 * owner's recorded jobs replayed from their recorded starts, then the new
 * ones in submit order (drv_fifo_shadow_bounds). Nothing is kept between
 * passes, so a restarted head, or one whose nodes changed, needs no
 * history but the records. Each new record is one durable write, once. */
static void owner_bounds(pass_t *p, const drv_sched_node_t *base, const char *owner,
                         const size_t *order, size_t nj, const char *(*types)[32],
                         drv_wait_job_t *wj, size_t *wi)
{
    drv_state_t *st = p->head->state;
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s/", owner);
    size_t lo = drv_state_lower_bound(st, DRV_K_NODE, prefix), hi = lo;
    while (hi < p->n && strncmp(drv_state_at(st, DRV_K_NODE, hi)->key, prefix,
                                strlen(prefix)) == 0)
        hi++;
    size_t m = 0;
    for (size_t oj = 0; oj < nj; oj++) {
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, order[oj]);
        if (strcmp(job->owner, owner) != 0)
            continue;
        const json_t *w = wait_rec(job), *run = drv_job_run(job);
        double fs = NAN;
        if (w) {
            if (!json_is_number(json_object_get(w, "fifo_start")) ||
                (drv_job_state_final(drv_job_state(job)) && !iget(run, "admitted_at") &&
                 !json_object_get(run, "used")))
                continue;   /* no start, or never ran: holds nothing in FIFO */
            fs = json_number_value(json_object_get(w, "fifo_start"));
        } else if (!wants_bound(job)) {
            continue;
        }
        drv_wait_job_t *j = &wj[m];
        *j = (drv_wait_job_t){.submit = (double)job->created_at,
                              .est = (double)iget(job->spec, "timeout_seconds"),
                              .gang = {.workers = (int)iget(job->spec, "workers")},
                              .fifo_start = fs};
        drv_job_request(job, &j->gang.worker, types[m], 32);
        gang_of(p, job, drv_json_str(json_object_get(job->spec, "runtime"), "image") != NULL, &j->gang);
        wi[m++] = order[oj];
    }
    drv_error_t err;
    if (drv_fifo_shadow_bounds(base + lo, hi - lo, NULL, wj, m, WAIT_FACTOR, WAIT_FLOOR_S,
                               &err) < 0) {
        drv_warn("job wait bounds of %s: %s", owner, err.message);
        return;
    }
    for (size_t k = 0; k < m; k++) {
        drv_obj_t *job = drv_state_at(st, DRV_K_JOB, wi[k]);
        if (!wants_bound(job))
            continue;
        const json_t *old = drv_job_run(job);
        json_t *run = old ? json_deep_copy(old)
                          : json_pack("{s:s, s:i, s:i, s:i}", "state", "queued", "attempt", 1,
                                      "restarts", 0, "preemptions", 0);
        json_t *w;
        if (isfinite(wj[k].fifo_start))
            w = json_pack("{s:f, s:f}", "fifo_start", wj[k].fifo_start, "bound",
                          wj[k].deadline);
        else
            w = json_pack("{s:s}", "none", "FIFO would never start it: its gang fits no "
                          "schedulable node of its nodepools at submission, even once the "
                          "earlier jobs end");
        json_object_set_new(run, "wait", w);
        drv_job_put_run(p->head, job, run, NULL);
    }
}

static void wait_bounds(pass_t *p, const size_t *order, size_t nj)
{
    drv_state_t *st = p->head->state;
    char (*owners)[64] = NULL;
    size_t n_owners = 0;
    for (size_t oj = 0; oj < nj; oj++) {
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, order[oj]);
        if (!wants_bound(job))
            continue;
        bool seen = false;
        for (size_t k = 0; k < n_owners && !seen; k++)
            seen = strcmp(owners[k], job->owner) == 0;
        if (seen)
            continue;
        char (*o)[64] = realloc(owners, (n_owners + 1) * sizeof *owners);
        if (!o)
            abort();
        owners = o;
        snprintf(owners[n_owners++], sizeof owners[0], "%s", job->owner);
    }
    if (!n_owners)
        return;
    /* what FIFO may use: the nodes holding the deployments' replicas, no job */
    drv_sched_node_t *base = malloc((p->n ? p->n : 1) * sizeof *base);
    const char *(*types)[32] = calloc(nj + 1, sizeof *types);
    drv_wait_job_t *wj = calloc(nj + 1, sizeof *wj);
    size_t *wi = calloc(nj + 1, sizeof *wi);
    if (!base || !types || !wj || !wi)
        abort();
    memcpy(base, p->nodes, p->n * sizeof *base);
    for (size_t oj = 0; oj < nj; oj++) {
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, order[oj]);
        if (!drv_job_state_active(drv_job_state(job)) || !placement_known(st, job))
            continue;
        drv_gang_request_t g = {.workers = (int)json_array_size(
                                    json_object_get(drv_job_run(job), "placement"))};
        drv_job_request(job, &g.worker, types[0], 32);
        drv_sched_choice_t *ch = choices_of(p, job);
        drv_gang_release(base, &g, ch);
        free(ch);
    }
    drv_jobs_release_stopping(st, base, p->n);
    clamp_used(base, p->n);
    for (size_t k = 0; k < n_owners; k++)
        owner_bounds(p, base, owners[k], order, nj, types, wj, wi);
    free(owners);
    free(base);
    free(types);
    free(wj);
    free(wi);
}

/* Submission order: created_at, then the creation's store seq (the
 * queue's index is drv_admit's last tie-break). */
static drv_state_t *order_st;

static uint64_t submit_seq(const drv_obj_t *job)
{
    const json_t *s = json_object_get(drv_job_run(job), "submit_seq");
    return s ? (uint64_t)json_integer_value(s) : job->seq;
}

static int by_submission(const void *x, const void *y)
{
    const drv_obj_t *a = drv_state_at(order_st, DRV_K_JOB, *(const size_t *)x);
    const drv_obj_t *b = drv_state_at(order_st, DRV_K_JOB, *(const size_t *)y);
    if (a->created_at != b->created_at)
        return a->created_at < b->created_at ? -1 : 1;
    return (submit_seq(a) > submit_seq(b)) - (submit_seq(a) < submit_seq(b));
}

static void admit(drv_head_t *head, const drv_place_policy_t *policy,
                  const drv_sched_node_t *snap, size_t n, const drv_pending_t *pending,
                  size_t n_pending, int64_t now_ms, drv_pending_t **wants, size_t *n_wants)
{
    drv_state_t *st = head->state;
    pass_t p = {.head = head, .n = n, .n_pools = drv_state_count(st, DRV_K_NODEPOOL)};
    p.nodes = malloc((n ? n : 1) * sizeof *p.nodes);
    if (!p.nodes)
        abort();
    memcpy(p.nodes, snap, n * sizeof *p.nodes);
    for (size_t i = 0; i < n; i++) {
        const drv_obj_t *nd = drv_state_at(st, DRV_K_NODE, i);
        char key[256];
        snprintf(key, sizeof key, "%s/%s/%s", nd->owner, drv_json_str(nd->spec, "cluster"),
                 drv_json_str(nd->spec, "nodepool"));
        size_t k = drv_state_lower_bound(st, DRV_K_NODEPOOL, key);
        p.nodes[i].pool = k < p.n_pools && strcmp(drv_state_at(st, DRV_K_NODEPOOL, k)->key,
                                                  key) == 0 ? (int)k : -1;
        const char *eng = drv_json_str(json_object_get(nd->status, "container_runtime"), "engine");
        if (p.nodes[i].pool >= 0 && (!eng || strcmp(eng, "none") == 0))
            p.nodes[i].pool += (int)p.n_pools;   /* no container engine (gang_of) */
    }
    size_t nj = drv_state_count(st, DRV_K_JOB);
    drv_admit_job_t *queue = calloc(nj + 1, sizeof *queue);
    size_t *qidx = calloc(nj + 1, sizeof *qidx), *ridx = calloc(nj + 1, sizeof *ridx);
    drv_admit_running_t *running = calloc(nj + 1, sizeof *running);
    drv_admit_reserve_t *reserve = calloc(n_pending + 1, sizeof *reserve);
    const char *(*types)[32] = calloc(nj + n_pending + 1, sizeof *types);
    drv_sched_choice_t **chs = calloc(nj + 1, sizeof *chs);
    if (!queue || !qidx || !ridx || !running || !reserve || !types || !chs)
        abort();
    size_t nq = 0, nr = 0, nt = 0, nres = 0;
    size_t *order = calloc(nj + 1, sizeof *order);
    if (!order)
        abort();
    for (size_t j = 0; j < nj; j++)
        order[j] = j;
    order_st = st;   /* (one controller thread) */
    qsort(order, nj, sizeof *order, by_submission);
    /* before the queue is built: its entries point into the job objects,
     * which a new bound's write replaces */
    wait_bounds(&p, order, nj);
    double margin = (double)head->cfg.job_wait_margin_s;
    for (size_t oj = 0; oj < nj; oj++) {
        size_t j = order[oj];
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        const char *s = drv_job_state(job);
        const json_t *run = drv_job_run(job);
        if (drv_job_state_final(s))
            continue;
        /* its wait bound; after a restart or preemption, what is left of
         * its budget of queueing (drv_wait_requeued), as in drover-sim */
        const json_t *wb = json_object_get(wait_rec(job), "bound");
        bool bounded = json_is_number(wb);
        double submit = (double)job->created_at, queued_s = (double)iget(run, "queued_s");
        double enq = iget(run, "enqueued_at") ? (double)iget(run, "enqueued_at") : submit;
        double bound = bounded ? json_number_value(wb) : INFINITY;
        drv_gang_request_t g = {.workers = (int)iget(job->spec, "workers")};
        drv_job_request(job, &g.worker, types[nt++], 32);
        gang_of(&p, job, drv_json_str(json_object_get(job->spec, "runtime"), "image") != NULL, &g);
        if (drv_job_state_active(s)) {
            int64_t timeout = iget(job->spec, "timeout_seconds");
            double since = (double)(iget(run, "started_at") ? iget(run, "started_at")
                                                            : iget(run, "admitted_at"));
            chs[nr] = choices_of(&p, job);
            ridx[nr] = j;
            /* a victim's priority is the one it would have back in the
             * queue (its own plus its aging), as in drover-sim jobs:
             * otherwise aged jobs preempt each other in turn */
            drv_admit_job_t aged = {.priority = (int)iget(job->spec, "priority"),
                                    .submit_time = (double)job->created_at};
            running[nr] = (drv_admit_running_t){
                .id = job->id, .user = job->owner,
                .priority = drv_admit_victim_priority(
                    drv_admit_effective_priority(&aged, (double)now_ms / 1000.0,
                                                 JOB_AGING_SECONDS),
                    bounded, bound - submit - queued_s, margin),
                .preemptible = json_is_true(json_object_get(job->spec, "preemptible")),
                .expected_end = timeout > 0 ? since + (double)timeout : INFINITY,
                .last_checkpoint = since, .gang = g, .ranks = chs[nr]};
            nr++;
            continue;
        }
        qidx[nq] = j;
        queue[nq++] = (drv_admit_job_t){
            .id = job->id, .user = job->owner, .priority = (int)iget(job->spec, "priority"),
            .submit_time = (double)job->created_at,
            .duration = (double)iget(job->spec, "timeout_seconds"),
            .preemptible = json_is_true(json_object_get(job->spec, "preemptible")), .gang = g,
            .wait_deadline = bounded ? drv_wait_requeued(bound, submit, enq, queued_s) : 0,
            /* status.wait_bound.due: the last pass found it due; dropped
             * while it runs (drv_job_render), so not since it started */
            .was_due = bounded && json_is_true(json_object_get(
                                      json_object_get(job->status, "wait_bound"), "due"))};
    }
    for (size_t i = 0; i < n_pending; i++) {
        const drv_obj_t *dep = drv_state_get(st, DRV_K_DEPLOYMENT, pending[i].deployment_key);
        if (!dep)
            continue;
        drv_gang_request_t g = {.workers = 1, .worker = pending[i].req};
        memcpy(types[nt], pending[i].types, sizeof pending[i].types);
        g.worker.gpu_types = types[nt++];
        char mkey[192];
        snprintf(mkey, sizeof mkey, "%s/%s", dep->owner, drv_json_str(dep->spec, "model"));
        const drv_obj_t *m = drv_state_get(st, DRV_K_MODEL, mkey);
        gang_of(&p, dep, m && drv_json_str(json_object_get(m->spec, "runtime"), "image"), &g);
        reserve[nres++] = (drv_admit_reserve_t){.deployment = dep->id, .replicas = g};
    }
    reserve_first(&p, reserve, nres, running, ridx, chs, &nr, policy, (double)now_ms / 1000.0);
    /* admins' per-user gpu_quota (the user object's) */
    size_t nu = 0, nuser = drv_state_count(st, DRV_K_USER);
    drv_admit_user_t *users = calloc(nuser ? nuser : 1, sizeof *users);
    if (!users)
        abort();
    for (size_t i = 0; i < nuser; i++) {
        const drv_obj_t *u = drv_state_at(st, DRV_K_USER, i);
        const json_t *q = json_object_get(u->spec, "gpu_quota");
        if (json_is_number(q))
            users[nu++] = (drv_admit_user_t){.name = u->id, .gpu_quota = json_number_value(q)};
    }
    drv_admit_input_t in = {.now = (double)now_ms / 1000.0, .queue = queue, .n_queue = nq,
                            .users = users, .n_users = nu,
                            .running = running, .n_running = nr, .reserve = NULL,
                            .n_reserve = 0 /* placed by reserve_first */,
                            .order = DRV_ADMIT_FAIR, .backfill = true, .policy = policy,
                            .aging_seconds = JOB_AGING_SECONDS, .wait_margin = margin,
                            .shape_bounded = true, .reserve_due = true,
                            .edf_guard = true, .sticky_due = true /* as drover-sim's defaults */};
    drv_admit_result_t res;
    drv_error_t err;
    if (nq > 0 && drv_admit(p.nodes, n, &in, &res, &err) == 0) {
        /* first, while the queue's gangs still point into live objects */
        char head_key[256] = "";
        if (res.head >= 0) {
            snprintf(head_key, sizeof head_key, "%s",
                     drv_state_at(st, DRV_K_JOB, qidx[res.head])->key);
            make_room(&p, &queue[res.head], res.jobs[res.head].due, running, ridx, nr, policy,
                      in.now);
        } else {   /* no head: the first job its nodepools' nodes cannot hold, if any,
                      gets the nodes (its nodepools may have none yet) */
            int best = -1;
            for (size_t q = 0; q < nq; q++)
                if (res.jobs[q].state == DRV_JOB_UNSCHEDULABLE &&
                    (best < 0 || res.jobs[q].position < res.jobs[best].position))
                    best = (int)q;
            if (best >= 0)
                snprintf(head_key, sizeof head_key, "%s",
                         drv_state_at(st, DRV_K_JOB, qidx[best])->key);
        }
        for (size_t q = 0; q < nq; q++) {
            drv_admit_verdict_t *v = &res.jobs[q];
            drv_obj_t *job = drv_state_at(st, DRV_K_JOB, qidx[q]);
            const char *s = drv_job_state(job);
            if (v->state == DRV_JOB_ADMITTED || v->state == DRV_JOB_BACKFILLED) {
                admit_one(&p, job, &queue[q].gang, v->ranks, v->state == DRV_JOB_BACKFILLED,
                          now_ms);
            } else if (v->state == DRV_JOB_UNSCHEDULABLE) {
                if (strcmp(s, "unschedulable") != 0 ||
                    strcmp(drv_json_str(drv_job_run(job), "reason") ? drv_json_str(drv_job_run(job), "reason")
                                                             : "", v->why) != 0) {
                    const json_t *old = drv_job_run(job);
                    json_t *run = old ? json_deep_copy(old) : json_pack("{s:i}", "attempt", 1);
                    json_object_set_new(run, "state", json_string("unschedulable"));
                    json_object_set_new(run, "reason", json_string(v->why));
                    job = drv_job_put_run(head, job, run, NULL);
                }
                drv_job_set_queue(st, job, v->position, v->why);
                drv_job_set_wait_due(st, job, v->due);
            } else {
                if (strcmp(s, "unschedulable") == 0) {   /* room could come now */
                    json_t *run = json_deep_copy(drv_job_run(job));
                    json_object_set_new(run, "state", json_string("queued"));
                    json_object_set_new(run, "reason", json_string("its nodepools could hold "
                                                                   "it now"));
                    job = drv_job_put_run(head, job, run, NULL);
                }
                char why[256];
                snprintf(why, sizeof why, "%s%s%s", drv_admit_state_name(v->state),
                         v->why[0] ? ": " : "", v->why);
                drv_job_set_queue(st, job, v->position, why);
                drv_job_set_wait_due(st, job, v->due);
            }
        }
        drv_admit_result_free(&res);
        if (head_key[0])
            want_nodes(head, head_key, wants, n_wants);
    } else if (nq > 0) {
        drv_warn("job admission: %s", err.message);
    }
    for (size_t i = 0; i < p.n_ranks; i++)
        free(p.pool_ranks[i]);
    for (size_t i = 0; i < nr; i++)
        free(chs[i]);
    free(p.pool_ranks);
    free(p.nodes);
    free(queue);
    free(qidx);
    free(ridx);
    free(order);
    free(running);
    free(users);
    free(reserve);
    free(types);
    free(chs);
}

void drv_jobs_pass(drv_head_t *head, const drv_place_policy_t *policy,
                   const drv_sched_node_t *nodes, size_t n, const drv_pending_t *pending,
                   size_t n_pending, int64_t now_ms, drv_pending_t **wants, size_t *n_wants)
{
    *wants = NULL;
    *n_wants = 0;
    if (!boot_mono)
        boot_mono = drv_mono_ms();
    drv_state_t *st = head->state;
    bool queued = false, preemptible = false;
    for (size_t j = 0; j < drv_state_count(st, DRV_K_JOB); j++) {
        drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        const char *s = drv_job_state(job);
        if (drv_job_state_active(s))
            follow(head, job, now_ms);
        job = drv_state_at(st, DRV_K_JOB, j);
        s = drv_job_state(job);
        queued |= !drv_job_state_final(s) && !drv_job_state_active(s);
        preemptible |= drv_job_state_active(s) &&
                       json_is_true(json_object_get(job->spec, "preemptible"));
    }
    if (queued || (n_pending > 0 && preemptible))   /* replicas owed may preempt */
        admit(head, policy, nodes, n, pending, n_pending, now_ms, wants, n_wants);
}
