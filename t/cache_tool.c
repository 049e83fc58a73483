/* cache_tool.c — drives the node cache (src/agent/cache.c) for t/cache.sh.
 *
 *   cache_tool manifest DIR CHUNK_BYTES          the manifest's JSON on stdout
 *   cache_tool run CACHE_DIR MAX_BYTES THREADS ORIGIN_URL [BEARER]
 *       then one command a line on stdin, one answer line each on stdout:
 *       ensure M.json    "ensure ok" | "ensure error: MSG"
 *       wait M.json      "ready PATH" | "failed: MSG" (waits without bound)
 *       ensure2 M.json   two threads ensure and wait at once: two wait answers
 *       pin|unpin M.json "pin ok" | "pin error: MSG"
 *       list             "blob HEX SIZE in_use partial" lines, then "held N"
 *       serve SECRET...  start the peer cache server on 127.0.0.1:0: "serving PORT"
 *       self ID          this node's id among the peers (for later ensures)
 *       peer ID URL SECRET [HEX,HEX...]  add a peer (for later ensures),
 *                        a member of those blobs' rankings only when listed:
 *                        "peer ok"
 * "ready" answers end with "origin=BYTES peers=BYTES" (what this process
 * verified, by source). Options from the environment: CACHE_TIMEOUT_MS,
 * CACHE_PEER_STALL_MS,
 * CACHE_PEER_DEADLINE_MS, CACHE_OWNER_WAIT_MS (drv_cache_opts_t), and
 * CACHE_CA_FILE: a PEM CA an https:// ORIGIN_URL must chain to (the
 * agent's --ca-file trust of its first hop; t/cache_https.sh).
 * The origin serves files by their manifest path (by_path). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cache.h"
#include "agent/cacheserve.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/manifest.h"

static drv_cache_t *cache;
static drv_cache_origin_t origin;
static drv_cache_peer_t peers[DRV_CACHE_MAX_PEERS];
static size_t npeers;
static char *self_id;

static long env_ms(const char *name)
{
    const char *v = getenv(name);
    return v ? atol(v) : 0;
}

static int ensure(const drv_manifest_t *m, drv_error_t *e)
{
    return drv_cache_ensure_peers(cache, m, &origin, peers, npeers, self_id, e);
}

static drv_manifest_t *load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("error: cannot open %s\n", path);
        return NULL;
    }
    static char buf[64 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    drv_manifest_t *m = NULL;
    drv_error_t e = {0};
    if (drv_manifest_parse(buf, n, &m, &e) < 0)
        printf("error: %s\n", e.message);
    return m;
}

static void wait_one(const drv_manifest_t *m)
{
    drv_cache_progress_t p;
    if (drv_cache_wait(cache, m->digest, -1, &p) == DRV_CACHE_READY) {
        char path[2048];
        drv_cache_snapshot_path(cache, m->digest, path, sizeof path, NULL);
        printf("ready %s %llu/%llu origin=%llu peers=%llu\n", path, (unsigned long long)p.done,
               (unsigned long long)p.total, (unsigned long long)p.from_origin,
               (unsigned long long)p.from_peers);
    } else {
        printf("failed: %s\n", p.error);
    }
    fflush(stdout);
}

static void *ensure_and_wait(void *arg)
{
    drv_error_t e = {0};
    if (ensure(arg, &e) < 0)
        printf("ensure error: %s\n", e.message);
    else
        wait_one(arg);
    return NULL;
}

static int run(int argc, char **argv)
{
    drv_error_t e = {0};
    drv_cache_opts_t o = {.threads = atoi(argv[4]), .timeout_ms = env_ms("CACHE_TIMEOUT_MS"),
                          .peer_stall_ms = env_ms("CACHE_PEER_STALL_MS"),
                          .peer_deadline_ms = env_ms("CACHE_PEER_DEADLINE_MS"),
                          .owner_wait_ms = env_ms("CACHE_OWNER_WAIT_MS")};
    drv_cacheserve_t *srv = NULL;
    const char *ca = getenv("CACHE_CA_FILE");
    if (ca && *ca) {
        FILE *f = fopen(ca, "rb");
        static char pem[65536];
        size_t n = f ? fread(pem, 1, sizeof pem - 1, f) : 0;
        if (f)
            fclose(f);
        pem[n] = 0;
        if (n == 0 || drv_hc_tls_set_ca(pem, &e) < 0) {
            printf("create error: CACHE_CA_FILE %s: %s\n", ca, n ? e.message : "unreadable");
            return 1;
        }
    }
    origin.base_url = argv[5];
    origin.bearer = argc > 6 ? argv[6] : NULL;
    origin.by_path = true;
    cache = drv_cache_create(argv[2], strtoull(argv[3], NULL, 10), &o, &e);
    if (!cache) {
        printf("create error: %s\n", e.message);
        return 1;
    }
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        char cmd[32] = "", arg[4000] = "", a2[1000] = "", a3[1000] = "", a4[2000] = "";
        if (sscanf(line, "%31s %3999s %999s %999s %1999s", cmd, arg, a2, a3, a4) < 1)
            continue;
        if (strcmp(cmd, "serve") == 0) {
            const char *sec[] = {arg, a2};
            srv = drv_cacheserve_create(cache, "127.0.0.1", 0, sec, a2[0] ? 2 : 1, &e);
            if (srv)
                printf("serving %d\n", drv_cacheserve_port(srv));
            else
                printf("serve error: %s\n", e.message);
            fflush(stdout);
            continue;
        }
        if (strcmp(cmd, "self") == 0 || strcmp(cmd, "peer") == 0) {
            if (cmd[0] == 's')
                free(self_id), self_id = strdup(arg);
            else if (npeers < DRV_CACHE_MAX_PEERS) {
                drv_cache_peer_t *q = &peers[npeers++];
                *q = (drv_cache_peer_t){.id = strdup(arg), .base_url = strdup(a2),
                                        .bearer = a3[0] ? strdup(a3) : NULL};
                if (a4[0]) {   /* (kept for the process's life, like the rest) */
                    const char **bl = calloc(32, sizeof *bl);
                    for (char *sv = NULL, *h = strtok_r(a4, ",", &sv); bl && h && q->nblobs < 32;
                         h = strtok_r(NULL, ",", &sv))
                        bl[q->nblobs++] = strdup(h);
                    q->blobs = bl;
                }
            }
            printf("%s ok\n", cmd);
            fflush(stdout);
            continue;
        }
        drv_manifest_t *m = NULL;
        if (strcmp(cmd, "list") != 0 && !(m = load(arg))) {
            fflush(stdout);
            continue;
        }
        if (strcmp(cmd, "ensure") == 0) {
            if (ensure(m, &e) < 0)
                printf("ensure error: %s\n", e.message);
            else
                printf("ensure ok\n");
        } else if (strcmp(cmd, "wait") == 0) {
            wait_one(m);
        } else if (strcmp(cmd, "ensure2") == 0) {
            pthread_t t[2];
            for (int i = 0; i < 2; i++)
                pthread_create(&t[i], NULL, ensure_and_wait, m);
            for (int i = 0; i < 2; i++)
                pthread_join(t[i], NULL);
        } else if (strcmp(cmd, "pin") == 0 || strcmp(cmd, "unpin") == 0) {
            int rc = cmd[0] == 'p' ? drv_cache_pin(cache, m->digest, &e)
                                   : drv_cache_unpin(cache, m->digest, &e);
            if (rc < 0)
                printf("%s error: %s\n", cmd, e.message);
            else
                printf("%s ok\n", cmd);
        } else if (strcmp(cmd, "list") == 0) {
            drv_cache_entry_t *v;
            size_t n;
            uint64_t held;
            drv_cache_list(cache, &v, &n, &held);
            for (size_t i = 0; i < n; i++)
                printf("blob %s %llu %d %d\n", v[i].hex, (unsigned long long)v[i].size,
                       v[i].in_use, v[i].partial);
            printf("held %llu\n", (unsigned long long)held);
            free(v);
        } else {
            printf("error: unknown command %s\n", cmd);
        }
        fflush(stdout);
        drv_manifest_free(m);
    }
    drv_cacheserve_destroy(srv);
    drv_cache_destroy(cache);
    for (size_t i = 0; i < npeers; i++) {
        free((char *)peers[i].id);
        free((char *)peers[i].base_url);
        free((char *)peers[i].bearer);
    }
    free(self_id);
    return 0;
}

int main(int argc, char **argv)
{
    drv_log_init("cache_tool", 1);
    if (argc == 4 && strcmp(argv[1], "manifest") == 0) {
        drv_manifest_t *m = NULL;
        drv_error_t e = {0};
        if (drv_manifest_build(argv[2], strtoull(argv[3], NULL, 10), 0, &m, &e) < 0) {
            fprintf(stderr, "manifest: %s\n", e.message);
            return 1;
        }
        char *js = drv_manifest_to_json(m);
        puts(js);
        free(js);
        drv_manifest_free(m);
        return 0;
    }
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "run") == 0)
        return run(argc, argv);
    fprintf(stderr, "usage: cache_tool manifest DIR CHUNK | run DIR MAX THREADS ORIGIN [BEARER]\n");
    return 2;
}
