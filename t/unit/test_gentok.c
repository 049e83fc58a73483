/* test_gentok.c — the gateway's generated-token scanner (gateway/gentok.h):
 * OpenAI streams (chunk events, [DONE], the usage chunk, CRLF, several data
 * lines in one event, comments), JSON answers with and without a usage,
 * every answer split at every byte and fed a byte at a time, garbage, and
 * numbers that are no count (huge, fractions, escaped keys); the
 * deployment's totals and their units. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gentok.h"

static int64_t count(bool sse, const char *body)
{
    drv_gw_gen_t s;
    drv_gw_gen_init(&s, sse);
    drv_gw_gen_feed(&s, body, strlen(body));
    return drv_gw_gen_count(&s);
}

/* The count of body, fed whole, split in two at every byte, and a byte at
 * a time: all the same (returned). */
static int64_t count_split(bool sse, const char *body)
{
    size_t n = strlen(body);
    int64_t whole = count(sse, body);
    for (size_t cut = 0; cut <= n; cut++) {
        drv_gw_gen_t s;
        drv_gw_gen_init(&s, sse);
        drv_gw_gen_feed(&s, body, cut);
        drv_gw_gen_feed(&s, body + cut, n - cut);
        if (drv_gw_gen_count(&s) != whole)
            fail_msg("split at %zu of %zu: %lld, whole %lld", cut, n,
                     (long long)drv_gw_gen_count(&s), (long long)whole);
    }
    drv_gw_gen_t s;
    drv_gw_gen_init(&s, sse);
    for (size_t i = 0; i < n; i++)
        drv_gw_gen_feed(&s, body + i, 1);
    assert_int_equal(drv_gw_gen_count(&s), whole);
    return whole;
}

/* drover-demo-model's stream of three words (src/demo/demo_model.c), with
 * its usage chunk when usage is set. */
static const char *demo_stream(bool usage)
{
    static char buf[4096];
    const char *head = "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
                       "\"model\":\"web\",\"choices\":[";
    snprintf(buf, sizeof buf,
             "data: %s{\"delta\":{\"role\":\"assistant\",\"content\":\"alpha\"},\"index\":0,"
             "\"logprobs\":null,\"finish_reason\":null}]}\n\n"
             "data: %s{\"delta\":{\"content\":\" beta\"},\"index\":0,\"logprobs\":null,"
             "\"finish_reason\":null}]}\n\n"
             "data: %s{\"delta\":{\"content\":\" gamma\"},\"index\":0,\"logprobs\":null,"
             "\"finish_reason\":null}]}\n\n"
             "data: %s{\"delta\":{},\"index\":0,\"logprobs\":null,\"finish_reason\":\"length\"}]}"
             "\n\n"
             "%s"
             "data: [DONE]\n\n",
             head, head, head, head,
             usage ? "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
                     "\"created\":1,\"model\":\"web\",\"choices\":[],\"usage\":{"
                     "\"prompt_tokens\":1,\"completion_tokens\":3,\"total_tokens\":4}}\n\n"
                   : "");
    return buf;
}

static void test_stream_events(void **state)
{
    (void)state;
    /* four chunks (three words and the finish reason), [DONE] not one */
    assert_int_equal(count_split(true, demo_stream(false)), 4);
    /* the usage wins */
    assert_int_equal(count_split(true, demo_stream(true)), 3);
    /* CRLF and CR line ends, no space after the colon, comments and other fields */
    assert_int_equal(count_split(true, ": keep-alive\r\n\r\nevent: x\r\ndata:{\"a\":1}\r\n\r\n"
                                       "id: 7\rdata: {}\r\rdata:[DONE]\r\n\r\n"),
                     2);
    /* several data lines make one event */
    assert_int_equal(count_split(true, "data: {\"a\":\ndata: 1}\n\ndata: x\n\n"), 2);
    /* values that only begin like [DONE] are chunks; empty ones are not */
    assert_int_equal(count_split(true, "data: [DO\n\ndata: [DONE]x\n\ndata:\n\ndata: \n\n"), 2);
    /* not data lines: "data" at no line's start, other names */
    assert_int_equal(count_split(true, "xdata: 1\n\n datum: 1\n\ndat\n\n"), 0);
    /* a stream cut short: the chunks it had */
    assert_int_equal(count_split(true, "data: {\"a\":1}\n\ndata: {\"a\""), 2);
    /* not a stream: events are not counted */
    assert_int_equal(count_split(false, demo_stream(false)), 0);
}

static void test_json_usage(void **state)
{
    (void)state;
    const char *ans =
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"web\","
        "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"a b c\"},"
        "\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":12,"
        "\"completion_tokens\":  \n 42 ,\"total_tokens\":54,\"completion_tokens_details\":"
        "{\"reasoning_tokens\":0}}}";
    assert_int_equal(count_split(false, ans), 42);
    assert_int_equal(count_split(true, ans), 42);   /* a usage counts in a stream too */
    /* no usage: unknown */
    assert_int_equal(count_split(false, "{\"choices\":[{\"text\":\"x\"}]}"), 0);
    /* the last of several wins (a running usage in every chunk) */
    assert_int_equal(count_split(true, "data: {\"usage\":{\"completion_tokens\":3}}\n\n"
                                       "data: {\"usage\":{\"completion_tokens\":7}}\n\n"),
                     7);
    /* the key only: in a string's content its quotes are escaped */
    assert_int_equal(count_split(false, "{\"content\":\"\\\"completion_tokens\\\": 5\"}"), 0);
    assert_int_equal(count_split(false, "{\"completion_tokens_details\": 5}"), 0);
    assert_int_equal(count_split(false, "{\"xcompletion_tokens\": 5, \"\"completion_tokens\": 6}"),
                     6);
    /* no number: null, a string, a sign, a fraction, an exponent */
    assert_int_equal(count_split(false, "{\"completion_tokens\": null}"), 0);
    assert_int_equal(count_split(false, "{\"completion_tokens\": \"5\"}"), 0);
    assert_int_equal(count_split(false, "{\"completion_tokens\": -5}"), 0);
    assert_int_equal(count_split(false, "{\"completion_tokens\": 5.5}"), 0);
    assert_int_equal(count_split(false, "{\"completion_tokens\": 5e3}"), 0);
    assert_int_equal(count_split(false, "{\"completion_tokens\" 5}"), 0);
    /* a number the body does not end: no count yet */
    assert_int_equal(count_split(false, "{\"completion_tokens\": 5"), 0);
    /* a zero is unknown too */
    assert_int_equal(count_split(false, "{\"completion_tokens\":0}"), 0);
}

static void test_huge_numbers(void **state)
{
    (void)state;
    char b[256];
    snprintf(b, sizeof b, "{\"completion_tokens\":%d}", DRV_GW_GEN_MAX);
    assert_int_equal(count_split(false, b), DRV_GW_GEN_MAX);
    snprintf(b, sizeof b, "{\"completion_tokens\":%d}", DRV_GW_GEN_MAX + 1);
    assert_int_equal(count_split(false, b), 0);
    /* far past int64: no count, no overflow; an earlier usage stands */
    assert_int_equal(count_split(false, "{\"completion_tokens\":9}{\"completion_tokens\":"
                                        "99999999999999999999999999999999999999999999}"),
                     9);
    /* a stream's event count is not bounded by the usage's limit: 3000 chunks */
    size_t n = 3000 * 13;
    char *s = malloc(n + 1);
    assert_non_null(s);
    for (int i = 0; i < 3000; i++)
        memcpy(s + i * 13, "data: {\"x\"}\n\n", 13);
    s[n] = '\0';
    assert_int_equal(count(true, s), 3000);
    free(s);
}

static void test_garbage(void **state)
{
    (void)state;
    /* random bytes, and random bytes around the key's pieces: never a
     * crash, and fed whole or split the same */
    static const char *const bits[] = {"\"", "completion_tokens", "\"completion_tokens\"", ":",
                                       " ", "7", "\n", "\r", "data:", " [DONE]", "{", "}", "\\"};
    uint64_t x = 88172645463325252ULL;
    char buf[512];
    for (int round = 0; round < 300; round++) {
        size_t len = 0;
        while (len < 400) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if (x % 3 == 0) {
                const char *b = bits[(x >> 8) % (sizeof bits / sizeof *bits)];
                size_t bl = strlen(b);
                memcpy(buf + len, b, bl);
                len += bl;
            } else {
                char c = (char)(x >> 16);
                buf[len++] = c ? c : 'z';
            }
        }
        buf[len] = '\0';
        int64_t a = count_split(round % 2 == 0, buf);
        assert_true(a >= 0 && a <= DRV_GW_GEN_MAX);
    }
}

/* The deployment's totals (drv_gw_gen_totals_t): answers with a count,
 * their tokens, and the batch points of those with at least 2 tokens, a
 * batch and a decode time, in gentok.h's integer units. */
static void test_totals(void **state)
{
    (void)state;
    static drv_gw_gen_totals_t t;   /* zeroed */
    drv_gw_gen_served(&t, 0, 3, 1000000);    /* unknown count: nothing */
    drv_gw_gen_served(&t, -1, 3, 1000000);
    assert_int_equal(t.n, 0);
    assert_int_equal(t.tokens, 0);
    drv_gw_gen_served(&t, 1, 3, 1000000);    /* one token: counted, no point */
    drv_gw_gen_served(&t, 10, 0, 1000000);   /* no batch: no point */
    drv_gw_gen_served(&t, 10, 2, 0);         /* no decode time: no point */
    drv_gw_gen_served(&t, 10, NAN, 5);
    assert_int_equal(t.n, 4);
    assert_int_equal(t.tokens, 31);
    assert_int_equal(t.bn, 0);
    /* batch 3.5 (x 2.5), 100 tokens in 2 s (y 0.02 s) */
    drv_gw_gen_served(&t, 100, 3.5, 2000000);
    /* batch 1 (x 0), 4 tokens in 0.1 s (y 0.025 s) */
    drv_gw_gen_served(&t, 4, 1, 100000);
    assert_int_equal(t.n, 6);
    assert_int_equal(t.tokens, 135);
    assert_int_equal(t.bn, 2);
    assert_int_equal(t.bx_milli, 2500);
    assert_int_equal(t.bxx_centi, 625);
    assert_int_equal(t.by_10ns, 2000000 + 2500000);
    assert_int_equal(t.bxy_us, 50000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_events),
        cmocka_unit_test(test_json_usage),
        cmocka_unit_test(test_huge_numbers),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_totals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
