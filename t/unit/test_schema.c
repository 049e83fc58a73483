/* test_schema.c — declarative validation (api/schema.c) and JSON merge
 * patch (common/json.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/schema.h"
#include "common/json.h"
#include "common/util.h"

static const char *const colors[] = {"red", "green", NULL};
static const drv_field_t inner[] = {
    {"n", DRV_F_INT, false, 0, 10, NULL, NULL, "3"},
    {"flag", DRV_F_BOOL, false, 0, 0, NULL, NULL, NULL},
    {NULL, 0, false, 0, 0, NULL, NULL, NULL},
};
static const drv_field_t item[] = {
    {"name", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {NULL, 0, false, 0, 0, NULL, NULL, NULL},
};
static const drv_field_t fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"desc", DRV_F_STRING, false, 0, 8, NULL, NULL, "\"\""},
    {"color", DRV_F_ENUM, false, 0, 0, colors, NULL, "\"red\""},
    {"ratio", DRV_F_NUMBER, false, 0, 1, NULL, NULL, NULL},
    {"tags", DRV_F_STRLIST, false, 1, 3, NULL, NULL, NULL},
    {"ids", DRV_F_IDLIST, false, 0, 4, NULL, NULL, NULL},
    {"items", DRV_F_OBJLIST, false, 1, 2, NULL, item, NULL},
    {"env", DRV_F_STRMAP, false, 0, 2, NULL, NULL, NULL},
    {"inner", DRV_F_OBJECT, false, 0, 0, NULL, inner, NULL},
    {NULL, 0, false, 0, 0, NULL, NULL, NULL},
};

/* Validate text; returns status (0 ok) and copies the field path. */
static int check(const char *text, char *field, json_t **out)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    drv_error_t err;
    memset(&err, 0, sizeof err);
    int rc = drv_schema_validate(j, fields, "", &err);
    if (field)
        strcpy(field, err.field);
    if (out)
        *out = j;
    else
        json_decref(j);
    return rc < 0 ? err.status : 0;
}

static void test_defaults_and_order(void **state)
{
    json_t *j;
    assert_int_equal(check("{\"inner\":{}, \"id\":\"a-1\"}", NULL, &j), 0);
    char *s = drv_json_dump(j, NULL);
    assert_string_equal(s, "{\"id\":\"a-1\",\"desc\":\"\",\"color\":\"red\",\"inner\":{\"n\":3}}");
    free(s);
    json_decref(j);
    assert_int_equal(check("{\"id\":\"b\"}", NULL, &j), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "inner"), "n")), 3);
    json_decref(j);
}

static void test_errors_name_fields(void **state)
{
    char f[160];
    struct {
        const char *text, *field;
    } cases[] = {
        {"{}", "id"},
        {"{\"id\":\"A\"}", "id"},
        {"{\"id\":\"-a\"}", "id"},
        {"{\"id\":\"a-\"}", "id"},
        {"{\"id\":7}", "id"},
        {"{\"id\":\"a\",\"zzz\":1}", "zzz"},
        {"{\"id\":\"a\",\"desc\":\"123456789\"}", "desc"},
        {"{\"id\":\"a\",\"color\":\"blue\"}", "color"},
        {"{\"id\":\"a\",\"ratio\":1.5}", "ratio"},
        {"{\"id\":\"a\",\"ratio\":\"x\"}", "ratio"},
        {"{\"id\":\"a\",\"tags\":[]}", "tags"},
        {"{\"id\":\"a\",\"tags\":[\"\"]}", "tags[0]"},
        {"{\"id\":\"a\",\"tags\":[1]}", "tags[0]"},
        {"{\"id\":\"a\",\"ids\":[\"x\",\"x\"]}", "ids[1]"},
        {"{\"id\":\"a\",\"items\":[{}]}", "items[0].name"},
        {"{\"id\":\"a\",\"items\":[{\"name\":\"x\",\"q\":1}]}", "items[0].q"},
        {"{\"id\":\"a\",\"items\":[3]}", "items[0]"},
        {"{\"id\":\"a\",\"env\":{\"A\":1}}", "env.A"},
        {"{\"id\":\"a\",\"env\":{\"A\":\"1\",\"B\":\"2\",\"C\":\"3\"}}", "env"},
        {"{\"id\":\"a\",\"inner\":{\"n\":11}}", "inner.n"},
        {"{\"id\":\"a\",\"inner\":{\"n\":1.0}}", "inner.n"},
        {"{\"id\":\"a\",\"inner\":{\"n\":-1}}", "inner.n"},
        {"{\"id\":\"a\",\"inner\":{\"flag\":\"true\"}}", "inner.flag"},
        {"{\"id\":\"a\",\"inner\":{\"x\":1}}", "inner.x"},
        {"{\"id\":\"a\",\"inner\":[]}", "inner"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = check(cases[i].text, f, NULL);
        if (st != 400 || strcmp(f, cases[i].field) != 0)
            fail_msg("case %zu (%s): status %d field '%s', want 400 '%s'", i, cases[i].text, st,
                     f, cases[i].field);
    }
}

static void test_id_rules(void **state)
{
    assert_true(drv_id_valid("a"));
    assert_true(drv_id_valid("a-b-0"));
    assert_false(drv_id_valid(""));
    assert_false(drv_id_valid("a_b"));
    assert_false(drv_id_valid("a.b"));
    char long_id[70];
    memset(long_id, 'a', 63);
    long_id[63] = '\0';
    assert_true(drv_id_valid(long_id));
    long_id[63] = 'a';
    long_id[64] = '\0';
    assert_false(drv_id_valid(long_id));
}

static void test_merge_patch(void **state)
{
    json_t *t = json_loads("{\"a\":1,\"b\":{\"c\":2,\"d\":3},\"e\":[1]}", 0, NULL);
    json_t *p = json_loads("{\"a\":null,\"b\":{\"c\":9},\"e\":[2,3],\"f\":\"x\"}", 0, NULL);
    json_t *m = drv_json_merge_patch(t, p);
    char *s = drv_json_dump(m, NULL);
    assert_string_equal(s, "{\"b\":{\"c\":9,\"d\":3},\"e\":[2,3],\"f\":\"x\"}");
    free(s);
    /* the target is unchanged */
    assert_int_equal(json_integer_value(json_object_get(t, "a")), 1);
    json_decref(t);
    json_decref(p);
    json_decref(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_order),
        cmocka_unit_test(test_errors_name_fields),
        cmocka_unit_test(test_id_rules),
        cmocka_unit_test(test_merge_patch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
