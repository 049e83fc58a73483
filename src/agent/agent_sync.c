/* agent_sync.c — drover-agent's sync loop: the report of what the node
 * observes (GPUs, replicas, fetches, cache), the long poll to the head and
 * handing the desired set to the supervisor. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "common/buildinfo.h"
#include "common/log.h"
#include "common/util.h"

/* --- sync ------------------------------------------------------------------- */

/* --- GPU shares --------------------------------------------------------------- */

/* The GPUs as reported, each with the compute sharing in force on it. */
json_t *drv_agent__gpus_json(agent_t *ag)
{
    json_t *gpus = drv_gpus_to_json(ag->gpus);
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g) {
        json_object_set_new(g, "compute_sharing",
                            json_string(drv_mps_mode(ag->mps, json_string_value(
                                                                  json_object_get(g, "uuid")))));
    }
    return gpus;
}

/* --- storage layer ----------------------------------------------------------------- */

/* A replica's artifact fetch as reported: bytes, total, rate, ETA while
 * fetching; and how long it took (seconds). */
static json_t *fetch_json(const drv_replica_status_t *r)
{
    json_t *f = json_pack("{s:s, s:I, s:I, s:f}", "artifact", r->artifact, "bytes",
                          (json_int_t)r->fetch_done, "total", (json_int_t)r->fetch_total,
                          "seconds", r->fetch_ms / 1000.0);
    if (r->state == DRV_RS_FETCHING) {
        json_object_set_new(f, "rate_bytes_per_s", json_integer((json_int_t)r->fetch_rate));
        if (r->fetch_rate > 0 && r->fetch_total >= r->fetch_done)
            json_object_set_new(f, "eta_seconds",
                                json_integer((json_int_t)((r->fetch_total - r->fetch_done) /
                                                          r->fetch_rate + 0.999)));
    }
    return f;
}

#define CACHE_REPORT_MAX 256   /* artifacts listed per sync */

/* What the node cache holds: its bytes, and the artifacts of desired sets
 * seen by this agent that are ready in it (digest, bytes). */
static json_t *cache_json(agent_t *ag)
{
    drv_cache_entry_t *ents = NULL;
    size_t n = 0;
    uint64_t held = 0;
    if (drv_cache_list(ag->cache, &ents, &n, &held) < 0)
        n = 0;
    size_t blobs = 0;
    for (size_t i = 0; i < n; i++)
        blobs += !ents[i].partial;
    free(ents);
    json_t *arts = json_array();
    for (size_t i = 0; i < ag->narts && json_array_size(arts) < CACHE_REPORT_MAX; i++) {
        drv_cache_progress_t p;
        if (drv_cache_progress(ag->cache, ag->arts[i].digest, &p) == DRV_CACHE_READY)
            json_array_append_new(arts, json_pack("{s:s, s:I}", "digest", ag->arts[i].digest,
                                                  "bytes", (json_int_t)ag->arts[i].bytes));
    }
    json_t *o = json_pack("{s:I, s:I, s:I, s:o}", "held_bytes", (json_int_t)held, "max_bytes",
                          (json_int_t)(ag->cache_max_gib * (1ull << 30)), "blobs",
                          (json_int_t)blobs, "artifacts", arts);
    if (drv_peering_url(ag->peering))
        json_object_set_new(o, "peer_url", json_string(drv_peering_url(ag->peering)));
    json_t *pf = drv_peering_prefetch_report(ag->peering);
    if (pf)
        json_object_set_new(o, "prefetch", pf);
    return o;
}

/* Remember an artifact of a desired set (for the cache report). */
static void know_artifact(agent_t *ag, const char *digest, uint64_t bytes)
{
    if (!digest || strlen(digest) != 64)
        return;
    for (size_t i = 0; i < ag->narts; i++)
        if (strcmp(ag->arts[i].digest, digest) == 0)
            return;
    if (ag->narts >= 4 * CACHE_REPORT_MAX) {   /* the oldest goes */
        memmove(ag->arts, ag->arts + 1, --ag->narts * sizeof *ag->arts);
    }
    struct known_art *na = realloc(ag->arts, (ag->narts + 1) * sizeof *na);
    if (!na)
        return;
    ag->arts = na;
    snprintf(na[ag->narts].digest, sizeof na[ag->narts].digest, "%s", digest);
    na[ag->narts++].bytes = bytes;
}

static json_t *report(agent_t *ag, bool *transitional)
{
    drv_error_t err;
    if (drv_gpus_refresh(ag->gpus, &err) < 0)
        drv_warn("GPU refresh: %s", err.message);
    drv_replica_status_t *rs = NULL;
    size_t n = drv_supervisor_status(ag->sup, &rs);
    json_t *reps = json_array(), *workers = json_array();
    *transitional = false;
    for (size_t i = 0; i < n; i++) {
        drv_replica_status_t *r = &rs[i];
        if (r->state == DRV_RS_STARTING || r->state == DRV_RS_STOPPING ||
            r->state == DRV_RS_BACKOFF || r->state == DRV_RS_FETCHING ||
            r->state == DRV_RS_PULLING)
            *transitional = true;
        json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i}", "id", r->id, "deployment",
                              r->deployment, "state", drv_rs_state_name(r->state), "pid", r->pid,
                              "restarts", r->restarts);
        if (r->endpoint[0])
            json_object_set_new(o, "endpoint", json_string(r->endpoint));
        if (r->last_exit[0])
            json_object_set_new(o, "last_exit", json_string(r->last_exit));
        if (r->reason[0])
            json_object_set_new(o, "reason", json_string(r->reason));
        if (r->log_tail[0] && r->state != DRV_RS_READY)
            json_object_set_new(o, "log_tail", json_string(r->log_tail));
        if (r->enforce_memory[0])   /* GPU shares */
            json_object_set_new(o, "enforcement",
                                json_pack("{s:s, s:s}", "memory", r->enforce_memory, "compute",
                                          r->enforce_compute));
        if (r->artifact[0])
            json_object_set_new(o, "fetch", fetch_json(r));
        if (r->isolation.set)
            json_object_set_new(o, "isolation", drv_iso_report_json(&r->isolation));
        if (r->oom_kills)
            json_object_set_new(o, "oom_kills", json_integer(r->oom_kills));
        if (r->llm_load) {   /* LLM-aware load: its metrics_path (llm_metrics.h) */
            json_t *l = json_pack("{s:f, s:f}", "running", r->llm_running, "waiting",
                                  r->llm_waiting);
            if (r->llm_kv_cache >= 0)
                json_object_set_new(l, "kv_cache", json_real(r->llm_kv_cache));
            json_object_set_new(o, "load", l);
        }
        if (r->job[0]) {   /* a job's worker (issue 15) */
            json_object_del(o, "deployment");
            json_object_del(o, "endpoint");   /* a worker's PORT is not served */
            json_object_del(o, "fetch");
            json_object_set_new(o, "job", json_string(r->job));
            json_array_append_new(workers, o);
        } else if (r->deployment[0]) {
            json_array_append_new(reps, o);
        } else {
            json_decref(o);
        }
    }
    free(rs);
    json_t *doc = json_pack("{s:I, s:s, s:s, s:s, s:i, s:I, s:s, s:o, s:o, s:{s:s, s:s}}", "version",
                     (json_int_t)ag->version, "hostname", ag->hostname, "address", ag->advertise,
                     "agent_version", drv_build_version, "cpus", ag->cpus, "memory_mib",
                     (json_int_t)ag->memory_mib, "gpu_source", drv_gpus_source(ag->gpus), "gpus",
                     drv_agent__gpus_json(ag), "replicas", reps, "logs", "url",
                     drv_logserver_url(ag->logs), "key", drv_logserver_key(ag->logs));
    if (ag->cache)
        json_object_set_new(doc, "cache", cache_json(ag));
    json_t *ctr = ag->ctr.name[0] ? json_pack("{s:s, s:s}", "engine", ag->ctr.name, "version",
                                              ag->ctr.version)
                                   : json_pack("{s:s, s:s}", "engine", "none", "reason",
                                               ag->ctr.why);
    json_t *images = drv_prepull_report(ag->prepull);   /* the nodepool's pre-pulled images */
    if (images)
        json_object_set_new(ctr, "images", images);
    json_object_set_new(doc, "container_runtime", ctr);
    json_object_set_new(doc, "workers", workers);
    json_object_set_new(doc, "manifest_refs", json_true());   /* see share_manifests below */
    return doc;
}

/* The head sends each distinct manifest once ("manifests": {DIGEST:
 * manifest}) and "manifest_digest" where a replica's artifact or a
 * prefetch entry names it: put the manifests back (shared, not copied)
 * before anything reads the set. */
static void share_manifests(json_t *resp)
{
    static const char *const lists[] = {"replicas", "prefetch", NULL};
    const json_t *all = json_object_get(resp, "manifests");
    for (int l = 0; lists[l]; l++) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(resp, lists[l]), i, e) {
            json_t *holder = l == 0 ? json_object_get(e, "artifact") : e;
            const char *dg = json_string_value(json_object_get(holder, "manifest_digest"));
            if (!dg)
                continue;
            json_t *man = json_object_get(all, dg);
            if (man)
                json_object_set(holder, "manifest", man);
            else
                drv_warn("the head named manifest %.64s but did not send it", dg);
        }
    }
}

/* A job worker's local checkpoint directory DATA_DIR/job-checkpoints/DIR
 * (DIR "ID/rank-R" from the head: [A-Za-z0-9._/-], no ".."; apart from
 * the storage layer's DATA_DIR/checkpoints, agent/checkpoint.h), made
 * with its parents. 0, or -1 when there is none (or it is refused). */
static int local_ckpt_dir(agent_t *ag, const char *scope, char *buf, size_t len)
{
    if (!scope || !*scope || strstr(scope, "..") || scope[0] == '/' ||
        strspn(scope, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-") !=
            strlen(scope))
        return -1;
    int n = snprintf(buf, len, "%s/job-checkpoints/%s", ag->data_dir, scope);
    if (n < 0 || (size_t)n >= len)
        return -1;
    for (char *p = buf + strlen(ag->data_dir) + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(buf, 0700);
        *p = '/';
    }
    return mkdir(buf, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* Hand the desired set to the supervisor. */
static void apply(agent_t *ag, const json_t *set)
{
    size_t n = json_array_size(set);
    drv_replica_spec_t *specs = calloc(n ? n : 1, sizeof *specs);
    char ***argvs = calloc(n ? n : 1, sizeof *argvs), ***envs = calloc(n ? n : 1, sizeof *envs);
    char (*uuids)[1024] = calloc(n ? n : 1, sizeof *uuids);
    char (*mdir)[700] = calloc(n ? n : 1, sizeof *mdir);
    char **mans = calloc(n ? n : 1, sizeof *mans), (*origin)[1100] = calloc(n ? n : 1, sizeof *origin);
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(set, i);
        /* storage layer: a drover:// artifact's manifest and blob path */
        const json_t *art = json_object_get(d, "artifact"), *man = json_object_get(art, "manifest");
        const char *blobs = json_string_value(json_object_get(art, "blobs"));
        if (json_is_object(man) && blobs) {
            mans[i] = json_dumps(man, JSON_COMPACT);
            snprintf(origin[i], sizeof origin[i], "%s%s", ag->server, blobs);
            know_artifact(ag, json_string_value(json_object_get(man, "digest")),
                          (uint64_t)json_integer_value(json_object_get(man, "total_size")));
            /* peers first: the supervisor's ensure joins this download */
            drv_error_t perr;
            if (drv_peering_ensure(ag->peering, art, ag->server, ag->credential, ag->node_id,
                                   &perr) < 0)
                drv_warn("artifact %s: %s (the replica's own fetch reports it)",
                         json_string_value(json_object_get(art, "id")), perr.message);
        }
        const json_t *cmd = json_object_get(d, "command"), *env = json_object_get(d, "env");
        const json_t *args = json_object_get(d, "args");   /* containers: after command */
        size_t ac = json_array_size(cmd) + json_array_size(args);
        argvs[i] = calloc(ac + 1, sizeof(char *));
        for (size_t k = 0; k < json_array_size(cmd); k++)
            argvs[i][k] = (char *)json_string_value(json_array_get(cmd, k));
        for (size_t k = 0; k < json_array_size(args); k++)
            argvs[i][json_array_size(cmd) + k] = (char *)json_string_value(json_array_get(args, k));
        envs[i] = calloc(json_object_size(env) + 2, sizeof(char *));
        size_t ec = 0;
        const char *job = json_string_value(json_object_get(d, "job"));
        if (job && local_ckpt_dir(ag, json_string_value(json_object_get(d, "local_checkpoint")),
                                  mdir[i], sizeof mdir[i]) == 0 &&
            asprintf(&envs[i][ec], "DROVER_CHECKPOINT_DIR=%s", mdir[i]) >= 0) {
            ec++;   /* a job's checkpoints on this node (without the storage layer's) */
            drv_iso_grant(ag->iso, mdir[i], true);   /* written by the replica user */
        }
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)env, key, val) {
            if (asprintf(&envs[i][ec], "%s=%s", key, json_string_value(val)) >= 0)
                ec++;
        }
        uuids[i][0] = '\0';
        size_t g;
        json_t *u;
        json_array_foreach(json_object_get(d, "gpus"), g, u) {
            size_t l = strlen(uuids[i]);
            snprintf(uuids[i] + l, sizeof uuids[i] - l, "%s%s", l ? "," : "",
                     json_string_value(u));
        }
        if (job) {
            mdir[i][0] = '\0';   /* a job's worker has no model dir */
        } else {
            snprintf(mdir[i], sizeof mdir[i], "%s/models/%s", ag->data_dir,
                     json_string_value(json_object_get(d, "model")));
            char parent[600];
            snprintf(parent, sizeof parent, "%s/models", ag->data_dir);
            mkdir(parent, 0700);
            mkdir(mdir[i], 0700);
        }
        bool whole = json_is_true(json_object_get(d, "whole_gpu"));
        json_int_t mem_mib = whole ? 0 : json_integer_value(json_object_get(d, "gpu_memory_limit_mib"));
        const char *gpu0 = json_string_value(json_array_get(json_object_get(d, "gpus"), 0));
        specs[i] = (drv_replica_spec_t){
            .id = json_string_value(json_object_get(d, "id")),
            .deployment = json_string_value(json_object_get(d, "deployment")),
            .argv = (const char *const *)argvs[i],
            .argc = ac,
            .env = (const char *const *)envs[i],
            .envc = ec,
            .health_path = json_string_value(json_object_get(d, "health_path")),
            .startup_timeout_s =
                (int)json_integer_value(json_object_get(d, "startup_timeout_seconds")),
            .model_dir = mdir[i],
            .gpu_uuids = uuids[i],
            .gpu_memory_limit_mib = mem_mib,
            .gpu_compute_percent =
                whole ? 0 : (int)json_integer_value(json_object_get(d, "gpu_compute_percent")),
            .mps_pipe_dir = mem_mib > 0 ? drv_mps_pipe_dir(ag->mps, gpu0) : NULL,
            .strict_isolation = json_is_true(json_object_get(d, "strict_isolation")),
            .artifact_manifest = mans[i],
            .artifact_origin = mans[i] ? origin[i] : NULL,
            .artifact_bearer = mans[i] ? ag->credential : NULL,
            .image = json_string_value(json_object_get(d, "image")),
            .pull_policy = json_string_value(json_object_get(d, "pull_policy")),
            .entrypoint = json_array_size(cmd) > 0,
            .cpu_millis = json_integer_value(json_object_get(d, "cpu_millis")),
            .memory_mib = json_integer_value(json_object_get(d, "memory_mib")),
            .ipc_host = json_is_true(json_object_get(d, "ipc_host")),
            .shm_mib = (int)json_integer_value(json_object_get(d, "shm_mib")),
            .registry = json_string_value(json_object_get(json_object_get(d, "registry_auth"), "registry")),
            .registry_user = json_string_value(json_object_get(json_object_get(d, "registry_auth"), "username")),
            .registry_password =
                json_string_value(json_object_get(json_object_get(d, "registry_auth"), "password")),
            .job = job,
            .check_port = (int)json_integer_value(json_object_get(d, "master_port")),
            /* checkpoints: {"scope": S, "keep": N} (agent/checkpoint.h) */
            .checkpoint_scope =
                json_string_value(json_object_get(json_object_get(d, "checkpoint"), "scope")),
            .checkpoint_keep = (int)json_integer_value(
                json_object_get(json_object_get(d, "checkpoint"), "keep")),
            .metrics_path = json_string_value(json_object_get(d, "metrics_path")),
            .metrics_port = json_is_true(json_object_get(d, "metrics_port")),
        };
    }
    drv_error_t err;
    if (drv_supervisor_apply(ag->sup, specs, n, &err) < 0)
        drv_error("applying the desired replicas: %s", err.message);
    else if (!ag->swept && ag->ctr.name[0] && ag->node_id[0]) {   /* containers the head dropped meanwhile */
        ag->swept = true;
        const char **ids = calloc(n ? n : 1, sizeof *ids);
        for (size_t i = 0; i < n; i++)
            ids[i] = specs[i].id ? specs[i].id : "";
        char dir[600];
        snprintf(dir, sizeof dir, "%s/containers", ag->data_dir);
        int k = drv_ctr_sweep(ag->ctr.name, ag->node_id, dir, ids, n);
        if (k > 0)
            drv_info("containers: removed %d whose replica is no longer this node's", k);
        free(ids);
    }
    for (size_t i = 0; i < n; i++) {
        free(argvs[i]);
        for (char **e = envs[i]; *e; e++)
            free(*e);
        free(envs[i]);
        free(mans[i]);
    }
    free(mans);
    free(origin);
    free(argvs);
    free(envs);
    free(uuids);
    free(mdir);
    free(specs);
}

void *drv_agent__sync_main(void *arg)
{
    agent_t *ag = arg;
    int failures = 0;
    while (!atomic_load(&ag->stop)) {
        bool transitional;
        json_t *body = report(ag, &transitional);
        int wait_ms = transitional ? 300 : ag->heartbeat_ms;
        json_object_set_new(body, "wait_ms", json_integer(ag->version ? wait_ms : 0));
        if (ag->node_id[0])   /* the head refuses (403) a credential speaking for another */
            json_object_set_new(body, "node", json_string(ag->node_id));
        int64_t sent = drv_mono_ms();
        json_t *resp;
        char msg[512];
        long st = drv_agent__post(ag, "/v1/agent/sync", ag->credential, body, wait_ms + 10000L, &resp, msg,
                       sizeof msg);
        json_decref(body);
        if (atomic_load(&ag->stop)) {
            json_decref(resp);
            break;
        }
        if (st == 200) {
            drv_nlease_renew(ag->lease, sent,
                             json_integer_value(json_object_get(resp, "node_timeout_ms")),
                             json_is_integer(json_object_get(resp, "job_lease_grace_ms"))
                                 ? json_integer_value(json_object_get(resp, "job_lease_grace_ms"))
                                 : -1);
            if (failures)
                drv_info("the head is back after %d failed syncs", failures);
            failures = 0;
            const char *node = json_string_value(json_object_get(resp, "node"));
            if (node && strcmp(node, ag->node_id) != 0) {
                snprintf(ag->node_id, sizeof ag->node_id, "%s", node);
                drv_supervisor_set_node(ag->sup, node);   /* containers' drover.node label */
                drv_agent__save_node_id(ag);
                drv_info("node %s: synced with %s", ag->node_id, ag->server);
            }
            json_int_t hb = json_integer_value(json_object_get(resp, "heartbeat_ms"));
            if (hb >= 100 && hb <= 60000)
                ag->heartbeat_ms = (int)hb;
            drv_peering_set_tokens(ag->peering, json_object_get(resp, "peer"));
            share_manifests(resp);
            const json_t *set = json_object_get(resp, "replicas");
            const json_t *pf = json_object_get(resp, "prefetch");
            if (json_is_array(pf))   /* storage layer: the nodepool prefetches */
                drv_peering_prefetch(ag->peering, pf, ag->server, ag->credential, ag->node_id);
            const json_t *ipf = json_object_get(resp, "image_prefetch");
            if (json_is_array(ipf) && ag->prepull)   /* containers: and its images */
                drv_prepull_set(ag->prepull, ipf);
            if (json_is_array(set)) {
                apply(ag, set);
                ag->version = (uint64_t)json_integer_value(json_object_get(resp, "version"));
                drv_info("desired set version %llu: %zu replica(s)",
                         (unsigned long long)ag->version, json_array_size(set));
            }
            json_decref(resp);
            continue;
        }
        json_decref(resp);
        if (st == 401) {
            drv_error("the head does not know this node any more (%s); stopping its replicas",
                      msg);
            ag->exit_code = 3;
            atomic_store(&ag->stop, true);
            kill(getpid(), SIGTERM);
            break;
        }
        if (failures++ % 10 == 0)
            drv_warn("sync with %s failed (%s %s); replicas keep running, retrying", ag->server,
                     st ? "HTTP" : "", msg);
        for (int i = 0; i < 10 && !atomic_load(&ag->stop); i++)
            usleep(100 * 1000);
    }
    return NULL;
}
