/* checkpoint.c — see checkpoint.h: the scopes this agent serves, its
 * thread (restore, then watch and upload), and restoring a checkpoint
 * through the node cache. The upload of one checkpoint is
 * checkpoint_upload.c's. */
#define _GNU_SOURCE
#include "agent/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/cache.h"
#include "agent/checkpoint_int.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/util.h"

enum rstate { R_PENDING, R_RUNNING, R_READY, R_FAILED };

struct scope_ent {
    char scope[128];
    char dir[1024];
    int keep, refs;
    bool waiting;                /* an acquire answered 0 and will call again */
    enum rstate rst;
    char why[256];
    char **done;                 /* names committed at the head, or refused */
    size_t ndone;
    char fail_name[128];         /* the last upload that failed, and how often */
    int fail_count;
    /* Local pruning waits for the holder: the checkpoints complete here when
     * the current holder came (base) may be the one it resumes from, so the
     * names the head drops are only removed here (deferred until then) once
     * an upload of a checkpoint not in base (the holder's own, so it has read
     * what it resumed from) has been committed. */
    char **base;
    size_t nbase;
    bool own_seen;
    char **deferred;
    size_t ndeferred;
    struct scope_ent *next;
};

bool drv_ckpt_scope_valid(const char *s)
{
    size_t i;
    if (!s || !s[0] || s[0] == '.')
        return false;
    for (i = 0; s[i]; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-' || ch == ':'))
            return false;
    }
    return i < 128;
}

bool drv_ckpt_name_valid(const char *s)
{
    return drv_ckpt_scope_valid(s) && !strchr(s, ':');
}

void drv_ckpt_dir(const drv_ckpt_t *c, const char *scope, char *buf, size_t n)
{
    snprintf(buf, n, "%s/checkpoints/%s", c->data_dir, scope);
}

static bool has_marker(const char *dir, const char *name, struct timespec *mt)
{
    char p[2048];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s/%s", dir, name, DRV_CKPT_MARKER);
    if (stat(p, &sb) < 0 || !S_ISREG(sb.st_mode))
        return false;
    if (mt)
        *mt = sb.st_mtim;
    return true;
}

/* rm -rf, never following links */
static void remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) < 0)
        return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[4096];
            if ((size_t)snprintf(p, sizeof p, "%s/%s", path, e->d_name) < sizeof p)
                remove_tree(p);
        }
        if (d)
            closedir(d);
        chmod(path, 0700);
        rmdir(path);
    } else {
        unlink(path);
    }
}

void drv_ckpt_clean_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[2048];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &sb) < 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (strncmp(e->d_name, ".restore-", 9) == 0 || !has_marker(dir, e->d_name, NULL)) {
            drv_info("checkpoints: removing %s (%s)", p,
                     e->d_name[0] == '.' ? "a restore's leftover" : "no " DRV_CKPT_MARKER
                     " marker: incomplete");
            remove_tree(p);
        }
    }
    if (d)
        closedir(d);
}

/* --- name lists ---------------------------------------------------------------- */

static bool strv_has(char *const *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], name) == 0)
            return true;
    return false;
}

static void strv_add(char ***v, size_t *n, const char *name)
{
    if (strv_has(*v, *n, name))
        return;
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        abort();
    *v = nv;
    (*v)[(*n)++] = drv_strdup(name);
}

static void strv_free(char ***v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free((*v)[i]);
    free(*v);
    *v = NULL;
    *n = 0;
}

static bool is_done(const struct scope_ent *e, const char *name)
{
    return strv_has(e->done, e->ndone, name);
}

static void add_done(struct scope_ent *e, const char *name)
{
    strv_add(&e->done, &e->ndone, name);
}

static void free_ent(struct scope_ent *e)
{
    strv_free(&e->done, &e->ndone);
    strv_free(&e->base, &e->nbase);
    strv_free(&e->deferred, &e->ndeferred);
    free(e);
}

/* --- restore ------------------------------------------------------------------- */

static int mkdirs(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(p, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int copy_file(const char *from, const char *to, drv_error_t *err)
{
    int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
    struct stat sb;
    if (in < 0 || fstat(in, &sb) < 0) {
        drv_err_internal(err, "cannot read %s: %s", from, strerror(errno));
        goto out;
    }
    if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        drv_err_internal(err, "cannot create %s: %s", to, strerror(errno));
        goto out;
    }
    off_t left = sb.st_size;
    while (left > 0) {
        ssize_t k = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            drv_err_internal(err, "cannot copy %s: %s", from, k < 0 ? strerror(errno) : "short");
            goto out;
        }
        left -= k;
    }
    if (fsync(out) < 0) {
        drv_err_internal(err, "cannot write %s: %s", to, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return rc;
}

/* Copy the cache's snapshot of m into dir/name (through dir/.restore-NAME). */
static int lay_out(const drv_manifest_t *m, const char *snap, const char *dir, const char *name,
                   drv_error_t *err)
{
    char tmp[2048], to[2048];
    snprintf(tmp, sizeof tmp, "%s/.restore-%s", dir, name);
    remove_tree(tmp);
    if (mkdir(tmp, 0755) < 0)
        return drv_err_internal(err, "cannot create %s: %s", tmp, strerror(errno));
    for (size_t i = 0; i < m->nfiles; i++) {
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", snap, m->files[i].path);
        if ((size_t)snprintf(dst, sizeof dst, "%s/%s", tmp, m->files[i].path) >= sizeof dst) {
            remove_tree(tmp);
            return drv_err_internal(err, "path too long: %s", m->files[i].path);
        }
        char *slash = strrchr(dst, '/');
        *slash = '\0';
        int r = mkdirs(dst);
        *slash = '/';
        if (r < 0 || copy_file(src, dst, err) < 0) {
            if (r < 0)
                drv_err_internal(err, "cannot create the directories of %s: %s", dst,
                                 strerror(errno));
            remove_tree(tmp);
            return -1;
        }
    }
    snprintf(to, sizeof to, "%s/%s", dir, name);
    remove_tree(to);
    if (rename(tmp, to) < 0) {
        drv_err_internal(err, "cannot rename %s: %s", tmp, strerror(errno));
        remove_tree(tmp);
        return -1;
    }
    return 0;
}

/* Lay out the committed checkpoint `name` of scope into dir (through the
 * node cache), unless it is here complete already. */
static int restore_one(drv_ckpt_t *c, const char *scope, const char *dir, const char *name,
                       drv_error_t *err)
{
    char sub[1100];
    json_t *rec = NULL;
    drv_manifest_t *m = NULL;
    bool pinned = false;
    int rc = -1;
    if (has_marker(dir, name, NULL))
        return 0;
    snprintf(sub, sizeof sub, "/v1/agent/checkpoints/%s/%s", scope, name);
    if (drv_ckpt_call(c, "GET", sub, NULL, &rec, err) < 0)
        goto out;
    char *mj = json_dumps(json_object_get(rec, "manifest"), JSON_COMPACT);
    int pr = mj ? drv_manifest_parse(mj, strlen(mj), &m, err) : -1;
    free(mj);
    if (pr < 0) {
        m = NULL;
        snprintf(err->message, sizeof err->message, "checkpoint %s's manifest from the head does "
                 "not parse", name);
        goto out;
    }
    if (!c->cache) {
        drv_err_internal(err, "this agent has no node cache to restore checkpoints through");
        goto out;
    }
    char origin[700];
    snprintf(origin, sizeof origin, "%s/v1/blobs/sha256", c->server);
    drv_cache_origin_t o = {.base_url = origin, .bearer = c->credential};
    if (drv_cache_ensure(c->cache, m, &o, err) < 0 || drv_cache_pin(c->cache, m->digest, err) < 0)
        goto out;
    pinned = true;
    drv_cache_progress_t p;
    drv_cache_state_t s;
    while ((s = drv_cache_wait(c->cache, m->digest, 200, &p)) == DRV_CACHE_FETCHING)
        if (drv_ckpt_quitting(c)) {
            drv_err_internal(err, "stopping");
            goto out;
        }
    if (s != DRV_CACHE_READY) {
        drv_err_internal(err, "fetching checkpoint %s failed: %s", name,
                         p.error[0] ? p.error : "the node cache lost it");
        goto out;
    }
    char snap[1024];
    if (drv_cache_snapshot_path(c->cache, m->digest, snap, sizeof snap, err) < 0 ||
        lay_out(m, snap, dir, name, err) < 0)
        goto out;
    drv_info("checkpoints: %s: restored %s (%llu bytes, %zu files)", scope, name,
             (unsigned long long)m->total_size, m->nfiles);
    drv_ckpt_count(c, 0, 0, 0, 0, 0, 1, NULL);
    rc = 0;
out:
    if (pinned)
        drv_cache_unpin(c->cache, m->digest, NULL);
    drv_manifest_free(m);
    json_decref(rec);
    return rc;
}

/* The thread: restore e's committed checkpoints (every one the head keeps,
 * newest first, those not here complete already), so that a gang's ranks
 * can meet at the newest step all of them hold even when one rank's
 * uploads lagged (docs/architecture.md, "Jobs"); a failure of an older
 * one is only logged. names gets every
 * committed name (they need no upload). */
static int restore(drv_ckpt_t *c, const char *scope, const char *dir, json_t **names,
                   drv_error_t *err)
{
    char base[1100], sub[1100];
    json_t *list = NULL;
    int rc = -1;
    *names = json_array();
    snprintf(base, sizeof base, "%s/checkpoints", c->data_dir);
    if ((mkdir(base, 0755) < 0 && errno != EEXIST) || (mkdir(dir, 0755) < 0 && errno != EEXIST))
        return drv_err_internal(err, "cannot create %s: %s", dir, strerror(errno));
    drv_ckpt_clean_dir(dir);
    snprintf(sub, sizeof sub, "/v1/agent/checkpoints/%s", scope);
    if (drv_ckpt_call(c, "GET", sub, NULL, &list, err) < 0)
        goto out;
    json_t *items = json_object_get(list, "items"), *it;
    size_t k;
    json_array_foreach(items, k, it) if (json_is_string(json_object_get(it, "name")))
        json_array_append(*names, json_object_get(it, "name"));
    /* oldest first: each is laid out (its marker written) after the older
     * ones, so that programs that take the newest marker find the newest */
    for (k = json_array_size(items); k-- > 0;) {
        const char *name = json_string_value(json_object_get(json_array_get(items, k), "name"));
        if (!name || !drv_ckpt_name_valid(name))
            continue;
        if (restore_one(c, scope, dir, name, err) < 0) {
            if (k == 0)
                goto out;   /* the newest is a must; an older one is a bonus */
            drv_warn("checkpoints: %s: older checkpoint %s not restored: %s", scope, name,
                     err->message);
            memset(err, 0, sizeof *err);
        }
    }
    rc = 0;
out:
    json_decref(list);
    return rc;
}

/* --- the thread ------------------------------------------------------------------ */

struct cand {
    char name[256];
    struct timespec mt;
};

static int cmp_cand(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;
    if (a->mt.tv_sec != b->mt.tv_sec)
        return a->mt.tv_sec < b->mt.tv_sec ? -1 : 1;
    if (a->mt.tv_nsec != b->mt.tv_nsec)
        return a->mt.tv_nsec < b->mt.tv_nsec ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The oldest complete checkpoint of dir not in e's done list ("" if none):
 * by its marker's mtime, then name. Invalid names are refused once. When
 * more than keep (> 0) are waiting, the older ones are skipped: they would
 * be pruned at once (the newest keep are uploaded, oldest first). */
static void next_complete(drv_ckpt_t *c, struct scope_ent *e, int keep, char *out, size_t n)
{
    out[0] = '\0';
    DIR *d = opendir(e->dir);
    struct dirent *de;
    struct cand *v = NULL;
    size_t nv = 0, cap = 0;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof v->name)
            continue;
        struct timespec mt;
        if (!has_marker(e->dir, de->d_name, &mt))
            continue;
        pthread_mutex_lock(&c->mu);
        bool done = is_done(e, de->d_name);
        if (!done && !drv_ckpt_name_valid(de->d_name)) {
            drv_warn("checkpoints: %s: '%s' is not a usable checkpoint name ([A-Za-z0-9._-], "
                     "under 128 bytes): not uploaded", e->scope, de->d_name);
            add_done(e, de->d_name);
            done = true;
        }
        pthread_mutex_unlock(&c->mu);
        if (done)
            continue;
        if (nv == cap) {
            cap = cap ? cap * 2 : 16;
            struct cand *nvp = realloc(v, cap * sizeof *v);
            if (!nvp)
                abort();
            v = nvp;
        }
        snprintf(v[nv].name, sizeof v[nv].name, "%s", de->d_name);
        v[nv++].mt = mt;
    }
    if (d)
        closedir(d);
    if (nv) {
        qsort(v, nv, sizeof *v, cmp_cand);
        size_t first = keep > 0 && nv > (size_t)keep ? nv - (size_t)keep : 0;
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < first; i++) {
            drv_info("checkpoints: %s/%s: skipped, %d newer ones are waiting (keep %d)",
                     e->scope, v[i].name, keep, keep);
            add_done(e, v[i].name);
        }
        pthread_mutex_unlock(&c->mu);
        snprintf(out, n, "%s", v[first].name);
    }
    free(v);
}

/* The complete checkpoints of dir (by their marker) into *v. */
static void list_complete(const char *dir, char ***v, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' && has_marker(dir, de->d_name, NULL))
            strv_add(v, n, de->d_name);
    if (d)
        closedir(d);
}

/* One step of work for e (c->mu not held; e stays alive: only the thread
 * frees entries). true when it did something. */
static bool work_on(drv_ckpt_t *c, struct scope_ent *e)
{
    pthread_mutex_lock(&c->mu);
    enum rstate rst = e->rst;
    if (rst == R_PENDING)
        e->rst = R_RUNNING;
    int keep = e->keep;
    pthread_mutex_unlock(&c->mu);
    if (rst == R_PENDING) {
        drv_error_t err = {0};
        json_t *names = NULL;
        int r = restore(c, e->scope, e->dir, &names, &err);
        char **base = NULL;
        size_t nbase = 0;
        list_complete(e->dir, &base, &nbase);
        pthread_mutex_lock(&c->mu);
        size_t k;
        json_t *v;
        json_array_foreach(names, k, v) add_done(e, json_string_value(v));
        strv_free(&e->base, &e->nbase);
        e->base = base, e->nbase = nbase;
        e->own_seen = false;
        e->rst = r == 0 ? R_READY : R_FAILED;
        if (r < 0) {
            snprintf(e->why, sizeof e->why, "restoring checkpoint of %s: %s", e->scope,
                     err.message);
            drv_warn("checkpoints: %s", e->why);
        }
        pthread_mutex_unlock(&c->mu);
        json_decref(names);
        return true;
    }
    if (rst != R_READY)
        return false;
    char name[256];
    next_complete(c, e, keep, name, sizeof name);
    if (!name[0])
        return false;
    char why[512] = "";
    bool refuse = false;
    json_t *pruned = NULL;
    int r = drv_ckpt_upload(c, e->scope, e->dir, name, keep, &pruned, &refuse, why, sizeof why);
    pthread_mutex_lock(&c->mu);
    if (r == 0 && !strv_has(e->base, e->nbase, name))
        e->own_seen = true;
    if (r == 0 || refuse) {
        add_done(e, name);
    } else if (strcmp(e->fail_name, name) == 0 && ++e->fail_count >= 3) {
        drv_warn("checkpoints: %s/%s: giving up after 3 failed uploads: %s", e->scope, name, why);
        add_done(e, name);
    } else if (strcmp(e->fail_name, name) != 0) {
        snprintf(e->fail_name, sizeof e->fail_name, "%s", name);
        e->fail_count = 1;
    }
    pthread_mutex_unlock(&c->mu);
    if (r < 0 && !refuse && !drv_ckpt_quitting(c))
        drv_warn("checkpoints: %s/%s: upload failed (retried): %s", e->scope, name, why);
    /* the head dropped these beyond keep: so does this directory, once the
     * holder wrote its own (see struct scope_ent) */
    size_t k;
    json_t *v;
    char **gone = NULL;
    size_t ngone = 0;
    pthread_mutex_lock(&c->mu);
    json_array_foreach(pruned, k, v) {
        const char *pn = json_string_value(v);
        if (pn && drv_ckpt_name_valid(pn))
            strv_add(&e->deferred, &e->ndeferred, pn);
    }
    if (e->own_seen) {
        gone = e->deferred, ngone = e->ndeferred;
        e->deferred = NULL, e->ndeferred = 0;
    } else if (e->ndeferred && json_array_size(pruned)) {
        drv_info("checkpoints: %s: %zu dropped checkpoint(s) kept here until the holder "
                 "commits one of its own", e->scope, e->ndeferred);
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < ngone; i++)
        if (strcmp(gone[i], name) != 0) {
            char p[2048];
            snprintf(p, sizeof p, "%s/%s", e->dir, gone[i]);
            remove_tree(p);
        }
    strv_free(&gone, &ngone);
    json_decref(pruned);
    return r == 0 || refuse;
}

/* The uploads are background work: this thread (and the hashing threads
 * it starts, which inherit it) yields CPU and disk to the workloads. Best
 * effort: nice 10, I/O class best-effort at its lowest level. */
static void lower_priority(void)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    if (setpriority(PRIO_PROCESS, (id_t)tid, 10) < 0)
        drv_debug("checkpoints: cannot lower the thread's priority: %s", strerror(errno));
#ifdef SYS_ioprio_set
    /* IOPRIO_WHO_PROCESS = 1, IOPRIO_CLASS_BE = 2 (<< 13), level 7 */
    if (syscall(SYS_ioprio_set, 1, (int)tid, (2 << 13) | 7) < 0)
        drv_debug("checkpoints: cannot lower the thread's I/O priority: %s", strerror(errno));
#endif
}

static void *thread_main(void *arg)
{
    drv_ckpt_t *c = arg;
    lower_priority();
    pthread_mutex_lock(&c->mu);
    while (!c->quit) {
        bool busy = false;
        for (struct scope_ent *e = c->ents; e && !c->quit; e = e->next) {
            pthread_mutex_unlock(&c->mu);
            busy |= work_on(c, e);
            pthread_mutex_lock(&c->mu);
        }
        /* released scopes with nothing left to upload go */
        for (struct scope_ent **pp = &c->ents; *pp && !c->quit;) {
            struct scope_ent *e = *pp;
            char name[256] = "";
            if (e->refs == 0 && !e->waiting && (e->rst == R_READY || e->rst == R_FAILED)) {
                bool ready = e->rst == R_READY;
                int keep = e->keep;
                pthread_mutex_unlock(&c->mu);
                if (ready)
                    next_complete(c, e, keep, name, sizeof name);
                pthread_mutex_lock(&c->mu);
            }
            if (e->refs == 0 && !e->waiting && (e->rst == R_READY || e->rst == R_FAILED) &&
                !name[0] && !c->quit) {
                /* out of the way under the lock (a new acquire of the scope
                 * starts afresh), removed after it */
                *pp = e->next;
                char gone[1100];
                snprintf(gone, sizeof gone, "%s/checkpoints/.gone-%llu", c->data_dir,
                         (unsigned long long)++c->gone_seq);
                bool moved = rename(e->dir, gone) == 0;
                drv_info("checkpoints: %s released: removing %s", e->scope, e->dir);
                pthread_mutex_unlock(&c->mu);
                remove_tree(moved ? gone : e->dir);
                free_ent(e);
                pthread_mutex_lock(&c->mu);
                pp = &c->ents;   /* the list may have changed meanwhile */
                continue;
            }
            pp = &e->next;
        }
        if (busy || c->quit)
            continue;
        struct timespec ts;
        drv_deadline_in(c->scan_ms, &ts);
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

bool drv_ckpt_quitting(drv_ckpt_t *c)
{
    return atomic_load(&c->stop);
}

/* --- the interface --------------------------------------------------------------- */

drv_ckpt_t *drv_ckpt_create(const drv_ckpt_opts_t *o, drv_error_t *err)
{
    drv_ckpt_t *c = calloc(1, sizeof *c);
    if (!c) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    snprintf(c->server, sizeof c->server, "%s", o->server ? o->server : "");
    snprintf(c->credential, sizeof c->credential, "%s", o->credential ? o->credential : "");
    snprintf(c->data_dir, sizeof c->data_dir, "%s", o->data_dir ? o->data_dir : ".");
    c->cache = o->cache;
    c->chunk_size = o->chunk_size ? o->chunk_size : DRV_CKPT_CHUNK_DEFAULT;
    c->upload_bps = o->upload_mib_s > 0 ? o->upload_mib_s * 1048576.0 : 0;
    c->scan_ms = o->scan_ms > 0 ? o->scan_ms : 500;
    char base[600];
    snprintf(base, sizeof base, "%s/checkpoints", c->data_dir);
    DIR *d = opendir(base);   /* a removal cut short by a crash */
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strncmp(de->d_name, ".gone-", 6) == 0) {
            char p[1200];
            snprintf(p, sizeof p, "%s/%s", base, de->d_name);
            remove_tree(p);
        }
    if (d)
        closedir(d);
    if (!(c->hc = drv_hc_create(c->server, err))) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);   /* drv_deadline_in: CLOCK_REALTIME */
    if (pthread_create(&c->thread, NULL, thread_main, c) != 0) {
        drv_err_internal(err, "cannot start the checkpoint thread");
        drv_hc_destroy(c->hc);
        free(c);
        return NULL;
    }
    return c;
}

void drv_ckpt_stop(drv_ckpt_t *c)
{
    if (!c || c->joined)
        return;
    atomic_store(&c->stop, true);
    pthread_mutex_lock(&c->mu);
    c->quit = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    c->joined = true;
}

void drv_ckpt_destroy(drv_ckpt_t *c)
{
    if (!c)
        return;
    drv_ckpt_stop(c);
    for (struct scope_ent *e = c->ents, *n; e; e = n) {
        n = e->next;
        free_ent(e);
    }
    drv_hc_destroy(c->hc);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int drv_ckpt_acquire(drv_ckpt_t *c, const char *scope, int keep, char *why, size_t wl)
{
    if (!drv_ckpt_scope_valid(scope)) {
        snprintf(why, wl, "checkpoint scope '%.130s' is not valid", scope ? scope : "");
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    struct scope_ent *e = c->ents;
    while (e && strcmp(e->scope, scope) != 0)
        e = e->next;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e)
            abort();
        snprintf(e->scope, sizeof e->scope, "%s", scope);
        drv_ckpt_dir(c, scope, e->dir, sizeof e->dir);
        e->rst = R_PENDING;
        struct scope_ent **pp = &c->ents;   /* append: scopes are served in order */
        while (*pp)
            pp = &(*pp)->next;
        *pp = e;
        pthread_cond_broadcast(&c->cv);
    }
    e->keep = keep;
    if (e->rst == R_READY && e->refs == 0 && !e->waiting) {
        /* a new holder (a new attempt of a job's rank, a new replica): the
         * directory gets what the head committed meanwhile and lacks here
         * (another node's uploads of this scope) before it starts */
        e->rst = R_PENDING;
        pthread_cond_broadcast(&c->cv);
    }
    switch (e->rst) {
    case R_READY:
        e->refs++;
        rc = 1;
        break;
    case R_FAILED:
        snprintf(why, wl, "%s", e->why);
        e->rst = R_PENDING;   /* the next call sees the retry */
        pthread_cond_broadcast(&c->cv);
        rc = -1;
        break;
    default:
        rc = 0;
    }
    e->waiting = rc == 0;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void drv_ckpt_release(drv_ckpt_t *c, const char *scope)
{
    pthread_mutex_lock(&c->mu);
    for (struct scope_ent *e = c->ents; e; e = e->next)
        if (strcmp(e->scope, scope) == 0 && e->refs > 0) {
            e->refs--;
            break;
        }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void drv_ckpt_count(drv_ckpt_t *c, int committed, int rejected, int failed, uint64_t sent,
                    uint64_t skipped, int restored, const char *last)
{
    pthread_mutex_lock(&c->mu);
    c->st.committed += (uint64_t)committed;
    c->st.rejected += (uint64_t)rejected;
    c->st.failed += (uint64_t)failed;
    c->st.bytes_sent += sent;
    c->st.bytes_skipped += skipped;
    c->st.restored += (uint64_t)restored;
    if (last)
        snprintf(c->st.last, sizeof c->st.last, "%s", last);
    pthread_mutex_unlock(&c->mu);
}

void drv_ckpt_stats(drv_ckpt_t *c, drv_ckpt_stats_t *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}
