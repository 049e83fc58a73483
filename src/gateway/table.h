/* table.h — the inference gateway's pure parts: the routing table (built
 * from the head's state in api/gateway_state.c), the power-of-two-choices
 * pick, the bounded FIFO that holds requests waiting for capacity, and the
 * scan that finds an OpenAI body's "model" without parsing the whole body.
 *
 * The routing table is an immutable snapshot: the controller builds it at
 * the end of each full pass (under the state write lock, without I/O) and
 * hands it to the gateway thread, which copies what it needs into its own
 * long-lived per-deployment and per-replica objects and frees the table.
 * No other thread ever reads a table, so tables need no locks and no
 * grace period.
 *
 * Everything here is a pure function of its arguments (tested in
 * t/unit/test_gateway.c).
 */
#ifndef DRV_GW_TABLE_H
#define DRV_GW_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A replica the gateway may send to (ready) or may probe (starting). */
typedef struct drv_gw_trep {
    const char *key;         /* "owner/deployment/replica" */
    const char *id;          /* replica id */
    const char *endpoint;    /* "http://127.0.0.1:41001" (no trailing slash) */
    bool ready;              /* status ready on a ready node that is not draining;
                                false: starting there (a cold-start probe candidate) */
} drv_gw_trep_t;

typedef struct drv_gw_tdep {
    const char *key;         /* "owner/deployment" */
    const char *owner, *id;
    const char *predict_path;    /* the model's runtime.predict_path */
    const char *health_path;     /* runtime.health_path */
    int max_concurrency;     /* per replica (model runtime.max_concurrency); 0 = no limit */
    int cold_start_ms;       /* autoscale.cold_start_timeout_seconds, in ms */
    bool enabled;
    int64_t created;         /* the deployment's created_at, epoch seconds (its OpenAI model's) */
    int desired_replicas, ready_replicas;   /* the deployment's status (metrics history) */
    size_t first, n;         /* its replicas: reps[first .. first + n), sorted by key */
} drv_gw_tdep_t;

typedef struct drv_gw_chunk drv_gw_chunk_t;

typedef struct drv_gw_table {
    drv_gw_tdep_t *deps;     /* sorted by key (strcmp), like the state */
    size_t n_deps;
    drv_gw_trep_t *reps;
    size_t n_reps;
    drv_gw_chunk_t *chunks;  /* string arena */
    int64_t built_us;        /* monotonic µs, set by the publisher */
} drv_gw_table_t;

/* Defaults where the spec has no value (older objects). */
#define DRV_GW_DEFAULT_MAX_CONCURRENCY 64
#define DRV_GW_DEFAULT_COLD_START_S 300

/* Built from droverd's state by api/gateway_state.c (drv_gw_table_build),
 * from a routes document by routes_doc.c; strings live in its arena. */
void drv_gw_table_free(drv_gw_table_t *t);
/* A copy of s in t's string arena (lives as long as t). */
const char *drv_gw_table_str(drv_gw_table_t *t, const char *s);
/* Deployment of key, NULL when absent (binary search). */
const drv_gw_tdep_t *drv_gw_table_find(const drv_gw_table_t *t, const char *key);

/* Power of two choices over n replicas with outstanding[i] requests each:
 * of two distinct random eligible replicas, the one with fewer outstanding
 * (ties: the first drawn). Eligible: outstanding < limit (limit 0: no
 * limit) and index != skip (skip < 0: none). One eligible: that one. None:
 * -1. rng is an xorshift64 state (never 0). */
int drv_gw_p2c(const uint32_t *outstanding, size_t n, uint32_t limit, int skip, uint64_t *rng);
uint64_t drv_gw_rand(uint64_t *rng);

/* A bounded FIFO over intrusive links (a request waits in at most one). */
typedef struct drv_gw_link {
    struct drv_gw_link *prev, *next;
} drv_gw_link_t;

typedef struct drv_gw_fifo {
    drv_gw_link_t *head, *tail;
    size_t n, cap;           /* cap 0: unbounded */
} drv_gw_fifo_t;

/* Append; -1 (nothing changed) when full. */
int drv_gw_fifo_push(drv_gw_fifo_t *q, drv_gw_link_t *l);
drv_gw_link_t *drv_gw_fifo_pop(drv_gw_fifo_t *q);
/* Remove l, which must be in q. */
void drv_gw_fifo_remove(drv_gw_fifo_t *q, drv_gw_link_t *l);

/* The q-quantile (0 < q < 1) in ms of a latency histogram: counts[i] of
 * observations <= bounds[i] seconds (and > bounds[i - 1]), counts[nb] above
 * the last bound; linear inside a bucket. -1 when the histogram is empty. */
double drv_gw_quantile_ms(const uint64_t *counts, const double *bounds, size_t nb, double q);

/* The string value of the top-level "model" key of a JSON object body,
 * copied into out (NUL-terminated). Strings and nesting are skipped
 * properly; escapes in the value are decoded for \" \\ \/ only (a
 * deployment id has none). -1 when the body is not an object, has no
 * top-level "model", its value is not a string, or does not fit. */
int drv_gw_json_model(const char *body, size_t len, char *out, size_t outlen);

#endif
