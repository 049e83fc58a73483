/* test_json.c — unit tests of src/common/json.c's compact dump: it must
 * write the very bytes jansson's json_dumps writes with the same flags
 * (stored records and cached renderings are compared and hashed as
 * strings), for fixed documents with every kind of value and escape, and
 * for random ones; the piecewise writer (drv_jbuf_*) likewise, and
 * drv_rfc3339's arithmetic against gmtime_r + strftime. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "common/json.h"
#include "common/util.h"

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

/* drv_jbuf_value is drv_json_dump inside other text, deep values too */
static void test_jbuf(void **state)
{
    (void)state;
    unsigned seed = 29;
    json_t *deep = json_integer(1);
    for (int i = 0; i < 600; i++)
        deep = json_pack("[o]", deep);
    for (int i = 0; i < 300; i++) {
        json_t *j = i == 0 ? json_incref(deep) : random_value(&seed, 0);
        char *one = drv_json_dump(j, NULL);
        drv_jbuf_t b = {0};
        drv_jbuf_raw(&b, "[", 1);
        drv_jbuf_str(&b, "k\"\n");
        drv_jbuf_raw(&b, ",", 1);
        drv_jbuf_int(&b, -42);
        drv_jbuf_raw(&b, ",", 1);
        drv_jbuf_value(&b, j);
        drv_jbuf_raw(&b, "]", 1);
        size_t len = 0;
        char *mine = drv_jbuf_finish(&b, &len);
        assert_null(b.p);
        char *want = NULL;
        assert_true(asprintf(&want, "[\"k\\\"\\n\",-42,%s]", one) > 0);
        assert_string_equal(mine, want);
        assert_int_equal(len, strlen(want));
        free(mine);
        free(want);
        free(one);
        json_decref(j);
    }
    json_decref(deep);
}

static void test_rfc3339(void **state)
{
    (void)state;
    static const int64_t fixed[] = {0, 1, 59, 60, 86399, 86400, 951782400 /* 2000-02-29 */,
                                    951868800, 1709164800 /* 2024-02-29 */, 4107542400LL,
                                    253402300799LL /* 9999-12-31T23:59:59 */};
    unsigned seed = 3;
    for (int i = 0; i < 200000; i++) {
        int64_t t;
        if (i < (int)(sizeof fixed / sizeof *fixed))
            t = fixed[i];
        else if (i < 100000)   /* every day of 1970..2243, a random second of it */
            t = (int64_t)(i - 11) * 86400 + rand_r(&seed) % 86400;
        else
            t = ((int64_t)rand_r(&seed) << 16 ^ rand_r(&seed)) % 253402300800LL;
        char mine[32], want[32];
        drv_rfc3339(t, mine, sizeof mine);
        time_t tt = (time_t)t;
        struct tm tm;
        gmtime_r(&tt, &tm);
        strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%SZ", &tm);
        assert_string_equal(mine, want);
        assert_int_equal(drv_parse_rfc3339(mine), t);
    }
    char out[32];
    drv_rfc3339(-1, out, sizeof out);   /* outside the arithmetic's years: strftime */
    assert_string_equal(out, "1969-12-31T23:59:59Z");
    drv_rfc3339(253402300800LL, out, sizeof out);
    assert_string_equal(out, "10000-01-01T00:00:00Z");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_deep),
        cmocka_unit_test(test_jbuf),
        cmocka_unit_test(test_rfc3339),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
