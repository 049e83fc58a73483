/* gateway.c — the gateway thread's loop and the gateway's life (see
 * gateway.h for the whole picture): the event loop (an epoll holding the
 * replica connections of upconn.c, an io server's sockets and an eventfd
 * to be woken), the inbox of new
 * jobs, cancels and unpauses, deadlines of waiting jobs, noticing clients
 * that left, the shutdown answer, and creating, stopping and destroying
 * the gateway.
 * Routing lives in route.c, talking to replicas in upstream.c and upconn.c.
 *
 * Everything here runs on the gateway thread except
 * drv_gateway_set_table (any thread: it swaps one pointer),
 * drv_gateway_stop/destroy (main) and drv_gateway_demand and
 * drv_gateway_load_json (any thread, under reg_mu). droverd's embedding
 * (tables from its state, the inference listener, the controller's hooks)
 * is head/gateway_link.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/gw_impl.h"
#include "gateway/serve.h"
#include "gateway/totals.h"

#define WATCH_AFTER_US 50000     /* watch the client socket of jobs older than this */
/* epoll data: the eventfd is its descriptor; an io server's object is its
 * address with the top bit set, a replica connection its address with
 * GW_UC_TAG (user-space addresses never have either). */
#define IO_TAG (1ULL << 63)

/* --- cancel, unpause, expiry, stop ------------------------------------------------------ */

static void cancel(drv_gateway_t *g, drv_gw_job_t *j)
{
    gw_dep_t *d = j->dep;
    switch (j->state) {
    case J_RUNNING:
        drv_gw_stop_transfer(g, j);
        break;
    case J_QUEUED:
        drv_gw_fifo_remove(&d->queue, &j->qlink);
        drv_gw_set_waiting(d);
        break;
    case J_PARKED:
        drv_gw_fifo_remove(&g->parked, &j->qlink);
        break;
    default:
        return;
    }
    drv_gw_fail(g, j, 499, GW_R_CLIENT_GONE, 0, "the client closed the connection");
    if (d && d->queue.n)
        drv_gw_drain(g, d);
}

static void expire(drv_gateway_t *g, int64_t now)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < g->n_deps; i++) {
        gw_dep_t *d = g->deps[i];
        drv_gw_link_t *l = d->queue.head;
        bool changed = false;
        while (l) {
            drv_gw_link_t *nx = l->next;
            drv_gw_job_t *j = JOB_OF(l, qlink);
            if (j->wait_deadline_ms <= now) {
                drv_gw_fifo_remove(&d->queue, l);
                changed = true;
                if (d->n_rt == 0)
                    drv_gw_fail(g, j, 503, GW_R_COLD_TIMEOUT, 5,
                             "deployment '%s' is starting: no replica is ready yet; "
                             "try again shortly", d->id);
                else
                    drv_gw_fail(g, j, 503, GW_R_NO_CAPACITY, 1,
                             "deployment '%s' has no free replica capacity; waited %lld ms",
                             d->id, (long long)(now - j->t0_us / 1000));
            } else if (j->wait_deadline_ms < next) {
                next = j->wait_deadline_ms;
            }
            l = nx;
        }
        if (changed)
            drv_gw_set_waiting(d);
    }
    for (drv_gw_link_t *l = g->parked.head; l;) {
        drv_gw_link_t *nx = l->next;
        drv_gw_job_t *j = JOB_OF(l, qlink);
        if (j->wait_deadline_ms <= now) {
            drv_gw_fifo_remove(&g->parked, l);
            const char *id = strchr(j->key, '/');
            drv_gw_fail(g, j, 404, GW_R_NOT_FOUND, 0, "deployment '%s' not found",
                     id ? id + 1 : j->key);
        } else if (j->wait_deadline_ms < next) {
            next = j->wait_deadline_ms;
        }
        l = nx;
    }
    g->next_expiry_ms = next;
}

static void fail_everything(drv_gateway_t *g)
{
    while (g->active.n) {
        drv_gw_job_t *j = JOB_OF(g->active.head, alink);
        switch (j->state) {
        case J_RUNNING: drv_gw_stop_transfer(g, j); break;
        case J_QUEUED: drv_gw_fifo_remove(&j->dep->queue, &j->qlink); break;
        case J_PARKED: drv_gw_fifo_remove(&g->parked, &j->qlink); break;
        default: break;
        }
        drv_gw_fail(g, j, 503, GW_R_SHUTDOWN, 5, "droverd is shutting down; try again shortly");
    }
    for (size_t i = 0; i < g->n_deps; i++)
        drv_gw_set_waiting(g->deps[i]);
}

static void drain_inbox(drv_gateway_t *g)
{
    drv_gw_job_t *j = atomic_exchange(&g->inbox, NULL), *fifo = NULL;
    while (j) {   /* LIFO -> FIFO */
        drv_gw_job_t *nx = j->mnext;
        j->mnext = fifo;
        fifo = j;
        j = nx;
    }
    while (fifo) {
        j = fifo;
        fifo = j->mnext;
        unsigned bits = atomic_exchange(&j->msgs, 0);
        if (bits & MSG_SUBMIT) {
            drv_gw_job_ref(j);   /* the gateway's, until job_done */
            drv_gw_fifo_push(&g->active, &j->alink);
            j->state = J_NEW;
            drv_gw_route(g, j);
        }
        if (bits & MSG_CANCEL)
            cancel(g, j);
        if ((bits & MSG_UNPAUSE) && j->state == J_RUNNING && j->uc)
            drv_gw_uc_resume(g, j->uc);
        drv_gw_job_unref(j);   /* the inbox's */
    }
}

/* Client sockets of jobs that have waited a while: EOF means the client left. */
static size_t build_watch(drv_gateway_t *g, int64_t now_us)
{
    size_t n = 0;
    for (drv_gw_link_t *l = g->active.head; l; l = l->next) {
        drv_gw_job_t *j = JOB_OF(l, alink);
        if (j->client_fd < 0 || j->nowatch || !atomic_load(&j->suspended) ||
            now_us - j->t0_us < WATCH_AFTER_US)
            continue;
        if (n + 1 >= g->cap_wfd) {
            size_t ncap = g->cap_wfd * 2;
            struct pollfd *nw = realloc(g->wfd, ncap * sizeof *nw);
            if (!nw)
                break;
            g->wfd = nw;
            drv_gw_job_t **nj = realloc(g->wjob, ncap * sizeof *nj);
            if (!nj)
                break;
            g->wjob = nj;
            g->cap_wfd = ncap;
        }
        g->wfd[n + 1] = (struct pollfd){.fd = j->client_fd, .events = POLLIN};
        g->wjob[n] = j;
        n++;
    }
    return n;
}

static void check_watch(drv_gateway_t *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!(g->wfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        drv_gw_job_t *j = g->wjob[i];
        if (j->state == J_DONE)
            continue;
        char c;
        ssize_t r = recv(g->wfd[i + 1].fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            cancel(g, j);
        else if (r > 0)
            j->nowatch = true;   /* the client sent more (pipelining): cannot tell */
    }
}

/* Only a thread that may be blocked needs the write (a syscall, and a
 * wake-up): the gateway sets sleeping, then looks at the inbox and flags
 * once more before it blocks; a waker publishes first, then takes the flag
 * (both sequentially consistent, so one of them sees the other). */
void drv_gw_wake(drv_gateway_t *g)
{
    if (!atomic_exchange(&g->sleeping, false))
        return;
    uint64_t one = 1;
    ssize_t n = write(g->evfd, &one, sizeof one);   /* EAGAIN: already pending */
    (void)n;
}

/* Wait up to timeout ms for the replica connections, the io server's
 * sockets, a wake-up or a watched client socket, and act on what came. */
static void wait_and_run(drv_gateway_t *g, int timeout, size_t nw)
{
    struct epoll_event evs[128];
    int n;
    atomic_store(&g->sleeping, true);
    if (atomic_load(&g->inbox) || atomic_load(&g->pending) ||
        (atomic_load(&g->stopping) && !g->stop_done) || atomic_load(&g->quit))
        timeout = 0;   /* something came meanwhile: look, do not block */
    if (nw) {   /* watched clients too: poll them with the epoll descriptor */
        g->wfd[0] = (struct pollfd){.fd = g->epfd, .events = POLLIN};
        poll(g->wfd, nw + 1, timeout);
        n = epoll_wait(g->epfd, evs, 128, 0);
    } else {
        n = epoll_wait(g->epfd, evs, 128, timeout);
    }
    atomic_store(&g->sleeping, false);
    const drv_gw_io_t *io = atomic_load(&g->io);
    for (int i = 0; i < n; i++) {
        uint64_t tag = evs[i].data.u64;
        if (tag & IO_TAG) {   /* the io server's socket */
            if (io)
                io->event(io->ctx, (void *)(uintptr_t)(tag & ~IO_TAG), evs[i].events);
        } else if (tag & GW_UC_TAG) {
            drv_gw_uc_event(g, (gw_uc_t *)(uintptr_t)(tag & ~GW_UC_TAG), evs[i].events);
        } else if ((int)tag == g->evfd) {
            uint64_t v;
            ssize_t r = read(g->evfd, &v, sizeof v);
            (void)r;
        }
    }
    drv_gw_uc_sweep(g, drv_gw_now_ms());
    if (nw)
        check_watch(g, nw);
    drv_gw_uc_reap(g);   /* nothing of this turn names a closed connection any more */
}

static void *gateway_main(void *arg)
{
    drv_gateway_t *g = arg;
    bool stopped = false;
    while (!atomic_load(&g->quit)) {
        drv_gw_table_t *t = atomic_exchange(&g->pending, NULL);
        if (t)
            drv_gw_adopt(g, t);
        drain_inbox(g);
        if (atomic_load(&g->stopping) && !stopped) {
            fail_everything(g);
            stopped = true;
            pthread_mutex_lock(&g->stop_mu);
            g->stop_done = true;
            pthread_cond_broadcast(&g->stop_cv);
            pthread_mutex_unlock(&g->stop_mu);
        }
        int64_t now = drv_gw_now_ms();
        drv_gw_uc_sweep(g, now);   /* deadlines, and failures to report */
        if (now >= g->next_expiry_ms)
            expire(g, now);
        drv_gw_probes(g, now);
        drv_gw_sample(g, now);
        int timeout = g->active.n ? 100 : 1000;
        const drv_gw_io_t *io = atomic_load(&g->io);
        if (io) {   /* answers to write before the loop may block */
            int want = io->tick(io->ctx);
            if (want < timeout)
                timeout = want < 0 ? 0 : want;
        }
        if (g->next_expiry_ms - now < timeout)
            timeout = (int)(g->next_expiry_ms - now > 0 ? g->next_expiry_ms - now : 0);
        if (g->probe_wanted && g->next_probe_ms - now < timeout)
            timeout = (int)(g->next_probe_ms - now > 0 ? g->next_probe_ms - now : 0);
        if (g->uc_due_ms - now < timeout)
            timeout = (int)(g->uc_due_ms - now > 0 ? g->uc_due_ms - now : 0);
        wait_and_run(g, timeout, build_watch(g, now * 1000));
    }
    return NULL;
}

/* --- life ------------------------------------------------------------------------------ */

void drv_gateway_set_table(drv_gateway_t *g, drv_gw_table_t *t)
{
    t->built_us = drv_gw_now_us();
    drv_gw_table_free(atomic_exchange(&g->pending, t));   /* one not adopted yet: replaced */
    drv_gw_wake(g);
}

drv_gateway_t *drv_gateway_new(const drv_gw_hooks_t *hooks, drv_error_t *err)
{
    drv_gateway_t *g = calloc(1, sizeof *g);
    if (!g) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    g->kick_fn = hooks ? hooks->kick : NULL;
    g->kick_ctx = hooks ? hooks->ctx : NULL;
    g->uc_due_ms = INT64_MAX;
    g->rbuf = malloc(64 * 1024);
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g->cap_wfd = 64;
    g->wfd = malloc(g->cap_wfd * sizeof *g->wfd);
    g->wjob = malloc(g->cap_wfd * sizeof *g->wjob);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)g->evfd};
    if (g->epfd < 0 || g->evfd < 0 || !g->wfd || !g->wjob || !g->rbuf ||
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->evfd, &ev) < 0) {
        drv_err_internal(err, "cannot set up the gateway's event loop: %s", strerror(errno));
        drv_gateway_destroy(g);
        return NULL;
    }
    g->rng = (uint64_t)drv_gw_now_us() * 0x9e3779b97f4a7c15ULL | 1;
    g->next_expiry_ms = INT64_MAX;
    const char *qm = getenv("DROVER_GATEWAY_QUEUE_MAX");   /* tuning and tests */
    g->queue_max = qm && atoi(qm) > 0 && atoi(qm) <= 1000000 ? (size_t)atoi(qm) : DRV_GW_QUEUE_MAX;
    pthread_mutex_init(&g->reg_mu, NULL);
    pthread_mutex_init(&g->stop_mu, NULL);
    pthread_cond_init(&g->stop_cv, NULL);
    if (pthread_create(&g->thread, NULL, gateway_main, g) != 0) {
        drv_err_internal(err, "cannot start the gateway thread");
        drv_gateway_destroy(g);
        return NULL;
    }
    g->started = true;
    return g;
}

void drv_gateway_set_kick(drv_gateway_t *g, void (*kick)(void *ctx), void *ctx)
{
    g->kick_fn = kick;
    g->kick_ctx = ctx;
}

void drv_gateway_stop(drv_gateway_t *g)
{
    if (!g || !g->started)
        return;
    atomic_store(&g->stopping, true);
    drv_gw_wake(g);
    pthread_mutex_lock(&g->stop_mu);
    for (int i = 0; i < 50 && !g->stop_done; i++) {
        struct timespec ts;
        drv_deadline_in(100, &ts);
        pthread_cond_timedwait(&g->stop_cv, &g->stop_mu, &ts);
    }
    pthread_mutex_unlock(&g->stop_mu);
}

void drv_gateway_set_io(drv_gateway_t *g, const drv_gw_io_t *io)
{
    atomic_store(&g->io, io);
}

int drv_gateway_io_watch(drv_gateway_t *g, int op, int fd, void *obj, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.u64 = (uint64_t)(uintptr_t)obj | IO_TAG};
    return epoll_ctl(g->epfd, op, fd, &ev);
}

void drv_gateway_join(drv_gateway_t *g)
{
    if (!g || !g->started || g->joined)
        return;
    drv_gateway_stop(g);
    atomic_store(&g->quit, true);
    drv_gw_wake(g);
    pthread_join(g->thread, NULL);
    g->joined = true;
    drain_inbox(g);   /* late messages: answered (stopping) and released */
    fail_everything(g);
    const drv_gw_io_t *io = atomic_exchange(&g->io, NULL);
    if (io) {
        io->close(io->ctx);   /* its connections let go of their jobs ... */
        drain_inbox(g);       /* ... whose cancels come here */
    }
}

void drv_gateway_destroy(drv_gateway_t *g)
{
    if (!g)
        return;
    drv_gateway_join(g);
    drv_gw_table_free(atomic_exchange(&g->pending, NULL));
    for (size_t i = 0; i < g->n_deps; i++)
        drv_gw_dep_free(g, g->deps[i]);
    free(g->deps);
    drv_gw_uc_reap(g);   /* the replicas' idle connections were closed with them */
    free(g->rbuf);
    free(g->wfd);
    free(g->wjob);
    if (g->epfd >= 0)
        close(g->epfd);
    if (g->evfd >= 0)
        close(g->evfd);
    pthread_mutex_destroy(&g->reg_mu);
    pthread_mutex_destroy(&g->stop_mu);
    pthread_cond_destroy(&g->stop_cv);
    free(g);
}

bool drv_gateway_demand(drv_gateway_t *g, const char *key, drv_gw_demand_t *out)
{
    memset(out, 0, sizeof *out);
    if (!g)
        return false;
    pthread_mutex_lock(&g->reg_mu);
    gw_dep_t *d = drv_gw_dep_find(g, key);
    if (d) {
        out->in_flight = atomic_load_explicit(&d->st.in_flight, memory_order_relaxed);
        out->queued = atomic_load_explicit(&d->queued, memory_order_relaxed);
        out->waiting_since_ms = atomic_load_explicit(&d->waiting_since_ms, memory_order_relaxed);
        out->cold = atomic_load(&d->cold);
        out->arrivals = atomic_load_explicit(&d->arrivals, memory_order_relaxed);
        out->served = atomic_load_explicit(&d->served, memory_order_relaxed);
        out->served_first_us = atomic_load_explicit(&d->served_first_us, memory_order_relaxed);
        out->served_first_sq_ms2 =
            atomic_load_explicit(&d->served_first_sq_ms2, memory_order_relaxed);
        out->served_us = atomic_load_explicit(&d->served_us, memory_order_relaxed);
        out->served_sq_ms2 = atomic_load_explicit(&d->served_sq_ms2, memory_order_relaxed);
        out->max_concurrency = d->max_conc;
        const gw_prompt_t *p = &d->prompt;
        out->prompted = atomic_load_explicit(&p->n, memory_order_relaxed);
        out->prompt_tokens = atomic_load_explicit(&p->tokens, memory_order_relaxed);
        for (size_t b = 0; b < DRV_PROMPTLEN_BINS; b++)
            out->prompt_hist[b] = atomic_load_explicit(&p->hist[b], memory_order_relaxed);
        out->served_prompted = atomic_load_explicit(&p->served, memory_order_relaxed);
        out->served_p = atomic_load_explicit(&p->served_p, memory_order_relaxed);
        out->served_p_first_us = atomic_load_explicit(&p->served_f_us, memory_order_relaxed);
        out->served_pp = atomic_load_explicit(&p->served_pp, memory_order_relaxed);
        out->served_pf_ms = atomic_load_explicit(&p->served_pf_ms, memory_order_relaxed);
        const drv_gw_gen_totals_t *t = &d->gen;
        out->served_gen = atomic_load_explicit(&t->n, memory_order_relaxed);
        out->gen_tokens = atomic_load_explicit(&t->tokens, memory_order_relaxed);
        out->batch_n = atomic_load_explicit(&t->bn, memory_order_relaxed);
        out->batch_x_milli = atomic_load_explicit(&t->bx_milli, memory_order_relaxed);
        out->batch_xx_centi = atomic_load_explicit(&t->bxx_centi, memory_order_relaxed);
        out->batch_y_10ns = atomic_load_explicit(&t->by_10ns, memory_order_relaxed);
        out->batch_xy_us = atomic_load_explicit(&t->bxy_us, memory_order_relaxed);
    }
    pthread_mutex_unlock(&g->reg_mu);
    return d != NULL;
}


/* The deployments with load or running totals, each with its totals
 * (gateway/totals.h): the keys under reg_mu, then drv_gateway_demand per
 * key, so the totals are read in one place. */
json_t *drv_gateway_load_json(drv_gateway_t *g)
{
    json_t *a = json_array();
    pthread_mutex_lock(&g->reg_mu);
    size_t n = g->n_deps;
    char **keys = calloc(n ? n : 1, sizeof *keys);
    for (size_t i = 0; keys && i < n; i++)
        keys[i] = strdup(g->deps[i]->key);
    pthread_mutex_unlock(&g->reg_mu);
    for (size_t i = 0; a && keys && i < n; i++) {
        drv_gw_demand_t d;
        if (!keys[i] || !drv_gateway_demand(g, keys[i], &d) ||
            !(d.in_flight || d.queued || d.cold || drv_gw_totals_any(&d)))
            continue;
        json_t *e = json_pack("{s:s, s:i, s:i, s:b}", "deployment", keys[i], "in_flight",
                              (int)d.in_flight, "queued", (int)d.queued, "cold",
                              d.cold && d.queued > 0);
        if (e && drv_gw_totals_any(&d) && drv_gw_totals_to_json(&d, e) < 0) {
            json_decref(e);
            e = NULL;
        }
        json_array_append_new(a, e);
    }
    for (size_t i = 0; keys && i < n; i++)
        free(keys[i]);
    free(keys);
    return a;
}
