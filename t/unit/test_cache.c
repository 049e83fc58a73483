/* test_cache.c — the node cache's pure rules (src/agent/cache_rules.c):
 * the sidecar's header and lines (torn last line, bad lines, a header of
 * another download), the index line, and the LRU choice (oldest first,
 * pinned never, ties by hex, not enough room = nothing chosen), the
 * ranking of peers per chunk (a permutation, the same on every node,
 * balanced, a member's removal moves only its chunks) and the plan of one
 * try (owner, bans, waiting, self not a member). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "agent/cache_rules.h"

static void test_sidecar(void **st)
{
    char text[512];
    int n = drv_cache_sidecar_header(text, sizeof text, 10000, 4096, 3);
    assert_string_equal(text, "drover-chunks 1 10000 4096 3\n");
    unsigned char done[3];
    size_t nd;
    strcpy(text + n, "2\n0\n2\n1");   /* 2 twice; "1" torn */
    assert_int_equal(drv_cache_sidecar_parse(text, strlen(text), 10000, 4096, 3, done, &nd), 0);
    assert_int_equal(nd, 2);
    assert_true(done[0] && !done[1] && done[2]);
    /* another download's header: void */
    assert_int_equal(drv_cache_sidecar_parse(text, strlen(text), 10000, 8192, 2, done, &nd), -1);
    assert_int_equal(nd, 0);
    /* an index out of range, a bad number, a leading zero: void */
    const char *bad[] = {"3\n", "x\n", "01\n", "-1\n", "\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        strcpy(text + n, bad[i]);
        assert_int_equal(drv_cache_sidecar_parse(text, strlen(text), 10000, 4096, 3, done, &nd),
                         -1);
        assert_int_equal(nd, 0);
    }
    /* just the header; a torn header */
    text[n] = 0;
    assert_int_equal(drv_cache_sidecar_parse(text, (size_t)n, 10000, 4096, 3, done, &nd), 0);
    assert_int_equal(nd, 0);
    assert_int_equal(drv_cache_sidecar_parse(text, (size_t)n - 1, 10000, 4096, 3, done, &nd), -1);
}

static void test_index_line(void **st)
{
    char hex[65];
    uint64_t size;
    int64_t last;
    char line[200];
    snprintf(line, sizeof line, "%064d 123 456\n", 0);
    assert_int_equal(drv_cache_index_line(line, hex, &size, &last), 0);
    assert_int_equal(size, 123);
    assert_int_equal(last, 456);
    snprintf(line, sizeof line, "%063d 123 456\n", 0);
    assert_int_equal(drv_cache_index_line(line, hex, &size, &last), -1);
    snprintf(line, sizeof line, "%064d 12x 456\n", 0);
    assert_int_equal(drv_cache_index_line(line, hex, &size, &last), -1);
    snprintf(line, sizeof line, "%063dA 1 2\n", 0);
    assert_int_equal(drv_cache_index_line(line, hex, &size, &last), -1);
}

static void test_lru(void **st)
{
    drv_cache_lru_item_t it[] = {
        {"cc", 100, 30, true},
        {"aa", 100, 10, false},    /* oldest, but pinned */
        {"bb", 50, 20, true},
        {"ab", 50, 20, true},      /* same age as bb: hex order first */
        {"dd", 500, 40, true},
    };
    size_t v[5], nv;
    assert_int_equal(drv_cache_lru_pick(it, 5, 60, v, &nv), 0);
    assert_int_equal(nv, 2);
    assert_int_equal(v[0], 3);
    assert_int_equal(v[1], 2);
    assert_int_equal(drv_cache_lru_pick(it, 5, 101, v, &nv), 0);
    assert_int_equal(nv, 3);
    assert_int_equal(v[2], 0);
    assert_int_equal(drv_cache_lru_pick(it, 5, 700, v, &nv), 0);
    assert_int_equal(nv, 4);
    /* all unpinned together are 700: 701 cannot be freed, nothing is chosen */
    assert_int_equal(drv_cache_lru_pick(it, 5, 701, v, &nv), -1);
    assert_int_equal(nv, 0);
    assert_int_equal(drv_cache_lru_pick(it, 5, 0, v, &nv), 0);
    assert_int_equal(nv, 0);
}

static void test_rank(void **st)
{
    const char *ids[] = {"n1", "n2", "n3", "n4"}, *rev[] = {"n4", "n3", "n2", "n1"};
    const char *hex = "ab54d3d2cd53ef6bf58a1d57b4a1f1f5b1d3f49d4a6dd0b7e9b0f0b8c2a1e3f0";
    size_t own[4] = {0}, moved_wrong = 0;
    for (size_t c = 0; c < 1000; c++) {
        size_t o[4], r[4], three[3];
        drv_cache_rank(ids, 4, hex, c, o);
        bool seen[4] = {false};
        for (int i = 0; i < 4; i++) {
            assert_true(o[i] < 4 && !seen[o[i]]);
            seen[o[i]] = true;
        }
        /* the order of the list does not matter: the same member wins */
        drv_cache_rank(rev, 4, hex, c, r);
        assert_string_equal(ids[o[0]], rev[r[0]]);
        own[o[0]]++;
        /* without n4, a chunk n4 did not own keeps its owner */
        drv_cache_rank(ids, 3, hex, c, three);
        if (o[0] != 3 && three[0] != o[0])
            moved_wrong++;
        if (o[0] == 3)
            assert_int_equal(three[0], o[1]);   /* n4's chunks go to each one's runner-up */
    }
    assert_int_equal(moved_wrong, 0);
    for (int i = 0; i < 4; i++)
        assert_true(own[i] > 200 && own[i] < 300);   /* about 250 each */
    size_t a[4], b[4];
    drv_cache_rank(ids, 4, hex, 7, a);
    drv_cache_rank(ids, 4, hex, 7, b);
    assert_memory_equal(a, b, sizeof a);
}

static void test_plan(void **st)
{
    /* members 0..2 are peers, 3 is this node */
    size_t rank[4] = {1, 3, 0, 2}, srcs[4];
    bool banned[4] = {false}, origin;
    /* first try: every peer in rank order; the owner (1) is a peer: no origin */
    assert_int_equal(drv_cache_chunk_plan(rank, 4, banned, 3, false, false, srcs, &origin), 3);
    assert_int_equal(srcs[0], 1);
    assert_int_equal(srcs[1], 0);
    assert_int_equal(srcs[2], 2);
    assert_false(origin);
    /* a retry asks the owner alone; once waited out, the origin too */
    assert_int_equal(drv_cache_chunk_plan(rank, 4, banned, 3, true, false, srcs, &origin), 1);
    assert_int_equal(srcs[0], 1);
    assert_false(origin);
    assert_int_equal(drv_cache_chunk_plan(rank, 4, banned, 3, true, true, srcs, &origin), 1);
    assert_true(origin);
    /* the owner banned: this node is next, so it owns the chunk: the origin after the peers */
    banned[1] = true;
    assert_int_equal(drv_cache_chunk_plan(rank, 4, banned, 3, false, false, srcs, &origin), 2);
    assert_int_equal(srcs[0], 0);
    assert_int_equal(srcs[1], 2);
    assert_true(origin);
    assert_int_equal(drv_cache_chunk_plan(rank, 4, banned, 3, true, false, srcs, &origin), 0);
    assert_true(origin);
    /* this node first: peers first (one may already hold it), then the origin */
    size_t mine[4] = {3, 0, 1, 2};
    banned[1] = false;
    assert_int_equal(drv_cache_chunk_plan(mine, 4, banned, 3, false, false, srcs, &origin), 3);
    assert_true(origin);
    /* not a member (three peers, no self): peers, then the origin, never waiting */
    size_t three[3] = {2, 0, 1};
    assert_int_equal(drv_cache_chunk_plan(three, 3, banned, SIZE_MAX, false, false, srcs,
                                          &origin), 3);
    assert_true(origin);
    /* every peer banned: the origin alone */
    bool all[3] = {true, true, true};
    assert_int_equal(drv_cache_chunk_plan(three, 3, all, SIZE_MAX, false, false, srcs, &origin), 0);
    assert_true(origin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sidecar),
        cmocka_unit_test(test_index_line),
        cmocka_unit_test(test_lru),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
