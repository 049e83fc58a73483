/* resolver.c — see resolver.h.
 *
 * Ownership: the resolver and its cache belong to the client's thread. A
 * struct lookup is shared by that thread and the lookup thread: its fields
 * after the mutex are guarded by it, refs counts the holders (2 while the
 * lookup runs and the resolver waits on it), and the last to let go frees
 * it, with any answer no one took. */
#define _GNU_SOURCE
#include "common/resolver.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

#define STEP_MS 200
#define STALE_WAIT_MS 1000       /* the wait for a fresh answer when an old one is at hand */

struct lookup {
    char host[256], port[8];     /* read-only once the thread runs */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool done;
    int rc;                      /* getaddrinfo's */
    int sys_errno;               /* errno, for EAI_SYSTEM */
    struct addrinfo *ai;         /* the answer until the resolver takes it */
};

struct drv_resolver {
    char host[256], port[8];
    bool literal;                /* an address: addrs never expire */
    drv_addr_t addrs[DRV_RESOLVER_MAX_ADDRS];
    size_t naddrs;
    int64_t expires;             /* monotonic ms; 0: look up at the next get */
    struct lookup *pending;      /* a lookup started and not yet taken */
};

static void lookup_release(struct lookup *l)
{
    pthread_mutex_lock(&l->mu);
    bool last = --l->refs == 0;
    pthread_mutex_unlock(&l->mu);
    if (!last)
        return;
    if (l->ai)
        freeaddrinfo(l->ai);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

static void *lookup_main(void *arg)
{
    struct lookup *l = arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(l->host, l->port, &hints, &ai);
    int e = errno;
    pthread_mutex_lock(&l->mu);
    l->rc = rc;
    l->sys_errno = e;
    l->ai = rc == 0 ? ai : NULL;
    l->done = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    lookup_release(l);
    return NULL;
}

/* Start a lookup of r's name on a detached thread: 0, or -1 with msg. */
static int lookup_start(drv_resolver_t *r, char *msg, size_t ml)
{
    struct lookup *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(msg, ml, "cannot resolve %s: out of memory", r->host);
        return -1;
    }
    memcpy(l->host, r->host, sizeof l->host);
    memcpy(l->port, r->port, sizeof l->port);
    l->refs = 2;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* the thread blocks every signal: they are for the program's own threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t th;
    int e = pthread_create(&th, &attr, lookup_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        snprintf(msg, ml, "cannot resolve %s: cannot start a thread: %s", r->host, strerror(e));
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
        free(l);
        return -1;
    }
    r->pending = l;
    return 0;
}

/* Copy an answer's TCP addresses (at most DRV_RESOLVER_MAX_ADDRS) into the
 * cache; the cache is kept as it was when there are none. How many. */
static size_t keep(drv_resolver_t *r, const struct addrinfo *ai)
{
    drv_addr_t a[DRV_RESOLVER_MAX_ADDRS];
    size_t n = 0;
    for (; ai && n < DRV_RESOLVER_MAX_ADDRS; ai = ai->ai_next) {
        if (ai->ai_socktype != SOCK_STREAM || ai->ai_addrlen > sizeof a[n].sa)
            continue;
        memset(&a[n], 0, sizeof a[n]);
        memcpy(&a[n].sa, ai->ai_addr, ai->ai_addrlen);
        a[n].len = ai->ai_addrlen;
        n++;
    }
    if (n) {
        memcpy(r->addrs, a, n * sizeof a[0]);
        r->naddrs = n;
    }
    return n;
}

drv_resolver_t *drv_resolver_create(const char *host, const char *port, drv_error_t *err)
{
    drv_resolver_t *r = calloc(1, sizeof *r);
    if (!r) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    if (strlen(host) >= sizeof r->host || strlen(port) >= sizeof r->port) {
        drv_err_invalid(err, "server", "host or port too long");
        free(r);
        return NULL;
    }
    snprintf(r->host, sizeof r->host, "%s", host);
    snprintf(r->port, sizeof r->port, "%s", port);
    /* an address literal: parsed here, without any lookup (cannot block) */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) == 0) {
        r->literal = keep(r, ai) > 0;
        freeaddrinfo(ai);
    }
    return r;
}

void drv_resolver_destroy(drv_resolver_t *r)
{
    if (!r)
        return;
    if (r->pending)
        lookup_release(r->pending);   /* the thread frees it when it ends */
    free(r);
}

void drv_resolver_stale(drv_resolver_t *r)
{
    if (!r->literal)
        r->expires = 0;
}

int drv_resolver_get(drv_resolver_t *r, int64_t deadline, const atomic_bool *stop,
                     drv_addr_t *out, size_t *n, char *msg, size_t ml)
{
    *n = 0;
    if (r->literal || (r->naddrs && r->expires && drv_mono_ms() < r->expires))
        goto cached;
    if (!r->pending && lookup_start(r, msg, ml) < 0)
        goto failed;
    /* with an earlier answer in hand, a slow lookup is waited on briefly
     * and goes on in the background; without one, until the deadline */
    int64_t until = drv_mono_ms() + STALE_WAIT_MS;
    if (!r->naddrs || until > deadline)
        until = deadline;
    struct lookup *l = r->pending;
    bool stopped = false, late = false;
    pthread_mutex_lock(&l->mu);
    while (!l->done && !stopped && !late) {
        int64_t left = until - drv_mono_ms();
        if (stop && atomic_load(stop)) {
            stopped = true;
        } else if (left <= 0) {
            late = true;
        } else {
            struct timespec ts;
            drv_deadline_in(left < STEP_MS ? left : STEP_MS, &ts);
            pthread_cond_timedwait(&l->cv, &l->mu, &ts);
        }
    }
    int rc = l->rc, sys = l->sys_errno;
    struct addrinfo *ai = l->ai;
    l->ai = NULL;
    pthread_mutex_unlock(&l->mu);
    if (stopped || late) {   /* still running: a later get waits on the same lookup */
        snprintf(msg, ml, "cannot resolve %s: %s", r->host, stopped ? "stopped" : "timed out");
        if (stopped)
            return -1;
        goto failed;
    }
    r->pending = NULL;
    lookup_release(l);
    if (rc != 0) {
        snprintf(msg, ml, "cannot resolve %s: %s", r->host,
                 rc == EAI_SYSTEM ? strerror(sys) : gai_strerror(rc));
        goto failed;
    }
    size_t got = keep(r, ai);
    freeaddrinfo(ai);
    if (!got) {
        snprintf(msg, ml, "cannot resolve %s: no TCP address", r->host);
        goto failed;
    }
    r->expires = drv_mono_ms() + DRV_RESOLVER_TTL_MS;
cached:
    memcpy(out, r->addrs, r->naddrs * sizeof *out);
    *n = r->naddrs;
    return 0;
failed:
    if (r->naddrs)
        goto cached;   /* the last answer beats none; looked up again next time */
    return -1;
}
