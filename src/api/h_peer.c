/* h_peer.c — what one head serves another (several heads on PostgreSQL,
 * issue 17): a blob of its store and its checkpoint records, at URLs signed
 * with the heads' shared secret (the database's head_key row, never a
 * user's token), which expire. A standby serves them (h_status.c lets
 * /v1/heads/ through); so does the leader. The signing side is here too:
 * head/blob_sync.c signs what it fetches and the 307s it hands to nodes.
 *
 *   GET /v1/heads/blobs/sha256/HEX?expires=UNIX_S&sig=HEX   (ranges)
 *   GET /v1/heads/checkpoints?expires=UNIX_S&sig=HEX
 *   POST /v1/heads/replicate?expires=UNIX_S&sig=HEX
 *     {"items": [{"user", "blobs": [HEX...], "checkpoint": record|null}],
 *      "wait_ms": N}: the leader asks a standby to hold these now (its
 *     semi-synchronous uploads, head/blob_sync.c); answered once each item's
 *     blobs are whole here (sha256 verified) and its checkpoint record
 *     written, or wait_ms passed: {"held": [bool...]}, in order.
 *
 * sig = HMAC-SHA256(key, "drover-head\nWHAT\nEXPIRES") in hex, WHAT being
 * "blob HEX", "checkpoints" or "replicate SHA256-OF-THE-BODY". */
#include "api/peer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "common/sha256.h"
#include "common/sigv4.h"
#include "common/util.h"
#include "state/head.h"
#include "store/blobs.h"
#include "store/checkpoints.h"

#define MAX_TTL_S 3600   /* no signature is taken for longer than this ahead */

static void sign(const drv_head_t *h, const char *what, int64_t expires, char out[65])
{
    char msg[200];
    snprintf(msg, sizeof msg, "drover-head\n%s\n%" PRId64, what, expires);
    unsigned char md[32];
    drv_hmac_sha256(h->peer_key, strlen(h->peer_key), msg, md);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int signed_url(const drv_head_t *h, const char *base, const char *path,
                      const char *what, int ttl_s, char *out, size_t n)
{
    int64_t exp = drv_now_ms() / 1000 + ttl_s;
    char sig[65];
    sign(h, what, exp, sig);
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        bl--;
    int w = snprintf(out, n, "%.*s%s?expires=%" PRId64 "&sig=%s", (int)bl, base, path, exp, sig);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int drv_peer_blob_url(const drv_head_t *h, const char *base, const char *hex, int ttl_s,
                      char *out, size_t n)
{
    char path[128], what[80];
    snprintf(path, sizeof path, "/v1/heads/blobs/sha256/%.64s", hex);
    snprintf(what, sizeof what, "blob %.64s", hex);
    return signed_url(h, base, path, what, ttl_s, out, n);
}

int drv_peer_ckpts_url(const drv_head_t *h, const char *base, int ttl_s, char *out, size_t n)
{
    return signed_url(h, base, "/v1/heads/checkpoints", "checkpoints", ttl_s, out, n);
}

static void body_what(const char *body, size_t len, char out[80])
{
    unsigned char d[32];
    drv_sha256(body ? body : "", body ? len : 0, d);
    int o = snprintf(out, 80, "replicate ");
    for (int i = 0; i < 32; i++)
        snprintf(out + o + 2 * i, 3, "%02x", d[i]);
}

int drv_peer_replicate_url(const drv_head_t *h, const char *base, const char *body, size_t len,
                           int ttl_s, char *out, size_t n)
{
    char what[80];
    body_what(body, len, what);
    return signed_url(h, base, "/v1/heads/replicate", what, ttl_s, out, n);
}

/* The request's signature for what: 0, or -1 with a 401 when it carries
 * none (as every route without credentials), a 403 when it is wrong or
 * expired, a 404 on SQLite (no other head, no key). */
static int verify(drv_req_t *req, const char *what, drv_error_t *err)
{
    const drv_head_t *h = req->head;
    if (!drv_req_query(req, "sig"))
        return drv_err(err, 401, "unauthenticated", "", "a head-to-head URL needs expires "
                       "and sig (it is signed with the heads' key)");
    if (!__atomic_load_n(&h->lease, __ATOMIC_ACQUIRE) || !h->peer_key[0])
        return drv_err_not_found(err, "no such path: %.200s (one head: nothing to share)",
                                 req->path);
    static const char *const allowed[] = {"expires", "sig", NULL};
    if (drv_req_check_query(req, allowed, err) < 0)
        return -1;
    const char *e = drv_req_query(req, "expires"), *s = drv_req_query(req, "sig");
    char *end = NULL;
    long long exp = e ? strtoll(e, &end, 10) : 0;
    int64_t now = drv_now_ms() / 1000;
    if (!e || !s || !end || *end || strlen(s) != 64)
        return drv_err(err, 403, "permission_denied", "", "a head-to-head URL needs expires "
                       "and sig (it is signed with the heads' key)");
    if (exp < now || exp > now + MAX_TTL_S)
        return drv_err(err, 403, "permission_denied", "", "this head-to-head URL has expired "
                       "(or expires too far ahead)");
    char want[65];
    sign(h, what, exp, want);
    if (!drv_ct_equal(want, s, 64))
        return drv_err(err, 403, "permission_denied", "", "bad head-to-head signature");
    return 0;
}

int drv_h_peer_blob(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    const char *hex = req->params[0];
    char what[80];
    snprintf(what, sizeof what, "blob %.64s", hex);
    if (verify(req, what, &err) < 0) {   /* first: no credentials is a 401 for any path */
        drv_resp_error(resp, &err);
        return 0;
    }
    if (!drv_blobs_hex_ok(hex)) {
        drv_err_not_found(&err, "blob %.64s not found", hex);
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_h_blob_send(req, resp, hex);
    return 0;
}

int drv_h_peer_ckpts(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    if (verify(req, "checkpoints", &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    if (!req->head->blobs) {
        drv_err(&err, 503, "unavailable", "", "this head has no blob store");
        drv_resp_error(resp, &err);
        return 0;
    }
    json_t *doc = json_pack("{s:o, s:b}", "items", drv_ckpts_all(req->head->blobs), "whole",
                            (int)atomic_load(&req->head->ckpts_whole));
    drv_resp_json(resp, 200, doc);
    return 0;
}

/* Is item held here: its blobs whole, its checkpoint record (if any) the
 * one given? -1 when malformed. */
static int item_held(const drv_head_t *h, const json_t *it)
{
    const char *user = json_string_value(json_object_get(it, "user"));
    const json_t *bl = json_object_get(it, "blobs"), *rec = json_object_get(it, "checkpoint");
    if (!user || !json_is_array(bl))
        return -1;
    size_t i;
    json_t *v;
    json_array_foreach((json_t *)bl, i, v) {
        const char *hex = json_string_value(v);
        if (!hex || !drv_blobs_hex_ok(hex))
            return -1;
        if (!drv_blobs_whole(h->blobs, hex))
            return 0;
    }
    if (!json_is_object(rec))
        return 1;
    const char *scope = json_string_value(json_object_get(rec, "scope"));
    const char *name = json_string_value(json_object_get(rec, "name"));
    json_t *mine = NULL;
    drv_error_t err;
    if (!scope || !name || drv_ckpts_get(h->blobs, user, scope, name, &mine, &err) < 0)
        return 0;
    int same = json_equal(json_object_get(mine, "digest"), json_object_get(rec, "digest")) &&
               json_equal(json_object_get(mine, "committed_at_ms"),
                          json_object_get(rec, "committed_at_ms"));
    json_decref(mine);
    return same;
}

int drv_h_peer_replicate(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    drv_head_t *h = req->head;
    char what[80];
    json_t *body = NULL, *held = NULL;
    body_what(req->body, req->body_len, what);
    if (verify(req, what, &err) < 0)
        goto error;
    if (!h->blobs) {
        drv_err(&err, 503, "unavailable", "", "this head has no blob store");
        goto error;
    }
    if (!(body = drv_req_json(req, &err)))
        goto error;
    json_t *items = json_object_get(body, "items"), *it;
    json_int_t wait_ms = json_integer_value(json_object_get(body, "wait_ms"));
    if (!json_is_array(items)) {
        drv_err_invalid(&err, "items", "items must be an array");
        goto error;
    }
    held = json_array();
    bool all = true;
    size_t i;
    json_array_foreach(items, i, it) {
        int r = item_held(h, it);
        if (r < 0) {
            drv_err_invalid(&err, "items", "items[%zu] must be {user, blobs: [sha256...], "
                            "checkpoint}", i);
            goto error;
        }
        json_array_append_new(held, json_boolean(r));
        all = all && r;
    }
    void (*want)(void *, json_t *, uint64_t) = __atomic_load_n(&h->replica_want,
                                                                __ATOMIC_ACQUIRE);
    if (!all && !req->resumed && want && wait_ms > 0) {
        want(h->replicate_ctx, json_incref(items), drv_key_hash(what));
        resp->hold_ms = wait_ms > 600000 ? 600000 : (int)wait_ms;
        resp->hold_key = drv_key_hash(what);
        resp->status = 202;   /* placeholder: replaced when the hold ends */
        json_decref(held);
        json_decref(body);
        return 0;
    }
    drv_resp_json(resp, 200, json_pack("{s:o}", "held", held));
    json_decref(body);
    return 0;
error:
    json_decref(held);
    json_decref(body);
    drv_resp_error(resp, &err);
    return 0;
}
