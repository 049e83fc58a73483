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
 *
 * This file holds the flags and main; agent_join.c the data-dir files, the
 * HTTP calls and joining; agent_sync.c the sync loop (agent_int.h).
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
#include "common/http_client.h"
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
#include "agent/agent_int.h"

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
            "                        (default auto, or $DROVER_CONTAINER_ENGINE when set;\n"
            "                        reported per node)\n"
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

/* --- GPU shares --------------------------------------------------------------- */

/* a --container-engine / DROVER_CONTAINER_ENGINE value drv_ctr_detect takes */
static bool engine_ok(const char *v)
{
    return strcmp(v, "auto") == 0 || strcmp(v, "podman") == 0 || strcmp(v, "docker") == 0 ||
           strcmp(v, "none") == 0;
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
            if ((level = drv_log_level_of(optarg)) < 0) {
                fprintf(stderr, "drover-agent: --log-level must be debug, info, warn or error\n");
                return 2;
            }
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
            if (!engine_ok(optarg)) {
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
                                drv_agent__gpus_json(&ag), "gpushare_lib", ag.gpushare_lib, "mps_control",
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
    if (!ag.ctr_want[0]) {   /* no --container-engine: $DROVER_CONTAINER_ENGINE, else auto */
        const char *v = getenv("DROVER_CONTAINER_ENGINE");
        if (v && *v && !engine_ok(v)) {
            fprintf(stderr, "drover-agent: DROVER_CONTAINER_ENGINE takes auto, podman, docker or "
                    "none, not '%s'\n", v);
            return 2;
        }
        snprintf(ag.ctr_want, sizeof ag.ctr_want, "%s", v && *v ? v : "auto");
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
    if (drv_dir_make_absolute(ag.data_dir, sizeof ag.data_dir) < 0) {
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
    if (drv_agent__write_file_0600(path, pidtext) < 0)
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
    if (drv_agent__join(&ag) < 0) {
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
    if (pthread_create(&ag.sync_thread, NULL, drv_agent__sync_main, &ag) != 0)
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
