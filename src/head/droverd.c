/* droverd.c — the head node daemon: parses options, opens the store, loads
 * state, bootstraps the admin user, serves the API until SIGTERM/SIGINT,
 * then drains pending writes and exits cleanly.
 *
 * Threads: main (signals), the store writer, MHD's pool, the lease thread
 * and the blob sync (postgres; head/blob_sync.c). All signals are blocked
 * in every thread and taken synchronously by main with sigwait.
 *
 * Several heads (issue 17): on a postgres store every head starts as a
 * standby (the API answers 503 and the leader's URL; before its first lease
 * round, which follows the listener, 503 without one: head.ha) and follows the log;
 * the one holding the lease leads. Taking the lease (SIGUSR1 from the lease
 * thread) starts what only a leader runs: the admin bootstrap and the
 * controller. Losing it — the lease thread finds it another's, or the store
 * fence refuses a commit (SIGUSR2) — is a failed commit's rule: memory may
 * hold writes the database refused, so droverd re-executes itself and comes
 * back as a standby from what is durable (the local agents keep running).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/handlers.h"
#include "api/http.h"
#include "api/resource.h"
#include "common/listen.h"
#include "common/log.h"
#include "common/util.h"
#include "head/controller.h"
#include "head/gateway_link.h"
#include "provider/aws.h"
#include "provider/gcp.h"
#include "provider/oci.h"
#include "provider/slurm.h"
#include "provider/vultr.h"
#include "provider/provider.h"
#include "state/events.h"
#include "state/head.h"
#include "state/state.h"
#include "store/blobs.h"
#include "head/blob_gc.h"
#include "head/imports.h"
#include "head/blob_sync.h"
#include "common/ratelimit.h"
#include "head/tls.h"
#include "head/tls_renew.h"
#include "objstore/source.h"
#include "store/lease.h"
#include "store/store.h"

#define DEFAULT_LISTEN "127.0.0.1:7480"
#define DEFAULT_DATA_DIR "./.drover"

typedef struct opts {
    char data_dir[512];
    char store[1024];            /* --store: "" / "sqlite" or a postgres:// URL */
    char listen[300];
    char gateway_listen[300];    /* "" = no inference listener of its own */
    char advertise[256];         /* the URL standbys hand out for this head ("" = listen's) */
    bool tls_auto;               /* --tls: DATA_DIR/tls/, made and renewed here */
    char tls_cert[512], tls_key[512];   /* --tls-cert/--tls-key */
    long tls_cert_life;          /* --tls-cert-life: seconds (0: DRV_TLS_SERVER_DAYS) */
    long tls_poll_s;             /* --tls-poll-seconds: --tls-cert's files checked this often */
    int threads;
    int log_level;
    drv_head_config_t cfg;
    bool keep_local_agents;
    int blob_gc_interval_s;      /* blob store garbage collection (head/blob_gc.h) */
    int64_t blob_gc_grace_s;
} opts_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: droverd [--data-dir DIR] [--store sqlite|postgres://...] [--listen HOST:PORT]\n"
            "               [--config FILE] [--gateway-listen HOST:PORT] [--threads N]\n"
            "               [--log-level debug|info|warn|error]\n"
            "\n"
            "The drover head node: REST API, store, auth, catalog.\n"
            "\n"
            "  --data-dir DIR     where the store and admin.token live (default %s;\n"
            "                     the DROVER_HOME environment variable overrides the default)\n"
            "  --store STORE      where the record log lives: sqlite (default: DIR/drover.db)\n"
            "                     or postgres://USER[:PASSWORD]@HOST:PORT/DB[?PARAM=VALUE...]\n"
            "                     (any libpq URL; admin.token and the lock stay in DIR)\n"
            "  --listen HOST:PORT address to serve on (default %s; port 0 picks one,\n"
            "                     written to DIR/droverd.url)\n"
            "  --gateway-listen HOST:PORT\n"
            "                     also serve inference (predict, /openai/v1/..., /metrics) on\n"
            "                     this address from the gateway's own event loop: the fast\n"
            "                     path (the API address serves the same routes too; port 0\n"
            "                     picks one, written to DIR/gateway.url). Default: none\n"
            "  --config FILE      JSON file with any of: data_dir, store, listen, gateway_listen,\n"
            "                     threads, log_level, lease_ttl_ms, blob_sync_timeout_ms,\n"
            "                     advertise_url,\n"
            "                     heartbeat_ms, node_timeout_ms, node_lost_ms, job_port_min,\n"
            "                     job_port_max, job_wait_margin_s [600], agent_bin,\n"
            "                     placement_policy, keep_local_agents, blob_gc_interval_s [600],\n"
            "                     blob_gc_grace_s [3600], auth_fail_rate [10],\n"
            "                     auth_fail_burst [20], auth_fail_table [4096],\n"
            "                     audit_max_entries [10000],\n"
            "                     audit_max_age_days [90], upload_expiry_s [86400]\n"
            "                     (command-line flags win\n"
            "                     over the file)\n"
            "  --keep-local-agents on SIGTERM/SIGINT leave the local provider's agents (and\n"
            "                     their replicas) running; the next start adopts them\n"
            "  --lease-ttl SECONDS with a postgres store, several droverd may share the\n"
            "                     database: one leads, the others stand by and take over\n"
            "                     when its lease (renewed every second) expires (default 5)\n"
            "  --blob-sync-timeout SECONDS with several heads, the leader answers an\n"
            "                     artifact push or checkpoint commit once a standby holds its\n"
            "                     blobs (sha256 checked), waiting at most this long; then it\n"
            "                     answers with \"replication\": \"pending\" (default 30; 0:\n"
            "                     no wait, the standbys copy in the background)\n"
            "  --advertise-url URL the URL clients reach this head at, which standbys hand\n"
            "                     out when it leads (default: the --listen address)\n"
            "  --tls              serve the API over TLS (1.2/1.3, no plaintext) with a CA and\n"
            "                     server certificate made on first start in DIR/tls/\n"
            "                     (ca.crt, server.crt, keys mode 0600; ca.hash is the pin\n"
            "                     agents and `drover login --ca-hash` check); the server\n"
            "                     certificate is made again, under the same CA, when it has\n"
            "                     less than a third of its life left (checked at start and\n"
            "                     every tenth of its life, at most daily, while running) or\n"
            "                     lacks a name; new connections get it, open ones finish\n"
            "  --tls-cert-life SECONDS\n"
            "                     the life of --tls's server certificate (default 31536000,\n"
            "                     365 days; 10..315360000; short ones are for tests)\n"
            "  --tls-cert FILE --tls-key FILE\n"
            "                     serve TLS with this certificate (chain, PEM; its last\n"
            "                     certificate is served at /v1/tls/ca and pinned) and key,\n"
            "                     read again while running when they change (polled, see\n"
            "                     --tls-poll-seconds) and on SIGHUP\n"
            "  --tls-poll-seconds S how often --tls-cert/--tls-key's files are checked for a\n"
            "                     change (default 10; 1..3600)\n"
            "  --origin-ca-file FILE\n"
            "                     trust this CA bundle (PEM) for https artifact sources and\n"
            "                     S3 store endpoints instead of the system's store\n"
            "  --auth-fail-limit RATE/BURST | off\n"
            "                     failed authentications (401s) allowed per client address:\n"
            "                     RATE a second, BURST at once (default 10/20; loopback is\n"
            "                     not exempt); beyond, 429 with Retry-After. A valid\n"
            "                     credential is never limited\n"
            "  --audit-max-entries N  the audit log keeps the newest N writes (default 10000)\n"
            "  --audit-max-age DAYS   ... and none older (default 90)\n"
            "  --job-wait-margin S    a queued job is due (admitted first) S seconds before\n"
            "                     its wait bound (default 600; docs/architecture.md, jobs)\n"
            "  --threads N        HTTP worker threads (default: number of CPUs)\n"
            "  --log-level LEVEL  default info\n"
            "\n"
            "On first start droverd creates the user 'admin' and writes its token to\n"
            "DIR/admin.token (mode 0600). SIGTERM or SIGINT stops it cleanly.\n",
            DEFAULT_DATA_DIR, DEFAULT_LISTEN);
}

static int load_config(const char *path, opts_t *o, drv_error_t *err)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!j)
        return drv_err_invalid(err, "", "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach(j, k, v) {
        if (strcmp(k, "data_dir") == 0 && json_is_string(v))
            snprintf(o->data_dir, sizeof o->data_dir, "%s", json_string_value(v));
        else if (strcmp(k, "store") == 0 && json_is_string(v) &&
                 strlen(json_string_value(v)) < sizeof o->store)
            snprintf(o->store, sizeof o->store, "%s", json_string_value(v));
        else if (strcmp(k, "listen") == 0 && json_is_string(v))
            snprintf(o->listen, sizeof o->listen, "%s", json_string_value(v));
        else if (strcmp(k, "gateway_listen") == 0 && json_is_string(v))
            snprintf(o->gateway_listen, sizeof o->gateway_listen, "%s", json_string_value(v));
        else if (strcmp(k, "threads") == 0 && json_is_integer(v) && json_integer_value(v) > 0 &&
                 json_integer_value(v) <= 256)
            o->threads = (int)json_integer_value(v);
        else if (strcmp(k, "log_level") == 0 && json_is_string(v) &&
                 drv_log_level_of(json_string_value(v)) >= 0)
            o->log_level = drv_log_level_of(json_string_value(v));
        else if (strcmp(k, "heartbeat_ms") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 100 && json_integer_value(v) <= 60000)
            o->cfg.heartbeat_ms = (int)json_integer_value(v);
        else if (strcmp(k, "node_timeout_ms") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 200 && json_integer_value(v) <= 3600000)
            o->cfg.node_timeout_ms = (int)json_integer_value(v);
        else if (strcmp(k, "node_lost_ms") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 200 && json_integer_value(v) <= 86400000)
            o->cfg.node_lost_ms = (int)json_integer_value(v);
        else if ((strcmp(k, "job_port_min") == 0 || strcmp(k, "job_port_max") == 0) &&
                 json_is_integer(v) && json_integer_value(v) >= 1024 &&
                 json_integer_value(v) <= 65535)
            *(strcmp(k, "job_port_min") == 0 ? &o->cfg.job_port_min : &o->cfg.job_port_max) =
                (int)json_integer_value(v);
        else if (strcmp(k, "lease_ttl_ms") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 1000 && json_integer_value(v) <= 300000)
            o->cfg.lease_ttl_ms = (int)json_integer_value(v);
        else if (strcmp(k, "blob_sync_timeout_ms") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 0 && json_integer_value(v) <= 100000)
            o->cfg.blob_sync_timeout_ms = (int)json_integer_value(v);
        else if (strcmp(k, "advertise_url") == 0 && json_is_string(v) &&
                 strlen(json_string_value(v)) < sizeof o->advertise)
            snprintf(o->advertise, sizeof o->advertise, "%s", json_string_value(v));
        else if (strcmp(k, "keep_local_agents") == 0 && json_is_boolean(v))
            o->keep_local_agents = json_is_true(v);
        else if (strcmp(k, "agent_bin") == 0 && json_is_string(v))
            snprintf(o->cfg.agent_bin, sizeof o->cfg.agent_bin, "%s", json_string_value(v));
        else if (strcmp(k, "blob_gc_interval_s") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 1 && json_integer_value(v) <= 86400)
            o->blob_gc_interval_s = (int)json_integer_value(v);
        else if (strcmp(k, "blob_gc_grace_s") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 0 && json_integer_value(v) <= 30 * 86400)
            o->blob_gc_grace_s = json_integer_value(v);
        else if (strcmp(k, "auth_fail_rate") == 0 && json_is_number(v) &&
                 json_number_value(v) >= 0 && json_number_value(v) <= 1e6)
            o->cfg.auth_fail_rate = json_number_value(v);
        else if (strcmp(k, "auth_fail_burst") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 1 && json_integer_value(v) <= 1000000)
            o->cfg.auth_fail_burst = (int)json_integer_value(v);
        else if (strcmp(k, "auth_fail_table") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 1 && json_integer_value(v) <= 1000000)
            o->cfg.auth_fail_table = (int)json_integer_value(v);
        else if (strcmp(k, "job_wait_margin_s") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 0 && json_integer_value(v) <= 86400)
            o->cfg.job_wait_margin_s = (long)json_integer_value(v);
        else if (strcmp(k, "audit_max_entries") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 1 && json_integer_value(v) <= 10000000)
            o->cfg.audit_max_entries = (long)json_integer_value(v);
        else if (strcmp(k, "audit_max_age_days") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 1 && json_integer_value(v) <= 36500)
            o->cfg.audit_max_age_s = json_integer_value(v) * 86400;
        else if (strcmp(k, "upload_expiry_s") == 0 && json_is_integer(v) &&
                 json_integer_value(v) >= 1 && json_integer_value(v) <= 365 * 86400)
            o->cfg.upload_expiry_s = json_integer_value(v);
        else if (strcmp(k, "placement_policy") == 0 && json_is_string(v))
            snprintf(o->cfg.placement_policy, sizeof o->cfg.placement_policy, "%s",
                     json_string_value(v));
        else {
            rc = drv_err_invalid(err, k, "%s: unknown or malformed setting '%s'", path, k);
            break;
        }
    }
    if (rc == 0 && !json_is_object(j))
        rc = drv_err_invalid(err, "", "%s: the config must be a JSON object", path);
    if (rc == 0 && (o->cfg.node_timeout_ms <= o->cfg.heartbeat_ms ||
                    o->cfg.node_lost_ms < o->cfg.node_timeout_ms))
        rc = drv_err_invalid(err, "", "%s: need heartbeat_ms < node_timeout_ms <= node_lost_ms",
                             path);
    if (rc == 0 && o->cfg.job_port_min > o->cfg.job_port_max)
        rc = drv_err_invalid(err, "", "%s: need job_port_min <= job_port_max", path);
    json_decref(j);
    return rc;
}

/* "10/20" or "off" into the head's failed-authentication limit */
static int parse_fail_limit(const char *s, drv_head_config_t *cfg)
{
    return drv_ratelimit_parse(s, &cfg->auth_fail_rate, &cfg->auth_fail_burst);
}

static int parse_bounded(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"data-dir", required_argument, NULL, 'd'}, {"listen", required_argument, NULL, 'l'},
        {"config", required_argument, NULL, 'c'},   {"threads", required_argument, NULL, 't'},
        {"log-level", required_argument, NULL, 'L'}, {"help", no_argument, NULL, 'h'},
        {"keep-local-agents", no_argument, NULL, 'k'},
        {"gateway-listen", required_argument, NULL, 'g'},
        {"store", required_argument, NULL, 's'},
        {"lease-ttl", required_argument, NULL, 'T'},
        {"blob-sync-timeout", required_argument, NULL, 'B'},
        {"advertise-url", required_argument, NULL, 'A'},
        {"tls", no_argument, NULL, 'S'},
        {"tls-cert", required_argument, NULL, 'C'},
        {"tls-key", required_argument, NULL, 'K'},
        {"tls-cert-life", required_argument, NULL, 'V'},
        {"tls-poll-seconds", required_argument, NULL, 'P'},
        {"origin-ca-file", required_argument, NULL, 'O'},
        {"auth-fail-limit", required_argument, NULL, 'R'},
        {"audit-max-entries", required_argument, NULL, 'E'},
        {"audit-max-age", required_argument, NULL, 'G'},
        {"job-wait-margin", required_argument, NULL, 'W'},
        {NULL, 0, NULL, 0},
    };
    const char *ttl = NULL, *bst = NULL, *advertise = NULL, *tls_cert = NULL, *tls_key = NULL;
    const char *wait_margin = NULL;
    const char *fail_limit = NULL, *audit_n = NULL, *audit_age = NULL, *cert_life = NULL;
    const char *tls_poll = NULL;
    bool tls_auto = false;
    const char *data_dir = NULL, *store = NULL, *listen = NULL, *config = NULL, *level = NULL, *glisten = NULL;
    int threads = 0, c;
    bool keep = false;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': data_dir = optarg; break;
        case 's': store = optarg; break;
        case 'l': listen = optarg; break;
        case 'g': glisten = optarg; break;
        case 'c': config = optarg; break;
        case 't':
            threads = atoi(optarg);
            if (threads < 1 || threads > 256) {
                fprintf(stderr, "droverd: --threads must be 1..256\n");
                return 2;
            }
            break;
        case 'L': level = optarg; break;
        case 'k': keep = true; break;
        case 'T': ttl = optarg; break;
        case 'B': bst = optarg; break;
        case 'A': advertise = optarg; break;
        case 'S': tls_auto = true; break;
        case 'C': tls_cert = optarg; break;
        case 'K': tls_key = optarg; break;
        case 'V': cert_life = optarg; break;
        case 'P': tls_poll = optarg; break;
        case 'R': fail_limit = optarg; break;
        case 'E': audit_n = optarg; break;
        case 'G': audit_age = optarg; break;
        case 'W': wait_margin = optarg; break;
        case 'O':
            if (access(optarg, R_OK) != 0) {
                fprintf(stderr, "droverd: --origin-ca-file %s: %s\n", optarg, strerror(errno));
                return 2;
            }
            drv_src_set_ca_file(optarg);
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "droverd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    snprintf(o->data_dir, sizeof o->data_dir, "%s", DEFAULT_DATA_DIR);
    snprintf(o->listen, sizeof o->listen, "%s", DEFAULT_LISTEN);
    o->store[0] = '\0';
    o->gateway_listen[0] = '\0';
    o->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    o->blob_gc_interval_s = 600;
    o->blob_gc_grace_s = 3600;
    o->log_level = DRV_LOG_INFO;
    o->keep_local_agents = false;
    o->advertise[0] = '\0';
    drv_head_config_defaults(&o->cfg);
    if (config) {
        drv_error_t err;
        if (load_config(config, o, &err) < 0) {
            fprintf(stderr, "droverd: %s\n", err.message);
            return 2;
        }
    }
    const char *home = getenv("DROVER_HOME");
    if (home && *home)
        snprintf(o->data_dir, sizeof o->data_dir, "%s", home);
    if (data_dir)
        snprintf(o->data_dir, sizeof o->data_dir, "%s", data_dir);
    if (store) {
        if (strlen(store) >= sizeof o->store) {
            fprintf(stderr, "droverd: --store is longer than %zu bytes\n", sizeof o->store - 1);
            return 2;
        }
        snprintf(o->store, sizeof o->store, "%s", store);
    }
    if (listen)
        snprintf(o->listen, sizeof o->listen, "%s", listen);
    if (glisten)
        snprintf(o->gateway_listen, sizeof o->gateway_listen, "%s", glisten);
    if (threads)
        o->threads = threads;
    if (keep)
        o->keep_local_agents = true;
    if (ttl) {
        char *end;
        double s = strtod(ttl, &end);
        if (end == ttl || *end || !(s >= 1 && s <= 300)) {
            fprintf(stderr, "droverd: --lease-ttl must be 1..300 seconds, got '%s'\n", ttl);
            return 2;
        }
        o->cfg.lease_ttl_ms = (int)(s * 1000);
    }
    if (bst) {
        char *end;
        double s = strtod(bst, &end);
        if (end == bst || *end || !(s >= 0 && s <= 100)) {
            fprintf(stderr, "droverd: --blob-sync-timeout must be 0..100 seconds, got '%s'\n",
                    bst);
            return 2;
        }
        o->cfg.blob_sync_timeout_ms = (int)(s * 1000);
    }
    if (fail_limit && parse_fail_limit(fail_limit, &o->cfg) < 0) {
        fprintf(stderr, "droverd: --auth-fail-limit takes RATE/BURST (failures a second, at "
                "once; e.g. 10/20) or off, got '%s'\n", fail_limit);
        return 2;
    }
    if (audit_n && parse_bounded(audit_n, 1, 10000000, &o->cfg.audit_max_entries) < 0) {
        fprintf(stderr, "droverd: --audit-max-entries must be 1..10000000, got '%s'\n",
                audit_n);
        return 2;
    }
    if (wait_margin && parse_bounded(wait_margin, 0, 86400, &o->cfg.job_wait_margin_s) < 0) {
        fprintf(stderr, "droverd: --job-wait-margin must be 0..86400 seconds, got '%s'\n",
                wait_margin);
        return 2;
    }
    long days;
    if (audit_age && parse_bounded(audit_age, 1, 36500, &days) < 0) {
        fprintf(stderr, "droverd: --audit-max-age must be 1..36500 days, got '%s'\n",
                audit_age);
        return 2;
    }
    if (audit_age)
        o->cfg.audit_max_age_s = days * 86400LL;
    if (!tls_cert != !tls_key || (tls_auto && tls_cert)) {
        fprintf(stderr, "droverd: give --tls-cert and --tls-key together, or --tls alone\n");
        return 2;
    }
    o->tls_auto = tls_auto;
    o->tls_cert_life = 0;
    if (cert_life && (parse_bounded(cert_life, 10, 315360000, &o->tls_cert_life) < 0 ||
                      !tls_auto)) {
        fprintf(stderr, "droverd: --tls-cert-life takes 10..315360000 seconds and goes with "
                "--tls, got '%s'\n", cert_life);
        return 2;
    }
    o->tls_poll_s = DRV_TLS_FILE_POLL_MS / 1000;
    if (tls_poll && (parse_bounded(tls_poll, 1, 3600, &o->tls_poll_s) < 0 || !tls_cert)) {
        fprintf(stderr, "droverd: --tls-poll-seconds takes 1..3600 seconds and goes with "
                "--tls-cert, got '%s'\n", tls_poll);
        return 2;
    }
    snprintf(o->tls_cert, sizeof o->tls_cert, "%s", tls_cert ? tls_cert : "");
    snprintf(o->tls_key, sizeof o->tls_key, "%s", tls_key ? tls_key : "");
    if (advertise) {
        if (strlen(advertise) >= sizeof o->advertise ||
            (strncmp(advertise, "http://", 7) && strncmp(advertise, "https://", 8))) {
            fprintf(stderr, "droverd: --advertise-url must be an http(s):// URL, got '%s'\n",
                    advertise);
            return 2;
        }
        snprintf(o->advertise, sizeof o->advertise, "%s", advertise);
    }
    drv_error_t lerr;
    if (!drv_store_backend_for(o->store, &lerr)) {
        fprintf(stderr, "droverd: %s\n", lerr.message);
        return 2;
    }
    if (drv_listen_check(o->listen, &lerr) < 0) {
        fprintf(stderr, "droverd: %s\n", lerr.message);
        return 2;
    }
    if (o->gateway_listen[0] && drv_listen_check(o->gateway_listen, &lerr) < 0) {
        fprintf(stderr, "droverd: --gateway-listen must be HOST:PORT, got '%s'\n",
                o->gateway_listen);
        return 2;
    }
    /* refused only when it would collide: two port-0 addresses are two ports */
    if (o->gateway_listen[0] && drv_listen_same(o->gateway_listen, o->listen)) {
        fprintf(stderr, "droverd: --gateway-listen must differ from --listen (%s)\n", o->listen);
        return 2;
    }
    if (level && (o->log_level = drv_log_level_of(level)) < 0) {
        fprintf(stderr, "droverd: --log-level must be debug, info, warn or error\n");
        return 2;
    }
    return 0;
}

static int write_file(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fputs(text, f);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

/* The URL of what listens on addr ("HOST:PORT") at port, into url and
 * into DIR/name (so that port 0's choice can be found). */
static bool g_tls;   /* the API address speaks TLS */

static void publish_url(const char *dir, const char *name, const char *addr, int port,
                        char *url, size_t n)
{
    char host[300], path[700];
    snprintf(host, sizeof host, "%s", addr);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    bool v6 = strchr(host, ':') != NULL && host[0] != '[';
    snprintf(url, n, "%s://%s%s%s:%d\n", g_tls ? "https" : "http",
             v6 ? "[" : "", host, v6 ? "]" : "", port);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, url);
    url[strlen(url) - 1] = '\0';
}

/* This head's stable id: DATA_DIR/head.id, made once. A head restarted on
 * the same data dir (which the lock proves is not running) is the same head
 * and takes its own lease back at once. */
static int head_id(const char *dir, char *out, size_t n)
{
    char path[700], hex[17];
    snprintf(path, sizeof path, "%s/head.id", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        bool ok = fgets(out, (int)n, f) != NULL;
        fclose(f);
        out[strcspn(out, "\n")] = '\0';
        if (ok && *out)
            return 0;
    }
    char host[64] = "head";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    if (drv_random_hex(8, hex) < 0)
        return -1;
    snprintf(out, n, "%.40s-%s\n", host, hex);
    if (write_file(path, out) < 0)
        return -1;
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

/* drv_prov_env_t.head_urls: this head's URL, then every other live head's
 * advertised one from the lease's roster (at most 8: the agent's limit). */
static void head_urls(void *ctx, char *out, size_t n)
{
    drv_head_t *h = ctx;
    drv_lease_t *l = __atomic_load_n(&h->lease, __ATOMIC_ACQUIRE);
    if (!l)
        return;
    drv_lease_view_t *v = malloc(sizeof *v);
    if (!v)
        return;
    drv_lease_view(l, v);
    size_t len = strlen(out);
    int k = 1;
    for (size_t i = 0; i < v->nheads && k < 8; i++) {
        const drv_lease_head_t *o = &v->heads[i];
        if (strcmp(o->holder, v->self) == 0 || !o->url[0] || strchr(o->url, ',') ||
            o->seen_ms_ago > h->cfg.lease_ttl_ms + 3000 || drv_list_has(out, o->url, strlen(o->url)))
            continue;
        int w = snprintf(out + len, n - len, ",%s", o->url);
        if (w < 0 || (size_t)w >= n - len) {
            out[len] = '\0';
            break;
        }
        len += (size_t)w;
        k++;
    }
    free(v);
}

/* The lease thread's and the writer's callbacks: main does the work. */
static char **g_argv;

static int ha_apply(void *ctx, const drv_lease_rec_t *recs, size_t n, drv_error_t *err)
{
    drv_head_t *h = ctx;
    int rc = 0;
    drv_state_wrlock(h->state);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = drv_state_apply(h->state, recs[i].kind, recs[i].key, recs[i].body, err);
    drv_state_unlock(h->state);
    return rc;
}

static void ha_lead(void *ctx, long long epoch, long long after_ms)
{
    drv_head_t *h = ctx;
    drv_state_wrlock(h->state);   /* as at a start: statuses fresh, versions past the old */
    drv_resources_init_status(h->state);
    h->version_base = (uint64_t)drv_now_ms() * 1000;
    drv_state_unlock(h->state);
    drv_store_set_epoch(h->store, epoch);
    drv_events_add(h->events, "admin", "head", h->cfg.head_id, "leader_elected",
                   "head %s (%s) took the leader lease, epoch %lld, %lld ms after the "
                   "previous lease expired", h->cfg.head_id, h->cfg.server_url, epoch, after_ms);
    kill(getpid(), SIGUSR1);
}

static void ha_lost(void *ctx, const char *why)
{
    (void)ctx;
    drv_warn("stepping down: %s", why);
    kill(getpid(), SIGUSR2);
}

/* Step down: memory may hold writes the database refused; start again from
 * what is durable, as a standby. */
static void reexec(void)
{
    drv_warn("re-executing as a standby");
    setenv("DROVERD_STEPPED_DOWN", "1", 1);   /* the next start waits for the database */
    execv("/proc/self/exe", g_argv);
    drv_error("cannot re-execute droverd: %s; exiting", strerror(errno));
    _exit(75);
}

/* Start what only a leader runs: the admin bootstrap, the controller and
 * the artifact importer. */
static int lead(drv_head_t *head, drv_controller_t **ctl, drv_imports_t **imp, bool ha)
{
    drv_error_t err;
    if (drv_users_bootstrap(head, &err) < 0 || !(*ctl = drv_controller_create(head, &err)) ||
        !(*imp = drv_imports_create(head, 2, &err))) {
        drv_error("%s", err.message);
        return -1;
    }
    if (ha)
        drv_info("leading (head %s)", head->cfg.head_id);
    return 0;
}

int main(int argc, char **argv)
{
    /* One malloc arena (unless MALLOC_ARENA_MAX says otherwise): a create
     * allocates on an HTTP thread what the store writer and other threads
     * free, and the state only grows under a create load. Per-thread
     * arenas grew a page at a time (an mprotect each, about two a
     * create); the main arena grows by sbrk with glibc's top pad, and
     * tcache keeps most small allocations off its lock. Measured: 7 %
     * less CPU per durable create on PostgreSQL (docs/benchmarks.md). */
    if (!getenv("MALLOC_ARENA_MAX"))
        mallopt(M_ARENA_MAX, 1);
    opts_t o;
    g_argv = argv;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    drv_log_init("droverd", o.log_level);

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);   /* the lease thread: this head now leads */
    sigaddset(&sigs, SIGUSR2);   /* ... it lost the lease: step down */
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    {   /* a step-down's second signal survives execve: it is not ours */
        sigset_t usr;
        sigemptyset(&usr);
        sigaddset(&usr, SIGUSR1);
        sigaddset(&usr, SIGUSR2);
        struct timespec zero = {0, 0};
        while (sigtimedwait(&usr, NULL, &zero) > 0) {
        }
    }

    drv_error_t err;
    drv_head_t head;
    memset(&head, 0, sizeof head);
    drv_prov_env_t prov;
    memset(&prov, 0, sizeof prov);
    drv_http_t *http = NULL;
    drv_controller_t *ctl = NULL;
    drv_blob_gc_t *gc = NULL;
    drv_imports_t *imp = NULL;
    drv_blob_sync_t *bsync = NULL;
    drv_gateway_link_t *gw = NULL;
    drv_tls_renew_t *renew = NULL;
    int lockfd = -1;
    rc = 1;

    if (drv_dir_make_absolute(o.data_dir, sizeof o.data_dir) < 0) {
        drv_error("cannot create data dir %s: %s", o.data_dir, strerror(errno));
        goto out;
    }
    snprintf(head.data_dir, sizeof head.data_dir, "%s", o.data_dir);
    head.cfg = o.cfg;
    head.events = drv_events_create(4096);
    head.version_base = (uint64_t)drv_now_ms() * 1000;
    if (!head.cfg.agent_bin[0]) {
        /* drover-agent next to droverd, unless DROVER_AGENT_BIN says otherwise */
        const char *env = getenv("DROVER_AGENT_BIN");
        char self[400] = "";
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0)
            self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(head.cfg.agent_bin, sizeof head.cfg.agent_bin, "%s",
                 env && *env ? env : self);
        if (!(env && *env))
            strncat(head.cfg.agent_bin, "/drover-agent",
                    sizeof head.cfg.agent_bin - strlen(head.cfg.agent_bin) - 1);
    }
    char path[700];
    int gw_port = -1;   /* the inference listener's, once it listens */
    drv_tls_material_t tls = {0};
    snprintf(path, sizeof path, "%s/droverd.lock", o.data_dir);
    lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) < 0) {
        drv_error("data dir %s is in use by another droverd (or not writable)", o.data_dir);
        goto out;
    }
    if (head_id(o.data_dir, head.cfg.head_id, sizeof head.cfg.head_id) < 0) {
        drv_error("cannot write %s/head.id", o.data_dir);
        goto out;
    }
    if (!(head.catalog = drv_catalog_create_default(&err))) {
        drv_error("instance catalog: %s", err.message);
        goto out;
    }
    const drv_store_backend_t *be = drv_store_backend_for(o.store, &err);   /* checked */
    /* a head that stepped down (its database may be restarting) waits a
     * minute for it; a first start fails at once */
    const char *stepped = getenv("DROVERD_STEPPED_DOWN");
    for (int tries = stepped && *stepped ? 60 : 1; tries > 0; tries--) {
        if ((head.store = drv_store_create(be, be == &drv_store_sqlite ? o.data_dir : o.store,
                                           &err)))
            break;
        drv_error("store: %s%s", err.message, tries > 1 ? "; retrying" : "");
        sigset_t pend;
        sigpending(&pend);
        if (tries == 1 || sigismember(&pend, SIGTERM) || sigismember(&pend, SIGINT))
            goto out;
        sleep(1);
    }
    unsetenv("DROVERD_STEPPED_DOWN");
    if (!(head.state = drv_state_create(head.store)) || drv_state_load(head.state, &err) < 0) {
        drv_error("loading state: %s", err.message);
        goto out;
    }
    drv_resources_init_status(head.state);
    if (!(head.blobs = drv_blobs_open(o.data_dir, &err))) {
        drv_error("blob store: %s", err.message);
        goto out;
    }
    bool ha = be == &drv_store_postgres;
    head.ha = ha;   /* before the HTTP threads: until its lease round, a standby's answers */
    if (ha) {   /* nothing commits before this head holds the lease */
        drv_store_set_epoch(head.store, -1);
        drv_store_on_fenced(head.store, ha_lost, &head);
    }
    if (drv_store_start(head.store, &err) < 0) {
        drv_error("%s", err.message);
        goto out;
    }
    if (!(gw = drv_gateway_link_create(&head, &err))) {   /* before requests can come */
        drv_error("%s", err.message);
        goto out;
    }
    if (o.tls_auto && ha) {   /* several heads, one CA: the database's (store/pg_ca.h) */
        char tdir[600];
        int taken = 0;
        snprintf(tdir, sizeof tdir, "%s/tls", o.data_dir);
        if (drv_tls_share_ca(tdir, o.store, &taken, &err) < 0) {
            drv_error("TLS: %s", err.message);
            goto out;
        }
        drv_info("TLS: the heads' CA is the database's (table head_ca)%s",
                 taken ? ", taken from the head that put it there" : "");
    }
    if (o.tls_auto || o.tls_cert[0]) {
        if (drv_tls_load(o.data_dir, o.tls_auto, o.tls_cert, o.tls_key, o.listen, o.advertise,
                         o.gateway_listen, o.tls_cert_life, &tls, &err) < 0) {
            drv_error("TLS: %s", err.message);
            goto out;
        }
        g_tls = true;
        head.cfg.tls_ca_pem = tls.ca_pem;
        snprintf(head.cfg.tls_ca_hash, sizeof head.cfg.tls_ca_hash, "%s", tls.ca_hash);
        drv_info("TLS on: CA %s, pin %s", tls.ca_file, tls.ca_hash);
    }
    snprintf(path, sizeof path, "%s/gateway.url", o.data_dir);
    unlink(path);   /* a listener of an earlier start is not this one's */
    if (o.gateway_listen[0]) {
        int gport = drv_gateway_link_listen_tls(gw, o.gateway_listen, tls.cert_pem, tls.key_pem,
                                                &err);
        if (gport < 0) {
            drv_error("--gateway-listen: %s", err.message);
            goto out;
        }
        gw_port = gport;
    }
    if (!(http = drv_http_create_tls(&head, o.listen, o.threads, tls.cert_pem, tls.key_pem,
                                     &err))) {
        drv_error("%s", err.message);
        goto out;
    }
    if (gw_port >= 0) {   /* written once both listen, so that it names a live port */
        char gurl[400];
        publish_url(o.data_dir, "gateway.url", o.gateway_listen, gw_port, gurl, sizeof gurl);
        drv_info("serving inference on %s (the gateway's own loop)", gurl);
    }
    char url[400];
    publish_url(o.data_dir, "droverd.url.next", o.listen, drv_http_port(http), url, sizeof url);
    snprintf(head.cfg.server_url, sizeof head.cfg.server_url, "%s", url);
    if (ha) {   /* one round first: a lone head leads before it says it listens */
        /* tests: hold the first round (the window in which this head listens
         * but does not know its role: it answers 503, api/h_status.c) */
        const char *hold = getenv("DROVER_TEST_LEASE_DELAY_MS");
        if (hold && atoi(hold) > 0) {
            struct timespec ts = {atoi(hold) / 1000, (long)(atoi(hold) % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
        drv_lease_cfg_t lc = {
            .url = o.store, .holder = head.cfg.head_id,
            .advertise = o.advertise[0] ? o.advertise : url, .ttl_ms = head.cfg.lease_ttl_ms,
            .from_seq = drv_store_loaded_seq(head.store), .apply = ha_apply, .on_lead = ha_lead,
            .on_lost = ha_lost, .ctx = &head,
        };
        drv_lease_t *lease = drv_lease_create(&lc, &err);
        if (!lease) {
            drv_error("%s", err.message);
            goto out;
        }
        drv_lease_key(lease, head.peer_key);   /* before lease: api/h_peer.c reads it then */
        __atomic_store_n(&head.lease, lease, __ATOMIC_RELEASE);
    }
    snprintf(prov.data_dir, sizeof prov.data_dir, "%s", head.data_dir);   /* the providers' */
    snprintf(prov.server_url, sizeof prov.server_url, "%s", head.cfg.server_url);
    snprintf(prov.agent_bin, sizeof prov.agent_bin, "%s", head.cfg.agent_bin);
    snprintf(prov.ca_file, sizeof prov.ca_file, "%s", g_tls ? tls.ca_file : "");
    if (ha) {
        prov.head_urls = head_urls;
        prov.head_urls_ctx = &head;
    }
    if (!(prov.aws = drv_aws_create(prov.data_dir, &err))) {   /* the aws provider's worker */
        drv_error("%s", err.message);
        goto out;
    }
    if (!(prov.gcp = drv_gcp_create(prov.data_dir, &err))) {   /* the gcp provider's worker */
        drv_error("%s", err.message);
        goto out;
    }
    if (!(prov.vultr = drv_vultr_create_worker(prov.data_dir, &err))) {   /* vultr's */
        drv_error("%s", err.message);
        goto out;
    }
    if (!(prov.oracle = drv_oci_create_worker(prov.data_dir, &err))) {   /* oracle's */
        drv_error("%s", err.message);
        goto out;
    }
    if (!(prov.slurm = drv_slurm_create_worker(prov.data_dir, &err))) {   /* slurm's */
        drv_error("%s", err.message);
        goto out;
    }
    head.prov = &prov;
    if (!(gc = drv_blob_gc_create(&head, o.blob_gc_interval_s, o.blob_gc_grace_s,
                                    head.cfg.upload_expiry_s, &err))) {
        drv_error("%s", err.message);
        goto out;
    }
    if (ha && !(bsync = drv_blob_sync_create(&head, &err))) {   /* the others' blobs, here */
        drv_error("%s", err.message);
        goto out;
    }
    /* a head that leads from the start (SQLite; the lease was free) has its
     * admin and its controller before it says it listens; the SIGUSR1 the
     * lease sent is then a no-op */
    if ((!ha || drv_lease_is_leader(head.lease)) && lead(&head, &ctl, &imp, ha) < 0)
        goto out;
    {
        char from[700], to[700];
        snprintf(from, sizeof from, "%s/droverd.url.next", o.data_dir);
        snprintf(to, sizeof to, "%s/droverd.url", o.data_dir);
        rename(from, to);
    }
    drv_state_rdlock(head.state);   /* the API, the controller and the lease run already */
    size_t n_users = drv_state_count(head.state, DRV_K_USER);
    drv_state_unlock(head.state);
    drv_info("listening on %s (data dir %s, store %s schema v%d, %zu users%s)", url, o.data_dir,
             drv_store_where(head.store), drv_store_schema_version(head.store), n_users,
             !ha ? "" : ctl ? ", leader" : ", standby");

    if (g_tls) {   /* renewed (--tls) or read again (--tls-cert) while running */
        drv_tls_renew_cfg_t rc_ = {
            .data_dir = o.data_dir, .cert = o.tls_cert[0] ? o.tls_cert : NULL,
            .key = o.tls_key[0] ? o.tls_key : NULL, .listen = o.listen,
            .advertise = o.advertise, .gateway_listen = o.gateway_listen,
            .life_s = o.tls_cert_life, .poll_ms = o.tls_poll_s * 1000,
            .ca_hash = tls.ca_hash, .http = http,
            .gw = o.gateway_listen[0] ? gw : NULL,
        };
        if (!(renew = drv_tls_renew_create(&rc_))) {
            drv_error("out of memory");
            goto out;
        }
    }
    int sig = 0;
    for (;;) {
        if (renew) {
            int64_t ms = drv_tls_renew_interval_ms(renew);
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
            sig = sigtimedwait(&sigs, NULL, &ts);
        } else {
            sigwait(&sigs, &sig);
        }
        if (sig < 0 || (sig == SIGHUP && renew)) {   /* a check, or SIGHUP: read again */
            if (drv_tls_renew_check(renew, sig == SIGHUP, &err) < 0)
                drv_warn("TLS: %s (the certificate served stays; tried again at the next "
                         "check)", err.message);
        } else if (sig == SIGHUP) {
            drv_info("SIGHUP ignored (nothing to reload)");
        } else if (sig == SIGUSR2) {
            reexec();
        } else if (sig == SIGUSR1 && !ctl) {   /* took the lease */
            if (lead(&head, &ctl, &imp, ha) < 0)
                goto out;
        } else if (sig == SIGTERM || sig == SIGINT) {
            break;
        }
    }
    drv_info("%s received, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    rc = 0;
out:
    if (ctl && !o.keep_local_agents)
        drv_controller_stop_local_agents(ctl, 15000);
    drv_imports_destroy(imp);   /* before the controller: it kicks it */
    drv_controller_destroy(ctl);
    drv_blob_gc_destroy(gc);
    drv_gateway_link_stop(gw);        /* answers what it holds: no suspended connection left */
    drv_http_destroy(http);
    drv_blob_sync_destroy(bsync);    /* after the HTTP threads: they call its hook */
    drv_gateway_link_destroy(gw);
    head.prov = NULL;
    drv_aws_destroy(prov.aws);   /* after the HTTP threads: /metrics reads it */
    drv_gcp_destroy(prov.gcp);
    drv_vultr_destroy(prov.vultr);
    drv_oci_destroy(prov.oracle);
    drv_slurm_destroy(prov.slurm);
    drv_store_destroy(head.store);   /* commits what is queued */
    drv_lease_destroy(head.lease);   /* then hands the lease over */
    drv_state_destroy(head.state);
    drv_blobs_close(head.blobs);
    drv_catalog_destroy(head.catalog);
    drv_events_destroy(head.events);
    drv_tls_renew_destroy(renew);
    drv_tls_material_free(&tls);
    if (lockfd >= 0)
        close(lockfd);
    if (rc == 0)
        drv_info("stopped");
    return rc;
}
