/* test_sha256.c — src/common/sha256.c against the FIPS 180-2 appendix B
 * vectors ("abc", the 448-bit two-block message, a million 'a's), the empty
 * message, every split of a message across update() calls, lengths around
 * the padding boundary (55/56/63/64 bytes) checked against each other one
 * byte at a time, and drv_sha256_hex / drv_random_hex / drv_ct_equal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "common/util.h"

static void hex(const unsigned char md[32], char out[65])
{
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", md[i]);
}

static void check(const char *msg, size_t len, const char *want)
{
    unsigned char md[32];
    char got[65];
    drv_sha256(msg, len, md);
    hex(md, got);
    assert_string_equal(got, want);
}

static void test_fips_vectors(void **st)
{
    check("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* a million 'a's, fed in uneven pieces */
    static char a[1000];
    memset(a, 'a', sizeof a);
    drv_sha256_t c;
    drv_sha256_init(&c);
    size_t left = 1000000, piece = 1;
    while (left) {
        size_t n = piece < left ? piece : left;
        if (n > sizeof a)
            n = sizeof a;
        drv_sha256_update(&c, a, n);
        left -= n;
        piece = piece * 7 % 997 + 1;
    }
    unsigned char md[32];
    char got[65];
    drv_sha256_final(&c, md);
    hex(md, got);
    assert_string_equal(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_splits_and_padding(void **st)
{
    /* the FIPS 180-2 896-bit message: every split point gives the same digest */
    const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                    "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    size_t n = strlen(m);
    check(m, n, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    unsigned char one[32], two[32];
    drv_sha256(m, n, one);
    for (size_t cut = 0; cut <= n; cut++) {
        drv_sha256_t c;
        drv_sha256_init(&c);
        drv_sha256_update(&c, m, cut);
        drv_sha256_update(&c, m + cut, n - cut);
        drv_sha256_final(&c, two);
        assert_memory_equal(one, two, 32);
    }
    /* lengths around the 56-byte padding boundary, byte by byte vs one call */
    static const size_t lens[] = {55, 56, 57, 63, 64, 65, 119, 120, 128};
    char buf[128];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (char)(i * 31 + 7);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        drv_sha256_t c;
        drv_sha256_init(&c);
        for (size_t i = 0; i < lens[k]; i++)
            drv_sha256_update(&c, buf + i, 1);
        drv_sha256_final(&c, two);
        drv_sha256(buf, lens[k], one);
        assert_memory_equal(one, two, 32);
    }
    /* 55 and 56 bytes differ (the padding is not confused) */
    drv_sha256(buf, 55, one);
    drv_sha256(buf, 56, two);
    assert_memory_not_equal(one, two, 32);
}

/* The SHA-NI path (when this CPU has it) and the portable one agree on
 * every length from 0 to 300 bytes and on a large buffer fed unevenly. */
static void test_impls_agree(void **st)
{
    size_t big = 1 << 20;
    unsigned char *buf = malloc(big);
    assert_non_null(buf);
    for (size_t i = 0; i < big; i++)
        buf[i] = (unsigned char)(i * 2654435761u >> 13);
    unsigned char a[32], b[32];
    for (size_t len = 0; len <= 300; len++) {
        drv_sha256_set_generic(true);
        drv_sha256(buf, len, a);
        drv_sha256_set_generic(false);
        drv_sha256(buf, len, b);
        assert_memory_equal(a, b, 32);
    }
    drv_sha256_set_generic(true);
    assert_string_equal(drv_sha256_impl(), "generic");
    drv_sha256(buf, big, a);
    drv_sha256_set_generic(false);
    drv_sha256_t c;
    drv_sha256_init(&c);
    for (size_t off = 0, step = 1; off < big; off += step, step = step * 3 + 1)
        drv_sha256_update(&c, buf + off, off + step > big ? big - off : step);
    drv_sha256_final(&c, b);
    assert_memory_equal(a, b, 32);
    print_message("sha256 implementation: %s\n", drv_sha256_impl());
    free(buf);
}

static void test_util_helpers(void **st)
{
    char out[65];
    drv_sha256_hex("abc", 3, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    char r1[129], r2[129];
    assert_int_equal(drv_random_hex(64, r1), 0);
    assert_int_equal(drv_random_hex(64, r2), 0);
    assert_int_equal(strlen(r1), 128);
    assert_string_not_equal(r1, r2);
    assert_int_equal(strspn(r1, "0123456789abcdef"), 128);
    assert_int_equal(drv_random_hex(65, r1), -1);   /* over the limit */
    assert_true(drv_ct_equal("secret-a", "secret-a", 8));
    assert_false(drv_ct_equal("secret-a", "secret-b", 8));
    assert_false(drv_ct_equal("Xecret-a", "secret-a", 8));
    assert_true(drv_ct_equal("a", "b", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),
        cmocka_unit_test(test_splits_and_padding),
        cmocka_unit_test(test_impls_agree),
        cmocka_unit_test(test_util_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
