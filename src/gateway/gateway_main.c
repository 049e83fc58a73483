/* gateway_main.c — drover-gateway: an inference gateway outside droverd,
 * so that gateways can be scaled out beside one head (docs/cli.md
 * "drover-gateway", docs/api.md "Standalone gateways").
 *
 * It follows the head's routing table and inference tokens (follow.c),
 * serves the same inference routes with the same rules (serve.c, with the
 * shared gateway code), and reports its load to the head so the replica
 * autoscaler sees it (a cold start is reported at once). While the head is
 * down it keeps serving with the last table it got.
 *
 * Threads: main (signals, taken synchronously with sigwait), the gateway
 * thread (which also runs the HTTP server, serve.c), the follower's two
 * threads.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/listen.h"
#include "common/pin.h"
#include "common/ratelimit.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/follow.h"
#include "gateway/routes_doc.h"
#include "gateway/serve.h"
#include "gateway/gateway.h"

#define DEFAULT_LISTEN "127.0.0.1:8090"

typedef struct opts {
    const char *server, *token, *listen, *name;
    const char *tls_cert, *tls_key, *ca_file;
    int threads, log_level, first_wait_s, poll_s;
    int tls_poll_s;     /* --tls-poll-seconds (0: not given, 10) */
    double fail_rate;   /* --auth-fail-limit (common/ratelimit.h; 0: off) */
    int fail_burst;
} opts_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: drover-gateway --server URL --token TOKEN [--listen ADDR:PORT] [flags]\n"
            "\n"
            "An inference gateway beside droverd: follows the head's routing table and\n"
            "serves POST /v1/deployments/D/predict, /openai/v1/... and GET /metrics with\n"
            "the head's tokens; reports its load to the head's replica autoscaler.\n"
            "\n"
            "  --server URL[,URL...] the head, or several heads' URLs: it follows the\n"
            "                     leader (default $DROVER_SERVER)\n"
            "  --token TOKEN      an admin's token with scope gateway (or all)\n"
            "                     (default $DROVER_GATEWAY_TOKEN)\n"
            "  --listen HOST:PORT address to serve on (IPv4 or [IPv6]; default %s; port 0: any)\n"
            "  --tls-cert FILE --tls-key FILE\n"
            "                     serve over TLS (1.2/1.3, no plaintext) with this\n"
            "                     certificate (chain, PEM) and key, read again when they\n"
            "                     change (polled) and on SIGHUP: new connections\n"
            "                     get the new one, open ones finish with theirs\n"
            "  --tls-poll-seconds S how often those files are checked for a change\n"
            "                     (default 10; 1..3600)\n"
            "  --ca-file FILE     the CA an https:// head's certificate must chain to\n"
            "                     (e.g. the head's DATA_DIR/tls/ca.crt; default: the system's)\n"
            "  --name NAME        this gateway's name in load reports (default gw-HOST-PORT)\n"
            "  --first-wait S     seconds to wait for the head's first routes (default 30)\n"
            "  --poll-seconds S   longest wait of a routes long poll, 1..25 (default 25;\n"
            "                     lower it below an idle timeout between here and the head)\n"
            "  --threads N        accepted for compatibility: the gateway serves from one\n"
            "                     event loop (run more gateways for more cores)\n"
            "  --auth-fail-limit RATE/BURST | off\n"
            "                     failed authentications (401s) allowed per client address:\n"
            "                     RATE a second, BURST at once (default 10/20, as droverd's);\n"
            "                     beyond, 429 with Retry-After. A valid token is never limited\n"
            "  --log-level LEVEL  debug, info, warn, error (default info)\n"
            "\n"
            "Exit codes: 0 stopped by SIGTERM/SIGINT, 1 could not start, 2 usage.\n",
            DEFAULT_LISTEN);
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {
        {"server", required_argument, 0, 's'},  {"token", required_argument, 0, 't'},
        {"listen", required_argument, 0, 'l'},  {"name", required_argument, 0, 'n'},
        {"threads", required_argument, 0, 'T'}, {"log-level", required_argument, 0, 'L'},
        {"first-wait", required_argument, 0, 'w'}, {"poll-seconds", required_argument, 0, 'P'},
        {"tls-cert", required_argument, 0, 'C'}, {"tls-key", required_argument, 0, 'K'},
        {"ca-file", required_argument, 0, 'A'}, {"tls-poll-seconds", required_argument, 0, 'I'},
        {"auth-fail-limit", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->server = getenv("DROVER_SERVER");
    o->token = getenv("DROVER_GATEWAY_TOKEN");
    o->listen = DEFAULT_LISTEN;
    o->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    o->log_level = DRV_LOG_INFO;
    o->first_wait_s = 30;
    o->poll_s = DRV_GW_ROUTES_HOLD_S;
    o->fail_rate = DRV_RL_RATE;
    o->fail_burst = (int)DRV_RL_BURST;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        char *end;
        long v;
        switch (c) {
        case 's': o->server = optarg; break;
        case 't': o->token = optarg; break;
        case 'l': o->listen = optarg; break;
        case 'n': o->name = optarg; break;
        case 'C': o->tls_cert = optarg; break;
        case 'K': o->tls_key = optarg; break;
        case 'A': o->ca_file = optarg; break;
        case 'I':
            v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > 3600) {
                fprintf(stderr, "drover-gateway: --tls-poll-seconds must be 1..3600 seconds\n");
                return 2;
            }
            o->tls_poll_s = (int)v;
            break;
        case 'R':
            if (drv_ratelimit_parse(optarg, &o->fail_rate, &o->fail_burst) < 0) {
                fprintf(stderr, "drover-gateway: --auth-fail-limit takes RATE/BURST (failures a "
                        "second, at once; e.g. 10/20) or off, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'T':
        case 'w':
        case 'P': {
            const char *flag = c == 'T' ? "threads" : c == 'w' ? "first-wait" : "poll-seconds";
            int max = c == 'T' ? 256 : c == 'w' ? 3600 : DRV_GW_ROUTES_HOLD_S;
            v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > max) {
                fprintf(stderr, "drover-gateway: --%s must be a number from 1 to %d\n", flag,
                        max);
                return 2;
            }
            *(c == 'T' ? &o->threads : c == 'w' ? &o->first_wait_s : &o->poll_s) = (int)v;
            break;
        }
        case 'L':
            if ((o->log_level = drv_log_level_of(optarg)) < 0) {
                fprintf(stderr, "drover-gateway: --log-level must be debug, info, warn or error\n");
                return 2;
            }
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "drover-gateway: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!o->server || !*o->server || !o->token || !*o->token) {
        fprintf(stderr, "drover-gateway: --server and --token are required (or "
                        "$DROVER_SERVER and $DROVER_GATEWAY_TOKEN)\n");
        return 2;
    }
    if (!o->tls_cert != !o->tls_key || (o->tls_poll_s && !o->tls_cert)) {
        fprintf(stderr, "drover-gateway: give --tls-cert and --tls-key together "
                        "(--tls-poll-seconds goes with them)\n");
        return 2;
    }
    drv_error_t err;
    if (drv_listen_check(o->listen, &err) < 0) {
        fprintf(stderr, "drover-gateway: %s\n", err.message);
        return 2;
    }
    if (o->name && !drv_id_valid(o->name)) {
        fprintf(stderr, "drover-gateway: --name must be lowercase letters, digits and '-' "
                        "(up to 63)\n");
        return 2;
    }
    return 0;
}

/* gw-HOST-PORT, lowercased, other characters as '-'. */
static void default_name(char *out, size_t n, int port)
{
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    host[40] = '\0';
    for (char *p = host; *p; p++) {
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
        else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
            *p = '-';
    }
    snprintf(out, n, "gw-%s-%d", host, port);
    if (!drv_id_valid(out))
        snprintf(out, n, "gw-%d", port);
}

static json_t *follow_health(void *f)
{
    return drv_gw_follow_health(f);
}

/* --tls-cert/--tls-key changed (or SIGHUP): read them again and serve them
 * to new connections; on a failure (a half-written pair) the old stays and
 * the next change or SIGHUP tries again. */
static void reload_cert(drv_gw_serve_t *sv, const opts_t *o, char **cert, char **key)
{
    drv_error_t err;
    char *c = drv_pem_read_file(o->tls_cert, &err), *k = c ? drv_pem_read_file(o->tls_key, &err)
                                                           : NULL;
    if (!c || !k || drv_gw_serve_set_cert(sv, c, k, &err) < 0) {
        drv_warn("TLS: cannot serve %s and %s: %s (the certificate served stays)", o->tls_cert,
                 o->tls_key, err.message);
        free(c);
        free(k);
        return;
    }
    drv_info("TLS: read %s and %s again: new connections get them", o->tls_cert, o->tls_key);
    free(*cert);
    free(*key);
    *cert = c;
    *key = k;
}

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    drv_log_init("drover-gateway", o.log_level);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    drv_error_t err;
    drv_gateway_t *g = NULL;
    drv_gw_follow_t *f = NULL;
    drv_gw_serve_t *sv = NULL;
    rc = 1;
    drv_gw_hooks_t hooks = {NULL, NULL};   /* the kick goes to the follower, made next */
    const char *colon = strrchr(o.listen, ':');
    char name[64];
    if (o.name)
        snprintf(name, sizeof name, "%s", o.name);
    else
        default_name(name, sizeof name, colon ? atoi(colon + 1) : 0);
    char *cert = NULL, *key = NULL;
    if (o.tls_cert && (!(cert = drv_pem_read_file(o.tls_cert, &err)) ||
                       !(key = drv_pem_read_file(o.tls_key, &err)))) {
        drv_error("%s", err.message);
        goto out;
    }
    if (o.ca_file)
        drv_gw_follow_set_ca_file(o.ca_file);
    if (!(g = drv_gateway_new(&hooks, &err)) ||
        !(f = drv_gw_follow_create(g, o.server, o.token, name, o.first_wait_s * 1000,
                                   o.poll_s, &err))) {
        drv_error("%s", err.message);
        goto out;
    }
    drv_gateway_set_kick(g, drv_gw_follow_kick, f);
    drv_gw_front_t front = {drv_gw_follow_creds(f), follow_health, f, o.fail_rate,
                            o.fail_burst, 0};
    if (!(sv = drv_gw_serve_create_tls(g, &front, o.listen, cert, key, &err))) {
        drv_error("%s", err.message);
        goto out;
    }
    drv_info("listening on %s://%.*s:%d as '%s', following %s",
             cert ? "https" : "http", colon ? (int)(colon - o.listen) : 0, o.listen,
             drv_gw_serve_port(sv), name, o.server);
    int sig = 0;
    drv_file_stamp_t cst, kst;   /* --tls-cert/--tls-key as last read */
    if (cert) {
        drv_file_stamp(o.tls_cert, &cst);
        drv_file_stamp(o.tls_key, &kst);
    }
    for (;;) {
        struct timespec poll = {o.tls_poll_s ? o.tls_poll_s : 10, 0};   /* the files' times */
        if (cert)
            sig = sigtimedwait(&sigs, NULL, &poll);
        else
            sigwait(&sigs, &sig);
        if (sig == SIGTERM || sig == SIGINT)
            break;
        if (!cert) {
            drv_info("SIGHUP ignored (nothing to reload)");
            continue;
        }
        drv_file_stamp_t c2, k2;
        bool changed = drv_file_stamp_changed(o.tls_cert, &cst, &c2);
        changed = drv_file_stamp_changed(o.tls_key, &kst, &k2) || changed;
        if (sig != SIGHUP && !changed)
            continue;
        reload_cert(sv, &o, &cert, &key);   /* a failure keeps the served one */
        cst = c2;
        kst = k2;
    }
    drv_info("%s received, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    rc = 0;
out:
    drv_gateway_stop(g);   /* answers what it holds (503) */
    drv_gateway_join(g);   /* the loop ends: the server's connections close */
    drv_gw_follow_destroy(f);
    drv_gw_serve_destroy(sv);
    drv_gateway_destroy(g);
    free(cert);
    free(key);
    return rc;
}
