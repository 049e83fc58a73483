/* test_json.c — unit tests of src/common/json.c's compact dump: it must
 * write the very bytes jansson's json_dumps writes with the same flags
 * (stored records and cached renderings are compared and hashed as
 * strings), for fixed documents with every kind of value and escape, and
 * for random ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

static void same_as_jansson(const json_t *j)
{
    size_t len = 0;
    char *mine = drv_json_dump(j, &len);
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
    assert_non_null(want);
    assert_string_equal(mine, want);
    assert_int_equal(len, strlen(want));
    free(mine);
    free(want);
}

static void test_fixed(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "{}", "[]", "{\"a\":{},\"b\":[]}", "[1,-1,0,9223372036854775807,-9223372036854775808]",
        "[true,false,null]", "\"plain\"", "17", "-0.0", "0.1", "1e300", "-2.5e-300",
        "[1.0,100000000000.0,1e12,123456789012345.0,3.14159265358979,1e-5,0.000123]",
        "{\"quote\":\"a\\\"b\",\"back\":\"c\\\\d\",\"slash\":\"e/f\",\"ctl\":\"\\b\\f\\n\\r\\t\\u0001\\u001f\"}",
        "{\"utf8\":\"h\\u00e9llo \\u20ac \\ud83d\\ude00\",\"del\":\"\\u007f\"}",
        "{\"z\":1,\"a\":2,\"m\":{\"y\":[{\"x\":[[[]]]}]}}",
        "{\"nul\":\"v\\u0000w\"}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        json_error_t e;
        json_t *j = json_loads(docs[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
        if (!j)
            fail_msg("%s: %s", docs[i], e.text);
        same_as_jansson(j);
        json_decref(j);
    }
    /* members in insertion order, a deleted one gone, a replaced one in place */
    json_t *o = json_pack("{s:i, s:s, s:f}", "b", 1, "a", "x", "c", 2.0);
    json_object_set_new(o, "b", json_string("again"));
    json_object_del(o, "a");
    json_object_set_new(o, "a", json_null());
    same_as_jansson(o);
    json_decref(o);
}

/* random documents: nesting, strings of any byte below 0x80, integers and reals */
static json_t *random_value(unsigned *seed, int depth)
{
    int t = rand_r(seed) % (depth > 5 ? 5 : 7);
    switch (t) {
    case 0: return json_integer((json_int_t)rand_r(seed) * (rand_r(seed) % 2 ? -1 : 1) * 1000003);
    case 1: return json_real((double)rand_r(seed) / ((rand_r(seed) % 1000) + 1) *
                             (rand_r(seed) % 3 ? 1 : 1e-9));
    case 2: {
        char s[16];
        size_t n = (size_t)rand_r(seed) % sizeof s;
        for (size_t i = 0; i < n; i++)
            s[i] = (char)(1 + rand_r(seed) % 127);
        return json_stringn(s, n);
    }
    case 3: return json_boolean(rand_r(seed) % 2);
    case 4: return json_null();
    case 5: {
        json_t *a = json_array();
        for (int i = rand_r(seed) % 5; i > 0; i--)
            json_array_append_new(a, random_value(seed, depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (int i = rand_r(seed) % 5; i > 0; i--) {
            char k[8];
            snprintf(k, sizeof k, "k%c%d", (char)(' ' + rand_r(seed) % 95), rand_r(seed) % 100);
            json_object_set_new(o, k, random_value(seed, depth + 1));
        }
        return o;
    }
    }
}

static void test_random(void **state)
{
    (void)state;
    unsigned seed = 17;
    for (int i = 0; i < 2000; i++) {
        json_t *j = random_value(&seed, 0);
        same_as_jansson(j);
        json_decref(j);
    }
}

/* deeper than the writer goes itself: jansson's dump, the same bytes */
static void test_deep(void **state)
{
    (void)state;
    json_t *j = json_integer(1);
    for (int i = 0; i < 600; i++)
        j = json_pack("[o]", j);
    same_as_jansson(j);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_deep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
