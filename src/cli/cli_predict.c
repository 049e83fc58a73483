/* cli_predict.c — `drover predict DEPLOYMENT (--json '{...}' | --file F | --file -)`:
 * POST /v1/deployments/D/predict through the head's gateway and print the
 * answer as it arrives (a streamed answer streams to the terminal).
 *
 * A 2xx body goes to stdout byte for byte (on a terminal, followed by a
 * newline when it does not end with one); any other answer prints
 * "error: message" on stderr and exits 1. On a terminal (or with
 * --progress), a request that gets no answer within a second (a cold
 * start) shows where the deployment's start is on stderr: a thread polls
 * its replicas every second and prints drv_cli_cold_line's line (in place
 * on a terminal, one line per change otherwise) until the answer's headers
 * arrive; in a pipe without --progress it stays quiet. Uses a client of
 * its own (drv_httpc_dup) and a streamed answer (drv_httpc_send):
 * drv_httpc_request buffers whole answers, which a stream must not wait
 * for. Several heads (--server URL1,URL2,...): a head that refuses the
 * connection or stands by (503 not_leader) is moved on from as by
 * drv_httpc (drv_httpc_move_on); nothing that reached a leader is resent.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"

#define PROGRESS_POLL_MS 1000

#define PREDICT_MAX_BODY (1024 * 1024)

/* The progress thread: polls the replicas, prints the cold start's line. */
typedef struct prog {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;           /* the answer's headers are in (or it failed) */
    bool tty;            /* in place (\r); else one line per change */
    bool shown;          /* a line is on the terminal (to clear) */
    char last[512];
    drv_cli_t *cli;
    const char *dep;
    int64_t t0;
} prog_t;

typedef struct sink {
    long status;         /* known once the headers are in */
    bool ok;
    char *err;           /* non-2xx body (bounded) */
    size_t err_len;
    char last;           /* the last byte of the answer written, 0: none */
    prog_t *prog;        /* NULL: quiet */
} sink_t;

/* Stop the progress line: cleared on a terminal; nothing is printed after. */
static void prog_stop(prog_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    if (!p->stop && p->tty && p->shown)
        fputs("\r\033[K", stderr);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void *prog_main(void *ud)
{
    prog_t *p = ud;
    char path[600];
    if (drv_cli_pathf(path, sizeof path, "/v1/deployments/%s/replicas", p->dep) < 0)
        return NULL;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += PROGRESS_POLL_MS / 1000;
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &ts) == 0)
            ;
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return NULL;
        drv_error_t err = {0};
        json_t *reps = drv_cli_list(p->cli, path, &err);
        char line[512];
        if (reps)
            drv_cli_cold_line(reps, line, sizeof line);
        else
            snprintf(line, sizeof line, "waiting (cannot read the replicas: %s)", err.message);
        json_decref(reps);
        pthread_mutex_lock(&p->mu);
        if (!p->stop) {
            long secs = (long)((drv_mono_ms() - p->t0) / 1000);
            if (p->tty) {   /* one line: cut to the terminal's width, so \r can redo it */
                char shown[600];
                snprintf(shown, sizeof shown, "drover: [%lds] %s", secs, line);
                struct winsize ws;
                if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && ws.ws_col < sizeof shown)
                    shown[ws.ws_col - 1] = '\0';
                fprintf(stderr, "\r\033[K%s", shown);
                p->shown = true;
            } else if (strcmp(line, p->last) != 0) {
                fprintf(stderr, "drover: [%lds] %s\n", secs, line);
            }
            fflush(stderr);
            snprintf(p->last, sizeof p->last, "%s", line);
        }
        pthread_mutex_unlock(&p->mu);
    }
}

/* The answer's bytes: a 2xx to stdout as they come, else kept (bounded). */
static int on_body(void *ud, const char *p, size_t len)
{
    sink_t *s = ud;
    prog_stop(s->prog);   /* (already, at the headers) */
    if (s->ok) {
        fwrite(p, 1, len, stdout);
        fflush(stdout);
        if (len)
            s->last = p[len - 1];
        return 0;
    }
    if (s->err_len < 65536) {
        size_t take = len < 65536 - s->err_len ? len : 65536 - s->err_len;
        char *nb = realloc(s->err, s->err_len + take + 1);
        if (!nb)
            return -1;
        memcpy(nb + s->err_len, p, take);
        s->err = nb;
        s->err_len += take;
        s->err[s->err_len] = '\0';
    }
    return 0;
}

/* The final status line is in: the progress line goes. */
static int on_head(void *ud, int status, const drv_h1_header_t *h, size_t nh)
{
    sink_t *s = ud;
    (void)h, (void)nh;
    s->status = status;
    s->ok = status >= 200 && status < 300;
    prog_stop(s->prog);
    return 0;
}

static char *read_input(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(PREDICT_MAX_BODY + 2);
    size_t n = buf ? fread(buf, 1, PREDICT_MAX_BODY + 1, f) : 0;
    if (f != stdin)
        fclose(f);
    if (!buf)
        return NULL;
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int run_predict(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const char *dep;
    int prc = drv_cli_one_object(a, "deployment", &dep);
    if (prc)
        return prc;
    const char *js = drv_cli_opt(a, "json"), *file = drv_cli_opt(a, "file");
    if (!!js + !!file != 1)
        return drv_cli_usage(a, "give the request body with exactly one of --json or --file");
    long long timeout = 0;
    if (drv_cli_opt_long(a, "timeout", 1, 3600, &timeout) < 0)
        return DRV_CLI_USAGE;
    char *body;
    size_t len;
    if (js) {
        body = strdup(js);
        len = strlen(js);
    } else {
        body = read_input(file, &len);
        if (!body) {
            fprintf(stderr, "error: cannot read %s\n", file);
            return DRV_CLI_FAIL;
        }
        if (len > PREDICT_MAX_BODY) {
            free(body);
            fprintf(stderr, "error: %s is larger than 1 MiB (the gateway's limit)\n", file);
            return DRV_CLI_FAIL;
        }
    }
    json_error_t jerr;
    json_t *check = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(check)) {
        json_decref(check);
        free(body);
        return drv_cli_usage(a, "the request body must be one JSON object (%s)",
                             jerr.text[0] ? jerr.text : "not an object");
    }
    json_decref(check);

    drv_error_t err = {0};
    if (drv_cli_connect(cli, &err) < 0) {
        free(body);
        return drv_cli_fail(cli, &err);
    }
    char path[600];
    if (drv_cli_pathf(path, sizeof path, "/v1/deployments/%s/predict", dep) < 0) {
        free(body);
        return drv_cli_usage(a, "deployment name too long");
    }
    /* a client of its own to the heads (the progress thread uses cli->http),
     * moving on as the other commands do */
    drv_httpc_t *route = drv_httpc_dup(cli->http, false, &err);
    if (!route) {
        free(body);
        return drv_cli_fail(cli, &err);
    }
    char tmo[64];
    const char *hdrs[2] = {NULL, NULL};
    if (timeout) {
        snprintf(tmo, sizeof tmo, "X-Drover-Timeout: %lld", timeout);
        hdrs[0] = tmo;
    }
    bool tty = isatty(2), show = tty || drv_cli_flag(a, "progress");
    prog_t prog = {.tty = tty, .cli = cli, .dep = dep, .t0 = drv_mono_ms()};
    pthread_t prog_th;
    sink_t s = {.prog = show ? &prog : NULL};
    if (show) {
        pthread_mutex_init(&prog.mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_cond_init(&prog.cv, &ca);
        pthread_condattr_destroy(&ca);
        if (pthread_create(&prog_th, NULL, prog_main, &prog) != 0)
            s.prog = NULL;
    }
    drv_hc_req_t rq = {.method = "POST", .path = path, .content_type = "application/json",
                       .body = body, .body_len = len, .headers = hdrs,
                       /* without --timeout none (the server's bound applies) */
                       .timeout_ms = timeout ? (timeout + 5) * 1000 : DRV_HC_NO_TIMEOUT_MS,
                       .on_head = on_head, .on_body = on_body, .ud = &s};
    int rc;
    drv_httpc_failover_t fo = {0};
    for (;;) {   /* again only where nothing was executed: refused, or a standby's 503 */
        drv_hc_resp_t hr;
        rc = drv_httpc_send(route, &rq, &hr, &err);
        bool refused = rc < 0 && hr.refused;
        if (rc < 0)
            err.status = 503;
        drv_http_resp_t r = {.status = s.status, .body = s.err, .len = s.err_len};
        if (s.ok || (rc < 0 && !refused) || (!refused && !s.err) ||
            !drv_httpc_move_on(route, &fo, refused, &r, &err))
            break;
        free(s.err);
        s.err = NULL;
        s.err_len = 0;
        s.status = 0;
    }
    if (s.prog) {
        prog_stop(&prog);
        pthread_join(prog_th, NULL);
    }
    if (show) {
        pthread_cond_destroy(&prog.cv);
        pthread_mutex_destroy(&prog.mu);
    }
    free(body);
    int ret = DRV_CLI_OK;
    /* on a terminal the prompt must not run into an answer without a final
     * newline; a pipe gets the answer byte for byte */
    if (s.ok && s.last && s.last != '\n' && isatty(1))
        fputc('\n', stdout);
    if (rc < 0) {
        ret = drv_cli_fail(cli, &err);   /* (filled in the loop) */
    } else if (!s.ok) {
        json_t *j = s.err ? json_loads(s.err, 0, NULL) : NULL;
        const json_t *e = json_object_get(j, "error");
        drv_err(&err, (int)s.status, "", "", "%s",
                json_string_value(json_object_get(e, "message"))
                    ? json_string_value(json_object_get(e, "message"))
                    : (s.err ? s.err : "no answer"));
        const char *field = json_string_value(json_object_get(e, "field"));
        if (field)
            snprintf(err.field, sizeof err.field, "%s", field);
        json_decref(j);
        ret = drv_cli_fail(cli, &err);
    }
    free(s.err);
    drv_httpc_destroy(route);
    return ret;
}

static const drv_cli_opt_t predict_opts[] = {
    {"json", 0, "JSON", "the request body, inline"},
    {"file", 'f', "FILE", "read the request body from FILE ('-': standard input)"},
    {"timeout", 0, "SECONDS", "bound the request (X-Drover-Timeout; default: the server's)"},
    {"progress", 0, NULL, "show a cold start's progress on stderr even when it is not a terminal"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_predict = {
    .name = "predict",
    .summary = "send a prediction to a deployment and print the answer",
    .usage = "predict DEPLOYMENT (--json '{...}' | --file FILE | -f -) [--timeout SECONDS] "
             "[--progress]",
    .help = "POSTs the body to the deployment through droverd's inference gateway\n"
            "(POST /v1/deployments/DEPLOYMENT/predict) and prints the replica's answer as it\n"
            "arrives: a streamed answer streams. A deployment with no ready replica holds the\n"
            "request until one is ready (cold start); while it waits, stderr shows where the\n"
            "start is, polled every second: waiting for a node, fetching the model (MiB of\n"
            "MiB, rate, ETA), starting. On a terminal only, unless --progress (then one line\n"
            "per change). Exit 1 with the error when the answer\n"
            "is not a success. The answer is printed as it came; on a terminal a newline\n"
            "follows when it does not end with one. DEPLOYMENT may also be given as\n"
            "deployment/DEPLOYMENT or deployment DEPLOYMENT.\n"
            "\nExamples:\n"
            "  drover predict demo --json '{\"inputs\":\"hello\"}'\n"
            "  drover predict demo --file request.json\n"
            "  echo '{\"inputs\":[\"a\",\"b\"]}' | drover predict demo -f -\n",
    .opts = predict_opts,
    .min_pos = 1,
    .max_pos = 2,
    .run = run_predict,
};
