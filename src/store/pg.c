/* pg.c — the PostgreSQL backend of the durable store (libpq).
 *
 * `droverd --store postgres://USER@HOST:PORT/DB?...` keeps the record log in
 * the table objects(kind, key, body, seq) of that database instead of
 * DATA_DIR/drover.db. Every write takes the next value of the sequence
 * objects_seq, so seq grows with every write in commit order (one writer,
 * the store's writer thread); a delete keeps its row as a tombstone (body
 * NULL, a fresh seq), so that a reader following the log by seq (a standby
 * head, later) sees deletes too. Load skips tombstones.
 *
 * Schema changes are versioned migrations recorded in schema_migrations,
 * applied at open in one transaction under an advisory lock (two heads
 * starting at once migrate once); a database newer than this binary is
 * refused.
 *
 * A commit is one transaction for all the queued writes (group commit),
 * sent in pipeline mode in one round trip: BEGIN, the fence, NOTIFY, the
 * writes as arrays (one statement per run of upserts or of deletes:
 * commit_arrays), COMMIT. When that fails for a reason of its own, the
 * batch goes once more a statement per write (commit_once, in chunks of
 * CHUNK statements per round trip), which names the write that fails. The answers to one chunk are a few bytes per
 * statement, far below the socket buffers, so blocking mode cannot deadlock.
 * The transaction is fenced (issue 17, store/lease.c): right after BEGIN,
 * drover_fence(epoch) takes the lease row FOR SHARE and raises DRV01 unless
 * the lease is still this head's epoch and unexpired, so a deposed leader's
 * commit aborts whole (error code DRV_STORE_FENCED) and a takeover, which
 * updates that row, waits for a commit in flight to end. Each write records
 * the epoch it was made under (objects.epoch): the one its ops were queued
 * with (store.c stamps it, and refuses a batch of writes queued when this
 * head did not lead); one epoch a batch. The session runs with synchronous_commit=on whatever the
 * server's default: COMMIT returns when the write is durable.
 *
 * Tombstones do not stay for ever: the leader's lease thread removes those
 * every head has applied (store/lease.c trim_log) and records the bound in
 * log_trim; load starts the follow at that bound or above.
 *
 * Threads: the connection is used by open/load (before the writer starts)
 * and then by the writer thread only; schema_version is cached at open.
 */
#include "store/store.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define CHUNK 256                       /* statements per pipeline round trip */
#define TEXT_OID 25
#define INT8_OID 20
#define TEXT_ARRAY_OID 1009
#define MIGRATION_LOCK 0x64726f766572LL /* pg_advisory_xact_lock key: "drover" */

typedef struct pg_backend {
    PGconn *conn;
    char where[512];   /* the URL with its password masked, for messages */
    int version;
    char epoch_s[24];          /* the batch's lease epoch (0 = none), for its statements */
    uint64_t loaded_seq;       /* the highest seq load saw (tombstones too) */
} pg_backend_t;

/* Versioned migrations: append, never edit a released one. */
static const char *const migrations[] = {
    /* 1: the record log */
    "CREATE SEQUENCE objects_seq AS bigint;"
    "CREATE TABLE objects ("
    "  kind text NOT NULL,"
    "  key text NOT NULL,"
    "  body text,"                       /* NULL: deleted (a tombstone) */
    "  seq bigint NOT NULL,"
    "  PRIMARY KEY (kind, key));"
    "CREATE UNIQUE INDEX objects_by_seq ON objects (seq);",
    /* 2: several heads (issue 17): who wrote a record (its lease epoch),
     * the leader lease, its history, the heads seen, and the fence */
    "ALTER TABLE objects ADD COLUMN epoch bigint NOT NULL DEFAULT 0;"
    "CREATE TABLE lease ("
    "  id integer PRIMARY KEY CHECK (id = 1),"
    "  holder text NOT NULL,"
    "  url text NOT NULL,"
    "  epoch bigint NOT NULL,"
    "  expires timestamptz NOT NULL,"
    "  taken_at timestamptz NOT NULL);"
    "INSERT INTO lease VALUES (1, '', '', 0, '-infinity', '-infinity');"
    "CREATE TABLE lease_history ("
    "  epoch bigint PRIMARY KEY,"
    "  holder text NOT NULL,"
    "  url text NOT NULL,"
    "  taken_at timestamptz NOT NULL,"
    "  after_expiry_ms bigint NOT NULL,"  /* how long after the previous lease expired */
    "  first_seq bigint NOT NULL);"       /* the log's seq when it was taken */
    "CREATE TABLE heads ("
    "  holder text PRIMARY KEY,"
    "  url text NOT NULL,"
    "  role text NOT NULL,"
    "  applied_seq bigint NOT NULL,"
    "  seen timestamptz NOT NULL);"
    "CREATE FUNCTION drover_fence(e bigint) RETURNS void LANGUAGE plpgsql AS $f$ "
    "BEGIN "
    "  PERFORM 1 FROM lease WHERE id = 1 AND epoch = e AND expires > clock_timestamp() "
    "    FOR SHARE; "
    "  IF NOT FOUND THEN "
    "    RAISE EXCEPTION 'the leader lease of epoch % is lost', e USING ERRCODE = 'DRV01'; "
    "  END IF; "
    "END $f$;",
    /* 3: the heads' shared secret, whence their head-to-head credential
     * (signed URLs of blobs and checkpoints; head/blob_sync.c): one row,
     * written by the first head that finds it empty (store/lease.c) */
    "CREATE TABLE head_key ("
    "  id integer PRIMARY KEY CHECK (id = 1),"
    "  key text NOT NULL);",
    /* 4: the CA of several --tls heads (PEM certificate and key): the
     * first head's, taken by the others (store/pg_ca.c) */
    "CREATE TABLE head_ca ("
    "  id integer PRIMARY KEY CHECK (id = 1),"
    "  cert text NOT NULL,"
    "  key text NOT NULL);",
    /* 5: the log's trim (store/lease.c): tombstones of seq <= seq are
     * removed; a follower behind it reloads instead */
    "CREATE TABLE log_trim ("
    "  id integer PRIMARY KEY CHECK (id = 1),"
    "  seq bigint NOT NULL);"
    "INSERT INTO log_trim VALUES (1, 0);",
};
#define N_MIGRATIONS (sizeof migrations / sizeof migrations[0])

static const char PUT_SQL[] =
    "INSERT INTO objects(kind, key, body, seq, epoch) "
    "VALUES ($1, $2, $3, nextval('objects_seq'), $4) "
    "ON CONFLICT (kind, key) DO UPDATE SET body = EXCLUDED.body, seq = EXCLUDED.seq, "
    "epoch = EXCLUDED.epoch";
/* A batch as arrays (binary text[] parameters): one statement per run of
 * upserts or deletes, the records in queue order, so a batch of hundreds
 * of writes costs a few statements (about a third of the server's time per
 * write of one statement each: bench/ha). A key written twice in one batch
 * is sent once, its last write (ON CONFLICT cannot touch a row twice in one
 * statement); a delete lands as a tombstone row, a second one as nothing. */
static const char PUTS_SQL[] =
    "INSERT INTO objects(kind, key, body, seq, epoch) "
    "SELECT k, y, b, nextval('objects_seq'), $4 "
    "FROM unnest($1::text[], $2::text[], $3::text[]) AS t(k, y, b) "
    "ON CONFLICT (kind, key) DO UPDATE SET body = EXCLUDED.body, seq = EXCLUDED.seq, "
    "epoch = EXCLUDED.epoch";
static const char DELS_SQL[] =
    "INSERT INTO objects(kind, key, body, seq, epoch) "
    "SELECT k, y, NULL, nextval('objects_seq'), $3 "
    "FROM unnest($1::text[], $2::text[]) AS t(k, y) "
    "ON CONFLICT (kind, key) DO UPDATE SET body = NULL, seq = EXCLUDED.seq, "
    "epoch = EXCLUDED.epoch WHERE objects.body IS NOT NULL";
static const char DEL_SQL[] =
    "UPDATE objects SET body = NULL, seq = nextval('objects_seq'), epoch = $3 "
    "WHERE kind = $1 AND key = $2 AND body IS NOT NULL";

/* Where url holds a password: which 0 is the user part's
 * (user:PASSWORD@host), which 1 a password=PASSWORD parameter. Its offset
 * into url and its length; -1 when there is none. */
static int password_at(const char *url, int which, size_t *len)
{
    const char *auth = strstr(url, "://");
    if (which == 0 && auth) {
        auth += 3;
        const char *end = auth + strcspn(auth, "/?"), *at = NULL;
        for (const char *c = auth; c < end; c++)
            if (*c == '@')
                at = c;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon && at - colon > 1) {
            *len = (size_t)(at - colon - 1);
            return (int)(colon + 1 - url);
        }
    }
    const char *q = strchr(url, '?');
    for (const char *c = q; which == 1 && c; c = strchr(c + 1, '&'))
        if (strncmp(c + 1, "password=", 9) == 0 && (*len = strcspn(c + 10, "&")) > 0)
            return (int)(c + 10 - url);
    return -1;
}

/* url with its passwords replaced by "***", into out. */
static void mask_url(const char *url, char *out, size_t n)
{
    size_t len[2] = {0, 0};
    int at[2] = {password_at(url, 0, &len[0]), password_at(url, 1, &len[1])};
    size_t o = 0;
    for (size_t i = 0; url[i] && o + 4 < n;) {
        int w = (int)i == at[0] ? 0 : (int)i == at[1] ? 1 : -1;
        if (w >= 0) {
            memcpy(out + o, "***", 3);
            o += 3;
            i += len[w];
        } else {
            out[o++] = url[i++];
        }
    }
    out[o] = '\0';
}

/* msg with every copy of url's passwords replaced by "***" (libpq quotes
 * the URL it could not parse). */
static void scrub(char *msg, size_t n, const char *url)
{
    for (int w = 0; w < 2; w++) {
        size_t len;
        int at = password_at(url, w, &len);
        char pw[256], *hit;
        if (at < 0 || len >= sizeof pw)
            continue;
        snprintf(pw, sizeof pw, "%.*s", (int)len, url + at);
        while ((hit = strstr(msg, pw))) {
            char rest[512];
            snprintf(rest, sizeof rest, "%s", hit + len);
            snprintf(hit, n - (size_t)(hit - msg), "***%s", rest);
        }
    }
}

/* libpq's message, one line, no trailing newline. */
static const char *one_line(char *msg)
{
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\t')
            *c = (c[1] ? ' ' : '\0');
    return msg;
}

static int pg_fail(pg_backend_t *p, drv_error_t *err, const char *what, const PGresult *res)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res)
                                                                      : PQerrorMessage(p->conn));
    /* 08: connection exception; 57P0x: the server is shutting down */
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (state && strcmp(state, "DRV01") == 0)   /* drover_fence: another head leads */
        return drv_err(err, 503, DRV_STORE_FENCED, "", "postgres %s: %s", what, one_line(msg));
    if (PQstatus(p->conn) == CONNECTION_BAD ||
        (state && (strncmp(state, "08", 2) == 0 || strncmp(state, "57P0", 4) == 0)))
        return drv_err_internal(err, "lost the connection to PostgreSQL at %s (%s): %s",
                                p->where, what, one_line(msg));
    return drv_err_internal(err, "postgres %s: %s", what, one_line(msg));
}

/* Run sql (no parameters); res_out, when given, takes the result. */
static int exec(pg_backend_t *p, const char *sql, PGresult **res_out, drv_error_t *err)
{
    PGresult *res = PQexec(p->conn, sql);
    ExecStatusType s = PQresultStatus(res);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        char what[100];
        snprintf(what, sizeof what, "(in: %.60s)", sql);
        pg_fail(p, err, what, res);
        PQclear(res);
        return -1;
    }
    if (res_out)
        *res_out = res;
    else
        PQclear(res);
    return 0;
}

static int migrate(pg_backend_t *p, drv_error_t *err)
{
    char sql[160];
    PGresult *res = NULL;
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%lld)", MIGRATION_LOCK);
    if (exec(p, "BEGIN", NULL, err) < 0 || exec(p, sql, NULL, err) < 0 ||
        exec(p, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())", NULL, err) < 0 ||
        exec(p, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", &res, err) < 0)
        goto error;
    p->version = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (p->version > (int)N_MIGRATIONS) {
        drv_err_internal(err, "database schema version %d at %s is newer than this droverd "
                         "understands (%zu); upgrade droverd", p->version, p->where,
                         N_MIGRATIONS);
        goto error;
    }
    for (size_t i = (size_t)p->version; i < N_MIGRATIONS; i++) {
        snprintf(sql, sizeof sql, "INSERT INTO schema_migrations(version) VALUES (%zu)", i + 1);
        if (exec(p, migrations[i], NULL, err) < 0 || exec(p, sql, NULL, err) < 0) {
            drv_err_prefix(err, "schema migration %zu", i + 1);
            goto error;
        }
    }
    if (exec(p, "COMMIT", NULL, err) < 0)
        return -1;
    p->version = (int)N_MIGRATIONS;
    return 0;
error:
    PQclear(PQexec(p->conn, "ROLLBACK"));
    return -1;
}

static int pg_check(const char *url, drv_error_t *err)
{
    char *msg = NULL, masked[512];
    PQconninfoOption *opts = PQconninfoParse(url, &msg);
    if (opts) {
        PQconninfoFree(opts);
        return 0;
    }
    char why[512];
    snprintf(why, sizeof why, "%s", msg ? msg : "out of memory");
    scrub(why, sizeof why, url);
    mask_url(url, masked, sizeof masked);
    drv_err_invalid(err, "store", "--store %s is not a PostgreSQL URL: %s", masked,
                    one_line(why));
    PQfreemem(msg);
    return -1;
}

static void pg_close(void *b)
{
    pg_backend_t *p = b;
    if (!p)
        return;
    PQfinish(p->conn);
    free(p);
}

/* The session's settings and prepared statements (after a connect or a
 * reset); the migrations too at open. */
static int session(pg_backend_t *p, bool migrate_too, drv_error_t *err)
{
    if (exec(p, "SET synchronous_commit = on", NULL, err) < 0 ||
        exec(p, "SET client_min_messages = warning", NULL, err) < 0 ||
        (migrate_too && migrate(p, err) < 0))
        return -1;
    const char *names[4] = {"put", "del", "puts", "dels"};
    const char *sqls[4] = {PUT_SQL, DEL_SQL, PUTS_SQL, DELS_SQL};
    static const Oid puts_t[4] = {TEXT_ARRAY_OID, TEXT_ARRAY_OID, TEXT_ARRAY_OID, INT8_OID};
    static const Oid dels_t[3] = {TEXT_ARRAY_OID, TEXT_ARRAY_OID, INT8_OID};
    const int nparams[4] = {4, 3, 4, 3};
    const Oid *types[4] = {NULL, NULL, puts_t, dels_t};
    for (int i = 0; i < 4; i++) {
        PGresult *res = PQprepare(p->conn, names[i], sqls[i], nparams[i], types[i]);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            pg_fail(p, err, "prepare", res);
            PQclear(res);
            return -1;
        }
        PQclear(res);
    }
    return 0;
}

static void *pg_open(const char *url, drv_error_t *err)
{
    pg_backend_t *p = calloc(1, sizeof *p);
    if (!p) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    mask_url(url, p->where, sizeof p->where);
    /* defaults first: what the URL says wins (expand_dbname). TCP keepalives
     * find an idle connection that was cut (a standby's, before it leads);
     * a commit hanging on a cut connection is ended by the lease instead,
     * which steps down (re-executes) within the TTL (store/lease.c). */
    const char *const keys[] = {"connect_timeout", "application_name", "client_encoding",
                                "keepalives", "keepalives_idle", "keepalives_interval",
                                "keepalives_count", "dbname", NULL};
    const char *const vals[] = {"10", "droverd", "UTF8", "1", "10", "2", "3", url, NULL};
    p->conn = PQconnectdbParams(keys, vals, 1);
    if (!p->conn || PQstatus(p->conn) != CONNECTION_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", p->conn ? PQerrorMessage(p->conn) : "out of memory");
        scrub(msg, sizeof msg, url);
        drv_err_internal(err, "cannot connect to PostgreSQL at %s: %s", p->where, one_line(msg));
        goto error;
    }
    if (session(p, true, err) < 0)
        goto error;
    return p;
error:
    pg_close(p);
    return NULL;
}

static int pg_load(void *b, drv_store_load_fn fn, void *ctx, drv_error_t *err)
{
    pg_backend_t *p = b;
    PGresult *res = NULL;
    /* tombstones too, and the log's trim, in one snapshot: loaded_seq is
     * where a standby's follow of the log starts, never below the trim
     * (the tombstones trimmed are of records this load does not see) */
    if (exec(p, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL, err) < 0)
        return -1;
    if (exec(p, "SELECT seq FROM log_trim WHERE id = 1", &res, err) < 0)
        goto fail;
    if (PQntuples(res) == 1)
        p->loaded_seq = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    res = NULL;
    if (exec(p, "SELECT kind, key, body, seq FROM objects ORDER BY "
                DRV_STORE_LOAD_ORDER ", key COLLATE \"C\"", &res, err) < 0 ||
        exec(p, "COMMIT", NULL, err) < 0)
        goto fail;
    int rc = 0;
    for (int i = 0, n = PQntuples(res); i < n && rc == 0; i++) {
        uint64_t seq = strtoull(PQgetvalue(res, i, 3), NULL, 10);
        if (seq > p->loaded_seq)
            p->loaded_seq = seq;
        if (!PQgetisnull(res, i, 2))
            rc = fn(ctx, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
                    err);
    }
    PQclear(res);
    return rc;
fail:
    PQclear(res);
    PQclear(PQexec(p->conn, "ROLLBACK"));
    return -1;
}

/* A commit of n ops is HEAD statements (BEGIN, the fence, the wake-up of
 * the standbys), ops[0..n), then COMMIT. The fence first: when the lease is
 * another's, nothing after it runs. NOTIFY is delivered at COMMIT. */
#define HEAD 3

/* Statement j of a commit of n ops. */
static int send_stmt(pg_backend_t *p, const drv_store_op_t *ops, size_t n, size_t j)
{
    if (j == 0 || j == n + HEAD)
        return PQsendQueryParams(p->conn, j == 0 ? "BEGIN" : "COMMIT", 0, NULL, NULL, NULL,
                                 NULL, 0);
    if (j == 1) {   /* epoch 0: no lease in use (a single head, the store's tools) */
        const char *e = p->epoch_s;
        return PQsendQueryParams(p->conn, strcmp(e, "0") ? "SELECT drover_fence($1)" : "SELECT 1",
                                 strcmp(e, "0") ? 1 : 0, NULL, strcmp(e, "0") ? &e : NULL, NULL,
                                 NULL, 0);
    }
    if (j == 2)
        return PQsendQueryParams(p->conn, "SELECT pg_notify('drover_log', '')", 0, NULL, NULL,
                                 NULL, NULL, 0);
    const drv_store_op_t *op = &ops[j - HEAD];
    const char *put[4] = {op->kind, op->key, op->body, p->epoch_s};
    const char *del[3] = {op->kind, op->key, p->epoch_s};
    return PQsendQueryPrepared(p->conn, op->del ? "del" : "put", op->del ? 3 : 4,
                               op->del ? del : put, NULL, NULL, 0);
}

static void stmt_name(const drv_store_op_t *ops, size_t n, size_t j, char *out, size_t len)
{
    if (j < HEAD || j == n + HEAD)
        snprintf(out, len, "%s", j == 0 ? "BEGIN" : j == 1 ? "lease fence" : j == 2 ? "NOTIFY"
                                                                                    : "COMMIT");
    else
        snprintf(out, len, "%s %s/%s", ops[j - HEAD].del ? "delete" : "write",
                 ops[j - HEAD].kind, ops[j - HEAD].key);
}

/* The answers to statements [from, to) and their sync point; the first
 * failure goes to err. */
static int read_chunk(pg_backend_t *p, const drv_store_op_t *ops, size_t n, size_t from,
                      size_t to, drv_error_t *err)
{
    int rc = 0;
    char what[300];
    for (size_t j = from; j < to; j++) {
        PGresult *res = PQgetResult(p->conn);
        if (!res) {
            stmt_name(ops, n, j, what, sizeof what);
            return rc < 0 ? rc : pg_fail(p, err, what, NULL);
        }
        ExecStatusType s = PQresultStatus(res);
        if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && rc == 0) {
            stmt_name(ops, n, j, what, sizeof what);
            rc = pg_fail(p, err, what, res);
        }
        PQclear(res);
        while ((res = PQgetResult(p->conn)))   /* up to the NULL that ends it */
            PQclear(res);
    }
    PGresult *res = PQgetResult(p->conn);
    if (PQresultStatus(res) != PGRES_PIPELINE_SYNC && rc == 0)
        rc = pg_fail(p, err, "pipeline sync", res);
    PQclear(res);
    return rc;
}

static int commit_once(pg_backend_t *p, const drv_store_op_t *ops, size_t n, drv_error_t *err)
{
    size_t total = n + HEAD + 1;
    snprintf(p->epoch_s, sizeof p->epoch_s, "%lld", n ? ops[0].epoch : 0LL);
    if (PQenterPipelineMode(p->conn) != 1)
        return pg_fail(p, err, "pipeline mode", NULL);
    int rc = 0;
    for (size_t from = 0; from < total && rc == 0; from += CHUNK) {
        size_t to = from + CHUNK < total ? from + CHUNK : total, j;
        for (j = from; j < to; j++)
            if (!send_stmt(p, ops, n, j))
                break;
        if (j < to || PQpipelineSync(p->conn) != 1) {
            char what[300];
            stmt_name(ops, n, j < to ? j : to - 1, what, sizeof what);
            rc = pg_fail(p, err, what, NULL);
            break;
        }
        rc = read_chunk(p, ops, n, from, to, err);
    }
    PQexitPipelineMode(p->conn);
    return rc;
}

/* --- a commit as arrays -------------------------------------------------------------- */

typedef struct abuf {
    char *p;
    size_t len, cap;
} abuf_t;

static void put_bytes(abuf_t *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->len + n)
            c *= 2;
        if (!(b->p = realloc(b->p, c)))
            abort();
        b->cap = c;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void put32(abuf_t *b, uint32_t v)
{
    v = htonl(v);
    put_bytes(b, &v, 4);
}

/* A one-dimensional text[] of n elements in PostgreSQL's binary form
 * (array_recv): ndim, no nulls, element type, size, lower bound, then each
 * element's length and bytes. */
static void array_begin(abuf_t *b, size_t n)
{
    b->len = 0;
    put32(b, 1);
    put32(b, 0);
    put32(b, TEXT_OID);
    put32(b, (uint32_t)n);
    put32(b, 1);
}

static void array_add(abuf_t *b, const char *s)
{
    size_t l = strlen(s);
    put32(b, (uint32_t)l);
    put_bytes(b, s, l);
}

typedef struct ref {
    const drv_store_op_t *op;
    size_t i;
} ref_t;

static int by_key_then_index(const void *pa, const void *pb)
{
    const ref_t *a = pa, *b = pb;
    int c = strcmp(a->op->kind, b->op->kind);
    if (!c)
        c = strcmp(a->op->key, b->op->key);
    return c ? c : a->i < b->i ? -1 : a->i > b->i;
}

static int by_index(const void *pa, const void *pb)
{
    const ref_t *a = pa, *b = pb;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* The ops to send: each key's last write, in queue order; their count. */
static size_t last_writes(const drv_store_op_t *ops, size_t n, ref_t *r)
{
    for (size_t i = 0; i < n; i++)
        r[i] = (ref_t){&ops[i], i};
    qsort(r, n, sizeof *r, by_key_then_index);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (i + 1 == n || strcmp(r[i].op->kind, r[i + 1].op->kind) != 0 ||
            strcmp(r[i].op->key, r[i + 1].op->key) != 0)
            r[k++] = r[i];
    qsort(r, k, sizeof *r, by_index);
    return k;
}

/* Send one run r[0..m) (all upserts or all deletes) as one statement. */
static int send_run(pg_backend_t *p, const ref_t *r, size_t m, abuf_t a[3])
{
    bool del = r[0].op->del;
    array_begin(&a[0], m);
    array_begin(&a[1], m);
    array_begin(&a[2], del ? 0 : m);
    for (size_t i = 0; i < m; i++) {
        array_add(&a[0], r[i].op->kind);
        array_add(&a[1], r[i].op->key);
        if (!del)
            array_add(&a[2], r[i].op->body);
    }
    const char *vals[4] = {a[0].p, a[1].p, del ? p->epoch_s : a[2].p, p->epoch_s};
    int lens[4] = {(int)a[0].len, (int)a[1].len, del ? 0 : (int)a[2].len, 0};
    int fmts[4] = {1, 1, del ? 0 : 1, 0};
    return PQsendQueryPrepared(p->conn, del ? "dels" : "puts", del ? 3 : 4, vals, lens, fmts, 0);
}

/* The commit in one round trip: BEGIN, the fence, NOTIFY, one statement per
 * run of the batch's last writes, COMMIT. */
static int commit_arrays(pg_backend_t *p, const drv_store_op_t *ops, size_t n,
                         drv_error_t *err)
{
    ref_t *r = malloc((n ? n : 1) * sizeof *r);
    abuf_t a[3] = {{0}, {0}, {0}};
    size_t nstmt = 0;
    int rc = 0;
    if (!r)
        return drv_err_internal(err, "out of memory");
    size_t k = last_writes(ops, n, r);
    snprintf(p->epoch_s, sizeof p->epoch_s, "%lld", n ? ops[0].epoch : 0LL);
    if (PQenterPipelineMode(p->conn) != 1) {
        free(r);
        return pg_fail(p, err, "pipeline mode", NULL);
    }
    bool sent = true;
    for (size_t j = 0; j < HEAD && sent; j++, nstmt++)
        sent = send_stmt(p, ops, n, j) == 1;
    for (size_t i = 0; i < k && sent; nstmt++) {
        size_t m = 1;
        while (i + m < k && r[i + m].op->del == r[i].op->del)
            m++;
        sent = send_run(p, r + i, m, a) == 1;
        i += m;
    }
    if (sent)
        sent = PQsendQueryParams(p->conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0) == 1;
    if (!sent || PQpipelineSync(p->conn) != 1) {
        rc = pg_fail(p, err, "sending the commit", NULL);
    } else {
        for (size_t j = 0; j <= nstmt; j++) {   /* the statements and COMMIT */
            PGresult *res = PQgetResult(p->conn);
            if (!res) {
                rc = rc < 0 ? rc : pg_fail(p, err, "commit", NULL);
                break;
            }
            ExecStatusType s = PQresultStatus(res);
            if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && rc == 0)
                rc = pg_fail(p, err, j == 1 ? "lease fence" : j < nstmt ? "write" : "COMMIT",
                             res);
            PQclear(res);
            while ((res = PQgetResult(p->conn)))
                PQclear(res);
        }
        PGresult *res = PQgetResult(p->conn);
        if (PQresultStatus(res) != PGRES_PIPELINE_SYNC && rc == 0)
            rc = pg_fail(p, err, "pipeline sync", res);
        PQclear(res);
    }
    PQexitPipelineMode(p->conn);
    for (int i = 0; i < 3; i++)
        free(a[i].p);
    free(r);
    return rc;
}

/* The batch as arrays; when that fails for a reason of its own (not the
 * fence, not the connection), once more a statement per write, which names
 * the write that fails (or lands the batch after all). */
static int commit_batch(pg_backend_t *p, const drv_store_op_t *ops, size_t n,
                        drv_error_t *err)
{
    int rc = commit_arrays(p, ops, n, err);
    if (rc == 0 || PQstatus(p->conn) != CONNECTION_OK || strcmp(err->code, DRV_STORE_FENCED) == 0)
        return rc;
    if (PQtransactionStatus(p->conn) != PQTRANS_IDLE)
        PQclear(PQexec(p->conn, "ROLLBACK"));
    return commit_once(p, ops, n, err);
}

/* A connection lost (the server restarted, an idle standby's connection
 * dropped) is reset once and the commit sent again: its writes are whole
 * records, so one that did land before the loss lands again unchanged
 * (fresh seqs; a tombstone twice is a no-op), and the fence checks the
 * epoch afresh. */
static int pg_commit(void *b, const drv_store_op_t *ops, size_t n, drv_error_t *err)
{
    pg_backend_t *p = b;
    int rc = commit_batch(p, ops, n, err);
    if (rc == 0 || PQstatus(p->conn) != CONNECTION_BAD)
        return rc;
    PQreset(p->conn);
    drv_error_t e2;
    if (PQstatus(p->conn) != CONNECTION_OK || session(p, false, &e2) < 0)
        return rc;
    return commit_batch(p, ops, n, err);
}

static int pg_schema_version(void *b)
{
    return ((pg_backend_t *)b)->version;
}

static const char *pg_where(void *b)
{
    return ((pg_backend_t *)b)->where;
}

static uint64_t pg_loaded_seq(void *b)
{
    return ((pg_backend_t *)b)->loaded_seq;
}

const drv_store_backend_t drv_store_postgres = {
    .name = "postgres",
    .check = pg_check,
    .open = pg_open,
    .close = pg_close,
    .load = pg_load,
    .commit = pg_commit,
    .schema_version = pg_schema_version,
    .where = pg_where,
    .loaded_seq = pg_loaded_seq,
};
