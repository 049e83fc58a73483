/* test_agent_peers.c — the head's peer tokens (src/api/agent_peers.c): a
 * token names its owner, cluster and epoch (another cluster's, user's or
 * epoch's differs); the accept list is the previous, current and next
 * epoch's, so agents one epoch apart accept each other and a token stops
 * being accepted two epochs after its own; within an epoch every call
 * gives the same answer. Peers by blob (drv_peer_annotate): a node that
 * holds or wants the artifact is a peer for all of it, one that holds or
 * wants another artifact sharing some blobs is a peer for those blobs
 * only, others (nothing shared, another cluster, not ready) are not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/agent_peers.h"
#include "state/nodes.h"
#include "state/state.h"

static const char *tok(json_t *p) { return json_string_value(json_object_get(p, "token")); }

static bool accepts(json_t *p, const char *t)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(p, "accept"), i, a) if (strcmp(json_string_value(a), t) == 0)
        return true;
    return false;
}

static void test_tokens(void **state)
{
    (void)state;
    const int64_t E = DRV_PEER_EPOCH_S, t0 = 1000 * E + 7;
    json_t *a = drv_peer_tokens("alice", "c1", t0), *a2 = drv_peer_tokens("alice", "c1", t0 + 1);
    json_t *b = drv_peer_tokens("alice", "c2", t0), *c = drv_peer_tokens("bob", "c1", t0);
    assert_int_equal(strncmp(tok(a), "drvp_", 5), 0);
    assert_int_equal(strlen(tok(a)), 5 + 64);
    assert_string_equal(tok(a), tok(a2));   /* same epoch */
    assert_int_equal(json_array_size(json_object_get(a, "accept")), 3);
    assert_true(accepts(a, tok(a)));
    assert_false(accepts(a, tok(b)));       /* another cluster */
    assert_false(accepts(a, tok(c)));       /* another user */
    assert_false(accepts(b, tok(a)));
    json_t *next = drv_peer_tokens("alice", "c1", t0 + E), *later = drv_peer_tokens("alice", "c1",
                                                                                     t0 + 2 * E);
    assert_string_not_equal(tok(next), tok(a));   /* rotates */
    assert_true(accepts(next, tok(a)));    /* one epoch apart: still accepted, both ways */
    assert_true(accepts(a, tok(next)));
    assert_false(accepts(later, tok(a)));  /* two epochs later: not any more */
    json_decref(a), json_decref(a2), json_decref(b), json_decref(c);
    json_decref(next), json_decref(later);
}

static drv_state_t *st;

static void put(drv_kind_t kind, const char *key, const char *id, json_t *spec, json_t *status,
                bool ready)
{
    drv_obj_t *o = drv_obj_new(kind, key, "u", id, spec, NULL);
    o->created_at = o->updated_at = 1;
    o->rv = 1;
    o->status = status;
    o->soft.node_state = ready ? DRV_NODE_READY : 0;
    drv_state_put(st, o);
}

#define HX(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c \
              c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c
static const char *S = HX("5"), *A = HX("a"), *B = HX("b"), *C = HX("c");

static json_t *man(const char *digest, const char *h1, const char *h2)
{
    json_t *f = json_pack("[{s:s, s:s}]", "path", "one", "sha256", h1);
    if (h2)
        json_array_append_new(f, json_pack("{s:s, s:s}", "path", "two", "sha256", h2));
    return json_pack("{s:s, s:o}", "digest", digest, "files", f);
}

static void node(const char *id, const char *cluster, const char *held, bool ready)
{
    char key[64], url[64];
    snprintf(key, sizeof key, "u/%s", id);
    snprintf(url, sizeof url, "http://127.0.0.1:1/%s", id);
    json_t *cache = json_pack("{s:s, s:[]}", "peer_url", url, "artifacts");
    if (held)
        json_array_append_new(json_object_get(cache, "artifacts"), json_pack("{s:s}", "digest", held));
    put(DRV_K_NODE, key, id, json_pack("{s:s, s:s}", "id", id, "cluster", cluster),
        json_pack("{s:o}", "cache", cache), ready);
}

static void test_peers_by_blob(void **state)
{
    (void)state;
    st = drv_state_create(NULL);
    assert_non_null(st);
    const char *dA = HX("1"), *dB = HX("2"), *dC = HX("3");
    put(DRV_K_ARTIFACT, "u/A", "A", json_pack("{s:s, s:s, s:o}", "id", "A", "source", "drover://",
                                             "manifest", man(dA, S, A)), NULL, false);
    put(DRV_K_ARTIFACT, "u/B", "B", json_pack("{s:s, s:s, s:o}", "id", "B", "source", "drover://",
                                             "manifest", man(dB, S, B)), NULL, false);
    put(DRV_K_ARTIFACT, "u/C", "C", json_pack("{s:s, s:s, s:o}", "id", "C", "source", "drover://",
                                             "manifest", man(dC, C, NULL)), NULL, false);
    put(DRV_K_MODEL, "u/mA", "mA", json_pack("{s:s, s:{s:s}}", "id", "mA", "artifact", "id", "A"),
        NULL, false);
    put(DRV_K_MODEL, "u/mB", "mB", json_pack("{s:s, s:{s:s}}", "id", "mB", "artifact", "id", "B"),
        NULL, false);
    node("n1", "c1", NULL, true);    /* the one asking: wants A */
    node("n2", "c1", dB, true);      /* holds B: shares S */
    node("n3", "c1", NULL, true);    /* wants A (a replica) */
    node("n4", "c1", dC, true);      /* holds C: nothing shared */
    node("n5", "c2", dA, true);      /* another cluster */
    node("n6", "c1", dA, false);     /* not ready */
    node("n7", "c1", NULL, true);    /* wants B (a replica): shares S */
    put(DRV_K_REPLICA, "u/d/r1", "r1", json_pack("{s:s, s:s, s:s}", "id", "r1", "model", "mA", "node",
                                                 "n1"), NULL, false);
    put(DRV_K_REPLICA, "u/d/r3", "r3", json_pack("{s:s, s:s, s:s}", "id", "r3", "model", "mA", "node",
                                                 "n3"), NULL, false);
    put(DRV_K_REPLICA, "u/e/r7", "r7", json_pack("{s:s, s:s, s:s}", "id", "r7", "model", "mB", "node",
                                                 "n7"), NULL, false);
    const drv_obj_t *asking = drv_state_get(st, DRV_K_NODE, "u/n1");
    const drv_obj_t *a = drv_state_get(st, DRV_K_ARTIFACT, "u/A");
    json_t *set = json_pack("[{s:{s:s, s:O}}, {s:{s:s, s:O}}]", "artifact", "id", "A", "manifest",
                            json_object_get(a->spec, "manifest"), "artifact", "id", "A",
                            "manifest", json_object_get(a->spec, "manifest"));
    drv_peer_annotate(st, asking, set);
    json_t *peers = json_object_get(json_object_get(json_array_get(set, 0), "artifact"), "peers");
    assert_int_equal(json_array_size(peers), 3);
    const char *want[] = {"n2", "n3", "n7"};
    for (size_t i = 0; i < 3; i++) {
        json_t *p = json_array_get(peers, i);
        assert_string_equal(json_string_value(json_object_get(p, "node")), want[i]);
        json_t *bl = json_object_get(p, "blobs");
        if (i == 1) {
            assert_null(bl);   /* all of A */
        } else {
            assert_int_equal(json_array_size(bl), 1);   /* S only */
            assert_string_equal(json_string_value(json_array_get(bl, 0)), S);
        }
    }
    /* the second replica of the same artifact shares the first one's list */
    assert_ptr_equal(json_object_get(json_object_get(json_array_get(set, 1), "artifact"), "peers"),
                     peers);
    json_decref(set);
    drv_state_destroy(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tokens),
                                       cmocka_unit_test(test_peers_by_blob)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
