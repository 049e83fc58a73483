/* test_agent_peers.c — the head's peer tokens (src/api/agent_peers.c): a
 * token names its owner, cluster and epoch (another cluster's, user's or
 * epoch's differs); the accept list is the previous, current and next
 * epoch's, so agents one epoch apart accept each other and a token stops
 * being accepted two epochs after its own; within an epoch every call
 * gives the same answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/agent_peers.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tokens)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
