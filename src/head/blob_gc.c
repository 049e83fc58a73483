/* blob_gc.c — see blob_gc.h. One thread; it holds the state lock only to
 * copy the artifacts' sha256s. */
#include "head/blob_gc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "state/state.h"
#include "store/blobs.h"

struct drv_blob_gc {
    drv_head_t *head;
    int interval_s;
    int64_t grace_s, expiry_s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void pass(drv_blob_gc_t *g, unsigned long n)
{
    drv_state_t *st = g->head->state;
    size_t cap = 0, k = 0;
    char **refs = NULL;
    drv_state_rdlock(st);
    for (size_t i = 0; i < drv_state_count(st, DRV_K_ARTIFACT); i++) {
        const drv_obj_t *a = drv_state_at(st, DRV_K_ARTIFACT, i);
        size_t j;
        json_t *f;
        json_array_foreach(json_object_get(json_object_get(a->spec, "manifest"), "files"), j, f) {
            const char *h = json_string_value(json_object_get(f, "sha256"));
            if (!h)
                continue;
            if (k == cap && !(refs = realloc(refs, (cap = cap ? 2 * cap : 256) * sizeof *refs)))
                abort();
            refs[k++] = drv_strdup(h);
        }
    }
    drv_state_unlock(st);
    if (k)
        qsort(refs, k, sizeof *refs, cmp);
    drv_blobs_gc_stats_t s;
    drv_error_t err;
    if (drv_blobs_gc(g->head->blobs, (const char *const *)refs, k, drv_now_ms() / 1000,
                     g->grace_s, g->expiry_s, &s, &err) < 0)
        drv_warn("%s", err.message);
    else if (s.unheld || s.removed || s.partials || s.expired)
        drv_info("blob gc pass %lu: %zu upload(s) expired, %zu blob(s) no longer held by "
                 "anyone, %zu removed (%llu bytes), %zu partial blob(s) removed, of %zu", n,
                 s.expired, s.unheld, s.removed, (unsigned long long)s.removed_bytes,
                 s.partials, s.blobs);
    else
        drv_debug("blob gc pass %lu: nothing to remove (%zu blobs)", n, s.blobs);
    for (size_t i = 0; i < k; i++)
        free(refs[i]);
    free(refs);
}

static void *gc_main(void *arg)
{
    drv_blob_gc_t *g = arg;
    unsigned long n = 0;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += g->interval_s;
        while (!g->stop && pthread_cond_timedwait(&g->cv, &g->mu, &ts) == 0)
            ;
        if (g->stop)
            break;
        pthread_mutex_unlock(&g->mu);
        pass(g, ++n);
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

drv_blob_gc_t *drv_blob_gc_create(drv_head_t *head, int interval_s, int64_t grace_s,
                                  int64_t upload_expiry_s, drv_error_t *err)
{
    drv_blob_gc_t *g = calloc(1, sizeof *g);
    if (!g)
        return drv_err_internal(err, "out of memory"), NULL;
    g->head = head;
    g->interval_s = interval_s;
    g->grace_s = grace_s;
    g->expiry_s = upload_expiry_s;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&g->thread, NULL, gc_main, g) != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return drv_err_internal(err, "blob gc: cannot start its thread"), NULL;
    }
    return g;
}

void drv_blob_gc_destroy(drv_blob_gc_t *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
