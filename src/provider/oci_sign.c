/* oci_sign.c — OCI request signatures and API-key checks (see oci_sign.h). */
#define _GNU_SOURCE
#include "provider/oci_sign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

void drv_oci_http_date(int64_t t, char out[32])
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    snprintf(out, 32, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday,
             months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

char *drv_oci_signing_string(const char *method, const char *target, const char *host,
                             const char *date, const char *body, const char *content_type,
                             char sha_b64[45])
{
    char m[16];
    size_t i;
    for (i = 0; method[i] && i < sizeof m - 1; i++)
        m[i] = (char)(method[i] >= 'A' && method[i] <= 'Z' ? method[i] + 32 : method[i]);
    m[i] = '\0';
    char *s = NULL;
    int rc;
    if (!body) {
        rc = asprintf(&s, "date: %s\n(request-target): %s %s\nhost: %s", date, m, target, host);
    } else {
        unsigned char md[32];
        unsigned int mdlen = 0;
        char b64[45];
        if (EVP_Digest(body, strlen(body), md, &mdlen, EVP_sha256(), NULL) != 1)
            return NULL;
        EVP_EncodeBlock((unsigned char *)b64, md, (int)mdlen);
        if (sha_b64)
            memcpy(sha_b64, b64, 45);
        rc = asprintf(&s, "date: %s\n(request-target): %s %s\nhost: %s\ncontent-length: %zu\n"
                      "content-type: %s\nx-content-sha256: %s", date, m, target, host,
                      strlen(body), content_type, b64);
    }
    return rc < 0 ? NULL : s;
}

static EVP_PKEY *read_key(const char *pem, drv_error_t *err)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *k = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, (void *)"") : NULL;
    BIO_free(bio);
    if (!k || EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA) {
        EVP_PKEY_free(k);
        drv_err_invalid(err, "private_key", "private_key is not an unencrypted RSA private "
                        "key in PEM that OpenSSL can read");
        return NULL;
    }
    return k;
}

char *drv_oci_authorization(const char *pem, const char *key_id, const char *method,
                            const char *target, const char *host, const char *date,
                            const char *body, const char *content_type, char sha_b64[45],
                            drv_error_t *err)
{
    char *ss = drv_oci_signing_string(method, target, host, date, body, content_type, sha_b64);
    if (!ss) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    EVP_PKEY *k = read_key(pem, err);
    EVP_MD_CTX *md = k ? EVP_MD_CTX_new() : NULL;
    unsigned char sig[1024];
    size_t siglen = sizeof sig;
    char *auth = NULL;
    if (k && (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k) != 1 ||
              EVP_DigestSign(md, sig, &siglen, (const unsigned char *)ss, strlen(ss)) != 1))
        drv_err_internal(err, "cannot sign the request (rsa-sha256)");
    else if (k) {
        char b64[4 * ((sizeof sig + 2) / 3) + 1];
        EVP_EncodeBlock((unsigned char *)b64, sig, (int)siglen);
        if (asprintf(&auth, "Signature version=\"1\",headers=\"%s\",keyId=\"%s\","
                     "algorithm=\"rsa-sha256\",signature=\"%s\"",
                     body ? "date (request-target) host content-length content-type "
                            "x-content-sha256"
                          : "date (request-target) host",
                     key_id, b64) < 0) {
            auth = NULL;
            drv_err_internal(err, "out of memory");
        }
    }
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(k);
    free(ss);
    return auth;
}

int drv_oci_fingerprint(const char *pem, char out[48], drv_error_t *err)
{
    EVP_PKEY *k = read_key(pem, err);
    if (!k)
        return -1;
    unsigned char *der = NULL;
    int n = i2d_PUBKEY(k, &der);
    EVP_PKEY_free(k);
    unsigned char md[16];
    unsigned int mdlen = 0;
    int ok = n > 0 && EVP_Digest(der, (size_t)n, md, &mdlen, EVP_md5(), NULL) == 1 &&
             mdlen == 16;
    OPENSSL_free(der);
    if (!ok)
        return drv_err_internal(err, "cannot compute the key's fingerprint");
    for (int i = 0; i < 16; i++)
        snprintf(out + 3 * i, 4, "%02x%s", md[i], i < 15 ? ":" : "");
    return 0;
}
