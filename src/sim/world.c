/* world.c — a trace turned into scheduler inputs, and the seeded workload
 * of the FGD benchmark (sim.h). Procedure, from fgd-benchmark.md:
 *   1. pods sorted by name; 2. shuffled with the seed; 3. inflated to
 *   1.3 x the cluster's GPU capacity by drawing pods uniformly with
 *   replacement from the name-sorted list and appending them, stopping at
 *   the first draw that would exceed the bound (or, above the bound,
 *   dropping random pods until it fits); 4. node order shuffled with the
 *   seed too. The reference simulator checks the bound against a drawn
 *   pod's per-GPU request; we use its total, as the procedure says (the
 *   two differ only when a multi-GPU pod is drawn last).
 * Single-threaded; a world is read-only once loaded.
 */
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/rng.h"

int64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sim_world_free(sim_world_t *w)
{
    if (!w)
        return;
    drv_trace_free(&w->nodes_csv);
    drv_trace_free(&w->pods_csv);
    free(w->nodes);
    free(w->reqs);
    free(w->milli);
    free(w->types);
    drv_sched_shapes_destroy(w->shapes);
    memset(w, 0, sizeof *w);
}

static int node_by_name(const void *a, const void *b)
{
    return strcmp(((const drv_trace_node_t *)a)->name, ((const drv_trace_node_t *)b)->name);
}

static int pod_by_name(const void *a, const void *b)
{
    return strcmp(((const drv_trace_pod_t *)a)->name, ((const drv_trace_pod_t *)b)->name);
}

int sim_world_load(sim_world_t *w, const char *nodes_path, const char *pods_path,
                   drv_error_t *err)
{
    memset(w, 0, sizeof *w);
    if (drv_trace_load_nodes(&w->nodes_csv, nodes_path, err) < 0 ||
        drv_trace_load_pods(&w->pods_csv, pods_path, err) < 0)
        goto error;
    drv_trace_t *nt = &w->nodes_csv, *pt = &w->pods_csv;
    qsort(nt->nodes, nt->n_nodes, sizeof *nt->nodes, node_by_name);
    qsort(pt->pods, pt->n_pods, sizeof *pt->pods, pod_by_name);

    /* GPU nodes, models interned so GPUs of one model share a pointer */
    const char *models[256];
    size_t n_models = 0;
    w->nodes = calloc(nt->n_nodes, sizeof *w->nodes);
    if (!w->nodes)
        goto oom;
    for (size_t i = 0; i < nt->n_nodes; i++) {
        const drv_trace_node_t *tn = &nt->nodes[i];
        if (tn->gpus == 0)
            continue;
        const char *model = tn->model;
        if (model) {
            size_t k = 0;
            while (k < n_models && strcmp(models[k], model) != 0)
                k++;
            if (k == n_models && n_models < sizeof models / sizeof models[0])
                models[n_models++] = model;
            if (k < n_models)
                model = models[k];
        }
        drv_sched_node_t *nd = &w->nodes[w->n_nodes++];
        nd->id = tn->name;
        nd->pool = 0;
        nd->schedulable = true;
        nd->cpu_millis = tn->cpu_milli;
        nd->memory_mib = tn->memory_mib;
        nd->n_gpus = tn->gpus;
        for (int g = 0; g < tn->gpus; g++) {
            nd->gpus[g].index = g;
            nd->gpus[g].type = model;
            nd->gpus[g].memory_mib = SIM_GPU_MILLI;
            nd->gpus[g].healthy = true;
        }
        w->gpus += tn->gpus;
    }
    if (w->n_nodes == 0) {
        drv_err_invalid(err, "", "%s: no node has a GPU", nodes_path);
        goto error;
    }

    /* requests, type names mapped to the node models' pointers */
    size_t n_types = 0;
    for (size_t i = 0; i < pt->n_pods; i++)
        n_types += pt->pods[i].n_types;
    w->n_pods = pt->n_pods;
    w->reqs = calloc(w->n_pods, sizeof *w->reqs);
    w->milli = calloc(w->n_pods, sizeof *w->milli);
    w->types = calloc(n_types + 1, sizeof *w->types);
    if (!w->reqs || !w->milli || !w->types)
        goto oom;
    const char **tp = w->types;
    for (size_t i = 0; i < w->n_pods; i++) {
        const drv_trace_pod_t *p = &pt->pods[i];
        drv_sched_request_t *r = &w->reqs[i];
        r->cpu_millis = p->cpu_milli;
        r->memory_mib = p->memory_mib;
        r->gpu_count = p->num_gpu;
        if (p->num_gpu > 0) {
            r->gpu_memory_mib = p->gpu_milli;
            r->compute_percent = p->gpu_milli >= SIM_GPU_MILLI ? 100 : (int)(p->gpu_milli / 10);
        }
        if (p->n_types) {
            r->gpu_types = tp;
            r->n_gpu_types = p->n_types;
            for (size_t t = 0; t < p->n_types; t++) {
                const char *name = p->types[t];
                for (size_t k = 0; k < n_models; k++)
                    if (strcmp(models[k], name) == 0)
                        name = models[k];
                *tp++ = name;
            }
        }
        w->milli[i] = (int64_t)p->num_gpu * p->gpu_milli;
    }
    w->shapes = drv_sched_shapes_create(w->reqs, w->n_pods, 0.95);
    if (!w->shapes)
        goto oom;
    return 0;
oom:
    drv_err_internal(err, "out of memory loading the trace");
error:
    sim_world_free(w);
    return -1;
}

static void shuffle(drv_rng_t *r, size_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)drv_rng_below(r, i);
        size_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

int sim_workload(const sim_world_t *w, uint64_t seed, double inflate, size_t **order,
                 size_t *n_order, size_t **node_order)
{
    drv_rng_t r;
    drv_rng_seed(&r, seed);
    size_t n = w->n_pods, cap = n;
    size_t *v = malloc(cap * sizeof *v);
    size_t *no = malloc(w->n_nodes * sizeof *no);
    if (!v || !no)
        goto oom;
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = i;
        total += w->milli[i];
    }
    shuffle(&r, v, n);
    double bound = inflate * (double)w->gpus * SIM_GPU_MILLI;
    if (inflate > 0 && (double)total < bound && total > 0) {
        for (;;) {
            size_t idx = (size_t)drv_rng_below(&r, w->n_pods);
            if ((double)(total + w->milli[idx]) > bound)
                break;
            if (n == cap) {
                cap *= 2;
                size_t *nv = realloc(v, cap * sizeof *nv);
                if (!nv)
                    goto oom;
                v = nv;
            }
            v[n++] = idx;
            total += w->milli[idx];
        }
    } else if (inflate > 0) {
        while ((double)total > bound && n > 0) {
            size_t k = (size_t)drv_rng_below(&r, n);
            total -= w->milli[v[k]];
            memmove(&v[k], &v[k + 1], (n - k - 1) * sizeof *v);
            n--;
        }
    }
    for (size_t i = 0; i < w->n_nodes; i++)
        no[i] = i;
    shuffle(&r, no, w->n_nodes);
    *order = v;
    *n_order = n;
    *node_order = no;
    return 0;
oom:
    free(v);
    free(no);
    return -1;
}

int sim_parse_seeds(const char *s, uint64_t *out, size_t max, size_t *n)
{
    *n = 0;
    while (*s) {
        char *e;
        unsigned long long a = strtoull(s, &e, 10), b = a;
        if (e == s || *s == '-' || *s == '+')
            return -1;
        if (*e == '-') {
            const char *s2 = e + 1;
            b = strtoull(s2, &e, 10);
            if (e == s2 || b < a || *s2 == '-' || *s2 == '+')
                return -1;
        }
        for (unsigned long long x = a; x <= b; x++) {
            if (*n == max)
                return -1;
            out[(*n)++] = x;
            if (x == b)
                break;
        }
        if (*e == ',')
            e++;
        else if (*e)
            return -1;
        s = e;
    }
    return *n ? 0 : -1;
}
