/* agent_int.h — drover-agent's context and the functions its files share:
 * agent_main.c (flags, main), agent_join.c (files, the HTTP calls to the
 * head, joining) and agent_sync.c (the sync loop and its report). Not for
 * other code: these files are the drover-agent program, not the library. */
#ifndef DRV_AGENT_INT_H
#define DRV_AGENT_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/cache.h"
#include "agent/checkpoint.h"
#include "agent/container.h"
#include "agent/gpu.h"
#include "common/http_client.h"
#include "agent/isolate.h"
#include "agent/logserver.h"
#include "agent/mps.h"
#include "agent/node_lease.h"
#include "agent/peering.h"
#include "agent/prepull.h"
#include "agent/supervisor.h"

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

/* agent_join.c */
int drv_agent__write_file_0600(const char *path, const char *text);
/* POST path with a JSON body and bearer secret; returns HTTP status (0 on
 * transport failure, with msg) and the parsed body in *out. */
long drv_agent__post(agent_t *ag, const char *path, const char *secret, json_t *body,
                     long timeout_ms, json_t **out, char *msg, size_t msglen);
void drv_agent__save_node_id(const agent_t *ag);
int drv_agent__join(agent_t *ag);

/* agent_sync.c */
json_t *drv_agent__gpus_json(agent_t *ag);
void *drv_agent__sync_main(void *arg);

#endif
