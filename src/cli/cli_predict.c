/* cli_predict.c — `drover predict DEPLOYMENT (--json '{...}' | --file F | --file -)`:
 * POST /v1/deployments/D/predict through the head's gateway and print the
 * answer as it arrives (a streamed answer streams to the terminal).
 *
 * A 2xx body goes to stdout byte for byte (on a terminal, followed by a
 * newline when it does not end with one); any other answer prints
 * "error: message" on stderr and exits 1. On a terminal, a request that
 * gets no answer for a few seconds (a cold start) says so on stderr; in a
 * pipe it stays quiet. Uses its own libcurl handle: drv_httpc buffers whole
 * answers, which a stream must not wait for.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"

#define PREDICT_MAX_BODY (1024 * 1024)

typedef struct sink {
    long status;         /* known once the headers are in */
    bool ok;
    char *err;           /* non-2xx body (bounded) */
    size_t err_len;
    bool tty;            /* stderr is a terminal: say when waiting */
    bool said_waiting;
    char last;           /* the last byte of the answer written, 0: none */
    const char *dep;
    int64_t t0;
} sink_t;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    sink_t *s = ud;
    size_t len = size * n;
    if (s->ok) {
        fwrite(p, 1, len, stdout);
        fflush(stdout);
        if (len)
            s->last = p[len - 1];
        return len;
    }
    if (s->err_len < 65536) {
        size_t take = len < 65536 - s->err_len ? len : 65536 - s->err_len;
        char *nb = realloc(s->err, s->err_len + take + 1);
        if (!nb)
            return 0;
        memcpy(nb + s->err_len, p, take);
        s->err = nb;
        s->err_len += take;
        s->err[s->err_len] = '\0';
    }
    return len;
}

static size_t on_header(char *b, size_t size, size_t n, void *ud)
{
    sink_t *s = ud;
    size_t len = size * n;
    if (len >= 5 && memcmp(b, "HTTP/", 5) == 0) {
        const char *sp = memchr(b, ' ', len);
        s->status = sp ? atol(sp + 1) : 0;
        s->ok = s->status >= 200 && s->status < 300;
    }
    return len;
}

/* On a terminal: say so when no answer came for a while (a cold start). */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    sink_t *s = ud;
    (void)dt, (void)dn, (void)ut, (void)un;
    if (s->tty && !s->said_waiting && s->status == 0 && drv_mono_ms() - s->t0 > 2000) {
        fprintf(stderr, "drover: waiting for a ready replica of '%s' (starting?)...\n", s->dep);
        s->said_waiting = true;
    }
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

    drv_error_t err;
    if (drv_cli_connect(cli, &err) < 0) {
        free(body);
        return drv_cli_fail(cli, &err);
    }
    char path[600], url[2048];
    if (drv_cli_pathf(path, sizeof path, "/v1/deployments/%s/predict", dep) < 0) {
        free(body);
        return drv_cli_usage(a, "deployment name too long");
    }
    snprintf(url, sizeof url, "%s%s", cli->server, path);
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    char line[1200];
    if (!cli->token_missing) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", cli->token);
        h = curl_slist_append(h, line);
    }
    if (timeout) {
        snprintf(line, sizeof line, "X-Drover-Timeout: %lld", timeout);
        h = curl_slist_append(h, line);
    }
    sink_t s = {.tty = isatty(2), .dep = dep, .t0 = drv_mono_ms()};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (cli->ca_file[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, cli->ca_file);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (timeout)
        curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)timeout + 5);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(body);
    int ret = DRV_CLI_OK;
    /* on a terminal the prompt must not run into an answer without a final
     * newline; a pipe gets the answer byte for byte */
    if (s.ok && s.last && s.last != '\n' && isatty(1))
        fputc('\n', stdout);
    if (rc != CURLE_OK && !(s.ok && rc == CURLE_WRITE_ERROR)) {
        drv_err(&err, 503, "unavailable", "", "cannot reach droverd at %s: %s", cli->server,
                curl_easy_strerror(rc));
        ret = drv_cli_fail(cli, &err);
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
    return ret;
}

static const drv_cli_opt_t predict_opts[] = {
    {"json", 0, "JSON", "the request body, inline"},
    {"file", 'f', "FILE", "read the request body from FILE ('-': standard input)"},
    {"timeout", 0, "SECONDS", "bound the request (X-Drover-Timeout; default: the server's)"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_predict = {
    .name = "predict",
    .summary = "send a prediction to a deployment and print the answer",
    .usage = "predict DEPLOYMENT (--json '{...}' | --file FILE | -f -) [--timeout SECONDS]",
    .help = "POSTs the body to the deployment through droverd's inference gateway\n"
            "(POST /v1/deployments/DEPLOYMENT/predict) and prints the replica's answer as it\n"
            "arrives: a streamed answer streams. A deployment with no ready replica holds the\n"
            "request until one is ready (cold start). Exit 1 with the error when the answer\n"
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
