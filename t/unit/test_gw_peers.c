/* test_gw_peers.c — standalone gateways' running service totals (issue 20):
 * their encoding and checked decoding (gateway/totals.h: every total of the
 * table round-trips, the prompt histogram sparse; wrong types, negatives,
 * absurd numbers, bad bins refused naming the field), the difference of
 * two reports (a total that went down: a restart), and the head's sums
 * over gateways (api/gateway_peers.h: two gateways, a restart, a gateway
 * gone, a bad report changing nothing, old reports without totals, the
 * /metrics series). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gateway_peers.h"
#include "common/util.h"
#include "gateway/totals.h"

static uint64_t *field_of(drv_gw_demand_t *d, size_t i)
{
    return (uint64_t *)((char *)d + drv_gw_total_fields[i].off);
}

/* Totals 1000 * (i + 1) + base, bins 3 and 127 set. */
static void fill(drv_gw_demand_t *d, uint64_t base)
{
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < drv_gw_n_total_fields; i++)
        *field_of(d, i) = 1000 * (i + 1) + base;
    d->prompt_hist[3] = 7 + base;
    d->prompt_hist[127] = 1 + base;
}

static void assert_totals_equal(const drv_gw_demand_t *a, const drv_gw_demand_t *b)
{
    for (size_t i = 0; i < drv_gw_n_total_fields; i++)
        assert_int_equal(*field_of((drv_gw_demand_t *)a, i), *field_of((drv_gw_demand_t *)b, i));
    assert_memory_equal(a->prompt_hist, b->prompt_hist, sizeof a->prompt_hist);
}

static void test_table(void **state)
{
    (void)state;
    /* every named total is a distinct member, arrivals among them */
    assert_true(drv_gw_n_total_fields >= 12);
    bool arrivals = false;
    for (size_t i = 0; i < drv_gw_n_total_fields; i++) {
        arrivals = arrivals || strcmp(drv_gw_total_fields[i].name, "arrivals") == 0;
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(drv_gw_total_fields[i].off, drv_gw_total_fields[j].off);
            assert_string_not_equal(drv_gw_total_fields[i].name, drv_gw_total_fields[j].name);
        }
    }
    assert_true(arrivals);
    assert_int_equal(drv_gw_total_fields[0].off, offsetof(drv_gw_demand_t, arrivals));
}

static void test_round_trip(void **state)
{
    (void)state;
    drv_gw_demand_t d, back;
    fill(&d, 5);
    d.in_flight = 3;   /* not a total: not carried */
    json_t *o = json_object();
    assert_int_equal(drv_gw_totals_to_json(&d, o), 0);
    assert_int_equal(json_integer_value(json_object_get(o, "arrivals")), 1005);
    json_t *h = json_object_get(o, "prompt_hist");
    assert_int_equal(json_array_size(h), 2);   /* sparse: the non-zero bins */
    assert_int_equal(json_integer_value(json_array_get(json_array_get(h, 0), 0)), 3);
    assert_int_equal(json_integer_value(json_array_get(json_array_get(h, 0), 1)), 12);
    assert_int_equal(json_integer_value(json_array_get(json_array_get(h, 1), 0)), 127);
    assert_null(json_object_get(o, "in_flight"));
    /* through text, as the report travels */
    char *txt = json_dumps(o, JSON_COMPACT);
    json_t *o2 = json_loads(txt, 0, NULL);
    bool has = false;
    drv_error_t err;
    memset(&back, 0xab, sizeof back);
    assert_int_equal(drv_gw_totals_from_json(o2, "deployments[0]", &back, &has, &err), 0);
    assert_true(has);
    assert_totals_equal(&d, &back);
    /* too large to send: capped at the bound, which the head accepts */
    d.served_us = UINT64_MAX;
    json_object_clear(o);
    assert_int_equal(drv_gw_totals_to_json(&d, o), 0);
    assert_int_equal(drv_gw_totals_from_json(o, "d", &back, &has, &err), 0);
    assert_int_equal(back.served_us, DRV_GW_TOTAL_MAX);
    /* an old report's entry: no totals, all zero */
    json_t *old = json_pack("{s:s, s:i, s:i, s:b}", "deployment", "a/b", "in_flight", 1,
                            "queued", 0, "cold", 0);
    assert_int_equal(drv_gw_totals_from_json(old, "d", &back, &has, &err), 0);
    assert_false(has);
    assert_false(drv_gw_totals_any(&back));
    free(txt);
    json_decref(o);
    json_decref(o2);
    json_decref(old);
}

/* entry (JSON text) is refused with a 400 naming field, and its message
 * contains word. */
static void refused(const char *entry, const char *field, const char *word)
{
    json_t *o = json_loads(entry, 0, NULL);
    assert_non_null(o);
    drv_gw_demand_t d;
    bool has;
    drv_error_t err;
    memset(&err, 0, sizeof err);
    assert_int_equal(drv_gw_totals_from_json(o, "deployments[2]", &d, &has, &err), -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.field, field);
    if (!strstr(err.message, word))
        fail_msg("'%s': message '%s' lacks '%s'", entry, err.message, word);
    json_decref(o);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("{\"served\": \"3\"}", "deployments[2].served", "another type");
    refused("{\"served\": 1.5}", "deployments[2].served", "another type");
    refused("{\"arrivals\": -1}", "deployments[2].arrivals", "out of range");
    refused("{\"served_pf_ms\": 4611686018427387905}", "deployments[2].served_pf_ms",
            "out of range");
    refused("{\"arrivals\": 1, \"prompt_hist\": {}}", "deployments[2].prompt_hist", "array");
    refused("{\"prompt_hist\": [[1]]}", "deployments[2].prompt_hist", "[bin, count]");
    refused("{\"prompt_hist\": [[1, -2]]}", "deployments[2].prompt_hist", "[bin, count]");
    refused("{\"prompt_hist\": [[\"1\", 2]]}", "deployments[2].prompt_hist", "[bin, count]");
    refused("{\"prompt_hist\": [[128, 2]]}", "deployments[2].prompt_hist", "out of range");
    refused("{\"prompt_hist\": [[-1, 2]]}", "deployments[2].prompt_hist", "out of range");
    refused("{\"prompt_hist\": [[4, 2], [4, 1]]}", "deployments[2].prompt_hist", "twice");
    /* more pairs than bins */
    json_t *h = json_array();
    for (int b = 0; b <= DRV_PROMPTLEN_BINS; b++)
        json_array_append_new(h, json_pack("[i, i]", b % DRV_PROMPTLEN_BINS, 1));
    json_t *o = json_pack("{s:o}", "prompt_hist", h);
    char *txt = json_dumps(o, 0);
    refused(txt, "deployments[2].prompt_hist", "at most 128");
    free(txt);
    json_decref(o);
    /* zero counts and the bounds themselves are fine */
    o = json_loads("{\"arrivals\": 4611686018427387904, \"prompt_hist\": [[0, 0], [127, 1]]}",
                   0, NULL);
    drv_gw_demand_t d;
    bool has;
    drv_error_t err;
    assert_int_equal(drv_gw_totals_from_json(o, "x", &d, &has, &err), 0);
    assert_int_equal(d.arrivals, DRV_GW_TOTAL_MAX);
    assert_int_equal(d.prompt_hist[127], 1);
    json_decref(o);
}

static void test_delta(void **state)
{
    (void)state;
    drv_gw_demand_t sum, a, b;
    memset(&sum, 0, sizeof sum);
    fill(&a, 0);
    drv_gw_totals_add_delta(&sum, NULL, &a);   /* first seen: all of it */
    assert_totals_equal(&sum, &a);
    fill(&b, 10);
    drv_gw_totals_add_delta(&sum, &a, &b);     /* growth only: sum == b */
    assert_totals_equal(&sum, &b);
    drv_gw_totals_add_delta(&sum, &b, &b);     /* nothing new */
    assert_totals_equal(&sum, &b);
    assert_false(drv_gw_totals_went_down(&a, &b));
    /* a restart: one total went down -> the new totals count from zero */
    drv_gw_demand_t r;
    memset(&r, 0, sizeof r);
    r.arrivals = 2;
    r.served = 1;
    r.prompt_hist[9] = 2;
    assert_true(drv_gw_totals_went_down(&b, &r));
    drv_gw_totals_add_delta(&sum, &b, &r);
    assert_int_equal(sum.arrivals, b.arrivals + 2);
    assert_int_equal(sum.served, b.served + 1);
    assert_int_equal(sum.served_us, b.served_us);
    assert_int_equal(sum.prompt_hist[9], 2);
    assert_int_equal(sum.prompt_hist[3], b.prompt_hist[3]);
    /* a histogram bin alone going down is a restart too */
    drv_gw_demand_t c = b;
    c.prompt_hist[3]--;
    assert_true(drv_gw_totals_went_down(&b, &c));
    /* the fields beside the totals are left alone */
    sum.in_flight = 9;
    sum.max_concurrency = 4;
    drv_gw_totals_add_delta(&sum, NULL, &r);
    assert_int_equal(sum.in_flight, 9);
    assert_int_equal(sum.max_concurrency, 4);
}

/* --- the head's sums --------------------------------------------------------------------- */

/* A report of gateway gw at now: each deployment "admin/KEY" with arrivals
 * and served (and bin 5 = arrivals); -1 for an entry without totals. */
static int report(drv_gw_peers_t *p, int64_t now, const char *gw, const char *key, long arrivals,
                  long served, drv_error_t *err)
{
    char txt[512];
    if (arrivals < 0)
        snprintf(txt, sizeof txt, "{\"gateway\": \"%s\", \"deployments\": [{\"deployment\": "
                 "\"admin/%s\", \"in_flight\": 1, \"queued\": 0, \"cold\": false}]}", gw, key);
    else
        snprintf(txt, sizeof txt, "{\"gateway\": \"%s\", \"deployments\": [{\"deployment\": "
                 "\"admin/%s\", \"in_flight\": 0, \"queued\": 0, \"cold\": false, \"arrivals\": "
                 "%ld, \"served\": %ld, \"prompt_hist\": [[5, %ld]]}]}", gw, key, arrivals,
                 served, arrivals);
    json_t *body = json_loads(txt, 0, NULL);
    assert_non_null(body);
    int rc = drv_gw_peers_report_at(p, NULL, body, now, err);
    json_decref(body);
    return rc;
}

static uint64_t arrivals_of(drv_gw_peers_t *p, const char *key, uint64_t *served,
                            uint64_t *bin5)
{
    drv_gw_demand_t d;
    memset(&d, 0, sizeof d);
    if (!drv_gw_peers_service(p, key, &d))
        return UINT64_MAX;
    if (served)
        *served = d.served;
    if (bin5)
        *bin5 = d.prompt_hist[5];
    return d.arrivals;
}

static void test_sums(void **state)
{
    (void)state;
    drv_gw_peers_t *p = drv_gw_peers_create();
    drv_error_t err;
    int64_t t = drv_mono_ms();   /* the load counts against the clock */
    assert_int_equal(arrivals_of(p, "admin/web", NULL, NULL), UINT64_MAX);   /* none yet */
    /* an old gateway's report (no totals): load only, no sums */
    assert_int_equal(report(p, t, "old", "web", -1, 0, &err), 0);
    assert_int_equal(arrivals_of(p, "admin/web", NULL, NULL), UINT64_MAX);
    double load = 0;
    bool waiting = false;
    drv_gw_peers_load(p, "admin/web", &load, &waiting);
    assert_true(load == 1.0);

    /* two gateways: their growth adds up */
    assert_int_equal(report(p, t, "a", "web", 10, 8, &err), 0);
    assert_int_equal(report(p, t, "b", "web", 5, 5, &err), 0);
    uint64_t served, bin5;
    assert_int_equal(arrivals_of(p, "admin/web", &served, &bin5), 15);
    assert_int_equal(served, 13);
    assert_int_equal(bin5, 15);
    assert_int_equal(report(p, t + 1000, "a", "web", 12, 11, &err), 0);
    assert_int_equal(report(p, t + 1000, "b", "web", 5, 5, &err), 0);   /* idle */
    assert_int_equal(arrivals_of(p, "admin/web", &served, NULL), 17);
    assert_int_equal(served, 16);

    /* a bad report (its second entry) changes nothing, not even its first entry */
    json_t *bad = json_loads("{\"gateway\": \"a\", \"deployments\": ["
                             "{\"deployment\": \"admin/web\", \"in_flight\": 0, \"queued\": 0, "
                             "\"cold\": false, \"arrivals\": 100, \"served\": 100},"
                             "{\"deployment\": \"admin/other\", \"in_flight\": 0, \"queued\": 0, "
                             "\"cold\": false, \"arrivals\": 3, \"served\": -1}]}", 0, NULL);
    assert_int_equal(drv_gw_peers_report_at(p, NULL, bad, t + 2000, &err), -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.field, "deployments[1].served");
    json_decref(bad);
    bad = json_loads("{\"gateway\": \"a\", \"deployments\": ["
                     "{\"deployment\": \"admin/web\", \"in_flight\": 0, \"queued\": 0, "
                     "\"cold\": false, \"arrivals\": 100},"
                     "{\"deployment\": \"admin/web\", \"in_flight\": 0, \"queued\": 0, "
                     "\"cold\": false, \"arrivals\": 100}]}", 0, NULL);
    assert_int_equal(drv_gw_peers_report_at(p, NULL, bad, t + 2000, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "twice"));
    json_decref(bad);
    assert_int_equal(arrivals_of(p, "admin/web", &served, NULL), 17);
    assert_int_equal(arrivals_of(p, "admin/other", NULL, NULL), UINT64_MAX);
    /* ... and a's last totals are still those of its last good report */
    assert_int_equal(report(p, t + 3000, "a", "web", 13, 12, &err), 0);
    assert_int_equal(arrivals_of(p, "admin/web", NULL, NULL), 18);

    /* a restarts: its totals went down, they count from zero */
    assert_int_equal(report(p, t + 4000, "a", "web", 2, 1, &err), 0);
    assert_int_equal(arrivals_of(p, "admin/web", &served, &bin5), 20);
    assert_int_equal(served, 12 + 5 + 1);
    assert_int_equal(bin5, 20);
    assert_int_equal(report(p, t + 5000, "a", "web", 4, 4, &err), 0);
    assert_int_equal(arrivals_of(p, "admin/web", NULL, NULL), 22);

    /* b goes away: its share stays in the sums, also once forgotten (an hour
     * of silence) */
    assert_int_equal(report(p, t + 3 * 3600 * 1000, "a", "web", 6, 6, &err), 0);
    assert_int_equal(arrivals_of(p, "admin/web", NULL, NULL), 24);
    /* a's report without the deployment, then with it again from zero (its
     * registry dropped and remade it): counted from zero */
    assert_int_equal(report(p, t + 3 * 3600 * 1000 + 1, "a", "other", 1, 1, &err), 0);
    assert_int_equal(report(p, t + 3 * 3600 * 1000 + 2, "a", "web", 1, 1, &err), 0);
    assert_int_equal(arrivals_of(p, "admin/web", NULL, NULL), 25);
    assert_int_equal(arrivals_of(p, "admin/other", NULL, NULL), 1);

    /* /metrics: the sums of arrivals per deployment, by owner */
    char *buf = NULL;
    size_t len = 0, cap = 0;
    drv_gw_peers_metrics(p, NULL, &buf, &len, &cap);
    assert_non_null(strstr(buf, "# TYPE drover_gateway_peer_routed_total counter\n"));
    assert_non_null(
        strstr(buf, "drover_gateway_peer_routed_total{owner=\"admin\",deployment=\"web\"} 25\n"));
    assert_non_null(
        strstr(buf, "drover_gateway_peer_routed_total{owner=\"admin\",deployment=\"other\"} 1\n"));
    free(buf);
    buf = NULL;
    len = cap = 0;
    drv_gw_peers_metrics(p, "bob", &buf, &len, &cap);
    assert_null(strstr(buf, "deployment=\"web\""));
    free(buf);
    drv_gw_peers_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_delta),
        cmocka_unit_test(test_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
