/* test_sigv4.c — unit tests of src/common/sigv4.c against AWS's published
 * Signature Version 4 test suite (credentials AKIDEXAMPLE /
 * wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, region us-east-1, service
 * "service", 20150830T123600Z): get-vanilla, get-vanilla-query-order-key-case
 * and post-x-www-form-urlencoded, whose expected signatures are AWS's, not
 * computed here; plus the EC2 answer parsers and error classes of
 * src/provider/ec2.c and the user-data script of src/provider/aws.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider/aws.h"
#include "provider/ec2.h"
#include "common/sigv4.h"

#define AKID "AKIDEXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SCOPE "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "

static drv_sigv4_req_t suite(const char *method, const char *query)
{
    drv_sigv4_req_t r = {
        .method = method, .path = "/", .query = query, .host = "example.amazonaws.com",
        .amz_date = "20150830T123600Z", .region = "us-east-1", .service = "service",
        .access_key_id = AKID, .secret_access_key = SECRET,
    };
    return r;
}

static void get_vanilla(void **state)
{
    drv_sigv4_req_t r = suite("GET", "");
    char out[512];
    assert_int_equal(drv_sigv4_authorization(&r, out, sizeof out), 0);
    assert_string_equal(out, "AWS4-HMAC-SHA256 " SCOPE "SignedHeaders=host;x-amz-date, "
                             "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d"
                             "763fbf31");
}

static void get_vanilla_query_order_key_case(void **state)
{
    drv_sigv4_req_t r = suite("GET", "Param2=value2&Param1=value1");
    char out[512];
    assert_int_equal(drv_sigv4_authorization(&r, out, sizeof out), 0);
    assert_non_null(strstr(out, "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3"
                                "219ec94cdf2500"));
    char *creq = drv_sigv4_canonical_request(&r);
    assert_non_null(strstr(creq, "\nParam1=value1&Param2=value2\n"));
    free(creq);
}

static void post_x_www_form_urlencoded(void **state)
{
    drv_sigv4_req_t r = suite("POST", "");
    r.content_type = "application/x-www-form-urlencoded";
    r.body = "Param1=value1";
    r.body_len = strlen("Param1=value1");
    char out[512];
    assert_int_equal(drv_sigv4_authorization(&r, out, sizeof out), 0);
    assert_string_equal(out, "AWS4-HMAC-SHA256 " SCOPE
                             "SignedHeaders=content-type;host;x-amz-date, "
                             "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0"
                             "fe09473a");
    /* the canonical request as the suite publishes it (.creq) */
    char *creq = drv_sigv4_canonical_request(&r);
    assert_string_equal(creq, "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\n"
                              "host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
                              "content-type;host;x-amz-date\n"
                              "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
    free(creq);
}

static void bad_inputs(void **state)
{
    drv_sigv4_req_t r = suite("GET", "");
    char small[16];
    assert_int_equal(drv_sigv4_authorization(&r, small, sizeof small), -1);
    r.amz_date = "2015";
    char out[512];
    assert_int_equal(drv_sigv4_authorization(&r, out, sizeof out), -1);
    r = suite("GET", "");
    r.secret_access_key = NULL;
    assert_int_equal(drv_sigv4_authorization(&r, out, sizeof out), -1);
    char d[17];
    drv_sigv4_amz_date(1440938160, d);
    assert_string_equal(d, "20150830T123600Z");
}

static const char describe_page[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
    "<requestId>r1</requestId><reservationSet><item><reservationId>r-1</reservationId>"
    "<instancesSet><item><instanceId>i-0aaa</instanceId><instanceType>g4dn.xlarge"
    "</instanceType><instanceState><code>16</code><name>running</name></instanceState>"
    "<launchTime>2026-11-29T20:00:00.000Z</launchTime><instanceLifecycle>spot"
    "</instanceLifecycle><networkInterfaceSet><item><attachment><status>attached</status>"
    "</attachment></item></networkInterfaceSet><tagSet><item><key>drover:node</key>"
    "<value>gpu-abc123</value></item><item><key>drover:owner</key><value>admin</value></item>"
    "<item><key>Name</key><value>x</value></item></tagSet></item>"
    "<item><instanceId>i-0bbb</instanceId><instanceState><name>terminated</name>"
    "</instanceState></item></instancesSet></item></reservationSet>"
    "<nextToken>page-2</nextToken></DescribeInstancesResponse>";

static void parse_describe(void **state)
{
    drv_ec2_instance_t *v = NULL;
    size_t n = 0, cap = 0;
    char next[64];
    drv_error_t err = {0};
    assert_int_equal(drv_ec2_parse_instances(describe_page, strlen(describe_page), &v, &n, &cap,
                                             next, sizeof next, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(next, "page-2");
    assert_string_equal(v[0].id, "i-0aaa");
    assert_string_equal(v[0].state, "running");
    assert_string_equal(v[0].type, "g4dn.xlarge");
    assert_true(v[0].spot);
    assert_string_equal(v[0].node, "gpu-abc123");
    assert_string_equal(v[0].owner, "admin");
    assert_true(v[0].launched > 1700000000);
    assert_string_equal(v[1].state, "terminated");
    assert_false(v[1].spot);
    free(v);
    v = NULL, n = 0, cap = 0;
    assert_int_equal(drv_ec2_parse_instances("<not xml", 8, &v, &n, &cap, next, sizeof next,
                                             &err), -1);
    assert_int_equal(n, 0);
    free(v);
}

static void errors(void **state)
{
    const char *xml = "<?xml version=\"1.0\"?><Response><Errors><Error><Code>"
                      "InsufficientInstanceCapacity</Code><Message>no g4dn</Message></Error>"
                      "</Errors><RequestID>x</RequestID></Response>";
    char code[64], msg[128];
    assert_int_equal(drv_ec2_parse_error(xml, strlen(xml), code, sizeof code, msg, sizeof msg), 0);
    assert_string_equal(code, "InsufficientInstanceCapacity");
    assert_string_equal(msg, "no g4dn");
    assert_int_equal(drv_ec2_classify(500, code), DRV_PROV_FALLBACK);
    assert_int_equal(drv_ec2_parse_error("junk", 4, code, sizeof code, msg, sizeof msg), -1);
    assert_int_equal(drv_ec2_classify(400, "SpotMaxPriceTooLow"), DRV_PROV_FALLBACK);
    assert_int_equal(drv_ec2_classify(400, "MaxSpotInstanceCountExceeded"), DRV_PROV_FALLBACK);
    assert_int_equal(drv_ec2_classify(401, "AuthFailure"), DRV_PROV_GIVE_UP);
    assert_int_equal(drv_ec2_classify(400, "InvalidAMIID.NotFound"), DRV_PROV_GIVE_UP);
    assert_int_equal(drv_ec2_classify(503, "RequestLimitExceeded"), DRV_PROV_RETRY);
    assert_int_equal(drv_ec2_classify(502, "HTTP502"), DRV_PROV_RETRY);
    assert_int_equal(drv_ec2_classify(0, "HTTP0"), DRV_PROV_RETRY);
    char enc[64];
    assert_int_equal(drv_ec2_encode("a b/c~=+", enc, sizeof enc), 0);
    assert_string_equal(enc, "a%20b%2Fc~%3D%2B");
    assert_int_equal(drv_ec2_encode("abcdef", enc, 4), -1);
}

static void user_data(void **state)
{
    drv_node_launch_t l;
    memset(&l, 0, sizeof l);
    snprintf(l.node_id, sizeof l.node_id, "gpu-abc123");
    snprintf(l.cluster, sizeof l.cluster, "c1");
    snprintf(l.nodepool, sizeof l.nodepool, "gpu");
    snprintf(l.join_token, sizeof l.join_token, "drvj_secret");
    snprintf(l.cloud.head_url, sizeof l.cloud.head_url, "http://10.0.0.1:7480");
    char *s = drv_aws_user_data(&l);
    assert_non_null(s);
    assert_non_null(strstr(s, "#!/bin/sh\n"));
    assert_non_null(strstr(s, "exec drover-agent --server 'http://10.0.0.1:7480' "
                              "--join-token 'drvj_secret'"));
    assert_null(strstr(s, "apt-get"));
    free(s);
    snprintf(l.cloud.head_url, sizeof l.cloud.head_url, "http://x'; rm -rf /; '");
    assert_null(drv_aws_user_data(&l));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(get_vanilla),
        cmocka_unit_test(get_vanilla_query_order_key_case),
        cmocka_unit_test(post_x_www_form_urlencoded),
        cmocka_unit_test(bad_inputs),
        cmocka_unit_test(parse_describe),
        cmocka_unit_test(errors),
        cmocka_unit_test(user_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
