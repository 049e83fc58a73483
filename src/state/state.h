/* state.h — the head's in-memory objects, the single owner of desired state.
 *
 * Every durable object (users, tokens, clusters, nodepools, models,
 * deployments, artifacts, jobs) lives here, in one sorted collection per kind, keyed by
 * "owner/id" ("owner/cluster/id" for nodepools, "id" for users). Reads and
 * writes take the state lock (a writer-preferring rwlock); writes change
 * memory and queue the record to the store in the same critical section, so
 * the store sees changes in the order memory did. No I/O happens under the
 * lock: the store's writer thread commits later and the API holds the
 * answer back until drv_store_committed() reaches the write's seq.
 *
 * Each object caches its public JSON rendering, so a GET copies one string.
 */
#ifndef DRV_STATE_H
#define DRV_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "store/store.h"

typedef enum drv_kind {
    DRV_K_USER,
    DRV_K_TOKEN,
    DRV_K_CLUSTER,
    DRV_K_NODEPOOL,
    DRV_K_MODEL,
    DRV_K_DEPLOYMENT,
    DRV_K_JOINTOKEN,
    DRV_K_NODE,
    DRV_K_REPLICA,
    DRV_K_CREDENTIAL,     /* cloud credentials: the secret is stored, never rendered */
    DRV_K_ARTIFACT,       /* model artifacts: a source and a manifest (api/h_artifacts.c) */
    DRV_K_STORE,          /* operators' S3 stores, keyed by id alone: the secret is stored, never rendered */
    DRV_K_JOB,            /* training jobs: gang-scheduled workers (api/h_jobs.c, state/jobs.h) */
    DRV_K_AUDIT,          /* the audit log's entries, keyed by time (api/audit.h) */
    DRV_K__COUNT
} drv_kind_t;

extern const char *const drv_kind_names[DRV_K__COUNT];

/* Soft, in-memory facts about an object's identity (not its version):
 * carried from an object to its replacement by drv_state_put. */
typedef struct drv_soft {
    int64_t seen_ms;      /* nodes: monotonic time of the last sync (0 = never) */
    uint64_t version;     /* nodes: desired-set version */
    int node_state;       /* nodes: DRV_NODE_* */
    char aux[128];        /* nodes: the agent's log endpoint + key */
    int64_t stop_sent_ms; /* nodes: when the provider was last asked to release it */
    int64_t empty_since_ms; /* nodes: wall-clock ms since it holds no replica (0: not empty) */
    int64_t status_ms;    /* nodes: monotonic time its reported status was last rendered */
    int64_t cost_s;       /* nodes: epoch s its status.cost was last rendered (cost.c) */
} drv_soft_t;

typedef struct drv_obj {
    drv_kind_t kind;
    char *key;            /* collection key */
    char *owner;          /* user id (users: themselves) */
    char *id;
    json_t *spec;         /* public fields: id, user-given fields, defaults */
    json_t *internal;     /* never rendered: token hash, ...; may be NULL */
    json_t *status;       /* soft, not stored; rendered as "status"; may be NULL */
    drv_soft_t soft;      /* soft, not stored, not rendered */
    int64_t created_at, updated_at;   /* epoch seconds */
    int64_t rv;           /* resource_version */
    uint64_t seq;         /* store seq of the last write */
    char *hash;           /* tokens, join tokens, nodes: internal.hash, indexed */
    char *rendered;       /* public JSON, compact */
    size_t rendered_len;
    char *envelope;       /* storage form, made by drv_obj_prepare (NULL otherwise) */
} drv_obj_t;

typedef struct drv_state drv_state_t;

drv_state_t *drv_state_create(drv_store_t *store);
void drv_state_destroy(drv_state_t *st);

/* Load every stored record (before drv_store_start). */
int drv_state_load(drv_state_t *st, drv_error_t *err);

void drv_state_rdlock(drv_state_t *st);
void drv_state_wrlock(drv_state_t *st);
void drv_state_unlock(drv_state_t *st);

/* --- under the lock ----------------------------------------------------- */
drv_obj_t *drv_state_get(drv_state_t *st, drv_kind_t kind, const char *key);
/* Object whose internal.hash is hash (tokens, join tokens, node credentials). */
drv_obj_t *drv_state_by_hash(drv_state_t *st, const char *hash);
size_t drv_state_count(drv_state_t *st, drv_kind_t kind);
/* First index whose key >= key (binary search); objects at [i, count). */
size_t drv_state_lower_bound(drv_state_t *st, drv_kind_t kind, const char *key);
drv_obj_t *drv_state_at(drv_state_t *st, drv_kind_t kind, size_t i);

/* New object, not yet in the state (spec/internal references are stolen). */
drv_obj_t *drv_obj_new(drv_kind_t kind, const char *key, const char *owner, const char *id,
                       json_t *spec, json_t *internal);
void drv_obj_free(drv_obj_t *o);
/* Render an object before taking the state lock (the costly part of a put):
 * drv_state_put then only indexes and queues it. Optional. */
void drv_obj_prepare(drv_obj_t *o);

/* Insert obj, replacing any object of that key (freed: pointers to it die).
 * The caller has set rv, created_at, updated_at. The replaced object's soft
 * facts carry over, and so does its status unless obj has one. Renders it
 * and queues the store write; returns the write's seq. */
uint64_t drv_state_put(drv_state_t *st, drv_obj_t *obj);
/* Remove and free; returns the write's seq (0 when absent). */
uint64_t drv_state_del(drv_state_t *st, drv_kind_t kind, const char *key);
/* Remove and free the first n objects of kind (in key order) in one removal
 * of a prefix (whole chunks dropped, one moved in part): n deletes queued
 * in order; the last one's seq (0: none). */
uint64_t drv_state_del_first(drv_state_t *st, drv_kind_t kind, size_t n);
/* Replace the soft status of an object and re-render it (no store write). */
void drv_state_set_status(drv_state_t *st, drv_obj_t *obj, json_t *status);

/* A standby head follows the leader's record log (store/lease.h): apply one
 * record, replacing the object of (kind, key), or removing it when body is
 * NULL. Memory only, no store write; the object has no soft status (the
 * head that takes over sets it, as at a start). Under the write lock. */
int drv_state_apply(drv_state_t *st, const char *kind, const char *key, const char *body,
                    drv_error_t *err);

/* Highest seq assigned so far (for read-your-writes on lists). */
uint64_t drv_state_last_seq(drv_state_t *st);

#endif
