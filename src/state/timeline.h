/* timeline.h — a replica's cold start as the head saw it: when the record
 * was made, placed, began fetching its artifact, started its process and
 * became ready (status.timeline, epoch ms, the head's clock), and the split
 * of that cold start into waiting for a node, fetch and load
 * (status.cold_start, seconds), frozen when the replica is first ready.
 *
 * Each transition is stamped when the head first sees it: at placement
 * (the controller) or in the agent's next report (≤ 0.3 s while a replica
 * is in transition). Status is soft: a head restart loses the timeline,
 * and a replica the head did not see placed gets no cold_start. */
#ifndef DRV_STATE_TIMELINE_H
#define DRV_STATE_TIMELINE_H

#include <jansson.h>
#include <stdint.h>

/* Copy from's timeline (and cold_start) into to, a new status. */
void drv_timeline_carry(const json_t *from, json_t *to);

/* Stamp key ("created_ms", "placed_ms", ...) in status's timeline at now
 * unless it is set. */
void drv_timeline_stamp(json_t *status, const char *key, int64_t now_ms);

/* A reported status (its state, and fetch.seconds) arrived: stamp what it
 * shows for the first time, and when the replica is ready for the first
 * time, compute cold_start. status carries the old timeline already. */
void drv_timeline_observe(json_t *status, int64_t now_ms);

#endif
