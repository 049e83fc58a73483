/* test_api.c — the API without HTTP: drv_api_dispatch over a real head
 * (catalog, state, SQLite store in a temp dir). Covers validation rules,
 * cross-object checks, delete rules, PATCH semantics, tokens and scopes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/auth.h"
#include "api/handlers.h"
#include "api/resource.h"
#include "common/util.h"
#include "state/head.h"
#include "state/state.h"
#include "store/store.h"

static drv_head_t H;
static char dir[64];
static drv_principal_t admin = {"admin", true, DRV_SCOPE_ALL, "admin"};
static drv_principal_t alice = {"alice", false, DRV_SCOPE_ALL, "t"};
static drv_principal_t reader = {"alice", false, DRV_SCOPE_READ, "r"};

static int setup(void **state)
{
    drv_error_t err;
    snprintf(dir, sizeof dir, "/tmp/drover-test-api-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(H.data_dir, sizeof H.data_dir, "%s", dir);
    H.catalog = drv_catalog_create_default(&err);
    assert_non_null(H.catalog);
    H.store = drv_store_create(&drv_store_sqlite, dir, &err);
    assert_non_null(H.store);
    H.state = drv_state_create(H.store);
    assert_int_equal(drv_state_load(H.state, &err), 0);
    assert_int_equal(drv_store_start(H.store, &err), 0);
    assert_int_equal(drv_users_bootstrap(&H, &err), 0);
    return 0;
}

static int teardown(void **state)
{
    drv_store_destroy(H.store);
    drv_state_destroy(H.state);
    drv_catalog_destroy(H.catalog);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* Call the API; returns status; *out gets the parsed body (optional). */
static int call(const drv_principal_t *who, const char *method, const char *path_q,
                const char *body, const char *if_match, json_t **out)
{
    drv_req_t req;
    drv_resp_t resp;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    char path[256], qbuf[256];
    snprintf(path, sizeof path, "%s", path_q);
    char *q = strchr(path, '?');
    if (q) {
        *q++ = '\0';
        snprintf(qbuf, sizeof qbuf, "%s", q);
        char *save, *kv = strtok_r(qbuf, "&", &save);
        while (kv && req.n_query < DRV_MAX_QUERY) {
            char *eq = strchr(kv, '=');
            if (eq)
                *eq++ = '\0';
            req.query[req.n_query].key = kv;
            req.query[req.n_query].value = eq ? eq : "";
            req.n_query++;
            kv = strtok_r(NULL, "&", &save);
        }
    }
    req.method = method;
    req.path = path;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    req.if_match = if_match;
    req.head = &H;
    drv_error_t aerr;
    drv_err(&aerr, 401, "unauthenticated", "", "no token");
    drv_api_dispatch(&req, &resp, who, who ? 0 : -1, &aerr);
    if (resp.wait_seq)
        drv_store_wait(H.store, resp.wait_seq);
    if (out)
        *out = json_loadb(resp.body, resp.len, 0, NULL);
    int st = resp.status;
    drv_resp_free(&resp);
    return st;
}

static const char *field_of(json_t *j)
{
    return json_string_value(json_object_get(json_object_get(j, "error"), "field"));
}

#define EXPECT(st, who, m, p, b) assert_int_equal(call(who, m, p, b, NULL, NULL), st)

static void test_cluster_rules(void **state)
{
    json_t *j;
    EXPECT(201, &alice, "POST", "/v1/clusters", "{\"id\":\"c1\",\"provider\":\"local\",\"region\":\"local\"}");
    EXPECT(409, &alice, "POST", "/v1/clusters", "{\"id\":\"c1\",\"provider\":\"local\",\"region\":\"local\"}");
    assert_int_equal(call(&alice, "POST", "/v1/clusters",
                          "{\"id\":\"c2\",\"provider\":\"nimbus\",\"region\":\"x\"}", NULL, &j), 422);
    assert_string_equal(field_of(j), "provider");
    json_decref(j);
    assert_int_equal(call(&alice, "POST", "/v1/clusters",
                          "{\"id\":\"c2\",\"provider\":\"aws\",\"region\":\"mars-1\"}", NULL, &j), 422);
    assert_string_equal(field_of(j), "region");
    json_decref(j);
    assert_int_equal(call(&alice, "PATCH", "/v1/clusters/c1", "{\"region\":\"x\"}", NULL, &j), 422);
    assert_string_equal(field_of(j), "region");
    json_decref(j);
    /* other users' objects are invisible */
    EXPECT(404, &admin, "GET", "/v1/clusters/c1", NULL);
    assert_int_equal(call(&admin, "GET", "/v1/clusters?all_users=true", NULL, NULL, &j), 200);
    assert_true(json_array_size(json_object_get(j, "items")) >= 1);
    json_decref(j);
    EXPECT(403, &alice, "GET", "/v1/clusters?all_users=true", NULL);
    /* read scope: GET yes, writes no */
    EXPECT(200, &reader, "GET", "/v1/clusters/c1", NULL);
    EXPECT(403, &reader, "DELETE", "/v1/clusters/c1", NULL);
    EXPECT(401, NULL, "GET", "/v1/clusters", NULL);
    EXPECT(404, &alice, "GET", "/v1/nothing", NULL);
    EXPECT(405, &alice, "PUT", "/v1/clusters/c1", NULL);
}

static void test_nodepool_rules(void **state)
{
    json_t *j;
    EXPECT(201, &alice, "POST", "/v1/clusters", "{\"id\":\"aws1\",\"provider\":\"aws\",\"region\":\"us-east-1\"}");
    EXPECT(201, &alice, "POST", "/v1/clusters/aws1/nodepools",
           "{\"id\":\"g\",\"instance_types\":[\"g5.xlarge\",\"g6.xlarge\"],\"capacity_type\":\"spot_with_fallback\",\"max_nodes\":4}");
    assert_int_equal(call(&alice, "POST", "/v1/clusters/aws1/nodepools",
                          "{\"id\":\"h\",\"instance_types\":[\"g5.xlarge\",\"a2-highgpu-1g\"]}", NULL, &j), 422);
    assert_string_equal(field_of(j), "instance_types[1]");
    json_decref(j);
    assert_int_equal(call(&alice, "POST", "/v1/clusters/aws1/nodepools",
                          "{\"id\":\"h\",\"instance_types\":[\"g5.xlarge\"],\"min_nodes\":3,\"max_nodes\":2}", NULL, &j), 400);
    assert_string_equal(field_of(j), "max_nodes");
    json_decref(j);
    /* min_nodes alone raises the default max */
    assert_int_equal(call(&alice, "POST", "/v1/clusters/aws1/nodepools",
                          "{\"id\":\"h\",\"instance_types\":[\"g5.xlarge\"],\"min_nodes\":3}", NULL, &j), 201);
    assert_int_equal(json_integer_value(json_object_get(j, "max_nodes")), 3);
    json_decref(j);
    EXPECT(201, &alice, "POST", "/v1/clusters", "{\"id\":\"loc\",\"provider\":\"local\",\"region\":\"local\"}");
    assert_int_equal(call(&alice, "POST", "/v1/clusters/loc/nodepools",
                          "{\"id\":\"s\",\"instance_types\":[\"local-l4\"],\"capacity_type\":\"spot\"}", NULL, &j), 422);
    assert_string_equal(field_of(j), "capacity_type");
    json_decref(j);
    EXPECT(404, &alice, "POST", "/v1/clusters/nope/nodepools", "{\"id\":\"s\",\"instance_types\":[\"local-l4\"]}");
    EXPECT(400, &alice, "POST", "/v1/clusters/loc/nodepools", "{\"id\":\"s\",\"cluster\":\"aws1\",\"instance_types\":[\"local-l4\"]}");
    /* cluster with nodepools: 409, cascade deletes them */
    EXPECT(409, &alice, "DELETE", "/v1/clusters/aws1", NULL);
    EXPECT(200, &alice, "GET", "/v1/clusters/aws1/nodepools/g", NULL);
    EXPECT(200, &alice, "DELETE", "/v1/clusters/aws1?cascade=true", NULL);
    EXPECT(404, &alice, "GET", "/v1/clusters/aws1/nodepools/g", NULL);
    EXPECT(404, &alice, "GET", "/v1/clusters/aws1", NULL);
}

static void test_derived_defaults_follow(void **state)
{
    json_t *j;
    EXPECT(201, &alice, "POST", "/v1/clusters", "{\"id\":\"dd\",\"provider\":\"local\",\"region\":\"local\"}");
    EXPECT(201, &alice, "POST", "/v1/clusters/dd/nodepools", "{\"id\":\"p\",\"instance_types\":[\"local-l4\"]}");
    /* max_nodes was never given: it follows min_nodes */
    assert_int_equal(call(&alice, "PATCH", "/v1/clusters/dd/nodepools/p", "{\"min_nodes\":2}", NULL, &j), 200);
    assert_int_equal(json_integer_value(json_object_get(j, "max_nodes")), 2);
    json_decref(j);
    /* given explicitly, it is kept (and checked) */
    EXPECT(200, &alice, "PATCH", "/v1/clusters/dd/nodepools/p", "{\"max_nodes\":5}");
    assert_int_equal(call(&alice, "PATCH", "/v1/clusters/dd/nodepools/p", "{\"min_nodes\":6}", NULL, &j), 400);
    json_decref(j);
    /* null gives it back to the default */
    assert_int_equal(call(&alice, "PATCH", "/v1/clusters/dd/nodepools/p", "{\"max_nodes\":null,\"min_nodes\":3}", NULL, &j), 200);
    assert_int_equal(json_integer_value(json_object_get(j, "max_nodes")), 3);
    json_decref(j);
    EXPECT(200, &alice, "DELETE", "/v1/clusters/dd?cascade=true", NULL);
}

static void test_deployment_rules(void **state)
{
    json_t *j;
    EXPECT(201, &alice, "POST", "/v1/clusters", "{\"id\":\"d1\",\"provider\":\"local\",\"region\":\"local\"}");
    EXPECT(201, &alice, "POST", "/v1/clusters/d1/nodepools", "{\"id\":\"t4\",\"instance_types\":[\"local-t4\"]}");
    EXPECT(201, &alice, "POST", "/v1/clusters/d1/nodepools", "{\"id\":\"h100\",\"instance_types\":[\"local-h100\"]}");
    EXPECT(201, &alice, "POST", "/v1/models",
           "{\"id\":\"big\",\"runtime\":{\"command\":[\"srv\"]},\"resources\":{\"gpu\":{\"count\":1,\"memory_mib\":40000}}}");
    EXPECT(201, &alice, "POST", "/v1/models",
           "{\"id\":\"small\",\"runtime\":{\"command\":[\"srv\"]},\"resources\":{\"gpu\":{\"count\":1,\"memory_mib\":2048,\"compute_percent\":20}}}");
    /* big fits the H100 pool, not the T4 pool: 422 naming the nodepool */
    assert_int_equal(call(&alice, "POST", "/v1/deployments",
                          "{\"id\":\"x\",\"model\":\"big\",\"nodepools\":[{\"cluster\":\"d1\",\"nodepool\":\"h100\"},{\"cluster\":\"d1\",\"nodepool\":\"t4\"}]}",
                          NULL, &j), 422);
    assert_string_equal(field_of(j), "nodepools[1]");
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(j, "error"), "message")), "d1/t4"));
    json_decref(j);
    assert_int_equal(call(&alice, "POST", "/v1/deployments",
                          "{\"id\":\"x\",\"model\":\"small\",\"nodepools\":[{\"cluster\":\"d1\",\"nodepool\":\"t4\"}],"
                          "\"autoscale\":{\"min_replicas\":3,\"max_replicas\":2}}", NULL, &j), 400);
    assert_string_equal(field_of(j), "autoscale.max_replicas");
    json_decref(j);
    assert_int_equal(call(&alice, "POST", "/v1/deployments",
                          "{\"id\":\"x\",\"model\":\"small\",\"nodepools\":[{\"cluster\":\"d1\",\"nodepool\":\"t4\"}],"
                          "\"autoscale\":{\"scale_down_delay_seconds\":600,\"scale_to_zero_delay_seconds\":60}}", NULL, &j), 400);
    assert_string_equal(field_of(j), "autoscale.scale_to_zero_delay_seconds");
    json_decref(j);
    assert_int_equal(call(&alice, "POST", "/v1/deployments",
                          "{\"id\":\"x\",\"model\":\"ghost\",\"nodepools\":[{\"cluster\":\"d1\",\"nodepool\":\"t4\"}]}", NULL, &j), 422);
    assert_string_equal(field_of(j), "model");
    json_decref(j);
    assert_int_equal(call(&alice, "POST", "/v1/deployments",
                          "{\"id\":\"x\",\"model\":\"small\",\"nodepools\":[{\"cluster\":\"d1\",\"nodepool\":\"t4\",\"priority\":1}],"
                          "\"autoscale\":{\"min_replicas\":0,\"max_replicas\":3}}", NULL, &j), 201);
    assert_int_equal(json_integer_value(json_object_get(j, "resource_version")), 1);
    json_decref(j);
    /* the model may not grow past what the deployment's nodepools hold */
    assert_int_equal(call(&alice, "PATCH", "/v1/models/small",
                          "{\"resources\":{\"gpu\":{\"memory_mib\":20000}}}", NULL, &j), 422);
    json_decref(j);
    /* PATCH: merge, If-Match, no-op keeps resource_version */
    assert_int_equal(call(&alice, "PATCH", "/v1/deployments/x", "{\"autoscale\":{\"max_replicas\":5}}", "\"1\"", &j), 200);
    assert_int_equal(json_integer_value(json_object_get(j, "resource_version")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "autoscale"), "min_replicas")), 0);
    json_decref(j);
    EXPECT(200, &alice, "PATCH", "/v1/deployments/x", "{\"autoscale\":{\"max_replicas\":5}}");
    assert_int_equal(call(&alice, "GET", "/v1/deployments/x", NULL, NULL, &j), 200);
    assert_int_equal(json_integer_value(json_object_get(j, "resource_version")), 2);
    json_decref(j);
    assert_int_equal(call(&alice, "PATCH", "/v1/deployments/x", "{\"enabled\":false}", "1", NULL), 409);
    EXPECT(400, &alice, "PATCH", "/v1/deployments/x", "{\"status\":{}}");
    EXPECT(422, &alice, "PATCH", "/v1/deployments/x", "{\"id\":\"y\"}");
    /* nodepool in use; model in use */
    EXPECT(409, &alice, "DELETE", "/v1/clusters/d1/nodepools/t4", NULL);
    EXPECT(409, &alice, "DELETE", "/v1/clusters/d1?cascade=true", NULL);
    EXPECT(409, &alice, "DELETE", "/v1/models/small", NULL);
    EXPECT(200, &alice, "GET", "/v1/deployments/x", NULL);
    EXPECT(200, &alice, "DELETE", "/v1/models/small?cascade=true", NULL);
    EXPECT(404, &alice, "GET", "/v1/deployments/x", NULL);
    EXPECT(200, &alice, "DELETE", "/v1/clusters/d1/nodepools/t4", NULL);
}

static void test_tokens_and_users(void **state)
{
    json_t *j;
    drv_error_t err;
    drv_principal_t who;
    assert_int_equal(call(&admin, "POST", "/v1/users", "{\"id\":\"bob\"}", NULL, &j), 201);
    const char *secret = json_string_value(json_object_get(json_object_get(j, "token"), "secret"));
    assert_non_null(secret);
    char bob_secret[128], hdr[160];
    snprintf(bob_secret, sizeof bob_secret, "%s", secret);
    json_decref(j);
    snprintf(hdr, sizeof hdr, "Bearer %s", bob_secret);
    assert_int_equal(drv_authenticate(&H, hdr, &who, &err), 0);
    assert_string_equal(who.user, "bob");
    assert_false(who.admin);
    assert_int_equal(who.scopes, DRV_SCOPE_ALL);

    /* a read token for bob, then revoke it */
    drv_principal_t bob = {"bob", false, DRV_SCOPE_ALL, "initial"};
    assert_int_equal(call(&bob, "POST", "/v1/tokens", "{\"id\":\"ro\",\"scopes\":[\"read\"],\"expires_in_seconds\":3600}", NULL, &j), 201);
    snprintf(hdr, sizeof hdr, "Key %s", json_string_value(json_object_get(j, "secret")));
    assert_non_null(json_string_value(json_object_get(j, "expires_at")));
    json_decref(j);
    assert_int_equal(drv_authenticate(&H, hdr, &who, &err), 0);
    assert_int_equal(who.scopes, DRV_SCOPE_READ);
    assert_int_equal(call(&bob, "GET", "/v1/tokens", NULL, NULL, &j), 200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 2);
    char *dump = json_dumps(j, 0);
    assert_null(strstr(dump, "hash"));   /* hashes never leave */
    free(dump);
    json_decref(j);
    EXPECT(200, &bob, "DELETE", "/v1/tokens/ro", NULL);
    assert_int_equal(drv_authenticate(&H, hdr, &who, &err), -1);
    assert_int_equal(err.status, 401);
    assert_non_null(strstr(err.message, "revoked"));
    /* malformed and unknown tokens */
    assert_int_equal(drv_authenticate(&H, "Bearer nope", &who, &err), -1);
    assert_non_null(strstr(err.message, "malformed"));
    assert_int_equal(drv_authenticate(&H, "Bearer drv_0000000000000000000000000000000000000000000000000000000000000000", &who, &err), -1);
    assert_string_equal(err.message, "invalid token");
    assert_int_equal(drv_authenticate(&H, NULL, &who, &err), -1);
    assert_int_equal(drv_authenticate(&H, "Basic abc", &who, &err), -1);
    EXPECT(400, &bob, "POST", "/v1/tokens", "{\"scopes\":[\"root\"]}");
    EXPECT(400, &bob, "POST", "/v1/tokens", "{\"expires_in_seconds\":5}");
    /* members cannot manage users; admins cannot delete themselves */
    EXPECT(403, &bob, "GET", "/v1/users", NULL);
    EXPECT(403, &bob, "POST", "/v1/users", "{\"id\":\"eve\"}");
    EXPECT(404, &bob, "GET", "/v1/users/admin", NULL);
    EXPECT(200, &bob, "GET", "/v1/users/bob", NULL);
    EXPECT(409, &admin, "DELETE", "/v1/users/admin", NULL);
    /* deleting a user with resources: 409, cascade removes all */
    EXPECT(201, &bob, "POST", "/v1/clusters", "{\"id\":\"bc\",\"provider\":\"local\",\"region\":\"local\"}");
    EXPECT(409, &admin, "DELETE", "/v1/users/bob", NULL);
    EXPECT(200, &admin, "DELETE", "/v1/users/bob?cascade=true", NULL);
    snprintf(hdr, sizeof hdr, "Bearer %s", bob_secret);
    assert_int_equal(drv_authenticate(&H, hdr, &who, &err), -1);
    drv_state_rdlock(H.state);
    assert_null(drv_state_get(H.state, DRV_K_CLUSTER, "bob/bc"));
    drv_state_unlock(H.state);
}

static void test_token_hashing(void **state)
{
    char s1[DRV_TOKEN_LEN + 1], s2[DRV_TOKEN_LEN + 1], h1[65], h2[65], h3[65];
    drv_error_t err;
    assert_int_equal(drv_token_mint(s1, h1, &err), 0);
    assert_int_equal(drv_token_mint(s2, h2, &err), 0);
    assert_int_equal(strlen(s1), DRV_TOKEN_LEN);
    assert_int_equal(strncmp(s1, "drv_", 4), 0);
    assert_string_not_equal(s1, s2);
    assert_string_not_equal(h1, h2);
    assert_int_equal(drv_token_hash(s1, h3, &err), 0);
    assert_string_equal(h1, h3);
    assert_true(drv_ct_equal(h1, h3, 64));
    assert_false(drv_ct_equal(h1, h2, 64));
    /* known vector: sha256("abc") */
    drv_sha256_hex("abc", 3, h3);
    assert_string_equal(h3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    s1[10] = 'Z';
    assert_int_equal(drv_token_hash(s1, h3, &err), -1);
}

static void test_pagination(void **state)
{
    char body[128];
    for (int i = 0; i < 25; i++) {
        snprintf(body, sizeof body, "{\"id\":\"p%02d\",\"runtime\":{\"command\":[\"x\"]}}", i);
        EXPECT(201, &admin, "POST", "/v1/models", body);
    }
    char path[256] = "/v1/models?limit=10";
    int seen = 0, pages = 0;
    for (;;) {
        json_t *j;
        assert_int_equal(call(&admin, "GET", path, NULL, NULL, &j), 200);
        seen += (int)json_array_size(json_object_get(j, "items"));
        pages++;
        const char *next = json_string_value(json_object_get(j, "next_page_token"));
        if (!next) {
            json_decref(j);
            break;
        }
        snprintf(path, sizeof path, "/v1/models?limit=10&page_token=%s", next);
        json_decref(j);
    }
    assert_int_equal(seen, 25);
    assert_int_equal(pages, 3);
    EXPECT(400, &admin, "GET", "/v1/models?limit=0", NULL);
    EXPECT(400, &admin, "GET", "/v1/models?bogus=1", NULL);
    EXPECT(400, &admin, "GET", "/v1/models?page_token=alice/x", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_rules),
        cmocka_unit_test(test_nodepool_rules),
        cmocka_unit_test(test_deployment_rules),
        cmocka_unit_test(test_derived_defaults_follow),
        cmocka_unit_test(test_tokens_and_users),
        cmocka_unit_test(test_token_hashing),
        cmocka_unit_test(test_pagination),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
