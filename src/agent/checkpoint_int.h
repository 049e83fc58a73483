/* checkpoint_int.h — what checkpoint.c (scopes, thread, restore) and
 * checkpoint_upload.c (one checkpoint's upload and commit) share. */
#ifndef DRV_CHECKPOINT_INT_H
#define DRV_CHECKPOINT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <jansson.h>

#include "agent/checkpoint.h"
#include "common/http_client.h"

struct drv_ckpt {
    char server[512], credential[128], data_dir[512];
    struct drv_cache *cache;
    uint64_t chunk_size;
    double upload_bps;           /* 0 = unbounded */
    int scan_ms;
    drv_hc_t *hc;                /* the thread's */
    pthread_t thread;
    pthread_mutex_t mu;          /* ents, their fields, st */
    pthread_cond_t cv;
    bool quit, joined;
    uint64_t gone_seq;           /* names of released directories being removed */
    atomic_bool stop;            /* abandons requests in flight */
    struct scope_ent *ents;
    drv_ckpt_stats_t st;
};

bool drv_ckpt_name_valid(const char *name);
bool drv_ckpt_quitting(drv_ckpt_t *c);
/* A call to the head with the node credential: 0 with *out (NULL-able) the
 * JSON answer of a 2xx; -1 with err (the head's message) otherwise. */
int drv_ckpt_call(drv_ckpt_t *c, const char *method, const char *path, const char *body,
                  json_t **out, drv_error_t *err);
/* Upload dir/name and commit it with keep (the thread). 0 with *pruned the
 * names the head deleted; -1 with why (*refuse: never retry it). */
int drv_ckpt_upload(drv_ckpt_t *c, const char *scope, const char *dir, const char *name,
                    int keep, json_t **pruned, bool *refuse, char *why, size_t wl);
void drv_ckpt_count(drv_ckpt_t *c, int committed, int rejected, int failed, uint64_t sent,
                    uint64_t skipped, int restored, const char *last);

#endif
