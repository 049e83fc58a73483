/* test_gateway.c — the gateway's pure parts: the power-of-two-choices pick
 * (eligibility, limits, fairness, preference for the less loaded), the
 * bounded FIFO, the "model" scan of OpenAI bodies, the routing table
 * built from a real state (which replicas are routable, paths, limits),
 * the OpenAI shapes of errors and models (common/openai.h, creds.h), the
 * listen addresses droverd and drover-gateway take, the prompt-size
 * estimates counted for the autoscaler (prompt.h), and the quiet kick
 * against the controller's cadence (gateway.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gateway_state.h"
#include "common/listen.h"
#include "common/openai.h"
#include "gateway/creds.h"
#include "gateway/gateway.h"
#include "gateway/prompt.h"
#include "gateway/routes_doc.h"
#include "gateway/table.h"
#include "state/nodes.h"
#include "state/state.h"
#include "head/scaling.h"
#include "store/store.h"

/* --- P2C ------------------------------------------------------------------------- */

static void test_p2c_empty_and_single(void **state)
{
    uint64_t rng = 1;
    uint32_t out[1] = {0};
    assert_int_equal(drv_gw_p2c(NULL, 0, 0, -1, &rng), -1);
    assert_int_equal(drv_gw_p2c(out, 1, 0, -1, &rng), 0);
    assert_int_equal(drv_gw_p2c(out, 1, 0, 0, &rng), -1);   /* the only one is skipped */
    out[0] = 4;
    assert_int_equal(drv_gw_p2c(out, 1, 4, -1, &rng), -1);  /* at its limit */
    assert_int_equal(drv_gw_p2c(out, 1, 5, -1, &rng), 0);
    assert_int_equal(drv_gw_p2c(out, 1, 0, -1, &rng), 0);   /* no limit */
}

static void test_p2c_limits_and_skip(void **state)
{
    uint64_t rng = 7;
    uint32_t out[4] = {2, 2, 1, 2};
    for (int i = 0; i < 1000; i++)   /* only index 2 is below the limit */
        assert_int_equal(drv_gw_p2c(out, 4, 2, -1, &rng), 2);
    for (int i = 0; i < 1000; i++)   /* and it is skipped: none */
        assert_int_equal(drv_gw_p2c(out, 4, 2, 2, &rng), -1);
    uint32_t idle[3] = {0, 0, 0};
    for (int i = 0; i < 1000; i++)
        assert_int_not_equal(drv_gw_p2c(idle, 3, 1, 1, &rng), 1);
}

static void test_p2c_prefers_less_loaded(void **state)
{
    uint64_t rng = 42;
    uint32_t out[2] = {10, 0};
    for (int i = 0; i < 1000; i++)   /* two replicas: both drawn, the idle one wins */
        assert_int_equal(drv_gw_p2c(out, 2, 0, -1, &rng), 1);
    /* among many, the most loaded is never picked (it always loses its pair) */
    uint32_t many[8] = {3, 3, 3, 9, 3, 3, 3, 3};
    for (int i = 0; i < 2000; i++)
        assert_int_not_equal(drv_gw_p2c(many, 8, 0, -1, &rng), 3);
}

static void test_p2c_fair_when_equal(void **state)
{
    uint64_t rng = 99;
    uint32_t out[4] = {0, 0, 0, 0};
    int count[4] = {0};
    for (int i = 0; i < 40000; i++)
        count[drv_gw_p2c(out, 4, 0, -1, &rng)]++;
    for (int i = 0; i < 4; i++)   /* 10000 each expected */
        assert_true(count[i] > 9000 && count[i] < 11000);
}

/* --- FIFO ------------------------------------------------------------------------- */

static void test_fifo_bounds_and_order(void **state)
{
    drv_gw_fifo_t q = {.cap = 3};
    drv_gw_link_t l[5];
    for (int i = 0; i < 3; i++)
        assert_int_equal(drv_gw_fifo_push(&q, &l[i]), 0);
    assert_int_equal(drv_gw_fifo_push(&q, &l[3]), -1);   /* full: refused, unchanged */
    assert_int_equal(q.n, 3);
    drv_gw_fifo_remove(&q, &l[1]);                        /* from the middle */
    assert_int_equal(q.n, 2);
    assert_int_equal(drv_gw_fifo_push(&q, &l[3]), 0);
    assert_ptr_equal(drv_gw_fifo_pop(&q), &l[0]);
    assert_ptr_equal(drv_gw_fifo_pop(&q), &l[2]);
    assert_ptr_equal(drv_gw_fifo_pop(&q), &l[3]);
    assert_null(drv_gw_fifo_pop(&q));
    assert_int_equal(q.n, 0);
    assert_null(q.head);
    assert_null(q.tail);
    drv_gw_fifo_t unbounded = {0};
    for (int i = 0; i < 5; i++)
        assert_int_equal(drv_gw_fifo_push(&unbounded, &l[i]), 0);
    drv_gw_fifo_remove(&unbounded, &l[4]);   /* the tail */
    drv_gw_fifo_remove(&unbounded, &l[0]);   /* the head */
    assert_ptr_equal(unbounded.head, &l[1]);
    assert_ptr_equal(unbounded.tail, &l[3]);
}

/* --- "model" scan -------------------------------------------------------------------- */

static int model_of(const char *body, char *out, size_t n)
{
    return drv_gw_json_model(body, strlen(body), out, n);
}

static void test_json_model(void **state)
{
    char m[64];
    assert_int_equal(model_of("{\"model\":\"web\"}", m, sizeof m), 0);
    assert_string_equal(m, "web");
    assert_int_equal(model_of(" {\"messages\":[{\"role\":\"user\",\"content\":\"a \\\"model\\\": \\\"x\\\"\"}],"
                              "\"stream\":true, \"n\": 1.5e3, \"x\": null, \"o\": {\"model\": \"inner\"},"
                              "\n\"model\" : \"dep-1\"}", m, sizeof m), 0);
    assert_string_equal(m, "dep-1");
    assert_int_equal(model_of("{\"model\":\"a\\/b\"}", m, sizeof m), 0);
    assert_string_equal(m, "a/b");
    assert_int_equal(model_of("{\"models\":\"web\"}", m, sizeof m), -1);
    assert_int_equal(model_of("{\"o\":{\"model\":\"web\"}}", m, sizeof m), -1);   /* not top level */
    assert_int_equal(model_of("{\"model\":3}", m, sizeof m), -1);
    assert_int_equal(model_of("[\"model\",\"web\"]", m, sizeof m), -1);
    assert_int_equal(model_of("{\"model\":\"unterminated", m, sizeof m), -1);
    assert_int_equal(model_of("{\"model\":\"\\u0041\"}", m, sizeof m), -1);
    assert_int_equal(model_of("{\"a\":\"b\" \"model\":\"web\"}", m, sizeof m), -1);   /* no comma */
    assert_int_equal(model_of("", m, sizeof m), -1);
    assert_int_equal(drv_gw_json_model(NULL, 0, m, sizeof m), -1);
    assert_int_equal(model_of("{\"model\":\"toolongforthebuffer\"}", m, 8), -1);
    /* every prefix of a valid body fails cleanly (no overread) */
    const char *full = "{\"a\":[1,{\"b\":\"}\"}],\"model\":\"web\"}";
    for (size_t n = 0; n < strlen(full); n++) {
        char *cut = malloc(n ? n : 1);
        memcpy(cut, full, n);
        int rc = drv_gw_json_model(cut, n, m, sizeof m);
        assert_true(rc == -1 || (rc == 0 && n == strlen(full) - 1));
        free(cut);
    }
}

/* --- routing table ------------------------------------------------------------------- */

static drv_store_t *store;
static drv_state_t *st;
static char dir[64];

static void put(drv_kind_t kind, const char *key, const char *owner, const char *id,
                const char *spec, const char *status, int node_state)
{
    json_error_t e;
    drv_obj_t *o = drv_obj_new(kind, key, owner, id, json_loads(spec, 0, &e), NULL);
    assert_non_null(o->spec);
    o->rv = 1;
    o->created_at = 1690000000;
    if (status)
        o->status = json_loads(status, 0, &e);
    o->soft.node_state = node_state;
    drv_state_put(st, o);
}

static int table_setup(void **state)
{
    drv_error_t err;
    snprintf(dir, sizeof dir, "/tmp/drover-test-gw-XXXXXX");
    assert_non_null(mkdtemp(dir));
    store = drv_store_create(&drv_store_sqlite, dir, &err);
    assert_non_null(store);
    st = drv_state_create(store);
    assert_int_equal(drv_state_load(st, &err), 0);
    assert_int_equal(drv_store_start(store, &err), 0);
    return 0;
}

static int table_teardown(void **state)
{
    drv_store_destroy(store);
    drv_state_destroy(st);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void test_table_build(void **state)
{
    drv_state_wrlock(st);
    put(DRV_K_MODEL, "u/m", "u", "m",
        "{\"id\":\"m\",\"runtime\":{\"command\":[\"x\"],\"predict_path\":\"/p\",\"health_path\":\"/h\","
        "\"max_concurrency\":3}}", NULL, 0);
    put(DRV_K_MODEL, "u/old", "u", "old", "{\"id\":\"old\",\"runtime\":{\"command\":[\"x\"]}}", NULL, 0);
    put(DRV_K_DEPLOYMENT, "u/a", "u", "a",
        "{\"id\":\"a\",\"model\":\"m\",\"enabled\":true,\"autoscale\":{\"cold_start_timeout_seconds\":7}}",
        NULL, 0);
    put(DRV_K_DEPLOYMENT, "u/b", "u", "b", "{\"id\":\"b\",\"model\":\"old\",\"enabled\":false}", NULL, 0);
    put(DRV_K_DEPLOYMENT, "u/c", "u", "c", "{\"id\":\"c\",\"model\":\"gone\",\"enabled\":true}", NULL, 0);
    put(DRV_K_DEPLOYMENT, "v/a", "v", "a", "{\"id\":\"a\",\"model\":\"m\",\"enabled\":true}", NULL, 0);
    put(DRV_K_NODE, "u/n1", "u", "n1", "{\"id\":\"n1\"}", NULL, DRV_NODE_READY);
    put(DRV_K_NODE, "u/n2", "u", "n2", "{\"id\":\"n2\",\"draining\":true}", NULL, DRV_NODE_READY);
    put(DRV_K_NODE, "u/n3", "u", "n3", "{\"id\":\"n3\"}", NULL, DRV_NODE_NOT_READY);
    /* deployment a: ready, starting, ready on a draining node, ready on a
     * not_ready node, pending, failed, ready without endpoint */
    put(DRV_K_REPLICA, "u/a/r1", "u", "r1", "{\"id\":\"r1\",\"deployment\":\"a\",\"node\":\"n1\"}",
        "{\"state\":\"ready\",\"endpoint\":\"http://127.0.0.1:1001/\"}", 0);
    put(DRV_K_REPLICA, "u/a/r2", "u", "r2", "{\"id\":\"r2\",\"deployment\":\"a\",\"node\":\"n1\"}",
        "{\"state\":\"starting\",\"endpoint\":\"http://127.0.0.1:1002\"}", 0);
    put(DRV_K_REPLICA, "u/a/r3", "u", "r3", "{\"id\":\"r3\",\"deployment\":\"a\",\"node\":\"n2\"}",
        "{\"state\":\"ready\",\"endpoint\":\"http://127.0.0.1:1003\"}", 0);
    put(DRV_K_REPLICA, "u/a/r4", "u", "r4", "{\"id\":\"r4\",\"deployment\":\"a\",\"node\":\"n3\"}",
        "{\"state\":\"ready\",\"endpoint\":\"http://127.0.0.1:1004\"}", 0);
    put(DRV_K_REPLICA, "u/a/r5", "u", "r5", "{\"id\":\"r5\",\"deployment\":\"a\",\"node\":null}",
        "{\"state\":\"pending\"}", 0);
    put(DRV_K_REPLICA, "u/a/r6", "u", "r6", "{\"id\":\"r6\",\"deployment\":\"a\",\"node\":\"n1\"}",
        "{\"state\":\"failed\",\"endpoint\":\"http://127.0.0.1:1006\"}", 0);
    put(DRV_K_REPLICA, "u/a/r7", "u", "r7", "{\"id\":\"r7\",\"deployment\":\"a\",\"node\":\"n1\"}",
        "{\"state\":\"ready\"}", 0);
    /* a replica of u/a-b must not be taken for u/a's */
    put(DRV_K_DEPLOYMENT, "u/a-b", "u", "a-b", "{\"id\":\"a-b\",\"model\":\"m\",\"enabled\":true}", NULL, 0);
    put(DRV_K_REPLICA, "u/a-b/r1", "u", "r1", "{\"id\":\"r1\",\"deployment\":\"a-b\",\"node\":\"n1\"}",
        "{\"state\":\"ready\",\"endpoint\":\"http://127.0.0.1:2001\"}", 0);
    drv_gw_table_t *t = drv_gw_table_build(st);
    drv_state_unlock(st);
    assert_non_null(t);
    assert_int_equal(t->n_deps, 5);

    const drv_gw_tdep_t *a = drv_gw_table_find(t, "u/a");
    assert_non_null(a);
    assert_string_equal(a->predict_path, "/p");
    assert_string_equal(a->health_path, "/h");
    assert_int_equal(a->max_concurrency, 3);
    assert_int_equal(a->cold_start_ms, 7000);
    assert_true(a->enabled);
    assert_int_equal(a->created, 1690000000);
    assert_int_equal(a->n, 2);   /* r1 ready, r2 starting; the rest are not routable */
    assert_string_equal(t->reps[a->first].id, "r1");
    assert_string_equal(t->reps[a->first].endpoint, "http://127.0.0.1:1001");   /* no trailing / */
    assert_true(t->reps[a->first].ready);
    assert_string_equal(t->reps[a->first + 1].id, "r2");
    assert_false(t->reps[a->first + 1].ready);

    const drv_gw_tdep_t *ab = drv_gw_table_find(t, "u/a-b");
    assert_non_null(ab);
    assert_int_equal(ab->n, 1);
    assert_string_equal(t->reps[ab->first].endpoint, "http://127.0.0.1:2001");

    const drv_gw_tdep_t *b = drv_gw_table_find(t, "u/b");
    assert_non_null(b);
    assert_false(b->enabled);
    assert_string_equal(b->predict_path, "/predict");   /* defaults */
    assert_int_equal(b->max_concurrency, DRV_GW_DEFAULT_MAX_CONCURRENCY);
    assert_int_equal(b->cold_start_ms, DRV_GW_DEFAULT_COLD_START_S * 1000);

    const drv_gw_tdep_t *c = drv_gw_table_find(t, "u/c");   /* model missing: listed, no replicas */
    assert_non_null(c);
    assert_int_equal(c->n, 0);
    assert_non_null(drv_gw_table_find(t, "v/a"));
    assert_null(drv_gw_table_find(t, "u/zz"));
    assert_null(drv_gw_table_find(t, "w/a"));

    /* the same table through the standalone gateways' document and back */
    char v1[DRV_GW_VERSION_LEN], v2[DRV_GW_VERSION_LEN], v3[DRV_GW_VERSION_LEN];
    size_t len;
    drv_state_rdlock(st);
    char *doc = drv_gw_routes_doc(t, drv_gw_tokens_json(st, 1700000000), &len, v1);
    char *again = drv_gw_routes_doc(t, drv_gw_tokens_json(st, 1700000000), &len, v2);
    drv_state_unlock(st);
    assert_non_null(doc);
    assert_string_equal(v1, v2);   /* the version is the content's */
    free(again);
    /* dumped once: the canonical (compact, sorted-key) dump with the version
     * spliced in last, and len is its length */
    assert_int_equal(len, strlen(doc));
    json_error_t je;
    json_t *j = json_loads(doc, 0, &je);
    assert_non_null(j);
    char *canon = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(canon, doc);
    char tail[40];
    snprintf(tail, sizeof tail, ",\"version\":\"%s\"}", v1);
    assert_string_equal(doc + len - strlen(tail), tail);
    free(canon);
    json_decref(j);
    drv_gw_table_t *t2 = NULL;
    drv_gw_tokens_t *toks = NULL;
    drv_error_t err;
    assert_int_equal(drv_gw_routes_parse(doc, strlen(doc), &t2, &toks, v3, &err), 0);
    assert_string_equal(v3, v1);
    assert_int_equal(t2->n_deps, t->n_deps);
    assert_int_equal(t2->n_reps, t->n_reps);
    for (size_t i = 0; i < t->n_deps; i++) {
        const drv_gw_tdep_t *x = &t->deps[i], *y = &t2->deps[i];
        assert_string_equal(x->key, y->key);
        assert_string_equal(x->predict_path, y->predict_path);
        assert_int_equal(x->max_concurrency, y->max_concurrency);
        assert_int_equal(x->cold_start_ms, y->cold_start_ms);
        assert_int_equal(x->enabled, y->enabled);
        assert_int_equal(x->created, y->created);
        assert_int_equal(x->n, y->n);
        for (size_t k = 0; k < x->n; k++) {
            assert_string_equal(t->reps[x->first + k].endpoint, t2->reps[y->first + k].endpoint);
            assert_int_equal(t->reps[x->first + k].ready, t2->reps[y->first + k].ready);
        }
    }
    assert_int_equal(toks->n, 0);   /* no token in this state */
    free(doc);
    drv_gw_table_free(t2);
    drv_gw_tokens_free(toks);
    drv_gw_table_free(t);
    drv_gw_table_free(NULL);
}

/* --- quantiles of a latency histogram ------------------------------------------- */

static void test_quantile(void **state)
{
    const double bounds[3] = {0.001, 0.01, 0.1};   /* seconds */
    uint64_t none[4] = {0, 0, 0, 0};
    assert_true(drv_gw_quantile_ms(none, bounds, 3, 0.5) < 0);   /* empty: no value */
    uint64_t one_bucket[4] = {0, 10, 0, 0};   /* all in (1 ms, 10 ms] */
    assert_float_equal(drv_gw_quantile_ms(one_bucket, bounds, 3, 0.5), 5.5, 1e-9);
    assert_float_equal(drv_gw_quantile_ms(one_bucket, bounds, 3, 0.99), 9.91, 1e-9);
    uint64_t spread[4] = {90, 0, 9, 1};   /* 90 fast, 9 slow, 1 above every bound */
    double p50 = drv_gw_quantile_ms(spread, bounds, 3, 0.5);
    assert_true(p50 > 0 && p50 <= 1);
    double p90 = drv_gw_quantile_ms(spread, bounds, 3, 0.9);
    assert_float_equal(p90, 1, 1e-9);   /* exactly the 90th: the first bucket's top */
    double p95 = drv_gw_quantile_ms(spread, bounds, 3, 0.95);
    assert_true(p95 > 10 && p95 < 100);
    assert_float_equal(drv_gw_quantile_ms(spread, bounds, 3, 0.999), 100, 1e-9);   /* +Inf: the last bound */
    assert_true(p50 <= p90 && p90 <= p95);
}

/* --- the routes document of standalone gateways ------------------------------------ */

#define HA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define DEP(key, id, reps)                                                                   \
    "{\"key\":\"" key "\",\"owner\":\"al\",\"id\":\"" id "\",\"predict_path\":\"/predict\","  \
    "\"health_path\":\"/health\",\"max_concurrency\":4,\"cold_start_ms\":1000,"              \
    "\"enabled\":true,\"desired_replicas\":1,\"ready_replicas\":1,\"replicas\":[" reps "]}"
#define REP(key, ep) "{\"key\":\"" key "\",\"id\":\"r\",\"endpoint\":\"" ep "\",\"ready\":true}"

static int parse(const char *doc, drv_gw_table_t **t, drv_gw_tokens_t **toks)
{
    char v[DRV_GW_VERSION_LEN];
    drv_error_t err;
    return drv_gw_routes_parse(doc, strlen(doc), t, toks, v, &err);
}

static void test_routes_doc_parse(void **state)
{
    drv_gw_table_t *t = NULL;
    drv_gw_tokens_t *toks = NULL;
    const char *good =
        "{\"version\":\"0123456789abcdef\",\"deployments\":[" DEP("al/a", "a",
        REP("al/a/1", "http://127.0.0.1:1") "," REP("al/a/2", "http://127.0.0.1:2")) ","
        DEP("al/b", "b", "") "],\"tokens\":[{\"hash\":\"" HB "\",\"user\":\"al\","
        "\"predict\":false,\"expires_at\":0},{\"hash\":\"" HA "\",\"user\":\"al\","
        "\"predict\":true,\"expires_at\":0}]}";
    assert_int_equal(parse(good, &t, &toks), 0);
    assert_int_equal(t->n_deps, 2);
    const drv_gw_tdep_t *a = drv_gw_table_find(t, "al/a");
    assert_non_null(a);
    assert_int_equal(a->n, 2);
    assert_string_equal(t->reps[a->first + 1].endpoint, "http://127.0.0.1:2");
    assert_int_equal(a->max_concurrency, 4);
    assert_int_equal(a->created, 0);   /* optional: a head from before it sends none */
    assert_int_equal(drv_gw_table_find(t, "al/b")->n, 0);
    const drv_gw_tok_t *ta = drv_gw_tokens_find(toks, HA);   /* sorted after parsing */
    assert_non_null(ta);
    assert_true(ta->predict);
    assert_false(drv_gw_tokens_find(toks, HB)->predict);
    assert_null(drv_gw_tokens_find(toks, "cc"));
    drv_gw_table_free(t);
    drv_gw_tokens_free(toks);

    const char *bad[] = {
        "",
        "[]",
        "{\"version\":\"0123456789abcdef\",\"deployments\":[]}",   /* no tokens */
        "{\"version\":\"short\",\"deployments\":[],\"tokens\":[]}",
        /* deployments out of order: the gateway binary-searches them */
        "{\"version\":\"0123456789abcdef\",\"deployments\":[" DEP("al/b", "b", "") ","
        DEP("al/a", "a", "") "],\"tokens\":[]}",
        /* an endpoint that is not http:// */
        "{\"version\":\"0123456789abcdef\",\"deployments\":[" DEP("al/a", "a",
        REP("al/a/1", "file:///etc/passwd")) "],\"tokens\":[]}",
        /* a negative limit */
        "{\"version\":\"0123456789abcdef\",\"deployments\":[{\"key\":\"al/a\",\"owner\":\"al\","
        "\"id\":\"a\",\"predict_path\":\"/p\",\"health_path\":\"/h\",\"max_concurrency\":-1,"
        "\"cold_start_ms\":1,\"enabled\":true,\"desired_replicas\":0,\"ready_replicas\":0,"
        "\"replicas\":[]}],\"tokens\":[]}",
        /* a token without its scope flag, a short hash */
        "{\"version\":\"0123456789abcdef\",\"deployments\":[],\"tokens\":[{\"hash\":\"" HA
        "\",\"user\":\"al\",\"expires_at\":0}]}",
        "{\"version\":\"0123456789abcdef\",\"deployments\":[],\"tokens\":[{\"hash\":\"ab\","
        "\"user\":\"al\",\"predict\":true,\"expires_at\":0}]}",
        NULL};
    for (int k = 0; bad[k]; k++) {
        t = NULL;
        toks = NULL;
        assert_int_equal(parse(bad[k], &t, &toks), -1);
        assert_null(t);
        assert_null(toks);
    }
}

/* --- OpenAI shapes ------------------------------------------------------------------- */

static void test_openai_shapes(void **state)
{
    (void)state;
    assert_true(drv_openai_path("/openai/v1/models"));
    assert_false(drv_openai_path("/openai"));
    assert_false(drv_openai_path("/v1/deployments/x/predict"));
    assert_false(drv_openai_path(NULL));
    assert_string_equal(drv_openai_error_type(400), "invalid_request_error");
    assert_string_equal(drv_openai_error_type(404), "invalid_request_error");
    assert_string_equal(drv_openai_error_type(401), "authentication_error");
    assert_string_equal(drv_openai_error_type(403), "permission_error");
    assert_string_equal(drv_openai_error_type(429), "rate_limit_error");
    assert_string_equal(drv_openai_error_type(503), "server_error");

    drv_error_t err;
    drv_err_invalid(&err, "model", "no model");
    json_t *e = drv_openai_error(&err);
    char *s = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"no model\","
                           "\"param\":\"model\",\"type\":\"invalid_request_error\"}}");
    free(s);
    json_decref(e);
    drv_err_not_found(&err, "gone");
    e = drv_openai_error(&err);
    assert_true(json_is_null(json_object_get(json_object_get(e, "error"), "param")));
    json_decref(e);

    /* the credentials' model list: a user sees their own, with created */
    drv_gw_tdep_t deps[] = {{.key = "al/a", .owner = "al", .id = "a", .created = 42},
                            {.key = "bo/a", .owner = "bo", .id = "a", .created = 7},
                            {.key = "bo/b", .owner = "bo", .id = "b", .created = 8}};
    drv_gw_table_t t = {.deps = deps, .n_deps = 3};
    drv_gw_creds_t *c = drv_gw_creds_create();
    assert_non_null(c);
    drv_gw_creds_set(c, NULL, &t);
    json_t *l = drv_gw_creds_models(c, "bo");
    assert_string_equal(json_string_value(json_object_get(l, "object")), "list");
    assert_int_equal(json_array_size(json_object_get(l, "data")), 2);
    json_decref(l);
    json_t *m = drv_gw_creds_model(c, "al", "a");
    assert_non_null(m);
    assert_int_equal(json_integer_value(json_object_get(m, "created")), 42);
    assert_string_equal(json_string_value(json_object_get(m, "object")), "model");
    assert_string_equal(json_string_value(json_object_get(m, "owned_by")), "al");
    json_decref(m);
    assert_null(drv_gw_creds_model(c, "al", "b"));   /* bo's, not al's */
    assert_null(drv_gw_creds_model(c, "cy", "a"));
    drv_gw_creds_destroy(c);
}

/* --- listen addresses (common/listen.c: --listen, --gateway-listen) -------------- */

static void test_listen_same(void **state)
{
    drv_error_t err;
    assert_int_equal(drv_listen_check("127.0.0.1:0", &err), 0);
    assert_int_equal(drv_listen_check("[::1]:8080", &err), 0);
    assert_int_equal(drv_listen_check("127.0.0.1", &err), -1);
    assert_string_equal(err.field, "listen");
    assert_int_equal(drv_listen_check("127.0.0.1:65536", &err), -1);
    /* port 0 twice: two free ports, no collision */
    assert_false(drv_listen_same("127.0.0.1:0", "127.0.0.1:0"));
    assert_false(drv_listen_same("[::1]:0", "[::1]:0"));
    /* one fixed address and port twice (however spelled) collides */
    assert_true(drv_listen_same("127.0.0.1:8080", "127.0.0.1:8080"));
    assert_true(drv_listen_same("localhost:8080", "127.0.0.1:8080"));
    assert_true(drv_listen_same("[::1]:8080", "[::1]:8080"));
    assert_false(drv_listen_same("127.0.0.1:8080", "127.0.0.1:8081"));
    assert_false(drv_listen_same("127.0.0.1:8080", "127.0.0.2:8080"));
    assert_false(drv_listen_same("127.0.0.1:8080", "[::1]:8080"));
    assert_false(drv_listen_same("bad", "bad"));
}

/* --- prompt-size estimates -------------------------------------------------------- */

static void test_prompt_estimates(void **state)
{
    (void)state;
    /* from the body's length (its Content-Length), bytes / 4; none without one */
    assert_int_equal(drv_gw_prompt_estimate(4000), 1000);
    assert_int_equal(drv_gw_prompt_estimate(4003), 1000);
    assert_int_equal(drv_gw_prompt_estimate(3), 0);
    assert_int_equal(drv_gw_prompt_estimate(0), -1);
    assert_int_equal(drv_gw_prompt_estimate(-1), -1);
    static gw_prompt_t p;   /* zeroed */
    drv_gw_prompt_arrive(&p, drv_gw_prompt_estimate(0));   /* no body: not counted */
    drv_gw_prompt_served(&p, -1, 5000);
    assert_int_equal(p.n, 0);
    assert_int_equal(p.served, 0);
    for (size_t b = 0; b < DRV_PROMPTLEN_BINS; b++)
        assert_int_equal(p.hist[b], 0);
    drv_gw_prompt_arrive(&p, drv_gw_prompt_estimate(4000));
    drv_gw_prompt_arrive(&p, drv_gw_prompt_estimate(400));
    drv_gw_prompt_arrive(&p, drv_gw_prompt_estimate(-1));
    assert_int_equal(p.n, 2);
    assert_int_equal(p.tokens, 1100);
    assert_int_equal(p.hist[drv_promptlen_bin(1000)], 1);
    assert_int_equal(p.hist[drv_promptlen_bin(100)], 1);
    assert_int_not_equal(drv_promptlen_bin(1000), drv_promptlen_bin(100));
    uint64_t all = 0;
    for (size_t b = 0; b < DRV_PROMPTLEN_BINS; b++)
        all += p.hist[b];
    assert_int_equal(all, 2);
    /* served: count, sum p, sum f (us), p^2, p f (token ms) */
    drv_gw_prompt_served(&p, 1000, 250000);   /* 0.25 s */
    drv_gw_prompt_served(&p, 100, 40000);
    drv_gw_prompt_served(&p, 100, -5);        /* a clock step: f counts as 0 */
    assert_int_equal(p.served, 3);
    assert_int_equal(p.served_p, 1200);
    assert_int_equal(p.served_f_us, 290000);
    assert_int_equal(p.served_pp, 1000000 + 10000 + 10000);
    assert_int_equal(p.served_pf_ms, 250000 + 4000);
}

/* --- the quiet kick ------------------------------------------------------------------ */

/* The gateway kicks droverd's controller at a deployment's first arrival
 * and at the first after DRV_GW_QUIET_KICK_MS without one
 * (drv_gw_quiet_kick_due, route.c). The controller (head/controller.c,
 * scaling.h) passes on its 250 ms tick while the last pass had seen
 * arrivals within DRV_SCALING_BUSY_MS (dated at the pass that saw them),
 * on the tick after a kick, and else on its 5 s safety net. With both,
 * every arrival is seen by a pass within one tick, as drover-sim serve's
 * controller sees them (issue 20: the SLO model's arrivals are spread over
 * the time since the last pass). Without the kick, an arrival after a
 * quiet spell waits up to the safety net's 5 s (the test fails so). Arrival
 * gaps around the thresholds and longer; the 100 ms bound on kicks
 * (route.c) is not modelled. */
static int64_t quiet_kick_worst(bool kick)
{
    static const int64_t gaps[] = {100, 4999, 5000, 5001, 300, 5500, 7000, 1, 9999, 4750,
                                   5250, 60000, 250, 5000, 12345, 4999, 17};
    const int64_t tick = 250;
    int64_t next = 1000, last_arrival = 0, last_pass = 0, seen_at = INT64_MIN / 2;
    int64_t oldest = -1, worst = 0;
    bool kicked = false, busy = false;
    size_t k = 0;
    for (int64_t t = 0; k <= sizeof gaps / sizeof gaps[0] || oldest >= 0; t++) {
        if (k <= sizeof gaps / sizeof gaps[0] && t == next) {   /* an arrival */
            kicked = kicked || (kick && drv_gw_quiet_kick_due(last_arrival, t));
            last_arrival = t;
            if (oldest < 0)
                oldest = t;
            next = k < sizeof gaps / sizeof gaps[0] ? t + gaps[k] : -1;
            k++;
        }
        if (t % tick != 0 || !(busy || kicked || t - last_pass >= 5000))
            continue;
        if (oldest >= 0) {                                       /* a pass sees them */
            worst = t - oldest > worst ? t - oldest : worst;
            seen_at = t;
            oldest = -1;
        }
        busy = t - seen_at < DRV_SCALING_BUSY_MS;
        kicked = false;
        last_pass = t;
    }
    return worst;
}

static void test_quiet_kick(void **state)
{
    (void)state;
    assert_true(drv_gw_quiet_kick_due(0, 12345));   /* the deployment's first arrival */
    assert_false(drv_gw_quiet_kick_due(10000, 10001));
    assert_false(drv_gw_quiet_kick_due(10000, 10000 + DRV_GW_QUIET_KICK_MS - 1));
    assert_true(drv_gw_quiet_kick_due(10000, 10000 + DRV_GW_QUIET_KICK_MS));
    assert_true(quiet_kick_worst(true) <= 250);     /* within a tick */
    assert_true(quiet_kick_worst(false) > 4000);    /* the safety net's */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p2c_empty_and_single),
        cmocka_unit_test(test_p2c_limits_and_skip),
        cmocka_unit_test(test_p2c_prefers_less_loaded),
        cmocka_unit_test(test_p2c_fair_when_equal),
        cmocka_unit_test(test_fifo_bounds_and_order),
        cmocka_unit_test(test_json_model),
        cmocka_unit_test(test_quantile),
        cmocka_unit_test(test_routes_doc_parse),
        cmocka_unit_test(test_openai_shapes),
        cmocka_unit_test(test_listen_same),
        cmocka_unit_test(test_prompt_estimates),
        cmocka_unit_test(test_quiet_kick),
        cmocka_unit_test_setup_teardown(test_table_build, table_setup, table_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
