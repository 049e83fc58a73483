/* test_checkpoints.c — the head's checkpoint records (store/checkpoints.c):
 * names and scopes, commit and replace, newest first, keep pruning (never
 * the one just committed), scope prefixes, per-user separation, delete,
 * and that no temporary file is left behind; a commit re-marks its blobs
 * (a GC pass dropped a marker since the caller's check) and refuses, with
 * no record left, a blob collected meanwhile; the GC then keeps what the
 * record names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/manifest.h"
#include "store/blobs.h"
#include "store/checkpoints.h"

static char *dir;
static drv_blobs_t *blobs;

static int setup(void **state)
{
    (void)state;
    dir = strdup("/tmp/drover-test-ckpt-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    drv_error_t err;
    blobs = drv_blobs_open(dir, &err);
    return blobs ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    drv_blobs_close(blobs);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    int rc = system(cmd);
    free(dir);
    return rc == 0 ? 0 : -1;
}

/* A one-file manifest whose content is `text`. */
static drv_manifest_t *manifest(const char *text)
{
    char tree[600], p[700];
    snprintf(tree, sizeof tree, "%s/tree-XXXXXX", dir);
    assert_non_null(mkdtemp(tree));
    snprintf(p, sizeof p, "%s/state.bin", tree);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    drv_manifest_t *m = NULL;
    drv_error_t err;
    assert_int_equal(drv_manifest_build(tree, 4096, 1, &m, &err), 0);
    return m;
}

/* blobs/sha256/HEX exists? */
static bool whole(const char *hex)
{
    char p[800];
    snprintf(p, sizeof p, "%s/blobs/sha256/%s", dir, hex);
    return access(p, F_OK) == 0;
}

/* Put m's one blob (content text) whole in the store and mark user as
 * holding it, as an upload would have. */
static void store_blob(const drv_manifest_t *m, const char *text, const char *user)
{
    char p[800];
    snprintf(p, sizeof p, "%s/blobs/sha256/%s", dir, m->files[0].sha256);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    snprintf(p, sizeof p, "%s/blobs/owners/%s", dir, user);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/blobs/owners/%s/%s", dir, user, m->files[0].sha256);
    f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
}

static const char *name_at(const json_t *items, size_t i)
{
    return json_string_value(json_object_get(json_array_get(items, i), "name"));
}

static void commit(const char *user, const char *scope, const char *name, int keep,
                   json_t **pruned)
{
    drv_manifest_t *m = manifest(name);
    drv_error_t err;
    store_blob(m, name, user);
    assert_int_equal(drv_ckpts_commit(blobs, user, scope, name, m, keep, pruned, &err), 0);
    drv_manifest_free(m);
    usleep(2000);   /* distinct committed_at_ms */
}

static void test_names(void **state)
{
    (void)state;
    assert_true(drv_ckpt_scope_ok("deployment:web:0"));
    assert_true(drv_ckpt_scope_ok("job:train.v2:17"));
    assert_false(drv_ckpt_scope_ok(""));
    assert_false(drv_ckpt_scope_ok(".hidden"));
    assert_false(drv_ckpt_scope_ok("a/b"));
    assert_false(drv_ckpt_scope_ok("a b"));
    assert_true(drv_ckpt_name_ok("step-000100"));
    assert_false(drv_ckpt_name_ok("a:b"));
    assert_false(drv_ckpt_name_ok(".."));
    assert_false(drv_ckpt_name_ok("../x"));
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_false(drv_ckpt_name_ok(longname));

    drv_manifest_t *m = manifest("x");
    drv_error_t err;
    assert_int_equal(drv_ckpts_commit(blobs, "u", "bad/scope", "n", m, 0, NULL, &err), -1);
    assert_int_equal(err.status, 400);
    assert_int_equal(drv_ckpts_commit(blobs, "u", "s:1", "../n", m, 0, NULL, &err), -1);
    assert_int_equal(err.status, 400);
    assert_int_equal(drv_ckpts_commit(blobs, "u", "s:1", "n", m, 101, NULL, &err), -1);
    assert_int_equal(err.status, 400);
    drv_manifest_free(m);
    json_t *l = drv_ckpts_list(blobs, "u", "s:1", false, false, &err);
    assert_non_null(l);
    assert_int_equal(json_array_size(l), 0);   /* nothing half-committed */
    json_decref(l);
}

static void test_commit_keep_list(void **state)
{
    (void)state;
    drv_error_t err;
    json_t *pruned = NULL;
    commit("u", "deployment:d:0", "c1", 2, &pruned);
    assert_int_equal(json_array_size(pruned), 0);
    json_decref(pruned);
    commit("u", "deployment:d:0", "c2", 2, NULL);
    commit("u", "deployment:d:0", "c3", 2, &pruned);
    assert_int_equal(json_array_size(pruned), 1);
    assert_string_equal(json_string_value(json_array_get(pruned, 0)), "c1");
    json_decref(pruned);

    json_t *l = drv_ckpts_list(blobs, "u", "deployment:d:0", false, false, &err);
    assert_int_equal(json_array_size(l), 2);
    assert_string_equal(name_at(l, 0), "c3");
    assert_string_equal(name_at(l, 1), "c2");
    assert_null(json_object_get(json_array_get(l, 0), "manifest"));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(l, 0), "files")), 1);
    json_decref(l);

    /* re-committing an older name makes it the newest; keep 1 never prunes it */
    commit("u", "deployment:d:0", "c2", 1, &pruned);
    assert_int_equal(json_array_size(pruned), 1);
    assert_string_equal(json_string_value(json_array_get(pruned, 0)), "c3");
    json_decref(pruned);

    /* another slot, another deployment, another user */
    commit("u", "deployment:d:1", "x1", 0, NULL);
    commit("u", "deployment:dd:0", "y1", 0, NULL);
    commit("v", "deployment:d:0", "z1", 0, NULL);
    l = drv_ckpts_list(blobs, "u", "deployment:d:", true, false, &err);
    assert_int_equal(json_array_size(l), 2);
    assert_string_equal(name_at(l, 0), "x1");
    assert_string_equal(name_at(l, 1), "c2");
    json_decref(l);
    l = drv_ckpts_list(blobs, "v", "deployment:d:", true, false, &err);
    assert_int_equal(json_array_size(l), 1);
    json_decref(l);

    json_t *rec = NULL;
    assert_int_equal(drv_ckpts_get(blobs, "u", "deployment:d:0", "c2", &rec, &err), 0);
    assert_non_null(json_object_get(rec, "manifest"));
    json_decref(rec);
    assert_int_equal(drv_ckpts_get(blobs, "v", "deployment:d:0", "c2", &rec, &err), -1);
    assert_int_equal(err.status, 404);

    assert_int_equal(drv_ckpts_delete(blobs, "u", "deployment:d:0", "c2", &err), 0);
    assert_int_equal(drv_ckpts_delete(blobs, "u", "deployment:d:0", "c2", &err), -1);
    assert_int_equal(err.status, 404);
    assert_int_equal(drv_ckpts_delete(blobs, "u", "deployment:nope:0", "c2", &err), -1);
    assert_int_equal(err.status, 404);

    /* the store's tmp/ is empty: every record went in by rename */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s/blobs/tmp", dir);
    DIR *d = opendir(tmp);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 0);
}

/* The race of a commit naming a manifest (no upload) with the blob GC. */
static void test_commit_vs_gc(void **state)
{
    (void)state;
    drv_error_t err;
    drv_blobs_gc_stats_t st;
    const char *scope = "job:race:0";
    /* the caller checked "held"; then a GC pass dropped the marker */
    drv_manifest_t *m = manifest("raced-1");
    const char *hex = m->files[0].sha256;
    store_blob(m, "raced-1", "w");
    assert_true(drv_blobs_owned(blobs, "w", hex));
    char p[800];
    snprintf(p, sizeof p, "%s/blobs/owners/w/%s", dir, hex);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(drv_ckpts_commit(blobs, "w", scope, "c1", m, 0, NULL, &err), 0);
    assert_true(drv_blobs_owned(blobs, "w", hex));   /* marked again: nodes may read it */
    /* passes without grace keep both: the record names the blob */
    for (int i = 0; i < 2; i++)
        assert_int_equal(drv_blobs_gc(blobs, NULL, 0, time(NULL) + 10, 0, 0, &st, &err), 0);
    assert_true(whole(hex));
    assert_true(drv_blobs_owned(blobs, "w", hex));
    drv_manifest_free(m);

    /* ... or the next pass collected the blob too: 409, no record */
    m = manifest("raced-2");
    hex = m->files[0].sha256;
    store_blob(m, "raced-2", "w");
    snprintf(p, sizeof p, "%s/blobs/owners/w/%s", dir, hex);
    assert_int_equal(unlink(p), 0);
    snprintf(p, sizeof p, "%s/blobs/sha256/%s", dir, hex);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(drv_ckpts_commit(blobs, "w", scope, "c2", m, 0, NULL, &err), -1);
    assert_int_equal(err.status, 409);
    assert_non_null(strstr(err.message, hex));
    assert_false(drv_blobs_owned(blobs, "w", hex));   /* no marker for missing bytes */
    json_t *rec = NULL;
    assert_int_equal(drv_ckpts_get(blobs, "w", scope, "c2", &rec, &err), -1);
    assert_int_equal(err.status, 404);
    json_t *l = drv_ckpts_list(blobs, "w", scope, false, false, &err);
    assert_int_equal(json_array_size(l), 1);   /* c1 only */
    json_decref(l);
    drv_manifest_free(m);

    /* the GC's lock: commits share it, a pass (exclusive) waits for them */
    int sh = drv_blobs_gc_lock(blobs, false, &err);
    assert_true(sh >= 0);
    int sh2 = drv_blobs_gc_lock(blobs, false, &err);
    assert_true(sh2 >= 0);
    snprintf(p, sizeof p, "%s/blobs/gc.lock", dir);
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), -1);
    close(sh);
    close(sh2);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_commit_keep_list),
        cmocka_unit_test(test_commit_vs_gc),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
