/* test_suggest.c — "did you mean": the edit distance and the choice of a
 * near miss (common/suggest.c), and its use in the schema's unknown-field
 * message (api/schema.c) and the API's unknown query arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/schema.h"
#include "common/suggest.h"

static void test_distance(void **state)
{
    assert_int_equal(drv_edit_distance("", ""), 0);
    assert_int_equal(drv_edit_distance("abc", ""), 3);
    assert_int_equal(drv_edit_distance("", "abc"), 3);
    assert_int_equal(drv_edit_distance("command", "command"), 0);
    assert_int_equal(drv_edit_distance("comand", "command"), 1);          /* deletion */
    assert_int_equal(drv_edit_distance("commmand", "command"), 1);        /* insertion */
    assert_int_equal(drv_edit_distance("cammand", "command"), 1);         /* substitution */
    assert_int_equal(drv_edit_distance("cmomand", "command"), 1);         /* transposition */
    assert_int_equal(drv_edit_distance("Command", "command"), 0);         /* case */
    assert_int_equal(drv_edit_distance("min_replica", "min_replicas"), 1);
    assert_int_equal(drv_edit_distance("mni_replcia", "min_replica"), 2); /* two swaps */
    assert_int_equal(drv_edit_distance("kitten", "sitting"), 3);
    assert_int_equal(drv_edit_distance("ca", "abc"), 3);                  /* OSA, not full DL */
    char big[DRV_SUGGEST_MAX_LEN + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(drv_edit_distance(big, "a"), -1);
    big[DRV_SUGGEST_MAX_LEN] = '\0';
    assert_int_equal(drv_edit_distance(big, big), 0);
}

static void test_choice(void **state)
{
    static const char *const autoscale[] = {"min_replicas", "max_replicas", "target_concurrency",
                                            "upscale_delay_s", "downscale_delay_s", NULL};
    static const char *const model[] = {"id", "image", "command", "args", "env", NULL};
    assert_string_equal(drv_suggest_from("min_replica", autoscale), "min_replicas");
    assert_string_equal(drv_suggest_from("max_replcias", autoscale), "max_replicas");
    assert_string_equal(drv_suggest_from("comand", model), "command");
    assert_string_equal(drv_suggest_from("COMMAND", model), "command");
    assert_string_equal(drv_suggest_from("ID", model), "id");
    /* too far: nothing offered rather than a wild guess */
    assert_null(drv_suggest_from("replicas", autoscale));
    assert_null(drv_suggest_from("cmd", model));
    assert_null(drv_suggest_from("x", model));
    assert_null(drv_suggest_from("zzzzzzzz", autoscale));
    /* the word itself is not a suggestion; an empty list offers nothing */
    assert_null(drv_suggest_from("command", model));
    assert_null(drv_suggest_from("comand", NULL));
    /* short words: one edit (arg -> args); long ones: two */
    assert_string_equal(drv_suggest_from("arg", model), "args");
    assert_null(drv_suggest_from("ag", model));
    assert_string_equal(drv_suggest_from("upscle_dlay_s", autoscale), "upscale_delay_s");
    /* the closest wins; among equals the first */
    static const char *const close[] = {"abcdx", "abcde", "abcdy", NULL};
    assert_string_equal(drv_suggest_from("abcde", close + 0), "abcdx");
    assert_string_equal(drv_suggest_from("abcdz", close), "abcdx");
    drv_suggest_t s;
    drv_suggest_init(&s, "abcdef");
    drv_suggest_add(&s, "abcdxy");   /* 2: too far for 6 letters */
    assert_null(drv_suggest_best(&s));
    drv_suggest_add(&s, "abcdex");
    drv_suggest_add(&s, "abcdeg");
    assert_string_equal(drv_suggest_best(&s), "abcdex");
    drv_suggest_add(&s, "Abcdef");   /* 0 (case) beats 1 */
    assert_string_equal(drv_suggest_best(&s), "Abcdef");
    drv_suggest_add(&s, NULL);
    assert_string_equal(drv_suggest_best(&s), "Abcdef");
}

static const drv_field_t auto_fields[] = {
    {"min_replicas", DRV_F_INT, false, 0, 10, NULL, NULL, NULL},
    {"max_replicas", DRV_F_INT, false, 0, 10, NULL, NULL, NULL},
    {NULL, 0, false, 0, 0, NULL, NULL, NULL},
};
static const drv_field_t top_fields[] = {
    {"id", DRV_F_ID, false, 0, 0, NULL, NULL, NULL},
    {"command", DRV_F_STRING, false, 0, 0, NULL, NULL, NULL},
    {"autoscale", DRV_F_OBJECT, false, 0, 0, NULL, auto_fields, NULL},
    {NULL, 0, false, 0, 0, NULL, NULL, NULL},
};

static void validate(const char *text, drv_error_t *err)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    memset(err, 0, sizeof *err);
    assert_int_equal(drv_schema_validate(j, top_fields, "", err), -1);
    json_decref(j);
}

static void test_schema_message(void **state)
{
    drv_error_t err;
    validate("{\"comand\":\"x\"}", &err);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.field, "comand");
    assert_string_equal(err.message, "unknown field 'comand' (did you mean 'command'?)");
    validate("{\"autoscale\":{\"min_replica\":1}}", &err);
    assert_string_equal(err.field, "autoscale.min_replica");
    assert_string_equal(err.message, "unknown field 'autoscale.min_replica' (did you mean "
                                     "'autoscale.min_replicas'?)");
    validate("{\"nothing_like_it\":1}", &err);
    assert_string_equal(err.message, "unknown field 'nothing_like_it'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_choice),
        cmocka_unit_test(test_schema_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
