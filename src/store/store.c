/* store.c — group commit over a store backend (see store.h).
 *
 * Threads: producers call drv_store_enqueue() (serialised by the state
 * lock, so seqs arrive in order); one writer thread owns the backend after
 * drv_store_start() and commits everything queued at once. `committed` is
 * written by the writer only, read by anyone (atomic).
 */
#include "store/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

struct drv_store {
    const drv_store_backend_t *be;
    void *b;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;      /* writer waits for ops */
    pthread_cond_t cv_done;      /* drv_store_wait waits for commits */
    drv_store_op_t *q;           /* pending ops, in seq order */
    size_t nq, capq;
    bool stop, started;
    pthread_t writer;
    _Atomic uint64_t committed;
    _Atomic uint64_t commits;
    drv_store_commit_cb cb;
    void *cb_ctx;
    void (*fenced_cb)(void *ctx, const char *why);
    void *fenced_ctx;
    _Atomic long long epoch;     /* what drv_store_enqueue stamps on an op */
    atomic_bool fenced;          /* drv_store_set_epoch was called */
};

const drv_store_backend_t *drv_store_backend_for(const char *spec, drv_error_t *err)
{
    if (!spec || !*spec || strcmp(spec, "sqlite") == 0)
        return &drv_store_sqlite;
    if (strncmp(spec, "postgres://", 11) == 0 || strncmp(spec, "postgresql://", 13) == 0)
        return drv_store_postgres.check(spec, err) < 0 ? NULL : &drv_store_postgres;
    const char *colon = strstr(spec, "://");
    drv_err_invalid(err, "store", "--store must be 'sqlite' or a postgres:// URL, got '%.*s%s'",
                    colon ? (int)(colon - spec) : 40, spec, colon ? "://...'" : "");
    return NULL;
}

drv_store_t *drv_store_create(const drv_store_backend_t *backend, const char *where,
                              drv_error_t *err)
{
    drv_store_t *st = calloc(1, sizeof *st);
    if (!st) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    st->be = backend;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv_work, NULL);
    pthread_cond_init(&st->cv_done, NULL);
    st->b = backend->open(where, err);
    if (!st->b) {
        drv_store_destroy(st);
        return NULL;
    }
    return st;
}

static void free_ops(drv_store_op_t *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(ops[i].key);
        free(ops[i].body);
    }
}

/* Does the batch hold a write the lease does not cover: one queued while
 * this head did not lead (epoch -1: a standby, or a head before its first
 * lease round), or under another epoch than the one it holds now? Memory
 * then holds a write this head decided without leading: the batch is
 * refused as the fence would refuse it, before it reaches the database. */
static bool unheld(drv_store_t *st, const drv_store_op_t *ops, size_t n, drv_error_t *err)
{
    if (!atomic_load(&st->fenced))
        return false;
    long long now = atomic_load(&st->epoch);
    for (size_t i = 0; i < n; i++)
        if (ops[i].epoch <= 0 || ops[i].epoch != now) {
            drv_err(err, 503, DRV_STORE_FENCED, "", "the %s of %s/%s was queued under lease "
                    "epoch %lld and this head's epoch is %lld: refused (only a write made "
                    "while leading, under the epoch held now, is committed)",
                    ops[i].del ? "delete" : "write", ops[i].kind, ops[i].key, ops[i].epoch, now);
            return true;
        }
    return false;
}

static void *writer_main(void *arg)
{
    drv_store_t *st = arg;
    drv_store_op_t *batch = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (st->nq == 0 && !st->stop)
            pthread_cond_wait(&st->cv_work, &st->mu);
        if (st->nq == 0 && st->stop)
            break;
        /* take the whole queue: its ops share one transaction */
        drv_store_op_t *tmp = batch;
        size_t tcap = cap;
        batch = st->q;
        cap = st->capq;
        size_t n = st->nq;
        st->q = tmp;
        st->capq = tcap;
        st->nq = 0;
        pthread_mutex_unlock(&st->mu);

        drv_error_t err;
        if (unheld(st, batch, n, &err) || st->be->commit(st->b, batch, n, &err) < 0) {
            if (strcmp(err.code, DRV_STORE_FENCED) != 0) {
                drv_error("store commit failed, exiting so that no answer outruns the disk: %s",
                          err.message);
                _exit(70);
            }
            drv_error("store commit refused, this head no longer holds the lease: %s",
                      err.message);
            if (!st->fenced_cb)
                _exit(75);
            st->fenced_cb(st->fenced_ctx, err.message);
            for (;;)   /* nothing more lands: the callback ends the process */
                pause();
        }
        uint64_t seq = batch[n - 1].seq;
        free_ops(batch, n);
        atomic_store(&st->committed, seq);
        atomic_fetch_add(&st->commits, 1);
        if (st->cb)
            st->cb(st->cb_ctx, seq);

        pthread_mutex_lock(&st->mu);
        pthread_cond_broadcast(&st->cv_done);
    }
    pthread_mutex_unlock(&st->mu);
    free(batch);
    return NULL;
}

int drv_store_load(drv_store_t *st, drv_store_load_fn fn, void *ctx, drv_error_t *err)
{
    return st->be->load(st->b, fn, ctx, err);
}

int drv_store_start(drv_store_t *st, drv_error_t *err)
{
    if (pthread_create(&st->writer, NULL, writer_main, st) != 0)
        return drv_err_internal(err, "cannot start the store writer thread");
    st->started = true;
    return 0;
}

void drv_store_destroy(drv_store_t *st)
{
    if (!st)
        return;
    if (st->started) {
        pthread_mutex_lock(&st->mu);
        st->stop = true;
        pthread_cond_signal(&st->cv_work);
        pthread_mutex_unlock(&st->mu);
        pthread_join(st->writer, NULL);
    }
    free_ops(st->q, st->nq);
    free(st->q);
    if (st->b)
        st->be->close(st->b);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv_work);
    pthread_cond_destroy(&st->cv_done);
    free(st);
}

void drv_store_enqueue(drv_store_t *st, drv_store_op_t *op)
{
    pthread_mutex_lock(&st->mu);
    if (st->nq == st->capq) {
        size_t ncap = st->capq ? st->capq * 2 : 64;
        drv_store_op_t *nq = realloc(st->q, ncap * sizeof *nq);
        if (!nq) {
            fprintf(stderr, "drover: out of memory\n");
            abort();
        }
        st->q = nq;
        st->capq = ncap;
    }
    op->epoch = atomic_load(&st->epoch);   /* under mu: ordered with set_epoch's store */
    st->q[st->nq++] = *op;
    pthread_cond_signal(&st->cv_work);
    pthread_mutex_unlock(&st->mu);
}

uint64_t drv_store_committed(const drv_store_t *st)
{
    return atomic_load(&((drv_store_t *)st)->committed);
}

void drv_store_wait(drv_store_t *st, uint64_t seq)
{
    pthread_mutex_lock(&st->mu);
    while (atomic_load(&st->committed) < seq)
        pthread_cond_wait(&st->cv_done, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

void drv_store_on_commit(drv_store_t *st, drv_store_commit_cb cb, void *ctx)
{
    st->cb = cb;
    st->cb_ctx = ctx;
}

void drv_store_set_epoch(drv_store_t *st, long long epoch)
{
    pthread_mutex_lock(&st->mu);
    atomic_store(&st->epoch, epoch);
    atomic_store(&st->fenced, true);
    pthread_mutex_unlock(&st->mu);
}

uint64_t drv_store_loaded_seq(drv_store_t *st)
{
    return st->be->loaded_seq ? st->be->loaded_seq(st->b) : 0;
}

void drv_store_on_fenced(drv_store_t *st, void (*cb)(void *ctx, const char *why), void *ctx)
{
    st->fenced_cb = cb;
    st->fenced_ctx = ctx;
}

uint64_t drv_store_commits(const drv_store_t *st)
{
    return atomic_load(&((drv_store_t *)st)->commits);
}

int drv_store_schema_version(drv_store_t *st)
{
    return st->be->schema_version(st->b);
}

const char *drv_store_where(drv_store_t *st)
{
    return st->be->where(st->b);
}
