/* imports.c — see imports.h. A few threads; each takes the first importing
 * artifact nobody works on (state read lock, a copy of its spec), reads it
 * outside the lock (api/sources.h drv_sources_import) and writes the result
 * under the write lock only if the record still carries the import's token. */
#include "head/imports.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/resource.h"
#include "api/sources.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/util.h"
#include "state/events.h"
#include "state/state.h"
#include "common/json.h"

#define MAX_THREADS 8
#define IDLE_MS 500       /* how often an idle reader looks for work */
#define TICK_MS 250       /* how often progress reaches the status */

typedef struct arg {
    struct drv_imports *im;
    int self;
} arg_t;

struct drv_imports {
    drv_head_t *head;
    int n, started;
    arg_t args[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    char busy[MAX_THREADS][256];   /* the key each reader works on ("" idle); under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

typedef struct job {
    drv_imports_t *im;
    char key[256], token[64];
    int64_t last_ms;
} job_t;

static bool stopping(drv_imports_t *im)
{
    pthread_mutex_lock(&im->mu);
    bool s = im->stop;
    pthread_mutex_unlock(&im->mu);
    return s;
}

/* Under the state lock: the record, if it is still this import's. */
static drv_obj_t *mine(drv_state_t *st, const job_t *j)
{
    drv_obj_t *a = drv_state_get(st, DRV_K_ARTIFACT, j->key);
    const char *t = a ? drv_json_str(a->internal, "import") : NULL;
    return t && strcmp(t, j->token) == 0 ? a : NULL;
}

static int tick(void *ctx, size_t done, size_t files, uint64_t bytes)
{
    job_t *j = ctx;
    if (stopping(j->im))
        return 1;
    int64_t now = drv_now_ms();
    if (now - j->last_ms < TICK_MS && !(files && done == files))
        return 0;
    j->last_ms = now;
    drv_state_t *st = j->im->head->state;
    drv_state_wrlock(st);
    drv_obj_t *a = mine(st, j);
    if (a) {
        json_t *s = drv_kind_artifact.initial_status(a);
        json_object_set_new(s, "progress", json_pack("{s:I, s:I, s:I}", "files_done",
                                                     (json_int_t)done, "files",
                                                     (json_int_t)files, "bytes",
                                                     (json_int_t)bytes));
        drv_state_set_status(st, a, s);
    }
    drv_state_unlock(st);
    return a ? 0 : 1;
}

/* The result, written if the record is still this import's: its manifest
 * (ready) or the reason (failed). */
static void finish(job_t *j, const drv_manifest_t *m, const drv_error_t *err)
{
    drv_head_t *head = j->im->head;
    drv_state_t *st = head->state;
    json_t *man = NULL;
    if (m) {
        char *canon = drv_manifest_to_json(m);
        man = canon ? json_loads(canon, 0, NULL) : NULL;
        free(canon);
    }
    drv_state_wrlock(st);
    drv_obj_t *a = mine(st, j);
    if (!a) {
        drv_state_unlock(st);
        json_decref(man);
        drv_info("import of artifact %s: deleted or imported again while it was read; "
                 "result dropped", j->key);
        return;
    }
    json_t *spec = json_deep_copy(a->spec), *internal = NULL;
    if (man)
        json_object_set_new(spec, "manifest", man);
    else
        internal = json_pack("{s:s}", "import_error",
                             m ? "out of memory storing the manifest" : err->message);
    drv_obj_t *o = drv_obj_new(DRV_K_ARTIFACT, a->key, a->owner, a->id, spec, internal);
    o->created_at = a->created_at;
    o->updated_at = drv_now_ms() / 1000;
    o->rv = a->rv + 1;
    o->status = drv_kind_artifact.initial_status(o);
    char owner[64], id[160];
    snprintf(owner, sizeof owner, "%s", a->owner);
    snprintf(id, sizeof id, "%s", a->id);
    drv_state_put(st, o);   /* a pointer dies here */
    if (man)
        drv_events_add(head->events, owner, "artifact", id, "imported",
                       "imported: %zu file(s), %llu bytes, digest %s", m->nfiles,
                       (unsigned long long)m->total_size, m->digest);
    else
        drv_events_add(head->events, owner, "artifact", id, "import_failed", "import failed: %s",
                       m ? "out of memory" : err->message);
    drv_state_unlock(st);
    drv_head_kick(head);   /* replicas waiting for it */
    if (man)
        drv_info("artifact %s imported: %zu file(s), %llu bytes", j->key, m->nfiles,
                 (unsigned long long)m->total_size);
    else
        drv_warn("artifact %s: import failed: %s", j->key, m ? "out of memory" : err->message);
}

/* Under mu: is key taken by a reader? */
static bool taken(const drv_imports_t *im, const char *key)
{
    for (int i = 0; i < im->n; i++)
        if (strcmp(im->busy[i], key) == 0)
            return true;
    return false;
}

/* Under mu: the first importing artifact nobody reads (its spec copied), or NULL. */
static json_t *take(drv_imports_t *im, int self, job_t *j)
{
    drv_state_t *st = im->head->state;
    json_t *spec = NULL;
    drv_state_rdlock(st);
    for (size_t i = 0; i < drv_state_count(st, DRV_K_ARTIFACT) && !spec; i++) {
        const drv_obj_t *a = drv_state_at(st, DRV_K_ARTIFACT, i);
        const char *t = drv_json_str(a->internal, "import");
        if (!t || json_object_get(a->spec, "manifest") || taken(im, a->key))
            continue;
        snprintf(j->key, sizeof j->key, "%s", a->key);
        snprintf(j->token, sizeof j->token, "%s", t);
        spec = json_deep_copy(a->spec);
    }
    drv_state_unlock(st);
    if (spec)
        snprintf(im->busy[self], sizeof im->busy[self], "%s", j->key);
    return spec;
}

static void *reader(void *p)
{
    drv_imports_t *im = ((arg_t *)p)->im;
    int self = ((arg_t *)p)->self;
    pthread_mutex_lock(&im->mu);
    while (!im->stop) {
        job_t j = {.im = im};
        json_t *spec = take(im, self, &j);
        if (!spec) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += IDLE_MS * 1000000L;
            ts.tv_sec += ts.tv_nsec / 1000000000L;
            ts.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&im->cv, &im->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&im->mu);
        drv_info("importing artifact %s from %s", j.key, drv_json_str(spec, "source"));
        drv_error_t err = {0};
        drv_manifest_t *m = drv_sources_import(im->head, spec, tick, &j, &err);
        if (m || !stopping(im))
            finish(&j, m, &err);
        drv_manifest_free(m);
        json_decref(spec);
        pthread_mutex_lock(&im->mu);
        im->busy[self][0] = 0;
    }
    pthread_mutex_unlock(&im->mu);
    return NULL;
}

drv_imports_t *drv_imports_create(drv_head_t *head, int threads, drv_error_t *err)
{
    drv_imports_t *im = calloc(1, sizeof *im);
    if (!im)
        return drv_err_internal(err, "out of memory"), NULL;
    im->head = head;
    pthread_mutex_init(&im->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&im->cv, &ca);
    pthread_condattr_destroy(&ca);
    im->n = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    for (int i = 0; i < im->n; i++) {
        im->args[i] = (arg_t){im, i};
        if (pthread_create(&im->th[i], NULL, reader, &im->args[i]) != 0) {
            drv_imports_destroy(im);
            return drv_err_internal(err, "imports: cannot start a thread"), NULL;
        }
        im->started++;
    }
    return im;
}

void drv_imports_destroy(drv_imports_t *im)
{
    if (!im)
        return;
    pthread_mutex_lock(&im->mu);
    im->stop = true;
    pthread_cond_broadcast(&im->cv);
    pthread_mutex_unlock(&im->mu);
    for (int i = 0; i < im->started; i++)
        pthread_join(im->th[i], NULL);
    pthread_cond_destroy(&im->cv);
    pthread_mutex_destroy(&im->mu);
    free(im);
}
