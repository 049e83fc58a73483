/* test_jobs.c — unit tests of src/state/jobs.c over an in-memory state:
 * the workers a node's desired set lists for a placed gang (the torchrun
 * environment per rank: WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * NODE_RANK, NNODES, MASTER_ADDR/PORT, DROVER_JOB_*; rank 0's port check;
 * the checkpoint field or a local checkpoint scope), what an active job
 * holds in the scheduling snapshot (a queued one: nothing), and the
 * agents' reports of workers (another attempt's or another node's are
 * ignored); GPU-hours and cost; worker ids after a port try; a preempted
 * gang's stopping placement, held in the snapshot until its workers are
 * reported gone, and not counted for room already being freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/util.h"
#include "sched/admit.h"
#include "sched/gang.h"
#include "state/events.h"
#include "state/jobs.h"
#include "state/state.h"

static drv_head_t H;

static int setup(void **state)
{
    memset(&H, 0, sizeof H);
    H.state = drv_state_create(NULL);
    H.events = drv_events_create(64);
    assert_non_null(H.state);
    return 0;
}

static int teardown(void **state)
{
    drv_state_destroy(H.state);
    drv_events_destroy(H.events);
    return 0;
}

static void put_node(const char *id)
{
    char key[64];
    snprintf(key, sizeof key, "u/%s", id);
    drv_obj_t *n = drv_obj_new(DRV_K_NODE, key, "u", id,
                               json_pack("{s:s, s:s, s:s}", "id", id, "cluster", "c",
                                         "nodepool", "np"), NULL);
    n->rv = 1;
    drv_state_put(H.state, n);
}

/* A 3-worker job: ranks 0 and 1 on node a, rank 2 on node b (1 GPU each). */
static drv_obj_t *put_job(const char *state, int attempt, bool checkpoint)
{
    json_t *spec = json_pack("{s:s, s:{s:[s], s:{s:s}}, s:i, s:{s:{s:i}, s:i, s:i}, s:{s:i}}",
                             "id", "t", "runtime", "command", "train", "env", "FOO", "bar",
                             "workers", 3, "resources", "gpu", "count", 1, "cpu_millis", 500,
                             "memory_mib", 100, "checkpoint", "keep", 2);
    json_t *given = checkpoint ? json_pack("{s:{}}", "checkpoint") : json_object();
    json_t *pl = json_pack("[{s:i, s:s, s:[{s:s, s:i}], s:b}, {s:i, s:s, s:[{s:s, s:i}], s:b},"
                           " {s:i, s:s, s:[{s:s, s:i}], s:b}]",
                           "rank", 0, "node", "a", "gpus", "uuid", "GA0", "compute_percent", 100,
                           "whole", 1, "rank", 1, "node", "a", "gpus", "uuid", "GA1",
                           "compute_percent", 100, "whole", 1, "rank", 2, "node", "b", "gpus",
                           "uuid", "GB0", "compute_percent", 100, "whole", 1);
    json_t *run = json_pack("{s:s, s:i, s:o, s:s, s:i}", "state", state, "attempt", attempt,
                            "placement", pl, "master_addr", "10.0.0.1", "master_port", 29555);
    drv_obj_t *j = drv_obj_new(DRV_K_JOB, "u/t", "u", "t", spec,
                               json_pack("{s:o, s:o}", "given", given, "run", run));
    j->rv = 1;
    drv_state_put(H.state, j);
    return drv_state_get(H.state, DRV_K_JOB, "u/t");
}

static const char *env(const json_t *d, const char *k)
{
    return json_string_value(json_object_get(json_object_get(d, "env"), k));
}

static void desired_env_per_rank(void **state)
{
    put_node("a");
    put_node("b");
    put_job("running", 2, false);
    json_t *da = json_array(), *db = json_array();
    drv_jobs_desired(&H, drv_state_get(H.state, DRV_K_NODE, "u/a"), da);
    drv_jobs_desired(&H, drv_state_get(H.state, DRV_K_NODE, "u/b"), db);
    assert_int_equal(json_array_size(da), 2);
    assert_int_equal(json_array_size(db), 1);
    const json_t *r0 = json_array_get(da, 0), *r1 = json_array_get(da, 1);
    const json_t *r2 = json_array_get(db, 0);
    assert_string_equal(json_string_value(json_object_get(r0, "id")), "t-a2-r0");
    assert_string_equal(json_string_value(json_object_get(r2, "id")), "t-a2-r2");
    assert_string_equal(json_string_value(json_object_get(r2, "job")), "t");
    for (int i = 0; i < 3; i++) {
        const json_t *d = i == 0 ? r0 : i == 1 ? r1 : r2;
        assert_string_equal(env(d, "WORLD_SIZE"), "3");
        assert_string_equal(env(d, "NNODES"), "2");
        assert_string_equal(env(d, "MASTER_ADDR"), "10.0.0.1");
        assert_string_equal(env(d, "MASTER_PORT"), "29555");
        assert_string_equal(env(d, "DROVER_JOB_ID"), "t");
        assert_string_equal(env(d, "DROVER_JOB_ATTEMPT"), "2");
        assert_string_equal(env(d, "FOO"), "bar");   /* the job's own env */
    }
    assert_string_equal(env(r0, "RANK"), "0");
    assert_string_equal(env(r1, "RANK"), "1");
    assert_string_equal(env(r2, "RANK"), "2");
    assert_string_equal(env(r0, "LOCAL_RANK"), "0");
    assert_string_equal(env(r1, "LOCAL_RANK"), "1");
    assert_string_equal(env(r2, "LOCAL_RANK"), "0");
    assert_string_equal(env(r0, "LOCAL_WORLD_SIZE"), "2");
    assert_string_equal(env(r2, "LOCAL_WORLD_SIZE"), "1");
    assert_string_equal(env(r1, "NODE_RANK"), "0");
    assert_string_equal(env(r2, "NODE_RANK"), "1");
    /* only rank 0's agent checks the port; no checkpoint given: a local scope */
    assert_int_equal(json_integer_value(json_object_get(r0, "master_port")), 29555);
    assert_null(json_object_get(r1, "master_port"));
    assert_string_equal(json_string_value(json_object_get(r2, "local_checkpoint")),
                        "t/rank-2");
    assert_null(json_object_get(r2, "checkpoint"));
    assert_string_equal(json_string_value(json_array_get(json_object_get(r1, "gpus"), 0)), "GA1");
    json_decref(da);
    json_decref(db);
}

static void desired_checkpoint_field(void **state)
{
    put_node("a");
    put_job("starting", 1, true);
    json_t *d = json_array();
    drv_jobs_desired(&H, drv_state_get(H.state, DRV_K_NODE, "u/a"), d);
    const json_t *ck = json_object_get(json_array_get(d, 1), "checkpoint");
    assert_string_equal(json_string_value(json_object_get(ck, "scope")), "job:t:1");
    assert_int_equal(json_integer_value(json_object_get(ck, "keep")), 2);
    assert_null(json_object_get(json_array_get(d, 1), "local_checkpoint"));
    json_decref(d);
}

static void queued_job_holds_nothing(void **state)
{
    put_node("a");
    put_job("restarting", 2, false);   /* a placement left over is not held */
    json_t *d = json_array();
    drv_jobs_desired(&H, drv_state_get(H.state, DRV_K_NODE, "u/a"), d);
    assert_int_equal(json_array_size(d), 0);
    json_decref(d);
    drv_sched_node_t nodes[1] = {{.id = "a", .n_gpus = 2}};
    nodes[0].gpus[0].uuid = "GA0";
    nodes[0].gpus[1].uuid = "GA1";
    drv_jobs_snapshot(H.state, nodes, 1);
    assert_int_equal(nodes[0].gpus[0].shares, 0);
    assert_int_equal(nodes[0].used_cpu_millis, 0);
}

static void snapshot_counts_active(void **state)
{
    put_node("a");
    put_node("b");
    put_job("running", 1, false);
    drv_sched_node_t nodes[2] = {{.id = "a", .n_gpus = 2}, {.id = "b", .n_gpus = 1}};
    nodes[0].gpus[0].uuid = "GA0";
    nodes[0].gpus[1].uuid = "GA1";
    nodes[1].gpus[0].uuid = "GB0";
    drv_jobs_snapshot(H.state, nodes, 2);
    assert_true(nodes[0].gpus[0].exclusive && nodes[0].gpus[1].exclusive);
    assert_int_equal(nodes[0].gpus[1].used_compute, 100);
    assert_true(nodes[1].gpus[0].exclusive);
    assert_int_equal(nodes[0].used_cpu_millis, 1000);
    assert_int_equal(nodes[1].used_memory_mib, 100);
}

static void absorb_reports(void **state)
{
    put_node("a");
    put_node("b");
    put_job("running", 2, false);
    const drv_obj_t *a = drv_state_get(H.state, DRV_K_NODE, "u/a");
    json_t *stale = json_pack("{s:s, s:s, s:s}", "id", "t-a1-r0", "job", "t", "state", "failed");
    json_t *wrong = json_pack("{s:s, s:s, s:s}", "id", "t-a2-r2", "job", "t", "state", "ready");
    json_t *good = json_pack("{s:s, s:s, s:s, s:s}", "id", "t-a2-r1", "job", "t", "state",
                             "failed", "last_exit", "exited with status 3");
    assert_false(drv_job_absorb_worker(&H, a, stale));   /* attempt 1's */
    assert_false(drv_job_absorb_worker(&H, a, wrong));   /* rank 2 is on node b */
    assert_true(drv_job_absorb_worker(&H, a, good));
    assert_false(drv_job_absorb_worker(&H, a, good));    /* no change */
    const drv_obj_t *j = drv_state_get(H.state, DRV_K_JOB, "u/t");
    const json_t *w = json_object_get(json_object_get(j->status, "workers"), "1");
    assert_string_equal(json_string_value(json_object_get(w, "state")), "failed");
    assert_string_equal(json_string_value(json_object_get(w, "last_exit")),
                        "exited with status 3");
    assert_null(json_object_get(json_object_get(j->status, "workers"), "0"));
    json_t *ok = json_pack("{s:s, s:s, s:s}", "id", "t-a2-r0", "job", "t", "state", "ready");
    assert_true(drv_job_absorb_worker(&H, a, ok));   /* "ready" is a running worker */
    j = drv_state_get(H.state, DRV_K_JOB, "u/t");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(j->status, "workers"), "0"), "state")),
                        "running");
    assert_int_equal(json_integer_value(json_object_get(j->status, "workers_ready")), 1);
    json_decref(stale);
    json_decref(wrong);
    json_decref(good);
    json_decref(ok);
}

static void put_run_is_an_event(void **state)
{
    drv_obj_t *j = put_job("running", 1, false);
    json_t *run = json_deep_copy(drv_job_run(j));
    json_object_set_new(run, "state", json_string("succeeded"));
    json_object_set_new(run, "reason", json_string("all done"));
    j = drv_job_put_run(&H, j, run, NULL);
    assert_string_equal(drv_job_state(j), "succeeded");
    assert_string_equal(json_string_value(json_object_get(j->status, "state")), "succeeded");
    assert_int_equal(j->rv, 2);
    json_t *ev = drv_events_list(H.events, "u", "job", "t", NULL, 10);
    assert_int_equal(json_array_size(ev), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 0), "reason")),
                        "running -> succeeded: all done");
    json_decref(ev);
}

/* A node with `gpus` GPUs at `price` USD an hour (its status as cost.c
 * renders it). */
static void put_priced_node(const char *id, int gpus, double price)
{
    put_node(id);
    drv_obj_t *n = drv_state_get(H.state, DRV_K_NODE, id[0] == 'a' ? "u/a" : "u/b");
    json_t *g = json_array();
    for (int i = 0; i < gpus; i++)
        json_array_append_new(g, json_pack("{s:i}", "index", i));
    drv_state_set_status(H.state, n, json_pack("{s:o, s:{s:f}}", "gpus", g, "cost",
                                                "price_per_hour", price));
}

/* GPU-hours and cost: the placement's rate (a worker's share of its node's
 * price by GPUs), counted when the gang leaves its nodes; where it ran is
 * kept for its logs. */
static void usage_and_last_workers(void **state)
{
    put_priced_node("a", 2, 2.0);   /* ranks 0 and 1: 1 of 2 GPUs each, 1.00/h each */
    put_priced_node("b", 1, 1.0);   /* rank 2: the whole node, 1.00/h */
    drv_obj_t *j = put_job("running", 1, false);
    json_t *rate = drv_job_rate(H.state, "u", json_object_get(drv_job_run(j), "placement"));
    assert_float_equal(json_number_value(json_object_get(rate, "gpus")), 3.0, 1e-9);
    assert_float_equal(json_number_value(json_object_get(rate, "usd_per_hour")), 3.0, 1e-9);
    json_t *run = json_deep_copy(drv_job_run(j));
    json_object_set_new(run, "rate", rate);
    json_object_set_new(run, "admitted_at", json_integer(drv_now_ms() / 1000 - 1800));
    j = drv_job_put_run(&H, j, run, NULL);
    /* running: whole minutes so far, half an hour of 3 GPUs */
    assert_float_equal(json_number_value(json_object_get(j->status, "gpu_hours")), 1.5, 0.01);
    run = json_deep_copy(drv_job_run(j));
    json_object_set_new(run, "state", json_string("succeeded"));
    json_object_set_new(run, "placement", json_array());
    j = drv_job_put_run(&H, j, run, NULL);
    const json_t *used = json_object_get(drv_job_run(j), "used");
    assert_float_equal(json_number_value(json_object_get(used, "gpu_seconds")), 3 * 1800.0, 3 * 2.0);
    assert_float_equal(json_number_value(json_object_get(used, "cost_usd")), 1.5, 0.01);
    assert_float_equal(json_number_value(json_object_get(j->status, "gpu_hours")), 1.5, 0.01);
    assert_float_equal(json_number_value(json_object_get(j->status, "cost_usd")), 1.5, 0.01);
    assert_null(json_object_get(drv_job_run(j), "rate"));
    const json_t *lw = json_object_get(drv_job_run(j), "last_workers");
    assert_int_equal(json_integer_value(json_object_get(lw, "attempt")), 1);
    const json_t *ln = json_object_get(lw, "nodes");
    assert_int_equal(json_array_size(ln), 3);
    assert_string_equal(json_string_value(json_array_get(ln, 0)), "a");
    assert_string_equal(json_string_value(json_array_get(ln, 2)), "b");
}

/* After a port try the workers are new ids; the earlier try's are stale. */
static void port_try_worker_ids(void **state)
{
    put_node("a");
    put_node("b");
    drv_obj_t *j = put_job("starting", 2, false);
    json_t *run = json_deep_copy(drv_job_run(j));
    json_object_set_new(run, "port_try", json_integer(3));
    drv_job_put_run(&H, j, run, NULL);
    json_t *da = json_array();
    const drv_obj_t *a = drv_state_get(H.state, DRV_K_NODE, "u/a");
    drv_jobs_desired(&H, a, da);
    assert_string_equal(json_string_value(json_object_get(json_array_get(da, 0), "id")),
                        "t-a2-p3-r0");
    json_t *old = json_pack("{s:s, s:s, s:s}", "id", "t-a2-r0", "job", "t", "state", "failed");
    json_t *cur = json_pack("{s:s, s:s, s:s}", "id", "t-a2-p3-r0", "job", "t", "state", "ready");
    assert_false(drv_job_absorb_worker(&H, a, old));
    assert_true(drv_job_absorb_worker(&H, a, cur));
    json_decref(old);
    json_decref(cur);
    json_decref(da);
}

/* Two ready nodes as the controller's snapshot: a (GA0, GA1), b (GB0). */
static void snap_ab(drv_sched_node_t *nodes)
{
    memset(nodes, 0, 2 * sizeof *nodes);
    static const char *const uu[2][2] = {{"GA0", "GA1"}, {"GB0", NULL}};
    for (int i = 0; i < 2; i++) {
        nodes[i].id = i ? "b" : "a";
        nodes[i].schedulable = true;
        nodes[i].cpu_millis = 8000;
        nodes[i].memory_mib = 8192;
        nodes[i].n_gpus = i ? 1 : 2;
        for (int g = 0; g < nodes[i].n_gpus; g++)
            nodes[i].gpus[g] = (drv_sched_gpu_t){.index = g, .uuid = uu[i][g], .type = "L4",
                                                 .memory_mib = 24576, .healthy = true};
    }
}

/* A preempted gang's workers are stopping: its placement stays held until
 * each node reports its workers gone; the room it frees is not counted
 * twice (no more victims for it). */
static void stopping_held_until_gone(void **state)
{
    put_node("a");
    put_node("b");
    drv_obj_t *j = put_job("running", 1, false);
    json_t *run = json_deep_copy(drv_job_run(j));
    drv_job_stop_placement(j, run);
    json_object_set_new(run, "state", json_string("preempted"));
    json_object_set_new(run, "placement", json_array());
    json_object_set_new(run, "attempt", json_integer(2));
    j = drv_job_put_run(&H, j, run, NULL);
    assert_int_equal(json_array_size(json_object_get(drv_job_run(j), "stopping")), 3);
    drv_sched_node_t nodes[2], fut[2];
    snap_ab(nodes);
    drv_jobs_snapshot(H.state, nodes, 2);
    assert_true(nodes[0].gpus[0].exclusive && nodes[0].gpus[1].exclusive);
    assert_true(nodes[1].gpus[0].exclusive);
    assert_int_equal(nodes[0].used_cpu_millis, 1000);
    /* a 3 x 1 GPU gang does not fit while they stop ... */
    drv_gang_request_t g = {.workers = 3,
                            .worker = {.gpu_count = 1, .compute_percent = 100,
                                       .cpu_millis = 500, .memory_mib = 100}};
    drv_sched_choice_t ch[3];
    drv_gang_placement_t gp = {.ranks = ch};
    char why[256];
    assert_int_equal(drv_gang_place(nodes, 2, &g, NULL, &gp, why, sizeof why), -1);
    /* ... and fits once they are gone: no victim is needed for it */
    memcpy(fut, nodes, sizeof nodes);
    drv_jobs_release_stopping(H.state, fut, 2);
    assert_false(fut[0].gpus[0].exclusive || fut[1].gpus[0].exclusive);
    assert_int_equal(fut[0].gpus[1].shares, 0);
    assert_int_equal(fut[0].used_cpu_millis, 0);
    assert_int_equal(drv_gang_place(fut, 2, &g, NULL, &gp, why, sizeof why), 0);
    size_t victims[1], nv = 9;
    assert_int_equal(drv_admit_victims(fut, 2, NULL, 0, &g, 10, 0, NULL, victims, &nv, why,
                                       sizeof why), 0);
    assert_int_equal(nv, 0);
    /* node a reports rank 0 terminating and rank 1 no more; node b nothing */
    const drv_obj_t *a = drv_state_get(H.state, DRV_K_NODE, "u/a");
    const drv_obj_t *b = drv_state_get(H.state, DRV_K_NODE, "u/b");
    json_t *rep = json_pack("[{s:s, s:s, s:s}]", "id", "t-a1-r0", "job", "t", "state",
                            "terminating");
    assert_true(drv_jobs_stopping_report(&H, a, rep));
    assert_false(drv_jobs_stopping_report(&H, a, rep));   /* no change */
    json_t *none = json_array();
    assert_true(drv_jobs_stopping_report(&H, b, none));
    j = drv_state_get(H.state, DRV_K_JOB, "u/t");
    const json_t *st = json_object_get(drv_job_run(j), "stopping");
    assert_int_equal(json_array_size(st), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(st, 0), "rank")), 0);
    snap_ab(nodes);
    drv_jobs_snapshot(H.state, nodes, 2);
    assert_true(nodes[0].gpus[0].exclusive);
    assert_false(nodes[0].gpus[1].exclusive || nodes[1].gpus[0].exclusive);
    /* rank 0 ended: nothing is held any more */
    json_decref(rep);
    rep = json_pack("[{s:s, s:s, s:s}]", "id", "t-a1-r0", "job", "t", "state", "failed");
    assert_true(drv_jobs_stopping_report(&H, a, rep));
    j = drv_state_get(H.state, DRV_K_JOB, "u/t");
    assert_null(json_object_get(drv_job_run(j), "stopping"));
    snap_ab(nodes);
    drv_jobs_snapshot(H.state, nodes, 2);
    assert_false(nodes[0].gpus[0].exclusive);
    assert_int_equal(nodes[0].used_cpu_millis, 0);
    json_decref(rep);
    json_decref(none);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(desired_env_per_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(desired_checkpoint_field, setup, teardown),
        cmocka_unit_test_setup_teardown(queued_job_holds_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(snapshot_counts_active, setup, teardown),
        cmocka_unit_test_setup_teardown(absorb_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(put_run_is_an_event, setup, teardown),
        cmocka_unit_test_setup_teardown(usage_and_last_workers, setup, teardown),
        cmocka_unit_test_setup_teardown(port_try_worker_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(stopping_held_until_gone, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
