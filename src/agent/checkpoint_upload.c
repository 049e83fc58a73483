/* checkpoint_upload.c — one checkpoint's upload (checkpoint.h): its
 * manifest, the chunks the head lacks (PUT, bounded by upload_mib_s), and
 * the commit last. Runs on the checkpoint thread only. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/checkpoint_int.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/util.h"

int drv_ckpt_call(drv_ckpt_t *c, const char *method, const char *path, const char *body,
                  json_t **out, drv_error_t *err)
{
    if (out)
        *out = NULL;
    drv_hc_req_t rq = {.method = method, .path = path, .bearer = c->credential,
                       .content_type = body ? "application/json" : NULL, .body = body,
                       .body_len = body ? strlen(body) : 0, .timeout_ms = 120000,
                       .connect_timeout_ms = 5000, .stop = &c->stop};
    drv_hc_resp_t resp = {0};
    if (drv_hc_request(c->hc, &rq, &resp, err) < 0)
        return -1;
    json_t *j = resp.len ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
    if (resp.status < 200 || resp.status > 299) {
        const char *msg = json_string_value(json_object_get(json_object_get(j, "error"),
                                                            "message"));
        drv_err(err, (int)resp.status, "head", "", "%s %s: HTTP %ld: %.300s", method, path,
                resp.status, msg ? msg : (resp.body ? resp.body : ""));
        json_decref(j);
        drv_hc_resp_free(&resp);
        return -1;
    }
    drv_hc_resp_free(&resp);
    if (out)
        *out = j;
    else
        json_decref(j);
    return 0;
}

/* PUT one chunk of body */
static int put_chunk(drv_ckpt_t *c, const char *up, const char *hex, size_t idx, const char *buf,
                     size_t len, drv_error_t *err)
{
    char path[400];
    snprintf(path, sizeof path, "/v1/agent/checkpoints/uploads/%s/blobs/%s/chunks/%zu", up, hex,
             idx);
    drv_hc_req_t rq = {.method = "PUT", .path = path, .bearer = c->credential,
                       .content_type = "application/octet-stream", .body = buf, .body_len = len,
                       .timeout_ms = 300000, .connect_timeout_ms = 5000, .stop = &c->stop};
    drv_hc_resp_t resp = {0};
    if (drv_hc_request(c->hc, &rq, &resp, err) < 0)
        return -1;
    int rc = 0;
    if (resp.status != 204 && resp.status != 200)
        rc = drv_err(err, (int)resp.status, "head", "", "chunk %zu of %s: HTTP %ld: %.300s", idx,
                     hex, resp.status, resp.body ? resp.body : "");
    drv_hc_resp_free(&resp);
    return rc;
}

/* Sleep until sent bytes fit the bandwidth bound since t0 (monotonic ms). */
static void throttle(drv_ckpt_t *c, int64_t t0, uint64_t sent)
{
    if (c->upload_bps <= 0)
        return;
    int64_t due = t0 + (int64_t)((double)sent * 1000.0 / c->upload_bps);
    while (!drv_ckpt_quitting(c)) {
        int64_t now = drv_mono_ms();
        if (now >= due)
            return;
        int64_t d = due - now < 100 ? due - now : 100;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = d * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int drv_ckpt_upload(drv_ckpt_t *c, const char *scope, const char *dir, const char *name,
                    int keep, json_t **pruned, bool *refuse, char *why, size_t wl)
{
    char path[2048];
    drv_error_t err = {0};
    drv_manifest_t *m = NULL;
    json_t *doc = NULL, *res = NULL;
    char *mj = NULL, *body = NULL, *buf = NULL;
    int rc = -1, fd = -1;
    uint64_t sent = 0;
    *pruned = NULL;
    *refuse = false;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (drv_manifest_build(path, c->chunk_size, 2, &m, &err) < 0) {
        m = NULL;
        snprintf(why, wl, "%s", err.message);
        goto out;
    }
    if (m->nfiles == 1 && strcmp(m->files[0].path, DRV_CKPT_MARKER) == 0) {
        snprintf(why, wl, "checkpoint %s has no file besides its %s marker: refused, not "
                 "uploaded", name, DRV_CKPT_MARKER);
        drv_warn("checkpoints: %s: %s", scope, why);
        *refuse = true;
        drv_ckpt_count(c, 0, 1, 0, 0, 0, 0, NULL);
        goto out;
    }
    if (!(mj = drv_manifest_to_json(m)) || asprintf(&body, "{\"manifest\":%s}", mj) < 0) {
        body = NULL;
        snprintf(why, wl, "out of memory");
        goto out;
    }
    int64_t t0 = drv_mono_ms();
    if (drv_ckpt_call(c, "POST", "/v1/agent/checkpoints/uploads", body, &doc, &err) < 0) {
        snprintf(why, wl, "%s", err.message);
        goto out;
    }
    uint64_t missing = (uint64_t)json_integer_value(json_object_get(doc, "missing_bytes"));
    buf = malloc(m->chunk_size ? m->chunk_size : 1);
    if (!buf) {
        snprintf(why, wl, "out of memory");
        goto out;
    }
    size_t k;
    json_t *b;
    json_array_foreach(json_object_get(doc, "missing"), k, b) {
        const char *hex = json_string_value(json_object_get(b, "sha256"));
        const drv_manifest_file_t *f = NULL;
        for (size_t i = 0; hex && i < m->nfiles && !f; i++)
            if (strcmp(m->files[i].sha256, hex) == 0)
                f = &m->files[i];
        if (!f) {
            snprintf(why, wl, "the head asked for blob %.64s, which is not in the manifest",
                     hex ? hex : "?");
            goto out;
        }
        char fp[4096];
        snprintf(fp, sizeof fp, "%s/%s", path, f->path);
        if ((fd = open(fp, O_RDONLY | O_CLOEXEC)) < 0) {
            snprintf(why, wl, "cannot read %s: %s", fp, strerror(errno));
            goto out;
        }
        size_t j;
        json_t *ci;
        json_array_foreach(json_object_get(b, "chunks"), j, ci) {
            size_t idx = (size_t)json_integer_value(ci);
            uint64_t len = drv_manifest_chunk_len(f->size, m->chunk_size, idx);
            uint64_t got = 0;
            while (got < len) {
                ssize_t r = pread(fd, buf + got, len - got,
                                  (off_t)(idx * m->chunk_size + got));
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0) {
                    snprintf(why, wl, "cannot read %s: %s", fp, r < 0 ? strerror(errno)
                                                                     : "it became shorter");
                    goto out;
                }
                got += (uint64_t)r;
            }
            if (put_chunk(c, m->digest, hex, idx, buf, len, &err) < 0) {
                snprintf(why, wl, "%s", err.message);
                goto out;
            }
            sent += len;
            throttle(c, t0, sent);
            if (drv_ckpt_quitting(c)) {
                snprintf(why, wl, "stopping");
                goto out;
            }
        }
        close(fd);
        fd = -1;
    }
    free(body);
    body = NULL;
    json_t *cj = json_pack("{s:s, s:s, s:i}", "name", name, "upload", m->digest, "keep", keep);
    body = cj ? json_dumps(cj, JSON_COMPACT) : NULL;
    json_decref(cj);
    char cpath[300];
    snprintf(cpath, sizeof cpath, "/v1/agent/checkpoints/%s", scope);
    if (!body || drv_ckpt_call(c, "POST", cpath, body, &res, &err) < 0) {
        snprintf(why, wl, "commit: %s", body ? err.message : "out of memory");
        goto out;
    }
    *pruned = json_incref(json_object_get(res, "pruned"));
    if (json_is_string(json_object_get(res, "warning")))   /* several heads */
        drv_warn("checkpoints: %s/%s: %s", scope, name,
                 json_string_value(json_object_get(res, "warning")));
    char last[300];
    snprintf(last, sizeof last, "%s/%s", scope, name);
    drv_ckpt_count(c, 1, 0, 0, sent, m->total_size > missing ? m->total_size - missing : 0, 0,
                   last);
    drv_info("checkpoints: %s/%s committed: %llu bytes in %zu files, %llu sent (the head had "
             "the rest), %lld ms", scope, name, (unsigned long long)m->total_size, m->nfiles,
             (unsigned long long)sent, (long long)(drv_mono_ms() - t0));
    rc = 0;
out:
    if (rc < 0 && !*refuse)
        drv_ckpt_count(c, 0, 0, 1, sent, 0, 0, NULL);
    if (fd >= 0)
        close(fd);
    free(buf);
    free(body);
    free(mj);
    json_decref(doc);
    json_decref(res);
    drv_manifest_free(m);
    return rc;
}
