/* fuzz_ec2_xml.c — libFuzzer target: the EC2 Query API's XML answers as
 * the aws provider reads them (provider/ec2.c: DescribeInstances and
 * RunInstances pages, error answers). The input is the answer's body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider/ec2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *xml = (const char *)data;
    drv_ec2_instance_t *out = NULL;
    size_t n = 0, cap = 0;
    char next[256];
    drv_error_t err;
    if (drv_ec2_parse_instances(xml, size, &out, &n, &cap, next, sizeof next, &err) == 0) {
        if (n > cap || strnlen(next, sizeof next) == sizeof next)
            abort();
        for (size_t i = 0; i < n; i++)
            if (strnlen(out[i].id, sizeof out[i].id) == sizeof out[i].id)
                abort();
    }
    free(out);
    char code[64], msg[256];
    if (drv_ec2_parse_error(xml, size, code, sizeof code, msg, sizeof msg) == 0) {
        if (strnlen(code, sizeof code) == sizeof code || strnlen(msg, sizeof msg) == sizeof msg)
            abort();
        drv_ec2_classify(400, code);
    }
    return 0;
}
