/* test_aws_index.c — unit tests of src/provider/aws_index.c, the aws
 * provider's sorted lists: a node's live instance by binary search (dead
 * ones skipped), insertion in order, the reference multiset (launches in
 * flight) and its forward walk (the orphan sweep), and the listing merge —
 * by hand on every rule, then against the straightforward quadratic merge
 * the provider used before, on random lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider/aws_index.h"

static drv_ec2_instance_t ec2(const char *id, const char *owner, const char *node,
                              const char *state)
{
    drv_ec2_instance_t x;
    memset(&x, 0, sizeof x);
    snprintf(x.id, sizeof x.id, "%s", id);
    snprintf(x.owner, sizeof x.owner, "%s", owner);
    snprintf(x.node, sizeof x.node, "%s", node);
    snprintf(x.state, sizeof x.state, "%s", state);
    return x;
}

static drv_aws_inst_t inst(const char *id, const char *owner, const char *node,
                           const char *state, size_t acct, int64_t added_ms)
{
    drv_aws_inst_t in;
    memset(&in, 0, sizeof in);
    in.x = ec2(id, owner, node, state);
    in.acct = acct;
    in.added_ms = added_ms;
    return in;
}

static void sorted(const drv_aws_inst_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        assert_true(drv_aws_inst_cmp(&v[i - 1], &v[i]) <= 0);
}

static void test_inst_lookup(void **st)
{
    (void)st;
    drv_aws_inst_t v[8];
    size_t n = 0;
    drv_aws_inst_t in[] = {
        inst("i-3", "bob", "n1", "running", 0, 0),
        inst("i-1", "alice", "n2", "terminated", 0, 0),
        inst("i-2", "alice", "n2", "pending", 0, 0),
        inst("i-0", "alice", "n1", "shutting-down", 0, 0),
        inst("i-4", "alice", "n10", "running", 0, 0),
    };
    for (size_t i = 0; i < 5; i++)
        drv_aws_inst_insert(v, &n, &in[i]);
    assert_int_equal(n, 5);
    sorted(v, n);
    drv_aws_inst_t *p = drv_aws_inst_of_node(v, n, "alice", "n2");
    assert_non_null(p);
    assert_string_equal(p->x.id, "i-2");   /* the terminated one is skipped */
    assert_null(drv_aws_inst_of_node(v, n, "alice", "n1"));   /* only a dying one */
    assert_string_equal(drv_aws_inst_of_node(v, n, "alice", "n10")->x.id, "i-4");
    assert_string_equal(drv_aws_inst_of_node(v, n, "bob", "n1")->x.id, "i-3");
    assert_null(drv_aws_inst_of_node(v, n, "bob", "n2"));
    assert_null(drv_aws_inst_of_node(v, n, "carol", "n1"));
    assert_null(drv_aws_inst_of_node(v, 0, "bob", "n1"));
    /* by id, within the node */
    assert_string_equal(drv_aws_inst_find(v, n, "alice", "n2", "i-1")->x.state, "terminated");
    assert_null(drv_aws_inst_find(v, n, "alice", "n1", "i-1"));
    assert_null(drv_aws_inst_find(v, n, "alice", "n2", "i-9"));
    assert_true(drv_aws_live_state("stopped"));
    assert_false(drv_aws_live_state("shutting-down"));
}

static void test_refs(void **st)
{
    (void)st;
    drv_node_ref_t v[8];
    size_t n = 0;
    drv_aws_refs_add(v, &n, "u", "b");
    drv_aws_refs_add(v, &n, "u", "a");
    drv_aws_refs_add(v, &n, "u", "b");   /* queued twice */
    drv_aws_refs_add(v, &n, "t", "z");
    assert_int_equal(n, 4);
    for (size_t i = 1; i < n; i++)
        assert_true(drv_aws_ref_cmp(&v[i - 1], &v[i]) <= 0);
    assert_true(drv_aws_refs_has(v, n, "u", "b"));
    assert_true(drv_aws_refs_has(v, n, "t", "z"));
    assert_false(drv_aws_refs_has(v, n, "t", "a"));
    assert_false(drv_aws_refs_has(v, 0, "u", "a"));
    /* one copy at a time */
    assert_true(drv_aws_refs_remove(v, &n, "u", "b"));
    assert_true(drv_aws_refs_has(v, n, "u", "b"));
    assert_true(drv_aws_refs_remove(v, &n, "u", "b"));
    assert_false(drv_aws_refs_has(v, n, "u", "b"));
    assert_false(drv_aws_refs_remove(v, &n, "u", "b"));
    assert_int_equal(n, 2);
    /* the walk: keys in ascending order, repeats allowed */
    drv_aws_refs_add(v, &n, "u", "c");
    size_t at = 0;
    assert_false(drv_aws_refs_walk(v, n, &at, "a", "a"));
    assert_true(drv_aws_refs_walk(v, n, &at, "t", "z"));
    assert_true(drv_aws_refs_walk(v, n, &at, "t", "z"));
    assert_false(drv_aws_refs_walk(v, n, &at, "u", "0"));
    assert_true(drv_aws_refs_walk(v, n, &at, "u", "a"));
    assert_false(drv_aws_refs_walk(v, n, &at, "u", "b"));
    assert_true(drv_aws_refs_walk(v, n, &at, "u", "c"));
    assert_false(drv_aws_refs_walk(v, n, &at, "v", "a"));
    assert_int_equal(at, n);
}

static const drv_aws_inst_t *by_id(const drv_aws_inst_t *v, size_t n, const char *id)
{
    const drv_aws_inst_t *hit = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].x.id, id) == 0) {
            assert_null(hit);   /* once */
            hit = &v[i];
        }
    return hit;
}

static void test_merge_rules(void **st)
{
    (void)st;
    const int64_t started = 100000, now = 101000, visible = 120000;
    drv_aws_inst_t old[] = {
        inst("i-a", "u", "na", "running", 0, 0),              /* listed before, gone now */
        inst("i-b", "u", "nb", "running", 1, 0),              /* another account: kept */
        inst("i-c", "u", "nc", "pending", 0, now - 1000),     /* launched lately, unlisted */
        inst("i-d", "u", "nd", "pending", 0, now - 2000),     /* launched lately, listed */
        inst("i-e", "u", "ne", "running", 0, 0),              /* an orphan, listed again */
        inst("i-f", "u", "nf", "pending", 0, now - visible - 1),   /* launched long ago */
        inst("i-g", "u", "ng", "pending", 0, started + 10),   /* during the listing */
        inst("i-m", "u", "nm", "running", 0, 0),              /* missed before, gone now */
        inst("i-n", "u", "nn", "running", 0, 0),              /* missed before, listed again */
    };
    old[7].missed = 1;
    old[8].missed = 1;
    old[4].orphan_since_ms = 5000;
    old[4].terminate_sent_ms = 6000;
    drv_ec2_instance_t listed[] = {
        ec2("i-h", "u", "nh", "running"),                      /* new */
        ec2("i-d", "u", "nd", "running"),
        ec2("i-e", "u", "ne", "stopping"),
        ec2("i-x", "v", "nx", "pending"),                      /* listed twice: the last */
        ec2("i-x", "v", "nx", "running"),
        ec2("i-n", "u", "nn", "running"),
    };
    size_t n = 0;
    drv_aws_inst_t *v = drv_aws_merge_listing(old, 9, 0, listed, 6, started, now, visible, &n);
    assert_non_null(v);
    assert_int_equal(n, 10);   /* a b c d e f g h n x */
    sorted(v, n);
    /* one listing without a machine is not its end; the second is */
    assert_non_null(by_id(v, n, "i-a"));
    assert_int_equal(by_id(v, n, "i-a")->missed, 1);
    assert_string_equal(by_id(v, n, "i-a")->x.state, "running");
    assert_null(by_id(v, n, "i-m"));
    assert_int_equal(by_id(v, n, "i-n")->missed, 0);
    assert_int_equal(by_id(v, n, "i-c")->missed, 0);   /* kept as a recent launch */
    /* i-f: launched long ago, never listed: a miss too */
    assert_non_null(by_id(v, n, "i-f"));
    assert_int_equal(by_id(v, n, "i-f")->missed, 1);
    assert_int_equal(by_id(v, n, "i-b")->acct, 1);
    assert_int_equal(by_id(v, n, "i-c")->added_ms, now - 1000);
    assert_int_equal(by_id(v, n, "i-g")->added_ms, started + 10);
    const drv_aws_inst_t *d = by_id(v, n, "i-d");
    assert_string_equal(d->x.state, "running");   /* the listing's word */
    assert_int_equal(d->added_ms, 0);
    const drv_aws_inst_t *e = by_id(v, n, "i-e");
    assert_string_equal(e->x.state, "stopping");
    assert_int_equal(e->orphan_since_ms, 5000);
    assert_int_equal(e->terminate_sent_ms, 6000);
    const drv_aws_inst_t *h = by_id(v, n, "i-h");
    assert_int_equal(h->acct, 0);
    assert_int_equal(h->orphan_since_ms, 0);
    assert_string_equal(by_id(v, n, "i-x")->x.state, "running");
    free(v);
    /* nothing at all */
    v = drv_aws_merge_listing(NULL, 0, 0, NULL, 0, started, now, visible, &n);
    assert_non_null(v);
    assert_int_equal(n, 0);
    free(v);
}

/* --- against the quadratic merge (the provider's before) ----------------------------- */

static drv_aws_inst_t *merge_ref(const drv_aws_inst_t *old, size_t n_old, size_t ai,
                                 const drv_ec2_instance_t *v, size_t n, int64_t started,
                                 int64_t now, int64_t visible, size_t *n_out)
{
    size_t k = 0;
    drv_aws_inst_t *nv = calloc(n_old + n + 1, sizeof *nv);
    assert_non_null(nv);
    for (size_t i = 0; i < n_old; i++)
        if (old[i].acct != ai || old[i].added_ms >= started ||
            (old[i].added_ms > 0 && now - old[i].added_ms < visible))
            nv[k++] = old[i];
        else if (old[i].missed + 1 < DRV_AWS_MISSES_GONE) {
            nv[k] = old[i];
            nv[k++].missed++;
        }
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < k; j++)
            if (strcmp(nv[j].x.id, v[i].id) == 0) {
                nv[j].x = v[i];
                nv[j].added_ms = 0;
                nv[j].missed = 0;
                dup = true;
            }
        if (dup)
            continue;
        drv_aws_inst_t *in = &nv[k++];
        in->x = v[i];
        in->acct = ai;
        for (size_t j = 0; j < n_old; j++)
            if (strcmp(old[j].x.id, v[i].id) == 0) {
                in->orphan_since_ms = old[j].orphan_since_ms;
                in->terminate_sent_ms = old[j].terminate_sent_ms;
            }
    }
    qsort(nv, k, sizeof *nv, drv_aws_inst_cmp);
    *n_out = k;
    return nv;
}

/* Field by field (not the padding). */
static void same(const drv_aws_inst_t *a, const drv_aws_inst_t *b)
{
    assert_int_equal(drv_aws_inst_cmp(a, b), 0);   /* owner, node, id */
    assert_string_equal(a->x.state, b->x.state);
    assert_string_equal(a->x.type, b->x.type);
    assert_string_equal(a->x.head, b->x.head);
    assert_string_equal(a->x.cluster, b->x.cluster);
    assert_string_equal(a->x.nodepool, b->x.nodepool);
    assert_int_equal(a->x.spot, b->x.spot);
    assert_int_equal(a->x.launched, b->x.launched);
    assert_int_equal(a->acct, b->acct);
    assert_int_equal(a->added_ms, b->added_ms);
    assert_int_equal(a->orphan_since_ms, b->orphan_since_ms);
    assert_int_equal(a->terminate_sent_ms, b->terminate_sent_ms);
    assert_int_equal(a->missed, b->missed);
}

static void test_merge_random(void **st)
{
    (void)st;
    static const char *const states[] = {"pending", "running", "stopped", "terminated",
                                         "shutting-down"};
    srand(7);
    for (int round = 0; round < 300; round++) {
        /* unique ids in old (a few accounts); the listing repeats some of
         * them, with new states and, rarely, ids twice */
        size_t n_old = (size_t)(rand() % 40), n = (size_t)(rand() % 40);
        drv_aws_inst_t *old = calloc(n_old + 1, sizeof *old);
        drv_ec2_instance_t *v = calloc(n + 1, sizeof *v);
        assert_non_null(old);
        assert_non_null(v);
        const int64_t started = 1000000, now = 1002000, visible = 120000;
        for (size_t i = 0; i < n_old; i++) {
            char id[32], node[16];
            snprintf(id, sizeof id, "i-%03zu", i);
            snprintf(node, sizeof node, "n%d", rand() % 8);
            int64_t added = (int64_t[]){0, 0, now - 1000, now - visible - 5, started + 1}[rand() % 5];
            old[i] = inst(id, rand() % 2 ? "u" : "w", node, states[rand() % 5],
                          (size_t)(rand() % 3), added);
            old[i].orphan_since_ms = rand() % 3 ? 0 : rand() % 1000 + 1;
            old[i].terminate_sent_ms = rand() % 3 ? 0 : rand() % 1000 + 1;
            old[i].missed = rand() % 2;
        }
        for (size_t i = 0; i < n; i++) {
            char id[32], node[16];
            int which = rand() % 60;   /* below n_old: an old id; repeats happen */
            snprintf(id, sizeof id, "i-%03d", which);
            snprintf(node, sizeof node, "n%d", rand() % 8);
            v[i] = ec2(id, rand() % 2 ? "u" : "w", node, states[rand() % 5]);
            v[i].launched = rand();
        }
        size_t acct = (size_t)(rand() % 3), n1 = 0, n2 = 0;
        drv_aws_inst_t *a = drv_aws_merge_listing(old, n_old, acct, v, n, started, now, visible,
                                                  &n1);
        drv_aws_inst_t *b = merge_ref(old, n_old, acct, v, n, started, now, visible, &n2);
        assert_non_null(a);
        assert_int_equal(n1, n2);
        sorted(a, n1);
        for (size_t i = 0; i < n1; i++)
            same(&a[i], &b[i]);
        free(a);
        free(b);
        free(old);
        free(v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inst_lookup),
        cmocka_unit_test(test_refs),
        cmocka_unit_test(test_merge_rules),
        cmocka_unit_test(test_merge_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
