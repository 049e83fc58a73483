/* cloudw.c — the cloud providers' worker (see cloudw.h): machines as
 * drover nodes, through a backend's create, terminate and list.
 *
 * Data, all owned by the worker context and guarded by its mutex:
 *   - jobs: launches and terminations queued by the controller (a FIFO);
 *   - pending: the nodes whose launch is queued or being made (sorted);
 *   - accounts: the (endpoint, region, key) the controller says are in
 *     use, listed every LIST_MS (sooner after a job);
 *   - inst: this head's machines as last listed (plus the ones launched
 *     since), each with its account, sorted by (owner, node, id);
 *   - known: the nodes that exist, as the controller last said (sorted); a
 *     machine whose node is not known is an orphan, terminated after a
 *     grace period;
 *   - results: finished calls for the controller.
 * The controller's questions per node (alive, gone, instance_of) are binary
 * searches, and a listing's merge and orphan sweep linear walks of sorted
 * lists (aws_index.h): the controller asks under the state write lock.
 * The worker copies what it needs, drops the mutex for every cloud call,
 * and takes it again to publish the outcome. Secrets are never logged.
 */
#define _GNU_SOURCE
#include "provider/cloudw.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "provider/aws_index.h"

#define LIST_MS 2000
#define LAUNCH_VISIBLE_MS 120000   /* a launch of ours stays known this long unlisted */
#define LIST_BACKOFF_MAX_MS 300000
#define MAX_RESULTS 1024

typedef struct job {
    bool create;
    char owner[64], node_id[64];
    drv_node_launch_t launch;    /* create: everything; delete: unused */
} job_t;

typedef struct account {
    drv_cloud_settings_t s;
    bool in_use;                 /* named by the controller's last update */
    int listings;                /* listings that succeeded since start */
    int64_t list_start_ms;       /* when the last good listing started */
    int64_t next_list_ms;
    int failures;                /* consecutive failed listings (backoff) */
} account_t;

typedef drv_aws_inst_t inst_t;

struct drv_cloudw {
    drv_cloud_backend_t be;
    char head_id[64];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, started, kicked;
    job_t *jobs;                 /* jobs[jobs_head .. n_jobs) are queued */
    size_t jobs_head, n_jobs, cap_jobs;
    drv_node_ref_t *pending;     /* creates queued or being made (a sorted multiset) */
    size_t n_pending, cap_pending;
    account_t *accts;
    size_t n_accts, cap_accts;
    inst_t *inst;
    size_t n_inst, cap_inst;
    drv_node_ref_t *known;
    size_t n_known;
    bool known_set;
    drv_prov_result_t *results;
    size_t n_results;
    char failed[256][2][64];     /* nodes whose launch failed: no machine (a ring) */
    size_t n_failed;
    unsigned long long calls;
};

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return p;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *np = realloc(p, ncap * size);
    if (!np)
        abort();
    *cap = ncap;
    return np;
}

/* Index of the account for s (added, or its secret refreshed). Under mu. */
static size_t account_index(drv_cloudw_t *a, const drv_cloud_settings_t *s)
{
    for (size_t i = 0; i < a->n_accts; i++)
        if (a->be.same_account(&a->accts[i].s, s)) {
            a->accts[i].s = *s;
            return i;
        }
    a->accts = grow(a->accts, &a->cap_accts, a->n_accts, sizeof *a->accts);
    account_t *ac = &a->accts[a->n_accts];
    memset(ac, 0, sizeof *ac);
    ac->s = *s;
    return a->n_accts++;
}

static inst_t *inst_of_node(drv_cloudw_t *a, const char *owner, const char *node)
{
    return drv_aws_inst_of_node(a->inst, a->n_inst, owner, node);
}

static bool in_flight(drv_cloudw_t *a, const char *owner, const char *node)
{
    return drv_aws_refs_has(a->pending, a->n_pending, owner, node);
}

static void push_result(drv_cloudw_t *a, const drv_prov_result_t *r)
{
    if (a->n_results == MAX_RESULTS)
        return;   /* the controller stopped draining: drop, the listing reconciles */
    a->results[a->n_results++] = *r;
}

/* --- boot script ------------------------------------------------------------ */

static bool shell_safe(const char *s)
{
    for (; *s; s++)
        if (*s == '\'' || *s == '\n' || *s == '\\')
            return false;
    return true;
}

char *drv_cloud_boot_script(const drv_node_launch_t *l)
{
    if (!shell_safe(l->cloud.head_url) || !shell_safe(l->join_token) || !shell_safe(l->cloud.ca_hash) ||
        !shell_safe(l->node_id) || !shell_safe(l->gpus))
        return NULL;
    char *s = NULL;
    /* The image has drover-agent installed. The environment variables let
     * an operator (or the test harness playing the VM) adapt paths. */
    if (asprintf(&s,
                 "#!/bin/sh\n"
                 "# drover node %s (nodepool %s/%s): start the agent; installs nothing.\n"
                 "# The join token is single-use, bound to this node, and expires soon.\n"
                 "DIR=\"${DROVER_AGENT_DIR:-/var/lib/drover-agent}\"\n"
                 "ADDR=\"${DROVER_ADVERTISE_ADDR:-$(hostname -I 2>/dev/null | cut -d' ' -f1)}\"\n"
                 "mkdir -p \"$DIR\"\n"
                 "exec drover-agent --server '%s' --join-token '%s' --data-dir \"$DIR\" \\\n"
                 "    --gpus \"${DROVER_GPUS:-auto}\" --advertise-addr \"${ADDR:-127.0.0.1}\"%s%s%s\n",
                 l->node_id, l->cluster, l->nodepool, l->cloud.head_url, l->join_token,
                 l->cloud.ca_hash[0] ? " \\\n    --ca-hash '" : "", l->cloud.ca_hash,
                 l->cloud.ca_hash[0] ? "'" : "") < 0)
        return NULL;
    return s;
}

/* --- the worker's calls (mu not held) ---------------------------------------- */

static void do_create(drv_cloudw_t *a, const job_t *j)
{
    const drv_node_launch_t *l = &j->launch;
    drv_prov_result_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.owner, sizeof r.owner, "%s", l->owner);
    snprintf(r.node_id, sizeof r.node_id, "%s", l->node_id);
    snprintf(r.cluster, sizeof r.cluster, "%s", l->cluster);
    snprintf(r.nodepool, sizeof r.nodepool, "%s", l->nodepool);
    snprintf(r.instance_type, sizeof r.instance_type, "%s", l->instance_type);
    snprintf(r.capacity, sizeof r.capacity, "%s", l->capacity);
    r.create = true;
    drv_error_t err = {0};
    drv_ec2_instance_t x;
    memset(&x, 0, sizeof x);
    unsigned calls = 0;
    r.cls = DRV_PROV_RETRY;
    int rc = a->be.create(a->be.ctx, a->head_id, l, &x, &r.cls, &calls, &err);
    const char *id = x.id;
    pthread_mutex_lock(&a->mu);
    a->calls += calls;
    drv_aws_refs_remove(a->pending, &a->n_pending, j->owner, j->node_id);
    if (rc == 0) {
        r.cls = DRV_PROV_OK;
        snprintf(r.instance_id, sizeof r.instance_id, "%s", id);
        snprintf(r.message, sizeof r.message, "launched %s %s instance %s%s%s", l->instance_type,
                 l->capacity, id, x.zone[0] ? " in " : "", x.zone);
        inst_t in;
        memset(&in, 0, sizeof in);
        in.x = x;
        if (!in.x.state[0])
            snprintf(in.x.state, sizeof in.x.state, "pending");
        snprintf(in.x.type, sizeof in.x.type, "%s", l->instance_type);
        snprintf(in.x.head, sizeof in.x.head, "%s", a->head_id);
        snprintf(in.x.owner, sizeof in.x.owner, "%s", l->owner);
        snprintf(in.x.cluster, sizeof in.x.cluster, "%s", l->cluster);
        snprintf(in.x.nodepool, sizeof in.x.nodepool, "%s", l->nodepool);
        snprintf(in.x.node, sizeof in.x.node, "%s", l->node_id);
        in.acct = account_index(a, &l->cloud);
        in.added_ms = drv_mono_ms();
        a->inst = grow(a->inst, &a->cap_inst, a->n_inst, sizeof *a->inst);
        drv_aws_inst_insert(a->inst, &a->n_inst, &in);
    } else {
        snprintf(r.message, sizeof r.message, "%s", err.message);
        /* its record goes; a machine made despite a transport error is an
         * orphan the listing finds */
        size_t at = a->n_failed++ % 256;
        snprintf(a->failed[at][0], 64, "%s", l->owner);
        snprintf(a->failed[at][1], 64, "%s", l->node_id);
    }
    push_result(a, &r);
    pthread_mutex_unlock(&a->mu);
    if (rc == 0)
        drv_info("%s: node %s/%s: launched %s (%s, %s)", a->be.name, l->owner, l->node_id, id,
                 l->instance_type, l->capacity);
    else
        drv_warn("%s: node %s/%s: launch failed (%s): %s", a->be.name, l->owner, l->node_id,
                 drv_prov_class_name(r.cls), err.message);
}

/* Terminate the instances v[0..n) (same account). */
static int terminate(drv_cloudw_t *a, const drv_cloud_settings_t *s, const drv_ec2_instance_t *v,
                     size_t n, const char *why)
{
    drv_error_t err = {0};
    unsigned calls = 0;
    int rc = a->be.terminate(a->be.ctx, s, v, n, &calls, &err);
    pthread_mutex_lock(&a->mu);
    a->calls += calls;
    pthread_mutex_unlock(&a->mu);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            drv_info("%s: terminating instance %s (%s)", a->be.name, v[i].id, why);
        else
            drv_warn("%s: cannot terminate instance %s (%s): %s", a->be.name, v[i].id, why,
                     err.message);
    }
    return rc;
}

static void do_delete(drv_cloudw_t *a, const job_t *j)
{
    pthread_mutex_lock(&a->mu);
    inst_t *in = inst_of_node(a, j->owner, j->node_id);
    drv_cloud_settings_t s;
    drv_ec2_instance_t x;
    char id[128] = "";
    if (in && in->acct < a->n_accts) {
        s = a->accts[in->acct].s;
        x = in->x;
        snprintf(id, sizeof id, "%s", in->x.id);
        in->terminate_sent_ms = drv_mono_ms();
    }
    pthread_mutex_unlock(&a->mu);
    if (!id[0])
        return;   /* nothing known: the next listing tells */
    char why[160];
    snprintf(why, sizeof why, "node %s/%s is released", j->owner, j->node_id);
    if (terminate(a, &s, &x, 1, why) == 0) {
        pthread_mutex_lock(&a->mu);
        inst_t *t = drv_aws_inst_find(a->inst, a->n_inst, j->owner, j->node_id, id);
        if (t)
            snprintf(t->x.state, sizeof t->x.state, "shutting-down");
        pthread_mutex_unlock(&a->mu);
    }
    explicit_bzero(&s, sizeof s);
}

/* List one account's instances; replace what is known of it. */
static void list_account(drv_cloudw_t *a, size_t ai)
{
    pthread_mutex_lock(&a->mu);
    drv_cloud_settings_t s = a->accts[ai].s;
    pthread_mutex_unlock(&a->mu);
    drv_ec2_instance_t *v = NULL;
    size_t n = 0;
    drv_error_t err = {0};
    unsigned calls = 0;
    int64_t started = drv_mono_ms();
    int rc = a->be.list(a->be.ctx, &s, a->head_id, &v, &n, &calls, &err);
    int64_t now = drv_mono_ms();
    pthread_mutex_lock(&a->mu);
    a->calls += calls;
    account_t *ac = &a->accts[ai];
    if (rc < 0) {
        ac->failures++;
        int64_t back = (int64_t)LIST_MS << (ac->failures < 8 ? ac->failures : 8);
        ac->next_list_ms = now + (back < LIST_BACKOFF_MAX_MS ? back : LIST_BACKOFF_MAX_MS);
        int failures = ac->failures;   /* ac may move once mu is released */
        pthread_mutex_unlock(&a->mu);
        if (failures == 1 || failures % 10 == 0)
            drv_warn("%s: listing instances at %s (%s) failed %d time(s): %s", a->be.name, s.endpoint,
                     s.region, failures, err.message);
        explicit_bzero(&s, sizeof s);
        return;
    }
    ac->failures = 0;
    if (ac->listings < DRV_AWS_MISSES_GONE)
        ac->listings++;
    ac->list_start_ms = started;
    ac->next_list_ms = now + LIST_MS;
    /* keep other accounts' instances and ours launched recently: EC2's
     * DescribeInstances may not show a new instance for a while, and one
     * dropped here would read as a machine gone (node released, replaced,
     * the real machine left billing until the orphan sweep) */
    size_t k = 0, n_old = a->n_inst;
    inst_t *nv = drv_aws_merge_listing(a->inst, n_old, ai, v, n, started, now,
                                       LAUNCH_VISIBLE_MS, &k);
    if (!nv)
        abort();
    free(a->inst);
    a->inst = nv;
    a->n_inst = k;
    a->cap_inst = n_old + n + 1;
    free(v);
    /* orphans: a live instance of ours whose node the controller does not know */
    drv_ec2_instance_t orphans[100];
    size_t no = 0, at = 0;   /* inst and known are both sorted by (owner, node) */
    for (size_t i = 0; i < a->n_inst && a->known_set; i++) {
        inst_t *in = &a->inst[i];
        bool known = drv_aws_refs_walk(a->known, a->n_known, &at, in->x.owner, in->x.node);
        if (in->acct != ai || !drv_aws_live_state(in->x.state) ||
            in_flight(a, in->x.owner, in->x.node) || known) {
            in->orphan_since_ms = 0;
            continue;
        }
        if (!in->orphan_since_ms) {
            in->orphan_since_ms = now;
            drv_info("%s: instance %s (node %s/%s) has no node; terminating it after %d s",
                     a->be.name, in->x.id, in->x.owner, in->x.node, s.orphan_grace_s);
        }
        if (now - in->orphan_since_ms >= (int64_t)s.orphan_grace_s * 1000 &&
            now - in->terminate_sent_ms > 10000 && no < 100) {
            orphans[no] = in->x;
            in->terminate_sent_ms = now;
            no++;
        }
    }
    pthread_mutex_unlock(&a->mu);
    if (no)
        terminate(a, &s, orphans, no, "orphan: no node of this head owns it");
    explicit_bzero(&s, sizeof s);
}

static void *worker(void *arg)
{
    drv_cloudw_t *a = arg;
    pthread_mutex_lock(&a->mu);
    while (!a->stop) {
        if (a->jobs_head < a->n_jobs) {
            job_t j = a->jobs[a->jobs_head];
            explicit_bzero(&a->jobs[a->jobs_head], sizeof j);
            if (++a->jobs_head == a->n_jobs)
                a->jobs_head = a->n_jobs = 0;
            pthread_mutex_unlock(&a->mu);
            if (j.create)
                do_create(a, &j);
            else
                do_delete(a, &j);
            explicit_bzero(&j, sizeof j);
            pthread_mutex_lock(&a->mu);
            continue;
        }
        int64_t now = drv_mono_ms(), next = now + LIST_MS;
        size_t due = (size_t)-1;
        for (size_t i = 0; i < a->n_accts; i++) {
            if (!a->accts[i].in_use)
                continue;
            if (a->accts[i].next_list_ms <= now) {
                due = i;
                break;
            }
            if (a->accts[i].next_list_ms < next)
                next = a->accts[i].next_list_ms;
        }
        if (due != (size_t)-1) {
            pthread_mutex_unlock(&a->mu);
            list_account(a, due);
            pthread_mutex_lock(&a->mu);
            continue;
        }
        if (!a->kicked) {
            struct timespec ts;
            drv_deadline_in((int)(next - now), &ts);
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
        }
        a->kicked = false;
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* --- lifecycle ------------------------------------------------------------ */

static int load_head_id(const char *data_dir, char *id, size_t len, drv_error_t *err)
{
    char path[600];
    snprintf(path, sizeof path, "%s/head-id", data_dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char buf[64] = "";
        if (fgets(buf, sizeof buf, f))
            buf[strcspn(buf, "\r\n")] = '\0';
        fclose(f);
        if (buf[0]) {
            snprintf(id, len, "%s", buf);
            return 0;
        }
    }
    char hex[17];
    if (drv_random_hex(8, hex) < 0)
        return drv_err_internal(err, "no randomness for the head id");
    snprintf(id, len, "h-%s", hex);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return drv_err_internal(err, "cannot write %s: %s", path, strerror(errno));
    dprintf(fd, "%s\n", id);
    int rc = fsync(fd);
    close(fd);
    return rc < 0 ? drv_err_internal(err, "cannot sync %s", path) : 0;
}

drv_cloudw_t *drv_cloudw_create(const char *data_dir, const drv_cloud_backend_t *be,
                                drv_error_t *err)
{
    drv_cloudw_t *a = calloc(1, sizeof *a);
    if (!a) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    a->be = *be;
    a->results = calloc(MAX_RESULTS, sizeof *a->results);
    if (!a->results || load_head_id(data_dir, a->head_id, sizeof a->head_id, err) < 0) {
        if (!a->results)
            drv_err_internal(err, "out of memory");
        free(a->results);
        free(a);
        return NULL;
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    if (pthread_create(&a->thread, NULL, worker, a) != 0) {
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
        free(a->results);
        free(a);
        drv_err_internal(err, "cannot start the %s worker thread", be->name);
        return NULL;
    }
    a->started = true;
    return a;
}

void drv_cloudw_destroy(drv_cloudw_t *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->stop = true;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (a->started)
        pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    if (a->jobs)
        explicit_bzero(a->jobs, a->cap_jobs * sizeof *a->jobs);
    if (a->accts)
        explicit_bzero(a->accts, a->cap_accts * sizeof *a->accts);
    free(a->jobs);
    free(a->pending);
    free(a->accts);
    free(a->inst);
    free(a->known);
    free(a->results);
    free(a);
}

const char *drv_cloudw_head_id(const drv_cloudw_t *a)
{
    return a->head_id;
}

void *drv_cloudw_ctx(const drv_cloudw_t *a)
{
    return a->be.ctx;
}

unsigned long long drv_cloudw_calls(drv_cloudw_t *a)
{
    pthread_mutex_lock(&a->mu);
    unsigned long long n = a->calls;
    pthread_mutex_unlock(&a->mu);
    return n;
}

/* --- provider ops (controller thread, no state lock) ------------------------ */

static void enqueue(drv_cloudw_t *a, const job_t *j)
{
    pthread_mutex_lock(&a->mu);
    if (a->n_jobs == a->cap_jobs && a->jobs_head > 0 && a->jobs_head >= a->n_jobs / 2) {
        /* at least half the slots were run: reuse them (amortized O(1)) */
        memmove(&a->jobs[0], &a->jobs[a->jobs_head],
                (a->n_jobs - a->jobs_head) * sizeof *a->jobs);
        a->n_jobs -= a->jobs_head;
        a->jobs_head = 0;
    }
    a->jobs = grow(a->jobs, &a->cap_jobs, a->n_jobs, sizeof *a->jobs);
    a->jobs[a->n_jobs++] = *j;
    if (j->create) {   /* in flight from now until do_create publishes its outcome */
        a->pending = grow(a->pending, &a->cap_pending, a->n_pending, sizeof *a->pending);
        drv_aws_refs_add(a->pending, &a->n_pending, j->owner, j->node_id);
    }
    a->kicked = true;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

int drv_cloudw_create_node(drv_cloudw_t *a, const drv_node_launch_t *l, drv_error_t *err)
{
    if (!a)
        return drv_err_internal(err, "the cloud provider is not running");
    if (!l->join_token[0])
        return 0;   /* a restart's re-launch: instances are adopted by listing instead */
    job_t *j = calloc(1, sizeof *j);
    if (!j)
        return drv_err_internal(err, "out of memory");
    j->create = true;
    snprintf(j->owner, sizeof j->owner, "%s", l->owner);
    snprintf(j->node_id, sizeof j->node_id, "%s", l->node_id);
    j->launch = *l;
    enqueue(a, j);
    explicit_bzero(j, sizeof *j);
    free(j);
    return 0;
}

int drv_cloudw_delete_node(drv_cloudw_t *a, const char *owner, const char *id,
                           drv_error_t *err)
{
    if (!a)
        return 0;
    job_t *j = calloc(1, sizeof *j);
    if (!j)
        return drv_err_internal(err, "out of memory");
    snprintf(j->owner, sizeof j->owner, "%s", owner);
    snprintf(j->node_id, sizeof j->node_id, "%s", id);
    enqueue(a, j);
    free(j);
    return 0;
}

static bool launch_failed(drv_cloudw_t *a, const char *owner, const char *node)
{
    for (size_t i = 0; i < a->n_failed && i < 256; i++)
        if (strcmp(a->failed[i][0], owner) == 0 && strcmp(a->failed[i][1], node) == 0)
            return true;
    return false;
}

/* Listed at least `times` since start for every account in use (else
 * nothing is known: a machine a head's first listing misses after a
 * restart has no earlier listing to keep it, aws_index.h). */
static bool all_listed(drv_cloudw_t *a, int times)
{
    for (size_t i = 0; i < a->n_accts; i++)
        if (a->accts[i].in_use && a->accts[i].listings < times)
            return false;
    return a->known_set;
}

bool drv_cloudw_alive(drv_cloudw_t *a, const char *owner, const char *id)
{
    if (!a)
        return false;
    pthread_mutex_lock(&a->mu);
    bool alive = in_flight(a, owner, id) || inst_of_node(a, owner, id) ||
                 (!all_listed(a, 1) && !launch_failed(a, owner, id));
    pthread_mutex_unlock(&a->mu);
    return alive;
}

bool drv_cloudw_gone(drv_cloudw_t *a, const char *owner, const char *id)
{
    if (!a)
        return false;
    pthread_mutex_lock(&a->mu);
    bool gone = all_listed(a, DRV_AWS_MISSES_GONE) && !in_flight(a, owner, id) &&
                !inst_of_node(a, owner, id);
    pthread_mutex_unlock(&a->mu);
    return gone;
}

void drv_cloudw_known(drv_cloudw_t *a, const drv_node_ref_t *nodes, size_t n,
                      const drv_cloud_settings_t *accounts, size_t n_accounts)
{
    if (!a)
        return;
    drv_node_ref_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy)
        return;
    memcpy(copy, nodes, n * sizeof *copy);
    qsort(copy, n, sizeof *copy, drv_aws_ref_cmp);   /* before the lock: the sweep walks it */
    pthread_mutex_lock(&a->mu);
    free(a->known);
    a->known = copy;
    a->n_known = n;
    a->known_set = true;
    for (size_t i = 0; i < a->n_accts; i++)
        a->accts[i].in_use = false;
    for (size_t i = 0; i < n_accounts; i++) {
        size_t k = account_index(a, &accounts[i]);   /* may move a->accts */
        a->accts[k].in_use = true;
    }
    pthread_mutex_unlock(&a->mu);
}

size_t drv_cloudw_results(drv_cloudw_t *a, drv_prov_result_t *out, size_t max)
{
    if (!a)
        return 0;
    pthread_mutex_lock(&a->mu);
    size_t n = a->n_results < max ? a->n_results : max;
    memcpy(out, a->results, n * sizeof *out);
    memmove(a->results, a->results + n, (a->n_results - n) * sizeof *a->results);
    a->n_results -= n;
    pthread_mutex_unlock(&a->mu);
    return n;
}

bool drv_cloudw_instance_of(drv_cloudw_t *a, const char *owner, const char *node, char *id,
                            size_t len)
{
    if (!a)
        return false;
    pthread_mutex_lock(&a->mu);
    inst_t *in = inst_of_node(a, owner, node);
    if (in)
        snprintf(id, len, "%s", in->x.id);
    pthread_mutex_unlock(&a->mu);
    return in != NULL;
}
