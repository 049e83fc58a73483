/* test_state_apply.c — a standby's follow of the record log into memory
 * (drv_state_apply, issue 17): a record creates or replaces its object (and
 * its secret-hash index entry), a tombstone removes it, a corrupt record is
 * refused without touching what is there, an unknown kind is skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_put_replace_delete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
