/* tls.c — see tls.h. P-256 keys, SHA-256 signatures. */
#include "head/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/pin.h"
#include "store/pg_ca.h"

char *drv_tls_read_file(const char *path, drv_error_t *err)
{
    return drv_pem_read_file(path, err);
}

static int write_pem(const char *path, mode_t mode, X509 *x, EVP_PKEY *k, drv_error_t *err)
{
    char tmp[800];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return drv_err_internal(err, "cannot write %s: %s", tmp, strerror(errno));
    }
    int ok = x ? PEM_write_X509(f, x) : PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0 || !ok || rename(tmp, path) < 0) {
        unlink(tmp);
        return drv_err_internal(err, "cannot write %s", path);
    }
    return 0;
}

static X509 *load_cert(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    return x;
}

static EVP_PKEY *load_key(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    return k;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!e)
        return -1;
    int ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok ? 0 : -1;
}

/* a certificate for key, signed by ca_key (self-signed when ca is NULL) */
static X509 *make_cert(EVP_PKEY *key, const char *cn, long life_s, X509 *ca, EVP_PKEY *ca_key,
                       const char *san)
{
    X509 *x = X509_new();
    unsigned char serial[16];
    if (!x || RAND_bytes(serial, sizeof serial) != 1)
        goto bad;
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    ASN1_INTEGER *sn = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
    BN_free(bn);
    if (!sn || !X509_set_serialNumber(x, sn)) {
        ASN1_INTEGER_free(sn);
        goto bad;
    }
    ASN1_INTEGER_free(sn);
    X509_NAME *name = X509_NAME_new();
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"drover", -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    int ok = X509_set_version(x, 2) && X509_set_subject_name(x, name) &&
             X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : name) &&
             /* 5 min back for clocks behind ours (a tenth of a short test life) */
             X509_gmtime_adj(X509_getm_notBefore(x), life_s >= 3000 ? -300 : -(life_s / 10)) &&
             X509_time_adj_ex(X509_getm_notAfter(x), (int)(life_s / 86400), life_s % 86400, NULL) &&
             X509_set_pubkey(x, key);
    X509_NAME_free(name);
    if (!ok)
        goto bad;
    X509 *iss = ca ? ca : x;
    if (ca) {
        if (add_ext(x, iss, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
            add_ext(x, iss, NID_key_usage, "critical,digitalSignature,keyEncipherment") < 0 ||
            add_ext(x, iss, NID_ext_key_usage, "serverAuth") < 0 ||
            add_ext(x, iss, NID_subject_alt_name, san) < 0)
            goto bad;
    } else if (add_ext(x, iss, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
               add_ext(x, iss, NID_key_usage, "critical,keyCertSign,cRLSign") < 0) {
        goto bad;
    }
    add_ext(x, iss, NID_subject_key_identifier, "hash");
    if (ca)
        add_ext(x, iss, NID_authority_key_identifier, "keyid:always");
    if (!X509_sign(x, ca ? ca_key : key, EVP_sha256()))
        goto bad;
    return x;
bad:
    X509_free(x);
    return NULL;
}

/* the SAN list: "DNS:localhost,IP:127.0.0.1,..." (names deduplicated) */
static void san_list(const char *const *names, size_t n, char *out, size_t cap)
{
    snprintf(out, cap, "DNS:localhost,IP:127.0.0.1,IP:::1");
    for (size_t i = 0; i < n; i++) {
        const char *s = names[i];
        if (!s || !*s || strcmp(s, "localhost") == 0 || strcmp(s, "127.0.0.1") == 0 ||
            strcmp(s, "::1") == 0 || strcmp(s, "0.0.0.0") == 0 || strcmp(s, "::") == 0 ||
            strchr(s, ','))
            continue;
        unsigned char a[16];
        bool ip = inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
        char item[300];
        snprintf(item, sizeof item, ",%s:%s", ip ? "IP" : "DNS", s);
        if (strstr(out, item))
            continue;
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s", item);
    }
}

/* whether x's SANs hold every name of want, a san_list() */
static bool sans_cover(X509 *x, const char *want)
{
    GENERAL_NAMES *g = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    if (!g)
        return false;
    char have[4096] = "";
    for (int i = 0; i < sk_GENERAL_NAME_num(g); i++) {
        GENERAL_NAME *n = sk_GENERAL_NAME_value(g, i);
        char item[300] = "";
        if (n->type == GEN_DNS)
            snprintf(item, sizeof item, ",DNS:%s,", (const char *)ASN1_STRING_get0_data(n->d.dNSName));
        else if (n->type == GEN_IPADD) {
            char a[64] = "";
            int l = ASN1_STRING_length(n->d.iPAddress);
            inet_ntop(l == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(n->d.iPAddress), a, sizeof a);
            snprintf(item, sizeof item, ",IP:%s,", a);
        }
        size_t hl = strlen(have);
        snprintf(have + hl, sizeof have - hl, "%s", item);
    }
    GENERAL_NAMES_free(g);
    char w[4096];
    snprintf(w, sizeof w, "%s", want);
    for (char *save = NULL, *t = strtok_r(w, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char item[300];
        snprintf(item, sizeof item, ",%s,", t);
        if (!strstr(have, item))
            return false;
    }
    return true;
}

/* less than a third of its life left (or unreadable times) */
static bool needs_renewal(X509 *x)
{
    int d1, s1, d2, s2;
    if (!ASN1_TIME_diff(&d1, &s1, X509_get0_notBefore(x), X509_get0_notAfter(x)) ||
        !ASN1_TIME_diff(&d2, &s2, NULL, X509_get0_notAfter(x)))
        return true;
    double life = d1 * 86400.0 + s1, left = d2 * 86400.0 + s2;
    return left < life / 3;
}

int drv_tls_auto(const char *dir, const char *const *names, size_t nnames, int *renewed,
                 drv_error_t *err)
{
    return drv_tls_auto_life(dir, names, nnames, DRV_TLS_SERVER_DAYS * 86400L, renewed, err);
}

int drv_tls_auto_life(const char *dir, const char *const *names, size_t nnames, long life_s,
                      int *renewed, drv_error_t *err)
{
    char ca_crt[600], ca_key[600], srv_crt[600], srv_key[600], hash_path[600], san[4096];
    *renewed = 0;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return drv_err_internal(err, "cannot create %s: %s", dir, strerror(errno));
    snprintf(ca_crt, sizeof ca_crt, "%s/ca.crt", dir);
    snprintf(ca_key, sizeof ca_key, "%s/ca.key", dir);
    snprintf(srv_crt, sizeof srv_crt, "%s/server.crt", dir);
    snprintf(srv_key, sizeof srv_key, "%s/server.key", dir);
    snprintf(hash_path, sizeof hash_path, "%s/ca.hash", dir);
    san_list(names, nnames, san, sizeof san);
    int rc = -1;
    X509 *ca = load_cert(ca_crt), *srv = NULL;
    EVP_PKEY *cak = load_key(ca_key), *sk = NULL;
    if (!ca != !cak) {
        drv_err_internal(err, "%s/ has one of ca.crt and ca.key but not the other: restore "
                         "it, or remove both to make a new CA (agents then need a new pin)", dir);
        goto out;
    }
    if (!ca) {
        if (!(cak = EVP_EC_gen("P-256")) ||
            !(ca = make_cert(cak, "drover head CA", DRV_TLS_CA_DAYS * 86400L, NULL, NULL, NULL)) ||
            write_pem(ca_key, 0600, NULL, cak, err) < 0 || write_pem(ca_crt, 0644, ca, NULL, err) < 0) {
            if (!err || !err->message[0])
                drv_err_internal(err, "cannot make a CA in %s", dir);
            goto out;
        }
        unlink(srv_crt);   /* signed by another CA */
    }
    srv = load_cert(srv_crt);
    sk = load_key(srv_key);
    if (!srv || !sk || needs_renewal(srv) || !sans_cover(srv, san) ||
        X509_verify(srv, cak) != 1 || X509_check_private_key(srv, sk) != 1) {
        X509_free(srv);
        EVP_PKEY_free(sk);
        srv = NULL;
        if (!(sk = EVP_EC_gen("P-256")) ||
            !(srv = make_cert(sk, "drover head", life_s, ca, cak, san))) {
            drv_err_internal(err, "cannot make a server certificate (names %s)", san);
            goto out;
        }
        if (write_pem(srv_key, 0600, NULL, sk, err) < 0 || write_pem(srv_crt, 0644, srv, NULL, err) < 0)
            goto out;
        *renewed = 1;
    }
    char *pem = drv_tls_read_file(ca_crt, err), pin[80];
    if (!pem || drv_pin_of_pem(pem, pin, sizeof pin, err) < 0) {
        free(pem);
        goto out;
    }
    free(pem);
    FILE *f = fopen(hash_path, "w");
    if (f) {
        fprintf(f, "%s\n", pin);
        fclose(f);
    }
    rc = 0;
out:
    X509_free(ca);
    X509_free(srv);
    EVP_PKEY_free(cak);
    EVP_PKEY_free(sk);
    return rc;
}

/* x's or k's PEM (malloc'd), NULL on failure */
static char *pem_of(X509 *x, EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = NULL, *data;
    int ok = b && (x ? PEM_write_bio_X509(b, x)
                     : PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL));
    long n = ok ? BIO_get_mem_data(b, &data) : 0;
    if (n > 0 && (s = malloc((size_t)n + 1))) {
        memcpy(s, data, (size_t)n);
        s[n] = '\0';
    }
    BIO_free(b);
    return s;
}

/* a and b, PEM texts, the same but for surrounding white space */
static bool same_pem(const char *a, const char *b)
{
    while (*a == ' ' || *a == '\n' || *a == '\r')
        a++;
    while (*b == ' ' || *b == '\n' || *b == '\r')
        b++;
    size_t la = strlen(a), lb = strlen(b);
    while (la && strchr(" \r\n", a[la - 1]))
        la--;
    while (lb && strchr(" \r\n", b[lb - 1]))
        lb--;
    return la == lb && memcmp(a, b, la) == 0;
}

int drv_tls_share_ca(const char *dir, const char *store_url, int *taken, drv_error_t *err)
{
    char ca_crt[600], ca_key[600], srv_crt[600];
    char *cert = NULL, *key = NULL, *dbc = NULL, *dbk = NULL;
    X509 *ca = NULL;
    EVP_PKEY *cak = NULL;
    int rc = -1;
    *taken = 0;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return drv_err_internal(err, "cannot create %s: %s", dir, strerror(errno));
    snprintf(ca_crt, sizeof ca_crt, "%s/ca.crt", dir);
    snprintf(ca_key, sizeof ca_key, "%s/ca.key", dir);
    snprintf(srv_crt, sizeof srv_crt, "%s/server.crt", dir);
    bool have_c = access(ca_crt, F_OK) == 0, have_k = access(ca_key, F_OK) == 0;
    if (have_c != have_k)
        return drv_err_internal(err, "%s/ has one of ca.crt and ca.key but not the other: "
                                "restore it, or remove both to take the heads' CA", dir);
    if (have_c) {
        if (!(cert = drv_tls_read_file(ca_crt, err)) || !(key = drv_tls_read_file(ca_key, err)))
            goto out;
    } else if (!(cak = EVP_EC_gen("P-256")) ||
               !(ca = make_cert(cak, "drover head CA", DRV_TLS_CA_DAYS * 86400L, NULL, NULL,
                                NULL)) ||
               !(cert = pem_of(ca, NULL)) || !(key = pem_of(NULL, cak))) {
        drv_err_internal(err, "cannot make a CA");
        goto out;
    }
    if (drv_pg_ca_exchange(store_url, cert, key, &dbc, &dbk, err) < 0)
        goto out;
    if (have_c) {
        if (!same_pem(cert, dbc)) {
            char mine[80] = "", theirs[80] = "";
            drv_error_t e2;
            drv_pin_of_pem(cert, mine, sizeof mine, &e2);
            drv_pin_of_pem(dbc, theirs, sizeof theirs, &e2);
            drv_err(err, 409, "conflict", "", "%s holds a CA (pin %s) other than the heads' CA "
                    "in the database (pin %s): remove ca.crt and ca.key there to take the "
                    "shared one (agents pinned to this head's CA then need the new pin), or "
                    "give every head --tls-cert/--tls-key", dir, mine, theirs);
            goto out;
        }
        rc = 0;
        goto out;
    }
    *taken = !same_pem(cert, dbc);
    X509_free(ca);
    EVP_PKEY_free(cak);
    ca = NULL;
    cak = NULL;
    BIO *cb = BIO_new_mem_buf(dbc, -1), *kb = BIO_new_mem_buf(dbk, -1);
    ca = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    cak = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    BIO_free(cb);
    BIO_free(kb);
    if (!ca || !cak || X509_check_private_key(ca, cak) != 1) {
        drv_err_internal(err, "the heads' CA in the database (table head_ca) is not a "
                         "matching PEM certificate and key");
        goto out;
    }
    unlink(srv_crt);   /* signed by another CA, if any */
    if (write_pem(ca_key, 0600, NULL, cak, err) < 0 || write_pem(ca_crt, 0644, ca, NULL, err) < 0)
        goto out;
    rc = 0;
out:
    X509_free(ca);
    EVP_PKEY_free(cak);
    free(cert);
    if (key) {
        memset(key, 0, strlen(key));
        free(key);
    }
    free(dbc);
    if (dbk) {
        memset(dbk, 0, strlen(dbk));
        free(dbk);
    }
    return rc;
}

void drv_tls_material_free(drv_tls_material_t *m)
{
    free(m->cert_pem);
    free(m->key_pem);
    free(m->ca_pem);
    memset(m, 0, sizeof *m);
}

/* the host of "HOST:PORT", "[V6]:PORT" or a URL */
static void host_of(const char *s, char *out, size_t n)
{
    const char *p = strstr(s, "://");
    p = p ? p + 3 : s;
    if (*p == '[') {
        const char *e = strchr(p, ']');
        snprintf(out, n, "%.*s", e ? (int)(e - p - 1) : 0, p + 1);
        return;
    }
    size_t l = strcspn(p, ":/");
    snprintf(out, n, "%.*s", (int)l, p);
}

int drv_tls_load(const char *data_dir, bool autotls, const char *cert, const char *key,
                 const char *listen, const char *advertise, const char *gateway_listen,
                 long life_s, drv_tls_material_t *m, drv_error_t *err)
{
    memset(m, 0, sizeof *m);
    char dir[600], cp[700], kp[700], h1[300] = "", h2[300] = "", h3[300] = "";
    if (autotls) {
        snprintf(dir, sizeof dir, "%s/tls", data_dir);
        host_of(listen, h1, sizeof h1);
        if (advertise && *advertise)
            host_of(advertise, h2, sizeof h2);
        if (gateway_listen && *gateway_listen)
            host_of(gateway_listen, h3, sizeof h3);
        const char *names[] = {h1, h2, h3};
        int renewed = 0;
        if (drv_tls_auto_life(dir, names, 3, life_s > 0 ? life_s : DRV_TLS_SERVER_DAYS * 86400L,
                              &renewed, err) < 0)
            return -1;
        m->renewed = renewed;
        snprintf(cp, sizeof cp, "%s/server.crt", dir);
        snprintf(kp, sizeof kp, "%s/server.key", dir);
        snprintf(m->ca_file, sizeof m->ca_file, "%s/ca.crt", dir);
        cert = cp;
        key = kp;
    }
    if (!(m->cert_pem = drv_tls_read_file(cert, err)) || !(m->key_pem = drv_tls_read_file(key, err)))
        goto bad;
    if (autotls) {
        if (!(m->ca_pem = drv_tls_read_file(m->ca_file, err)))
            goto bad;
    } else {   /* the chain's last certificate */
        const char *last = NULL;
        for (const char *p = m->cert_pem; (p = strstr(p, "-----BEGIN CERTIFICATE-----")); p++)
            last = p;
        if (!last) {
            drv_err_invalid(err, "tls-cert", "%s holds no PEM certificate", cert);
            goto bad;
        }
        if (!(m->ca_pem = strdup(last))) {
            drv_err_internal(err, "out of memory");
            goto bad;
        }
        snprintf(m->ca_file, sizeof m->ca_file, "%s", cert);
    }
    if (drv_pin_of_pem(m->ca_pem, m->ca_hash, sizeof m->ca_hash, err) < 0 ||
        drv_tls_pair_ok(m->cert_pem, m->key_pem, err) < 0)
        goto bad;
    return 0;
bad:
    drv_tls_material_free(m);
    return -1;
}

int drv_tls_pair_ok(const char *cert_pem, const char *key_pem, drv_error_t *err)
{
    BIO *cb = BIO_new_mem_buf(cert_pem, -1), *kb = BIO_new_mem_buf(key_pem, -1);
    X509 *x = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    int rc = x && k && X509_check_private_key(x, k) == 1 ? 0 : -1;
    if (rc < 0)
        drv_err_invalid(err, "tls-cert", "the TLS certificate and key are not a matching PEM "
                        "pair");
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(cb);
    BIO_free(kb);
    return rc;
}

int64_t drv_tls_not_after(const char *cert_pem)
{
    BIO *b = BIO_new_mem_buf(cert_pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    int64_t t = -1;
    struct tm tm;
    if (x && ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1)
        t = (int64_t)timegm(&tm);
    X509_free(x);
    BIO_free(b);
    return t;
}
