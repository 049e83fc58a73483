/* trust.c — see trust.h. */
#define _GNU_SOURCE
#include "agent/trust.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/http_client.h"
#include "common/log.h"
#include "common/pin.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *b = calloc(1, 65537);
    size_t n = b ? fread(b, 1, 65536, f) : 0;
    fclose(f);
    if (b)
        b[n] = '\0';
    return b;
}

/* the CA at base/v1/tls/ca, accepted only when its pin is want */
static char *fetch_pinned(const char *base, const char *want, drv_error_t *err)
{
    drv_hc_t *c = drv_hc_create(base, err);
    if (!c)
        return NULL;
    drv_hc_req_t rq = {.method = "GET", .path = "/v1/tls/ca", .timeout_ms = 10000,
                       .connect_timeout_ms = 5000, .unverified = true};
    drv_hc_resp_t resp = {0};
    char *pem = NULL, got[80];
    if (drv_hc_request(c, &rq, &resp, err) < 0) {
        drv_err(err, 0, "unavailable", "", "cannot fetch the head's CA from %s/v1/tls/ca: %s",
                base, err->message);
    } else if (resp.status != 200) {
        drv_err(err, 0, "no_ca", "", "%s/v1/tls/ca answered %ld: the head serves no CA "
                "to pin (is it started with --tls?)", base, resp.status);
    } else if (drv_pin_of_pem(resp.body, got, sizeof got, err) < 0) {
        drv_err(err, 0, "untrusted", "", "%s/v1/tls/ca: %s", base, err->message);
    } else if (strcmp(got, want) != 0) {
        drv_err(err, 0, "untrusted", "",
                "the head at %s presents a CA whose key hash is %s, not the pinned %s: "
                "refusing to send the join token or any credential (a man in the middle, or "
                "the wrong --ca-hash)", base, got, want);
    } else {
        pem = resp.body;
        resp.body = NULL;
    }
    drv_hc_resp_free(&resp);
    drv_hc_destroy(c);
    return pem;
}

static void save_ca(const char *data_dir, const char *pem)
{
    char path[700], tmp[720];
    snprintf(path, sizeof path, "%s/ca.crt", data_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    size_t n = strlen(pem);
    bool ok = write(fd, pem, n) == (ssize_t)n && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) < 0)
        unlink(tmp);
}

int drv_agent_trust_setup(const drv_agent_trust_t *t, const char (*servers)[512], size_t n,
                          const char *data_dir, drv_error_t *err)
{
    char want[80] = "";
    if (t->ca_hash && drv_pin_parse(t->ca_hash, want, sizeof want, err) < 0)
        return -1;
    if (t->ca_hash && t->ca_file)
        return drv_err_invalid(err, "ca-file", "give --ca-file or --ca-hash, not both");
    const char *https = NULL;
    for (size_t i = 0; i < n; i++) {
        bool plain = strncasecmp(servers[i], "http://", 7) == 0;
        if (plain && !t->insecure && !drv_url_is_loopback(servers[i]))
            return drv_err_invalid(err, "server",
                                   "refusing plain http:// to %s, which is not on loopback: the "
                                   "join token and the node credential would cross the network "
                                   "in clear text. Use https:// with --ca-hash (from `drover "
                                   "nodepool join-token`), or pass --insecure", servers[i]);
        if (!plain && !https)
            https = servers[i];
    }
    if (t->origin_ca_file) {
        char *opem = slurp(t->origin_ca_file), pin[80];
        if (!opem)
            return drv_err_invalid(err, "origin-ca-file", "cannot read %s: %s",
                                   t->origin_ca_file, strerror(errno));
        int orc = drv_pin_of_pem(opem, pin, sizeof pin, err);
        if (orc < 0)
            drv_err_invalid(err, "origin-ca-file", "%s: %s", t->origin_ca_file, err->message);
        else
            orc = drv_hc_tls_set_origin_ca(opem, err);
        free(opem);
        if (orc < 0)
            return -1;
    }
    if ((t->ca_hash || t->ca_file) && !https)
        return drv_err_invalid(err, "server", "--ca-hash/--ca-file need an https:// --server");
    char *pem = NULL;
    if (t->ca_file) {
        if (!(pem = slurp(t->ca_file)))
            return drv_err_invalid(err, "ca-file", "cannot read %s: %s", t->ca_file,
                                   strerror(errno));
        char pin[80];
        if (drv_pin_of_pem(pem, pin, sizeof pin, err) < 0) {
            free(pem);
            return drv_err_invalid(err, "ca-file", "%s: %s", t->ca_file, err->message);
        }
    } else if (t->ca_hash) {
        char path[700], pin[80];
        snprintf(path, sizeof path, "%s/ca.crt", data_dir);
        pem = slurp(path);   /* a CA pinned at an earlier start */
        if (pem && (drv_pin_of_pem(pem, pin, sizeof pin, NULL) < 0 || strcmp(pin, want) != 0)) {
            free(pem);
            pem = NULL;
        }
        /* a head not up yet (a cloud node boots before it can reach the
         * head): try each https:// head, again and again, until one answers
         * or SIGTERM/SIGINT (blocked on this thread: waited for here) */
        for (int attempt = 0; !pem; attempt++) {
            for (size_t i = 0; i < n && !pem; i++) {
                if (strncasecmp(servers[i], "https://", 8) != 0)
                    continue;
                if ((pem = fetch_pinned(servers[i], want, err)))
                    break;
                if (strcmp(err->code, "unavailable") != 0)
                    return -1;   /* the wrong CA, or none: retrying cannot help */
                drv_warn("%s; retrying", err->message);
            }
            if (pem)
                break;
            sigset_t sigs;
            sigemptyset(&sigs);
            sigaddset(&sigs, SIGTERM);
            sigaddset(&sigs, SIGINT);
            struct timespec ts = {.tv_sec = attempt < 5 ? 1 : 3};
            if (sigtimedwait(&sigs, NULL, &ts) > 0)
                return 1;
        }
        save_ca(data_dir, pem);
    }
    int rc = pem ? drv_hc_tls_set_ca(pem, err) : 0;
    free(pem);
    return rc;
}
