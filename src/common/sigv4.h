/* sigv4.h — AWS Signature Version 4 for one HTTP request (the EC2 Query
 * API's POST of a form body, or a GET). Pure: no clock reads, no I/O; the
 * caller passes the time stamp. Tested against AWS's published SigV4 test
 * suite (t/unit/test_sigv4.c). */
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
} drv_sigv4_req_t;

/* The Authorization header value ("AWS4-HMAC-SHA256 Credential=…,
 * SignedHeaders=…, Signature=…"). The signed headers are content-type (when
 * given), host and x-amz-date, which the caller must send as given.
 * 0, or -1 when an input is missing or out does not hold the result. */
int drv_sigv4_authorization(const drv_sigv4_req_t *r, char *out, size_t out_len);

/* The canonical request (exposed for tests); NULL on bad input. Caller frees. */
char *drv_sigv4_canonical_request(const drv_sigv4_req_t *r);

/* "20150830T123600Z" for epoch seconds t (UTC). */
void drv_sigv4_amz_date(long long t, char out[17]);

#endif
