/* test_vultr.c — unit tests of the vultr provider's pure parts
 * (src/provider/vultr_api.c): the error classes and the instance list
 * parse (region filter, drover's tags, states, the next cursor). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "provider/vultr_api.h"

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(drv_vultr_classify(429, "Rate limit exceeded."), DRV_PROV_RETRY);
    assert_int_equal(drv_vultr_classify(503, ""), DRV_PROV_RETRY);
    assert_int_equal(drv_vultr_classify(0, NULL), DRV_PROV_RETRY);
    assert_int_equal(drv_vultr_classify(400, "Plan is not available in the selected region."),
                     DRV_PROV_FALLBACK);
    assert_int_equal(drv_vultr_classify(401, "Invalid API token."), DRV_PROV_GIVE_UP);
    assert_int_equal(drv_vultr_classify(400, "Invalid region."), DRV_PROV_GIVE_UP);
}

static void test_parse_list(void **state)
{
    (void)state;
    const char *page =
        "{\"instances\": ["
        " {\"id\": \"6c6f2c1e-1111-4222-8333-444455556666\", \"region\": \"ewr\","
        "  \"plan\": \"vcg-a16-2c-8g-2vram\", \"status\": \"active\", \"power_status\": \"running\","
        "  \"tags\": [\"drover-head=h-1\", \"drover-owner=alice\", \"drover-node=gpu-1\", \"x\"]},"
        " {\"id\": \"b\", \"region\": \"ewr\", \"status\": \"pending\", \"tags\": []},"
        " {\"id\": \"c\", \"region\": \"ams\", \"status\": \"active\"}],"
        " \"meta\": {\"total\": 3, \"links\": {\"next\": \"cur2\", \"prev\": \"\"}}}";
    drv_ec2_instance_t *v = NULL;
    size_t n = 0, cap = 0;
    char next[32];
    drv_error_t err;
    assert_int_equal(drv_vultr_parse_list(page, "ewr", &v, &n, &cap, next, sizeof next, &err), 0);
    assert_int_equal(n, 2);   /* ams is another region */
    assert_string_equal(next, "cur2");
    assert_string_equal(v[0].id, "6c6f2c1e-1111-4222-8333-444455556666");   /* 36 chars kept */
    assert_string_equal(v[0].state, "running");
    assert_string_equal(v[0].head, "h-1");
    assert_string_equal(v[0].owner, "alice");
    assert_string_equal(v[0].node, "gpu-1");
    assert_string_equal(v[1].state, "pending");
    assert_int_equal(drv_vultr_parse_list("{}", "ewr", &v, &n, &cap, next, sizeof next, &err), -1);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_parse_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
