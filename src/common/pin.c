/* pin.c — see pin.h. */
#include "common/pin.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <strings.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* one DER element at p (of at most end-p bytes): its content's start and
 * length, and the whole element's length */
static int der_elem(const unsigned char *p, const unsigned char *end, int *tag,
                    const unsigned char **content, size_t *clen, size_t *total)
{
    if (end - p < 2)
        return -1;
    *tag = p[0];
    size_t len = p[1], hdr = 2;
    if (len & 0x80) {
        size_t nb = len & 0x7f;
        if (nb == 0 || nb > 4 || (size_t)(end - p) < 2 + nb)
            return -1;
        len = 0;
        for (size_t i = 0; i < nb; i++)
            len = len << 8 | p[2 + i];
        hdr += nb;
    }
    if (len > (size_t)(end - p) - hdr)
        return -1;
    *content = p + hdr;
    *clen = len;
    *total = hdr + len;
    return 0;
}

int drv_pin_of_pem(const char *pem, char *out, size_t n, drv_error_t *err)
{
    const char *b = pem ? strstr(pem, "-----BEGIN CERTIFICATE-----") : NULL;
    const char *e = b ? strstr(b, "-----END CERTIFICATE-----") : NULL;
    if (!b || !e)
        return drv_err_invalid(err, "ca", "not a PEM certificate (no BEGIN/END CERTIFICATE)");
    b += strlen("-----BEGIN CERTIFICATE-----");
    unsigned char *der = malloc((size_t)(e - b));
    if (!der)
        return drv_err_internal(err, "out of memory");
    size_t dl = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (const char *p = b; p < e; p++) {
        int v = b64val((unsigned char)*p);
        if (v < 0)
            continue;   /* newlines, '=' padding */
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            der[dl++] = (unsigned char)(acc >> bits);
        }
    }
    const unsigned char *end = der + dl, *c, *t;
    size_t cl, tot, tl;
    int tag, rc = -1;
    /* Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version?,
     * serial, signature, issuer, validity, subject, subjectPublicKeyInfo, ... } } */
    if (der_elem(der, end, &tag, &c, &cl, &tot) < 0 || tag != 0x30 ||
        der_elem(c, c + cl, &tag, &t, &tl, &tot) < 0 || tag != 0x30)
        goto bad;
    const unsigned char *p = t, *te = t + tl;
    if (der_elem(p, te, &tag, &c, &cl, &tot) < 0)
        goto bad;
    if (tag == 0xa0)
        p += tot;
    for (int i = 0; i < 5; i++) {   /* serial, signature, issuer, validity, subject */
        if (der_elem(p, te, &tag, &c, &cl, &tot) < 0)
            goto bad;
        p += tot;
    }
    if (der_elem(p, te, &tag, &c, &cl, &tot) < 0 || tag != 0x30)
        goto bad;
    unsigned char h[32];
    drv_sha256(p, tot, h);
    if (n < 7 + 65) {
        drv_err_internal(err, "pin buffer too small");
        goto out;
    }
    memcpy(out, "sha256:", 7);
    for (int i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", h[i]);
    rc = 0;
    goto out;
bad:
    drv_err_invalid(err, "ca", "not a well-formed X.509 certificate");
out:
    free(der);
    return rc;
}

int drv_pin_parse(const char *s, char *out, size_t n, drv_error_t *err)
{
    if (!s || strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64 || n < 7 + 65)
        return drv_err_invalid(err, "ca_hash",
                               "bad CA hash \"%s\": want sha256: and 64 hex digits (from "
                               "`drover nodepool join-token` or the head's DATA_DIR/tls/ca.hash)",
                               s ? s : "");
    for (int i = 7; i < 7 + 64; i++)
        if (!isxdigit((unsigned char)s[i]))
            return drv_err_invalid(err, "ca_hash", "bad CA hash \"%s\": not hex", s);
    for (int i = 0; i <= 7 + 64; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    return 0;
}

bool drv_url_is_loopback(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    char host[256];
    if (*p == '[') {
        const char *e = strchr(p, ']');
        snprintf(host, sizeof host, "%.*s", e ? (int)(e - p - 1) : 0, p + 1);
    } else {
        snprintf(host, sizeof host, "%.*s", (int)strcspn(p, ":/?#"), p);
    }
    if (strcasecmp(host, "localhost") == 0)
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}


char *drv_pem_read_file(const char *path, drv_error_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        drv_err_invalid(err, "tls", "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20;
    char *b = malloc(cap + 1);
    size_t n = b ? fread(b, 1, cap, f) : 0;
    bool more = b && n == cap && fgetc(f) != EOF;
    fclose(f);
    if (!b || more) {
        free(b);
        drv_err_invalid(err, "tls", "%s: %s", path, b ? "larger than 1 MiB" : "out of memory");
        return NULL;
    }
    b[n] = '\0';
    return b;
}
