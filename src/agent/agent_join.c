/* agent_join.c — drover-agent's files in its data dir, its HTTP calls to the
 * head (several heads: moving on to the next or the leader) and joining a
 * nodepool (join token -> node credential). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "common/buildinfo.h"
#include "common/log.h"
#include "common/util.h"

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

int drv_agent__write_file_0600(const char *path, const char *text)
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
long drv_agent__post(agent_t *ag, const char *path, const char *secret, json_t *body, long timeout_ms,
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
void drv_agent__save_node_id(const agent_t *ag)
{
    char path[700];
    snprintf(path, sizeof path, "%s/node_id", ag->data_dir);
    if (ag->node_id[0] && drv_agent__write_file_0600(path, ag->node_id) < 0)
        drv_warn("cannot write %s: %s", path, strerror(errno));
}

int drv_agent__join(agent_t *ag)
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
        long st = drv_agent__post(ag, "/v1/agent/register", ag->join_token, body, 10000, &resp, msg,
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
            if (drv_agent__write_file_0600(path, cred) < 0) {
                drv_error("cannot save the node credential to %s: %s", path, strerror(errno));
                json_decref(resp);
                break;
            }
            drv_agent__save_node_id(ag);
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
