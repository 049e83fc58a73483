/* gateway.c — the gateway thread's loop and the gateway's life (see
 * gateway.h for the whole picture): the event loop (libcurl's multi_socket
 * API on an epoll of our own, an eventfd to be woken), the inbox of new
 * jobs, cancels and unpauses, deadlines of waiting jobs, noticing clients
 * that left, the shutdown answer, and creating, stopping and destroying
 * the gateway.
 * Routing lives in route.c, talking to replicas in upstream.c.
 *
 * Everything here runs on the gateway thread except drv_gateway_publish
 * (the controller thread, under the state lock: it only builds a table and
 * swaps one pointer), drv_gateway_stop/destroy (main) and
 * drv_gateway_demand (any thread, under reg_mu).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/gw_impl.h"
#include "head/state.h"

#define WATCH_AFTER_US 50000     /* watch the client socket of jobs older than this */
/* epoll data: a curl socket or the eventfd is its descriptor; an io
 * server's object is its address with the top bit set (user-space
 * addresses never have it). */
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
        if ((bits & MSG_UNPAUSE) && j->state == J_RUNNING && j->easy)
            curl_easy_pause(j->easy, CURLPAUSE_CONT);
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

/* --- curl's sockets in our epoll (multi_socket API) ----------------------------------- */

/* What the epoll holds for curl's descriptor fd (grown on demand; NULL
 * when fd is absurd or memory is short: then every change is a syscall). */
static uint32_t *cfd_slot(drv_gateway_t *g, int fd)
{
    if (fd < 0 || fd >= 1 << 20)
        return NULL;
    if ((size_t)fd >= g->n_cfd) {
        size_t n = g->n_cfd ? g->n_cfd : 256;
        while (n <= (size_t)fd)
            n *= 2;
        uint32_t *nv = realloc(g->cfd, n * sizeof *nv);
        if (!nv)
            return NULL;
        memset(nv + g->n_cfd, 0, (n - g->n_cfd) * sizeof *nv);
        g->cfd = nv;
        g->n_cfd = n;
    }
    return &g->cfd[fd];
}

/* A kept-alive replica connection curl is not using stays in the epoll
 * (CFD_IDLE): taking it out and putting it back for every request were two
 * syscalls each time. If it stirs while idle (the replica closed it), it
 * is taken out then (wait_and_run). curl closes its sockets through
 * on_close_socket, which forgets them, so a slot never outlives its socket. */
static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)e, (void)socketp;
    drv_gateway_t *g = userp;
    uint32_t *slot = cfd_slot(g, s);
    if (what == CURL_POLL_REMOVE) {
        if (slot && (*slot & CFD_REG))
            *slot |= CFD_IDLE;
        else
            epoll_ctl(g->epfd, EPOLL_CTL_DEL, s, NULL);
        curl_multi_assign(g->multi, s, NULL);
        return 0;
    }
    uint32_t want = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    if (slot && (*slot & CFD_REG) && (*slot & CFD_EVENTS) == want) {
        *slot = CFD_REG | want;   /* already watched for exactly that */
    } else {
        struct epoll_event ev = {.events = want, .data.u64 = (uint64_t)s};
        int op = slot && (*slot & CFD_REG) ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
        if (epoll_ctl(g->epfd, op, s, &ev) < 0) {   /* a reused descriptor: the other op */
            op = op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
            if (epoll_ctl(g->epfd, op, s, &ev) < 0)
                drv_warn("gateway: epoll_ctl on a replica connection: %s", strerror(errno));
        }
        if (slot)
            *slot = CFD_REG | want;
    }
    curl_multi_assign(g->multi, s, (void *)1);
    return 0;
}

/* CURLOPT_CLOSESOCKETFUNCTION of every easy handle (drv_gw_easy_setup). */
static int on_close_socket(void *clientp, curl_socket_t s)
{
    drv_gateway_t *g = clientp;
    uint32_t *slot = cfd_slot(g, s);
    if (slot)
        *slot = 0;   /* closing takes it out of the epoll */
    return close(s);
}

void drv_gw_easy_setup(drv_gateway_t *g, CURL *e)
{
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, g);
}

static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    drv_gateway_t *g = userp;
    g->curl_timer_ms = timeout_ms < 0 ? -1 : drv_gw_now_ms() + timeout_ms;
    return 0;
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

static void finished(drv_gateway_t *g)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(g->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        void *p = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&p);
        CURLcode rc = m->data.result;
        if (p && *(int *)p == GW_TAG_JOB)
            drv_gw_on_done(g, p, rc);
        else if (p)
            drv_gw_probe_done(g, p, rc);
    }
}

/* Wait up to timeout ms for curl's sockets, a wake-up or a watched client
 * socket, and act on what came. */
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
    int running;
    const drv_gw_io_t *io = atomic_load(&g->io);
    for (int i = 0; i < n; i++) {
        if (evs[i].data.u64 & IO_TAG) {   /* the io server's socket */
            if (io)
                io->event(io->ctx, (void *)(uintptr_t)(evs[i].data.u64 & ~IO_TAG),
                          evs[i].events);
            continue;
        }
        int fd = (int)evs[i].data.u64;
        if (fd == g->evfd) {
            uint64_t v;
            ssize_t r = read(g->evfd, &v, sizeof v);
            (void)r;
            continue;
        }
        if ((size_t)fd < g->n_cfd && (g->cfd[fd] & CFD_IDLE)) {   /* not curl's now */
            epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
            g->cfd[fd] = 0;
            continue;
        }
        int mask = ((evs[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                   ((evs[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                   ((evs[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(g->multi, fd, mask, &running);
    }
    if (g->curl_timer_ms >= 0 && drv_gw_now_ms() >= g->curl_timer_ms) {
        g->curl_timer_ms = -1;
        curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    finished(g);
    if (nw)
        check_watch(g, nw);
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
        if (g->curl_timer_ms >= 0 && now >= g->curl_timer_ms) {   /* new transfers start here */
            int running;
            g->curl_timer_ms = -1;
            curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &running);
            finished(g);
        }
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
        if (g->curl_timer_ms >= 0 && g->curl_timer_ms - now < timeout)
            timeout = (int)(g->curl_timer_ms - now > 0 ? g->curl_timer_ms - now : 0);
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

void drv_gateway_publish(void *ctx)
{
    drv_gateway_t *g = ctx;
    drv_gw_table_t *t = drv_gw_table_build(g->head->state);
    if (!t)
        return;
    drv_gw_peers_publish(g, t);   /* standalone gateways' copy, when one follows */
    drv_gateway_set_table(g, t);
}

/* The replica autoscaler's input: requests in flight and queued; a cold
 * start (requests waiting with no ready replica) asks for one at once.
 * Standalone gateways' reports add theirs. */
static void gw_load(void *ctx, const char *key, double *load, bool *waiting)
{
    drv_gw_demand_t d;
    *load = 0;
    *waiting = false;
    if (drv_gateway_demand(ctx, key, &d)) {
        *load = (double)d.in_flight + (double)d.queued;
        *waiting = d.cold && d.queued > 0;
    }
    double pl = 0;
    bool pw = false;
    drv_gw_peers_load(ctx, key, &pl, &pw);
    *load += pl;
    *waiting = *waiting || pw;
}

static void head_kick(void *ctx)
{
    drv_head_kick(ctx);
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
    curl_global_init(CURL_GLOBAL_DEFAULT);   /* reference counted */
    g->multi = curl_multi_init();
    if (!g->multi) {
        curl_global_cleanup();
        free(g);
        drv_err_internal(err, "cannot create the gateway's HTTP client");
        return NULL;
    }
    curl_multi_setopt(g->multi, CURLMOPT_MAXCONNECTS, 4096L);
    curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, g);
    curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, g);
    g->curl_timer_ms = -1;
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g->cap_wfd = 64;
    g->wfd = malloc(g->cap_wfd * sizeof *g->wfd);
    g->wjob = malloc(g->cap_wfd * sizeof *g->wjob);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)g->evfd};
    if (g->epfd < 0 || g->evfd < 0 || !g->wfd || !g->wjob ||
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->evfd, &ev) < 0) {
        drv_err_internal(err, "cannot set up the gateway's event loop: %s", strerror(errno));
        drv_gateway_destroy(g);
        return NULL;
    }
    g->hdr_json = curl_slist_append(NULL, "Content-Type: application/json");
    g->hdr_json = curl_slist_append(g->hdr_json, "Expect:");
    g->rng = (uint64_t)drv_gw_now_us() * 0x9e3779b97f4a7c15ULL | 1;
    g->next_expiry_ms = INT64_MAX;
    const char *qm = getenv("DROVER_GATEWAY_QUEUE_MAX");   /* tuning and tests */
    g->queue_max = qm && atoi(qm) > 0 && atoi(qm) <= 1000000 ? (size_t)atoi(qm) : DRV_GW_QUEUE_MAX;
    pthread_mutex_init(&g->reg_mu, NULL);
    pthread_mutex_init(&g->stop_mu, NULL);
    pthread_mutex_init(&g->peers_mu, NULL);
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

drv_gateway_t *drv_gateway_create(drv_head_t *head, drv_error_t *err)
{
    drv_gw_hooks_t hooks = {head_kick, head};
    drv_gateway_t *g = drv_gateway_new(&hooks, err);
    if (!g)
        return NULL;
    g->head = head;
    head->gateway = g;
    head->publish = drv_gateway_publish;
    head->publish_ctx = g;
    head->load = gw_load;
    head->load_ctx = g;
    return g;
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
    if (g->head) {
        g->head->publish = NULL;
        g->head->load = NULL;
    }
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
    if (g->head && g->head->gateway == g)
        g->head->gateway = NULL;
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
    for (size_t i = 0; i < g->n_easy; i++)
        curl_easy_cleanup(g->easy_pool[i]);
    free(g->easy_pool);
    free(g->wfd);
    free(g->wjob);
    drv_gw_peers_free(g);
    curl_slist_free_all(g->hdr_json);
    curl_slist_free_all(g->hdr_plain);
    curl_multi_cleanup(g->multi);   /* closes kept-alive sockets: on_close_socket uses cfd */
    free(g->cfd);
    curl_global_cleanup();
    if (g->epfd >= 0)
        close(g->epfd);
    if (g->evfd >= 0)
        close(g->evfd);
    pthread_mutex_destroy(&g->reg_mu);
    pthread_mutex_destroy(&g->stop_mu);
    pthread_mutex_destroy(&g->peers_mu);
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
    }
    pthread_mutex_unlock(&g->reg_mu);
    return d != NULL;
}


json_t *drv_gateway_load_json(drv_gateway_t *g)
{
    json_t *a = json_array();
    pthread_mutex_lock(&g->reg_mu);
    for (size_t i = 0; i < g->n_deps; i++) {
        gw_dep_t *d = g->deps[i];
        uint32_t inf = atomic_load_explicit(&d->st.in_flight, memory_order_relaxed);
        uint32_t q = atomic_load_explicit(&d->queued, memory_order_relaxed);
        bool cold = atomic_load(&d->cold);
        if (inf || q || cold)
            json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:b}", "deployment", d->key,
                                               "in_flight", (int)inf, "queued", (int)q, "cold",
                                               cold && q > 0));
    }
    pthread_mutex_unlock(&g->reg_mu);
    return a;
}
