/* test_cache.c — the node cache's pure rules (src/agent/cache_rules.c):
 * the sidecar's header and lines (torn last line, bad lines, a header of
 * another download), the index line, and the LRU choice (oldest first,
 * pinned never, ties by hex, not enough room = nothing chosen). */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sidecar),
        cmocka_unit_test(test_index_line),
        cmocka_unit_test(test_lru),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
