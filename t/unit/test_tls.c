/* test_tls.c — head/tls.c's CA and server certificate (made once, kept,
 * made again for a new name under the same CA, and when less than a third
 * of its life is left; key modes; the chain verifies), common/pin.c's pin against libcrypto's own encoding of the
 * SubjectPublicKeyInfo, pin parsing, the loopback rule, and the cloud
 * user-data carrying the pin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pin.h"
#include "head/tls.h"
#include "provider/cloudw.h"

static X509 *load(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(x);
    return x;
}

/* the pin as libcrypto encodes the key: sha256(i2d(SubjectPublicKeyInfo)) */
static void openssl_pin(const char *path, char out[80])
{
    X509 *x = load(path);
    unsigned char *der = NULL, md[32];
    int n = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(x), &der);
    assert_true(n > 0);
    SHA256(der, (size_t)n, md);
    strcpy(out, "sha256:");
    for (int i = 0; i < 32; i++)
        sprintf(out + 7 + 2 * i, "%02x", md[i]);
    OPENSSL_free(der);
    X509_free(x);
}

static void test_auto_ca(void **st)
{
    (void)st;
    char dir[64] = "/tmp/drv-tls-XXXXXX", p[300], pin[80], want[80], pin2[80];
    assert_non_null(mkdtemp(dir));
    strcat(dir, "/tls");
    const char *names[] = {"10.1.2.3", "head.example"};
    int renewed = -1;
    drv_error_t err = {0};
    assert_int_equal(drv_tls_auto(dir, names, 2, &renewed, &err), 0);
    assert_int_equal(renewed, 1);
    struct stat sb;
    snprintf(p, sizeof p, "%s/server.key", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    snprintf(p, sizeof p, "%s/ca.key", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);

    snprintf(p, sizeof p, "%s/ca.crt", dir);
    char *pem = drv_pem_read_file(p, &err);
    assert_non_null(pem);
    assert_int_equal(drv_pin_of_pem(pem, pin, sizeof pin, &err), 0);
    openssl_pin(p, want);
    assert_string_equal(pin, want);
    free(pem);

    /* the server certificate verifies against the CA for its names */
    X509 *ca = load(p);
    snprintf(p, sizeof p, "%s/server.crt", dir);
    X509 *srv = load(p);
    assert_int_equal(X509_check_ip_asc(srv, "10.1.2.3", 0), 1);
    assert_int_equal(X509_check_host(srv, "head.example", 0, 0, NULL), 1);
    assert_int_equal(X509_check_ip_asc(srv, "127.0.0.1", 0), 1);
    assert_int_equal(X509_check_host(srv, "other.example", 0, 0, NULL), 0);
    X509_STORE *store = X509_STORE_new();
    X509_STORE_add_cert(store, ca);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, srv, NULL);
    assert_int_equal(X509_verify_cert(ctx), 1);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    X509_free(srv);
    X509_free(ca);

    /* a second start keeps both */
    assert_int_equal(drv_tls_auto(dir, names, 2, &renewed, &err), 0);
    assert_int_equal(renewed, 0);
    /* a new name: a new server certificate under the same CA */
    const char *more[] = {"10.1.2.3", "head.example", "10.9.9.9"};
    assert_int_equal(drv_tls_auto(dir, more, 3, &renewed, &err), 0);
    assert_int_equal(renewed, 1);
    snprintf(p, sizeof p, "%s/ca.crt", dir);
    openssl_pin(p, pin2);
    assert_string_equal(pin2, want);
    snprintf(p, sizeof p, "%s/server.crt", dir);
    srv = load(p);
    assert_int_equal(X509_check_ip_asc(srv, "10.9.9.9", 0), 1);
    X509_free(srv);

    /* a CA certificate without its key is refused, not replaced */
    snprintf(p, sizeof p, "%s/ca.key", dir);
    unlink(p);
    assert_int_equal(drv_tls_auto(dir, names, 2, &renewed, &err), -1);
    assert_non_null(strstr(err.message, "ca.key"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%.*s'", (int)(strlen(dir) - 4), dir);
    assert_int_equal(system(cmd), 0);
}

/* replace DIR/server.crt by one of the same key and names, signed by the
 * CA, whose life is [now - 300 days, now + days_left] */
static void age_server_cert(const char *dir, long days_left)
{
    char p[300];
    snprintf(p, sizeof p, "%s/ca.crt", dir);
    X509 *ca = load(p);
    snprintf(p, sizeof p, "%s/ca.key", dir);
    FILE *f = fopen(p, "r");
    EVP_PKEY *cak = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    snprintf(p, sizeof p, "%s/server.crt", dir);
    X509 *old = load(p);
    X509 *x = X509_dup(old);
    assert_non_null(x);
    X509_gmtime_adj(X509_getm_notBefore(x), -300L * 86400);
    X509_gmtime_adj(X509_getm_notAfter(x), days_left * 86400);
    assert_true(X509_sign(x, cak, EVP_sha256()) > 0);
    f = fopen(p, "w");
    PEM_write_X509(f, x);
    fclose(f);
    X509_free(x);
    X509_free(old);
    X509_free(ca);
    EVP_PKEY_free(cak);
}

static void test_renewal(void **st)
{
    (void)st;
    char dir[] = "/tmp/drv-tls-XXXXXX", p[300];
    assert_non_null(mkdtemp(dir));
    const char *names[] = {"10.1.2.3"};
    int renewed = -1;
    drv_error_t err = {0};
    assert_int_equal(drv_tls_auto(dir, names, 1, &renewed, &err), 0);
    /* 300 days gone, 200 left: more than a third of 500 -> kept */
    age_server_cert(dir, 200);
    assert_int_equal(drv_tls_auto(dir, names, 1, &renewed, &err), 0);
    assert_int_equal(renewed, 0);
    /* 300 gone, 100 left: less than a third of 400 -> made again, full life */
    age_server_cert(dir, 100);
    assert_int_equal(drv_tls_auto(dir, names, 1, &renewed, &err), 0);
    assert_int_equal(renewed, 1);
    snprintf(p, sizeof p, "%s/server.crt", dir);
    X509 *x = load(p);
    int days, secs;
    assert_true(ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x)));
    assert_true(days >= DRV_TLS_SERVER_DAYS - 1);
    X509_free(x);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_pin_parse(void **st)
{
    (void)st;
    char out[80];
    drv_error_t err;
    const char *good = "sha256:ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789";
    assert_int_equal(drv_pin_parse(good, out, sizeof out, &err), 0);
    assert_string_equal(out + 7, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
    assert_int_equal(drv_pin_parse("sha256:abc", out, sizeof out, &err), -1);
    assert_int_equal(drv_pin_parse("md5:" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                   out, sizeof out, &err), -1);
    assert_int_equal(drv_pin_parse("sha256:zzcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
                                   out, sizeof out, &err), -1);
    assert_int_equal(drv_pin_of_pem("no certificate here", out, sizeof out, &err), -1);
    assert_int_equal(drv_pin_of_pem("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                                    out, sizeof out, &err), -1);
    assert_int_equal(drv_pin_of_pem("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                                    out, sizeof out, &err), -1);
}

static void test_loopback(void **st)
{
    (void)st;
    assert_true(drv_url_is_loopback("http://127.0.0.1:7480"));
    assert_true(drv_url_is_loopback("http://127.8.9.1"));
    assert_true(drv_url_is_loopback("http://localhost:1/x"));
    assert_true(drv_url_is_loopback("http://[::1]:7480"));
    assert_false(drv_url_is_loopback("http://10.0.0.1:7480"));
    assert_false(drv_url_is_loopback("http://head.example:7480"));
    assert_false(drv_url_is_loopback("http://[2001:db8::1]:7480"));
    assert_false(drv_url_is_loopback("http://127.0.0.1.example.com"));
}

static void test_user_data(void **st)
{
    (void)st;
    drv_node_launch_t l;
    memset(&l, 0, sizeof l);
    strcpy(l.node_id, "n1");
    strcpy(l.gpus, "auto");
    strcpy(l.join_token, "drvj_x");
    strcpy(l.cloud.head_url, "https://10.0.0.1:7480");
    char *s = drv_cloud_boot_script(&l);
    assert_non_null(s);
    assert_null(strstr(s, "--ca-hash"));
    free(s);
    strcpy(l.cloud.ca_hash, "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    s = drv_cloud_boot_script(&l);
    assert_non_null(s);
    assert_non_null(strstr(s, "--ca-hash 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'"));
    free(s);
    strcpy(l.cloud.ca_hash, "sha256:'; rm -rf /");
    assert_null(drv_cloud_boot_script(&l));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_ca),
        cmocka_unit_test(test_renewal),
        cmocka_unit_test(test_pin_parse),
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_user_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
