/* test_coll.c — the state's sorted collections (src/state/coll.c) against
 * a plain sorted array: random inserts (into chunks that fill and split),
 * replacements, removals (chunks that empty and go), removals of a prefix
 * (the audit log's trim) and lookups by key and by position, checked after
 * every step; and the hash-ordered variant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/coll.h"
#include "state/state.h"

#define MAXN 6000

static drv_obj_t objs[MAXN];
static char keys[MAXN][16];

typedef struct {
    drv_obj_t *v[MAXN];
    size_t n;
} ref_t;

static const char *key_of(const drv_obj_t *o, bool by_hash) { return by_hash ? o->hash : o->key; }

static size_t ref_lb(const ref_t *r, const char *key, bool by_hash)
{
    size_t i = 0;
    while (i < r->n && strcmp(key_of(r->v[i], by_hash), key) < 0)
        i++;
    return i;
}

static void same(const drv_coll_t *c, const ref_t *r, bool full)
{
    assert_int_equal(c->n, r->n);
    size_t sum = 0;
    for (size_t k = 0; k < c->nc; k++) {
        assert_true(c->c[k].n > 0 && c->c[k].n <= DRV_COLL_CHUNK);
        assert_int_equal(c->start[k], sum);
        sum += c->c[k].n;
    }
    assert_int_equal(sum, c->n);
    if (!full)
        return;
    for (size_t i = 0; i < r->n; i++)
        assert_ptr_equal(drv_coll_at(c, i), r->v[i]);
    assert_null(drv_coll_at(c, r->n));
}

static void run(bool by_hash, unsigned seed)
{
    drv_coll_t c = {.by_hash = by_hash};
    static ref_t r;
    r.n = 0;
    bool in[MAXN] = {false};
    for (int step = 0; step < 40000; step++) {
        int op = rand_r(&seed) % 1000;
        size_t j = (size_t)rand_r(&seed) % MAXN;
        const char *key = key_of(&objs[j], by_hash);
        size_t pos, want = ref_lb(&r, key, by_hash);
        drv_obj_t *found = drv_coll_find(&c, key, &pos);
        assert_int_equal(pos, want);
        assert_ptr_equal(found, in[j] ? &objs[j] : NULL);
        assert_int_equal(drv_coll_lower_bound(&c, key), want);
        if (op < 700 && !in[j]) {   /* insert: mostly, so chunks fill and split */
            drv_coll_insert(&c, pos, &objs[j]);
            memmove(&r.v[pos + 1], &r.v[pos], (r.n - pos) * sizeof *r.v);
            r.v[pos] = &objs[j];
            r.n++;
            in[j] = true;
        } else if (op < 750 && in[j]) {   /* replace in place */
            drv_coll_set(&c, pos, &objs[j]);
        } else if (op < 970 && in[j]) {
            drv_coll_remove(&c, pos);
            memmove(&r.v[pos], &r.v[pos + 1], (r.n - pos - 1) * sizeof *r.v);
            r.n--;
            in[j] = false;
        } else if (op == 999 && step % 8 == 0) {   /* a prefix, up to a few chunks */
            size_t k = (size_t)rand_r(&seed) % (r.n < 1200 ? r.n + 1 : 1200);
            drv_coll_remove_first(&c, k);
            for (size_t i = 0; i < k; i++)
                in[r.v[i] - objs] = false;
            memmove(&r.v[0], &r.v[k], (r.n - k) * sizeof *r.v);
            r.n -= k;
        }
        same(&c, &r, step % 500 == 0);
        if (step == 30000)
            assert_true(c.nc >= 8);   /* it did split chunks */
    }
    same(&c, &r, true);
    /* empty it from the front and the back */
    while (r.n) {
        size_t pos = r.n % 2 ? 0 : r.n - 1;
        drv_coll_remove(&c, pos);
        memmove(&r.v[pos], &r.v[pos + 1], (r.n - pos - 1) * sizeof *r.v);
        r.n--;
        same(&c, &r, r.n % 700 == 0);
    }
    assert_int_equal(c.nc, 0);
    /* appends in order (the audit log's keys), then the whole prefix */
    for (size_t i = 0; i < 3 * DRV_COLL_CHUNK + 7; i++)
        drv_coll_insert(&c, i, &objs[i]);
    assert_int_equal(c.nc, 6);   /* halves of full chunks */
    drv_coll_remove_first(&c, c.n);
    assert_int_equal(c.n, 0);
    assert_int_equal(c.nc, 0);
    drv_coll_free(&c);
}

static void test_by_key(void **state)
{
    (void)state;
    run(false, 7);
}

static void test_by_hash(void **state)
{
    (void)state;
    run(true, 11);
}

int main(void)
{
    for (size_t i = 0; i < MAXN; i++) {
        snprintf(keys[i], sizeof keys[i], "k%zu", i * 7919 % MAXN);
        objs[i].key = keys[i];
        objs[i].hash = keys[(i + 1) % MAXN];
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_key),
        cmocka_unit_test(test_by_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
