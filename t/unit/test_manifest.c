/* test_manifest.c — src/common/manifest*.c: building from a tree (chunking,
 * digests against a one-shot sha256, threads giving the same manifest,
 * symlinks inside and outside, special files, empty and missing trees), the
 * JSON round trip and canonical digest, and the parser refusing each kind
 * of bad input with a message naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/manifest.h"
#include "common/util.h"

static char tmpl[64];

static void put(const char *rel, size_t size, unsigned seed)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpl, rel);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < size; i++)
        fputc((int)((i * 31 + seed) % 251), f);
    fclose(f);
}

static int setup(void **st)
{
    strcpy(tmpl, "/tmp/drv-manifest.XXXXXX");
    assert_non_null(mkdtemp(tmpl));
    char p[512];
    snprintf(p, sizeof p, "%s/sub", tmpl);
    mkdir(p, 0755);
    put("a.bin", 10000, 1);       /* 3 chunks of 4096: 4096, 4096, 1808 */
    put("sub/b.txt", 4096, 2);    /* exactly one chunk */
    put("empty", 0, 3);
    return 0;
}

static int teardown(void **st)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    return system(cmd) == 0 ? 0 : -1;
}

static void sha_of_file_range(const char *rel, uint64_t off, uint64_t len, char out[65])
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpl, rel);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    char *buf = malloc(len + 1);
    fseek(f, (long)off, SEEK_SET);
    assert_int_equal(fread(buf, 1, len, f), len);
    fclose(f);
    drv_sha256_hex(buf, len, out);
    free(buf);
}

static void test_build(void **st)
{
    drv_manifest_t *m = NULL;
    drv_error_t e = {0};
    assert_int_equal(drv_manifest_build(tmpl, 4096, 3, &m, &e), 0);
    assert_int_equal(m->nfiles, 3);
    assert_int_equal(m->total_size, 14096);
    assert_string_equal(m->files[0].path, "a.bin");
    assert_string_equal(m->files[1].path, "empty");
    assert_string_equal(m->files[2].path, "sub/b.txt");
    assert_int_equal(m->files[0].nchunks, 3);
    assert_int_equal(m->files[1].nchunks, 0);
    assert_int_equal(m->files[2].nchunks, 1);
    char want[65];
    sha_of_file_range("a.bin", 0, 10000, want);
    assert_string_equal(m->files[0].sha256, want);
    sha_of_file_range("a.bin", 8192, 1808, want);
    assert_string_equal(m->files[0].chunks[2], want);
    assert_string_equal(m->files[2].chunks[0], m->files[2].sha256);
    assert_string_equal(m->files[1].sha256,
                        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* one thread gives the same manifest */
    drv_manifest_t *m1 = NULL;
    assert_int_equal(drv_manifest_build(tmpl, 4096, 1, &m1, &e), 0);
    assert_string_equal(m->digest, m1->digest);
    drv_manifest_free(m1);
    /* round trip */
    char *js = drv_manifest_to_json(m);
    assert_non_null(js);
    drv_manifest_t *m2 = NULL;
    assert_int_equal(drv_manifest_parse(js, strlen(js), &m2, &e), 0);
    assert_string_equal(m2->digest, m->digest);
    char *js2 = drv_manifest_to_json(m2);
    assert_string_equal(js, js2);
    free(js2);
    free(js);
    drv_manifest_free(m2);
    drv_manifest_free(m);
    /* a different chunk size is a different manifest */
    assert_int_equal(drv_manifest_build(tmpl, 8192, 0, &m, &e), 0);
    assert_int_equal(m->files[0].nchunks, 2);
    drv_manifest_free(m);
}

static void expect_build_error(const char *dir, const char *needle)
{
    drv_manifest_t *m = NULL;
    drv_error_t e = {0};
    assert_int_equal(drv_manifest_build(dir, 4096, 2, &m, &e), -1);
    assert_null(m);
    if (!strstr(e.message, needle))
        fail_msg("error '%s' lacks '%s'", e.message, needle);
}

static void test_build_refusals(void **st)
{
    char p[512], q[512];
    expect_build_error("/nonexistent/drv-manifest", "No such file");
    snprintf(p, sizeof p, "%s/a.bin", tmpl);
    expect_build_error(p, "not a directory");
    /* a symlink inside the tree: the target's content under the link's path */
    snprintf(p, sizeof p, "%s/link.bin", tmpl);
    assert_int_equal(symlink("a.bin", p), 0);
    drv_manifest_t *m = NULL;
    drv_error_t e = {0};
    assert_int_equal(drv_manifest_build(tmpl, 4096, 2, &m, &e), 0);
    assert_int_equal(m->nfiles, 4);
    assert_string_equal(m->files[2].path, "link.bin");
    assert_string_equal(m->files[2].sha256, m->files[0].sha256);
    drv_manifest_free(m);
    unlink(p);
    /* leaving the tree */
    assert_int_equal(symlink("/etc/hostname", p), 0);
    expect_build_error(tmpl, "leaving the tree");
    unlink(p);
    assert_int_equal(symlink("../../etc", p), 0);
    expect_build_error(tmpl, "link.bin");
    unlink(p);
    assert_int_equal(symlink("sub", p), 0);
    expect_build_error(tmpl, "a directory");
    unlink(p);
    assert_int_equal(symlink("nothing-here", p), 0);
    expect_build_error(tmpl, "cannot be resolved");
    unlink(p);
    /* a fifo */
    snprintf(q, sizeof q, "%s/sub/pipe", tmpl);
    assert_int_equal(mkfifo(q, 0600), 0);
    expect_build_error(tmpl, "sub/pipe: a fifo");
    unlink(q);
    /* an empty tree */
    snprintf(q, sizeof q, "%s/sub/void", tmpl);
    mkdir(q, 0755);
    expect_build_error(q, "no files");
    rmdir(q);
    /* an unreadable file (root reads everything: skip there) */
    if (geteuid() != 0) {
        snprintf(q, sizeof q, "%s/sub/secret", tmpl);
        put("sub/secret", 10, 9);
        chmod(q, 0);
        expect_build_error(tmpl, "not readable");
        unlink(q);
    }
    /* a bad chunk size */
    assert_int_equal(drv_manifest_build(tmpl, 100, 1, &m, &e), -1);
    assert_non_null(strstr(e.message, "chunk size 100"));
}

/* A valid manifest's JSON, edited by fn, must fail with needle in the
 * message (and the digest recomputed first when redigest). */
typedef void (*edit_fn)(json_t *o);

static void expect_parse_error(edit_fn fn, bool redigest, const char *needle)
{
    drv_manifest_t *m = NULL;
    drv_error_t e = {0};
    assert_int_equal(drv_manifest_build(tmpl, 4096, 2, &m, &e), 0);
    char *js = drv_manifest_to_json(m);
    json_t *o = json_loads(js, 0, NULL);
    free(js);
    fn(o);
    if (redigest) {
        /* recompute the digest over the edited object as the canonical form */
        json_object_del(o, "digest");
        char *c = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        char hex[65];
        drv_sha256_hex(c, strlen(c), hex);
        free(c);
        json_object_set_new(o, "digest", json_string(hex));
    }
    js = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    drv_manifest_free(m);
    m = NULL;
    assert_int_equal(drv_manifest_parse(js, strlen(js), &m, &e), -1);
    free(js);
    assert_null(m);
    if (!strstr(e.message, needle))
        fail_msg("error '%s' lacks '%s'", e.message, needle);
}

static json_t *file0(json_t *o) { return json_array_get(json_object_get(o, "files"), 0); }
static void e_unknown(json_t *o) { json_object_set_new(o, "extra", json_true()); }
static void e_unknown_file(json_t *o) { json_object_set_new(file0(o), "mode", json_integer(1)); }
static void e_type(json_t *o) { json_object_set_new(file0(o), "size", json_string("10000")); }
static void e_abs(json_t *o) { json_object_set_new(file0(o), "path", json_string("/etc/x")); }
static void e_dotdot(json_t *o) { json_object_set_new(file0(o), "path", json_string("a/../b")); }
static void e_dup(json_t *o)
{
    json_t *f = json_array_get(json_object_get(o, "files"), 2);
    json_object_set_new(f, "path", json_string("a.bin"));
}
static void e_dir_file(json_t *o)
{
    json_t *f = json_array_get(json_object_get(o, "files"), 2);
    json_object_set_new(f, "path", json_string("a.bin/c"));
}
static void e_nchunks(json_t *o) { json_array_remove(json_object_get(file0(o), "chunks"), 0); }
static void e_size(json_t *o)
{
    json_object_set_new(file0(o), "size", json_integer(20000));
    json_object_set_new(o, "total_size", json_integer(24096));
}
static void e_total(json_t *o) { json_object_set_new(o, "total_size", json_integer(5)); }
static void e_hex(json_t *o)
{
    json_array_set_new(json_object_get(file0(o), "chunks"), 1, json_string("ABCD"));
}
static void e_hexcase(json_t *o)
{
    char up[65];
    strcpy(up, json_string_value(json_object_get(file0(o), "sha256")));
    for (char *c = up; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 32);
    json_object_set_new(file0(o), "sha256", json_string(up));
}
static void e_digest(json_t *o)
{
    json_object_set_new(file0(o), "sha256", json_string("0000000000000000000000000000000000000000000000000000000000000000"));
}
static void e_chunk_size(json_t *o) { json_object_set_new(o, "chunk_size", json_integer(0)); }
static void e_version(json_t *o) { json_object_set_new(o, "version", json_integer(2)); }
static void e_nodigest(json_t *o) { json_object_del(o, "digest"); }
static void e_empty(json_t *o) { json_array_clear(json_object_get(o, "files")); }
static void e_huge(json_t *o)
{
    json_object_set_new(file0(o), "size", json_integer((json_int_t)1 << 50));
}

static void test_parse_refusals(void **st)
{
    expect_parse_error(e_unknown, false, "unknown field 'extra'");
    expect_parse_error(e_unknown_file, false, "unknown field 'mode' in files[0]");
    expect_parse_error(e_type, false, "files[0].size must be a non-negative integer");
    expect_parse_error(e_abs, true, "is absolute");
    expect_parse_error(e_dotdot, true, "'.' or '..'");
    expect_parse_error(e_dup, true, "'a.bin' appears twice");
    expect_parse_error(e_dir_file, true, "also the directory of 'a.bin/c'");
    expect_parse_error(e_nchunks, true, "files[0].chunks has 2 chunks");
    expect_parse_error(e_size, true, "files[0].chunks has 3 chunks; a 20000-byte file");
    expect_parse_error(e_total, true, "total_size 5 is not the files' sum 14096");
    expect_parse_error(e_hex, true, "files[0].chunks[1] must be a sha256");
    expect_parse_error(e_hexcase, true, "files[0].sha256 must be a sha256");
    expect_parse_error(e_digest, false, "does not match its content");
    expect_parse_error(e_chunk_size, true, "chunk_size 0 is outside");
    expect_parse_error(e_version, true, "version 2 is not supported");
    expect_parse_error(e_nodigest, false, "digest is missing");
    expect_parse_error(e_empty, true, "files must be a non-empty array");
    expect_parse_error(e_huge, true, "over the");

    drv_manifest_t *m = NULL;
    drv_error_t e = {0};
    const char *bad = "{\"version\":1,";
    assert_int_equal(drv_manifest_parse(bad, strlen(bad), &m, &e), -1);
    assert_non_null(strstr(e.message, "not JSON"));
    bad = "[1]";
    assert_int_equal(drv_manifest_parse(bad, strlen(bad), &m, &e), -1);
    assert_non_null(strstr(e.message, "must be a JSON object"));
    bad = "{\"version\":1,\"version\":1}";
    assert_int_equal(drv_manifest_parse(bad, strlen(bad), &m, &e), -1);
    assert_non_null(strstr(e.message, "not JSON"));
}

static void test_paths_and_chunks(void **st)
{
    assert_string_equal(drv_manifest_path_problem("a/b/c.bin"), "");
    assert_string_equal(drv_manifest_path_problem(".hidden/x"), "");
    assert_string_not_equal(drv_manifest_path_problem("a//b"), "");
    assert_string_not_equal(drv_manifest_path_problem("a/"), "");
    assert_string_not_equal(drv_manifest_path_problem("./a"), "");
    assert_string_not_equal(drv_manifest_path_problem("a\nb"), "");
    assert_string_not_equal(drv_manifest_path_problem(""), "");
    assert_int_equal(drv_manifest_nchunks(0, 4096), 0);
    assert_int_equal(drv_manifest_nchunks(1, 4096), 1);
    assert_int_equal(drv_manifest_nchunks(4096, 4096), 1);
    assert_int_equal(drv_manifest_nchunks(4097, 4096), 2);
    assert_int_equal(drv_manifest_chunk_len(4097, 4096, 1), 1);
    assert_int_equal(drv_manifest_chunk_len(4097, 4096, 2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_build_refusals),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_paths_and_chunks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
