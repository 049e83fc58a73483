/* test_gce.c — unit tests of the gcp provider's pure parts (src/provider/
 * gce.c, gce_auth.c, gcp.c): base64url, the service-account key's fields,
 * the RS256 JWT grant (its claims, and its signature verified here with
 * the public half of a key made by the test), the error classes, the
 * aggregatedList parse (zones of the region only, states, labels) and the
 * instance names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "provider/gce.h"
#include "provider/gcp.h"

static void test_b64url(void **state)
{
    (void)state;
    char out[16];
    drv_gce_b64url((const unsigned char *)"\xfb\xff", 2, out);
    assert_string_equal(out, "-_8");   /* '+' '/' become '-' '_', no padding */
    drv_gce_b64url((const unsigned char *)"abc", 3, out);
    assert_string_equal(out, "YWJj");
    drv_gce_b64url((const unsigned char *)"a", 1, out);
    assert_string_equal(out, "YQ");
}

static char *make_key(EVP_PKEY **pk)
{
    *pk = EVP_RSA_gen(2048);
    assert_non_null(*pk);
    BIO *b = BIO_new(BIO_s_mem());
    assert_int_equal(PEM_write_bio_PrivateKey(b, *pk, NULL, NULL, 0, NULL, NULL), 1);
    char *pem = NULL;
    long n = BIO_get_mem_data(b, &pem);
    json_t *o = json_pack("{s:s, s:s, s:s%, s:s, s:s, s:s}", "type", "service_account",
                          "project_id", "proj", "private_key", pem, (size_t)n, "private_key_id",
                          "kid1", "client_email", "sa@proj.iam.gserviceaccount.com",
                          "token_uri", "https://oauth2.googleapis.com/token");
    BIO_free(b);
    char *s = json_dumps(o, 0);
    json_decref(o);
    return s;
}

static unsigned char *b64url_decode(const char *s, size_t *len)
{
    size_t n = strlen(s);
    char *t = malloc(n + 4);
    for (size_t i = 0; i < n; i++)
        t[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
    while (n % 4)
        t[n++] = '=';
    t[n] = '\0';
    unsigned char *out = malloc(n);
    int m = EVP_DecodeBlock(out, (unsigned char *)t, (int)n);
    assert_true(m >= 0);
    size_t pad = 0;
    while (n && t[n - 1] == '=') {
        n--;
        pad++;
    }
    *len = (size_t)m - pad;
    free(t);
    return out;
}

static void test_key_and_jwt(void **state)
{
    (void)state;
    EVP_PKEY *pk;
    char *text = make_key(&pk);
    drv_gce_key_t k;
    drv_error_t err;
    assert_int_equal(drv_gce_parse_key(text, &k, &err), 0);
    assert_string_equal(k.client_email, "sa@proj.iam.gserviceaccount.com");
    assert_string_equal(k.project_id, "proj");
    char *jwt = drv_gce_jwt(&k, DRV_GCE_SCOPE, 1700000000, &err);
    assert_non_null(jwt);
    char *d1 = strchr(jwt, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    assert_non_null(d2);
    *d1 = '\0';
    *d2 = '\0';
    size_t hl, cl, sl;
    unsigned char *h = b64url_decode(jwt, &hl), *c = b64url_decode(d1 + 1, &cl),
                  *sig = b64url_decode(d2 + 1, &sl);
    json_t *hj = json_loadb((char *)h, hl, 0, NULL), *cj = json_loadb((char *)c, cl, 0, NULL);
    assert_non_null(hj);
    assert_non_null(cj);
    assert_string_equal(json_string_value(json_object_get(hj, "alg")), "RS256");
    assert_string_equal(json_string_value(json_object_get(hj, "kid")), "kid1");
    assert_string_equal(json_string_value(json_object_get(cj, "iss")), k.client_email);
    assert_string_equal(json_string_value(json_object_get(cj, "aud")), k.token_uri);
    assert_string_equal(json_string_value(json_object_get(cj, "scope")), DRV_GCE_SCOPE);
    assert_int_equal(json_integer_value(json_object_get(cj, "iat")), 1700000000);
    assert_int_equal(json_integer_value(json_object_get(cj, "exp")), 1700000000 + 3600);
    /* the signature verifies over "header.claims" with the public half */
    *d1 = '.';
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pk), 1);
    assert_int_equal(EVP_DigestVerify(md, sig, sl, (unsigned char *)jwt, strlen(jwt)), 1);
    /* and not over anything else */
    jwt[0] ^= 1;
    assert_int_not_equal(EVP_DigestVerify(md, sig, sl, (unsigned char *)jwt, strlen(jwt)), 1);
    EVP_MD_CTX_free(md);
    json_decref(hj);
    json_decref(cj);
    free(h);
    free(c);
    free(sig);
    free(jwt);
    EVP_PKEY_free(pk);
    free(text);
}

static void test_bad_keys(void **state)
{
    (void)state;
    drv_gce_key_t k;
    drv_error_t err;
    assert_int_equal(drv_gce_parse_key("nope", &k, &err), -1);
    assert_int_equal(drv_gce_parse_key("{\"type\":\"authorized_user\"}", &k, &err), -1);
    assert_non_null(strstr(err.message, "service_account"));
    assert_int_equal(drv_gce_parse_key("{\"type\":\"service_account\",\"client_email\":\"a\","
                                       "\"private_key\":\"-----BEGIN PRIVATE KEY-----\\nx\","
                                       "\"token_uri\":\"ftp://x\"}", &k, &err), -1);
    assert_non_null(strstr(err.message, "token_uri"));
    assert_int_equal(drv_gce_parse_key("{\"type\":\"service_account\",\"client_email\":\"a\","
                                       "\"private_key\":\"-----BEGIN PRIVATE KEY-----\\nAAAA\\n"
                                       "-----END PRIVATE KEY-----\\n\",\"token_uri\":\"https://x\"}",
                                       &k, &err), 0);
    assert_null(drv_gce_jwt(&k, DRV_GCE_SCOPE, 1, &err));   /* OpenSSL cannot read it */
    assert_null(strstr(err.message, "AAAA"));                /* never the key itself */
}

static void test_classify(void **state)
{
    (void)state;
    bool nz;
    assert_int_equal(drv_gce_classify(503, "ZONE_RESOURCE_POOL_EXHAUSTED", "", &nz),
                     DRV_PROV_FALLBACK);
    assert_true(nz);
    assert_int_equal(drv_gce_classify(503, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "", &nz),
                     DRV_PROV_FALLBACK);
    assert_true(nz);
    assert_int_equal(drv_gce_classify(403, "QUOTA_EXCEEDED", "Quota 'NVIDIA_L4_GPUS' exceeded.",
                                      &nz), DRV_PROV_FALLBACK);
    assert_false(nz);
    assert_int_equal(drv_gce_classify(403, "QUOTA_EXCEEDED", "Quota 'GPUS_ALL_REGIONS' "
                                      "exceeded. Limit: 0.0 globally.", &nz), DRV_PROV_GIVE_UP);
    assert_int_equal(drv_gce_classify(403, "rateLimitExceeded", "", &nz), DRV_PROV_RETRY);
    assert_int_equal(drv_gce_classify(400, "invalid_grant", "Invalid JWT Signature.", &nz),
                     DRV_PROV_GIVE_UP);
    assert_int_equal(drv_gce_classify(403, "forbidden", "", &nz), DRV_PROV_GIVE_UP);
    assert_int_equal(drv_gce_classify(500, "", "", &nz), DRV_PROV_RETRY);
    assert_int_equal(drv_gce_classify(429, "", "", &nz), DRV_PROV_RETRY);
    assert_int_equal(drv_gce_classify(404, "", "", &nz), DRV_PROV_GIVE_UP);
}

static void test_parse_list(void **state)
{
    (void)state;
    const char *page =
        "{\"items\": {"
        " \"zones/us-central1-a\": {\"instances\": [{\"name\": \"drover-1\","
        "   \"zone\": \"https://x/zones/us-central1-a\", \"status\": \"STAGING\","
        "   \"machineType\": \"https://x/zones/us-central1-a/machineTypes/g2-standard-4\","
        "   \"scheduling\": {\"provisioningModel\": \"SPOT\"},"
        "   \"labels\": {\"drover-head\": \"h-1\", \"drover-owner\": \"alice\","
        "     \"drover-node\": \"gpu-1\"}}]},"
        " \"zones/us-central1-b\": {\"warning\": {\"code\": \"NO_RESULTS_ON_PAGE\"}},"
        " \"zones/us-central10-a\": {\"instances\": [{\"name\": \"other\"}]},"
        " \"zones/europe-west4-a\": {\"instances\": [{\"name\": \"far\"}]}},"
        " \"nextPageToken\": \"tok2\"}";
    drv_ec2_instance_t *v = NULL;
    size_t n = 0, cap = 0;
    char next[32];
    drv_error_t err;
    assert_int_equal(drv_gce_parse_list(page, "us-central1", &v, &n, &cap, next, sizeof next,
                                        &err), 0);
    assert_int_equal(n, 1);   /* us-central10 is not a zone of us-central1 */
    assert_string_equal(next, "tok2");
    assert_string_equal(v[0].id, "drover-1");
    assert_string_equal(v[0].zone, "us-central1-a");
    assert_string_equal(v[0].type, "g2-standard-4");
    assert_string_equal(v[0].state, "pending");
    assert_true(v[0].spot);
    assert_string_equal(v[0].owner, "alice");
    assert_string_equal(v[0].node, "gpu-1");
    assert_int_equal(drv_gce_parse_list("[1]", "us-central1", &v, &n, &cap, next, sizeof next,
                                        &err), -1);
    free(v);
}

static void test_instance_name(void **state)
{
    (void)state;
    char a[32], b[32], c[32];
    drv_gcp_instance_name("h-1", "alice", "gpu-1", a);
    drv_gcp_instance_name("h-1", "alice", "gpu-1", b);
    drv_gcp_instance_name("h-1", "bob", "gpu-1", c);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_int_equal(strlen(a), 23);   /* drover- and 16 hex: a valid RFC 1035 name */
    assert_memory_equal(a, "drover-", 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64url),        cmocka_unit_test(test_key_and_jwt),
        cmocka_unit_test(test_bad_keys),      cmocka_unit_test(test_classify),
        cmocka_unit_test(test_parse_list),    cmocka_unit_test(test_instance_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
