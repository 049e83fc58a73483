/* agent_main.c — drover-agent: a worker node.
 *
 * It joins a nodepool once (join token -> node credential, kept in its data
 * dir: a restarted agent is the same node), then syncs with the head in a
 * loop: each sync reports what the node observes (GPUs, CPU, memory, its
 * replicas) and, when the head's desired set changed, receives the whole
 * set and hands it to the supervisor, which makes the processes match
 * (level-triggered, idempotent). A sync is a long poll of at most one
 * heartbeat, so new placements arrive at once. While the head is away the
 * replicas keep running; the agent keeps retrying. Job workers stop once
 * the node's lease runs out (node_lease.h: the head's node_timeout_ms).
 *
 * Threads: main waits for SIGTERM/SIGINT; the sync thread owns the GPUs and
 * the HTTP client (http_client.c: plain sockets; libcurl is loaded only
 * for an https server); the supervisor runs its own thread. A deleted
 * node (401 on sync) stops its replicas and exits 3.
 *
 * GPU shares (design §3): fractional replicas get LD_PRELOAD of
 * libdrover-gpushare.so, by default the one next to this binary
 * (--gpushare-lib overrides; "none" turns memory enforcement off). Where
 * NVML finds GPUs and nvidia-cuda-mps-control is in PATH (--mps auto, the
 * default), main starts one MPS control daemon per healthy GPU before any
 * other thread (src/agent/mps.h) and fractional replicas on those GPUs
 * run as MPS clients with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; elsewhere they
 * time-slice. Each sync reports every GPU's "compute_sharing" ("mps" |
 * "time-slicing") and every replica's "enforcement" ({memory, compute}); a
 * desired replica with strict_isolation whose share cannot be enforced is
 * failed instead of started (supervisor.h).
 *
 * Storage layer (issue 14): the node cache (src/agent/cache.h) lives in
 * DATA_DIR/cache, bounded by --cache-max-gib. A desired replica whose model
 * has a drover:// artifact comes with its manifest and the head's blob path;
 * the supervisor fetches it (state fetching) from SERVER + that path with
 * the node credential. Each sync reports every fetching replica's progress
 * ("fetch") and what the cache holds ("cache": bytes, blobs, and the
 * artifacts of this agent's desired sets that are ready in it).
 * Peer fan-out (src/agent/peering.h): the agent serves its cache to the
 * other nodes of its cluster on --peer-listen (reported as cache.peer_url),
 * accepting the peer tokens each sync answer carries, and ensures every
 * artifact of a desired set, and of its nodepool's prefetch list, with the
 * peers the head names before the supervisor's own ensure joins it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "agent/cache.h"
#include "agent/checkpoint.h"
#include "agent/node_lease.h"
#include "agent/gpu.h"
#include "agent/http_client.h"
#include "agent/isolate.h"
#include "agent/logserver.h"
#include "agent/trust.h"
#include "agent/peering.h"
#include "agent/prepull.h"
#include "agent/supervisor.h"
#include "common/buildinfo.h"
#include "common/log.h"
#include "common/util.h"
#include "agent/mps.h"
#include "agent/container.h"


#define MAX_SERVERS 8

typedef struct agent {
    char server[512];            /* the head it talks to now (one of servers, or a leader) */
    char servers[MAX_SERVERS][512];   /* --server URL1,URL2,...: several heads */
    int nservers, cur;
    char join_token[128];
    char data_dir[512];
    char gpus_spec[256];
    char advertise[256];
    int cpus;
    long long memory_mib;
    char credential[128];
    char node_id[64];            /* as the head names it (join, then each sync) */
    char saved_node[64];         /* DATA_DIR/node_id at start: the cgroup parent's name */
    char hostname[256];
    int heartbeat_ms;
    uint64_t version;
    drv_gpus_t *gpus;
    drv_supervisor_t *sup;
    drv_logserver_t *logs;
    atomic_bool stop;
    int exit_code;
    pthread_t sync_thread;
    drv_hc_t *http;              /* to the head; the sync thread's (join: main's, before it) */
    /* GPU shares */
    char gpushare_lib[700];      /* "" = none */
    char mps_opt[16];            /* "auto" | "off" */
    bool print_gpus;
    drv_mps_t *mps;              /* NULL: every GPU time-slices */
    /* storage layer */
    double cache_max_gib;
    drv_cache_t *cache;
    double ckpt_mib_s;           /* --checkpoint-upload-mibps; 0 = unbounded */
    drv_ckpt_t *ckpt;            /* checkpoints (agent/checkpoint.h) */
    struct known_art { char digest[65]; uint64_t bytes; } *arts;   /* from desired sets */
    size_t narts;                /* (the sync thread's) */
    /* containers */
    char ctr_want[16];           /* --container-engine auto|podman|docker|none */
    drv_ctr_engine_t ctr;        /* what was found at start */
    drv_prepull_t *prepull;      /* nodepool prefetch of images (sync thread's); NULL: no engine */
    bool swept;                  /* the first desired set swept stale containers */
    int health_interval_ms;      /* --health-interval-ms: checks of a starting replica */
    char peer_listen[300];       /* "" = ADVERTISE:0; "off" */
    char peer_url[300];          /* "" = as bound */
    drv_peering_t *peering;
    /* isolation (agent/isolate.h) */
    char cgroup_parent[256];     /* --cgroup-parent; "\x01" = the default */
    char replica_user[64];       /* --replica-user; "\x01" = the default */
    int pids_max;                /* --replica-pids-max; 0 = 4096 */
    drv_iso_t *iso;
    drv_nlease_t *lease;         /* the node's lease on its job workers (node_lease.h) */
} agent_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drover-agent --server URL [--join-token TOKEN] [--data-dir DIR]\n"
            "                    [--gpus auto|none|SPEC] [--advertise-addr ADDR]\n"
            "                    [--cpus N] [--memory-mib N] [--log-level LEVEL]\n"
            "                    [--gpushare-lib PATH|none] [--mps auto|off]\n"
            "                    [--cache-max-gib N] [--checkpoint-upload-mibps N]\n"
            "                    [--peer-listen HOST:PORT|off] [--peer-url URL]\n"
            "                    [--container-engine auto|podman|docker|none] [--health-interval-ms N]\n"
            "                    [--ca-hash sha256:HEX | --ca-file FILE] [--insecure]\n"
            "                    [--origin-ca-file FILE]\n"
            "                    [--cgroup-parent PATH] [--replica-user NAME] [--replica-pids-max N]\n"
            "       drover-agent --print-gpus [--gpus auto|none|SPEC]\n"
            "\n"
            "A drover worker node: joins a nodepool and runs the replicas the head places on it.\n"
            "\n"
            "  --server URL[,URL...] the head, e.g. http://10.0.0.1:7480; several heads'\n"
            "                        URLs: the agent moves to the next when one is down and\n"
            "                        to the leader a standby names\n"
            "  --ca-hash sha256:HEX  trust the head's CA only if the SHA-256 of its public key\n"
            "                        (SubjectPublicKeyInfo) is this (printed by `drover nodepool\n"
            "                        join-token`); checked before anything secret is sent\n"
            "  --ca-file FILE        trust this CA (PEM) for an https:// head\n"
            "  --insecure            allow plain http:// to a head that is not on loopback\n"
            "  --origin-ca-file FILE trust this CA (PEM) for https artifact origins (https\n"
            "                        sources, S3 endpoints) instead of the system's store\n"
            "  --join-token TOKEN    from `drover nodepool join-token CLUSTER/NODEPOOL`; needed\n"
            "                        once: the node credential is then kept in the data dir\n"
            "  --data-dir DIR        credential, replica logs, model dirs (default ./.drover-agent)\n"
            "  --gpus auto|none|SPEC auto: NVML (libnvidia-ml.so.1) if present; SPEC declares\n"
            "                        GPUs, e.g. 2xL4:24576 or 1xH100:81559 (default auto)\n"
            "  --advertise-addr ADDR where the head and gateway reach replicas (default 127.0.0.1)\n"
            "  --cpus N, --memory-mib N  declare the node's CPU and memory (default: this host's)\n"
            "  --gpushare-lib PATH|none  the GPU memory share enforcer preloaded into fractional\n"
            "                        replicas (default: libdrover-gpushare.so next to this binary)\n"
            "  --mps auto|off        run an MPS control daemon per GPU for compute shares when\n"
            "                        NVML finds GPUs and nvidia-cuda-mps-control is in PATH\n"
            "                        (default auto)\n"
            "  --cache-max-gib N     bound of the node cache of model artifacts in DATA_DIR/cache\n"
            "                        (least recently used evicted first; default 50)\n"
            "  --container-engine E  runs replicas whose model names an image (runtime.image):\n"
            "                        auto (podman, else docker), podman, docker or none\n"
            "                        (default auto; reported per node)\n"
            "  --health-interval-ms N  between health checks of a starting replica (10..60000,\n"
            "                        default 500): how soon after it can answer it is ready\n"
            "  --checkpoint-upload-mibps N  bound the bandwidth of checkpoint uploads (MiB/s;\n"
            "                        default: none)\n"
            "  --peer-listen HOST:PORT|off  serve verified chunks of the node cache to the other\n"
            "                        nodes of the cluster (peer tokens from the head; default\n"
            "                        ADVERTISE-ADDR on a free port; off: fetch from the origin\n"
            "                        and peers, serve nobody)\n"
            "  --peer-url URL        where other nodes reach that server (default http://HOST:PORT)\n"
            "  --cgroup-parent PATH  each replica and job worker runs in its own cgroup under\n"
            "                        PATH (relative to the cgroup root, v2 or v1; default\n"
            "                        drover/NODE-ID.HASH, HASH from the data dir; '' = no cgroups)\n"
            "                        with memory.max/cpu.max/pids.max from its resources\n"
            "  --replica-user NAME   run replicas as NAME (default drover-replica, created\n"
            "                        with useradd --system when missing, else nobody; '' or\n"
            "                        root: as the agent's user, with a warning)\n"
            "  --replica-pids-max N  process limit of each replica's cgroup (default 4096;\n"
            "                        -1: none)\n"
            "  --print-gpus          print the GPUs this node would report (JSON) and exit\n"
            "\n"
            "SIGTERM stops the replicas gracefully and exits.\n");
}

/* --- files ---------------------------------------------------------------- */

static int read_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return 0;
}

static int write_file_0600(const char *path, const char *text)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n == (ssize_t)strlen(text) && fsync(fd) == 0 ? 0 : -1;
    close(fd);
    return rc == 0 ? rename(tmp, path) : -1;
}

/* --- HTTP ----------------------------------------------------------------- */

/* Several heads (issue 17): talk to leader (a standby named it) or, when
 * leader is NULL or "", to the next --server URL. The next call goes there;
 * replicas are untouched. */
static void move_on(agent_t *ag, const char *leader)
{
    char to[512];
    if (leader && *leader) {
        snprintf(to, sizeof to, "%s", leader);
    } else {
        if (ag->nservers < 2)
            return;
        ag->cur = (ag->cur + 1) % ag->nservers;
        snprintf(to, sizeof to, "%s", ag->servers[ag->cur]);
    }
    if (strcmp(to, ag->server) == 0)
        return;
    drv_error_t err;
    drv_hc_t *c = drv_hc_create(to, &err);
    if (!c) {
        drv_warn("cannot use head %s: %s", to, err.message);
        return;
    }
    drv_info("moving from head %s to %s%s", ag->server, to, leader && *leader ? " (the leader)" : "");
    drv_hc_destroy(ag->http);
    ag->http = c;
    snprintf(ag->server, sizeof ag->server, "%s", to);
}

/* POST path with a JSON body and bearer secret; returns HTTP status (0 on
 * transport failure, with msg) and the parsed body in *out. */
static long post(agent_t *ag, const char *path, const char *secret, json_t *body, long timeout_ms,
                 json_t **out, char *msg, size_t msglen)
{
    *out = NULL;
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text) {
        snprintf(msg, msglen, "out of memory");
        return 0;
    }
    drv_hc_req_t rq = {
        .method = "POST",
        .path = path,
        .bearer = secret,
        .content_type = "application/json",
        .body = text,
        .body_len = strlen(text),
        .timeout_ms = timeout_ms,
        .connect_timeout_ms = 3000,
        .stop = &ag->stop,
    };
    drv_hc_resp_t r;
    drv_error_t err;
    long status = 0;
    if (drv_hc_request(ag->http, &rq, &r, &err) < 0) {
        snprintf(msg, msglen, "%s", err.message);
        if (ag->nservers > 1 && !atomic_load(&ag->stop))
            move_on(ag, NULL);
    } else {
        status = r.status;
        *out = r.len ? json_loadb(r.body, r.len, 0, NULL) : NULL;
        const json_t *e = json_object_get(*out, "error");
        const char *em = json_string_value(json_object_get(e, "message"));
        snprintf(msg, msglen, "%s", em ? em : r.body);
        const char *code = json_string_value(json_object_get(e, "code"));
        if (status == 503 && code && strcmp(code, "not_leader") == 0)
            move_on(ag, json_string_value(json_object_get(*out, "leader")));
        drv_hc_resp_free(&r);
    }
    free(text);
    return status;
}

/* --- joining ---------------------------------------------------------------- */

/* DATA_DIR/node_id: the node's id before the first sync names it (the
 * default cgroup parent of a restarted agent). */
static void save_node_id(const agent_t *ag)
{
    char path[700];
    snprintf(path, sizeof path, "%s/node_id", ag->data_dir);
    if (ag->node_id[0] && write_file_0600(path, ag->node_id) < 0)
        drv_warn("cannot write %s: %s", path, strerror(errno));
}

static int join(agent_t *ag)
{
    char path[700];
    snprintf(path, sizeof path, "%s/credential", ag->data_dir);
    if (read_file(path, ag->credential, sizeof ag->credential) == 0 && ag->credential[0]) {
        snprintf(path, sizeof path, "%s/node_id", ag->data_dir);
        if (read_file(path, ag->saved_node, sizeof ag->saved_node) < 0)
            ag->saved_node[0] = '\0';
        return 0;
    }
    if (!ag->join_token[0]) {
        drv_error("no node credential in %s and no --join-token: get one with `drover nodepool "
                  "join-token CLUSTER/NODEPOOL`", ag->data_dir);
        return -1;
    }
    json_t *body = json_pack("{s:s, s:s, s:s}", "hostname", ag->hostname, "address",
                             ag->advertise, "agent_version", drv_build_version);
    for (int attempt = 0; !atomic_load(&ag->stop); attempt++) {
        json_t *resp;
        char msg[512];
        long st = post(ag, "/v1/agent/register", ag->join_token, body, 10000, &resp, msg,
                       sizeof msg);
        if (st == 201) {
            const char *cred = json_string_value(json_object_get(resp, "credential"));
            const char *id = json_string_value(json_object_get(resp, "node_id"));
            if (!cred || !id) {
                json_decref(resp);
                break;
            }
            snprintf(ag->credential, sizeof ag->credential, "%s", cred);
            snprintf(ag->node_id, sizeof ag->node_id, "%s", id);
            if (write_file_0600(path, cred) < 0) {
                drv_error("cannot save the node credential to %s: %s", path, strerror(errno));
                json_decref(resp);
                break;
            }
            save_node_id(ag);
            drv_info("joined as node %s (cluster %s, nodepool %s)", id,
                     json_string_value(json_object_get(resp, "cluster")),
                     json_string_value(json_object_get(resp, "nodepool")));
            json_decref(resp);
            json_decref(body);
            return 0;
        }
        json_decref(resp);
        if (st >= 400 && st < 500) {
            drv_error("the head refused to let this node join: %s", msg);
            break;
        }
        drv_warn("cannot reach the head at %s (%s); retrying", ag->server, msg);
        /* join runs on main, which has SIGTERM/SIGINT blocked until it
         * sigwaits for them: wait for one here, so a node that cannot join
         * still stops when told to */
        sigset_t sigs;
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
        struct timespec ts = {.tv_sec = attempt < 5 ? 1 : 3};
        if (sigtimedwait(&sigs, NULL, &ts) > 0) {
            drv_info("stopped before joining");
            atomic_store(&ag->stop, true);
        }
    }
    json_decref(body);
    return -1;
}

/* --- sync ------------------------------------------------------------------- */

/* --- GPU shares --------------------------------------------------------------- */

/* The GPUs as reported, each with the compute sharing in force on it. */
static json_t *gpus_json(agent_t *ag)
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

/* libdrover-gpushare.so next to this binary, if it is there. */
static void default_gpushare_lib(char *buf, size_t len)
{
    char exe[600];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    buf[0] = '\0';
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    snprintf(buf, len, "%s/libdrover-gpushare.so", exe);
    if (access(buf, R_OK) != 0)
        buf[0] = '\0';
}

/* One MPS control daemon per healthy NVML GPU (main thread, before the others). */
static void start_mps(agent_t *ag)
{
    if (strcmp(ag->mps_opt, "off") == 0 || strcmp(drv_gpus_source(ag->gpus), "nvml") != 0) {
        drv_info("compute shares: time-slicing (%s)", strcmp(ag->mps_opt, "off") == 0
                                                          ? "--mps off" : "no NVML GPUs");
        return;
    }
    char control[512];
    if (drv_mps_which("nvidia-cuda-mps-control", control, sizeof control) < 0) {
        drv_info("compute shares: time-slicing (nvidia-cuda-mps-control is not in PATH)");
        return;
    }
    const char *uuids[DRV_GPUS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < drv_gpus_count(ag->gpus) && n < DRV_GPUS_MAX; i++) {
        const drv_gpu_info_t *g = drv_gpus_at(ag->gpus, i);
        if (g->healthy && g->detected)
            uuids[n++] = g->uuid;
    }
    char dir[600];
    snprintf(dir, sizeof dir, "%s/mps", ag->data_dir);
    drv_error_t err;
    ag->mps = drv_mps_create(&(drv_mps_opts_t){.control = control, .dir = dir}, uuids, n, &err);
    if (!ag->mps)
        drv_warn("compute shares: time-slicing (MPS: %s)", err.message);
    else
        drv_info("compute shares: %s", drv_mps_message(ag->mps));
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
                     gpus_json(ag), "replicas", reps, "logs", "url",
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

static void *sync_main(void *arg)
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
        long st = post(ag, "/v1/agent/sync", ag->credential, body, wait_ms + 10000L, &resp, msg,
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
                save_node_id(ag);
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

/* Isolation (agent/isolate.h): before the supervisor, once the node id is known. */
static int start_isolation(agent_t *ag, drv_error_t *err)
{
    bool defp = strcmp(ag->cgroup_parent, "\x01") == 0;
    bool defu = strcmp(ag->replica_user, "\x01") == 0;
    drv_iso_opts_t io = {.cgroup_parent = defp ? NULL : ag->cgroup_parent,
                         .node_id = ag->node_id[0] ? ag->node_id : ag->saved_node,
                         .pids_max = ag->pids_max,
                         .data_dir = ag->data_dir, .user = defu ? NULL : ag->replica_user};
    if (!(ag->iso = drv_iso_create(&io, err)))
        return -1;
    drv_info("%s", drv_iso_summary(ag->iso));
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},   {"join-token", required_argument, NULL, 'j'},
        {"data-dir", required_argument, NULL, 'd'}, {"gpus", required_argument, NULL, 'g'},
        {"advertise-addr", required_argument, NULL, 'a'},
        {"cpus", required_argument, NULL, 'c'},     {"memory-mib", required_argument, NULL, 'm'},
        {"log-level", required_argument, NULL, 'L'}, {"help", no_argument, NULL, 'h'},
        {"gpushare-lib", required_argument, NULL, 'P'}, {"mps", required_argument, NULL, 'M'},
        {"print-gpus", no_argument, NULL, 'G'},
        {"cache-max-gib", required_argument, NULL, 'C'},
        {"container-engine", required_argument, NULL, 'E'},
        {"health-interval-ms", required_argument, NULL, 'H'},
        {"checkpoint-upload-mibps", required_argument, NULL, 'U'},
        {"peer-listen", required_argument, NULL, 'l'}, {"peer-url", required_argument, NULL, 'u'},
        {"ca-hash", required_argument, NULL, 'K'}, {"ca-file", required_argument, NULL, 'F'},
        {"insecure", no_argument, NULL, 'I'},
        {"origin-ca-file", required_argument, NULL, 'O'},
        {"cgroup-parent", required_argument, NULL, 'R'},
        {"replica-user", required_argument, NULL, 'W'},
        {"replica-pids-max", required_argument, NULL, 'X'},
        {NULL, 0, NULL, 0},
    };
    static agent_t ag;
    snprintf(ag.data_dir, sizeof ag.data_dir, "./.drover-agent");
    snprintf(ag.gpus_spec, sizeof ag.gpus_spec, "auto");
    snprintf(ag.advertise, sizeof ag.advertise, "127.0.0.1");
    ag.cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    struct sysinfo si;
    ag.memory_mib = sysinfo(&si) == 0 ? (long long)(si.totalram * si.mem_unit >> 20) : 1024;
    ag.heartbeat_ms = 2000;
    default_gpushare_lib(ag.gpushare_lib, sizeof ag.gpushare_lib);
    snprintf(ag.mps_opt, sizeof ag.mps_opt, "auto");
    ag.cache_max_gib = 50;
    snprintf(ag.ctr_want, sizeof ag.ctr_want, "auto");
    snprintf(ag.cgroup_parent, sizeof ag.cgroup_parent, "\x01");
    snprintf(ag.replica_user, sizeof ag.replica_user, "\x01");
    int level = DRV_LOG_INFO, c;
    drv_agent_trust_t trust = {0};
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'K': trust.ca_hash = optarg; break;
        case 'F': trust.ca_file = optarg; break;
        case 'I': trust.insecure = true; break;
        case 'O': trust.origin_ca_file = optarg; break;
        case 'R': snprintf(ag.cgroup_parent, sizeof ag.cgroup_parent, "%s", optarg); break;
        case 'W':
            if (strlen(optarg) >= sizeof ag.replica_user) {
                fprintf(stderr, "drover-agent: --replica-user: name too long\n");
                return 2;
            }
            snprintf(ag.replica_user, sizeof ag.replica_user, "%s", optarg);
            break;
        case 'X': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v == 0 || v < -1 || v > 4194304) {
                fprintf(stderr, "drover-agent: --replica-pids-max takes 1..4194304 or -1 "
                        "(none), not '%s'\n", optarg);
                return 2;
            }
            ag.pids_max = (int)v;
            break;
        }
        case 's': snprintf(ag.server, sizeof ag.server, "%s", optarg); break;
        case 'j': snprintf(ag.join_token, sizeof ag.join_token, "%s", optarg); break;
        case 'd': snprintf(ag.data_dir, sizeof ag.data_dir, "%s", optarg); break;
        case 'g': snprintf(ag.gpus_spec, sizeof ag.gpus_spec, "%s", optarg); break;
        case 'a': snprintf(ag.advertise, sizeof ag.advertise, "%s", optarg); break;
        case 'c': ag.cpus = atoi(optarg); break;
        case 'm': ag.memory_mib = atoll(optarg); break;
        case 'L':
            level = strcmp(optarg, "debug") == 0 ? DRV_LOG_DEBUG
                    : strcmp(optarg, "warn") == 0 ? DRV_LOG_WARN
                    : strcmp(optarg, "error") == 0 ? DRV_LOG_ERROR : DRV_LOG_INFO;
            break;
        case 'h': usage(stdout); return 0;
        case 'P':
            snprintf(ag.gpushare_lib, sizeof ag.gpushare_lib, "%s",
                     strcmp(optarg, "none") == 0 ? "" : optarg);
            break;
        case 'M':
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "off") != 0) {
                fprintf(stderr, "drover-agent: --mps takes auto or off\n");
                return 2;
            }
            snprintf(ag.mps_opt, sizeof ag.mps_opt, "%s", optarg);
            break;
        case 'G': ag.print_gpus = true; break;
        case 'H': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 10 || v > 60000) {
                fprintf(stderr, "drover-agent: --health-interval-ms takes 10..60000, not '%s'\n",
                        optarg);
                return 2;
            }
            ag.health_interval_ms = (int)v;
            break;
        }
        case 'E':
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "podman") != 0 &&
                strcmp(optarg, "docker") != 0 && strcmp(optarg, "none") != 0) {
                fprintf(stderr, "drover-agent: --container-engine takes auto, podman, docker or "
                        "none, not '%s'\n", optarg);
                return 2;
            }
            snprintf(ag.ctr_want, sizeof ag.ctr_want, "%s", optarg);
            break;
        case 'l': snprintf(ag.peer_listen, sizeof ag.peer_listen, "%s", optarg); break;
        case 'u': snprintf(ag.peer_url, sizeof ag.peer_url, "%s", optarg); break;
        case 'C': {
            char *end;
            ag.cache_max_gib = strtod(optarg, &end);
            if (end == optarg || *end || !(ag.cache_max_gib > 0) || ag.cache_max_gib > 1 << 20) {
                fprintf(stderr, "drover-agent: --cache-max-gib takes a size in GiB above 0 (at "
                        "most 1048576), not '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case 'U': {
            char *end;
            ag.ckpt_mib_s = strtod(optarg, &end);
            if (end == optarg || *end || !(ag.ckpt_mib_s > 0) || ag.ckpt_mib_s > 1 << 20) {
                fprintf(stderr, "drover-agent: --checkpoint-upload-mibps takes a rate in MiB/s "
                        "above 0, not '%s'\n", optarg);
                return 2;
            }
            break;
        }
        default: usage(stderr); return 2;
        }
    }
    if (ag.print_gpus && optind == argc) {   /* GPU shares: what NVML (or --gpus) says, and exit */
        drv_log_init("drover-agent", DRV_LOG_WARN);
        drv_error_t perr;
        drv_gpus_t *pg = drv_gpus_create(ag.gpus_spec, "print-gpus", &perr);
        if (!pg) {
            fprintf(stderr, "drover-agent: --gpus: %s\n", perr.message);
            return 2;
        }
        ag.gpus = pg;
        char mpsbin[512];
        json_t *doc = json_pack("{s:s, s:s, s:s, s:o, s:s, s:b}", "gpu_source",
                                drv_gpus_source(pg), "message", drv_gpus_message(pg),
                                "driver_version", drv_gpus_driver_version(pg), "gpus",
                                gpus_json(&ag), "gpushare_lib", ag.gpushare_lib, "mps_control",
                                drv_mps_which("nvidia-cuda-mps-control", mpsbin, sizeof mpsbin) == 0);
        char *text = json_dumps(doc, JSON_INDENT(2));
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(doc);
        drv_gpus_destroy(pg);
        return 0;
    }
    if (!ag.server[0] || optind < argc || ag.cpus < 1 || ag.memory_mib < 1) {
        fprintf(stderr, "drover-agent: %s\n", !ag.server[0] ? "--server URL is required"
                                                            : "bad arguments (see --help)");
        return 2;
    }
    for (char *p = ag.server, *next; p && *p; p = next) {   /* URL1,URL2,... */
        next = strchr(p, ',');
        if (next)
            *next++ = '\0';
        size_t sl = strlen(p);
        while (sl && p[sl - 1] == '/')
            p[--sl] = '\0';
        if (sl && ag.nservers == MAX_SERVERS) {
            fprintf(stderr, "drover-agent: at most %d --server URLs\n", MAX_SERVERS);
            return 2;
        }
        if (sl)
            snprintf(ag.servers[ag.nservers++], sizeof ag.servers[0], "%s", p);
    }
    if (!ag.nservers) {
        fprintf(stderr, "drover-agent: --server URL is required\n");
        return 2;
    }
    snprintf(ag.server, sizeof ag.server, "%s", ag.servers[0]);
    if (ag.replica_user[0] && strcmp(ag.replica_user, "\x01") != 0 &&
        strcmp(ag.replica_user, "root") != 0 && !getpwnam(ag.replica_user)) {
        fprintf(stderr, "drover-agent: --replica-user: there is no user '%s'\n", ag.replica_user);
        return 2;   /* before the join: nothing registered for an agent that cannot start */
    }
    drv_log_init("drover-agent", level);
    gethostname(ag.hostname, sizeof ag.hostname - 1);

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = 1;
    if (mkdir(ag.data_dir, 0700) < 0 && errno != EEXIST) {
        drv_error("cannot create %s: %s", ag.data_dir, strerror(errno));
        return 1;
    }
    char path[700];
    snprintf(path, sizeof path, "%s/agent.lock", ag.data_dir);
    int lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) < 0) {
        drv_error("%s is in use by another drover-agent", ag.data_dir);
        return 1;
    }
    /* our pid, for whoever manages this node dir (the local provider) */
    snprintf(path, sizeof path, "%s/agent.pid", ag.data_dir);
    char pidtext[32];
    snprintf(pidtext, sizeof pidtext, "%d\n", (int)getpid());
    if (write_file_0600(path, pidtext) < 0)
        drv_warn("cannot write %s: %s", path, strerror(errno));
    drv_error_t err;
    int trc = drv_agent_trust_setup(&trust, (const char(*)[512])ag.servers, ag.nservers,
                                    ag.data_dir, &err);
    if (trc != 0) {
        if (trc < 0)
            drv_error("%s", err.message);
        else
            drv_info("stopped before joining");
        rc = trc < 0 ? 2 : 0;
        goto out;
    }
    if (!(ag.http = drv_hc_create(ag.server, &err))) {
        drv_error("--server: %s", err.message);
        rc = 2;
        goto out;
    }
    if (join(&ag) < 0) {
        if (atomic_load(&ag.stop))
            rc = 0;   /* told to stop while joining */
        goto out;
    }
    /* declared GPU UUIDs derive from the credential: stable for the node's life */
    char seed[65];
    drv_sha256_hex(ag.credential, strlen(ag.credential), seed);
    if (!(ag.gpus = drv_gpus_create(ag.gpus_spec, seed, &err))) {
        drv_error("--gpus: %s", err.message);
        rc = 2;
        goto out;
    }
    drv_info("GPUs: %s", drv_gpus_message(ag.gpus));
    start_mps(&ag);   /* GPU shares: before any other thread (PDEATHSIG) */
    if (drv_ctr_detect(ag.ctr_want, &ag.ctr) == 0) {
        drv_info("containers: %s %s", ag.ctr.name, ag.ctr.version);
        snprintf(path, sizeof path, "%s/containers", ag.data_dir);
        mkdir(path, 0700);
        ag.prepull = drv_prepull_create(ag.ctr.name, path);
    } else
        drv_info("containers: none (%s)", ag.ctr.why);
    if (!ag.gpushare_lib[0])
        drv_warn("no libdrover-gpushare.so: GPU memory shares will not be enforced");
    snprintf(path, sizeof path, "%s/cache", ag.data_dir);
    if (!(ag.cache = drv_cache_create(path, (uint64_t)(ag.cache_max_gib * (1ull << 30)), NULL,
                                      &err))) {
        drv_error("node cache: %s", err.message);
        goto out;
    }
    drv_ckpt_opts_t co = {.server = ag.server, .credential = ag.credential,
                          .data_dir = ag.data_dir, .cache = ag.cache,
                          .upload_mib_s = ag.ckpt_mib_s};
    if (!(ag.ckpt = drv_ckpt_create(&co, &err))) {
        drv_error("checkpoints: %s", err.message);
        goto out;
    }
    char listen[300];
    snprintf(listen, sizeof listen, "%s", ag.peer_listen);
    if (!listen[0])
        snprintf(listen, sizeof listen, "%s:0", ag.advertise);
    if (!(ag.peering = drv_peering_create(ag.cache, listen, ag.peer_url[0] ? ag.peer_url : NULL,
                                          &err))) {
        drv_error("%s", err.message);
        rc = 2;
        goto out;
    }
    if (start_isolation(&ag, &err) < 0) {
        drv_error("%s", err.message);
        rc = 2;
        goto out;
    }
    drv_supervisor_opts_t so = {
        .iso = ag.iso,
        .ckpt = ag.ckpt,
        .cache = ag.cache,
        .data_dir = ag.data_dir,
        .advertise_host = ag.advertise,
        .gpushare_lib = ag.gpushare_lib[0] ? ag.gpushare_lib : NULL,
        .container_engine = ag.ctr.name[0] ? ag.ctr.name : NULL,
        .node_name = ag.node_id,
        .health_interval_ms = ag.health_interval_ms,   /* 0: the supervisor's 500 */   /* "" until the first sync names it: drv_supervisor_set_node */
    };
    if (!(ag.sup = drv_supervisor_create(&so, &err))) {
        drv_error("supervisor: %s", err.message);
        goto out;
    }
    if (!(ag.logs = drv_logserver_create(ag.sup, ag.advertise, &err))) {
        drv_error("%s", err.message);
        goto out;
    }
    if (!(ag.lease = drv_nlease_create(ag.sup, &err))) {
        drv_error("%s", err.message);
        goto out;
    }
    if (pthread_create(&ag.sync_thread, NULL, sync_main, &ag) != 0)
        goto out;
    int sig;
    sigwait(&sigs, &sig);
    if (!atomic_load(&ag.stop))
        drv_info("%s received: stopping replicas", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    atomic_store(&ag.stop, true);
    pthread_join(ag.sync_thread, NULL);
    rc = ag.exit_code;
out:
    drv_nlease_destroy(ag.lease);
    drv_logserver_destroy(ag.logs);
    drv_ckpt_stop(ag.ckpt);           /* a shutdown keeps checkpoint directories */
    drv_supervisor_destroy(ag.sup);   /* before the cache its replicas pin */
    drv_iso_destroy(ag.iso);          /* after its replicas' cgroups are gone */
    drv_ckpt_destroy(ag.ckpt);        /* after its scopes' replicas, before the cache */
    drv_peering_destroy(ag.peering);  /* its server reads the cache */
    drv_prepull_destroy(ag.prepull);
    drv_cache_destroy(ag.cache);
    free(ag.arts);
    drv_mps_destroy(ag.mps);   /* after the replicas, its clients, are gone */
    drv_gpus_destroy(ag.gpus);
    drv_hc_destroy(ag.http);
    if (rc == 3) {
        /* the node is gone: forget its credential so a rejoin starts fresh */
        snprintf(path, sizeof path, "%s/credential", ag.data_dir);
        unlink(path);
    }
    drv_info("stopped");
    return rc;
}
