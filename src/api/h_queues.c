/* h_queues.c — GET /v1/queues: the job queues by queue and user (jobs
 * waiting, jobs running, the GPUs they hold, that user's share of the
 * schedulable nodes' GPUs, and the user's gpu_quota), computed from the
 * state under the read lock. Admins see every row, other users their own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "sched/gang.h"
#include "state/head.h"
#include "state/jobs.h"
#include "state/nodes.h"

struct row {
    const char *queue, *user;
    int queued, running;
    double gpus;
};

static int cmp_row(const void *pa, const void *pb)
{
    const struct row *a = pa, *b = pb;
    int c = strcmp(a->queue, b->queue);
    return c ? c : strcmp(a->user, b->user);
}

int drv_h_queues_list(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    static const char *const allowed[] = {NULL};
    if (drv_req_check_query(req, allowed, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_state_rdlock(st);
    double total = 0;
    for (size_t i = 0; i < drv_state_count(st, DRV_K_NODE); i++) {
        const drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        if (drv_node_schedulable(n))
            total += (double)json_array_size(json_object_get(n->status, "gpus"));
    }
    size_t nj = drv_state_count(st, DRV_K_JOB), nr = 0;
    struct row *rows = calloc(nj ? nj : 1, sizeof *rows);
    if (!rows)
        abort();
    for (size_t j = 0; j < nj; j++) {
        const drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        const char *s = drv_job_state(job);
        if (drv_job_state_final(s) || (!req->who->admin && strcmp(job->owner, req->who->user)))
            continue;
        const char *q = json_string_value(json_object_get(job->spec, "queue"));
        q = q ? q : job->owner;
        size_t r = 0;
        while (r < nr && (strcmp(rows[r].queue, q) || strcmp(rows[r].user, job->owner)))
            r++;
        if (r == nr)
            rows[nr++] = (struct row){.queue = q, .user = job->owner};
        if (drv_job_state_active(s)) {
            const char *types[32];
            drv_sched_request_t w;
            drv_job_request(job, &w, types, 32);
            rows[r].running++;
            rows[r].gpus += drv_gang_worker_gpus(&w) *
                            (double)json_integer_value(json_object_get(job->spec, "workers"));
        } else {
            rows[r].queued++;
        }
    }
    qsort(rows, nr, sizeof *rows, cmp_row);
    json_t *items = json_array();
    for (size_t r = 0; r < nr; r++) {
        const drv_obj_t *u = drv_state_get(st, DRV_K_USER, rows[r].user);
        const json_t *quota = u ? json_object_get(u->spec, "gpu_quota") : NULL;
        /* a copy: items are dumped and freed after the unlock */
        json_array_append_new(items, json_pack("{s:s, s:s, s:i, s:i, s:f, s:f, s:o}", "queue",
                                               rows[r].queue, "user", rows[r].user, "queued",
                                               rows[r].queued, "running", rows[r].running,
                                               "gpus_used", rows[r].gpus, "gpu_share",
                                               total > 0 ? rows[r].gpus / total : 0.0,
                                               "gpu_quota",
                                               quota ? json_deep_copy(quota) : json_null()));
    }
    drv_state_unlock(st);
    free(rows);
    drv_resp_json(resp, 200, json_pack("{s:o, s:f}", "items", items, "cluster_gpus", total));
    return 0;
}
