/* test_catalog.c — unit tests of the instance catalog (src/catalog/catalog.c)
 * and its HTTP handlers (src/api/h_catalog.c): the embedded data file,
 * validation of bad catalogs, lookups, filtered queries and their order,
 * type_offered, JSON renderings, and the providers/instance-types routes
 * called directly as functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "catalog/catalog.h"
#include "state/head.h"

/* --- fixtures ------------------------------------------------------------- */

static int setup_default(void **state)
{
    drv_error_t e = {0};
    drv_catalog_t *cat = drv_catalog_create_default(&e);
    if (!cat)
        fprintf(stderr, "default catalog: %s\n", e.message);
    *state = cat;
    return cat ? 0 : -1;
}

static int teardown_default(void **state)
{
    drv_catalog_destroy(*state);
    return 0;
}

/* A small valid catalog; tests splice bad parts into it. */
#define PROVIDERS                                                                              \
    "\"providers\": ["                                                                         \
    "{\"id\": \"p1\", \"name\": \"P One\", \"supports_spot\": true,"                           \
    " \"regions\": [{\"id\": \"r1\", \"name\": \"R1\"}, {\"id\": \"r2\", \"name\": \"R2\"}]},"  \
    "{\"id\": \"p2\", \"name\": \"P Two\", \"supports_spot\": false,"                          \
    " \"regions\": [{\"id\": \"r1\", \"name\": \"R1 of p2\"}]}]"

#define TYPE(id, prov, regions, gpu, n, mem, price, spot)                                      \
    "{\"id\": \"" id "\", \"provider\": \"" prov "\", \"regions\": " regions ","               \
    " \"vcpus\": 4, \"memory_mib\": 16384, \"gpu_type\": \"" gpu "\", \"gpu_count\": " #n ","   \
    " \"gpu_memory_mib\": " #mem ", \"price_per_hour\": " #price ","                           \
    " \"spot_price_per_hour\": " #spot "}"

static drv_catalog_t *parse(const char *text, drv_error_t *e)
{
    drv_err_clear(e);
    return drv_catalog_create(text, strlen(text), e);
}

static void expect_bad(const char *text, const char *needle)
{
    drv_error_t e;
    drv_catalog_t *cat = parse(text, &e);
    if (cat || !strstr(e.message, needle))
        fprintf(stderr, "expected an error with '%s', got %s: '%s'\n", needle,
                cat ? "a catalog" : "error", e.message);
    assert_null(cat);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.code, "invalid_argument");
    assert_non_null(strstr(e.message, needle));
    drv_catalog_destroy(cat);
}

/* --- the embedded data file ----------------------------------------------- */

static void test_default_has_providers(void **state)
{
    drv_catalog_t *cat = *state;
    static const struct { const char *id; bool spot; const char *region; } want[] = {
        {"aws", true, "us-east-1"},   {"gcp", true, "us-central1"},
        {"oracle", true, "us-ashburn-1"}, {"vultr", false, "ewr"},
        {"local", false, "local"},    {"self-managed", false, "default"},
        {"slurm", false, "any"},
    };
    assert_int_equal(drv_catalog_n_providers(cat), 7);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const drv_provider_t *p = drv_catalog_provider(cat, want[i].id);
        assert_non_null(p);
        assert_int_equal(p->supports_spot, want[i].spot);
        assert_true(p->n_regions >= 1);
        assert_non_null(drv_catalog_region(cat, want[i].id, want[i].region));
    }
    assert_null(drv_catalog_provider(cat, "azure"));
    assert_null(drv_catalog_provider(cat, NULL));
    assert_null(drv_catalog_provider_at(cat, 7));
    assert_null(drv_catalog_region(cat, "aws", "us-central1"));
    assert_null(drv_catalog_region(cat, "nope", "us-east-1"));
    assert_string_equal(drv_catalog_region(cat, "aws", "us-east-1")->name, "US East (N. Virginia)");
}

static void test_default_has_required_types(void **state)
{
    drv_catalog_t *cat = *state;
    static const struct { const char *id, *provider, *gpu; int n; int64_t mem; } want[] = {
        {"g4dn.xlarge", "aws", "T4", 1, 16384},     {"g5.xlarge", "aws", "A10G", 1, 24576},
        {"g5.2xlarge", "aws", "A10G", 1, 24576},    {"g5.12xlarge", "aws", "A10G", 4, 24576},
        {"g6.xlarge", "aws", "L4", 1, 24576},       {"g6.2xlarge", "aws", "L4", 1, 24576},
        {"g6e.xlarge", "aws", "L40S", 1, 49152},    {"g6e.2xlarge", "aws", "L40S", 1, 49152},
        {"g6e.12xlarge", "aws", "L40S", 4, 49152},  {"p4d.24xlarge", "aws", "A100", 8, 40960},
        {"p4de.24xlarge", "aws", "A100", 8, 81920}, {"p5.48xlarge", "aws", "H100", 8, 81920},
        {"g2-standard-4", "gcp", "L4", 1, 24576},   {"g2-standard-8", "gcp", "L4", 1, 24576},
        {"g2-standard-16", "gcp", "L4", 1, 24576},  {"g2-standard-32", "gcp", "L4", 1, 24576},
        {"a2-highgpu-1g", "gcp", "A100", 1, 40960}, {"a2-ultragpu-1g", "gcp", "A100", 1, 81920},
        {"a3-highgpu-1g", "gcp", "H100", 1, 81920}, {"a3-highgpu-2g", "gcp", "H100", 2, 81920},
        {"a3-highgpu-4g", "gcp", "H100", 4, 81920}, {"a3-highgpu-8g", "gcp", "H100", 8, 81920},
        {"VM.GPU.A10.1", "oracle", "A10", 1, 24576}, {"VM.GPU.A10.2", "oracle", "A10", 2, 24576},
        {"BM.GPU.A10.4", "oracle", "A10", 4, 24576},
        {"BM.GPU.A100-v2.8", "oracle", "A100", 8, 81920},
        {"BM.GPU.H100.8", "oracle", "H100", 8, 81920},
        {"BM.GPU.H200.8", "oracle", "H200", 8, 144384},
        {"vcg-l40s-16c-180g-48vram", "vultr", "L40S", 1, 49152},
        {"vcg-l40s-128c-1500g-384vram", "vultr", "L40S", 8, 49152},
        {"vcg-a40-24c-120g-48vram", "vultr", "A40", 1, 49152},
        {"vcg-a100-2c-15g-10vram", "vultr", "A100", 1, 10240},
        {"vcg-a100-12c-120g-80vram", "vultr", "A100", 1, 81920},
        {"vcg-a16-2c-16g-4vram", "vultr", "A16", 1, 4096},
        {"vcg-a16-6c-64g-16vram", "vultr", "A16", 1, 16384},
        {"local-cpu", "local", "", 0, 0},           {"local-t4", "local", "T4", 1, 16384},
        {"local-l4", "local", "L4", 1, 24576},      {"local-l4x2", "local", "L4", 2, 24576},
        {"local-a10g", "local", "A10G", 1, 24576},  {"local-a100", "local", "A100", 1, 81920},
        {"local-a100x2", "local", "A100", 2, 81920}, {"local-h100", "local", "H100", 1, 81920},
        {"local-h100x8", "local", "H100", 8, 81920},
        {"self-cpu", "self-managed", "", 0, 0},     {"self-h100x8", "self-managed", "H100", 8, 81920},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const drv_instance_type_t *t = drv_catalog_instance_type(cat, want[i].id);
        if (!t)
            fprintf(stderr, "missing instance type %s\n", want[i].id);
        assert_non_null(t);
        assert_string_equal(t->provider, want[i].provider);
        assert_string_equal(t->gpu_type, want[i].gpu);
        assert_int_equal(t->gpu_count, want[i].n);
        assert_int_equal(t->gpu_memory_mib, want[i].mem);
        assert_true(t->vcpus > 0 && t->memory_mib > 0 && t->n_regions > 0);
        bool free_type = strcmp(t->provider, "local") == 0 || strcmp(t->provider, "self-managed") == 0;
        if (free_type)
            assert_true(t->price_per_hour == 0.0);
        else
            assert_true(t->price_per_hour > 0.0);
    }
    /* Some figures worth pinning: list prices as recorded in data/catalog.json. */
    assert_true(fabs(drv_catalog_instance_type(cat, "g5.xlarge")->price_per_hour - 1.006) < 1e-9);
    assert_true(fabs(drv_catalog_instance_type(cat, "g4dn.xlarge")->price_per_hour - 0.526) < 1e-9);
    assert_true(drv_catalog_instance_type(cat, "g5.xlarge")->spot_price_per_hour > 0);
    assert_true(drv_catalog_instance_type(cat, "p5.48xlarge")->spot_price_per_hour < 0);
    assert_int_equal(drv_catalog_instance_type(cat, "p5.48xlarge")->vcpus, 192);
    assert_null(drv_catalog_instance_type(cat, "g5.xlargeX"));
    assert_null(drv_catalog_instance_type(cat, NULL));

    /* Spot figures only where the provider has spot capacity; a few of each provider. */
    const drv_instance_type_t *all[128];
    size_t n = drv_catalog_query(cat, NULL, all, 128);
    assert_true(n >= 50 && n <= 128);
    size_t vultr = 0;
    for (size_t i = 0; i < n; i++) {
        const drv_provider_t *p = drv_catalog_provider(cat, all[i]->provider);
        assert_non_null(p);
        if (!p->supports_spot)
            assert_true(all[i]->spot_price_per_hour < 0);
        else if (all[i]->spot_price_per_hour >= 0)
            assert_true(all[i]->spot_price_per_hour < all[i]->price_per_hour);
        if (strcmp(p->id, "vultr") == 0)
            vultr++;
    }
    assert_true(vultr >= 6);
}

/* --- validation ----------------------------------------------------------- */

static void test_parse_minimal(void **state)
{
    (void)state;
    drv_error_t e;
    drv_catalog_t *cat = parse("{\"version\": 1, \"sources\": \"test\", " PROVIDERS ", "
                               "\"instance_types\": ["
                               TYPE("b", "p1", "[\"r1\"]", "L4", 1, 24576, 2, null) ","
                               TYPE("a", "p1", "[\"r1\", \"r2\"]", "L4", 1, 24576, 2, 1.5) ","
                               TYPE("c", "p2", "[\"r1\"]", "", 0, 0, 0.5, null) "]}", &e);
    if (!cat)
        fprintf(stderr, "%s\n", e.message);
    assert_non_null(cat);
    assert_int_equal(drv_catalog_n_providers(cat), 2);
    assert_string_equal(drv_catalog_provider_at(cat, 1)->id, "p2");
    const drv_instance_type_t *out[3];
    assert_int_equal(drv_catalog_query(cat, NULL, out, 3), 3);
    assert_string_equal(out[0]->id, "c");   /* 0.5 */
    assert_string_equal(out[1]->id, "a");   /* 2, then id */
    assert_string_equal(out[2]->id, "b");
    assert_true(out[1]->spot_price_per_hour == 1.5);
    assert_true(out[2]->spot_price_per_hour < 0);
    assert_true(drv_catalog_type_offered(cat, "a", "p1", "r2"));
    assert_false(drv_catalog_type_offered(cat, "b", "p1", "r2"));
    assert_false(drv_catalog_type_offered(cat, "c", "p1", "r1"));  /* p2's r1, not p1's */
    assert_true(drv_catalog_type_offered(cat, "c", "p2", "r1"));
    drv_catalog_destroy(cat);
    drv_catalog_destroy(NULL);
}

#define DOC(types) "{\"version\": 1, " PROVIDERS ", \"instance_types\": [" types "]}"
#define GOOD TYPE("ok", "p1", "[\"r1\"]", "L4", 1, 24576, 1, null)

static void test_parse_errors(void **state)
{
    (void)state;
    expect_bad("{\"version\": 1,", "line 1");
    expect_bad("[1, 2]", "must be a JSON object");
    expect_bad("{\"version\": 2, " PROVIDERS ", \"instance_types\": []}", "'version' must be 1");
    expect_bad("{" PROVIDERS ", \"instance_types\": []}", "'version' must be 1");
    expect_bad("{\"version\": 1, \"instance_types\": []}", "'providers' must be an array");
    expect_bad("{\"version\": 1, " PROVIDERS "}", "'instance_types' must be an array");
    expect_bad("{\"version\": 1, \"providers\": [], \"instance_types\": []}", "must not be empty");
    expect_bad("{\"version\": 1, \"colour\": 3, " PROVIDERS ", \"instance_types\": []}",
               "unknown field 'colour'");
    expect_bad("{\"version\": 1, \"sources\": 5, " PROVIDERS ", \"instance_types\": []}",
               "'sources' must be a string");
    /* duplicate JSON keys */
    expect_bad("{\"version\": 1, \"version\": 1, " PROVIDERS ", \"instance_types\": []}",
               "duplicate");
    /* providers */
    expect_bad("{\"version\": 1, \"providers\": ["
               "{\"id\": \"p1\", \"name\": \"A\", \"supports_spot\": true, \"regions\": [{\"id\": \"r\", \"name\": \"R\"}]},"
               "{\"id\": \"p1\", \"name\": \"B\", \"supports_spot\": true, \"regions\": [{\"id\": \"r\", \"name\": \"R\"}]}],"
               "\"instance_types\": []}", "provider 'p1' is listed twice");
    expect_bad("{\"version\": 1, \"providers\": ["
               "{\"id\": \"p1\", \"name\": \"A\", \"supports_spot\": true, \"regions\": "
               "[{\"id\": \"r\", \"name\": \"R\"}, {\"id\": \"r\", \"name\": \"R again\"}]}],"
               "\"instance_types\": []}", "region 'r' is listed twice");
    expect_bad("{\"version\": 1, \"providers\": ["
               "{\"id\": \"p1\", \"name\": \"A\", \"supports_spot\": true, \"regions\": []}],"
               "\"instance_types\": []}", "provider 'p1': 'regions' must be a non-empty array");
    expect_bad("{\"version\": 1, \"providers\": ["
               "{\"id\": \"p 1\", \"name\": \"A\", \"supports_spot\": true, \"regions\": []}],"
               "\"instance_types\": []}", "'id' must be");
    expect_bad("{\"version\": 1, \"providers\": ["
               "{\"id\": \"p1\", \"name\": \"A\", \"supports_spot\": \"yes\", \"regions\": []}],"
               "\"instance_types\": []}", "provider 'p1': 'supports_spot' must be true or false");
    /* instance types */
    expect_bad(DOC(GOOD "," GOOD), "instance type 'ok' is listed twice");
    expect_bad(DOC(TYPE("x1", "nope", "[\"r1\"]", "L4", 1, 24576, 1, null)),
               "instance type 'x1': unknown provider 'nope'");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r9\"]", "L4", 1, 24576, 1, null)),
               "instance type 'x1': unknown region 'r9' of provider 'p1'");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r1\", \"r1\"]", "L4", 1, 24576, 1, null)),
               "instance type 'x1': region 'r1' is listed twice");
    expect_bad(DOC(TYPE("x1", "p1", "[]", "L4", 1, 24576, 1, null)),
               "instance type 'x1': 'regions' must be a non-empty array");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r1\"]", "L4", 1, 24576, -0.5, null)),
               "instance type 'x1': 'price_per_hour' is -0.5");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r1\"]", "L4", 1, 24576, 1, -1)),
               "instance type 'x1': 'spot_price_per_hour' is -1");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r1\"]", "L4", -1, 24576, 1, null)),
               "instance type 'x1': 'gpu_count' is -1");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r1\"]", "L4", 1, -24576, 1, null)),
               "instance type 'x1': 'gpu_memory_mib' is -24576");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r1\"]", "L4", 1, 24576, "1", null)),
               "instance type 'x1': 'price_per_hour' must be a number");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r1\"]", "L4", 0, 0, 1, null)),
               "instance type 'x1': gpu_count is 0, so gpu_type must be");
    expect_bad(DOC(TYPE("x1", "p1", "[\"r1\"]", "", 2, 24576, 1, null)),
               "instance type 'x1': gpu_count is 2, so gpu_type and gpu_memory_mib are required");
    expect_bad(DOC(TYPE("x1", "p2", "[\"r1\"]", "L4", 1, 24576, 1, 0.5)),
               "instance type 'x1': provider 'p2' has no spot capacity");
    expect_bad(DOC("{\"id\": \"x1\", \"provider\": \"p1\", \"regions\": [\"r1\"], \"vcpus\": 0,"
                   " \"memory_mib\": 1, \"gpu_type\": \"\", \"gpu_count\": 0, \"gpu_memory_mib\": 0,"
                   " \"price_per_hour\": 1}"), "instance type 'x1': 'vcpus' is 0");
    expect_bad(DOC("{\"id\": \"x1\", \"provider\": \"p1\", \"regions\": [\"r1\"], \"vcpus\": 1,"
                   " \"gpu_type\": \"\", \"gpu_count\": 0, \"gpu_memory_mib\": 0,"
                   " \"price_per_hour\": 1}"), "instance type 'x1': 'memory_mib' is required");
    expect_bad(DOC("{\"id\": \"x1\", \"provider\": \"p1\", \"regions\": [\"r1\"], \"vcpus\": 1.5,"
                   " \"memory_mib\": 1, \"gpu_type\": \"\", \"gpu_count\": 0, \"gpu_memory_mib\": 0,"
                   " \"price_per_hour\": 1}"), "instance type 'x1': 'vcpus' must be an integer");
    expect_bad(DOC("{\"id\": \"x1\", \"provider\": \"p1\", \"regions\": [\"r1\"], \"vcpus\": 1,"
                   " \"memory_mib\": 1, \"gpu_type\": \"\", \"gpu_count\": 0, \"gpu_memory_mib\": 0,"
                   " \"price_per_hour\": 1, \"gpus\": 3}"), "instance type 'x1': unknown field 'gpus'");
    expect_bad(DOC("{\"provider\": \"p1\"}"), "instance type #1: 'id' is required");
    expect_bad(DOC(GOOD ", 7"), "instance type #2 must be an object");

    /* field names the path of the offending entry */
    drv_error_t e;
    assert_null(parse(DOC(GOOD "," TYPE("x1", "p1", "[\"r1\"]", "L4", 1, 24576, -2, null)), &e));
    assert_string_equal(e.field, "instance_types[1].price_per_hour");
    assert_null(drv_catalog_create(NULL, 0, &e));
    assert_null(drv_catalog_create("{}", 2, NULL));   /* NULL error is allowed */
}

/* A type of the small catalog with a "sources" object (the JSON text of its members). */
#define SRC_TYPE(spot, members)                                                                \
    "{\"id\": \"s\", \"provider\": \"p1\", \"regions\": [\"r1\"], \"vcpus\": 4,"              \
    " \"memory_mib\": 16384, \"gpu_type\": \"L4\", \"gpu_count\": 1, \"gpu_memory_mib\": 24576," \
    " \"price_per_hour\": 1, \"spot_price_per_hour\": " spot ", \"sources\": {" members "}}"
#define CITE "\"https://example.com/gpus (seen 2026-12-02)\""

static void test_parse_sources(void **state)
{
    (void)state;
    drv_error_t e;
    /* cited, third-party, and unverified with a note: all accepted and kept */
    drv_catalog_t *cat = parse(DOC(SRC_TYPE("0.5", "\"shape\": " CITE ", \"price\": "
                                            "\"third-party: https://x.org/p.csv (seen 2026-09-26)\","
                                            " \"spot_price\": null, \"note\": \"unverified: none\"")),
                               &e);
    if (!cat)
        fprintf(stderr, "%s\n", e.message);
    assert_non_null(cat);
    const drv_instance_type_t *t = drv_catalog_instance_type(cat, "s");
    assert_true(t->has_sources);
    assert_string_equal(t->src_shape, "https://example.com/gpus (seen 2026-12-02)");
    assert_non_null(strstr(t->src_price, "third-party: "));
    assert_null(t->src_spot_price);
    assert_string_equal(t->src_note, "unverified: none");
    json_t *j = drv_instance_type_to_json(t);
    json_t *src = json_object_get(j, "sources");
    assert_int_equal(json_object_size(src), 4);
    assert_true(json_is_null(json_object_get(src, "spot_price")));
    assert_string_equal(json_string_value(json_object_get(src, "note")), "unverified: none");
    json_decref(j);
    drv_catalog_destroy(cat);

    /* without a spot price, no spot citation; a type without sources renders none */
    cat = parse(DOC(SRC_TYPE("null", "\"shape\": " CITE ", \"price\": " CITE) "," GOOD), &e);
    assert_non_null(cat);
    j = drv_instance_type_to_json(drv_catalog_instance_type(cat, "s"));
    assert_int_equal(json_object_size(json_object_get(j, "sources")), 2);
    json_decref(j);
    j = drv_instance_type_to_json(drv_catalog_instance_type(cat, "ok"));
    assert_null(json_object_get(j, "sources"));
    assert_false(drv_catalog_instance_type(cat, "ok")->has_sources);
    json_decref(j);
    drv_catalog_destroy(cat);

    expect_bad(DOC(SRC_TYPE("null", "\"shape\": " CITE)), "sources.price is required");
    expect_bad(DOC(SRC_TYPE("0.5", "\"shape\": " CITE ", \"price\": " CITE)),
               "sources.spot_price is required");
    expect_bad(DOC(SRC_TYPE("null", "\"shape\": " CITE ", \"price\": " CITE ", \"spot_price\": "
                            CITE)), "spot_price_per_hour is null");
    expect_bad(DOC(SRC_TYPE("null", "\"shape\": null, \"price\": " CITE)),
               "needs sources.note \"unverified: <why>\"");
    expect_bad(DOC(SRC_TYPE("null", "\"shape\": null, \"price\": " CITE ", \"note\": \"why\"")),
               "needs sources.note");
    expect_bad(DOC(SRC_TYPE("null", "\"shape\": null, \"price\": " CITE
                            ", \"note\": \"unverified: \"")), "needs sources.note");
    static const char *const bad_cites[] = {
        "\"http://example.com (seen 2026-12-02)\"",       /* not https */
        "\"https://example.com\"",                       /* no date */
        "\"https://example.com (seen 2026-1-02)\"",      /* malformed date */
        "\"https://example.com (seen 2026-12-02) etc\"", /* trailing text */
        "\"https://exa mple.com (seen 2026-12-02)\"",    /* space in the URL */
        "\"https:// (seen 2026-12-02)\"",                /* no URL */
        "\"see the price list\"", "42",
    };
    for (size_t i = 0; i < sizeof bad_cites / sizeof bad_cites[0]; i++) {
        char doc[2048];
        snprintf(doc, sizeof doc, DOC(SRC_TYPE("null", "\"shape\": " CITE ", \"price\": %s")),
                 bad_cites[i]);
        expect_bad(doc, "sources.price must be null or");
    }
    expect_bad(DOC(SRC_TYPE("null", "\"shape\": " CITE ", \"price\": " CITE ", \"url\": " CITE)),
               "unknown field 'url'");
    assert_null(parse(DOC("{\"id\": \"s\", \"provider\": \"p1\", \"regions\": [\"r1\"],"
                          " \"vcpus\": 4, \"memory_mib\": 16384, \"gpu_type\": \"\","
                          " \"gpu_count\": 0, \"gpu_memory_mib\": 0, \"price_per_hour\": 1,"
                          " \"spot_price_per_hour\": null, \"sources\": \"https://x\"}"), &e));
    assert_string_equal(e.field, "instance_types[0].sources");
}

/* Every GCP, Oracle and Vultr entry of the shipped catalog cites each figure or says why not. */
static void test_default_sources(void **state)
{
    drv_catalog_t *cat = *state;
    static const char *const providers[] = {"gcp", "oracle", "vultr"};
    const drv_instance_type_t *out[128];
    size_t checked = 0, cited = 0;
    for (size_t p = 0; p < 3; p++) {
        drv_it_filter_t f = {.provider = providers[p], .min_gpu_memory_mib = -1,
                             .min_gpus = -1, .max_price_per_hour = -1};
        size_t n = drv_catalog_query(cat, &f, out, 128);
        for (size_t i = 0; i < n; i++, checked++) {
            const drv_instance_type_t *t = out[i];
            if (!t->has_sources)
                fprintf(stderr, "%s has no sources\n", t->id);
            assert_true(t->has_sources);
            bool has_spot = t->spot_price_per_hour >= 0;
            bool unverified = !t->src_shape || !t->src_price || (has_spot && !t->src_spot_price);
            cited += (t->src_shape != NULL) + (t->src_price != NULL) +
                     (has_spot && t->src_spot_price != NULL);
            if (unverified)
                assert_true(t->src_note && strncmp(t->src_note, "unverified: ", 12) == 0);
        }
    }
    assert_int_equal(checked, 30);   /* 10 gcp, 6 oracle, 14 vultr */
    assert_true(cited > checked);    /* most figures are cited */
}

/* --- queries -------------------------------------------------------------- */

static drv_it_filter_t any(void)
{
    return (drv_it_filter_t){.min_gpu_memory_mib = -1, .min_gpus = -1, .max_price_per_hour = -1};
}

static void check_sorted(const drv_instance_type_t *const *out, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        assert_true(out[i - 1]->price_per_hour <= out[i]->price_per_hour);
        if (out[i - 1]->price_per_hour == out[i]->price_per_hour)
            assert_true(strcmp(out[i - 1]->id, out[i]->id) < 0);
    }
}

static void test_query_filters(void **state)
{
    drv_catalog_t *cat = *state;
    const drv_instance_type_t *out[128];
    drv_it_filter_t f = any();
    size_t all = drv_catalog_query(cat, &f, out, 128), n;
    check_sorted(out, all);
    assert_int_equal(drv_catalog_query(cat, NULL, NULL, 0), all);

    f.provider = "aws";
    n = drv_catalog_query(cat, &f, out, 128);
    assert_int_equal(n, 12);
    check_sorted(out, n);
    assert_string_equal(out[0]->id, "g4dn.xlarge");
    assert_string_equal(out[n - 1]->id, "p5.48xlarge");
    for (size_t i = 0; i < n; i++)
        assert_string_equal(out[i]->provider, "aws");

    f = any();
    f.gpu_type = "l4";           /* case-insensitive */
    n = drv_catalog_query(cat, &f, out, 128);
    assert_true(n >= 8);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(out[i]->gpu_type, "L4");
    f.gpu_type = "L4X";
    assert_int_equal(drv_catalog_query(cat, &f, out, 128), 0);

    f = any();
    f.region = "us-east-1";
    n = drv_catalog_query(cat, &f, out, 128);
    assert_int_equal(n, 12);     /* every AWS type is in us-east-1 */

    f = any();
    f.min_gpu_memory_mib = 81920;
    n = drv_catalog_query(cat, &f, out, 128);
    for (size_t i = 0; i < n; i++)
        assert_true(out[i]->gpu_memory_mib >= 81920);
    assert_true(n >= 10);

    f = any();
    f.min_gpus = 8;
    n = drv_catalog_query(cat, &f, out, 128);
    for (size_t i = 0; i < n; i++)
        assert_true(out[i]->gpu_count >= 8);
    assert_true(n >= 6);

    f = any();
    f.max_price_per_hour = 1.0;
    n = drv_catalog_query(cat, &f, out, 128);
    for (size_t i = 0; i < n; i++)
        assert_true(out[i]->price_per_hour <= 1.0);
    check_sorted(out, n);

    /* combined: AWS, us-east-1, >= 48 GiB per GPU, >= 4 GPUs, under $20/h */
    f = any();
    f.provider = "aws";
    f.region = "us-east-1";
    f.min_gpu_memory_mib = 49152;
    f.min_gpus = 4;
    f.max_price_per_hour = 20;
    n = drv_catalog_query(cat, &f, out, 128);
    assert_int_equal(n, 1);
    assert_string_equal(out[0]->id, "g6e.12xlarge");

    /* combined: H100 anywhere, sorted by price */
    f = any();
    f.gpu_type = "h100";
    f.min_gpus = 8;
    f.max_price_per_hour = 1000;
    f.provider = NULL;
    n = drv_catalog_query(cat, &f, out, 128);
    assert_int_equal(n, 5);      /* local, self, p5, oracle, a3 */
    assert_string_equal(out[0]->id, "local-h100x8");
    assert_string_equal(out[1]->id, "self-h100x8");
    assert_string_equal(out[2]->id, "p5.48xlarge");
    assert_string_equal(out[3]->id, "BM.GPU.H100.8");
    assert_string_equal(out[4]->id, "a3-highgpu-8g");

    /* max smaller than the matches: fills max, returns the total */
    f = any();
    f.provider = "gcp";
    assert_int_equal(drv_catalog_query(cat, &f, out, 2), 10);
    assert_string_equal(out[0]->id, "g2-standard-4");
    assert_string_equal(out[1]->id, "g2-standard-8");

    f.region = "local";
    assert_int_equal(drv_catalog_query(cat, &f, out, 128), 0);
}

static void test_type_offered(void **state)
{
    drv_catalog_t *cat = *state;
    assert_true(drv_catalog_type_offered(cat, "g5.xlarge", "aws", "us-east-1"));
    assert_true(drv_catalog_type_offered(cat, "local-l4", "local", "local"));
    assert_true(drv_catalog_type_offered(cat, "self-l4", "self-managed", "default"));
    assert_false(drv_catalog_type_offered(cat, "local-l4", "self-managed", "default"));
    assert_false(drv_catalog_type_offered(cat, "g5.xlarge", "gcp", "us-east-1"));
    assert_false(drv_catalog_type_offered(cat, "g5.xlarge", "aws", "us-central1"));
    assert_false(drv_catalog_type_offered(cat, "p4de.24xlarge", "aws", "eu-west-1"));
    assert_false(drv_catalog_type_offered(cat, "nope", "aws", "us-east-1"));
    assert_false(drv_catalog_type_offered(cat, "g5.xlarge", NULL, "us-east-1"));
    assert_false(drv_catalog_type_offered(cat, "g5.xlarge", "aws", NULL));
}

static void test_to_json(void **state)
{
    drv_catalog_t *cat = *state;
    json_t *j = drv_instance_type_to_json(drv_catalog_instance_type(cat, "g6e.12xlarge"));
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "id")), "g6e.12xlarge");
    assert_string_equal(json_string_value(json_object_get(j, "provider")), "aws");
    assert_string_equal(json_string_value(json_object_get(j, "gpu_type")), "L40S");
    assert_int_equal(json_integer_value(json_object_get(j, "gpu_count")), 4);
    assert_int_equal(json_integer_value(json_object_get(j, "gpu_memory_mib")), 49152);
    assert_int_equal(json_integer_value(json_object_get(j, "vcpus")), 48);
    assert_int_equal(json_integer_value(json_object_get(j, "memory_mib")), 393216);
    assert_true(json_is_real(json_object_get(j, "price_per_hour")));
    assert_true(json_is_real(json_object_get(j, "spot_price_per_hour")));
    assert_true(json_array_size(json_object_get(j, "regions")) >= 1);
    assert_int_equal(json_object_size(j), 10);
    json_decref(j);

    j = drv_instance_type_to_json(drv_catalog_instance_type(cat, "vcg-l40s-16c-180g-48vram"));
    assert_true(json_is_null(json_object_get(j, "spot_price_per_hour")));
    json_decref(j);

    j = drv_provider_to_json(drv_catalog_provider(cat, "vultr"));
    assert_string_equal(json_string_value(json_object_get(j, "id")), "vultr");
    assert_true(json_is_false(json_object_get(j, "supports_spot")));
    json_t *r0 = json_array_get(json_object_get(j, "regions"), 0);
    assert_non_null(json_object_get(r0, "id"));
    assert_non_null(json_object_get(r0, "name"));
    json_decref(j);
    assert_null(drv_provider_to_json(NULL));
    assert_null(drv_instance_type_to_json(NULL));
}

/* --- handlers ------------------------------------------------------------- */

typedef struct call {
    drv_resp_t resp;
    json_t *doc;
} call_t;

/* Run handler with path params and "k=v" query args; parse the answer. */
static void run(drv_handler_fn h, drv_catalog_t *cat, const char *param, const char *const *kv,
                call_t *c)
{
    static drv_head_t head;
    drv_req_t req = {.method = "GET", .path = "/v1/test", .head = &head};
    char keys[DRV_MAX_QUERY][64];
    head.catalog = cat;
    if (param)
        req.params[req.n_params++] = param;
    for (size_t i = 0; kv && kv[i]; i++) {
        const char *eq = strchr(kv[i], '=');
        snprintf(keys[i], sizeof keys[i], "%.*s", (int)(eq - kv[i]), kv[i]);
        req.query[req.n_query++] = (drv_kv_t){keys[i], eq + 1};
    }
    memset(c, 0, sizeof *c);
    assert_int_equal(h(&req, &c->resp), 0);
    json_error_t jerr;
    c->doc = json_loadb(c->resp.body, c->resp.len, 0, &jerr);
    assert_non_null(c->doc);
}

static void done(call_t *c)
{
    json_decref(c->doc);
    drv_resp_free(&c->resp);
}

static const char *err_field(const call_t *c)
{
    return json_string_value(json_object_get(json_object_get(c->doc, "error"), "field"));
}

static void test_handlers_providers(void **state)
{
    drv_catalog_t *cat = *state;
    call_t c;

    run(drv_h_providers_list, cat, NULL, NULL, &c);
    assert_int_equal(c.resp.status, 200);
    assert_int_equal(json_array_size(json_object_get(c.doc, "items")), 7);
    done(&c);

    run(drv_h_providers_list, cat, NULL, (const char *[]){"x=1", NULL}, &c);
    assert_int_equal(c.resp.status, 400);
    done(&c);

    run(drv_h_provider_get, cat, "gcp", NULL, &c);
    assert_int_equal(c.resp.status, 200);
    assert_string_equal(json_string_value(json_object_get(c.doc, "name")), "Google Cloud");
    assert_true(json_is_true(json_object_get(c.doc, "supports_spot")));
    done(&c);

    run(drv_h_provider_get, cat, "azure", NULL, &c);
    assert_int_equal(c.resp.status, 404);
    assert_string_equal(json_string_value(json_object_get(json_object_get(c.doc, "error"), "code")),
                        "not_found");
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(c.doc, "error"),
                                                             "message")), "'azure'"));
    done(&c);

    run(drv_h_regions_list, cat, "oracle", NULL, &c);
    assert_int_equal(c.resp.status, 200);
    json_t *items = json_object_get(c.doc, "items");
    assert_true(json_array_size(items) >= 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "id")),
                        "us-ashburn-1");
    done(&c);

    run(drv_h_regions_list, cat, "nope", NULL, &c);
    assert_int_equal(c.resp.status, 404);
    done(&c);
}

static void test_handlers_instance_types(void **state)
{
    drv_catalog_t *cat = *state;
    call_t c;

    run(drv_h_instance_types_list, cat, NULL, NULL, &c);
    assert_int_equal(c.resp.status, 200);
    assert_int_equal(json_array_size(json_object_get(c.doc, "items")),
                     drv_catalog_query(cat, NULL, NULL, 0));
    done(&c);

    run(drv_h_instance_types_list, cat, NULL,
        (const char *[]){"provider=aws", "region=us-west-2", "gpu_type=a10g", "min_gpus=2",
                         "min_gpu_memory_mib=20000", "max_price_per_hour=6", NULL}, &c);
    assert_int_equal(c.resp.status, 200);
    json_t *items = json_object_get(c.doc, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "id")),
                        "g5.12xlarge");
    done(&c);

    run(drv_h_instance_types_list, cat, NULL, (const char *[]){"provider=gcp", "limit=3", NULL}, &c);
    items = json_object_get(c.doc, "items");
    assert_int_equal(json_array_size(items), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "id")),
                        "g2-standard-4");
    done(&c);

    static const struct { const char *q, *field; } bad[] = {
        {"colour=red", "colour"},          {"provider=azure", "provider"},
        {"region=mars-1", "region"},       {"min_gpus=lots", "min_gpus"},
        {"max_price_per_hour=-1", "max_price_per_hour"}, {"limit=0", "limit"},
        {"min_gpu_memory_mib=1.5", "min_gpu_memory_mib"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run(drv_h_instance_types_list, cat, NULL, (const char *[]){bad[i].q, NULL}, &c);
        assert_int_equal(c.resp.status, 400);
        assert_string_equal(err_field(&c), bad[i].field);
        done(&c);
    }
    /* a region of another provider */
    run(drv_h_instance_types_list, cat, NULL,
        (const char *[]){"provider=aws", "region=us-central1", NULL}, &c);
    assert_int_equal(c.resp.status, 400);
    assert_string_equal(err_field(&c), "region");
    done(&c);

    run(drv_h_instance_type_get, cat, "p4de.24xlarge", NULL, &c);
    assert_int_equal(c.resp.status, 200);
    assert_int_equal(json_integer_value(json_object_get(c.doc, "gpu_memory_mib")), 81920);
    done(&c);

    /* GET /v1/instance-types/{id} shows an entry's sources */
    run(drv_h_instance_type_get, cat, "vcg-l40s-16c-180g-48vram", NULL, &c);
    assert_int_equal(c.resp.status, 200);
    json_t *src = json_object_get(c.doc, "sources");
    assert_non_null(strstr(json_string_value(json_object_get(src, "price")),
                           "https://www.vultr.com/pricing/ (seen "));
    assert_null(json_object_get(src, "spot_price"));   /* vultr has no spot */
    done(&c);

    run(drv_h_instance_type_get, cat, "p9.huge", NULL, &c);
    assert_int_equal(c.resp.status, 404);
    done(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_default_has_providers, setup_default, teardown_default),
        cmocka_unit_test_setup_teardown(test_default_has_required_types, setup_default,
                                        teardown_default),
        cmocka_unit_test(test_parse_minimal),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_sources),
        cmocka_unit_test_setup_teardown(test_default_sources, setup_default, teardown_default),
        cmocka_unit_test_setup_teardown(test_query_filters, setup_default, teardown_default),
        cmocka_unit_test_setup_teardown(test_type_offered, setup_default, teardown_default),
        cmocka_unit_test_setup_teardown(test_to_json, setup_default, teardown_default),
        cmocka_unit_test_setup_teardown(test_handlers_providers, setup_default, teardown_default),
        cmocka_unit_test_setup_teardown(test_handlers_instance_types, setup_default,
                                        teardown_default),
    };
    return cmocka_run_group_tests_name("catalog", tests, NULL, NULL);
}
