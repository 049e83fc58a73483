/* lease.c — the leader lease, the follow of the log, the roster (lease.h).
 *
 * One thread, one connection. Each round (every second, sooner when a
 * standby is woken by NOTIFY drover_log or the lease is about to expire):
 *   leader:  renew (UPDATE ... WHERE epoch = mine AND not expired); no row
 *            means another head took it: lost. A renewal that fails for
 *            the TTL (database unreachable) is lost too: by then the
 *            database may have given the lease to another.
 *   standby: read the log past its position and apply it; try to take the
 *            lease (expired, or its own holder id); once taken, read the
 *            log to its end (the fence guarantees the deposed leader adds
 *            nothing after that), then lead.
 *   both:    upsert its row of heads, read the lease, the roster (heads
 *            seen in the last 60 s) and every head's URL (rows stay a day).
 * All times are the database's clock_timestamp(): no clock of a head's
 * decides who leads.
 *
 * A leader also bounds its lease by its own monotonic clock (issue 17: a
 * leader cut off from the database, whose TCP connection hangs for minutes
 * rather than fails): valid_until is the time its last successful renewal
 * (or the takeover) was sent plus the TTL, never later than the expiry the
 * database gave it. drv_lease_is_leader is false from then on, whatever the
 * lease thread is doing, and no query of the thread waits past it: every
 * query and connect is asynchronous with a deadline (a leader's: its
 * valid_until; a standby's: QUERY_MS), after which the connection is
 * dropped, the renewal counts as failed and the leader steps down. The
 * connection also has TCP keepalives and tcp_user_timeout = TTL, so the
 * kernel gives up on a cut connection within the TTL too.
 */
#define _GNU_SOURCE
#include "store/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define ROUND_MS 1000           /* at most; a third of the TTL when that is shorter */
#define QUERY_MS 5000           /* a standby's bound on a query or a connect */
#define FOLLOW_BATCH "1000"
#define STR_(x) #x
#define STR(x) STR_(x)

struct drv_lease {
    drv_lease_cfg_t cfg;
    char url[1024], holder[128], advertise[256], ttl_s[16];
    PGconn *conn;
    pthread_t thread;
    bool started;
    int wake[2];                 /* self-pipe: destroy wakes the thread */
    atomic_bool stop, leader;
    long long epoch;             /* mine, while leading (lease thread) */
    uint64_t applied;            /* follow position (lease thread) */
    _Atomic int64_t valid_until; /* leading: the lease is surely mine before this
                                    (monotonic ms; sent time of the last renewal + TTL) */
    bool lost;
    int64_t expiry_mono;         /* the lease's expiry on this clock (0: none) */
    unsigned rounds;             /* roster rounds as leader (lease thread) */
    unsigned trim_rounds;        /* rounds between trims of the log (trim_log) */
    uint64_t trim_mark;          /* the log's end at the last trim (lease thread) */
    char key[65];                /* the heads' shared secret (head_key; immutable) */
    pthread_mutex_t mu;          /* guards view */
    drv_lease_view_t view;
};

/* When the thread's next query or connect must have answered: a leader's
 * never after its lease's end by this head's clock. */
static int64_t deadline_of(drv_lease_t *l)
{
    int64_t d = drv_mono_ms() + QUERY_MS, v = atomic_load(&l->valid_until);
    return atomic_load(&l->leader) && v < d ? v : d;
}

/* Wait until c's socket is ready for ev or the deadline: 1 ready, 0 not yet
 * (try again), -1 the deadline passed. */
static int wait_sock(PGconn *c, short ev, int64_t deadline)
{
    int64_t left = deadline - drv_mono_ms();
    if (left <= 0)
        return -1;
    struct pollfd p = {.fd = PQsocket(c), .events = ev};
    int r = poll(&p, 1, (int)left);
    return r > 0 ? 1 : 0;
}

/* sql with params on c (non-blocking), answered by the deadline; the last
 * result, or NULL: it could not be sent, the connection broke (its error
 * in PQerrorMessage), or *late: the deadline passed. */
static PGresult *exec_by(PGconn *c, const char *sql, int n, const char *const *vals,
                         int64_t deadline, bool *late)
{
    *late = false;
    if (!PQsendQueryParams(c, sql, n, NULL, vals, NULL, NULL, 0))
        return NULL;
    for (int f; (f = PQflush(c)) != 0;) {   /* what the socket did not take yet */
        int w = f < 0 ? 0 : wait_sock(c, POLLOUT | POLLIN, deadline);
        *late = w < 0;
        if (f < 0 || w < 0 || (w > 0 && !PQconsumeInput(c)))
            return NULL;
    }
    PGresult *last = NULL, *r;
    for (;;) {
        while (PQisBusy(c)) {
            int w = wait_sock(c, POLLIN, deadline);
            *late = w < 0;
            if (w < 0 || (w > 0 && !PQconsumeInput(c))) {
                PQclear(last);
                return NULL;
            }
        }
        if (!(r = PQgetResult(c)))
            return last;
        PQclear(last);
        last = r;
    }
}

static PGconn *connect_db(drv_lease_t *l, int64_t deadline, drv_error_t *err)
{
    /* defaults first, what the URL says wins (expand_dbname); keepalives and
     * tcp_user_timeout: the kernel gives up on a cut connection within the TTL */
    char idle[16];
    snprintf(idle, sizeof idle, "%d", l->cfg.ttl_ms / 1000 > 1 ? l->cfg.ttl_ms / 1000 : 1);
    const char *const keys[] = {"application_name", "client_encoding", "keepalives",
                                "keepalives_idle", "keepalives_interval", "keepalives_count",
                                "tcp_user_timeout", "dbname", NULL};
    const char *const vals[] = {"droverd-lease", "UTF8", "1", idle, "1", "3", l->ttl_s, l->url,
                                NULL};
    PGconn *c = PQconnectStartParams(keys, vals, 1);
    char msg[400] = "out of memory";
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    bool late = false;
    while (c && PQstatus(c) != CONNECTION_BAD && st != PGRES_POLLING_OK &&
           st != PGRES_POLLING_FAILED) {
        int w = wait_sock(c, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline);
        if (w < 0) {
            late = true;
            break;
        }
        if (w > 0)
            st = PQconnectPoll(c);
    }
    if (late)
        snprintf(msg, sizeof msg, "no answer within %lld ms",
                 (long long)(atomic_load(&l->leader) ? l->cfg.ttl_ms : QUERY_MS));
    else if (c)
        snprintf(msg, sizeof msg, "%s", PQerrorMessage(c));
    if (!c || late || PQstatus(c) != CONNECTION_OK) {
        msg[strcspn(msg, "\n")] = '\0';
        drv_err(err, 503, "unavailable", "", "lease: cannot connect to PostgreSQL: %s", msg);
        PQfinish(c);
        return NULL;
    }
    PQsetnonblocking(c, 1);
    PQclear(exec_by(c, "SET client_min_messages = warning", 0, NULL, deadline, &late));
    PQclear(exec_by(c, "LISTEN drover_log", 0, NULL, deadline, &late));
    return c;
}

/* Run sql with params, answered by deadline_of(l) (past it the connection
 * is dropped: the next query connects afresh); the result when it returned
 * rows or a command tag, else NULL (the error logged). */
static PGresult *q(drv_lease_t *l, const char *sql, int n, const char *const *vals)
{
    int64_t deadline = deadline_of(l);
    if (!l->conn || PQstatus(l->conn) != CONNECTION_OK) {
        PQfinish(l->conn);
        drv_error_t err;
        if (!(l->conn = connect_db(l, deadline, &err)))
            return NULL;
        drv_info("lease: reconnected to PostgreSQL");
    }
    bool late;
    PGresult *res = exec_by(l->conn, sql, n, vals, deadline, &late);
    if (late) {
        drv_warn("lease: %.40s...: no answer from PostgreSQL in time; dropping the connection",
                 sql);
        PQfinish(l->conn);
        l->conn = NULL;
        return NULL;
    }
    ExecStatusType s = PQresultStatus(res);
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK)
        return res;
    char msg[300];
    snprintf(msg, sizeof msg, "%s", res ? PQresultErrorMessage(res) : PQerrorMessage(l->conn));
    msg[strcspn(msg, "\n")] = '\0';
    drv_warn("lease: %.40s...: %s", sql, msg);
    PQclear(res);
    return NULL;
}

/* The heads' shared secret: the row of head_key, written with 256 random
 * bits by the first head to find it empty (one INSERT ... ON CONFLICT DO
 * NOTHING: two heads starting at once agree on one). */
static int read_key(drv_lease_t *l, drv_error_t *err)
{
    char mine[65];
    if (drv_random_hex(32, mine) < 0)
        return drv_err_internal(err, "lease: no randomness for the heads' key");
    const char *v[] = {mine};
    PQclear(q(l, "INSERT INTO head_key VALUES (1, $1) ON CONFLICT (id) DO NOTHING", 1, v));
    PGresult *r = q(l, "SELECT key FROM head_key WHERE id = 1", 0, NULL);
    if (!r || PQntuples(r) != 1 || strlen(PQgetvalue(r, 0, 0)) != 64) {
        PQclear(r);
        return drv_err(err, 503, "unavailable", "", "lease: cannot read the heads' key "
                       "(table head_key)");
    }
    snprintf(l->key, sizeof l->key, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

/* Apply the log past l->applied; 0 when read to its (current) end. */
static int follow(drv_lease_t *l)
{
    for (;;) {
        char from[24];
        snprintf(from, sizeof from, "%llu", (unsigned long long)l->applied);
        const char *v[] = {from};
        /* the log's trim in the same snapshot: past it, tombstones this head
         * has not applied may be gone */
        PGresult *res = q(l, "SELECT t.seq, o.kind, o.key, o.body, o.seq FROM log_trim t "
                             "LEFT JOIN LATERAL (SELECT kind, key, body, seq FROM objects "
                             "WHERE seq > $1::bigint ORDER BY seq LIMIT " FOLLOW_BATCH ") o "
                             "ON true WHERE t.id = 1 ORDER BY o.seq", 1, v);
        if (!res)
            return -1;
        uint64_t trim = PQntuples(res) ? strtoull(PQgetvalue(res, 0, 0), NULL, 10) : 0;
        if (trim > l->applied) {
            drv_error("standby: the record log was trimmed to seq %llu and this head has "
                      "applied it to %llu only (deletes it missed are gone): restarting to "
                      "load it afresh", (unsigned long long)trim,
                      (unsigned long long)l->applied);
            _exit(70);
        }
        int n = PQntuples(res) == 1 && PQgetisnull(res, 0, 4) ? 0 : PQntuples(res);
        drv_lease_rec_t *recs = n ? calloc((size_t)n, sizeof *recs) : NULL;
        for (int i = 0; i < n; i++) {
            recs[i].kind = PQgetvalue(res, i, 1);
            recs[i].key = PQgetvalue(res, i, 2);
            recs[i].body = PQgetisnull(res, i, 3) ? NULL : PQgetvalue(res, i, 3);
            recs[i].seq = strtoull(PQgetvalue(res, i, 4), NULL, 10);
        }
        drv_error_t err;
        int rc = n && l->cfg.apply ? l->cfg.apply(l->cfg.ctx, recs, (size_t)n, &err) : 0;
        if (rc < 0) {
            drv_error("standby: cannot apply the record log: %s", err.message);
            _exit(70);   /* memory would diverge from the log: restart from it */
        }
        if (n)
            l->applied = recs[n - 1].seq;
        free(recs);
        PQclear(res);
        if (n < atoi(FOLLOW_BATCH))
            return 0;
    }
}

/* Take the lease when it is free or this head's own; logs the takeover. */
static bool try_acquire(drv_lease_t *l, long long *after_ms)
{
    const char *v[] = {l->holder, l->advertise, l->ttl_s};
    PGresult *res = q(l,
        "WITH prev AS (SELECT expires FROM lease WHERE id = 1), "
        "t AS (UPDATE lease SET holder = $1, url = $2, epoch = epoch + 1, "
        "        expires = clock_timestamp() + $3::int * interval '1 millisecond', "
        "        taken_at = clock_timestamp() "
        "      WHERE id = 1 AND (expires <= clock_timestamp() OR holder = $1) "
        "      RETURNING epoch, taken_at) "
        "INSERT INTO lease_history "
        "SELECT t.epoch, $1, $2, t.taken_at, "
        "  CASE WHEN isfinite(prev.expires) THEN GREATEST(0, "
        "    round(extract(epoch FROM t.taken_at - prev.expires) * 1000))::bigint ELSE 0 END, "
        "  (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM objects_seq) "
        "FROM t, prev RETURNING epoch, after_expiry_ms", 3, v);
    if (!res)
        return false;
    bool got = PQntuples(res) == 1;
    if (got) {
        l->epoch = atoll(PQgetvalue(res, 0, 0));
        *after_ms = atoll(PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return got;
}

/* Renew: false when the lease is no longer mine. The database sets the
 * new expiry after this head sent the renewal: sent + TTL is no later. */
static bool renew(drv_lease_t *l)
{
    char epoch[24];
    snprintf(epoch, sizeof epoch, "%lld", l->epoch);
    const char *v[] = {l->holder, epoch, l->ttl_s};
    int64_t sent = drv_mono_ms();
    PGresult *res = sent < atomic_load(&l->valid_until)
        ? q(l, "UPDATE lease SET expires = clock_timestamp() + $3::int * "
               "interval '1 millisecond' WHERE id = 1 AND holder = $1 AND "
               "epoch = $2::bigint AND expires > clock_timestamp()", 3, v)
        : NULL;
    if (!res) {   /* unreachable: keep leading while the lease may still be mine */
        if (drv_mono_ms() < atomic_load(&l->valid_until))
            return true;
        drv_error("lease: not renewed within its TTL (%d ms by this head's clock; the "
                  "database unreachable or too slow): stepping down", l->cfg.ttl_ms);
        return false;
    }
    bool mine = atoi(PQcmdTuples(res)) == 1;
    PQclear(res);
    if (mine)
        atomic_store(&l->valid_until, sent + l->cfg.ttl_ms);
    return mine;
}

/* Remove the tombstones no head needs (issue 17: the audit log's trim
 * leaves one per entry, and every start reads them): those of seq at or
 * below both the lowest applied_seq of the roster's rows (every head with
 * a row, dead ones too until they leave it after a day: each has applied
 * them, and a load does not need them) and the log's end at the previous
 * trim (l->trim_mark: so a tombstone is at least one trim period old, far
 * more than a starting head takes from its load to its first roster row).
 * The bound goes to log_trim in the same transaction: a follower behind
 * it (its row left the roster: paused a day) restarts and loads (follow),
 * and a load starts its follow at it or above (store/pg.c). Leader only,
 * every trim_rounds rounds; what it removes changes no head's state. */
static void trim_log(drv_lease_t *l, uint64_t log_seq)
{
    char mark[24];
    snprintf(mark, sizeof mark, "%llu", (unsigned long long)l->trim_mark);
    const char *v[] = {mark};
    PGresult *res = q(l,
        "WITH b AS (SELECT LEAST((SELECT min(applied_seq) FROM heads), $1::bigint) AS s), "
        "d AS (DELETE FROM objects WHERE body IS NULL AND seq <= (SELECT s FROM b) "
        "      RETURNING 1), "
        "t AS (UPDATE log_trim SET seq = (SELECT s FROM b) "
        "      WHERE id = 1 AND seq < (SELECT s FROM b) RETURNING seq) "
        "SELECT (SELECT count(*) FROM d), (SELECT s FROM b)", 1, v);
    if (!res)
        return;
    long long n = atoll(PQgetvalue(res, 0, 0));
    if (n > 0)
        drv_info("trimmed the record log: %lld tombstones of seq <= %s removed", n,
                 PQgetvalue(res, 0, 1));
    PQclear(res);
    l->trim_mark = log_seq;
}

/* Upsert my roster row; read the lease, the roster and the heads' URLs into view. */
static void roster(drv_lease_t *l)
{
    drv_lease_view_t v;
    pthread_mutex_lock(&l->mu);
    v = l->view;
    pthread_mutex_unlock(&l->mu);
    bool leader = atomic_load(&l->leader);
    char seq[24];
    PGresult *res = q(l, "SELECT holder, url, epoch, CASE WHEN isfinite(expires) THEN "
                         "round(extract(epoch FROM expires - clock_timestamp()) * 1000)::bigint "
                         "ELSE -1 END, GREATEST(COALESCE((SELECT max(seq) FROM objects), 0), "
                         "(SELECT seq FROM log_trim WHERE id = 1)) "
                         "FROM lease WHERE id = 1", 0, NULL);
    if (res && PQntuples(res) == 1) {
        long long epoch = atoll(PQgetvalue(res, 0, 2));
        if (v.epoch && epoch != v.epoch)
            v.changes++;
        v.epoch = epoch;
        snprintf(v.holder, sizeof v.holder, "%s", PQgetvalue(res, 0, 0));
        bool live = atoll(PQgetvalue(res, 0, 3)) > 0;
        snprintf(v.leader_url, sizeof v.leader_url, "%s", live ? PQgetvalue(res, 0, 1) : "");
        v.expires_in_ms = atoll(PQgetvalue(res, 0, 3));
        l->expiry_mono = v.expires_in_ms >= 0 ? drv_mono_ms() + v.expires_in_ms : 0;
        v.log_seq = strtoull(PQgetvalue(res, 0, 4), NULL, 10);
    }
    PQclear(res);
    v.leader = leader;
    v.applied_seq = leader ? v.log_seq : l->applied;
    snprintf(seq, sizeof seq, "%llu", (unsigned long long)v.applied_seq);
    const char *up[] = {l->holder, l->advertise, leader ? "leader" : "standby", seq};
    if (leader && l->rounds % 600 == 0)   /* heads gone for a day leave the roster */
        PQclear(q(l, "DELETE FROM heads WHERE seen < clock_timestamp() - interval '1 day'", 0,
                  NULL));
    PQclear(q(l, "INSERT INTO heads VALUES ($1, $2, $3, $4::bigint, clock_timestamp()) "
                 "ON CONFLICT (holder) DO UPDATE SET url = $2, role = $3, "
                 "applied_seq = $4::bigint, seen = clock_timestamp()", 4, up));
    if (leader && l->rounds++ % l->trim_rounds == 0)
        trim_log(l, v.log_seq);
    res = q(l, "SELECT holder, url, role, applied_seq, round(extract(epoch FROM "
               "clock_timestamp() - seen) * 1000)::bigint FROM heads "
               "WHERE seen > clock_timestamp() - interval '60 seconds' ORDER BY holder "
               "LIMIT 16", 0, NULL);
    if (res) {
        v.nheads = 0;
        for (int i = 0; i < PQntuples(res) && v.nheads < DRV_LEASE_MAX_HEADS; i++) {
            drv_lease_head_t *h = &v.heads[v.nheads++];
            snprintf(h->holder, sizeof h->holder, "%s", PQgetvalue(res, i, 0));
            snprintf(h->url, sizeof h->url, "%s", PQgetvalue(res, i, 1));
            snprintf(h->role, sizeof h->role, "%s", PQgetvalue(res, i, 2));
            h->applied_seq = strtoull(PQgetvalue(res, i, 3), NULL, 10);
            h->seen_ms_ago = atoll(PQgetvalue(res, i, 4));
        }
        PQclear(res);
    }
    res = q(l, "SELECT url FROM heads WHERE url <> '' GROUP BY url ORDER BY max(seen) DESC "
               "LIMIT " STR(DRV_LEASE_MAX_URLS), 0, NULL);
    if (res) {
        v.nurls = 0;
        for (int i = 0; i < PQntuples(res) && v.nurls < DRV_LEASE_MAX_URLS; i++)
            snprintf(v.urls[v.nurls++], sizeof v.urls[0], "%s", PQgetvalue(res, i, 0));
        PQclear(res);
    }
    pthread_mutex_lock(&l->mu);
    l->view = v;
    pthread_mutex_unlock(&l->mu);
}

/* One round; false when the thread should end (the lease was lost). */
static bool round_once(drv_lease_t *l)
{
    if (atomic_load(&l->leader)) {
        if (!renew(l)) {
            atomic_store(&l->leader, false);
            l->lost = true;
            if (l->cfg.on_lost)   /* first: the roster's queries may wait for their bound */
                l->cfg.on_lost(l->cfg.ctx, "the leader lease was lost");
            roster(l);
            return false;
        }
    } else {
        long long after = 0;
        int64_t sent = 0;
        if (follow(l) == 0 && (sent = drv_mono_ms()) && try_acquire(l, &after) &&
            follow(l) == 0) {
            drv_info("took the leader lease (epoch %lld, %lld ms after the previous one "
                     "expired; log read to seq %llu)", l->epoch, after,
                     (unsigned long long)l->applied);
            atomic_store(&l->valid_until, sent + l->cfg.ttl_ms);
            pthread_mutex_lock(&l->mu);
            l->view.takeovers++;
            l->view.last_takeover_ms = after;
            pthread_mutex_unlock(&l->mu);
            if (l->cfg.on_lead)
                l->cfg.on_lead(l->cfg.ctx, l->epoch, after);
            atomic_store(&l->leader, true);
        }
    }
    roster(l);
    return true;
}

/* Wait up to ms for a NOTIFY (standby), destroy, or the timeout; true
 * when a NOTIFY came. */
static bool wait_round(drv_lease_t *l, int ms)
{
    struct pollfd p[2] = {{.fd = l->wake[0], .events = POLLIN}, {.fd = -1}};
    if (l->conn && PQstatus(l->conn) == CONNECTION_OK && !atomic_load(&l->leader))
        p[1] = (struct pollfd){.fd = PQsocket(l->conn), .events = POLLIN};
    if (poll(p, 2, ms) <= 0 || p[1].fd < 0 || !(p[1].revents & POLLIN))
        return false;
    PQconsumeInput(l->conn);
    PGnotify *n;
    while ((n = PQnotifies(l->conn)))
        PQfreemem(n);
    return true;
}

static void *lease_main(void *arg)
{
    drv_lease_t *l = arg;
    int round_ms = l->cfg.ttl_ms / 3 < ROUND_MS ? l->cfg.ttl_ms / 3 : ROUND_MS;
    int64_t next = drv_mono_ms() + round_ms;
    while (!atomic_load(&l->stop)) {
        int64_t due = next;
        /* a standby tries again as soon as the lease runs out */
        if (!atomic_load(&l->leader) && l->expiry_mono && l->expiry_mono + 20 < due)
            due = l->expiry_mono + 20;
        int64_t now = drv_mono_ms();
        if (now < due && wait_round(l, (int)(due - now))) {
            follow(l);   /* woken by a commit: apply it, the round comes at its time */
            continue;
        }
        if (atomic_load(&l->stop))
            break;
        if (drv_mono_ms() < due)
            continue;
        next = drv_mono_ms() + round_ms;
        if (!round_once(l))
            break;
    }
    return NULL;
}

drv_lease_t *drv_lease_create(const drv_lease_cfg_t *cfg, drv_error_t *err)
{
    drv_lease_t *l = calloc(1, sizeof *l);
    if (!l) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    l->cfg = *cfg;
    l->wake[0] = l->wake[1] = -1;
    snprintf(l->url, sizeof l->url, "%s", cfg->url);
    snprintf(l->holder, sizeof l->holder, "%s", cfg->holder);
    snprintf(l->advertise, sizeof l->advertise, "%s", cfg->advertise);
    snprintf(l->ttl_s, sizeof l->ttl_s, "%d", cfg->ttl_ms);
    l->applied = cfg->from_seq;
    /* a trim every 600 rounds (10 minutes); DROVER_LOG_TRIM_ROUNDS for tests */
    const char *tr = getenv("DROVER_LOG_TRIM_ROUNDS");
    l->trim_rounds = tr && atoi(tr) > 0 ? (unsigned)atoi(tr) : 600;
    pthread_mutex_init(&l->mu, NULL);
    snprintf(l->view.self, sizeof l->view.self, "%s", l->holder);
    l->view.expires_in_ms = -1;
    if (pipe2(l->wake, O_CLOEXEC) < 0) {
        drv_err_internal(err, "pipe: %s", strerror(errno));
        goto error;
    }
    if (!(l->conn = connect_db(l, drv_mono_ms() + QUERY_MS, err)))
        goto error;
    if (read_key(l, err) < 0)
        goto error;
    round_once(l);
    if (pthread_create(&l->thread, NULL, lease_main, l) != 0) {
        drv_err_internal(err, "cannot start the lease thread");
        goto error;
    }
    l->started = true;
    return l;
error:
    drv_lease_destroy(l);
    return NULL;
}

void drv_lease_destroy(drv_lease_t *l)
{
    if (!l)
        return;
    if (l->started) {
        atomic_store(&l->stop, true);
        if (write(l->wake[1], "x", 1) < 0) {
        }
        pthread_join(l->thread, NULL);
    }
    if (atomic_load(&l->leader) && l->conn) {   /* hand over at once */
        char epoch[24];
        snprintf(epoch, sizeof epoch, "%lld", l->epoch);
        const char *v[] = {l->holder, epoch};
        PQclear(q(l, "UPDATE lease SET expires = clock_timestamp() WHERE id = 1 AND "
                     "holder = $1 AND epoch = $2::bigint", 2, v));
        drv_info("gave up the leader lease (epoch %lld)", l->epoch);
    }
    if (l->conn) {   /* leave the roster at once; the row (its URL, for the pages loaded
                        from this head: api/cors.c) stays until dropped a day later, and
                        holds no trim back (a restart loads afresh) */
        const char *v[] = {l->holder};
        PQclear(q(l, "UPDATE heads SET role = 'stopped', seen = clock_timestamp() - "
                     "interval '2 minutes', applied_seq = GREATEST(applied_seq, "
                     "(SELECT seq FROM log_trim WHERE id = 1), "
                     "COALESCE((SELECT max(seq) FROM objects), 0)) WHERE holder = $1", 1, v));
    }
    PQfinish(l->conn);
    for (int i = 0; i < 2; i++)
        if (l->wake[i] >= 0)
            close(l->wake[i]);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

bool drv_lease_is_leader(const drv_lease_t *l)
{
    drv_lease_t *m = (drv_lease_t *)l;
    return atomic_load(&m->leader) && drv_mono_ms() < atomic_load(&m->valid_until);
}

void drv_lease_view(drv_lease_t *l, drv_lease_view_t *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->view;
    pthread_mutex_unlock(&l->mu);
    out->leader = drv_lease_is_leader(l);
}

void drv_lease_leader_url(drv_lease_t *l, char *out, size_t n)
{
    bool me = drv_lease_is_leader(l);
    pthread_mutex_lock(&l->mu);   /* never this head's own URL once its lease ran out */
    snprintf(out, n, "%s", !me && strcmp(l->view.holder, l->holder) == 0 ? "" : l->view.leader_url);
    pthread_mutex_unlock(&l->mu);
}

void drv_lease_key(const drv_lease_t *l, char out[65])
{
    memcpy(out, l->key, 65);
}
