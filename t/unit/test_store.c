/* test_store.c — the SQLite store: migrations, group commit, reload,
 * deletes, and the state module's round trip through it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "state/state.h"
#include "store/store.h"

static char *mkdtemp_dir(void)
{
    char *d = strdup("/tmp/drover-test-store-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rm_dir(char *d)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    assert_int_equal(system(cmd), 0);
    free(d);
}

typedef struct loaded {
    int n;
    char keys[64][64];
    char bodies[64][128];
} loaded_t;

static int collect(void *ctx, const char *kind, const char *key, const char *body,
                   drv_error_t *err)
{
    loaded_t *l = ctx;
    if (l->n >= 64)
        return drv_err_internal(err, "too many");
    snprintf(l->keys[l->n], 64, "%s:%s", kind, key);
    snprintf(l->bodies[l->n], 128, "%s", body);
    l->n++;
    return 0;
}

static void put(drv_store_t *st, uint64_t seq, const char *key, const char *body)
{
    drv_store_op_t op = {.del = false, .kind = "cluster", .key = drv_strdup(key),
                         .body = drv_strdup(body), .seq = seq};
    drv_store_enqueue(st, &op);
}

static void test_commit_and_reload(void **state)
{
    char *dir = mkdtemp_dir();
    drv_error_t err;
    drv_store_t *st = drv_store_create(&drv_store_sqlite, dir, &err);
    assert_non_null(st);
    assert_int_equal(drv_store_schema_version(st), 1);
    assert_int_equal(drv_store_start(st, &err), 0);
    for (uint64_t i = 1; i <= 10; i++) {
        char key[32];
        snprintf(key, sizeof key, "u/c%02d", (int)i);
        put(st, i, key, "{\"v\":1}");
    }
    drv_store_op_t del = {.del = true, .kind = "cluster", .key = drv_strdup("u/c03"), .seq = 11};
    drv_store_enqueue(st, &del);
    put(st, 12, "u/c04", "{\"v\":2}");
    drv_store_wait(st, 12);
    assert_true(drv_store_committed(st) >= 12);
    /* 12 writes queued at once share far fewer than 12 commits */
    assert_true(drv_store_commits(st) >= 1 && drv_store_commits(st) <= 12);
    drv_store_destroy(st);

    st = drv_store_create(&drv_store_sqlite, dir, &err);
    assert_non_null(st);
    loaded_t l = {0};
    assert_int_equal(drv_store_load(st, collect, &l, &err), 0);
    assert_int_equal(l.n, 9);
    assert_string_equal(l.keys[0], "cluster:u/c01");
    assert_string_equal(l.keys[2], "cluster:u/c04");
    assert_string_equal(l.bodies[2], "{\"v\":2}");
    drv_store_destroy(st);
    rm_dir(dir);
}

static void test_newer_schema_refused(void **state)
{
    char *dir = mkdtemp_dir();
    drv_error_t err;
    drv_store_t *st = drv_store_create(&drv_store_sqlite, dir, &err);
    assert_non_null(st);
    drv_store_destroy(st);
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "sqlite3 '%s/drover.db' 'insert into schema_migrations values (999, 0)'", dir);
    assert_int_equal(system(cmd), 0);
    st = drv_store_create(&drv_store_sqlite, dir, &err);
    assert_null(st);
    assert_non_null(strstr(err.message, "newer"));
    rm_dir(dir);
}

typedef struct writer_arg {
    drv_state_t *state;
    int thread;
    uint64_t last;
} writer_arg_t;

static void *writer(void *p)
{
    writer_arg_t *a = p;
    for (int i = 0; i < 200; i++) {
        char key[64], id[32];
        snprintf(id, sizeof id, "c-%d-%d", a->thread, i);
        snprintf(key, sizeof key, "u/%s", id);
        drv_state_wrlock(a->state);
        drv_obj_t *o = drv_obj_new(DRV_K_CLUSTER, key, "u", id,
                                   json_pack("{s:s}", "id", id), NULL);
        o->rv = 1;
        a->last = drv_state_put(a->state, o);
        drv_state_unlock(a->state);
    }
    return NULL;
}

static void test_state_concurrent_writers_roundtrip(void **state)
{
    char *dir = mkdtemp_dir();
    drv_error_t err;
    drv_store_t *st = drv_store_create(&drv_store_sqlite, dir, &err);
    drv_state_t *s = drv_state_create(st);
    assert_int_equal(drv_state_load(s, &err), 0);
    assert_int_equal(drv_store_start(st, &err), 0);
    pthread_t th[4];
    writer_arg_t args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (writer_arg_t){s, i, 0};
        pthread_create(&th[i], NULL, writer, &args[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    drv_store_wait(st, drv_state_last_seq(s));
    /* 800 writes from 4 threads: group commit merges them */
    assert_true(drv_store_commits(st) < 800);
    drv_state_rdlock(s);
    drv_obj_t *o = drv_state_get(s, DRV_K_CLUSTER, "u/c-2-199");
    assert_non_null(o);
    assert_non_null(strstr(o->rendered, "\"resource_version\":1"));
    drv_state_unlock(s);
    assert_int_equal(drv_state_del(s, DRV_K_CLUSTER, "nope"), 0);
    drv_state_wrlock(s);
    uint64_t seq = drv_state_del(s, DRV_K_CLUSTER, "u/c-0-0");
    drv_state_unlock(s);
    drv_store_wait(st, seq);
    drv_state_destroy(s);
    drv_store_destroy(st);

    st = drv_store_create(&drv_store_sqlite, dir, &err);
    s = drv_state_create(st);
    assert_int_equal(drv_state_load(s, &err), 0);
    assert_int_equal(drv_state_count(s, DRV_K_CLUSTER), 799);
    assert_null(drv_state_get(s, DRV_K_CLUSTER, "u/c-0-0"));
    assert_non_null(drv_state_get(s, DRV_K_CLUSTER, "u/c-3-17"));
    /* ordered by key */
    for (size_t i = 1; i < drv_state_count(s, DRV_K_CLUSTER); i++)
        assert_true(strcmp(drv_state_at(s, DRV_K_CLUSTER, i - 1)->key,
                           drv_state_at(s, DRV_K_CLUSTER, i)->key) < 0);
    drv_state_destroy(s);
    drv_store_destroy(st);
    rm_dir(dir);
}

static void test_corrupt_record_refused(void **state)
{
    char *dir = mkdtemp_dir();
    drv_error_t err;
    drv_store_t *st = drv_store_create(&drv_store_sqlite, dir, &err);
    drv_store_destroy(st);
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "sqlite3 '%s/drover.db' \"insert into objects values ('cluster','u/x','{oops')\"", dir);
    assert_int_equal(system(cmd), 0);
    st = drv_store_create(&drv_store_sqlite, dir, &err);
    drv_state_t *s = drv_state_create(st);
    assert_int_equal(drv_state_load(s, &err), -1);
    assert_non_null(strstr(err.message, "corrupt"));
    drv_state_destroy(s);
    drv_store_destroy(st);
    rm_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commit_and_reload),
        cmocka_unit_test(test_newer_schema_refused),
        cmocka_unit_test(test_state_concurrent_writers_roundtrip),
        cmocka_unit_test(test_corrupt_record_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
