/* cli_artifact.c — `drover artifact push` (hash a tree into a manifest in
 * parallel, send what the head's store lacks, create the artifact) and the
 * describe view of an artifact.
 *
 * push is resumable because the head is: the upload's id is the manifest's
 * digest and its answer lists only the chunks it has not got, so a second
 * run after an interruption sends only those. Chunks go over several
 * connections at once (--parallel), each streamed from the file (pread in
 * the client's read_body: nothing is buffered whole) on a connection the
 * worker keeps alive (common/http_client.h). Progress (bytes, rate)
 * is printed on stderr only when it is a terminal.
 *
 * Several heads (--server URL1,URL2,...): the JSON calls move on as every
 * command's do (drv_httpc); the chunks go to the head the upload was asked
 * of, and when it goes away or stands by the upload is asked for again.
 *
 * Threads: main() plus the push's workers, each with its own clients (to
 * the head: a drv_httpc_dup of the command's; to a store); they share the
 * job list and counters below, guarded by a mutex/atomics.
 */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/manifest.h"

#define MOVES_MAX 3   /* uploads asked for again after a head went away */
#define STORE_CONNECT_TIMEOUT_MS 10000

typedef struct job {
    const char *file;          /* relative path in the tree */
    const char *hex;
    size_t idx;
    uint64_t off, len;
    const char *url;           /* a presigned part URL (--store), NULL: the head's chunk URL */
    char etag[128];            /* what the store answered for that part */
} job_t;

typedef struct push {
    const char *root;
    const char *server, *digest;
    const drv_httpc_t *head;   /* the command's client, at the head the chunks go to
                                * (the workers dup it; no one changes it meanwhile) */
    job_t *jobs;
    size_t njobs, next;
    pthread_mutex_t mu;
    char error[700];           /* the first failure; "" = none */
    atomic_bool moved;         /* the head went away or stands by: ask the leader again */
    atomic_uint_fast64_t sent;
    atomic_int running;
} push_t;

/* One chunk's or part's transfer, for the client's callbacks. */
typedef struct xfer {
    push_t *p;
    job_t *j;
    int fd;
    char buf[4096];            /* the answer's body (bounded) */
    size_t len;
} xfer_t;

/* A worker's clients, made at its first chunk or part. */
typedef struct worker {
    drv_httpc_t *head;
    drv_hc_t *store;
    char store_base[512];      /* the store's origin store is for */
} worker_t;

static long read_body(void *ud, uint64_t off, char *out, size_t n)
{
    xfer_t *x = ud;
    ssize_t got = pread(x->fd, out, n, (off_t)(x->j->off + off));
    if (got <= 0)
        return -1;
    atomic_fetch_add(&x->p->sent, (uint64_t)got);
    return (long)got;
}

static int on_head(void *ud, int status, const drv_h1_header_t *h, size_t nh)
{
    xfer_t *x = ud;
    const char *v = drv_h1_header(h, nh, "ETag");
    (void)status;
    if (v) {
        size_t vl = strlen(v);
        while (vl && (*v == ' ' || *v == '"'))
            v++, vl--;
        while (vl && (v[vl - 1] == '"' || v[vl - 1] == ' '))
            vl--;
        snprintf(x->j->etag, sizeof x->j->etag, "%.*s", (int)vl, v);
    }
    return 0;
}

static int on_body(void *ud, const char *data, size_t len)
{
    xfer_t *x = ud;
    size_t room = sizeof x->buf - 1 - x->len;
    memcpy(x->buf + x->len, data, len < room ? len : room);
    x->len += len < room ? len : room;
    x->buf[x->len] = '\0';
    return 0;
}

static void set_error(push_t *p, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&p->mu);
    if (!p->error[0])
        snprintf(p->error, sizeof p->error, fmt, a, b);
    pthread_mutex_unlock(&p->mu);
}

/* A part's PUT to a store's presigned URL (its own authorization: no token,
 * the system's CAs) on w's connection to that store. */
static int put_store(worker_t *w, const drv_hc_req_t *rq_in, drv_hc_resp_t *resp,
                     drv_error_t *err)
{
    char base[512];
    const char *path;
    if (drv_hc_split_url(rq_in->path, base, sizeof base, &path) < 0)
        return drv_err_invalid(err, "url", "the head's part URL is not an http(s) URL");
    if (!w->store || strcmp(base, w->store_base) != 0) {
        drv_hc_destroy(w->store);
        if (!(w->store = drv_hc_create(base, err)))
            return -1;
        snprintf(w->store_base, sizeof w->store_base, "%s", base);
        drv_hc_set_opts(w->store, &(drv_hc_opts_t){.keep_alive = true,
                                                    .user_agent = "drover-cli"});
    }
    drv_hc_req_t rq = *rq_in;
    rq.path = path;
    rq.connect_timeout_ms = STORE_CONNECT_TIMEOUT_MS;
    return drv_hc_request(w->store, &rq, resp, err);
}

/* PUT one chunk (to the head) or part (to a store); 0 or -1 with p->error set. */
static int put_chunk(push_t *p, worker_t *w, job_t *j)
{
    char path[4200], url[2400];
    snprintf(path, sizeof path, "%s/%s", p->root, j->file);
    xfer_t x = {.p = p, .j = j, .fd = open(path, O_RDONLY | O_CLOEXEC)};
    if (x.fd < 0) {
        set_error(p, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(url, sizeof url, "/v1/artifacts/uploads/%s/blobs/%s/chunks/%zu", p->digest,
             j->hex, j->idx);
    drv_hc_req_t rq = {.method = "PUT", .path = j->url ? j->url : url,
                       .content_type = "application/octet-stream", .body_len = j->len,
                       .read_body = read_body, .timeout_ms = DRV_HC_NO_TIMEOUT_MS,
                       .on_head = on_head, .on_body = on_body, .ud = &x};
    drv_hc_resp_t resp;
    drv_error_t err = {0};
    int rc;
    if (j->url)
        rc = put_store(w, &rq, &resp, &err);
    else if (!w->head && !(w->head = drv_httpc_dup(p->head, true, &err)))
        rc = -1;
    else
        rc = drv_httpc_send(w->head, &rq, &resp, &err);
    long status = resp.status;
    close(x.fd);
    if (rc < 0) {
        if (!j->url)
            atomic_store(&p->moved, true);
        set_error(p, j->url ? "cannot reach the store: %s%s" : "%s%s", err.message, "");
        return -1;
    }
    if (j->url) {   /* S3 answers 200 and the part's ETag */
        if (status == 200 && j->etag[0])
            return 0;
        char what[600], code[200] = "";
        const char *c0 = strstr(x.buf, "<Code>"), *c1 = c0 ? strstr(c0, "</Code>") : NULL;
        if (c0 && c1)
            snprintf(code, sizeof code, " %.*s", (int)(c1 - c0 - 6), c0 + 6);
        snprintf(what, sizeof what, "%s part at byte %llu", j->file,
                 (unsigned long long)j->off);
        char why[300];
        snprintf(why, sizeof why, "the store answered %ld%s%s", status, code,
                 status == 200 ? " without an ETag" : "");
        set_error(p, "%s: %s", what, why);
        return -1;
    }
    if (status != 204) {
        json_t *doc = json_loads(x.buf, 0, NULL);
        const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"),
                                                            "message"));
        const char *code = json_string_value(json_object_get(json_object_get(doc, "error"),
                                                             "code"));
        if (status == 503 && code && strcmp(code, "not_leader") == 0)
            atomic_store(&p->moved, true);
        char what[600];
        snprintf(what, sizeof what, "%s chunk %zu", j->file, j->idx);
        set_error(p, "%s: %s", what, msg ? msg : "unexpected answer");
        json_decref(doc);
        return -1;
    }
    return 0;
}

static void *worker(void *arg)
{
    push_t *p = arg;
    worker_t w = {0};
    for (;;) {
        pthread_mutex_lock(&p->mu);
        job_t *j = p->error[0] || p->next == p->njobs ? NULL : &p->jobs[p->next++];
        pthread_mutex_unlock(&p->mu);
        if (!j || put_chunk(p, &w, j) < 0)
            break;
    }
    drv_httpc_destroy(w.head);
    drv_hc_destroy(w.store);
    atomic_fetch_sub(&p->running, 1);
    return NULL;
}

void drv_cli_bytes(uint64_t n, char *out, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, len, "%llu B", (unsigned long long)n);
    else
        snprintf(out, len, "%.1f %s", v, units[u]);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void progress(push_t *p, uint64_t total, double t0, bool last)
{
    uint64_t sent = atomic_load(&p->sent);
    double dt = now_s() - t0;
    char s[32], t[32], r[32];
    drv_cli_bytes(sent, s, sizeof s);
    drv_cli_bytes(total, t, sizeof t);
    drv_cli_bytes(dt > 0 ? (uint64_t)((double)sent / dt) : 0, r, sizeof r);
    fprintf(stderr, "\r\033[Ksent %s of %s (%s/s)%s", s, t, r, last ? "\n" : "");
}

static int run_jobs(push_t *p, int parallel, uint64_t total);

/* Send the chunks doc.missing names; 0 or -1 (printed). */
static int send_missing(push_t *p, const drv_manifest_t *m, const json_t *missing,
                        int parallel, uint64_t *bytes)
{
    size_t n = 0, i, k;
    json_t *e, *c;
    json_array_foreach(missing, i, e) n += json_array_size(json_object_get(e, "chunks"));
    p->jobs = calloc(n ? n : 1, sizeof *p->jobs);
    if (!p->jobs) {
        fprintf(stderr, "error: out of memory\n");
        return -1;
    }
    *bytes = 0;
    json_array_foreach(missing, i, e) {
        const char *hex = json_string_value(json_object_get(e, "sha256"));
        const drv_manifest_file_t *f = NULL;
        for (size_t j = 0; hex && j < m->nfiles && !f; j++)
            if (strcmp(m->files[j].sha256, hex) == 0)
                f = &m->files[j];
        if (!f) {
            fprintf(stderr, "error: the head asked for blob %s, which is not in the "
                    "manifest\n", hex ? hex : "?");
            return -1;
        }
        json_array_foreach(json_object_get(e, "chunks"), k, c) {
            size_t idx = (size_t)json_integer_value(c);
            if (idx >= f->nchunks) {
                fprintf(stderr, "error: the head asked for chunk %zu of %s, which has %zu\n",
                        idx, f->path, f->nchunks);
                return -1;
            }
            job_t *j = &p->jobs[p->njobs++];
            *j = (job_t){.file = f->path, .hex = f->sha256, .idx = idx,
                         .off = idx * m->chunk_size,
                         .len = drv_manifest_chunk_len(f->size, m->chunk_size, idx)};
            *bytes += j->len;
        }
    }
    return run_jobs(p, parallel, *bytes);
}

/* Run p->jobs over parallel connections, progress on a terminal; 0 or -1 (printed). */
static int run_jobs(push_t *p, int parallel, uint64_t total)
{
    uint64_t *bytes = &total;
    if (p->njobs == 0)
        return 0;
    if ((size_t)parallel > p->njobs)
        parallel = (int)p->njobs;
    pthread_t th[64];
    atomic_store(&p->running, parallel);
    for (int t = 0; t < parallel; t++)
        pthread_create(&th[t], NULL, worker, p);
    bool tty = isatty(STDERR_FILENO);
    double t0 = now_s();
    while (tty && atomic_load(&p->running) > 0) {
        progress(p, *bytes, t0, false);
        usleep(200 * 1000);
    }
    for (int t = 0; t < parallel; t++)
        pthread_join(th[t], NULL);
    if (tty)
        progress(p, *bytes, t0, true);
    if (p->error[0]) {
        fprintf(stderr, "error: %s\n", p->error);
        return -1;
    }
    return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return -1;
    uint64_t mul = 1;
    if (*end == 'k' || *end == 'K')
        mul = 1ull << 10;
    else if (*end == 'm' || *end == 'M')
        mul = 1ull << 20;
    else if (*end == 'g' || *end == 'G')
        mul = 1ull << 30;
    else if (*end)
        return -1;
    if (*end && end[1] && strcmp(end + 1, "i") != 0 && strcmp(end + 1, "iB") != 0 &&
        strcmp(end + 1, "B") != 0)
        return -1;
    if (v > UINT64_MAX / mul)
        return -1;
    *out = v * mul;
    return 0;
}

/* --store: ask the head for the plan (presigned part URLs of the blobs the
 * bucket lacks), PUT the parts straight to the store, have the head
 * complete each blob. *plan keeps the URLs the jobs point into (caller
 * frees). 0, or a DRV_CLI_* failure (printed). */
static int push_to_store(drv_cli_t *cli, push_t *p, const drv_manifest_t *m, json_t *mj,
                         const char *store, const char *prefix, int parallel, uint64_t *sent,
                         json_t **plan)
{
    drv_error_t err = {0};
    char path[400];
    json_t *body = json_pack("{s:O, s:s}", "manifest", mj, "prefix", prefix ? prefix : "drover");
    if (drv_cli_pathf(path, sizeof path, "/v1/stores/%s/uploads", store) < 0 ||
        !(*plan = drv_cli_call(cli, "POST", path, body, NULL, NULL, &err))) {
        json_decref(body);
        return drv_cli_fail(cli, &err);
    }
    json_decref(body);
    const json_t *blobs = json_object_get(*plan, "blobs");
    size_t n = 0, i, k;
    json_t *b, *part;
    json_array_foreach(blobs, i, b) n += json_array_size(json_object_get(b, "parts"));
    p->jobs = calloc(n ? n : 1, sizeof *p->jobs);
    if (!p->jobs) {
        fprintf(stderr, "error: out of memory\n");
        return DRV_CLI_FAIL;
    }
    json_array_foreach(blobs, i, b) {
        const char *hex = json_string_value(json_object_get(b, "sha256"));
        const drv_manifest_file_t *f = NULL;
        for (size_t j = 0; hex && j < m->nfiles && !f; j++)
            if (strcmp(m->files[j].sha256, hex) == 0)
                f = &m->files[j];
        if (!f) {
            fprintf(stderr, "error: the head planned blob %s, which is not in the manifest\n",
                    hex ? hex : "?");
            return DRV_CLI_FAIL;
        }
        json_array_foreach(json_object_get(b, "parts"), k, part) {
            if (!json_object_get(part, "url"))
                continue;   /* the store holds it already (a resumed push) */
            job_t *j = &p->jobs[p->njobs++];
            *j = (job_t){.file = f->path, .hex = f->sha256, .idx = k,
                         .off = (uint64_t)json_integer_value(json_object_get(part, "offset")),
                         .len = (uint64_t)json_integer_value(json_object_get(part, "length")),
                         .url = json_string_value(json_object_get(part, "url"))};
            if (!j->url || j->off + j->len > f->size) {
                fprintf(stderr, "error: the head's plan for %s is not valid\n", f->path);
                return DRV_CLI_FAIL;
            }
            *sent += j->len;
        }
    }
    if (run_jobs(p, parallel, *sent) < 0)
        return DRV_CLI_FAIL;
    size_t next = 0;
    json_array_foreach(blobs, i, b) {
        json_t *etags = json_array();
        json_array_foreach(json_object_get(b, "parts"), k, part) {
            const char *held = json_string_value(json_object_get(part, "etag"));
            json_array_append_new(etags, json_string(held ? held : p->jobs[next++].etag));
        }
        json_t *c = json_pack("{s:O, s:O, s:O, s:O, s:o}", "prefix",
                              json_object_get(*plan, "prefix"), "sha256",
                              json_object_get(b, "sha256"), "size", json_object_get(b, "size"),
                              "upload_id", json_object_get(b, "upload_id"), "etags", etags);
        json_t *r = NULL;
        long st = 0;
        if (drv_cli_pathf(path, sizeof path, "/v1/stores/%s/uploads/complete", store) < 0 ||
            (!(r = drv_cli_call(cli, "POST", path, c, NULL, &st, &err)) && st != 204)) {
            json_decref(c);
            return drv_cli_fail(cli, &err);
        }
        json_decref(c);
        json_decref(r);
    }
    return 0;
}

static int run_push(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const char *root = a->pos[0], *id = drv_cli_opt(a, "id"), *cs_s = drv_cli_opt(a, "chunk-size");
    uint64_t cs = DRV_MANIFEST_CHUNK_DEFAULT, sent = 0;
    long long parallel = 4;
    if (!id)
        return drv_cli_usage(a, "--id ID is required (the artifact's name)");
    if (cs_s && (parse_size(cs_s, &cs) < 0 || cs < DRV_MANIFEST_CHUNK_MIN ||
                 cs > DRV_MANIFEST_CHUNK_MAX))
        return drv_cli_usage(a, "--chunk-size must be a size from %llu to %llu bytes (4096, "
                             "64M, 1G)", DRV_MANIFEST_CHUNK_MIN, DRV_MANIFEST_CHUNK_MAX);
    if (drv_cli_opt_long(a, "parallel", 1, 64, &parallel) < 0)
        return DRV_CLI_USAGE;
    struct stat sb;
    if (stat(root, &sb) < 0) {
        fprintf(stderr, "error: %s: %s\n", root, strerror(errno));
        return DRV_CLI_FAIL;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "error: %s is not a directory (push the directory that holds it)\n",
                root);
        return DRV_CLI_FAIL;
    }
    drv_error_t err = {0};
    drv_manifest_t *m = NULL;
    json_t *up = NULL, *art = NULL, *body = NULL;
    push_t p = {.root = root};
    pthread_mutex_init(&p.mu, NULL);
    int rc = DRV_CLI_FAIL;
    if (drv_manifest_build(root, cs, 0, &m, &err) < 0) {
        fprintf(stderr, "error: %s\n", err.message);
        goto out;
    }
    char *mjs = drv_manifest_to_json(m);
    body = json_pack("{s:o}", "manifest", mjs ? json_loads(mjs, 0, NULL) : json_null());
    free(mjs);
    const char *store = drv_cli_opt(a, "store"), *prefix = drv_cli_opt(a, "prefix");
    if (prefix && !store) {
        rc = drv_cli_usage(a, "--prefix goes with --store (a key prefix in the store's bucket)");
        goto out;
    }
    if (store) {
        if (drv_cli_connect(cli, &err) < 0) {
            rc = drv_cli_fail(cli, &err);
            goto out;
        }
        int r = push_to_store(cli, &p, m, json_object_get(body, "manifest"), store, prefix,
                              (int)parallel, &sent, &up);
        if (r != 0) {
            rc = r;
            goto out;
        }
        json_decref(body);
        body = json_pack("{s:s, s:O, s:s}", "id", id, "source", json_object_get(up, "source"),
                         "store", store);
        char *mj2 = drv_manifest_to_json(m);
        json_object_set_new(body, "manifest", mj2 ? json_loads(mj2, 0, NULL) : json_null());
        free(mj2);
        goto create;
    }
    /* several heads: the chunks go to the head that answered (the leader);
     * when it goes away or stands by, the upload is asked for again (the
     * client moves on to the new leader) and what that head lacks is sent */
    char server[1024];
    json_t *cbody = json_pack("{s:s, s:s, s:s}", "id", id, "source", "drover://", "upload",
                              m->digest);
    for (int round = 0;; round++) {
        /* asking for the upload is idempotent (the same manifest finds the
         * same upload): after a move it is sent again when the kept-alive
         * connection to the head that went away fails under it */
        for (int t = 0; t < (round ? 3 : 1) && drv_cli_connect(cli, &err) == 0; t++)
            if ((up = drv_cli_call(cli, "POST", "/v1/artifacts/uploads", body, NULL, NULL,
                                   &err)) || err.status != 0)
                break;
        if (!up) {
            rc = drv_cli_fail(cli, &err);
            json_decref(cbody);
            goto out;
        }
        /* a copy: the client may drop the URL it names on a later move */
        snprintf(server, sizeof server, "%s", drv_httpc_base_url(cli->http));
        p.server = server;
        p.head = cli->http;
        p.digest = m->digest;
        uint64_t now = 0;
        int r = send_missing(&p, m, json_object_get(up, "missing"), (int)parallel, &now);
        sent += now;
        long st = 0;
        if (r == 0) {
            /* the create: 409 from another head than the chunks went to (the
             * leader went away since) is the new leader lacking them */
            art = drv_cli_call(cli, "POST", "/v1/artifacts", cbody, NULL, &st, &err);
            if (art || st != 409 || strcmp(server, drv_httpc_base_url(cli->http)) == 0 ||
                round == MOVES_MAX)
                break;
        } else if (!atomic_load(&p.moved) || round == MOVES_MAX) {
            json_decref(cbody);
            goto out;
        }
        fprintf(stderr, "drover: %s went away or stands by; asking the heads again\n",
                p.server);
        json_decref(up);
        up = NULL;
        free(p.jobs);
        p.jobs = NULL;
        p.njobs = p.next = 0;
        p.error[0] = '\0';
        atomic_store(&p.moved, false);
    }
    json_decref(cbody);
    if (!art) {
        rc = drv_cli_fail(cli, &err);
        goto out;
    }
    goto created;
create:
    if (!(art = drv_cli_call(cli, "POST", "/v1/artifacts", body, NULL, NULL, &err))) {
        rc = drv_cli_fail(cli, &err);
        goto out;
    }
created:
    if (json_is_string(json_object_get(art, "warning")))   /* several heads: not replicated yet */
        fprintf(stderr, "drover: warning: %s\n",
                json_string_value(json_object_get(art, "warning")));
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        rc = drv_cli_print_doc(cli, art);
    } else {
        char total[32], s[32];
        drv_cli_bytes(m->total_size, total, sizeof total);
        drv_cli_bytes(sent, s, sizeof s);
        printf("artifact/%s created%s%s: %zu file(s), %s, %s sent, digest %s\n", id,
               store ? " on store " : "", store ? store : "", m->nfiles, total, s, m->digest);
        rc = DRV_CLI_OK;
    }
out:
    json_decref(up);
    json_decref(art);
    json_decref(body);
    drv_manifest_free(m);
    free(p.jobs);
    pthread_mutex_destroy(&p.mu);
    return rc;
}

int drv_cli_describe_artifact(drv_cli_t *cli, const json_t *obj)
{
    const json_t *st = json_object_get(obj, "status");
    const json_t *m = json_object_get(obj, "manifest");
    const char *id = json_string_value(json_object_get(obj, "id"));
    char size[32];
    drv_cli_bytes((uint64_t)json_integer_value(json_object_get(st, "total_size")), size,
                  sizeof size);
    printf("ID:           %s\n", id);
    printf("Owner:        %s\n", json_string_value(json_object_get(obj, "owner")));
    printf("Source:       %s\n", json_string_value(json_object_get(obj, "source")));
    if (json_object_get(obj, "store"))
        printf("Store:        %s (layout %s)\n", json_string_value(json_object_get(obj, "store")),
               json_string_value(json_object_get(obj, "layout")));
    const char *state = json_string_value(json_object_get(st, "state"));
    printf("State:        %s\n", state ? state : "ready");
    if (state && strcmp(state, "failed") == 0)
        printf("Reason:       %s\n", json_string_value(json_object_get(st, "reason")));
    const json_t *pr = json_object_get(st, "progress");
    if (state && strcmp(state, "importing") == 0) {
        char b[32];
        drv_cli_bytes((uint64_t)json_integer_value(json_object_get(pr, "bytes")), b, sizeof b);
        printf("Progress:     %lld of %lld file(s), %s hashed\n",
               (long long)json_integer_value(json_object_get(pr, "files_done")),
               (long long)json_integer_value(json_object_get(pr, "files")), b);
    }
    printf("Digest:       %s\n", json_string_value(json_object_get(st, "digest")));
    printf("Size:         %s (%lld bytes)\n", size,
           (long long)json_integer_value(json_object_get(st, "total_size")));
    printf("Chunk size:   %lld\n", (long long)json_integer_value(json_object_get(m, "chunk_size")));
    printf("Created:      %s\n", json_string_value(json_object_get(obj, "created_at")));
    printf("Files (%zu):\n", json_array_size(json_object_get(m, "files")));
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(m, "files"), i, f) {
        drv_cli_bytes((uint64_t)json_integer_value(json_object_get(f, "size")), size,
                      sizeof size);
        printf("  %-12s %.12s  %s\n", size, json_string_value(json_object_get(f, "sha256")),
               json_string_value(json_object_get(f, "path")));
    }
    drv_error_t err = {0};
    json_t *models = drv_cli_list(cli, "/v1/models", &err);
    if (!models)
        return drv_cli_fail(cli, &err);
    printf("Models:\n");
    size_t n = 0;
    json_array_foreach(models, i, f) {
        const char *a = json_string_value(json_object_get(json_object_get(f, "artifact"), "id"));
        if (a && id && strcmp(a, id) == 0 && ++n)
            printf("  %s\n", json_string_value(json_object_get(f, "id")));
    }
    if (n == 0)
        printf("  <none>\n");
    json_decref(models);
    return DRV_CLI_OK;
}

bool drv_cli_is_uploads(const drv_cli_args_t *a)
{
    return a->npos >= 1 && (strcmp(a->pos[0], "uploads") == 0 || strcmp(a->pos[0], "upload") == 0);
}

/* "3h" from now to t (epoch s); "-" past. */
static void until(long long t, char *out, size_t n)
{
    long long s = t - (long long)time(NULL);
    if (s <= 0)
        snprintf(out, n, "-");
    else if (s < 7200)
        snprintf(out, n, "%lldm", (s + 59) / 60);
    else if (s < 172800)
        snprintf(out, n, "%lldh", s / 3600);
    else
        snprintf(out, n, "%lldd", s / 86400);
}

int drv_cli_get_uploads(drv_cli_t *cli, const drv_cli_args_t *a)
{
    if (a->npos > 1)
        return drv_cli_usage(a, "usage: drover get uploads (the unfinished uploads of this user)");
    drv_error_t err = {0};
    json_t *doc = drv_cli_call(cli, "GET", "/v1/artifacts/uploads", NULL, NULL, NULL, &err);
    if (!doc)
        return drv_cli_fail(cli, &err);
    const json_t *items = json_object_get(doc, "items");
    int rc = DRV_CLI_OK;
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        rc = drv_cli_print_doc(cli, items);
    } else if (json_array_size(items) == 0) {
        printf("No unfinished uploads.\n");
    } else {
        printf("%-14s %6s %10s %10s %8s\n", "ID", "FILES", "SIZE", "MISSING", "EXPIRES");
        size_t i;
        json_t *u;
        json_array_foreach(items, i, u) {
            char size[32], miss[32], ex[16] = "never";
            drv_cli_bytes((uint64_t)json_integer_value(json_object_get(u, "total_size")), size,
                          sizeof size);
            drv_cli_bytes((uint64_t)json_integer_value(json_object_get(u, "missing_bytes")),
                          miss, sizeof miss);
            if (json_object_get(u, "expires_at"))
                until(json_integer_value(json_object_get(u, "expires_at")), ex, sizeof ex);
            printf("%-14.12s %6lld %10s %10s %8s\n",
                   json_string_value(json_object_get(u, "id")),
                   (long long)json_integer_value(json_object_get(u, "file_count")), size, miss, ex);
        }
    }
    json_decref(doc);
    return rc;
}

static const drv_cli_opt_t push_opts[] = {
    {"id", 0, "ID", "the artifact's id (required)"},
    {"chunk-size", 0, "SIZE", "chunk size in bytes, or with K/M/G (default 64M; 4096 to 1G)"},
    {"parallel", 'p', "N", "chunks sent at once (default 4, at most 64)"},
    {"store", 0, "NAME", "upload to this S3 store (drover get stores) instead of the head"},
    {"prefix", 0, "PREFIX", "with --store: the key prefix in its bucket (default drover)"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_cmd_t artifact_push = {
    .name = "push",
    .summary = "upload a directory to the head's store or an S3 store and create an artifact of it",
    .usage = "artifact push PATH --id ID [--store NAME [--prefix P]] [--chunk-size SIZE] "
             "[--parallel N] [-o json]",
    .help = "Hashes every file under PATH (in parallel) into a manifest: each file's path,\n"
            "size and sha256 and the sha256 of each chunk. Then asks the head what it lacks\n"
            "(POST /v1/artifacts/uploads), sends only those chunks, several at once, and\n"
            "creates the artifact (source drover://). Progress (bytes, rate) is shown when\n"
            "stderr is a terminal. Run it again after an interruption: only what the head\n"
            "has not got is sent. Symlinks must stay inside PATH and name regular files.\n"
            "A model uses the artifact with `artifact: {id: ID}`.\n\n"
            "With --store NAME the bytes go to that S3 store instead, straight from this\n"
            "machine: the head HEADs each distinct blob at PREFIX/blobs/sha256/HEX, starts a\n"
            "multipart upload of each one the bucket lacks and presigns its part URLs; this\n"
            "command PUTs the parts (it never holds the store's credential), the head\n"
            "completes each blob, and the artifact is created with source\n"
            "s3://BUCKET/PREFIX. Blobs already in the bucket (from any push) are not sent\n"
            "again; a push cut off resumes where it stopped (parts the store holds are\n"
            "not sent again).\n\n"
            "Examples:\n"
            "  drover artifact push ./llama-8b --id llama-8b\n"
            "  drover artifact push ./weights --id w1 --chunk-size 16M --parallel 8\n"
            "  drover artifact push ./llama-8b --id llama-8b --store models\n"
            "  drover describe artifact llama-8b\n",
    .opts = push_opts,
    .min_pos = 1,
    .max_pos = 1,
    .run = run_push,
};

/* One progress line of an import (stderr, a terminal). */
static void import_line(const json_t *st, double t0, bool last)
{
    const json_t *p = json_object_get(st, "progress");
    char b[32], r[32];
    uint64_t bytes = (uint64_t)json_integer_value(json_object_get(p, "bytes"));
    double el = now_s() - t0;
    drv_cli_bytes(bytes, b, sizeof b);
    drv_cli_bytes(el > 0 ? (uint64_t)((double)bytes / el) : 0, r, sizeof r);
    long long files = json_integer_value(json_object_get(p, "files"));
    if (files)
        fprintf(stderr, "\r\033[Kimporting: %lld of %lld file(s), %s hashed (%s/s)%s",
                (long long)json_integer_value(json_object_get(p, "files_done")), files, b, r,
                last ? "\n" : "");
    else
        fprintf(stderr, "\r\033[Kimporting: listing the source%s", last ? "\n" : "");
}

/* Poll the artifact until its import ends (progress on a terminal): the
 * final document (caller frees), or NULL with err (a failed import's reason). */
static json_t *import_wait(drv_cli_t *cli, const char *id, json_t *art, drv_error_t *err)
{
    char path[300];
    if (drv_cli_pathf(path, sizeof path, "/v1/artifacts/%s", id) < 0) {
        json_decref(art);
        return drv_err_invalid(err, "id", "the id is too long"), NULL;
    }
    bool tty = isatty(STDERR_FILENO), shown = false;
    double t0 = now_s();
    for (;;) {
        const json_t *st = json_object_get(art, "status");
        const char *state = json_string_value(json_object_get(st, "state"));
        if (!state || strcmp(state, "importing") != 0) {
            if (shown)
                import_line(st, t0, true);
            if (state && strcmp(state, "failed") == 0) {
                drv_err_unprocessable(err, "source", "the import of artifact '%s' failed: %s "
                                      "(the failed artifact stays, with this reason, until "
                                      "it is imported again or deleted)", id,
                                      json_string_value(json_object_get(st, "reason")));
                json_decref(art);
                return NULL;
            }
            return art;
        }
        if (tty) {
            import_line(st, t0, false);
            shown = true;
        }
        json_decref(art);
        usleep(300 * 1000);
        if (!(art = drv_cli_call(cli, "GET", path, NULL, NULL, NULL, err))) {
            if (shown)
                fputc('\n', stderr);
            if (err->status == 404)
                drv_err_prefix(err, "deleted while it was imported");
            return NULL;
        }
    }
}

static int run_import(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const char *id = drv_cli_opt(a, "id"), *src = drv_cli_opt(a, "source");
    const char *store = drv_cli_opt(a, "store"), *desc = drv_cli_opt(a, "description");
    if (!id)
        return drv_cli_usage(a, "--id ID is required (the artifact's name)");
    if (!src)
        return drv_cli_usage(a, "--source URL is required (s3://BUCKET/PREFIX, https://HOST/FILE "
                             "or https://HOST/DIR/)");
    if (strncmp(src, "s3://", 5) != 0 && strncmp(src, "https://", 8) != 0 &&
        strncmp(src, "http://", 7) != 0)
        return drv_cli_usage(a, "--source must be s3://BUCKET/PREFIX or an https:// URL (to "
                             "upload local files: drover artifact push PATH --id ID)");
    drv_error_t err = {0};
    json_t *body = json_pack("{s:s, s:s}", "id", id, "source", src), *art = NULL;
    if (store)
        json_object_set_new(body, "store", json_string(store));
    if (desc)
        json_object_set_new(body, "description", json_string(desc));
    bool no_wait = drv_cli_flag(a, "no-wait");
    int rc;
    if (drv_cli_connect(cli, &err) < 0 ||
        !(art = drv_cli_call(cli, "POST", "/v1/artifacts", body, NULL, NULL, &err)) ||
        (!no_wait && !(art = import_wait(cli, id, art, &err)))) {
        rc = drv_cli_fail(cli, &err);
    } else if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        rc = drv_cli_print_doc(cli, art);
    } else if (no_wait) {
        printf("artifact/%s importing from %s (drover describe artifact %s shows its "
               "progress)\n", id, src, id);
        rc = DRV_CLI_OK;
    } else {
        const json_t *st = json_object_get(art, "status");
        char total[32];
        drv_cli_bytes((uint64_t)json_integer_value(json_object_get(st, "total_size")), total,
                      sizeof total);
        printf("artifact/%s imported from %s: %lld file(s), %s, digest %s\n", id, src,
               (long long)json_integer_value(json_object_get(st, "file_count")), total,
               json_string_value(json_object_get(st, "digest")));
        rc = DRV_CLI_OK;
    }
    json_decref(body);
    json_decref(art);
    return rc;
}

static const drv_cli_opt_t import_opts[] = {
    {"id", 0, "ID", "the artifact's id (required)"},
    {"source", 0, "URL", "s3://BUCKET/PREFIX, https://HOST/FILE or https://HOST/DIR/ (required)"},
    {"store", 0, "NAME", "the store of an s3:// source (default: the one store with that bucket)"},
    {"description", 0, "TEXT", "a description"},
    {"no-wait", 0, NULL, "return once the import has started (state importing)"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_cmd_t artifact_import = {
    .name = "import",
    .summary = "index files already on an S3 store or at https URLs as an artifact",
    .usage = "artifact import --id ID --source URL [--store NAME] [--no-wait] [-o json]",
    .help = "The head creates the artifact in state importing, then reads every file of\n"
            "the source in the background and hashes it into a manifest (each file's path,\n"
            "size, sha256 and chunk digests); the artifact becomes ready, or failed with\n"
            "the reason. Nothing is copied. Nodes later read the files where they are (the\n"
            "head hands them presigned or https URLs) and check every chunk against the\n"
            "manifest. This command waits for the end, showing files and bytes hashed when\n"
            "stderr is a terminal, and exits 1 with the reason when the import fails;\n"
            "--no-wait returns at once (drover describe artifact ID shows the progress).\n"
            "A model may name an importing artifact: its replicas wait (pending) until it\n"
            "is ready. A failed artifact stays, with its reason, until it is deleted or\n"
            "imported again under the same id.\n\n"
            "Sources:\n"
            "  s3://BUCKET/PREFIX   every object under PREFIX/ on the operator's store with\n"
            "                       that bucket (drover get stores), at its relative key\n"
            "  https://HOST/FILE    one file, named by the URL's last path segment\n"
            "  https://HOST/DIR/    the files listed in https://HOST/DIR/drover-files.txt,\n"
            "                       one relative path per line ('#' comments)\n"
            "A malformed URL or an unknown store is refused at once and nothing is created;\n"
            "a source that answers 403 or 404, a list that does not parse or a file over\n"
            "4 TiB fails the import (state failed, with that reason).\n\n"
            "Examples:\n"
            "  drover artifact import --id llama --source s3://models/llama-8b\n"
            "  drover artifact import --id tok --source https://example.com/m/tokenizer.json\n"
            "  drover artifact import --id w --source https://mirror.internal/w1/\n",
    .opts = import_opts,
    .run = run_import,
};

static const drv_cli_cmd_t *const artifact_cmds[] = {&artifact_push, &artifact_import, NULL};

const drv_cli_cmd_t drv_cli_cmd_artifact = {
    .name = "artifact",
    .summary = "push model artifacts (files) to the head's store, or import them from S3/https",
    .usage = "artifact COMMAND [flags]",
    .subcmds = artifact_cmds,
};
