/* s3_tool.c — a small command line over src/objstore/s3.h, for t/s3.sh
 * (built as build/t/s3_tool; not installed). The store comes from the
 * environment: S3_ENDPOINT, S3_REGION (us-east-1), S3_BUCKET,
 * S3_ACCESS_KEY, S3_SECRET_KEY, S3_PATH_STYLE (1; 0: virtual-hosted).
 *   presign METHOD KEY [EXPIRES [NOW]]       a presigned URL
 *   presign-part KEY UPLOAD PART [EXPIRES [NOW]]
 *   head KEY                                 "exists SIZE ETAG" or "absent"
 *   list PREFIX [MAX_KEYS]                   "KEY SIZE" lines, then "pages N"
 *   mp-create KEY                            the upload id
 *   mp-complete KEY UPLOAD ETAG...           (ETAG of part 1 first)
 *   mp-abort KEY UPLOAD
 *   delete KEY
 *   blob-key PREFIX HEX
 * Exit status: 0 done; on failure the error on stderr as "s3_tool: STATUS
 * CODE: message" and 3 when it is classed 403, 4 when 404, 1 otherwise;
 * 2 bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "objstore/s3.h"

static int usage(void)
{
    fprintf(stderr, "usage: s3_tool presign|presign-part|head|list|mp-create|mp-complete|"
                    "mp-abort|delete|blob-key ARGS (see t/s3_tool.c)\n");
    return 2;
}

static int failed(const drv_error_t *e)
{
    fprintf(stderr, "s3_tool: %d %s: %s\n", e->status, e->code, e->message);
    return e->status == 403 ? 3 : e->status == 404 ? 4 : 1;
}

static int print_key(void *ctx, const char *key, long long size, drv_error_t *err)
{
    printf("%s %lld\n", key, size);
    return 0;
}

static const char *env(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? v : dflt;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    drv_error_t e = {0};
    if (strcmp(cmd, "blob-key") == 0) {
        char key[DRV_S3_KEY_MAX + 1];
        if (argc != 4)
            return usage();
        if (drv_s3_blob_key(argv[2], argv[3], key, sizeof key, &e) < 0)
            return failed(&e);
        puts(key);
        return 0;
    }
    drv_s3_t *s = drv_s3_create(env("S3_ENDPOINT", ""), env("S3_REGION", "us-east-1"),
                                env("S3_BUCKET", ""), env("S3_ACCESS_KEY", ""),
                                env("S3_SECRET_KEY", ""), atoi(env("S3_PATH_STYLE", "1")), &e);
    if (!s)
        return failed(&e);
    int rc = 0;
    long long now = (long long)time(NULL);
    if (strcmp(cmd, "presign") == 0 && argc >= 4 && argc <= 6) {
        long expires = argc > 4 ? atol(argv[4]) : 3600;
        char *url = drv_s3_presign(s, argv[2], argv[3], NULL, argc > 5 ? atoll(argv[5]) : now,
                                   expires, &e);
        rc = url ? (puts(url), 0) : -1;
        free(url);
    } else if (strcmp(cmd, "presign-part") == 0 && argc >= 5 && argc <= 7) {
        long expires = argc > 5 ? atol(argv[5]) : 3600;
        char *url = drv_s3_presign_part(s, argv[2], argv[3], atoi(argv[4]),
                                        argc > 6 ? atoll(argv[6]) : now, expires, &e);
        rc = url ? (puts(url), 0) : -1;
        free(url);
    } else if (strcmp(cmd, "head") == 0 && argc == 3) {
        drv_s3_object_t o;
        rc = drv_s3_head(s, argv[2], &o, &e);
        if (rc == 0 && o.exists)
            printf("exists %lld %s\n", o.size, o.etag);
        else if (rc == 0)
            puts("absent");
    } else if (strcmp(cmd, "list") == 0 && (argc == 3 || argc == 4)) {
        int pages = 0;
        rc = drv_s3_list(s, argv[2], argc == 4 ? atoi(argv[3]) : 0, print_key, NULL, &pages, &e);
        if (rc == 0)
            printf("pages %d\n", pages);
    } else if (strcmp(cmd, "mp-create") == 0 && argc == 3) {
        char id[1024];
        rc = drv_s3_multipart_create(s, argv[2], id, sizeof id, &e);
        if (rc == 0)
            puts(id);
    } else if (strcmp(cmd, "mp-complete") == 0 && argc >= 5) {
        rc = drv_s3_multipart_complete(s, argv[2], argv[3], (const char *const *)argv + 4,
                                       argc - 4, &e);
    } else if (strcmp(cmd, "mp-abort") == 0 && argc == 4) {
        rc = drv_s3_multipart_abort(s, argv[2], argv[3], &e);
    } else if (strcmp(cmd, "delete") == 0 && argc == 3) {
        rc = drv_s3_delete(s, argv[2], &e);
    } else {
        drv_s3_destroy(s);
        return usage();
    }
    drv_s3_destroy(s);
    return rc < 0 ? failed(&e) : 0;
}
