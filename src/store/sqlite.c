/* sqlite.c — the embedded SQLite backend of the durable store.
 *
 * One database file DATA_DIR/drover.db in WAL mode with synchronous=FULL:
 * a commit is durable when it returns. Schema changes are versioned
 * migrations applied in order at open, each in its own transaction and
 * recorded in schema_migrations. Only the store's writer thread (and the
 * loader, before it starts) touches the connection.
 */
#include "store/store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

typedef struct sqlite_backend {
    sqlite3 *db;
    char path[1024];
    sqlite3_stmt *put, *del;
} sqlite_backend_t;

/* Versioned migrations: append, never edit a released one. */
static const char *const migrations[] = {
    /* 1: the record table */
    "CREATE TABLE objects ("
    "  kind TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  body TEXT NOT NULL,"
    "  PRIMARY KEY (kind, key)"
    ") WITHOUT ROWID;",
};
#define N_MIGRATIONS (sizeof migrations / sizeof migrations[0])

static int exec(sqlite3 *db, const char *sql, drv_error_t *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        drv_err_internal(err, "sqlite: %s (in: %.80s)", msg ? msg : "?", sql);
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int current_version(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int v = 0;
    if (sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(version),0) FROM schema_migrations", -1,
                           &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

static int migrate(sqlite3 *db, drv_error_t *err)
{
    if (exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                 " version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)", err) < 0)
        return -1;
    int v = current_version(db);
    if (v > (int)N_MIGRATIONS)
        return drv_err_internal(err, "database schema version %d is newer than this "
                                "droverd understands (%zu); upgrade droverd",
                                v, N_MIGRATIONS);
    for (size_t i = (size_t)v; i < N_MIGRATIONS; i++) {
        char rec[128];
        snprintf(rec, sizeof rec, "INSERT INTO schema_migrations VALUES (%zu, %lld)", i + 1,
                 (long long)(drv_now_ms() / 1000));
        if (exec(db, "BEGIN IMMEDIATE", err) < 0)
            return -1;
        if (exec(db, migrations[i], err) < 0 || exec(db, rec, err) < 0) {
            exec(db, "ROLLBACK", NULL);
            drv_err_prefix(err, "schema migration %zu", i + 1);
            return -1;
        }
        if (exec(db, "COMMIT", err) < 0)
            return -1;
    }
    return 0;
}

static void sq_close(void *b)
{
    sqlite_backend_t *s = b;
    if (!s)
        return;
    sqlite3_finalize(s->put);
    sqlite3_finalize(s->del);
    sqlite3_close(s->db);
    free(s);
}

static void *sq_open(const char *dir, drv_error_t *err)
{
    sqlite_backend_t *s = calloc(1, sizeof *s);
    if (!s) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    char *path = s->path;
    snprintf(s->path, sizeof s->path, "%s/drover.db", dir);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                        SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        drv_err_internal(err, "cannot open %s: %s", path,
                         s->db ? sqlite3_errmsg(s->db) : "out of memory");
        goto error;
    }
    sqlite3_busy_timeout(s->db, 5000);
    if (exec(s->db, "PRAGMA journal_mode=WAL", err) < 0 ||
        exec(s->db, "PRAGMA synchronous=FULL", err) < 0 ||
        exec(s->db, "PRAGMA foreign_keys=ON", err) < 0 || migrate(s->db, err) < 0)
        goto error;
    if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO objects(kind,key,body) VALUES(?,?,?)",
                           -1, &s->put, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db, "DELETE FROM objects WHERE kind=? AND key=?", -1, &s->del,
                           NULL) != SQLITE_OK) {
        drv_err_internal(err, "sqlite prepare: %s", sqlite3_errmsg(s->db));
        goto error;
    }
    return s;
error:
    sq_close(s);
    return NULL;
}

static int sq_load(void *b, drv_store_load_fn fn, void *ctx, drv_error_t *err)
{
    sqlite_backend_t *s = b;
    sqlite3_stmt *st = NULL;
    int rc = 0;
    /* users before tokens before the rest: parents load before children */
    if (sqlite3_prepare_v2(s->db, "SELECT kind,key,body FROM objects ORDER BY "
                           DRV_STORE_LOAD_ORDER ", key", -1, &st, NULL) != SQLITE_OK)
        return drv_err_internal(err, "sqlite: %s", sqlite3_errmsg(s->db));
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        if (fn(ctx, (const char *)sqlite3_column_text(st, 0),
               (const char *)sqlite3_column_text(st, 1),
               (const char *)sqlite3_column_text(st, 2), err) < 0) {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && r != SQLITE_DONE)
        rc = drv_err_internal(err, "sqlite load: %s", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    return rc;
}

static int sq_commit(void *b, const drv_store_op_t *ops, size_t n, drv_error_t *err)
{
    sqlite_backend_t *s = b;
    if (exec(s->db, "BEGIN IMMEDIATE", err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *st = ops[i].del ? s->del : s->put;
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, ops[i].kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, ops[i].key, -1, SQLITE_STATIC);
        if (!ops[i].del)
            sqlite3_bind_text(st, 3, ops[i].body, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE) {
            drv_err_internal(err, "sqlite write %s/%s: %s", ops[i].kind, ops[i].key,
                             sqlite3_errmsg(s->db));
            sqlite3_reset(st);
            exec(s->db, "ROLLBACK", NULL);
            return -1;
        }
        sqlite3_reset(st);
    }
    return exec(s->db, "COMMIT", err);
}

static int sq_schema_version(void *b)
{
    return current_version(((sqlite_backend_t *)b)->db);
}

static const char *sq_where(void *b)
{
    return ((sqlite_backend_t *)b)->path;
}

const drv_store_backend_t drv_store_sqlite = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .load = sq_load,
    .commit = sq_commit,
    .schema_version = sq_schema_version,
    .where = sq_where,
};
