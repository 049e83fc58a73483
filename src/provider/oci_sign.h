/* oci_sign.h — OCI API request signing (Oracle's "Signature Version 1":
 * draft-cavage-http-signatures-08, rsa-sha256, keyId =
 * TENANCY/USER/FINGERPRINT) and the API key's checks (an RSA private key
 * whose public half's MD5 fingerprint is the one the user uploaded), with
 * OpenSSL libcrypto. Pure: no I/O. The private key never appears in a
 * message. */
#ifndef DRV_OCI_SIGN_H
#define DRV_OCI_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* The signing string of a request: "date: D\n(request-target): m TARGET\n
 * host: H", and for a body (body != NULL) "\ncontent-length: N\n
 * content-type: CT\nx-content-sha256: S" where S is the body's base64
 * SHA-256 (written to sha_b64, 45 bytes, when not NULL). method is upper
 * or lower case; target is the path with its query, as sent. Malloc'd. */
char *drv_oci_signing_string(const char *method, const char *target, const char *host,
                             const char *date, const char *body, const char *content_type,
                             char sha_b64[45]);

/* The Authorization header's value for that request, signed with the PEM
 * private key (PKCS#1 or PKCS#8) as key_id; sha_b64 as above. Malloc'd;
 * NULL with err (a key OpenSSL cannot read or that is not RSA). */
char *drv_oci_authorization(const char *pem, const char *key_id, const char *method,
                            const char *target, const char *host, const char *date,
                            const char *body, const char *content_type, char sha_b64[45],
                            drv_error_t *err);

/* The fingerprint OCI shows for the key's public half: MD5 of its DER
 * SubjectPublicKeyInfo as lower-case hex pairs joined by ':' (48 bytes).
 * -1 with err (field "private_key") when the key is not a readable RSA key. */
int drv_oci_fingerprint(const char *pem, char out[48], drv_error_t *err);

/* An RFC 7231 date ("Thu, 05 Jan 2014 21:31:40 GMT") of epoch second t. */
void drv_oci_http_date(int64_t t, char out[32]);

#endif
