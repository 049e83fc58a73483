/* test_state_apply.c — a standby's follow of the record log into memory
 * (drv_state_apply, issue 17): a record creates or replaces its object (and
 * its secret-hash index entry), a tombstone removes it, a corrupt record is
 * refused without touching what is there, an unknown kind is skipped.
 * And the two texts every write makes (drv_obj_prepare): the public view
 * and the storage envelope are the bytes the plain way gives (a copy of
 * the spec with the metadata set, dumped; a packed envelope, dumped) for
 * specs of every shape, those that take the plain way too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "state/state.h"

#define TOKEN(desc, hash)                                                                  \
    "{\"owner\":\"alice\",\"id\":\"t1\",\"spec\":{\"id\":\"t1\",\"description\":\"" desc  \
    "\"},\"created_at\":1,\"updated_at\":2,\"rv\":3,\"internal\":{\"hash\":\"" hash "\"}}"

static void test_apply_put_replace_delete(void **unused)
{
    (void)unused;
    drv_state_t *st = drv_state_create(NULL);
    assert_non_null(st);
    drv_error_t err;
    assert_int_equal(drv_state_apply(st, "token", "alice/t1", TOKEN("first", "h1"), &err), 0);
    drv_obj_t *o = drv_state_get(st, DRV_K_TOKEN, "alice/t1");
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o->spec, "description")), "first");
    assert_int_equal(o->rv, 3);
    assert_ptr_equal(drv_state_by_hash(st, "h1"), o);
    assert_non_null(strstr(o->rendered, "\"description\":\"first\""));

    /* a later write of the same key replaces it, its hash index too */
    assert_int_equal(drv_state_apply(st, "token", "alice/t1", TOKEN("second", "h2"), &err), 0);
    o = drv_state_get(st, DRV_K_TOKEN, "alice/t1");
    assert_string_equal(json_string_value(json_object_get(o->spec, "description")), "second");
    assert_null(drv_state_by_hash(st, "h1"));
    assert_ptr_equal(drv_state_by_hash(st, "h2"), o);
    assert_int_equal(drv_state_count(st, DRV_K_TOKEN), 1);

    /* a corrupt record is refused; what is there stays */
    assert_int_equal(drv_state_apply(st, "token", "alice/t1", "{\"owner\":", &err), -1);
    assert_non_null(strstr(err.message, "corrupt"));
    assert_ptr_equal(drv_state_get(st, DRV_K_TOKEN, "alice/t1"), o);

    /* an unknown kind (a newer head's) is skipped */
    assert_int_equal(drv_state_apply(st, "gadget", "x", "{}", &err), 0);

    /* a tombstone removes it and its hash; twice is harmless */
    assert_int_equal(drv_state_apply(st, "token", "alice/t1", NULL, &err), 0);
    assert_null(drv_state_get(st, DRV_K_TOKEN, "alice/t1"));
    assert_null(drv_state_by_hash(st, "h2"));
    assert_int_equal(drv_state_apply(st, "token", "alice/t1", NULL, &err), 0);
    assert_int_equal(drv_state_count(st, DRV_K_TOKEN), 0);
    /* no store write: the standby's seq never moved */
    assert_int_equal(drv_state_last_seq(st), 0);
    drv_state_destroy(st);
}

/* the public view as state.c made it before it spliced texts */
static char *plain_render(const drv_obj_t *o)
{
    json_t *doc = json_is_object(o->spec) ? json_copy(o->spec) : json_object();
    if (o->kind == DRV_K_STORE && json_object_get(doc, "secret_access_key"))
        json_object_set_new(doc, "secret_access_key", json_string("(hidden)"));
    char ts[32];
    json_object_set_new(doc, "owner", json_string(o->owner));
    drv_rfc3339(o->created_at, ts, sizeof ts);
    json_object_set_new(doc, "created_at", json_string(ts));
    drv_rfc3339(o->updated_at, ts, sizeof ts);
    json_object_set_new(doc, "updated_at", json_string(ts));
    json_object_set_new(doc, "resource_version", json_integer(o->rv));
    if (o->status)
        json_object_set(doc, "status", o->status);
    char *s = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
    json_decref(doc);
    return s;
}

static char *plain_envelope(const drv_obj_t *o)
{
    json_t *env = json_pack("{s:s, s:s, s:O, s:I, s:I, s:I}", "owner", o->owner, "id", o->id,
                            "spec", o->spec, "created_at", (json_int_t)o->created_at,
                            "updated_at", (json_int_t)o->updated_at, "rv", (json_int_t)o->rv);
    if (o->internal)
        json_object_set(env, "internal", o->internal);
    char *s = json_dumps(env, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
    json_decref(env);
    return s;
}

static void test_renderings(void **unused)
{
    (void)unused;
    static const char *const specs[] = {
        "{}",
        "{\"id\":\"m1\",\"runtime\":{\"command\":[\"true\"]},\"gpu\":{\"count\":1}}",
        "{\"id\":\"q\\\"\\n\u00e9\",\"r\":1.5,\"n\":null,\"b\":[true,false,-3]}",
        "{\"id\":\"s\",\"status\":\"in the spec\"}",            /* replaced in place */
        "{\"owner\":\"mallory\",\"id\":\"o\",\"created_at\":5}",  /* likewise */
        "{\"id\":\"st\",\"secret_access_key\":\"k\",\"x\":1}",   /* hidden (stores) */
        "[1,2]",                                                     /* not an object */
    };
    static const char *const owners[] = {"alice", "b\u00f6b"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        for (int variant = 0; variant < 8; variant++) {
            json_t *spec = json_loads(specs[i], JSON_DECODE_ANY, NULL);
            assert_non_null(spec);
            json_t *internal = variant & 1 ? json_pack("{s:O}", "given", spec) : NULL;
            drv_kind_t kind = i == 5 ? DRV_K_STORE : DRV_K_MODEL;
            drv_obj_t *o = drv_obj_new(kind, "k", owners[variant >> 2 & 1], "id", spec, internal);
            o->created_at = variant & 2 ? 1700000000 : 0;
            o->updated_at = variant & 2 ? 1700000123 : -5;   /* strftime's years too */
            o->rv = variant & 2 ? 7 : -1;
            if (variant & 4)
                o->status = json_pack("{s:s, s:i}", "phase", "ready", "replicas", 2);
            drv_obj_prepare(o);
            char *want = plain_render(o), *want_env = plain_envelope(o);
            assert_string_equal(o->rendered, want);
            assert_int_equal(o->rendered_len, strlen(want));
            assert_string_equal(o->envelope, want_env);
            free(want);
            free(want_env);
            drv_obj_free(o);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_put_replace_delete),
        cmocka_unit_test(test_renderings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
