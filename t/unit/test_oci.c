/* test_oci.c — unit tests of the oracle provider's pure parts: the OCI
 * request signer (src/provider/oci_sign.c) against the test vectors Oracle
 * publishes, the key fingerprint, and the API client's error classes and
 * list parse (src/provider/oci_api.c).
 *
 * The vectors (key, OCIDs, fingerprint, URLs, body, date, signing strings
 * and signatures) are those of Oracle's "Request Signatures" page
 * (https://docs.oracle.com/en-us/iaas/Content/API/Concepts/signingrequests.htm,
 * "Test Values") as used by Oracle's Go SDK's signer tests
 * (github.com/oracle/oci-go-sdk, common/http_signer_test.go): a 1024-bit
 * test key published for this purpose, not a secret. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "provider/oci_api.h"
#include "provider/oci_sign.h"

static const char *const KEY =
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIICXgIBAAKBgQDCFENGw33yGihy92pDjZQhl0C36rPJj+CvfSC8+q28hxA161QF\n"
    "NUd13wuCTUcq0Qd2qsBe/2hFyc2DCJJg0h1L78+6Z4UMR7EOcpfdUE9Hf3m/hs+F\n"
    "UR45uBJeDK1HSFHD8bHKD6kv8FPGfJTotc+2xjJwoYi+1hqp1fIekaxsyQIDAQAB\n"
    "AoGBAJR8ZkCUvx5kzv+utdl7T5MnordT1TvoXXJGXK7ZZ+UuvMNUCdN2QPc4sBiA\n"
    "QWvLw1cSKt5DsKZ8UETpYPy8pPYnnDEz2dDYiaew9+xEpubyeW2oH4Zx71wqBtOK\n"
    "kqwrXa/pzdpiucRRjk6vE6YY7EBBs/g7uanVpGibOVAEsqH1AkEA7DkjVH28WDUg\n"
    "f1nqvfn2Kj6CT7nIcE3jGJsZZ7zlZmBmHFDONMLUrXR/Zm3pR5m0tCmBqa5RK95u\n"
    "412jt1dPIwJBANJT3v8pnkth48bQo/fKel6uEYyboRtA5/uHuHkZ6FQF7OUkGogc\n"
    "mSJluOdc5t6hI1VsLn0QZEjQZMEOWr+wKSMCQQCC4kXJEsHAve77oP6HtG/IiEn7\n"
    "kpyUXRNvFsDE0czpJJBvL/aRFUJxuRK91jhjC68sA7NsKMGg5OXb5I5Jj36xAkEA\n"
    "gIT7aFOYBFwGgQAQkWNKLvySgKbAZRTeLBacpHMuQdl1DfdntvAyqpAZ0lY0RKmW\n"
    "G6aFKaqQfOXKCyWoUiVknQJAXrlgySFci/2ueKlIE1QqIiLSZ8V8OlpFLRnb1pzI\n"
    "7U1yQXnTAEFYM560yJlzUpOb1V4cScGd365tiSMvxLOvTA==\n"
    "-----END RSA PRIVATE KEY-----\n";
#define TENANCY "ocid1.tenancy.oc1..aaaaaaaaba3pv6wkcr4jqae5f15p2b2m2yt2j6rx32uzr4h25vqstifsfdsq"
#define USER "ocid1.user.oc1..aaaaaaaat5nvwcna5j6aqzjcaty5eqbb6qt2jvpkanghtgdaqedqw3rynjq"
#define FP "20:3b:97:13:55:1c:5b:0d:d3:37:d8:50:4e:c5:3a:34"
#define HOST "iaas.us-phoenix-1.oraclecloud.com"
#define DATE "Thu, 05 Jan 2014 21:31:40 GMT"
#define GET_TARGET                                                                         \
    "/20160918/instances?availabilityDomain=Pjwf%3A%20PHX-AD-1&compartmentId=ocid1.compartment" \
    ".oc1..aaaaaaaam3we6vgnherjq5q2idnccdflvjsnog7mlr6rtdb25gilchfeyjxa&displayName=TeamXInst" \
    "ances&volumeId=ocid1.volume.oc1.phx.abyhqljrgvttnlx73nmrwfaux7kcvzfs3s66izvxf2h4lgvyndsdsn" \
    "oiwr5q"
static const char *const BODY =
    "{\n"
    "    \"compartmentId\": \"ocid1.compartment.oc1..aaaaaaaam3we6vgnherjq5q2idnccdflvjsnog7mlr6rtdb25gilchfeyjxa\",\n"
    "    \"instanceId\": \"ocid1.instance.oc1.phx.abuw4ljrlsfiqw6vzzxb43vyypt4pkodawglp3wqxjqofakrwvou52gb6s5a\",\n"
    "    \"volumeId\": \"ocid1.volume.oc1.phx.abyhqljrgvttnlx73nmrwfaux7kcvzfs3s66izvxf2h4lgvyndsdsnoiwr5q\"\n"
    "}";

static void test_get_vector(void **state)
{
    (void)state;
    char *ss = drv_oci_signing_string("GET", GET_TARGET, HOST, DATE, NULL, NULL, NULL);
    assert_string_equal(ss, "date: " DATE "\n(request-target): get " GET_TARGET "\nhost: " HOST);
    free(ss);
    drv_error_t err = {0};
    char *auth = drv_oci_authorization(KEY, TENANCY "/" USER "/" FP, "GET", GET_TARGET, HOST,
                                       DATE, NULL, NULL, NULL, &err);
    assert_non_null(auth);
    assert_string_equal(auth,
        "Signature version=\"1\",headers=\"date (request-target) host\",keyId=\"" TENANCY "/"
        USER "/" FP "\",algorithm=\"rsa-sha256\",signature=\"GBas7grhyrhSKHP6AVIj/h5/Vp8bd/pe"
        "M79H9Wv8kjoaCivujVXlpbKLjMPeDUhxkFIWtTtLBj3sUzaFj34XE6YZAHc9r2DmE4pMwOAy/kiITcZxa1oH"
        "POeRheC0jP2dqbTll8fmTZVwKZOKHYPtrLJIJQHJjNvxFWeHQjMaR7M=\"");
    free(auth);
}

static void test_post_vector(void **state)
{
    (void)state;
    assert_int_equal(strlen(BODY), 316);
    char sha[45];
    char *ss = drv_oci_signing_string("POST", "/20160918/volumeAttachments", HOST, DATE, BODY,
                                      "application/json", sha);
    assert_string_equal(ss, "date: " DATE "\n(request-target): post /20160918/volumeAttachments\n"
                            "host: " HOST "\ncontent-length: 316\ncontent-type: application/json\n"
                            "x-content-sha256: V9Z20UJTvkvpJ50flBzKE32+6m2zJjweHpDMX/U4Uy0=");
    assert_string_equal(sha, "V9Z20UJTvkvpJ50flBzKE32+6m2zJjweHpDMX/U4Uy0=");
    free(ss);
    drv_error_t err = {0};
    char *auth = drv_oci_authorization(KEY, TENANCY "/" USER "/" FP, "POST",
                                       "/20160918/volumeAttachments", HOST, DATE, BODY,
                                       "application/json", sha, &err);
    assert_non_null(auth);
    assert_string_equal(auth,
        "Signature version=\"1\",headers=\"date (request-target) host content-length "
        "content-type x-content-sha256\",keyId=\"" TENANCY "/" USER "/" FP "\",algorithm=\""
        "rsa-sha256\",signature=\"Mje8vIDPlwIHmD/cTDwRxE7HaAvBg16JnVcsuqaNRim23fFPgQfLoOOxae6W"
        "qKb1uPjYEl0qIdazWaBy/Ml8DRhqlocMwoSXv0fbukP8J5N80LCmzT/FFBvIvTB91XuXI3hYfP9Zt1l7S6ie"
        "VadHUfqBedWH0itrtPJBgKmrWso=\"");
    free(auth);
}

static void test_keys(void **state)
{
    (void)state;
    char fp[48];
    drv_error_t err = {0};
    assert_int_equal(drv_oci_fingerprint(KEY, fp, &err), 0);
    /* as `openssl rsa -pubout -outform DER | openssl md5 -c` prints it (the
     * vectors' keyId fingerprint is a placeholder, not this key's) */
    assert_string_equal(fp, "73:61:a2:21:67:e0:df:be:7e:4b:93:1e:15:98:a5:b7");
    assert_int_equal(drv_oci_fingerprint("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE "
                                         "KEY-----\n", fp, &err), -1);
    assert_string_equal(err.field, "private_key");
    assert_null(drv_oci_authorization("junk", "a/b/c", "GET", "/", "h", DATE, NULL, NULL, NULL,
                                      &err));
    char d[32];
    drv_oci_http_date(1388957500, d);   /* the vectors' date, 2014-01-05 21:31:40 UTC */
    assert_string_equal(d, "Sun, 05 Jan 2014 21:31:40 GMT");   /* a Sunday: the vectors say Thu */
}

static void test_classify(void **state)
{
    (void)state;
    bool next_ad;
    assert_int_equal(drv_oci_classify(500, "InternalError", "Out of host capacity.", &next_ad),
                     DRV_PROV_FALLBACK);
    assert_true(next_ad);
    assert_int_equal(drv_oci_classify(400, "LimitExceeded", "limit vm-gpu-a10-count", &next_ad),
                     DRV_PROV_FALLBACK);
    assert_false(next_ad);
    assert_int_equal(drv_oci_classify(400, "QuotaExceeded", "quota", &next_ad), DRV_PROV_FALLBACK);
    assert_int_equal(drv_oci_classify(429, "TooManyRequests", "", &next_ad), DRV_PROV_RETRY);
    assert_int_equal(drv_oci_classify(500, "InternalError", "boom", &next_ad), DRV_PROV_RETRY);
    assert_false(next_ad);
    assert_int_equal(drv_oci_classify(401, "NotAuthenticated", "", &next_ad), DRV_PROV_GIVE_UP);
    assert_int_equal(drv_oci_classify(404, "NotAuthorizedOrNotFound", "", &next_ad),
                     DRV_PROV_GIVE_UP);
    assert_int_equal(drv_oci_classify(400, "InvalidParameter", "", &next_ad), DRV_PROV_GIVE_UP);
}

static void test_parse_list(void **state)
{
    (void)state;
    const char *page =
        "[{\"id\": \"ocid1.instance.oc1.phx.a\", \"lifecycleState\": \"RUNNING\","
        "  \"availabilityDomain\": \"Uocm:PHX-AD-1\", \"shape\": \"VM.GPU.A10.1\","
        "  \"preemptibleInstanceConfig\": {\"preemptionAction\": {\"type\": \"TERMINATE\"}},"
        "  \"freeformTags\": {\"drover-head\": \"h-1\", \"drover-owner\": \"alice\","
        "                    \"drover-node\": \"gpu-1\"}},"
        " {\"id\": \"b\", \"lifecycleState\": \"TERMINATING\", \"freeformTags\": {\"drover-head\": \"h-1\"}},"
        " {\"id\": \"c\", \"lifecycleState\": \"RUNNING\", \"freeformTags\": {\"drover-head\": \"h-2\"}},"
        " {\"id\": \"d\", \"lifecycleState\": \"PROVISIONING\", \"freeformTags\": {\"drover-head\": \"h-1\"}}]";
    drv_ec2_instance_t *v = NULL;
    size_t n = 0, cap = 0;
    drv_error_t err;
    assert_int_equal(drv_oci_parse_list(page, "h-1", &v, &n, &cap, &err), 0);
    assert_int_equal(n, 3);   /* c is another head's */
    assert_string_equal(v[0].id, "ocid1.instance.oc1.phx.a");
    assert_string_equal(v[0].state, "running");
    assert_string_equal(v[0].zone, "Uocm:PHX-AD-1");
    assert_string_equal(v[0].type, "VM.GPU.A10.1");
    assert_true(v[0].spot);
    assert_string_equal(v[0].owner, "alice");
    assert_string_equal(v[0].node, "gpu-1");
    assert_string_equal(v[1].state, "shutting-down");
    assert_false(v[1].spot);
    assert_string_equal(v[2].state, "pending");
    assert_int_equal(drv_oci_parse_list("{}", "h-1", &v, &n, &cap, &err), -1);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_vector),
        cmocka_unit_test(test_post_vector),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_parse_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
