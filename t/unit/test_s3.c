/* test_s3.c — unit tests of S3 presigning and URLs (src/common/sigv4.c's
 * query form, src/objstore/s3.c). The virtual-hosted presigned GET is AWS's
 * own example (S3 API Reference, "Authenticating Requests: Using Query
 * Parameters": AKIAIOSFODNN7EXAMPLE, examplebucket/test.txt,
 * 20130524T000000Z, 86400 s); the header-signed ListObjects is AWS's
 * "GET Bucket (List Objects)" example of the Authorization-header page. The
 * path-style and UploadPart variants were computed with botocore's
 * S3SigV4QueryAuth (an independent implementation that reproduces AWS's
 * example) on the same inputs. Then the bad inputs: each refused with a
 * clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sigv4.h"
#include "objstore/s3.h"

#define AKID "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T0 1369353600LL   /* 2013-05-24T00:00:00Z */
#define AUTHQ "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524" \
              "%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"  \
              "&X-Amz-SignedHeaders=host"

static void aws_example_sigv4(void **state)
{
    drv_sigv4_presign_t p = {
        .method = "GET", .host = "examplebucket.s3.amazonaws.com", .path = "/test.txt",
        .amz_date = "20130524T000000Z", .expires = 86400, .region = "us-east-1",
        .service = "s3", .access_key_id = AKID, .secret_access_key = SECRET,
    };
    char *q = drv_sigv4_presign_query(&p);
    assert_non_null(q);
    assert_string_equal(q, AUTHQ "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c2"
                                 "65957d157751f604d404");
    free(q);
    p.expires = 0;
    assert_null(drv_sigv4_presign_query(&p));
    p.expires = 604801;
    assert_null(drv_sigv4_presign_query(&p));
}

static void aws_example_virtual_hosted(void **state)
{
    drv_error_t e = {0};
    drv_s3_t *s = drv_s3_create("https://s3.amazonaws.com", "us-east-1", "examplebucket", AKID,
                                SECRET, 0, &e);
    assert_non_null(s);
    char *url = drv_s3_presign(s, "GET", "test.txt", NULL, T0, 86400, &e);
    assert_non_null(url);
    assert_string_equal(url, "https://examplebucket.s3.amazonaws.com/test.txt?" AUTHQ
                             "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c2659"
                             "57d157751f604d404");
    free(url);
    drv_s3_destroy(s);
}

static void path_style(void **state)
{
    drv_error_t e = {0};
    drv_s3_t *s = drv_s3_create("https://s3.amazonaws.com/", "us-east-1", "examplebucket", AKID,
                                SECRET, 1, &e);
    assert_non_null(s);
    char *url = drv_s3_presign(s, "GET", "test.txt", NULL, T0, 86400, &e);
    assert_string_equal(url, "https://s3.amazonaws.com/examplebucket/test.txt?" AUTHQ
                             "&X-Amz-Signature=733255ef022bec3f2a8701cd61d4b371f3f28c9f193a1f0"
                             "2279211d48d5193d7");
    free(url);
    /* UploadPart: its own parameters are signed too; the URL's query is the
     * canonical (byte-sorted) one, so they follow the X-Amz-* ones */
    url = drv_s3_presign_part(s, "test.txt", "abc+def", 3, T0, 86400, &e);
    assert_string_equal(url, "https://s3.amazonaws.com/examplebucket/test.txt?" AUTHQ
                             "&partNumber=3&uploadId=abc%2Bdef&X-Amz-Signature=2c1b33e54a489bff"
                             "2a5a5e7d4f077427dda99ffc767f0bee6a966f16f8e82a23");
    free(url);
    drv_s3_destroy(s);
}

static void header_signed_list(void **state)
{
    drv_error_t e = {0};
    drv_s3_t *s = drv_s3_create("https://s3.amazonaws.com", "us-east-1", "examplebucket", AKID,
                                SECRET, 0, &e);
    char host[320], authz[512], *url = NULL;
    assert_int_equal(drv_s3_url(s, "", "max-keys=2&prefix=J", &url, host, sizeof host, &e), 0);
    assert_string_equal(url, "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J");
    assert_string_equal(host, "examplebucket.s3.amazonaws.com");
    assert_int_equal(drv_s3_authorization(s, "GET", "", "max-keys=2&prefix=J", host,
                                          "20130524T000000Z",
                                          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca4959"
                                          "91b7852b855", authz, sizeof authz), 0);
    assert_string_equal(authz, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-"
                               "east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;"
                               "x-amz-date, Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc5"
                               "9db6670ed5711ef69dc6f7");
    free(url);
    drv_s3_destroy(s);
    /* path-style: the bucket itself is /BUCKET, a key /BUCKET/KEY encoded once, '/' kept */
    s = drv_s3_create("http://127.0.0.1:9000", "us-east-1", "b-1", AKID, SECRET, 1, &e);
    assert_int_equal(drv_s3_url(s, "", "list-type=2", &url, host, sizeof host, &e), 0);
    assert_string_equal(url, "http://127.0.0.1:9000/b-1?list-type=2");
    free(url);
    assert_int_equal(drv_s3_url(s, "a b/c+d~é", NULL, &url, host, sizeof host, &e), 0);
    assert_string_equal(url, "http://127.0.0.1:9000/b-1/a%20b/c%2Bd~%C3%A9");
    assert_string_equal(host, "127.0.0.1:9000");
    free(url);
    drv_s3_destroy(s);
}

static void blob_keys(void **state)
{
    const char *hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    char key[DRV_S3_KEY_MAX + 1];
    drv_error_t e = {0};
    assert_int_equal(drv_s3_blob_key("/models/", hex, key, sizeof key, &e), 0);
    assert_string_equal(key, "models/blobs/sha256/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b9"
                             "34ca495991b7852b855");
    assert_int_equal(drv_s3_blob_key("", hex, key, sizeof key, &e), 0);
    assert_string_equal(key, "blobs/sha256/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca4959"
                             "91b7852b855");
    assert_int_equal(drv_s3_blob_key("p", "E3B0", key, sizeof key, &e), -1);
    assert_int_equal(e.status, 400);
    assert_non_null(strstr(e.message, "64 lower-case hex"));
    char upper[65];
    snprintf(upper, sizeof upper, "%s", hex);
    upper[0] = 'E';
    assert_int_equal(drv_s3_blob_key("p", upper, key, sizeof key, &e), -1);
    char long_prefix[1100];
    memset(long_prefix, 'a', sizeof long_prefix - 1);
    long_prefix[sizeof long_prefix - 1] = '\0';
    assert_int_equal(drv_s3_blob_key(long_prefix, hex, key, sizeof key, &e), -1);
}

static void bad_inputs(void **state)
{
    drv_error_t e = {0};
    static const struct {
        const char *endpoint, *region, *bucket, *ak, *sk, *field;
    } bad[] = {
        {"", "us-east-1", "bucket", "a", "s", "endpoint"},
        {"ftp://x", "us-east-1", "bucket", "a", "s", "endpoint"},
        {"http://h/sub/path", "us-east-1", "bucket", "a", "s", "endpoint"},
        {"http://", "us-east-1", "bucket", "a", "s", "endpoint"},
        {"http://h", "", "bucket", "a", "s", "region"},
        {"http://h", "us-east-1", "Bucket", "a", "s", "bucket"},
        {"http://h", "us-east-1", "ab", "a", "s", "bucket"},
        {"http://h", "us-east-1", "-bucket", "a", "s", "bucket"},
        {"http://h", "us-east-1", "bucket", "", "s", "credential"},
        {"http://h", "us-east-1", "bucket", "a", "", "credential"},
        {"http://h", "us-east-1", "bucket", "a b", "s", "credential"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        drv_err_clear(&e);
        assert_null(drv_s3_create(bad[i].endpoint, bad[i].region, bad[i].bucket, bad[i].ak,
                                  bad[i].sk, 1, &e));
        assert_int_equal(e.status, 400);
        assert_string_equal(e.field, bad[i].field);
    }
    drv_s3_t *s = drv_s3_create("http://h:1", "us-east-1", "bucket", "a", "s", 1, &e);
    assert_non_null(s);
    assert_null(drv_s3_presign(s, "POST", "k", NULL, T0, 60, &e));
    assert_string_equal(e.field, "method");
    assert_null(drv_s3_presign(s, "GET", "k", NULL, T0, 0, &e));
    assert_string_equal(e.field, "expires");
    assert_null(drv_s3_presign(s, "GET", "k", NULL, T0, 604801, &e));
    assert_null(drv_s3_presign(s, "GET", "", NULL, T0, 60, &e));
    assert_string_equal(e.field, "key");
    assert_null(drv_s3_presign(s, "GET", "k", "X-Amz-Expires=9", T0, 60, &e));
    assert_string_equal(e.field, "query");
    assert_null(drv_s3_presign_part(s, "k", "id", 0, T0, 60, &e));
    assert_string_equal(e.field, "part");
    assert_null(drv_s3_presign_part(s, "k", "id", 10001, T0, 60, &e));
    assert_null(drv_s3_presign_part(s, "k", "", 1, T0, 60, &e));
    assert_string_equal(e.field, "upload_id");
    char *long_key = malloc(DRV_S3_KEY_MAX + 2);
    memset(long_key, 'k', DRV_S3_KEY_MAX + 1);
    long_key[DRV_S3_KEY_MAX + 1] = '\0';
    assert_null(drv_s3_presign(s, "GET", long_key, NULL, T0, 60, &e));
    assert_string_equal(e.field, "key");
    free(long_key);
    drv_s3_destroy(s);
    drv_s3_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(aws_example_sigv4),
        cmocka_unit_test(aws_example_virtual_hosted),
        cmocka_unit_test(path_style),
        cmocka_unit_test(header_signed_list),
        cmocka_unit_test(blob_keys),
        cmocka_unit_test(bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
