/* pgstore_tool.c — drives the PostgreSQL store backend (src/store/pg.c)
 * through the store's own API, for t/pgstore.sh: batches larger than one
 * pipeline round trip, and a batch that fails half-way.
 *
 *   pgstore_tool URL batch N    queue N upserts t/k0..k(N-1), then deletes of
 *                               every 10th key and a rewrite of k1, before
 *                               the writer starts: one commit; prints
 *                               "commits C"
 *   pgstore_tool URL bad N      N upserts t/x0.. whose op N/2 is not valid
 *                               UTF-8: the commit fails (the store exits 70)
 *   pgstore_tool URL load       prints "kind key body" per live record
 *   pgstore_tool URL held E     fenced by lease epoch E (drv_store_set_epoch):
 *                               one upsert t/held, committed under E
 *   pgstore_tool URL stale E    one upsert t/stale queued while not leading
 *                               (epoch -1), then the epoch becomes E before
 *                               the writer starts: the write must be refused
 *                               (prints "fenced: WHY", exits 75), never
 *                               committed under E
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"

static int print_one(void *ctx, const char *kind, const char *key, const char *body,
                     drv_error_t *err)
{
    printf("%s %s %s\n", kind, key, body);
    return 0;
}

static void on_fenced(void *ctx, const char *why)
{
    (void)ctx;
    printf("fenced: %s\n", why);
    fflush(stdout);
    _exit(75);
}

static void put(drv_store_t *st, uint64_t *seq, bool del, const char *key, const char *body)
{
    drv_store_op_t op = {.del = del, .kind = "t", .key = strdup(key),
                         .body = body ? strdup(body) : NULL, .seq = ++*seq};
    drv_store_enqueue(st, &op);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: pgstore_tool URL batch N | bad N | load | held E | stale E\n");
        return 2;
    }
    drv_error_t err;
    drv_store_t *st = drv_store_create(&drv_store_postgres, argv[1], &err);
    if (!st) {
        fprintf(stderr, "pgstore_tool: %s\n", err.message);
        return 1;
    }
    int rc = 0, n = argc > 3 ? atoi(argv[3]) : 0;
    uint64_t seq = 0;
    char key[32], body[64];
    if (strcmp(argv[2], "load") == 0) {
        rc = drv_store_load(st, print_one, NULL, &err);
    } else if (strcmp(argv[2], "batch") == 0 || strcmp(argv[2], "bad") == 0) {
        bool bad = strcmp(argv[2], "bad") == 0;
        for (int i = 0; i < n; i++) {
            snprintf(key, sizeof key, "%s%d", bad ? "x" : "k", i);
            snprintf(body, sizeof body, bad && i == n / 2 ? "{\"v\":\"\xff\"}" : "{\"v\":%d}", i);
            put(st, &seq, false, key, body);
        }
        for (int i = 0; !bad && i < n; i += 10) {
            snprintf(key, sizeof key, "k%d", i);
            put(st, &seq, true, key, NULL);
        }
        if (!bad && n > 1)
            put(st, &seq, false, "k1", "{\"v\":\"rewritten\"}");
        rc = drv_store_start(st, &err);
        if (rc == 0) {
            drv_store_wait(st, seq);
            printf("commits %llu\n", (unsigned long long)drv_store_commits(st));
        }
    } else if (strcmp(argv[2], "held") == 0 || strcmp(argv[2], "stale") == 0) {
        bool stale = strcmp(argv[2], "stale") == 0;
        drv_store_on_fenced(st, on_fenced, NULL);
        drv_store_set_epoch(st, stale ? -1 : n);
        put(st, &seq, false, stale ? "stale" : "held", "{\"v\":1}");
        drv_store_set_epoch(st, n);   /* stale: this head leads now, the write was made before */
        rc = drv_store_start(st, &err);
        if (rc == 0) {
            drv_store_wait(st, seq);
            printf("commits %llu\n", (unsigned long long)drv_store_commits(st));
        }
    } else {
        fprintf(stderr, "pgstore_tool: unknown command '%s'\n", argv[2]);
        drv_store_destroy(st);
        return 2;
    }
    if (rc < 0)
        fprintf(stderr, "pgstore_tool: %s\n", err.message);
    drv_store_destroy(st);
    return rc < 0 ? 1 : 0;
}
