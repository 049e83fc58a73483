/* node_lease.c — the node's lease on its job workers; see node_lease.h. */
#include "agent/node_lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

#define LEASE_TICK_MS 200
#define LEASE_DEFAULT_MS 10000

struct drv_nlease {
    drv_supervisor_t *sup;
    _Atomic int64_t renewed;     /* monotonic ms of the last answered sync's send; 0 = never */
    _Atomic int64_t lease_ms;
    atomic_int grace_ms;         /* the head's job_lease_grace_ms; -1: the stop grace */
    atomic_bool quit;
    bool lapsed;                 /* the thread's: fail_jobs was called for this lapse */
    pthread_t thread;
};

bool drv_nlease_expired(int64_t renewed_mono_ms, int64_t lease_ms, int64_t now_mono_ms)
{
    return renewed_mono_ms > 0 && now_mono_ms - renewed_mono_ms > lease_ms;
}

static void *run(void *arg)
{
    drv_nlease_t *l = arg;
    struct timespec tick = {.tv_sec = 0, .tv_nsec = LEASE_TICK_MS * 1000000L};
    while (!atomic_load(&l->quit)) {
        int64_t renewed = atomic_load(&l->renewed), lease = atomic_load(&l->lease_ms);
        int64_t now = drv_mono_ms();
        if (!drv_nlease_expired(renewed, lease, now)) {
            if (l->lapsed)
                drv_info("node lease renewed: new job workers may start");
            l->lapsed = false;
        } else if (!l->lapsed) {
            char why[200];
            snprintf(why, sizeof why,   /* head/jobs_ctl.c knows it by its start */
                     "the node's lease ran out: no answer from the head for %lld ms "
                     "(node_timeout_ms %lld); job workers stop so the gang cannot run twice",
                     (long long)(now - renewed), (long long)lease);
            drv_warn("%s", why);
            drv_supervisor_fail_jobs(l->sup, why, atomic_load(&l->grace_ms));
            l->lapsed = true;
        }
        nanosleep(&tick, NULL);
    }
    return NULL;
}

drv_nlease_t *drv_nlease_create(drv_supervisor_t *sup, drv_error_t *err)
{
    drv_nlease_t *l = calloc(1, sizeof *l);
    if (!l) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    l->sup = sup;
    atomic_store(&l->lease_ms, LEASE_DEFAULT_MS);
    atomic_store(&l->grace_ms, -1);
    int rc = pthread_create(&l->thread, NULL, run, l);
    if (rc != 0) {
        free(l);
        drv_err_internal(err, "node lease: cannot start its thread: %s", strerror(rc));
        return NULL;
    }
    return l;
}

void drv_nlease_destroy(drv_nlease_t *l)
{
    if (!l)
        return;
    atomic_store(&l->quit, true);
    pthread_join(l->thread, NULL);
    free(l);
}

void drv_nlease_renew(drv_nlease_t *l, int64_t sent_mono_ms, int64_t lease_ms,
                      int64_t grace_ms)
{
    if (lease_ms >= 200 && lease_ms <= 3600 * 1000)
        atomic_store(&l->lease_ms, lease_ms);
    if (grace_ms >= 0 && grace_ms <= 600 * 1000)
        atomic_store(&l->grace_ms, (int)grace_ms);
    if (sent_mono_ms > atomic_load(&l->renewed))
        atomic_store(&l->renewed, sent_mono_ms);
}
