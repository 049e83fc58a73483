/* aws_index.h — the aws provider's sorted lists (aws.c), as pure functions:
 * no locks, no I/O, no clock (times are arguments).
 *
 * The controller asks the provider about every node on every pass, under
 * the state write lock (alive, gone, instance_of): with thousands of EC2
 * nodes a linear scan per question makes a pass quadratic. So:
 *   - the instance list is kept sorted by (owner, node, instance id): a
 *     node's instances are one run found by binary search;
 *   - node references (the nodes that exist; launches queued or being made)
 *     are kept sorted by (owner, node), a multiset: binary search, or one
 *     forward walk when asked in ascending order (the orphan sweep);
 *   - a listing is merged into the instance list by sorting both sides by
 *     instance id and walking them once.
 * The caller owns the arrays (and their locking); helpers that add need
 * room for one more element. */
#ifndef DRV_AWS_INDEX_H
#define DRV_AWS_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider/ec2.h"
#include "provider/provider.h"

/* One instance as the provider knows it. */
typedef struct drv_aws_inst {
    drv_ec2_instance_t x;
    size_t acct;                 /* index of its account (aws.c) */
    int64_t added_ms;            /* launched by us at (0: from a listing) */
    int64_t orphan_since_ms;     /* 0: not an orphan */
    int64_t terminate_sent_ms;
    int missed;                  /* listings of its account since one last showed it */
} drv_aws_inst_t;

/* A machine once listed is gone after this many listings in a row without
 * it: one listing may miss a live machine (a page boundary moving under
 * deletions, a list that is only eventually consistent), and a machine
 * read as gone has its node released and replaced and is then terminated
 * as an orphan. */
#define DRV_AWS_MISSES_GONE 2

/* pending | running | stopping | stopped: not terminated nor shutting down. */
bool drv_aws_live_state(const char *state);

/* qsort comparators: instances by (owner, node, id); references by
 * (owner, node_id). */
int drv_aws_inst_cmp(const void *a, const void *b);
int drv_aws_ref_cmp(const void *a, const void *b);

/* The first live instance of node (owner, node) in v (sorted), or NULL. */
drv_aws_inst_t *drv_aws_inst_of_node(drv_aws_inst_t *v, size_t n, const char *owner,
                                     const char *node);

/* The instance `id` of node (owner, node) in v (sorted), or NULL. */
drv_aws_inst_t *drv_aws_inst_find(drv_aws_inst_t *v, size_t n, const char *owner,
                                  const char *node, const char *id);

/* Insert *in into v (sorted, room for one more); returns where it went. */
drv_aws_inst_t *drv_aws_inst_insert(drv_aws_inst_t *v, size_t *n, const drv_aws_inst_t *in);

/* Is (owner, node) in v (sorted references)? */
bool drv_aws_refs_has(const drv_node_ref_t *v, size_t n, const char *owner, const char *node);

/* Add one copy of (owner, node) to v (sorted, room for one more). */
void drv_aws_refs_add(drv_node_ref_t *v, size_t *n, const char *owner, const char *node);

/* Remove one copy of (owner, node) from v; false when there is none. */
bool drv_aws_refs_remove(drv_node_ref_t *v, size_t *n, const char *owner, const char *node);

/* Is (owner, node) in v (sorted)? For keys asked in ascending order: *at
 * (0 at first) only moves forward, so n questions cost O(n + len(v)). */
bool drv_aws_refs_walk(const drv_node_ref_t *v, size_t n, size_t *at, const char *owner,
                       const char *node);

/* The instance list after a listing of account `acct` that started at
 * started_ms and ended at now_ms: old's instances of other accounts, and of
 * this one those we launched since the listing started or less than
 * visible_ms ago (EC2 may not list a new instance for a while) and those
 * missed by fewer than DRV_AWS_MISSES_GONE listings with this one (their
 * missed count up by one), updated by the listing where it has them (its
 * word wins: added_ms and missed become 0); then
 * the listed instances not among them, of account acct, carrying the
 * orphan timers of old's instance with their id. Sorted (drv_aws_inst_cmp);
 * *n_out elements. NULL when out of memory (nothing changed). */
drv_aws_inst_t *drv_aws_merge_listing(const drv_aws_inst_t *old, size_t n_old, size_t acct,
                                      const drv_ec2_instance_t *listed, size_t n_listed,
                                      int64_t started_ms, int64_t now_ms, int64_t visible_ms,
                                      size_t *n_out);

#endif
