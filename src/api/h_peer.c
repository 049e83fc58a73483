/* h_peer.c — what one head serves another (several heads on PostgreSQL,
 * issue 17): a blob of its store and its checkpoint records, at URLs signed
 * with the heads' shared secret (the database's head_key row, never a
 * user's token), which expire. A standby serves them (h_status.c lets
 * /v1/heads/ through); so does the leader. The signing side is here too:
 * head/blob_sync.c signs what it fetches and the 307s it hands to nodes.
 *
 *   GET /v1/heads/blobs/sha256/HEX?expires=UNIX_S&sig=HEX   (ranges)
 *   GET /v1/heads/checkpoints?expires=UNIX_S&sig=HEX
 *
 * sig = HMAC-SHA256(key, "drover-head\nWHAT\nEXPIRES") in hex, WHAT being
 * "blob HEX" or "checkpoints". */
#include "api/peer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
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
