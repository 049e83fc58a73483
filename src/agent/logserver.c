/* logserver.c — see logserver.h.
 *
 *   GET /logs/{replica}?offset=N    bytes from offset N (N < 0: the last -N)
 *   header X-Drover-Key: <key>      required
 * The answer is text/plain; X-Drover-Next-Offset says where to continue.
 * Threads: libmicrohttpd's internal thread; the supervisor is thread-safe. */
#include "agent/logserver.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define MAX_CHUNK (1 << 20)

struct drv_logserver {
    struct MHD_Daemon *d;
    drv_supervisor_t *sup;
    char url[160];
    char key[65];
};

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    drv_logserver_t *ls = cls;
    if (!*con_cls) {
        *con_cls = (void *)1;
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0)
        return text(c, 405, "GET only\n");
    const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Drover-Key");
    if (!key || strlen(key) != 64 || !drv_ct_equal(key, ls->key, 64))
        return text(c, 401, "bad or missing X-Drover-Key\n");
    if (strncmp(url, "/logs/", 6) != 0 || !url[6] || strchr(url + 6, '/'))
        return text(c, 404, "no such path\n");
    const char *off = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
    long long offset = off ? atoll(off) : -65536;
    if (offset < -MAX_CHUNK)
        offset = -MAX_CHUNK;
    char *buf = malloc(MAX_CHUNK);
    if (!buf)
        return MHD_NO;
    int64_t next = 0;
    drv_error_t err;
    ssize_t n = drv_supervisor_log_read(ls->sup, url + 6, offset, buf, MAX_CHUNK, &next, &err);
    if (n < 0) {
        free(buf);
        char msg[600];
        snprintf(msg, sizeof msg, "%s\n", err.message);
        return text(c, err.status == 404 ? 404 : 500, msg);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer((size_t)n, buf, MHD_RESPMEM_MUST_FREE);
    char nx[32];
    snprintf(nx, sizeof nx, "%lld", (long long)next);
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    MHD_add_response_header(r, "X-Drover-Next-Offset", nx);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

drv_logserver_t *drv_logserver_create(drv_supervisor_t *sup, const char *host, drv_error_t *err)
{
    drv_logserver_t *ls = calloc(1, sizeof *ls);
    if (!ls) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    ls->sup = sup;
    if (drv_random_hex(32, ls->key) < 0) {
        free(ls);
        drv_err_internal(err, "no randomness");
        return NULL;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    ls->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
                             on_request, ls, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    if (!ls->d) {
        free(ls);
        drv_err_internal(err, "cannot start the log endpoint on %s", host);
        return NULL;
    }
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(ls->d, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(ls->url, sizeof ls->url, "http://%s:%d", host, i ? i->port : 0);
    return ls;
}

void drv_logserver_destroy(drv_logserver_t *ls)
{
    if (!ls)
        return;
    MHD_stop_daemon(ls->d);
    free(ls);
}

const char *drv_logserver_url(const drv_logserver_t *ls) { return ls->url; }
const char *drv_logserver_key(const drv_logserver_t *ls) { return ls->key; }
