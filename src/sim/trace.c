/* trace.c — strict CSV readers for the Alibaba GPU-sharing trace (trace.h).
 *
 * The file is copied once into the trace's arena and tokenised in place:
 * every string of a row points into that copy. Sizes come from the input
 * and are checked before allocation (1 GiB per file, 64 columns, 64 GPUs
 * per node, integers below 10^15). Single-threaded; a drv_trace_t belongs
 * to its caller.
 */
#include "sim/trace.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_COLS 64

struct drv_trace_arena {
    char *text;
    const char **tptr;          /* the pods' type lists, concatenated */
    size_t ntptr, captptr;
    const char **uniq;          /* interned type names */
    size_t nuniq, capuniq;
};

void drv_trace_free(drv_trace_t *t)
{
    if (!t)
        return;
    if (t->arena) {
        free(t->arena->text);
        free(t->arena->tptr);
        free(t->arena->uniq);
        free(t->arena);
    }
    free(t->nodes);
    free(t->pods);
    memset(t, 0, sizeof *t);
}

/* --- lexing ------------------------------------------------------------------ */

typedef struct lexer {
    char *p, *end;
    int line;                   /* of the line last returned */
    const char *fname;
} lexer_t;

/* The next line (NUL-terminated in place, CR stripped), or NULL at the end. */
static char *next_line(lexer_t *lx)
{
    if (lx->p >= lx->end)
        return NULL;
    char *s = lx->p, *nl = memchr(s, '\n', (size_t)(lx->end - s));
    char *e = nl ? nl : lx->end;
    lx->p = nl ? nl + 1 : lx->end;
    *e = '\0';
    if (e > s && e[-1] == '\r')
        e[-1] = '\0';
    lx->line++;
    return s;
}

static int split(lexer_t *lx, char *s, char **f, int max, drv_error_t *err)
{
    int n = 0;
    for (;;) {
        if (n == max)
            return drv_err_invalid(err, "", "%s:%d: more than %d fields", lx->fname, lx->line,
                                   max);
        f[n++] = s;
        char *c = strchr(s, ',');
        if (!c)
            break;
        *c = '\0';
        s = c + 1;
    }
    for (int i = 0; i < n; i++)
        if (strchr(f[i], '"'))
            return drv_err_invalid(err, "", "%s:%d: field %d: quoted fields are not supported",
                                   lx->fname, lx->line, i + 1);
    return n;
}

static int parse_int(lexer_t *lx, const char *col, const char *s, int64_t max, int64_t *out,
                     drv_error_t *err)
{
    int64_t v = 0;
    size_t n = 0;
    for (const char *p = s; *p; p++, n++) {
        if (*p < '0' || *p > '9' || n >= 15)
            return drv_err_invalid(err, "", "%s:%d: %s '%.40s' is not a non-negative integer%s",
                                   lx->fname, lx->line, col, s,
                                   n >= 15 ? " below 10^15" : "");
        v = v * 10 + (*p - '0');
    }
    if (n == 0)
        return drv_err_invalid(err, "", "%s:%d: %s is empty", lx->fname, lx->line, col);
    if (v > max)
        return drv_err_invalid(err, "", "%s:%d: %s %lld is more than %lld", lx->fname, lx->line,
                               col, (long long)v, (long long)max);
    *out = v;
    return 0;
}

static bool is_none(const char *s)
{
    return !*s || strcmp(s, "nan") == 0 || strcmp(s, "NaN") == 0;
}

/* Find the named columns in the header; optional ones may be missing (-1). */
static int header(lexer_t *lx, char *line, const char *const *names, int n_names, int n_required,
                  int *col, int *ncols, drv_error_t *err)
{
    char *f[MAX_COLS];
    int n = split(lx, line, f, MAX_COLS, err);
    if (n < 0)
        return -1;
    for (int k = 0; k < n_names; k++)
        col[k] = -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n_names; k++)
            if (strcmp(f[i], names[k]) == 0) {
                if (col[k] >= 0)
                    return drv_err_invalid(err, "", "%s:%d: column '%s' appears twice",
                                           lx->fname, lx->line, names[k]);
                col[k] = i;
            }
    for (int k = 0; k < n_required; k++)
        if (col[k] < 0)
            return drv_err_invalid(err, "", "%s:%d: header has no column '%s' (a trace CSV "
                                   "needs %s%s%s%s%s%s%s%s%s)", lx->fname, lx->line, names[k],
                                   names[0], n_required > 1 ? ", " : "",
                                   n_required > 1 ? names[1] : "", n_required > 2 ? ", " : "",
                                   n_required > 2 ? names[2] : "", n_required > 3 ? ", " : "",
                                   n_required > 3 ? names[3] : "", n_required > 4 ? ", " : "",
                                   n_required > 4 ? names[4] : "");
    *ncols = n;
    return 0;
}

static int begin(drv_trace_t *t, lexer_t *lx, const char *buf, size_t len, const char *fname,
                 drv_error_t *err)
{
    memset(t, 0, sizeof *t);
    lx->fname = fname;
    lx->line = 0;
    if (len > DRV_TRACE_MAX_BYTES)
        return drv_err_invalid(err, "", "%s: larger than %u bytes", fname, DRV_TRACE_MAX_BYTES);
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *p = buf; p < nul; p++)
            line += *p == '\n';
        return drv_err_invalid(err, "", "%s:%d: NUL byte (not a text file)", fname, line);
    }
    t->arena = calloc(1, sizeof *t->arena);
    if (!t->arena || !(t->arena->text = malloc(len + 1)))
        return drv_err_internal(err, "%s: out of memory", fname);
    memcpy(t->arena->text, buf, len);
    t->arena->text[len] = '\0';
    lx->p = t->arena->text;
    lx->end = t->arena->text + len;
    return 0;
}

/* The first line must be the header. */
static char *first_line(lexer_t *lx, drv_error_t *err)
{
    char *l = next_line(lx);
    if (!l || !*l) {
        drv_err_invalid(err, "", "%s:1: empty file or blank first line (expected a CSV header)",
                        lx->fname);
        return NULL;
    }
    return l;
}

static int row(lexer_t *lx, char *line, int ncols, char **f, drv_error_t *err)
{
    int n = split(lx, line, f, MAX_COLS, err);
    if (n < 0)
        return -1;
    if (n != ncols)
        return drv_err_invalid(err, "", "%s:%d: %d fields, the header has %d", lx->fname,
                               lx->line, n, ncols);
    return 0;
}

static int check_name(lexer_t *lx, const char *what, const char *s, drv_error_t *err)
{
    if (!*s)
        return drv_err_invalid(err, "", "%s:%d: %s is empty", lx->fname, lx->line, what);
    return 0;
}

typedef struct named {
    const char *name;
    int line;
} named_t;

static int by_name(const void *a, const void *b)
{
    const named_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int check_unique(const char *fname, named_t *v, size_t n, drv_error_t *err)
{
    qsort(v, n, sizeof *v, by_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(v[i].name, v[i - 1].name) == 0)
            return drv_err_invalid(err, "", "%s:%d: duplicate name '%.80s' (also on line %d)",
                                   fname, v[i].line, v[i].name, v[i - 1].line);
    return 0;
}

/* --- nodes -------------------------------------------------------------------------- */

int drv_trace_parse_nodes(drv_trace_t *t, const char *buf, size_t len, const char *fname,
                          drv_error_t *err)
{
    static const char *const names[] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
    lexer_t lx;
    named_t *seen = NULL;
    size_t cap = 0;
    if (begin(t, &lx, buf, len, fname, err) < 0)
        goto error;
    char *line = first_line(&lx, err);
    int col[5], ncols = 0;
    if (!line || header(&lx, line, names, 5, 5, col, &ncols, err) < 0)
        goto error;
    while ((line = next_line(&lx))) {
        if (!*line)
            continue;
        char *f[MAX_COLS];
        if (row(&lx, line, ncols, f, err) < 0)
            goto error;
        if (t->n_nodes == cap) {
            cap = cap ? 2 * cap : 1024;
            drv_trace_node_t *nv = realloc(t->nodes, cap * sizeof *nv);
            named_t *sv = realloc(seen, cap * sizeof *sv);
            if (nv)
                t->nodes = nv;
            if (sv)
                seen = sv;
            if (!nv || !sv) {
                drv_err_internal(err, "%s: out of memory", fname);
                goto error;
            }
        }
        drv_trace_node_t *nd = &t->nodes[t->n_nodes];
        int64_t gpus;
        nd->line = lx.line;
        nd->name = f[col[0]];
        if (check_name(&lx, "sn", nd->name, err) < 0 ||
            parse_int(&lx, "cpu_milli", f[col[1]], INT64_C(1) << 40, &nd->cpu_milli, err) < 0 ||
            parse_int(&lx, "memory_mib", f[col[2]], INT64_C(1) << 40, &nd->memory_mib, err) < 0 ||
            parse_int(&lx, "gpu", f[col[3]], DRV_TRACE_MAX_GPUS, &gpus, err) < 0)
            goto error;
        nd->gpus = (int)gpus;
        nd->model = is_none(f[col[4]]) ? NULL : f[col[4]];
        seen[t->n_nodes] = (named_t){nd->name, nd->line};
        t->n_nodes++;
    }
    if (t->n_nodes == 0) {
        drv_err_invalid(err, "", "%s:%d: no nodes after the header", fname, lx.line);
        goto error;
    }
    if (check_unique(fname, seen, t->n_nodes, err) < 0)
        goto error;
    free(seen);
    return 0;
error:
    free(seen);
    drv_trace_free(t);
    return -1;
}

/* --- pods ---------------------------------------------------------------------------- */

static const char *intern(struct drv_trace_arena *a, const char *s)
{
    for (size_t i = 0; i < a->nuniq; i++)
        if (strcmp(a->uniq[i], s) == 0)
            return a->uniq[i];
    if (a->nuniq == a->capuniq) {
        size_t cap = a->capuniq ? 2 * a->capuniq : 16;
        const char **v = realloc(a->uniq, cap * sizeof *v);
        if (!v)
            return NULL;
        a->uniq = v;
        a->capuniq = cap;
    }
    return a->uniq[a->nuniq++] = s;
}

static int push_type(struct drv_trace_arena *a, const char *s)
{
    if (a->ntptr == a->captptr) {
        size_t cap = a->captptr ? 2 * a->captptr : 256;
        const char **v = realloc(a->tptr, cap * sizeof *v);
        if (!v)
            return -1;
        a->tptr = v;
        a->captptr = cap;
    }
    a->tptr[a->ntptr++] = s;
    return 0;
}

static int pod_semantics(lexer_t *lx, const drv_trace_pod_t *p, drv_error_t *err)
{
    if (p->num_gpu == 0 && p->gpu_milli != 0)
        return drv_err_invalid(err, "", "%s:%d: gpu_milli %lld with num_gpu 0 (a CPU pod has "
                               "gpu_milli 0)", lx->fname, lx->line, (long long)p->gpu_milli);
    if (p->num_gpu > 0 && p->gpu_milli == 0)
        return drv_err_invalid(err, "", "%s:%d: num_gpu %d with gpu_milli 0", lx->fname,
                               lx->line, p->num_gpu);
    if (p->num_gpu >= 2 && p->gpu_milli != 1000)
        return drv_err_invalid(err, "", "%s:%d: num_gpu %d with gpu_milli %lld (only a 1-GPU "
                               "pod can share a GPU; multi-GPU pods take whole GPUs, 1000)",
                               lx->fname, lx->line, p->num_gpu, (long long)p->gpu_milli);
    return 0;
}

int drv_trace_parse_pods(drv_trace_t *t, const char *buf, size_t len, const char *fname,
                         drv_error_t *err)
{
    static const char *const names[] = {"name", "cpu_milli", "memory_mib", "num_gpu",
                                        "gpu_milli", "gpu_spec"};
    lexer_t lx;
    named_t *seen = NULL;
    size_t *toff = NULL;        /* first type of each pod in arena->tptr */
    size_t cap = 0;
    if (begin(t, &lx, buf, len, fname, err) < 0)
        goto error;
    char *line = first_line(&lx, err);
    int col[6], ncols = 0;
    if (!line || header(&lx, line, names, 6, 5, col, &ncols, err) < 0)
        goto error;
    while ((line = next_line(&lx))) {
        if (!*line)
            continue;
        char *f[MAX_COLS];
        if (row(&lx, line, ncols, f, err) < 0)
            goto error;
        if (t->n_pods == cap) {
            cap = cap ? 2 * cap : 4096;
            drv_trace_pod_t *pv = realloc(t->pods, cap * sizeof *pv);
            named_t *sv = realloc(seen, cap * sizeof *sv);
            size_t *ov = realloc(toff, cap * sizeof *ov);
            if (pv)
                t->pods = pv;
            if (sv)
                seen = sv;
            if (ov)
                toff = ov;
            if (!pv || !sv || !ov) {
                drv_err_internal(err, "%s: out of memory", fname);
                goto error;
            }
        }
        drv_trace_pod_t *p = &t->pods[t->n_pods];
        memset(p, 0, sizeof *p);
        int64_t ng;
        p->line = lx.line;
        p->name = f[col[0]];
        if (check_name(&lx, "name", p->name, err) < 0 ||
            parse_int(&lx, "cpu_milli", f[col[1]], INT64_C(1) << 40, &p->cpu_milli, err) < 0 ||
            parse_int(&lx, "memory_mib", f[col[2]], INT64_C(1) << 40, &p->memory_mib, err) < 0 ||
            parse_int(&lx, "num_gpu", f[col[3]], DRV_TRACE_MAX_GPUS, &ng, err) < 0 ||
            parse_int(&lx, "gpu_milli", f[col[4]], 1000, &p->gpu_milli, err) < 0)
            goto error;
        p->num_gpu = (int)ng;
        if (pod_semantics(&lx, p, err) < 0)
            goto error;
        toff[t->n_pods] = t->arena->ntptr;
        if (col[5] >= 0 && !is_none(f[col[5]])) {
            char *s = f[col[5]];
            for (;;) {
                char *bar = strchr(s, '|');
                if (bar)
                    *bar = '\0';
                if (!*s) {
                    drv_err_invalid(err, "", "%s:%d: gpu_spec has an empty GPU model",
                                    fname, lx.line);
                    goto error;
                }
                const char *in = intern(t->arena, s);
                if (!in || push_type(t->arena, in) < 0) {
                    drv_err_internal(err, "%s: out of memory", fname);
                    goto error;
                }
                p->n_types++;
                if (!bar)
                    break;
                s = bar + 1;
            }
        }
        seen[t->n_pods] = (named_t){p->name, p->line};
        t->n_pods++;
    }
    if (t->n_pods == 0) {
        drv_err_invalid(err, "", "%s:%d: no pods after the header", fname, lx.line);
        goto error;
    }
    for (size_t i = 0; i < t->n_pods; i++)
        t->pods[i].types = t->pods[i].n_types ? &t->arena->tptr[toff[i]] : NULL;
    if (check_unique(fname, seen, t->n_pods, err) < 0)
        goto error;
    free(seen);
    free(toff);
    return 0;
error:
    free(seen);
    free(toff);
    drv_trace_free(t);
    return -1;
}

/* --- files ---------------------------------------------------------------------------- */

char *drv_trace_read_file(const char *path, size_t *len, drv_error_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        drv_err_invalid(err, "", "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
        drv_err_invalid(err, "", "%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    if ((uint64_t)st.st_size > DRV_TRACE_MAX_BYTES) {
        drv_err_invalid(err, "", "%s: larger than %u bytes", path, DRV_TRACE_MAX_BYTES);
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    if (!buf || n != (size_t)st.st_size) {
        drv_err_invalid(err, "", "%s: %s", path, buf ? "short read" : "out of memory");
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

int drv_trace_load_nodes(drv_trace_t *t, const char *path, drv_error_t *err)
{
    size_t len;
    char *buf = drv_trace_read_file(path, &len, err);
    if (!buf) {
        memset(t, 0, sizeof *t);
        return -1;
    }
    int rc = drv_trace_parse_nodes(t, buf, len, path, err);
    free(buf);
    return rc;
}

int drv_trace_load_pods(drv_trace_t *t, const char *path, drv_error_t *err)
{
    size_t len;
    char *buf = drv_trace_read_file(path, &len, err);
    if (!buf) {
        memset(t, 0, sizeof *t);
        return -1;
    }
    int rc = drv_trace_parse_pods(t, buf, len, path, err);
    free(buf);
    return rc;
}
