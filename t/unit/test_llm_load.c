/* test_llm_load.c — LLM-aware load (issue 16): src/agent/llm_metrics.c
 * reading vLLM's gauges from Prometheus text (labels, several label sets,
 * the newer KV-cache name, comments and other metrics skipped, malformed
 * values ignored) and SGLang's, TGI's and llama.cpp's own names, and src/autoscale/replicas.c's drv_ras_llm_load mapping
 * the replicas' counts to the autoscaler's load for autoscale.metric
 * queue and kv_cache (and the gateway's load otherwise or without samples).
 * Also drover-demo-model's LLM emulator's service model (src/demo/llm_model.c,
 * drover-sim serve's processor sharing) on a virtual clock: a request alone
 * has its first token at prefill + one decode step and ends at prefill +
 * gen steps; two at once are each slowed by 1 + B; a departure speeds up
 * the rest from its instant; beyond max_concurrency requests wait in FIFO
 * order and are admitted as one leaves; a removed one frees its slot.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include <math.h>

#include "agent/llm_metrics.h"
#include "demo/llm_model.h"
#include "autoscale/replicas.h"

static void test_parse(void **state)
{
    (void)state;
    static const char text[] =
        "# HELP vllm:num_requests_running Number of requests currently running on GPU.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{model_name=\"a\"} 3.0\n"
        "vllm:num_requests_running{model_name=\"b\",engine=\"0\"} 2\n"
        "vllm:num_requests_waiting{model_name=\"a}\\\"x\"} 5\n"   /* braces and quotes in labels */
        "vllm:num_requests_waiting_total 99\n"                     /* another metric */
        "vllm:gpu_cache_usage_perc{model_name=\"a\"} 0.25\n"
        "vllm:kv_cache_usage_perc{model_name=\"b\"} 0.75\n"
        "vllm:iteration_tokens_total_bucket{le=\"1.0\"} 3.0\n"
        "vllm:num_requests_running{model_name=\"c\"} NaN\n"        /* not counted */
        "vllm:num_requests_running{model_name=\"d\"} -4\n";        /* not counted */
    drv_llm_load_t l;
    assert_true(drv_llm_metrics_parse(text, strlen(text), &l));
    assert_true(l.running == 5.0);
    assert_true(l.waiting == 5.0);
    assert_true(l.kv_cache == 0.75);   /* the largest of the engines' */
    static const char only_running[] = "vllm:num_requests_running 1\n";
    assert_true(drv_llm_metrics_parse(only_running, strlen(only_running), &l));
    assert_true(l.running == 1.0 && l.waiting == 0 && l.kv_cache < 0);
    static const char none[] = "# nothing of vLLM's\nprocess_cpu_seconds_total 12\n";
    assert_false(drv_llm_metrics_parse(none, strlen(none), &l));
    assert_false(drv_llm_metrics_parse("", 0, &l));
    static const char noeol[] = "vllm:gpu_cache_usage_perc 1.5";   /* clamped, no newline */
    assert_true(drv_llm_metrics_parse(noeol, strlen(noeol), &l));
    assert_true(l.kv_cache == 1.0);
}

/* the other servers' own names (llm_metrics.h): SGLang, TGI, llama.cpp */
static void test_parse_other_servers(void **state)
{
    (void)state;
    drv_llm_load_t l;
    static const char sglang[] =
        "# TYPE sglang:num_running_reqs gauge\n"
        "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"0\"} 8\n"
        "sglang:num_queue_reqs{model_name=\"m\",tp_rank=\"0\"} 4\n"
        "sglang:num_queue_reqs_total 12\n"                   /* not the gauge */
        "sglang:token_usage{model_name=\"m\"} 0.52\n"
        "sglang:cache_hit_rate{model_name=\"m\"} 0.28\n";
    assert_true(drv_llm_metrics_parse(sglang, strlen(sglang), &l));
    assert_true(l.running == 8.0 && l.waiting == 4.0 && l.kv_cache == 0.52);
    static const char tgi[] = "tgi_batch_current_max_tokens 4096\n"
                              "tgi_batch_current_size 3\n"
                              "tgi_queue_size 7\n"
                              "tgi_request_count 100\n";
    assert_true(drv_llm_metrics_parse(tgi, strlen(tgi), &l));
    assert_true(l.running == 3.0 && l.waiting == 7.0 && l.kv_cache < 0);
    static const char llamacpp[] = "# HELP llamacpp:requests_processing Number of requests processing.\n"
                                   "llamacpp:requests_processing 2\n"
                                   "llamacpp:requests_deferred 1\n"
                                   "llamacpp:kv_cache_tokens 900\n";
    assert_true(drv_llm_metrics_parse(llamacpp, strlen(llamacpp), &l));
    assert_true(l.running == 2.0 && l.waiting == 1.0 && l.kv_cache < 0);
    static const char triton[] =   /* per model and version: summed */
        "# HELP nv_inference_pending_request_count Instantaneous number of pending requests\n"
        "# TYPE nv_inference_pending_request_count gauge\n"
        "nv_inference_pending_request_count{model=\"a\",version=\"1\"} 3\n"
        "nv_inference_pending_request_count{model=\"b\",version=\"2\"} 2\n"
        "nv_inference_request_success{model=\"a\",version=\"1\"} 40\n"
        "nv_inference_queue_duration_us{model=\"a\",version=\"1\"} 1200\n";
    assert_true(drv_llm_metrics_parse(triton, strlen(triton), &l));
    assert_true(l.running == 0.0 && l.waiting == 5.0 && l.kv_cache < 0);
    static const char triton_idle[] = "nv_inference_request_success{model=\"a\",version=\"1\"} 4\n";
    assert_false(drv_llm_metrics_parse(triton_idle, strlen(triton_idle), &l));   /* no gauge */
}

static void test_load(void **state)
{
    (void)state;
    drv_ras_config_t cfg;
    json_t *as = json_pack("{s:i, s:s}", "target_concurrency", 4, "metric", "queue");
    drv_ras_config_from_json(as, &cfg);
    assert_int_equal(cfg.metric, DRV_RAS_METRIC_QUEUE);
    drv_ras_llm_sample_t s[] = {{.running = 3, .waiting = 5, .kv_cache = 0.9},
                                {.running = 1, .waiting = 0, .kv_cache = -1}};
    assert_true(drv_ras_llm_load(&cfg, s, 2, 7.0) == 9.0);   /* running + waiting */
    assert_true(drv_ras_llm_load(&cfg, s, 0, 7.0) == 7.0);   /* no sample: the gateway's */
    json_decref(as);
    as = json_pack("{s:i, s:s, s:f}", "target_concurrency", 4, "metric", "kv_cache",
                   "target_kv_cache", 0.5);
    drv_ras_config_from_json(as, &cfg);
    assert_int_equal(cfg.metric, DRV_RAS_METRIC_KV_CACHE);
    assert_true(cfg.target_kv_cache == 0.5);
    /* 0.9 of one replica's cache over a 0.5 target: 1.8 replicas' worth, 7.2 in
     * target_concurrency units (so rule 6 wants ceil(7.2 / 4) = 2) */
    double l = drv_ras_llm_load(&cfg, s, 2, 7.0);
    assert_true(l > 7.199 && l < 7.201);
    drv_ras_llm_sample_t unknown[] = {{.running = 1, .kv_cache = -1}};
    assert_true(drv_ras_llm_load(&cfg, unknown, 1, 3.0) == 3.0);   /* no KV report */
    json_decref(as);
    as = json_pack("{s:s}", "metric", "kv_cache");
    drv_ras_config_from_json(as, &cfg);
    assert_true(cfg.target_kv_cache == DRV_RAS_TARGET_KV_CACHE);
    json_decref(as);
    as = json_pack("{}");   /* the default: the gateway's in-flight + queued */
    drv_ras_config_from_json(as, &cfg);
    assert_int_equal(cfg.metric, DRV_RAS_METRIC_CONCURRENCY);
    assert_true(drv_ras_llm_load(&cfg, s, 2, 7.0) == 7.0);
    json_decref(as);
}

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-9)

/* Follow r as the emulator's threads do: wake at drv_llm_wake_at, advance,
 * until it has k tokens; returns the clock then. */
static double run_until(drv_llm_t *m, drv_llm_req_t *r, int k)
{
    double t = 0;
    for (int i = 0; i < 1000 && drv_llm_tokens(m, r) < k; i++) {
        t = drv_llm_wake_at(m, r, k);
        assert_true(t < HUGE_VAL);
        drv_llm_advance(m, t);
    }
    assert_true(drv_llm_tokens(m, r) >= k);
    return t;
}

static void test_emulator_model(void **state)
{
    (void)state;
    char err[128];
    drv_llm_params_t p = {.prefill_tps = 4000, .decode_tps = 20, .batch_slowdown = 0.5,
                          .max_concurrency = 2};
    drv_llm_params_t bad = p;
    bad.decode_tps = 0;
    assert_null(drv_llm_create(&bad, err, sizeof err));
    assert_non_null(strstr(err, "decode"));
    bad = p;
    bad.max_concurrency = 0;
    assert_null(drv_llm_create(&bad, err, sizeof err));
    drv_llm_t *m = drv_llm_create(&p, err, sizeof err);
    assert_non_null(m);

    /* alone: 4000 prompt tokens = 1 s of prefill, 10 tokens at 20/s */
    drv_llm_req_t a = {.prompt = 4000, .gen = 10};
    drv_llm_submit(m, &a, 100);
    NEAR(drv_llm_wake_at(m, &a, 1), 101.05);
    drv_llm_advance(m, 101.04);
    assert_int_equal(drv_llm_tokens(m, &a), 0);
    NEAR(run_until(m, &a, 1), 101.05);
    NEAR(run_until(m, &a, 5), 101.25);
    NEAR(run_until(m, &a, 10), 101.5);
    assert_true(a.done);
    NEAR(a.done_at, 101.5);
    assert_int_equal(drv_llm_running(m), 0);

    /* two at once: each at 1 / (1 + 0.5) of the speed */
    drv_llm_req_t b = {.prompt = 4000, .gen = 10}, c = {.prompt = 4000, .gen = 10};
    drv_llm_submit(m, &b, 200);
    drv_llm_submit(m, &c, 200);
    assert_int_equal(drv_llm_running(m), 2);
    NEAR(run_until(m, &b, 1), 200 + 1.05 * 1.5);
    NEAR(run_until(m, &c, 10), 200 + 1.5 * 1.5);
    assert_true(b.done && c.done);
    NEAR(b.done_at, 202.25);

    /* a departure: d (10 tokens) and e (20) together, d leaves at V 1.5
     * (clock 2.25 in), e alone after it: its last 0.5 s of V at full speed */
    drv_llm_req_t d = {.prompt = 4000, .gen = 10}, e = {.prompt = 4000, .gen = 20};
    drv_llm_submit(m, &d, 300);
    drv_llm_submit(m, &e, 300);
    NEAR(run_until(m, &e, 20), 300 + 2.25 + 0.5);
    NEAR(d.done_at, 302.25);

    /* full: the third waits, FIFO, admitted when the first leaves */
    drv_llm_req_t f = {.prompt = 0, .gen = 10}, h = {.prompt = 0, .gen = 20},
                  w1 = {.prompt = 0, .gen = 2}, w2 = {.prompt = 0, .gen = 2};
    drv_llm_submit(m, &f, 400);
    drv_llm_submit(m, &h, 400);
    drv_llm_submit(m, &w1, 400.1);
    drv_llm_submit(m, &w2, 400.2);
    assert_int_equal(drv_llm_running(m), 2);
    assert_int_equal(drv_llm_waiting(m), 2);
    assert_int_equal(drv_llm_tokens(m, &w1), 0);
    drv_llm_remove(m, &w2, 400.3);   /* its client left while it waited */
    assert_int_equal(drv_llm_waiting(m), 1);
    NEAR(run_until(m, &f, 10), 400 + 0.5 * 1.5);
    assert_true(w1.admitted);
    NEAR(w1.admitted_at, 400.75);
    NEAR(run_until(m, &w1, 2), 400.75 + 0.1 * 1.5);
    drv_llm_remove(m, &h, 401);      /* out of the batch: a slot free */
    assert_int_equal(drv_llm_running(m), 0);
    assert_int_equal(drv_llm_waiting(m), 0);
    drv_llm_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_other_servers),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_emulator_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
