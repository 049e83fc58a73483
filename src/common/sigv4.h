/* sigv4.h — AWS Signature Version 4: the Authorization header of one HTTP
 * request (the EC2 Query API's POST of a form body, S3 calls with
 * x-amz-content-sha256), and query-string presigning (S3 presigned URLs:
 * whoever holds the URL may make that one request until it expires, and
 * never sees the secret). Pure: no clock reads, no I/O, no libcrypto (HMAC
 * over src/common/sha256.c, so code below the head may sign); the caller
 * passes the time stamp. Tested against AWS's published SigV4 test suite
 * and S3's presigned-URL example (t/unit/test_sigv4.c, test_s3.c). */
#ifndef DRV_SIGV4_H
#define DRV_SIGV4_H

#include <stddef.h>

typedef struct drv_sigv4_req {
    const char *method;          /* "POST" */
    const char *path;            /* "/" (already URI-encoded) */
    const char *query;           /* "" or "a=1&b=2" (encoded; sorted here) */
    const char *host;            /* "ec2.us-east-1.amazonaws.com" or "127.0.0.1:5000" */
    const char *content_type;    /* NULL: not signed */
    const char *amz_date;        /* "20150830T123600Z" */
    const void *body;
    size_t body_len;
    const char *region, *service;
    const char *access_key_id, *secret_access_key;
    /* NULL: the body's hash is signed but not sent (EC2). Else the value of an
     * x-amz-content-sha256 header (S3 requires one): the body's hex SHA-256
     * or "UNSIGNED-PAYLOAD"; it is signed and the caller sends it. */
    const char *content_sha256;
} drv_sigv4_req_t;

/* The Authorization header value ("AWS4-HMAC-SHA256 Credential=…,
 * SignedHeaders=…, Signature=…"). The signed headers are content-type (when
 * given), host, x-amz-content-sha256 (when given) and x-amz-date, which the
 * caller must send as given. 0, or -1 when an input is missing or out does
 * not hold the result. */
int drv_sigv4_authorization(const drv_sigv4_req_t *r, char *out, size_t out_len);

/* HMAC-SHA256 (RFC 2104) of the NUL-terminated msg under key (also the
 * head's peer tokens, api/agent_peers.c). */
void drv_hmac_sha256(const void *key, size_t key_len, const char *msg, unsigned char out[32]);

/* The canonical request (exposed for tests); NULL on bad input. Caller frees. */
char *drv_sigv4_canonical_request(const drv_sigv4_req_t *r);

/* One request to presign (query-string authentication). Only host is
 * signed and the payload is UNSIGNED-PAYLOAD, so a Range header (ranged GET)
 * or any body (PUT) may go with the URL. */
typedef struct drv_sigv4_presign {
    const char *method;          /* "GET", "PUT", "HEAD", "DELETE" */
    const char *host;            /* as the client will send it: "bucket.s3.amazonaws.com" */
    const char *path;            /* URI-encoded: "/test.txt" */
    const char *query;           /* NULL, "" or the request's own parameters, encoded
                                    ("partNumber=1&uploadId=x"); none may be X-Amz-* */
    const char *amz_date;        /* when it was signed: "20130524T000000Z" */
    long expires;                /* seconds it stays valid: 1 .. 604800 (7 days) */
    const char *region, *service;
    const char *access_key_id, *secret_access_key;
} drv_sigv4_presign_t;

/* The query string of the presigned URL (no leading '?'): the request's
 * parameters and the X-Amz-Algorithm, -Credential, -Date, -Expires and
 * -SignedHeaders ones, sorted, then X-Amz-Signature. NULL on bad input
 * (a missing field, expires out of range). Caller frees. */
char *drv_sigv4_presign_query(const drv_sigv4_presign_t *p);

/* "20150830T123600Z" for epoch seconds t (UTC). */
void drv_sigv4_amz_date(long long t, char out[17]);

/* RFC 3986 percent-encoding as SigV4 wants it: everything but A-Z a-z 0-9
 * - _ . ~ is %XX (upper-case hex); '/' is kept when keep_slash (an S3 object
 * key in a path). 0, or -1 when out is too small. */
int drv_sigv4_uri_encode(const char *s, int keep_slash, char *out, size_t n);

#endif
