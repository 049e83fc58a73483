/* test_autoscale_nodes.c — unit tests of the node autoscaler
 * (src/autoscale/nodes.c) on synthetic nodepools: the simulated fit of
 * pending replicas on new nodes, cheapest type per placed replica, GPU type
 * constraints, max_nodes, no over-provisioning while nodes are on their way,
 * spot with fallback (after a capacity error, back to spot after the
 * backoff, doubling backoff), spot-only waiting, provisioning timeouts,
 * empty-node scale-down after the delay and never below min_nodes,
 * min_nodes top-up, events, and the config from a nodepool spec and the
 * embedded catalog. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoscale/nodes.h"

#define S 1000LL
#define MIN (60 * S)

/* Synthetic instance types (prices chosen to make the choices clear). */
static const drv_instance_type_t SMALL = {   /* 1 x L4: $1.00, spot $0.30 */
    .id = "small", .provider = "test", .vcpus = 8, .memory_mib = 32768, .gpu_type = "L4",
    .gpu_count = 1, .gpu_memory_mib = 24576, .price_per_hour = 1.00, .spot_price_per_hour = 0.30};
static const drv_instance_type_t QUAD = {    /* 4 x L4: $3.60, spot $1.50 */
    .id = "quad", .provider = "test", .vcpus = 48, .memory_mib = 196608, .gpu_type = "L4",
    .gpu_count = 4, .gpu_memory_mib = 24576, .price_per_hour = 3.60, .spot_price_per_hour = 1.50};
static const drv_instance_type_t BIG = {     /* 1 x H100: $5.00, spot unknown */
    .id = "big", .provider = "test", .vcpus = 16, .memory_mib = 131072, .gpu_type = "H100",
    .gpu_count = 1, .gpu_memory_mib = 81920, .price_per_hour = 5.00, .spot_price_per_hour = -1};
static const drv_instance_type_t CPU = {     /* no GPU: $0.10 */
    .id = "cpu", .provider = "test", .vcpus = 4, .memory_mib = 16384, .gpu_type = "",
    .gpu_count = 0, .gpu_memory_mib = 0, .price_per_hour = 0.10, .spot_price_per_hour = 0.05};

/* A half-L4 share: two per 24 GiB GPU. */
static drv_sched_request_t share(void)
{
    drv_sched_request_t r = {.gpu_count = 1, .gpu_memory_mib = 10000, .compute_percent = 50,
                             .cpu_millis = 1000, .memory_mib = 4096};
    return r;
}

static drv_sched_request_t whole(int n)
{
    drv_sched_request_t r = {.gpu_count = n, .gpu_memory_mib = 0, .compute_percent = 100,
                             .cpu_millis = 2000, .memory_mib = 8192};
    return r;
}

static void fill_reqs(drv_sched_request_t *r, size_t n, drv_sched_request_t v)
{
    for (size_t i = 0; i < n; i++)
        r[i] = v;
}

static drv_nas_config_t cfg_of(const drv_instance_type_t *const *types, size_t n,
                               drv_capacity_policy_t cap, int min, int max)
{
    drv_nas_config_t c = {
        .min_nodes = min, .max_nodes = max, .types = types, .n_types = n, .capacity = cap,
        .scale_down_delay_ms = 300 * S, .provision_timeout_ms = 10 * MIN,
        .backoff_ms = 60 * S, .backoff_max_ms = 10 * MIN,
    };
    return c;
}

static drv_nas_node_t node(const char *id, const drv_instance_type_t *t, drv_capacity_t cap,
                           drv_nas_node_state_t st, int64_t created)
{
    drv_nas_node_t n = {.id = id, .type = t, .capacity = cap, .state = st,
                        .created_ms = created};
    return n;
}

static drv_nas_node_t empty_node(const char *id, const drv_instance_type_t *t, int64_t since)
{
    drv_nas_node_t n = node(id, t, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_READY, 0);
    n.empty = true;
    n.empty_since_ms = since;
    return n;
}

/* The decision is ~40 KiB: keep it off the stack. */
static drv_nas_decision_t *decide(const drv_nas_config_t *cfg, drv_nas_state_t *s, int64_t now,
                                  const drv_nas_node_t *nodes, size_t n_nodes,
                                  const drv_sched_request_t *pend, size_t n_pend, bool *covered)
{
    static drv_nas_decision_t d;
    drv_error_t e = {0};
    int rc = drv_nas_decide(cfg, s, now, nodes, n_nodes, pend, n_pend, covered, &d, &e);
    if (rc != 0)
        fprintf(stderr, "decide: %s\n", e.message);
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < d.n_events; i++) {
        assert_true(d.events[i].kind[0] != '\0');
        assert_true(d.events[i].reason[0] != '\0');
    }
    return &d;
}

static int total_created(const drv_nas_decision_t *d)
{
    int n = 0;
    for (size_t i = 0; i < d->n_create; i++)
        n += d->create[i].count;
    return n;
}

static const drv_nas_event_t *find_event(const drv_nas_decision_t *d, const char *kind)
{
    for (size_t i = 0; i < d->n_events; i++)
        if (strcmp(d->events[i].kind, kind) == 0)
            return &d->events[i];
    return NULL;
}

/* Turn a decision's creations into provisioning nodes appended to nodes[]. */
static size_t add_created(const drv_nas_decision_t *d, drv_nas_node_t *nodes, size_t n,
                          int64_t now)
{
    for (size_t i = 0; i < d->n_create; i++)
        for (int k = 0; k < d->create[i].count; k++)
            nodes[n++] = node("new", d->create[i].type, d->create[i].capacity,
                              DRV_NAS_NODE_PROVISIONING, now);
    return n;
}

/* --- the simulated fit ----------------------------------------------------- */

static void test_node_holds(void **st)
{
    (void)st;
    drv_sched_request_t r[10];
    fill_reqs(r, 10, share());
    assert_int_equal(drv_nas_node_holds(&SMALL, r, 10, NULL), 2);   /* 2 shares per L4 */
    assert_int_equal(drv_nas_node_holds(&QUAD, r, 10, NULL), 8);
    assert_int_equal(drv_nas_node_holds(&CPU, r, 10, NULL), 0);
    bool skip[10] = {false};
    for (int i = 0; i < 9; i++)
        skip[i] = true;
    assert_int_equal(drv_nas_node_holds(&QUAD, r, 10, skip), 1);
    drv_sched_request_t w = whole(2);
    assert_int_equal(drv_nas_node_holds(&SMALL, &w, 1, NULL), 0);
    assert_int_equal(drv_nas_node_holds(&QUAD, &w, 1, NULL), 1);
    /* CPU and memory count too: 4 vCPUs hold 2 of 2000 millicores */
    drv_sched_request_t c[3] = {whole(0), whole(0), whole(0)};
    assert_int_equal(drv_nas_node_holds(&CPU, c, 3, NULL), 2);
    /* GPU type constraints */
    static const char *const h100[] = {"h100"};
    drv_sched_request_t t = share();
    t.gpu_types = h100;
    t.n_gpu_types = 1;
    assert_int_equal(drv_nas_node_holds(&SMALL, &t, 1, NULL), 0);
    assert_int_equal(drv_nas_node_holds(&BIG, &t, 1, NULL), 1);
}

/* --- scale up -------------------------------------------------------------- */

static void test_cheapest_per_placed_replica(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL, &QUAD};
    drv_nas_config_t cfg = cfg_of(types, 2, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[8];
    fill_reqs(r, 8, share());
    /* two pending: small holds both at $0.50 each; quad $1.80 each */
    drv_nas_decision_t *d = decide(&cfg, &s, 0, NULL, 0, r, 2, NULL);
    assert_int_equal(d->n_create, 1);
    assert_ptr_equal(d->create[0].type, &SMALL);
    assert_int_equal(d->create[0].count, 1);
    assert_int_equal(d->create[0].replicas, 2);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_ON_DEMAND);
    const drv_nas_event_t *e = find_event(d, "scale_up");
    assert_non_null(e);
    assert_string_equal(e->instance_type, "small");
    assert_int_equal(e->nodes, 1);
    assert_int_equal(e->replicas, 2);
    assert_true(strstr(e->reason, "small") != NULL);
    /* eight pending: quad holds all at $0.45 each, better than small's $0.50 */
    d = decide(&cfg, &s, 0, NULL, 0, r, 8, NULL);
    assert_int_equal(d->n_create, 1);
    assert_ptr_equal(d->create[0].type, &QUAD);
    assert_int_equal(d->create[0].count, 1);
    assert_int_equal(d->covered_new, 8);
    /* the same with the scheduler's policy named in the config */
    static const char *const names[] = {"best-fit", "drover"};
    for (size_t i = 0; i < 2; i++) {
        cfg.policy = drv_place_policy(names[i]);
        if (!cfg.policy)
            continue;
        d = decide(&cfg, &s, 0, NULL, 0, r, 8, NULL);
        assert_int_equal(d->n_create, 1);
        assert_ptr_equal(d->create[0].type, &QUAD);
    }
    cfg.policy = NULL;
    /* ten: a quad for eight, then a small for the last two */
    drv_sched_request_t r10[10];
    fill_reqs(r10, 10, share());
    d = decide(&cfg, &s, 0, NULL, 0, r10, 10, NULL);
    assert_int_equal(total_created(d), 2);
    assert_int_equal(d->n_create, 2);
    assert_ptr_equal(d->create[0].type, &QUAD);
    assert_ptr_equal(d->create[1].type, &SMALL);
    assert_int_equal(d->live_after, 2);
    /* the same with spot prices: quad $0.1875 vs small $0.15 per replica */
    cfg.capacity = DRV_CAPACITY_POLICY_SPOT;
    d = decide(&cfg, &s, 0, NULL, 0, r, 8, NULL);
    assert_int_equal(d->n_create, 1);
    assert_ptr_equal(d->create[0].type, &SMALL);
    assert_int_equal(d->create[0].count, 4);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_SPOT);
}

static void test_gpu_type_and_mixed_requests(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL, &BIG, &CPU};
    drv_nas_config_t cfg = cfg_of(types, 3, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    static const char *const h100[] = {"H100"};
    drv_sched_request_t r[5] = {share(), share(), share(), whole(0), whole(1)};
    r[4].gpu_types = h100;
    r[4].n_gpu_types = 1;
    bool covered[5];
    drv_nas_decision_t *d = decide(&cfg, &s, 0, NULL, 0, r, 5, covered);
    /* the H100 one takes a big node, the CPU one a cpu node, the shares need
     * two smalls */
    int smalls = 0, bigs = 0, cpus = 0;
    for (size_t i = 0; i < d->n_create; i++) {
        if (d->create[i].type == &SMALL)
            smalls += d->create[i].count;
        if (d->create[i].type == &BIG)
            bigs += d->create[i].count;
        if (d->create[i].type == &CPU)
            cpus += d->create[i].count;
    }
    assert_int_equal(smalls, 2);
    assert_int_equal(bigs, 1);
    assert_int_equal(cpus, 1);
    for (int i = 0; i < 5; i++)
        assert_true(covered[i]);
}

static void test_no_fit(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL};
    drv_nas_config_t cfg = cfg_of(types, 1, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[2] = {whole(2), share()};
    bool covered[2];
    drv_nas_decision_t *d = decide(&cfg, &s, 0, NULL, 0, r, 2, covered);
    assert_int_equal(total_created(d), 1);   /* for the share only */
    assert_int_equal(d->no_fit, 1);
    assert_false(covered[0]);
    assert_true(covered[1]);
    const drv_nas_event_t *e = find_event(d, "no_fit");
    assert_non_null(e);
    assert_int_equal(e->replicas, 1);
}

static void test_never_above_max_nodes(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL};
    drv_nas_config_t cfg = cfg_of(types, 1, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 3);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[20];
    fill_reqs(r, 20, share());
    /* one busy ready node, one not_ready, one lost (not counted) */
    drv_nas_node_t nodes[8] = {
        node("a", &SMALL, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_READY, 0),
        node("b", &SMALL, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_NOT_READY, 0),
        node("c", &SMALL, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_GONE, 0),
    };
    drv_nas_decision_t *d = decide(&cfg, &s, 0, nodes, 3, r, 20, NULL);
    assert_int_equal(d->live_before, 2);
    assert_int_equal(total_created(d), 1);
    assert_int_equal(d->live_after, 3);
    assert_int_equal(d->at_max, 18);
    const drv_nas_event_t *e = find_event(d, "at_max_nodes");
    assert_non_null(e);
    assert_int_equal(e->replicas, 18);
    /* at max already: nothing, whatever is pending */
    nodes[2].state = DRV_NAS_NODE_READY;
    d = decide(&cfg, &s, 0, nodes, 3, r, 20, NULL);
    assert_int_equal(total_created(d), 0);
    assert_int_equal(d->at_max, 20);
    /* max 0: never */
    cfg.max_nodes = 0;
    d = decide(&cfg, &s, 0, NULL, 0, r, 20, NULL);
    assert_int_equal(total_created(d), 0);
}

static void test_no_over_provisioning(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL};
    drv_nas_config_t cfg = cfg_of(types, 1, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[5];
    fill_reqs(r, 5, share());
    drv_nas_node_t nodes[16];
    size_t n = 0;
    /* five pending: three smalls */
    drv_nas_decision_t *d = decide(&cfg, &s, 0, nodes, n, r, 5, NULL);
    assert_int_equal(total_created(d), 3);
    n = add_created(d, nodes, n, 0);
    /* the next passes, while they provision: nothing more */
    for (int64_t t = 1 * S; t < 5 * MIN; t += 30 * S) {
        bool covered[5];
        d = decide(&cfg, &s, t, nodes, n, r, 5, covered);
        assert_int_equal(total_created(d), 0);
        assert_int_equal(d->covered_on_the_way, 5);
        for (int i = 0; i < 5; i++)
            assert_true(covered[i]);
        assert_int_equal(d->n_events, 0);
    }
    /* one more pending replica: still room on the third node's GPU */
    drv_sched_request_t r6[6];
    fill_reqs(r6, 6, share());
    d = decide(&cfg, &s, 5 * MIN, nodes, n, r6, 6, NULL);
    assert_int_equal(total_created(d), 0);
    /* two more (7): one more node */
    drv_sched_request_t r7[7];
    fill_reqs(r7, 7, share());
    d = decide(&cfg, &s, 5 * MIN, nodes, n, r7, 7, NULL);
    assert_int_equal(total_created(d), 1);
    assert_int_equal(d->covered_on_the_way, 6);
    assert_int_equal(d->covered_new, 1);
    const drv_nas_event_t *e = find_event(d, "scale_up");
    assert_non_null(e);
    assert_true(strstr(e->reason, "6 held by nodes on their way") != NULL);
    /* an empty ready node that would hold a pending replica covers it and
     * is not scaled down */
    drv_nas_node_t idle[1] = {empty_node("idle", &SMALL, 0)};
    bool covered[1];
    d = decide(&cfg, &s, 60 * MIN, idle, 1, r, 1, covered);
    assert_int_equal(total_created(d), 0);
    assert_int_equal(d->n_delete, 0);
    assert_int_equal(d->covered_existing, 1);
    assert_true(covered[0]);
}

/* --- capacity: spot, fallback, backoff ------------------------------------ */

static void test_spot_fallback_and_return(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL};
    drv_nas_config_t cfg = cfg_of(types, 1, DRV_CAPACITY_POLICY_SPOT_WITH_FALLBACK, 0, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[1] = {share()};
    /* spot first */
    drv_nas_decision_t *d = decide(&cfg, &s, 0, NULL, 0, r, 1, NULL);
    assert_int_equal(d->n_create, 1);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_SPOT);
    assert_false(d->create[0].fallback);
    assert_null(find_event(d, "fallback"));
    /* the provider answers with a capacity error */
    drv_nas_report_failure(&s, &cfg, "small", DRV_CAPACITY_SPOT, 1 * S, "InsufficientInstanceCapacity");
    int64_t until;
    assert_true(drv_nas_backing_off(&s, "small", DRV_CAPACITY_SPOT, 1 * S, &until));
    assert_int_equal(until, 61 * S);
    assert_false(drv_nas_backing_off(&s, "small", DRV_CAPACITY_ON_DEMAND, 1 * S, NULL));
    /* on-demand during the backoff, with a fallback event */
    d = decide(&cfg, &s, 2 * S, NULL, 0, r, 1, NULL);
    assert_int_equal(d->n_create, 1);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_ON_DEMAND);
    assert_true(d->create[0].fallback);
    const drv_nas_event_t *e = find_event(d, "fallback");
    assert_non_null(e);
    assert_true(strstr(e->reason, "InsufficientInstanceCapacity") != NULL);
    assert_int_equal(d->retry_at_ms, 61 * S);
    d = decide(&cfg, &s, 60 * S, NULL, 0, r, 1, NULL);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_ON_DEMAND);
    /* spot again once the backoff is over */
    d = decide(&cfg, &s, 61 * S, NULL, 0, r, 1, NULL);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_SPOT);
    assert_false(d->create[0].fallback);
    /* a second failure doubles the backoff */
    drv_nas_report_failure(&s, &cfg, "small", DRV_CAPACITY_SPOT, 62 * S, "again");
    assert_true(drv_nas_backing_off(&s, "small", DRV_CAPACITY_SPOT, 62 * S, &until));
    assert_int_equal(until, 62 * S + 120 * S);
    /* ... up to the maximum */
    for (int i = 0; i < 10; i++)
        drv_nas_report_failure(&s, &cfg, "small", DRV_CAPACITY_SPOT, 100 * S, "again");
    assert_true(drv_nas_backing_off(&s, "small", DRV_CAPACITY_SPOT, 100 * S, &until));
    assert_int_equal(until, 100 * S + 10 * MIN);
    /* a spot node created after the failure that joined: forgotten */
    drv_nas_node_t ok[1] = {node("ok", &SMALL, DRV_CAPACITY_SPOT, DRV_NAS_NODE_READY, 150 * S)};
    d = decide(&cfg, &s, 200 * S, ok, 1, r, 1, NULL);
    assert_int_equal(s.n_backoff, 0);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_SPOT);
}

static void test_fallback_to_cheaper_other_type(void **st)
{
    (void)st;
    /* spot of the first type fails: the cheapest remaining option wins,
     * which may be another type's spot rather than this type's on-demand */
    const drv_instance_type_t *types[] = {&SMALL, &QUAD};
    drv_nas_config_t cfg = cfg_of(types, 2, DRV_CAPACITY_POLICY_SPOT_WITH_FALLBACK, 0, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[8];
    fill_reqs(r, 8, share());
    drv_nas_report_failure(&s, &cfg, "small", DRV_CAPACITY_SPOT, 0, "no spot");
    /* small on-demand $0.50/replica vs quad spot $0.1875/replica */
    drv_nas_decision_t *d = decide(&cfg, &s, 1 * S, NULL, 0, r, 8, NULL);
    assert_int_equal(d->n_create, 1);
    assert_ptr_equal(d->create[0].type, &QUAD);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_SPOT);
    assert_null(find_event(d, "fallback"));
}

static void test_spot_only_waits(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL};
    drv_nas_config_t cfg = cfg_of(types, 1, DRV_CAPACITY_POLICY_SPOT, 1, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[3];
    fill_reqs(r, 3, share());
    drv_nas_report_failure(&s, &cfg, "small", DRV_CAPACITY_SPOT, 0, "no spot");
    drv_nas_decision_t *d = decide(&cfg, &s, 10 * S, NULL, 0, r, 3, NULL);
    assert_int_equal(total_created(d), 0);   /* not even for min_nodes */
    assert_int_equal(d->waiting_backoff, 3);
    assert_int_equal(d->retry_at_ms, 60 * S);
    const drv_nas_event_t *e = find_event(d, "backoff");
    assert_non_null(e);
    assert_true(strstr(e->reason, "below min_nodes") != NULL);
    d = decide(&cfg, &s, 60 * S, NULL, 0, r, 3, NULL);
    assert_int_equal(total_created(d), 2);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_SPOT);
}

/* --- provisioning timeout -------------------------------------------------- */

static void test_provision_timeout_retries_other_capacity(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL};
    drv_nas_config_t cfg = cfg_of(types, 1, DRV_CAPACITY_POLICY_SPOT_WITH_FALLBACK, 0, 1);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[1] = {share()};
    drv_nas_node_t nodes[2] = {
        node("slow", &SMALL, DRV_CAPACITY_SPOT, DRV_NAS_NODE_PROVISIONING, 0)};
    /* before the timeout: it is on its way, nothing to do */
    drv_nas_decision_t *d = decide(&cfg, &s, 10 * MIN - 1, nodes, 1, r, 1, NULL);
    assert_int_equal(d->n_delete, 0);
    assert_int_equal(total_created(d), 0);
    /* at the timeout: deleted, and since max_nodes is 1 the replacement
     * fits in its place, on-demand (spot backs off) */
    d = decide(&cfg, &s, 10 * MIN, nodes, 1, r, 1, NULL);
    assert_int_equal(d->n_delete, 1);
    assert_int_equal(d->del[0].node, 0);
    assert_int_equal(d->del[0].why, DRV_NAS_DELETE_PROVISION_TIMEOUT);
    const drv_nas_event_t *e = find_event(d, "provision_timeout");
    assert_non_null(e);
    assert_string_equal(e->node, "slow");
    assert_string_equal(e->instance_type, "small");
    assert_true(drv_nas_backing_off(&s, "small", DRV_CAPACITY_SPOT, 10 * MIN, NULL));
    assert_int_equal(total_created(d), 1);
    assert_int_equal(d->create[0].capacity, DRV_CAPACITY_ON_DEMAND);
    assert_true(d->create[0].fallback);
    assert_non_null(find_event(d, "fallback"));
    assert_int_equal(d->live_after, 1);
}

static void test_provision_timeout_retries_other_type(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL, &QUAD};
    drv_nas_config_t cfg = cfg_of(types, 2, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_sched_request_t r[2] = {share(), share()};
    drv_nas_node_t nodes[4] = {
        node("slow", &SMALL, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_PROVISIONING, 0)};
    drv_nas_decision_t *d = decide(&cfg, &s, 10 * MIN + 5 * S, nodes, 1, r, 2, NULL);
    assert_int_equal(d->n_delete, 1);
    assert_int_equal(d->n_create, 1);
    assert_ptr_equal(d->create[0].type, &QUAD);   /* small backs off */
    /* its replacement times out too: small is back by then (60 s backoff,
     * long over), and quad now backs off */
    nodes[0] = node("slow2", &QUAD, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_PROVISIONING,
                    10 * MIN + 5 * S);
    d = decide(&cfg, &s, 20 * MIN + 5 * S, nodes, 1, r, 2, NULL);
    assert_int_equal(d->n_delete, 1);
    assert_int_equal(d->n_create, 1);
    assert_ptr_equal(d->create[0].type, &SMALL);
    /* a timeout without a known type is deleted, nothing backs off */
    drv_nas_state_init(&s);
    nodes[0] = node("mystery", NULL, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_PROVISIONING, 0);
    d = decide(&cfg, &s, 10 * MIN, nodes, 1, NULL, 0, NULL);
    assert_int_equal(d->n_delete, 1);
    assert_int_equal(s.n_backoff, 0);
}

/* --- scale down ------------------------------------------------------------ */

static void test_empty_nodes_scale_down(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&SMALL};
    drv_nas_config_t cfg = cfg_of(types, 1, DRV_CAPACITY_POLICY_ON_DEMAND, 1, 10);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_nas_node_t nodes[4] = {
        empty_node("e1", &SMALL, 100 * S),
        node("busy", &SMALL, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_READY, 0),
        empty_node("e2", &SMALL, 50 * S),
        empty_node("e3", &SMALL, 200 * S),
    };
    /* 299 s after the first went empty: nothing */
    drv_nas_decision_t *d = decide(&cfg, &s, 349 * S, nodes, 4, NULL, 0, NULL);
    assert_int_equal(d->n_delete, 0);
    /* 300 s: e2 (empty since 50 s) */
    d = decide(&cfg, &s, 350 * S, nodes, 4, NULL, 0, NULL);
    assert_int_equal(d->n_delete, 1);
    assert_int_equal(d->del[0].node, 2);
    assert_int_equal(d->del[0].why, DRV_NAS_DELETE_EMPTY);
    const drv_nas_event_t *e = find_event(d, "scale_down");
    assert_non_null(e);
    assert_string_equal(e->node, "e2");
    /* later: all three, longest empty first */
    d = decide(&cfg, &s, 1000 * S, nodes, 4, NULL, 0, NULL);
    assert_int_equal(d->n_delete, 3);
    assert_int_equal(d->del[0].node, 2);
    assert_int_equal(d->del[1].node, 0);
    assert_int_equal(d->del[2].node, 3);
    assert_int_equal(d->live_after, 1);
    /* never below min_nodes: with min 3, one goes */
    cfg.min_nodes = 3;
    d = decide(&cfg, &s, 1000 * S, nodes, 4, NULL, 0, NULL);
    assert_int_equal(d->n_delete, 1);
    assert_int_equal(d->del[0].node, 2);
    assert_int_equal(d->live_after, 3);
    /* min_nodes = all: none */
    cfg.min_nodes = 4;
    d = decide(&cfg, &s, 1000 * S, nodes, 4, NULL, 0, NULL);
    assert_int_equal(d->n_delete, 0);
    /* not_ready and provisioning nodes are not "empty" nodes */
    cfg.min_nodes = 0;
    nodes[0].state = DRV_NAS_NODE_NOT_READY;
    nodes[2].state = DRV_NAS_NODE_PROVISIONING;
    nodes[2].created_ms = 990 * S;
    d = decide(&cfg, &s, 1000 * S, nodes, 4, NULL, 0, NULL);
    assert_int_equal(d->n_delete, 1);
    assert_int_equal(d->del[0].node, 3);
}

static void test_delete_useless_empty_to_make_room(void **st)
{
    (void)st;
    /* max 2: an empty small (useless to an H100 replica) past the delay goes,
     * and a big node takes its place in the same decision */
    const drv_instance_type_t *types[] = {&SMALL, &BIG};
    drv_nas_config_t cfg = cfg_of(types, 2, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 2);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    static const char *const h100[] = {"H100"};
    drv_sched_request_t r[1] = {whole(1)};
    r[0].gpu_types = h100;
    r[0].n_gpu_types = 1;
    drv_nas_node_t nodes[2] = {
        empty_node("idle", &SMALL, 0),
        node("busy", &SMALL, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_READY, 0),
    };
    drv_nas_decision_t *d = decide(&cfg, &s, 301 * S, nodes, 2, r, 1, NULL);
    assert_int_equal(d->n_delete, 1);
    assert_int_equal(d->n_create, 1);
    assert_ptr_equal(d->create[0].type, &BIG);
    assert_int_equal(d->live_after, 2);
    /* before the delay: at max, it waits */
    d = decide(&cfg, &s, 200 * S, nodes, 2, r, 1, NULL);
    assert_int_equal(d->n_delete, 0);
    assert_int_equal(total_created(d), 0);
    assert_int_equal(d->at_max, 1);
}

/* --- min_nodes ------------------------------------------------------------- */

static void test_min_nodes(void **st)
{
    (void)st;
    const drv_instance_type_t *types[] = {&QUAD, &SMALL, &CPU};
    drv_nas_config_t cfg = cfg_of(types, 3, DRV_CAPACITY_POLICY_ON_DEMAND, 2, 5);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    /* no nodes, nothing pending: two of the cheapest per hour */
    drv_nas_decision_t *d = decide(&cfg, &s, 0, NULL, 0, NULL, 0, NULL);
    assert_int_equal(d->n_create, 1);
    assert_ptr_equal(d->create[0].type, &CPU);
    assert_int_equal(d->create[0].count, 2);
    assert_int_equal(d->create[0].for_min_nodes, 2);
    const drv_nas_event_t *e = find_event(d, "scale_up");
    assert_non_null(e);
    assert_true(strstr(e->reason, "min_nodes") != NULL);
    /* a pending share first gets its small, then one cpu tops up */
    drv_sched_request_t r[1] = {share()};
    d = decide(&cfg, &s, 0, NULL, 0, r, 1, NULL);
    assert_int_equal(total_created(d), 2);
    assert_ptr_equal(d->create[0].type, &SMALL);
    assert_int_equal(d->create[0].for_min_nodes, 0);
    assert_ptr_equal(d->create[1].type, &CPU);
    assert_int_equal(d->create[1].for_min_nodes, 1);
    /* provisioning nodes count */
    drv_nas_node_t nodes[2] = {
        node("p1", &CPU, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_PROVISIONING, 0),
        node("p2", &CPU, DRV_CAPACITY_ON_DEMAND, DRV_NAS_NODE_PROVISIONING, 0)};
    d = decide(&cfg, &s, 1 * S, nodes, 2, NULL, 0, NULL);
    assert_int_equal(total_created(d), 0);
    assert_int_equal(d->n_events, 0);
}

/* --- config ---------------------------------------------------------------- */

static void test_config(void **st)
{
    (void)st;
    drv_capacity_policy_t p;
    assert_int_equal(drv_capacity_policy_parse("spot_with_fallback", &p), 0);
    assert_int_equal(p, DRV_CAPACITY_POLICY_SPOT_WITH_FALLBACK);
    assert_int_equal(drv_capacity_policy_parse("on_demand", &p), 0);
    assert_int_equal(p, DRV_CAPACITY_POLICY_ON_DEMAND);
    assert_int_equal(drv_capacity_policy_parse("spotty", &p), -1);
    assert_int_equal(drv_capacity_policy_parse(NULL, &p), -1);
    assert_string_equal(drv_capacity_name(DRV_CAPACITY_SPOT), "spot");
    assert_string_equal(drv_capacity_name(DRV_CAPACITY_ON_DEMAND), "on_demand");

    drv_error_t e = {0};
    drv_catalog_t *cat = drv_catalog_create_default(&e);
    assert_non_null(cat);
    const drv_instance_type_t *buf[DRV_NAS_MAX_TYPES];
    drv_nas_config_t c;
    json_t *spec = json_pack("{s:[s,s], s:s, s:i, s:i, s:i}", "instance_types", "g6.xlarge",
                             "g5.xlarge", "capacity_type", "spot_with_fallback", "min_nodes", 1,
                             "max_nodes", 4, "node_scale_down_delay_seconds", 120);
    assert_int_equal(drv_nas_config_from_json(spec, cat, buf, DRV_NAS_MAX_TYPES, &c, &e), 0);
    assert_int_equal(c.n_types, 2);
    assert_string_equal(c.types[0]->id, "g6.xlarge");
    assert_int_equal(c.capacity, DRV_CAPACITY_POLICY_SPOT_WITH_FALLBACK);
    assert_int_equal(c.min_nodes, 1);
    assert_int_equal(c.max_nodes, 4);
    assert_int_equal(c.scale_down_delay_ms, 120 * S);
    json_decref(spec);
    /* defaults: on_demand, 0..1, 300 s */
    spec = json_pack("{s:[s]}", "instance_types", "local-l4");
    assert_int_equal(drv_nas_config_from_json(spec, cat, buf, DRV_NAS_MAX_TYPES, &c, &e), 0);
    assert_int_equal(c.capacity, DRV_CAPACITY_POLICY_ON_DEMAND);
    assert_int_equal(c.min_nodes, 0);
    assert_int_equal(c.max_nodes, 1);
    assert_int_equal(c.scale_down_delay_ms, 300 * S);
    json_decref(spec);
    spec = json_pack("{s:[s]}", "instance_types", "no-such-type");
    assert_int_equal(drv_nas_config_from_json(spec, cat, buf, DRV_NAS_MAX_TYPES, &c, &e), -1);
    assert_string_equal(e.field, "instance_types");
    json_decref(spec);
    spec = json_pack("{s:[s], s:i, s:i}", "instance_types", "local-l4", "min_nodes", 3,
                     "max_nodes", 2);
    assert_int_equal(drv_nas_config_from_json(spec, cat, buf, DRV_NAS_MAX_TYPES, &c, &e), -1);
    assert_string_equal(e.field, "max_nodes");
    json_decref(spec);
    spec = json_pack("{s:[], s:s}", "instance_types", "capacity_type", "spot");
    assert_int_equal(drv_nas_config_from_json(spec, cat, buf, DRV_NAS_MAX_TYPES, &c, &e), -1);
    json_decref(spec);
    drv_catalog_destroy(cat);

    /* decide refuses a bad config and leaves the state alone */
    drv_nas_state_t s, copy;
    drv_nas_state_init(&s);
    drv_nas_report_failure(&s, NULL, "small", DRV_CAPACITY_SPOT, 0, "x");
    memcpy(&copy, &s, sizeof s);
    const drv_instance_type_t *types[] = {&SMALL};
    drv_nas_config_t bad = cfg_of(types, 1, DRV_CAPACITY_POLICY_ON_DEMAND, 3, 2);
    static drv_nas_decision_t d;
    assert_int_equal(drv_nas_decide(&bad, &s, 0, NULL, 0, NULL, 0, NULL, &d, &e), -1);
    bad = cfg_of(types, 0, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 2);
    assert_int_equal(drv_nas_decide(&bad, &s, 0, NULL, 0, NULL, 0, NULL, &d, &e), -1);
    assert_memory_equal(&copy, &s, sizeof s);
    /* default backoff without a config: 60 s */
    int64_t until;
    assert_true(drv_nas_backing_off(&s, "small", DRV_CAPACITY_SPOT, 0, &until));
    assert_int_equal(until, DRV_NAS_DEFAULT_BACKOFF_MS);
}

static void test_backoff_table_full(void **st)
{
    (void)st;
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    char id[16];
    for (int i = 0; i < DRV_NAS_MAX_BACKOFF + 5; i++) {
        snprintf(id, sizeof id, "t%d", i);
        drv_nas_report_failure(&s, NULL, id, DRV_CAPACITY_SPOT, i * S, "x");
    }
    assert_int_equal(s.n_backoff, DRV_NAS_MAX_BACKOFF);
    /* the newest are kept, the earliest-ending evicted */
    assert_true(drv_nas_backing_off(&s, id, DRV_CAPACITY_SPOT, 0, NULL));
    assert_false(drv_nas_backing_off(&s, "t0", DRV_CAPACITY_SPOT, 0, NULL));
}

static void test_many_pending_is_quick(void **st)
{
    (void)st;
    /* 2000 identical pending replicas onto 1-GPU nodes: a node per two,
     * capped by max_nodes 500 */
    const drv_instance_type_t *types[] = {&SMALL, &QUAD};
    drv_nas_config_t cfg = cfg_of(types, 2, DRV_CAPACITY_POLICY_ON_DEMAND, 0, 500);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    size_t n = 2000;
    drv_sched_request_t *r = malloc(n * sizeof *r);
    assert_non_null(r);
    fill_reqs(r, n, share());
    drv_nas_decision_t *d = decide(&cfg, &s, 0, NULL, 0, r, n, NULL);
    assert_int_equal(total_created(d), 250);   /* 250 quads hold all 2000 */
    assert_int_equal(d->at_max, 0);
    cfg.max_nodes = 100;
    d = decide(&cfg, &s, 0, NULL, 0, r, n, NULL);
    assert_int_equal(total_created(d), 100);
    assert_int_equal(d->at_max, 1200);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_holds),
        cmocka_unit_test(test_cheapest_per_placed_replica),
        cmocka_unit_test(test_gpu_type_and_mixed_requests),
        cmocka_unit_test(test_no_fit),
        cmocka_unit_test(test_never_above_max_nodes),
        cmocka_unit_test(test_no_over_provisioning),
        cmocka_unit_test(test_spot_fallback_and_return),
        cmocka_unit_test(test_fallback_to_cheaper_other_type),
        cmocka_unit_test(test_spot_only_waits),
        cmocka_unit_test(test_provision_timeout_retries_other_capacity),
        cmocka_unit_test(test_provision_timeout_retries_other_type),
        cmocka_unit_test(test_empty_nodes_scale_down),
        cmocka_unit_test(test_delete_useless_empty_to_make_room),
        cmocka_unit_test(test_min_nodes),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_backoff_table_full),
        cmocka_unit_test(test_many_pending_is_quick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
