/* admitbench.c — admission throughput (src/sched/admit.c): how many jobs a
 * second go from queued to admitted through drv_admit on a simulated
 * 1,000-node cluster (8 GPUs each) with a queue of 10,000 jobs, the way the
 * head runs it: one pass over the whole queue and the running jobs, then
 * (on a virtual clock) the running jobs that end first release their GPUs
 * until 10 % of the cluster is free, then the next pass, until every job
 * has been admitted. Only the time inside drv_admit counts (the sim's own
 * bookkeeping does not). Jobs: 100 users, 20 % priority 10, sizes 1/2/4/8
 * GPUs on one node and 16/32/64 GPUs as gangs of 8-GPU workers (the shares
 * of bench/jobs/gen_trace.py), durations 10 min to 10 h; aging 600 s, EASY
 * backfill, fair share. A timing program, not a test: nothing is asserted
 * (goal, issue 15: >= 1,000 jobs/s; Slurm documents 500 simple jobs/s).
 * Wall time and this thread's CPU time are both reported (the machine may
 * be shared).
 *
 *   admitbench [--nodes N] [--jobs J] [--seed S]      prints one JSON line
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/admit.h"
#include "sched/rng.h"

static int64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct bjob {
    drv_admit_job_t q;
    drv_sched_choice_t *ranks;
    double end;
    int st;                     /* 0 queued, 1 running, 2 done */
} bjob_t;

static bjob_t *sort_jobs;

static int by_end(const void *a, const void *b)
{
    double x = sort_jobs[*(const size_t *)a].end, y = sort_jobs[*(const size_t *)b].end;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t n = 1000, nj = 10000;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--nodes") == 0)
            n = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--jobs") == 0)
            nj = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "usage: admitbench [--nodes N] [--jobs J] [--seed S]\n");
            return 2;
        }
    }
    if (argc % 2 == 0 || n < 8 || nj == 0) {
        fprintf(stderr, "usage: admitbench [--nodes N>=8] [--jobs J>=1] [--seed S]\n");
        return 2;
    }
    drv_sched_node_t *nodes = calloc(n, sizeof *nodes);
    bjob_t *jobs = calloc(nj, sizeof *jobs);
    drv_admit_job_t *queue = calloc(nj, sizeof *queue);
    drv_admit_running_t *running = calloc(nj, sizeof *running);
    size_t *qmap = calloc(nj, sizeof *qmap), *rmap = calloc(nj, sizeof *rmap);
    int64_t *pass_ns = calloc(nj + 1, sizeof *pass_ns);
    static char users[100][8];
    if (!nodes || !jobs || !queue || !running || !qmap || !rmap || !pass_ns) {
        fprintf(stderr, "admitbench: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        drv_sched_node_t *nd = &nodes[i];
        nd->schedulable = true;
        nd->cpu_millis = 192000;
        nd->memory_mib = 2000000;
        nd->n_gpus = 8;
        for (int g = 0; g < 8; g++)
            nd->gpus[g] = (drv_sched_gpu_t){.index = g, .type = "H100", .memory_mib = 80000,
                                            .healthy = true};
    }
    for (int u = 0; u < 100; u++)
        snprintf(users[u], sizeof users[u], "u%02d", u);
    drv_rng_t rng;
    drv_rng_seed(&rng, seed);
    /* gen_trace.py's shares, in permille: 1, 2, 4, 8, 16, 32, 64 GPUs */
    static const int sizes[] = {1, 2, 4, 8, 16, 32, 64}, permille[] = {600, 120, 120, 100, 40, 15, 5};
    for (size_t i = 0; i < nj; i++) {
        int x = (int)drv_rng_below(&rng, 1000), k = 0;
        while (k < 6 && x >= permille[k])
            x -= permille[k++];
        int gpus = sizes[k], workers = gpus > 8 ? gpus / 8 : 1, per = gpus > 8 ? 8 : gpus;
        jobs[i].q = (drv_admit_job_t){
            .user = users[drv_rng_below(&rng, 100)],
            .priority = drv_rng_below(&rng, 5) == 0 ? 10 : 0,
            .submit_time = 0, .duration = 600 + (double)drv_rng_below(&rng, 35400),
            .gang = {.workers = workers,
                     .worker = {.gpu_count = per, .compute_percent = 100, .cpu_millis = 1000,
                                .memory_mib = 1000}}};
        jobs[i].ranks = calloc((size_t)workers, sizeof *jobs[i].ranks);
        if (!jobs[i].ranks) {
            fprintf(stderr, "admitbench: out of memory\n");
            return 1;
        }
    }
    double now = 0;
    size_t admitted = 0, passes = 0, first_pass = 0;
    int64_t total = 0, cpu = 0;
    int64_t gpus_total = (int64_t)n * 8, gpus_free = gpus_total;
    while (admitted < nj) {
        size_t nq = 0, nr = 0;
        for (size_t i = 0; i < nj; i++) {
            if (jobs[i].st == 0) {
                qmap[nq] = i;
                queue[nq++] = jobs[i].q;
            } else if (jobs[i].st == 1) {
                rmap[nr] = i;
                running[nr++] = (drv_admit_running_t){
                    .user = jobs[i].q.user, .priority = jobs[i].q.priority,
                    .expected_end = jobs[i].end, .last_checkpoint = now, .gang = jobs[i].q.gang,
                    .ranks = jobs[i].ranks};
            }
        }
        drv_admit_input_t in = {.now = now, .queue = queue, .n_queue = nq, .running = running,
                                .n_running = nr, .order = DRV_ADMIT_FAIR, .backfill = true,
                                .aging_seconds = 600};
        drv_admit_result_t res;
        drv_error_t err;
        int64_t a = now_ns(), c = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        int rc = drv_admit(nodes, n, &in, &res, &err);
        int64_t dt = now_ns() - a;
        cpu += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c;
        if (rc < 0) {
            fprintf(stderr, "admitbench: %s\n", err.message);
            return 1;
        }
        pass_ns[passes++] = dt;
        total += dt;
        if (passes == 1)
            first_pass = res.n_admitted;
        for (size_t k = 0; k < nq; k++)
            if (res.jobs[k].ranks) {
                bjob_t *j = &jobs[qmap[k]];
                memcpy(j->ranks, res.jobs[k].ranks, sizeof *j->ranks * (size_t)j->q.gang.workers);
                j->st = 1;
                j->end = now + j->q.duration;
                gpus_free -= j->q.gang.workers * j->q.gang.worker.gpu_count;
                admitted++;
            }
        drv_admit_result_free(&res);
        if (admitted == nj)
            break;
        /* the earliest ends release GPUs until 10 % of the cluster is free */
        nr = 0;
        for (size_t i = 0; i < nj; i++)
            if (jobs[i].st == 1)
                rmap[nr++] = i;
        sort_jobs = jobs;
        qsort(rmap, nr, sizeof *rmap, by_end);
        for (size_t k = 0; k < nr && (gpus_free * 10 < gpus_total || k == 0); k++) {
            bjob_t *j = &jobs[rmap[k]];
            drv_gang_release(nodes, &j->q.gang, j->ranks);
            j->st = 2;
            gpus_free += j->q.gang.workers * j->q.gang.worker.gpu_count;
            if (j->end > now)
                now = j->end;
        }
    }
    qsort(pass_ns, passes, sizeof *pass_ns, cmp64);
    printf("{\"nodes\":%zu,\"gpus\":%lld,\"jobs\":%zu,\"passes\":%zu,\"first_pass_admitted\":%zu,"
           "\"admit_s\":%.6f,\"jobs_per_s\":%.1f,\"admit_cpu_s\":%.6f,\"jobs_per_cpu_s\":%.1f,"
           "\"pass_ms_p50\":%.3f,\"pass_ms_max\":%.3f}\n",
           n, (long long)gpus_total, nj, passes, first_pass, total / 1e9,
           total > 0 ? (double)nj / (total / 1e9) : 0, cpu / 1e9,
           cpu > 0 ? (double)nj / (cpu / 1e9) : 0, pass_ns[passes / 2] / 1e6,
           pass_ns[passes - 1] / 1e6);
    for (size_t i = 0; i < nj; i++)
        free(jobs[i].ranks);
    free(nodes);
    free(jobs);
    free(queue);
    free(running);
    free(qmap);
    free(rmap);
    free(pass_ns);
    return 0;
}
