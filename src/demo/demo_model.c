/* demo_model.c — drover-demo-model: a small model server that follows the
 * replica contract (design §6). Used by the quick start and the tests.
 *
 *   GET  /health               200 once the weights are loaded, 503 before
 *   POST /predict              {"inputs": "text" | ["text", ...]} -> outputs
 *   POST /v1/chat/completions  OpenAI-style, deterministic; "stream": true -> SSE
 *   POST /v1/completions       the same for a "prompt" (OpenAI's legacy completions)
 *   GET  /metrics              Prometheus text with vLLM's load gauges (as the
 *                              vllm preset's server has them): requests running
 *                              (the predictions in progress), waiting (0) and,
 *                              with --kv-cache-usage F, the KV-cache usage F;
 *                              with --metrics-port P or METRICS_PORT (a server such as
 *                              Triton with a metrics port of its own) on P
 *                              only, the main port answering it 404
 *
 * The OpenAI answers carry id, object, created, model, choices (with
 * finish_reason "length": the demo always writes max_tokens words) and
 * usage; a stream's chunks carry the same id, created and model, the last
 * one an empty delta with the finish_reason (then, with
 * stream_options.include_usage, one with the usage), then "data: [DONE]".
 * Errors are OpenAI-shaped: {"error":{"message","type","param","code"}}.
 *
 * The weights are a real file (DROVER_MODEL_DIR/weights.bin or --weights),
 * created deterministically when missing, then read and checksummed, so
 * load time is real and grows with --weights-mib. A prediction hashes the
 * input into an embedding and runs it through --layers dense tanh layers
 * taken from the weights: deterministic, with a cost that scales.
 *
 * Threads: libmicrohttpd's pool (two threads, shared by /health and the
 * predictions, computed in the pool thread) serves requests; a prediction
 * stops when its client has closed the connection (the gateway cancelling),
 * so an abandoned request does not keep a thread from /health. The weights
 * are loaded by main before "ready" is set and are read-only afterwards.
 * SIGTERM drains (drain()): no new connections, the requests begun end,
 * then the process exits; a second SIGTERM or SIGINT exits at once.
 *
 * The LLM emulator (--prefill-tps N --decode-tps N [--batch-slowdown B]
 * [--max-concurrency N]): the OpenAI endpoints then follow drover-sim
 * serve's service model on the wall clock (demo/llm_model.h: processor
 * sharing, the first token at prefill + one decode step, the end at
 * prefill + max_tokens steps, n in flight each at 1 / (1 + B (n - 1)) of
 * the speed; beyond N in flight, FIFO waiting, /metrics' waiting). The
 * prompt's tokens are its bytes / 4 (as the gateway estimates them), the
 * generated ones max_tokens (up to 100000). A stream sends each token's
 * chunk as its time passes (those due at a wake together), a JSON answer
 * comes at the end; usage counts both. libmicrohttpd runs a thread per
 * connection then, which waits on the model's condition variable (one
 * lock for the model; CLOCK_MONOTONIC). A stream whose client left is
 * taken out of the batch when libmicrohttpd frees it. /metrics also says
 * how late the latest timed wake came (drover_demo_llm_wake_late_max_seconds):
 * on a loaded machine the emulator falls behind the model.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "demo/llm_model.h"

#define DIM 64
#define MAX_BODY (1 << 20)
#define GONE_EVERY 256   /* layers between looks at whether the client left */

static struct {
    int port;
    char weights[1024];
    int weights_mib;
    int layers;
    int load_delay_ms;
    bool fail_start, never_ready;
    const char *replica;
    float *w;                /* DIM*DIM floats per layer, cycled over the file */
    size_t n_floats;
    char sha256[65];
    atomic_bool ready;
    atomic_ulong served;
    atomic_int running;      /* predictions in progress (/metrics) */
    atomic_int open_reqs;    /* requests begun and not yet answered (the drain at SIGTERM) */
    double kv_usage;         /* --kv-cache-usage; < 0: not in /metrics */
    int metrics_port;        /* --metrics-port; 0: /metrics on the main port */
    drv_llm_params_t llm_p;  /* the LLM emulator's (prefill_tps > 0: on) */
    drv_llm_t *llm;          /* its model, under llm_mu */
    pthread_mutex_t llm_mu;
    pthread_cond_t llm_cv;   /* the batch changed: wake times move */
    double late_max;         /* the latest a timed wake came past its time (s; /metrics) */
} g = {.weights_mib = 8, .layers = 4, .kv_usage = -1};

/* --- weights ---------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int make_weights(const char *path, size_t bytes)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -1;
    uint64_t s = 42;
    float buf[4096];
    size_t left = bytes / sizeof(float);
    while (left) {
        size_t n = left < 4096 ? left : 4096;
        for (size_t i = 0; i < n; i++)
            buf[i] = (float)((double)(splitmix(&s) >> 11) / 9007199254740992.0 - 0.5) * 0.25f;
        if (fwrite(buf, sizeof(float), n, f) != n) {
            fclose(f);
            return -1;
        }
        left -= n;
    }
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

static int load_weights(void)
{
    struct stat st;
    if (stat(g.weights, &st) < 0) {
        fprintf(stderr, "demo-model: creating %d MiB of weights in %s\n", g.weights_mib, g.weights);
        if (make_weights(g.weights, (size_t)g.weights_mib << 20) < 0) {
            fprintf(stderr, "demo-model: cannot write %s: %s\n", g.weights, strerror(errno));
            return -1;
        }
        stat(g.weights, &st);
    }
    if (st.st_size < (off_t)(DIM * DIM * sizeof(float))) {
        fprintf(stderr, "demo-model: %s is too small to hold one layer\n", g.weights);
        return -1;
    }
    FILE *f = fopen(g.weights, "rb");
    if (!f)
        return -1;
    g.n_floats = (size_t)st.st_size / sizeof(float);
    g.w = malloc(g.n_floats * sizeof(float));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    size_t got = 0;
    while (got < g.n_floats) {
        size_t n = fread(g.w + got, sizeof(float), g.n_floats - got, f);
        if (n == 0)
            break;
        EVP_DigestUpdate(md, g.w + got, n * sizeof(float));
        got += n;
    }
    fclose(f);
    unsigned char d[32];
    EVP_DigestFinal_ex(md, d, NULL);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < 32; i++)
        sprintf(g.sha256 + 2 * i, "%02x", d[i]);
    if (got != g.n_floats) {
        fprintf(stderr, "demo-model: short read of %s\n", g.weights);
        return -1;
    }
    return 0;
}

/* --- the "network" ------------------------------------------------------- */

static void embed(const char *text, float *v)
{
    memset(v, 0, DIM * sizeof(float));
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        h = (h ^ *p) * 1099511628211ULL;
        if (*p == ' ' || p[1] == '\0') {
            uint64_t s = h;
            for (int i = 0; i < DIM; i++)
                v[i] += (float)((double)(splitmix(&s) >> 11) / 9007199254740992.0 - 0.5);
        }
    }
}

/* Has the client on socket fd gone (closed its end, or the connection
 * broke)? -1: nobody to ask. Checked while a prediction computes, so a
 * request the gateway cancelled stops holding a thread: the gateway frees
 * the slot at once and sends the next request, and the pool has only two
 * threads, which /health shares with predictions. */
static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Runs v through the layers; false (v half done) when the client on fd
 * left midway, looked at every GONE_EVERY layers. */
static bool forward(float *v, int fd)
{
    float out[DIM];
    size_t per = DIM * DIM, n_layers_in_file = g.n_floats / per;
    for (int l = 0; l < g.layers; l++) {
        if (l % GONE_EVERY == GONE_EVERY - 1 && client_gone(fd))
            return false;
        const float *w = g.w + (size_t)(l % (int)n_layers_in_file) * per;
        for (int i = 0; i < DIM; i++) {
            float s = 0;
            for (int j = 0; j < DIM; j++)
                s += w[i * DIM + j] * v[j];
            out[i] = tanhf(s);
        }
        memcpy(v, out, sizeof out);
    }
    return true;
}

/* One input's prediction; NULL when its client (on fd) left meanwhile. */
static json_t *predict_one(const char *text, int fd)
{
    float v[DIM];
    embed(text, v);
    if (!forward(v, fd))
        return NULL;
    int best = 0;
    for (int i = 1; i < DIM; i++)
        if (v[i] > v[best])
            best = i;
    json_t *vec = json_array();
    for (int i = 0; i < 8; i++)
        json_array_append_new(vec, json_real(round(v[i] * 1e6) / 1e6));
    return json_pack("{s:i, s:f, s:o}", "label", best, "score", round(v[best] * 1e6) / 1e6,
                     "embedding", vec);
}

static const char *const words[] = {
    "the", "model", "replica", "answers", "quickly", "on", "a", "shared", "GPU", "with",
    "drover", "packing", "shares", "tightly", "and", "serving", "tokens", "steadily",
};

/* Deterministic reply words for a prompt. */
static void reply_words(const char *prompt, int n, const char **out)
{
    float v[DIM];
    embed(prompt, v);
    forward(v, -1);
    uint64_t s = 0;
    for (int i = 0; i < DIM; i++)
        s = s * 31 + (uint64_t)(int64_t)(v[i] * 1e6);
    for (int i = 0; i < n; i++)
        out[i] = words[splitmix(&s) % (sizeof words / sizeof words[0])];
}

/* --- HTTP ---------------------------------------------------------------- */

typedef struct conn {
    char *body;
    size_t len;
    bool too_big;
} conn_t;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(j);
    return reply(c, status, "application/json", s);
}

/* OpenAI's error shape, which clients of /v1/... expect (and which reads
 * fine for /predict too): {"error":{"message","type","param","code"}}. */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    const char *type = status >= 500 ? "server_error" : "invalid_request_error";
    return reply_json(c, status, json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", msg,
                                           "type", type, "param", "code"));
}

/* One OpenAI answer (chat or text completion), streamed or not: the
 * fields every chunk repeats and the words to send. */
typedef struct answer {
    bool chat;               /* chat.completion(.chunk), else text_completion */
    char id[64];
    char model[128];
    json_int_t created;      /* epoch seconds */
    const char *w[256];      /* word i is w[i % 256] */
    int n;
    int prompt_tokens;       /* usage's: 1, or the emulator's bytes / 4 */
    bool usage;              /* stream: a last chunk with the usage (stream_options.include_usage) */
} answer_t;

#define ANSWER_WORDS 256

static json_t *usage_of(const answer_t *a)
{
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", a->prompt_tokens, "completion_tokens",
                     a->n, "total_tokens", a->n + a->prompt_tokens);
}

/* A chunk of a's stream: word i (i < n), or the last one (i == n: empty,
 * with the finish_reason), or the usage one (i > n: no choice). */
static json_t *chunk_of(const answer_t *a, int i)
{
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:[]}", "id", a->id, "object",
                          a->chat ? "chat.completion.chunk" : "text_completion", "created",
                          a->created, "model", a->model, "choices");
    if (i > a->n) {
        json_object_set_new(j, "usage", usage_of(a));
        return j;
    }
    char tok[64] = "";
    if (i < a->n)
        snprintf(tok, sizeof tok, "%s%s", i ? " " : "", a->w[i % ANSWER_WORDS]);
    json_t *choice;
    if (a->chat && i == 0)
        choice = json_pack("{s:{s:s, s:s}}", "delta", "role", "assistant", "content", tok);
    else if (a->chat)
        choice = i < a->n ? json_pack("{s:{s:s}}", "delta", "content", tok)
                          : json_pack("{s:{}}", "delta");
    else
        choice = json_pack("{s:s}", "text", tok);
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, "logprobs", json_null());
    json_object_set_new(choice, "finish_reason", i == a->n ? json_string("length") : json_null());
    json_array_append_new(json_object_get(j, "choices"), choice);
    return j;
}

/* --- the LLM emulator's clock and lock ------------------------------------ */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Advance the model to now; wake every waiter when the batch changed
 * (their wake times moved). Under llm_mu. */
static void llm_advance(void)
{
    int n = drv_llm_running(g.llm), w = drv_llm_waiting(g.llm);
    drv_llm_advance(g.llm, mono_s());
    if (n != drv_llm_running(g.llm) || w != drv_llm_waiting(g.llm))
        pthread_cond_broadcast(&g.llm_cv);
}

static drv_llm_req_t *llm_submit(double prompt, int gen)
{
    drv_llm_req_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->prompt = prompt;
    r->gen = gen;
    pthread_mutex_lock(&g.llm_mu);
    llm_advance();
    drv_llm_submit(g.llm, r, mono_s());
    pthread_cond_broadcast(&g.llm_cv);
    pthread_mutex_unlock(&g.llm_mu);
    return r;
}

/* Block until r has at least k tokens (k <= gen); returns how many it has. */
static int llm_wait(drv_llm_req_t *r, int k)
{
    pthread_mutex_lock(&g.llm_mu);
    int have;
    for (;;) {
        llm_advance();
        have = drv_llm_tokens(g.llm, r);
        if (have >= k || r->done)
            break;
        double at = drv_llm_wake_at(g.llm, r, k);
        if (at == HUGE_VAL) {
            pthread_cond_wait(&g.llm_cv, &g.llm_mu);
            continue;
        }
        at += 1e-4;   /* past the instant, so the next advance reaches it */
        struct timespec ts = {.tv_sec = (time_t)at,
                              .tv_nsec = (long)((at - floor(at)) * 1e9)};
        if (pthread_cond_timedwait(&g.llm_cv, &g.llm_mu, &ts) == ETIMEDOUT &&
            mono_s() - at > g.late_max)   /* a loaded machine: the emulator falls behind */
            g.late_max = mono_s() - at;
    }
    pthread_mutex_unlock(&g.llm_mu);
    return have;
}

/* Out of the batch (done, or its client left) and freed. */
static void llm_release(drv_llm_req_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&g.llm_mu);
    int n = drv_llm_running(g.llm), w = drv_llm_waiting(g.llm);
    drv_llm_remove(g.llm, r, mono_s());
    if (n != drv_llm_running(g.llm) || w != drv_llm_waiting(g.llm))
        pthread_cond_broadcast(&g.llm_cv);
    pthread_mutex_unlock(&g.llm_mu);
    free(r);
}

typedef struct stream {
    answer_t a;
    int i;                   /* the next chunk (chunk_of) */
    bool done;
    char *pending;
    size_t plen, poff;
    drv_llm_req_t *llm;      /* the emulator's request (NULL: not emulating) */
} stream_t;

/* Append chunk i of s's stream to its pending text; false on no memory. */
static bool add_chunk(stream_t *s, int i)
{
    json_t *j = chunk_of(&s->a, i);
    char *d = json_dumps(j, JSON_COMPACT), *more = NULL;
    json_decref(j);
    if (!d || asprintf(&more, "%sdata: %s\n\n", s->pending ? s->pending : "", d) < 0)
        more = NULL;
    free(d);
    free(s->pending);
    s->pending = more;
    return more != NULL;
}

static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_t *s = cls;
    if (s->poff == s->plen) {
        free(s->pending);
        s->pending = NULL;
        if (s->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (s->i < s->a.n && s->llm) {   /* the tokens due by now, once the next one is */
            int have = llm_wait(s->llm, s->i + 1);
            while (s->i < have)
                if (!add_chunk(s, s->i++))
                    return MHD_CONTENT_READER_END_WITH_ERROR;
            if (s->i == s->a.n && !add_chunk(s, s->i++))   /* the finish_reason with the last */
                return MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (s->i <= s->a.n || (s->a.usage && s->i == s->a.n + 1)) {
            if (!add_chunk(s, s->i++))
                return MHD_CONTENT_READER_END_WITH_ERROR;
        } else {
            s->pending = strdup("data: [DONE]\n\n");
            s->done = true;
        }
        if (!s->pending)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        s->plen = strlen(s->pending);
        s->poff = 0;
    }
    size_t n = s->plen - s->poff < max ? s->plen - s->poff : max;
    memcpy(buf, s->pending + s->poff, n);
    s->poff += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    stream_t *s = cls;
    llm_release(s->llm);
    free(s->pending);
    free(s);
}

/* POST /v1/chat/completions (chat) or /v1/completions: the prompt is the
 * last message's content, or "prompt" (a string, or an array of one). */
static enum MHD_Result complete(struct MHD_Connection *c, json_t *in, bool chat)
{
    const char *prompt;
    if (chat) {
        json_t *msgs = json_object_get(in, "messages");
        if (!json_is_array(msgs) || json_array_size(msgs) == 0)
            return reply_error(c, 400, "messages must be a non-empty array");
        prompt = json_string_value(
            json_object_get(json_array_get(msgs, json_array_size(msgs) - 1), "content"));
        if (!prompt)
            return reply_error(c, 400, "the last message needs a string content");
    } else {
        json_t *p = json_object_get(in, "prompt");
        if (json_is_array(p) && json_array_size(p) == 1)
            p = json_array_get(p, 0);
        prompt = json_string_value(p);
        if (!prompt)
            return reply_error(c, 400, "prompt must be a string (or an array of one string)");
    }
    json_int_t max_tokens = 16;
    json_t *mt = json_object_get(in, "max_tokens");
    if (chat && (!mt || json_is_null(mt)))   /* its newer name */
        mt = json_object_get(in, "max_completion_tokens");
    json_int_t max_max = g.llm ? 100000 : 256;
    if (mt && !json_is_null(mt) &&
        (!json_is_integer(mt) || json_integer_value(mt) < 1 || json_integer_value(mt) > max_max))
        return reply_error(c, 400, g.llm ? "max_tokens (or max_completion_tokens) must be an integer from 1 to 100000"
                                         : "max_tokens (or max_completion_tokens) must be an integer from 1 to 256");
    if (json_is_integer(mt))
        max_tokens = json_integer_value(mt);
    const char *model = json_string_value(json_object_get(in, "model"));
    answer_t a = {.chat = chat, .created = (json_int_t)time(NULL), .n = (int)max_tokens,
                  .prompt_tokens = g.llm ? (int)(strlen(prompt) / 4) : 1};
    snprintf(a.id, sizeof a.id, "%s-%lu", chat ? "chatcmpl" : "cmpl",
             (unsigned long)atomic_fetch_add(&g.served, 1));
    snprintf(a.model, sizeof a.model, "%s", model ? model : "demo");
    a.usage = json_is_true(
        json_object_get(json_object_get(in, "stream_options"), "include_usage"));
    reply_words(prompt, a.n < ANSWER_WORDS ? a.n : ANSWER_WORDS, a.w);
    drv_llm_req_t *job = NULL;
    if (g.llm && !(job = llm_submit(a.prompt_tokens, a.n)))
        return MHD_NO;
    if (json_is_true(json_object_get(in, "stream"))) {
        stream_t *s = calloc(1, sizeof *s);
        if (!s) {
            llm_release(job);
            return MHD_NO;
        }
        s->a = a;
        s->llm = job;
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, stream_cb, s, stream_free);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (job) {   /* the whole answer, at its end */
        llm_wait(job, a.n);
        llm_release(job);
    }
    char *text = malloc((size_t)a.n * 16 + 1);
    if (!text)
        return MHD_NO;
    size_t tl = 0;
    text[0] = '\0';
    for (int i = 0; i < a.n; i++)
        tl += (size_t)sprintf(text + tl, "%s%s", i ? " " : "", a.w[i % ANSWER_WORDS]);
    json_t *choice = chat ? json_pack("{s:{s:s, s:s}}", "message", "role", "assistant",
                                      "content", text)
                          : json_pack("{s:s}", "text", text);
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, "logprobs", json_null());
    free(text);
    json_object_set_new(choice, "finish_reason", json_string("length"));
    json_t *out = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", a.id, "object",
                            chat ? "chat.completion" : "text_completion", "created", a.created,
                            "model", a.model, "choices", choice, "usage", usage_of(&a));
    return reply_json(c, 200, out);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    conn_t *x = *con_cls;
    if (!x) {
        *con_cls = calloc(1, sizeof(conn_t));
        if (*con_cls)
            atomic_fetch_add(&g.open_reqs, 1);   /* until on_done */
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        if (x->len + *upload_size > MAX_BODY) {
            x->too_big = true;
        } else if (!x->too_big) {
            x->body = realloc(x->body, x->len + *upload_size + 1);
            memcpy(x->body + x->len, upload, *upload_size);
            x->len += *upload_size;
            x->body[x->len] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    bool on_mport = cls != NULL;   /* the --metrics-port daemon: /metrics only */
    if (g.metrics_port > 0 && on_mport != (strcmp(url, "/metrics") == 0))
        return reply_error(c, 404, "no such path");
    if (strcmp(url, "/health") == 0 && strcmp(method, "GET") == 0) {
        if (!atomic_load(&g.ready))
            return reply_json(c, 503, json_pack("{s:s}", "status", "loading"));
        return reply_json(c, 200, json_pack("{s:s, s:s, s:s}", "status", "ok", "weights_sha256",
                                            g.sha256, "replica", g.replica ? g.replica : ""));
    }
    if (strcmp(url, "/metrics") == 0 && strcmp(method, "GET") == 0) {   /* vLLM's names */
        char text[1024];
        int running = atomic_load(&g.running), waiting = 0;
        double late = 0;
        if (g.llm) {   /* the emulator's batch and queue */
            pthread_mutex_lock(&g.llm_mu);
            llm_advance();
            running = drv_llm_running(g.llm);
            waiting = drv_llm_waiting(g.llm);
            late = g.late_max;
            pthread_mutex_unlock(&g.llm_mu);
        }
        int n = snprintf(text, sizeof text,
                         "# TYPE vllm:num_requests_running gauge\n"
                         "vllm:num_requests_running{model_name=\"demo\"} %d\n"
                         "# TYPE vllm:num_requests_waiting gauge\n"
                         "vllm:num_requests_waiting{model_name=\"demo\"} %d\n",
                         running, waiting);
        if (g.llm)
            n += snprintf(text + n, sizeof text - (size_t)n,
                          "# TYPE drover_demo_llm_wake_late_max_seconds gauge\n"
                          "drover_demo_llm_wake_late_max_seconds %.6f\n", late);
        if (g.kv_usage >= 0)
            snprintf(text + n, sizeof text - (size_t)n,
                     "# TYPE vllm:gpu_cache_usage_perc gauge\n"
                     "vllm:gpu_cache_usage_perc{model_name=\"demo\"} %.3f\n", g.kv_usage);
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                                 MHD_RESPMEM_MUST_COPY);
        MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    bool is_predict = strcmp(url, "/predict") == 0, is_chat = strcmp(url, "/v1/chat/completions") == 0;
    bool is_text = strcmp(url, "/v1/completions") == 0;
    if (!is_predict && !is_chat && !is_text)
        return reply_error(c, 404, "no such path");
    if (strcmp(method, "POST") != 0)
        return reply_error(c, 405, "use POST");
    if (!atomic_load(&g.ready))
        return reply_error(c, 503, "still loading weights");
    if (x->too_big)
        return reply_error(c, 413, "body over 1 MiB");
    json_error_t jerr;
    json_t *in = x->body ? json_loadb(x->body, x->len, 0, &jerr) : NULL;
    if (!json_is_object(in)) {
        json_decref(in);
        return reply_error(c, 400, "the body must be a JSON object");
    }
    enum MHD_Result ret;
    atomic_fetch_add(&g.running, 1);   /* /metrics: running */
    if (is_chat || is_text) {
        ret = complete(c, in, is_chat);
    } else {
        json_t *inputs = json_object_get(in, "inputs"), *out = json_array();
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = ci ? ci->connect_fd : -1;
        size_t n = json_is_string(inputs) ? 1 : json_array_size(inputs);
        if (!json_is_string(inputs) && !(json_is_array(inputs) && n <= 1024)) {
            json_decref(out);
            json_decref(in);
            atomic_fetch_sub(&g.running, 1);
            return reply_error(c, 400, "inputs must be a string or an array of strings");
        }
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_is_string(inputs) ? inputs : json_array_get(inputs, i);
            json_t *o = predict_one(json_is_string(v) ? json_string_value(v) : "", fd);
            if (!o) {   /* nobody waits for the answer: free the thread, drop the connection */
                fprintf(stderr, "demo-model: the client left; prediction stopped after %zu of "
                                "%zu input(s)\n", i, n);
                json_decref(out);
                json_decref(in);
                atomic_fetch_sub(&g.running, 1);
                return MHD_NO;
            }
            json_array_append_new(out, o);
        }
        atomic_fetch_add(&g.served, 1);
        ret = reply_json(c, 200, json_pack("{s:o, s:s, s:s}", "outputs", out, "replica",
                                           g.replica ? g.replica : "", "weights_sha256", g.sha256));
    }
    json_decref(in);
    atomic_fetch_sub(&g.running, 1);
    return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    conn_t *x = *con_cls;
    if (x) {
        free(x->body);
        free(x);
        atomic_fetch_sub(&g.open_reqs, 1);
    }
    *con_cls = NULL;
}

/* SIGTERM asks a replica to finish (design §6): stop accepting connections
 * (a connect is refused, so a gateway that still routes here retries
 * elsewhere), let the requests begun end, then return; a second signal
 * ends the wait (the agent's SIGKILL follows its grace period anyway). A
 * request that comes on a kept-alive connection meanwhile is served too. */
static void drain(struct MHD_Daemon *d, struct MHD_Daemon *md, const sigset_t *sigs)
{
    MHD_socket ls = MHD_quiesce_daemon(d);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    if (md && (ls = MHD_quiesce_daemon(md)) != MHD_INVALID_SOCKET)
        close(ls);
    int left = atomic_load(&g.open_reqs);
    fprintf(stderr, "demo-model: draining (%d request(s) in progress; no new connections)\n", left);
    const struct timespec tick = {0, 20 * 1000 * 1000};
    while (atomic_load(&g.open_reqs) > 0)
        if (sigtimedwait(sigs, NULL, &tick) >= 0) {
            fprintf(stderr, "demo-model: a second signal: not waiting for %d request(s)\n",
                    atomic_load(&g.open_reqs));
            return;
        }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: drover-demo-model [--port N] [--weights FILE] [--weights-mib N]\n"
               "                         [--layers N] [--load-delay-ms N] [--fail-start] [--never-ready]\n"
               "                         [--alloc-mib N]\n"
               "\n"
               "A small model server following drover's replica contract. PORT, DROVER_MODEL_DIR\n"
               "and DROVER_REPLICA_ID come from the environment; flags override.\n"
               "  --weights FILE    weights file (default $DROVER_MODEL_DIR/weights.bin, or\n"
               "                    ./demo-weights.bin); created deterministically if missing\n"
               "  --weights-mib N   size of created weights (default 8)\n"
               "  --layers N        dense layers per prediction: the cost knob (default 4)\n"
               "  --load-delay-ms N extra delay before ready (simulates a slow load)\n"
               "  --fail-start      exit 1 at once (for restart tests)\n"
               "  --never-ready     serve but never report healthy (for timeout tests)\n"
               "  --alloc-mib N     once ready, allocate and touch N MiB more and hold it\n"
               "                    (for memory limit tests)\n"

               "  --kv-cache-usage F  report a KV-cache usage of F (0..1) in /metrics\n"
               "  --metrics-port P    serve /metrics on port P only, not on PORT (default:\n"
               "                      METRICS_PORT from the environment, when set)\n"
               "LLM emulator (drover-sim serve's service model on the wall clock; all four\n"
               "or the first two):\n"
               "  --prefill-tps N     prompt tokens (bytes / 4) per second, a request alone\n"
               "  --decode-tps N      generated tokens (max_tokens) per second, one sequence\n"
               "  --batch-slowdown B  n in flight: each at 1 / (1 + B (n - 1)) (default 0)\n"
               "  --max-concurrency N in flight at most; the rest wait (default 16)\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},        {"weights", required_argument, NULL, 'w'},
        {"weights-mib", required_argument, NULL, 'm'}, {"layers", required_argument, NULL, 'l'},
        {"load-delay-ms", required_argument, NULL, 'd'}, {"fail-start", no_argument, NULL, 'F'},
        {"never-ready", no_argument, NULL, 'N'},       {"help", no_argument, NULL, 'h'},
        {"alloc-mib", required_argument, NULL, 'A'},
        {"kv-cache-usage", required_argument, NULL, 'K'},
        {"metrics-port", required_argument, NULL, 'M'},
        {"prefill-tps", required_argument, NULL, 'P'},
        {"decode-tps", required_argument, NULL, 'D'},
        {"batch-slowdown", required_argument, NULL, 'B'},
        {"max-concurrency", required_argument, NULL, 'C'},
        {NULL, 0, NULL, 0},
    };
    const char *port_env = getenv("PORT"), *dir = getenv("DROVER_MODEL_DIR");
    g.port = port_env ? atoi(port_env) : 0;
    const char *mport_env = getenv("METRICS_PORT");   /* runtime.metrics_port: true */
    g.metrics_port = mport_env ? atoi(mport_env) : 0;
    g.replica = getenv("DROVER_REPLICA_ID");
    if (dir && *dir)
        snprintf(g.weights, sizeof g.weights, "%s/weights.bin", dir);
    else
        snprintf(g.weights, sizeof g.weights, "demo-weights.bin");
    int c, alloc_mib = 0;
    bool emulate = false;
    g.llm_p = (drv_llm_params_t){.max_concurrency = 16};
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': g.port = atoi(optarg); break;
        case 'w': snprintf(g.weights, sizeof g.weights, "%s", optarg); break;
        case 'm': g.weights_mib = atoi(optarg); break;
        case 'l': g.layers = atoi(optarg); break;
        case 'd': g.load_delay_ms = atoi(optarg); break;
        case 'F': g.fail_start = true; break;
        case 'N': g.never_ready = true; break;
        case 'A': alloc_mib = atoi(optarg); break;
        case 'M': g.metrics_port = atoi(optarg); break;
        case 'K': {
            char *e;
            g.kv_usage = strtod(optarg, &e);
            if (*e || !(g.kv_usage >= 0 && g.kv_usage <= 1)) {
                fprintf(stderr, "demo-model: --kv-cache-usage must be a number in 0..1\n");
                return 2;
            }
            break;
        }
        case 'P': case 'D': case 'B': case 'C': {
            char *e;
            double v = strtod(optarg, &e);
            if (*e || e == optarg) {
                fprintf(stderr, "demo-model: --%s needs a number, not '%s'\n",
                        c == 'P' ? "prefill-tps" : c == 'D' ? "decode-tps"
                        : c == 'B' ? "batch-slowdown" : "max-concurrency", optarg);
                return 2;
            }
            if (c == 'P')
                g.llm_p.prefill_tps = v;
            else if (c == 'D')
                g.llm_p.decode_tps = v;
            else if (c == 'B')
                g.llm_p.batch_slowdown = v;
            else
                g.llm_p.max_concurrency = v >= 1 && v <= 100000 && v == floor(v) ? (int)v : -1;
            emulate = true;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (g.port <= 0 || g.port > 65535 || g.weights_mib < 1 || g.weights_mib > 65536 ||
        g.layers < 1 || g.layers > 100000 || g.load_delay_ms < 0 || alloc_mib < 0 ||
        g.metrics_port < 0 || g.metrics_port > 65535) {
        fprintf(stderr, "demo-model: need PORT (env or --port) and sane --weights-mib/--layers\n");
        return 2;
    }
    if (emulate) {
        char why[128];
        if (!(g.llm = drv_llm_create(&g.llm_p, why, sizeof why))) {
            fprintf(stderr, "demo-model: LLM emulator: %s (--prefill-tps, --decode-tps, "
                            "--batch-slowdown, --max-concurrency)\n", why);
            return 2;
        }
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&g.llm_cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&g.llm_mu, NULL);
    }
    if (g.fail_start) {
        fprintf(stderr, "demo-model: failing at start as asked (--fail-start)\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigprocmask(SIG_BLOCK, &s, NULL);   /* before any thread starts */
    struct MHD_Daemon *d =
        g.llm ? MHD_start_daemon(   /* a thread per connection: each waits on the model */
                    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                        MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG,
                    (uint16_t)g.port, NULL, NULL, on_request, NULL,
                    MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_END)
              : MHD_start_daemon(
                    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                        MHD_USE_ERROR_LOG,
                    (uint16_t)g.port, NULL, NULL, on_request, NULL,
                    MHD_OPTION_THREAD_POOL_SIZE, 2u, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
                    MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "demo-model: cannot listen on port %d\n", g.port);
        return 1;
    }
    struct MHD_Daemon *md = NULL;
    if (g.metrics_port > 0 &&
        !(md = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG,
                                (uint16_t)g.metrics_port, NULL, NULL, on_request, &g,
                                MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_END))) {
        fprintf(stderr, "demo-model: cannot listen on metrics port %d\n", g.metrics_port);
        MHD_stop_daemon(d);
        return 1;
    }
    fprintf(stderr, "demo-model: listening on port %d, loading %s\n", g.port, g.weights);
    if (load_weights() < 0) {
        if (md)
            MHD_stop_daemon(md);
        MHD_stop_daemon(d);
        return 1;
    }
    if (g.load_delay_ms)
        usleep((useconds_t)g.load_delay_ms * 1000);
    if (!g.never_ready)
        atomic_store(&g.ready, true);
    fprintf(stderr, "demo-model: ready (weights %zu floats, sha256 %s)\n", g.n_floats, g.sha256);
    for (int k = 0; k < alloc_mib; k++) {   /* touched, so it counts against a memory limit */
        char *p = malloc(1 << 20);
        if (!p)
            break;
        memset(p, k + 1, 1 << 20);
    }
    if (alloc_mib)
        fprintf(stderr, "demo-model: holding %d MiB more (--alloc-mib)\n", alloc_mib);
    int sig;
    sigwait(&s, &sig);
    drain(d, md, &s);
    fprintf(stderr, "demo-model: stopping (served %lu)\n", (unsigned long)atomic_load(&g.served));
    if (md)
        MHD_stop_daemon(md);
    MHD_stop_daemon(d);
    free(g.w);
    drv_llm_destroy(g.llm);
    return 0;
}
