/* test_yaml.c — unit tests of src/common/yaml.c: typing of plain and quoted
 * scalars, multi-document streams, empty documents, nesting, rejected
 * constructs (anchors, aliases, duplicate keys, unknown tags, too deep),
 * 1-based FILE:LINE:COL error messages, file loading, and dump/load
 * round trips including strings that must be quoted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/yaml.h"

static json_t *load(const char *text, drv_error_t *err)
{
    return drv_yaml_load(text, strlen(text), "test.yaml", err);
}

/* Load one document that must parse. */
static json_t *load1(const char *text)
{
    drv_error_t err = {0};
    json_t *docs = load(text, &err);
    if (!docs)
        fail_msg("unexpected error: %s", err.message);
    assert_int_equal(json_array_size(docs), 1);
    json_t *doc = json_incref(json_array_get(docs, 0));
    json_decref(docs);
    return doc;
}

/* Load text that must fail; check the message starts with want. */
static void load_fails(const char *text, const char *want)
{
    drv_error_t err = {0};
    json_t *docs = load(text, &err);
    if (docs) {
        char *s = json_dumps(docs, JSON_COMPACT);
        json_decref(docs);
        fail_msg("expected an error, got %s", s);
    }
    if (strncmp(err.message, want, strlen(want)) != 0)
        fail_msg("message \"%s\" does not start with \"%s\"", err.message, want);
    assert_int_equal(err.status, 400);
}

static void test_plain_scalars(void **state)
{
    json_t *d = load1("i: 42\n"
                      "neg: -7\n"
                      "plus: +3\n"
                      "hex: 0x1F\n"
                      "oct: 0o17\n"
                      "f: 1.5\n"
                      "e: 2e3\n"
                      "dot: .5\n"
                      "t: true\n"
                      "T: True\n"
                      "f2: FALSE\n"
                      "n: null\n"
                      "tilde: ~\n"
                      "empty:\n"
                      "s: hello world\n"
                      "yes: yes\n"
                      "ver: 1.2.3\n"
                      "id: g5.xlarge\n"
                      "big: 123456789012345678901234\n");
    assert_true(json_is_integer(json_object_get(d, "i")));
    assert_int_equal(json_integer_value(json_object_get(d, "i")), 42);
    assert_int_equal(json_integer_value(json_object_get(d, "neg")), -7);
    assert_int_equal(json_integer_value(json_object_get(d, "plus")), 3);
    assert_int_equal(json_integer_value(json_object_get(d, "hex")), 31);
    assert_int_equal(json_integer_value(json_object_get(d, "oct")), 15);
    assert_true(json_is_real(json_object_get(d, "f")));
    assert_true(json_real_value(json_object_get(d, "f")) == 1.5);
    assert_true(json_real_value(json_object_get(d, "e")) == 2000.0);
    assert_true(json_real_value(json_object_get(d, "dot")) == 0.5);
    assert_true(json_is_true(json_object_get(d, "t")));
    assert_true(json_is_true(json_object_get(d, "T")));
    assert_true(json_is_false(json_object_get(d, "f2")));
    assert_true(json_is_null(json_object_get(d, "n")));
    assert_true(json_is_null(json_object_get(d, "tilde")));
    assert_true(json_is_null(json_object_get(d, "empty")));
    assert_string_equal(json_string_value(json_object_get(d, "s")), "hello world");
    /* YAML 1.2 core schema: yes is a string */
    assert_string_equal(json_string_value(json_object_get(d, "yes")), "yes");
    assert_string_equal(json_string_value(json_object_get(d, "ver")), "1.2.3");
    assert_string_equal(json_string_value(json_object_get(d, "id")), "g5.xlarge");
    assert_true(json_is_real(json_object_get(d, "big")));
    json_decref(d);
}

static void test_quoted_stay_strings(void **state)
{
    json_t *d = load1("a: \"42\"\n"
                      "b: 'true'\n"
                      "c: \"null\"\n"
                      "d: ''\n"
                      "e: !!str 7\n"
                      "f: |\n"
                      "  12\n"
                      "g: \"tab\\there\"\n");
    assert_string_equal(json_string_value(json_object_get(d, "a")), "42");
    assert_string_equal(json_string_value(json_object_get(d, "b")), "true");
    assert_string_equal(json_string_value(json_object_get(d, "c")), "null");
    assert_string_equal(json_string_value(json_object_get(d, "d")), "");
    assert_string_equal(json_string_value(json_object_get(d, "e")), "7");
    assert_string_equal(json_string_value(json_object_get(d, "f")), "12\n");
    assert_string_equal(json_string_value(json_object_get(d, "g")), "tab\there");
    json_decref(d);
}

static void test_tags(void **state)
{
    json_t *d = load1("a: !!int \"5\"\nb: !!float 2\n");
    assert_int_equal(json_integer_value(json_object_get(d, "a")), 5);
    assert_true(json_is_number(json_object_get(d, "b")));
    json_decref(d);
    load_fails("a: !!int abc\n", "test.yaml:1:4: \"abc\" is not a valid");
    load_fails("a: !custom 1\n", "test.yaml:1:4: unsupported tag !custom");
    load_fails("a: .inf\n", "test.yaml:1:4: \".inf\" cannot be represented in JSON");
}

static void test_nesting(void **state)
{
    json_t *d = load1("model:\n"
                      "  id: demo\n"
                      "  runtime:\n"
                      "    command: [drover-demo-model, --port, \"8080\"]\n"
                      "    env: {A: \"1\"}\n"
                      "  nodepools:\n"
                      "    - cluster: demo\n"
                      "      priority: 10\n"
                      "    - {cluster: other, priority: 0}\n");
    json_t *m = json_object_get(d, "model");
    json_t *cmd = json_object_get(json_object_get(m, "runtime"), "command");
    assert_int_equal(json_array_size(cmd), 3);
    assert_string_equal(json_string_value(json_array_get(cmd, 2)), "8080");
    json_t *nps = json_object_get(m, "nodepools");
    assert_int_equal(json_array_size(nps), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(nps, 0), "priority")), 10);
    assert_string_equal(json_string_value(json_object_get(json_array_get(nps, 1), "cluster")),
                        "other");
    /* key order is the file's order */
    const char *first = json_object_iter_key(json_object_iter(m));
    assert_string_equal(first, "id");
    json_decref(d);
}

static void test_multi_document(void **state)
{
    drv_error_t err = {0};
    json_t *docs = load("# leading comment\n"
                        "cluster:\n  id: a\n"
                        "---\n"
                        "nodepool:\n  id: b\n"
                        "...\n"
                        "---\n"
                        "---\n"
                        "model: {id: c}\n"
                        "---\n",
                        &err);
    assert_non_null(docs);
    assert_int_equal(json_array_size(docs), 5);
    assert_non_null(json_object_get(json_array_get(docs, 0), "cluster"));
    assert_non_null(json_object_get(json_array_get(docs, 1), "nodepool"));
    assert_true(json_is_null(json_array_get(docs, 2)));   /* empty document */
    assert_non_null(json_object_get(json_array_get(docs, 3), "model"));
    assert_true(json_is_null(json_array_get(docs, 4)));
    json_decref(docs);

    docs = load("", &err);
    assert_non_null(docs);
    assert_int_equal(json_array_size(docs), 0);
    json_decref(docs);
    docs = load("# only a comment\n", &err);
    assert_non_null(docs);
    assert_int_equal(json_array_size(docs), 0);
    json_decref(docs);
}

static void test_syntax_errors_line_col(void **state)
{
    /* bad indentation on line 4, column 2 */
    load_fails("cluster:\n  id: x\n  provider: local\n region: bad\n",
               "test.yaml:4:2: did not find expected key");
    load_fails("a: [1, 2\n", "test.yaml:2:1: did not find expected ',' or ']'");
    load_fails("a: \"open\n", "test.yaml:2:1: found unexpected end of stream");
    load_fails("x: 1\n  y: 2\n", "test.yaml:2:4: mapping values are not allowed");
    load_fails("a: 1\n\tb: 2\n", "test.yaml:2:1: found a tab character");
    /* second document is the broken one: line numbers count the whole file */
    load_fails("a: 1\n---\nb: 2\n---\nc: [\n", "test.yaml:6:1:");
    /* invalid UTF-8: line and column computed from the byte offset */
    load_fails("a: 1\nb: ok\xc3\x28\n", "test.yaml:2:7: invalid trailing UTF-8 octet");
}

static void test_rejected_constructs(void **state)
{
    load_fails("a: &x 1\nb: *x\n", "test.yaml:1:4: anchors (&x) are not supported");
    load_fails("a: *x\n", "test.yaml:1:4:");
    load_fails("a: 1\nb: 2\na: 3\n", "test.yaml:3:1: duplicate key \"a\"");
    load_fails("? [1, 2]\n: x\n", "test.yaml:1:3: mapping keys must be scalars");
    char deep[4 * (DRV_YAML_MAX_DEPTH + 10)];
    size_t n = 0;
    for (int i = 0; i < DRV_YAML_MAX_DEPTH + 5; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    load_fails(deep, "test.yaml:1:");
}

static void test_load_file(void **state)
{
    char path[] = "/tmp/test_yaml_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "cluster:\n  id: demo\n---\nmodel:\n  id: m\n   bad: 1\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    drv_error_t err = {0};
    json_t *docs = drv_yaml_load_file(path, &err);
    assert_null(docs);
    char want[128];
    snprintf(want, sizeof want, "%s:6:7: ", path);
    assert_true(strncmp(err.message, want, strlen(want)) == 0);
    unlink(path);

    docs = drv_yaml_load_file("/nonexistent/file.yaml", &err);
    assert_null(docs);
    assert_non_null(strstr(err.message, "/nonexistent/file.yaml"));
}

static void roundtrip(const char *json_text)
{
    json_error_t jerr;
    drv_error_t err = {0};
    json_t *v = json_loads(json_text, JSON_DECODE_ANY, &jerr);
    assert_non_null(v);
    char *y = drv_yaml_dump(v, &err);
    assert_non_null(y);
    json_t *docs = drv_yaml_load(y, strlen(y), "dump", &err);
    if (!docs)
        fail_msg("cannot read back %s: %s", y, err.message);
    if (!json_equal(json_array_get(docs, 0), v))
        fail_msg("round trip of %s changed it; YAML was:\n%s", json_text, y);
    json_decref(docs);
    json_decref(v);
    free(y);
}

static void test_dump_roundtrip(void **state)
{
    roundtrip("{\"id\": \"demo\", \"n\": 3, \"price\": 1.006, \"zero\": 0.0, \"on\": true,"
              " \"none\": null, \"list\": [1, \"2\", \"true\", \"null\", \"\", \"~\", \"0x10\","
              " \"1.5\", \"-3\", \"yes\"], \"nested\": {\"a\": {\"b\": []}, \"c\": {}},"
              " \"multi\": \"line one\\nline two\", \"colon\": \"a: b\", \"dash\": \"- x\","
              " \"hash\": \"# not a comment\", \"unicode\": \"héllo ✓\", \"big\": 1e300}");
    roundtrip("[]");
    roundtrip("\"just a string\"");
    roundtrip("42");
    roundtrip("[[1, [2, [3]]], {\"k\": [{\"x\": 1}, {\"y\": [true, false]}]}]");

    drv_error_t err = {0};
    json_t *v = json_pack("{s:s, s:i}", "id", "demo", "count", 2);
    char *y = drv_yaml_dump(v, &err);
    assert_string_equal(y, "id: demo\ncount: 2\n");
    free(y);
    json_decref(v);
    v = json_pack("{s:s}", "s", "123");
    y = drv_yaml_dump(v, &err);
    assert_string_equal(y, "s: \"123\"\n");
    free(y);
    json_decref(v);
}

static void test_plain_scalar_function(void **state)
{
    json_t *v = drv_yaml_plain_scalar("12abc", 5);
    assert_true(json_is_string(v));
    json_decref(v);
    v = drv_yaml_plain_scalar("-", 1);
    assert_true(json_is_string(v));
    json_decref(v);
    v = drv_yaml_plain_scalar("1e", 2);
    assert_true(json_is_string(v));
    json_decref(v);
    v = drv_yaml_plain_scalar("0x", 2);
    assert_true(json_is_string(v));
    json_decref(v);
    v = drv_yaml_plain_scalar("-0.0", 4);
    assert_true(json_is_real(v));
    json_decref(v);
    /* not NUL-terminated input: only len bytes count */
    v = drv_yaml_plain_scalar("123456", 3);
    assert_int_equal(json_integer_value(v), 123);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_scalars),
        cmocka_unit_test(test_quoted_stay_strings),
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_multi_document),
        cmocka_unit_test(test_syntax_errors_line_col),
        cmocka_unit_test(test_rejected_constructs),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_dump_roundtrip),
        cmocka_unit_test(test_plain_scalar_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
