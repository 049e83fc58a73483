/* timeline.c — stamps of a replica's cold start and its split into
 * waiting for a node, fetch and load (see timeline.h). */
#include "state/timeline.h"

#include <stdbool.h>
#include <string.h>

static int64_t get_ms(const json_t *tl, const char *k)
{
    const json_t *v = json_object_get(tl, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

void drv_timeline_carry(const json_t *from, json_t *to)
{
    const json_t *tl = json_object_get(from, "timeline"), *cs = json_object_get(from, "cold_start");
    if (json_is_object(tl) && !json_object_get(to, "timeline"))
        json_object_set_new(to, "timeline", json_deep_copy(tl));
    if (json_is_object(cs) && !json_object_get(to, "cold_start"))
        json_object_set_new(to, "cold_start", json_deep_copy(cs));
}

void drv_timeline_stamp(json_t *status, const char *key, int64_t now_ms)
{
    json_t *tl = json_object_get(status, "timeline");
    if (!json_is_object(tl)) {
        tl = json_object();
        json_object_set_new(status, "timeline", tl);
    }
    if (!json_object_get(tl, key))
        json_object_set_new(tl, key, json_integer((json_int_t)now_ms));
}

static double secs(int64_t a, int64_t b)
{
    return b > a ? (double)(b - a) / 1000.0 : 0.0;
}

/* The split, once ready: wait = created → the node's first step (fetch or
 * process start), fetch = fetch start → process start, load = process
 * start → ready. */
static void split(json_t *status, json_t *tl)
{
    int64_t created = get_ms(tl, "created_ms"), placed = get_ms(tl, "placed_ms");
    int64_t fs = get_ms(tl, "fetch_started_ms"), ps = get_ms(tl, "process_started_ms");
    int64_t ready = get_ms(tl, "ready_ms");
    if (!created || !placed || !ready || !ps)
        return;   /* the head did not see it start (a head restart) */
    int64_t first = fs ? fs : ps;
    json_t *cs = json_pack("{s:f, s:f, s:f, s:f, s:f}", "waiting_seconds", secs(created, first),
                           "placement_seconds", secs(created, placed), "fetch_seconds",
                           fs ? secs(fs, ps) : 0.0, "load_seconds", secs(ps, ready),
                           "total_seconds", secs(created, ready));
    json_object_set_new(status, "cold_start", cs);
}

/* A fetch that began and ended between two reports was never seen: its start
 * is the agent's own measure back from now (status.fetch.seconds), not
 * before the placement. */
static void infer_fetch_start(json_t *status, const json_t *tl, int64_t now_ms)
{
    const json_t *sec = json_object_get(json_object_get(status, "fetch"), "seconds");
    if (!json_is_number(sec) || json_number_value(sec) < 0)
        return;   /* no artifact, or no fetch measured */
    int64_t fs = now_ms - (int64_t)(json_number_value(sec) * 1000), placed = get_ms(tl, "placed_ms");
    drv_timeline_stamp(status, "fetch_started_ms", fs > placed ? fs : placed);
}

void drv_timeline_observe(json_t *status, int64_t now_ms)
{
    const char *st = json_string_value(json_object_get(status, "state"));
    if (!st)
        return;
    json_t *tl = json_object_get(status, "timeline");
    bool fetching = strcmp(st, "fetching") == 0, starting = strcmp(st, "starting") == 0,
         ready = strcmp(st, "ready") == 0;
    if (!fetching && !starting && !ready)
        return;
    if (!json_is_object(tl) || get_ms(tl, "ready_ms"))
        return;   /* the cold start is over (later restarts are not cold starts) */
    if (fetching)
        drv_timeline_stamp(status, "fetch_started_ms", now_ms);
    if ((starting || ready) && !get_ms(tl, "fetch_started_ms") && !get_ms(tl, "process_started_ms"))
        infer_fetch_start(status, tl, now_ms);
    if (starting)
        drv_timeline_stamp(status, "process_started_ms", now_ms);
    if (ready) {
        /* fetching → ready between two reports: the fetch ended after
         * fetch.seconds (the agent's measure) */
        int64_t fs = get_ms(tl, "fetch_started_ms");
        const json_t *sec = json_object_get(json_object_get(status, "fetch"), "seconds");
        if (!get_ms(tl, "process_started_ms")) {
            int64_t ps = fs && json_is_number(sec) ? fs + (int64_t)(json_number_value(sec) * 1000)
                                                   : now_ms;
            drv_timeline_stamp(status, "process_started_ms", ps < now_ms ? ps : now_ms);
        }
        drv_timeline_stamp(status, "ready_ms", now_ms);
        split(status, tl);
    }
}
