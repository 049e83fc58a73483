/* manifest_build.c — drv_manifest_build (manifest.h): walk a directory tree
 * and hash it in parallel.
 *
 * The walk (one thread) collects the regular files, resolving symlinks
 * (kept only when they stay inside the tree and name a regular file) and
 * refusing anything else. The hashing is a small pthread pool over a task
 * list: one task per file for its whole-file sha256 (a sequential pass that
 * no split can parallelise), longest first, then one task per chunk of every
 * file of two or more chunks. A big file therefore costs about one sha256
 * pass of wall time while the other workers hash its chunks from the page
 * cache; the work is twice the bytes, which is what one pass per digest
 * means without a tree hash. The pool's state is its own; the manifest is
 * filled only by the task that owns each slot.
 */
#define _GNU_SOURCE
#include "common/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sha256.h"
#include "common/util.h"

#define READ_BUF (1u << 20)

typedef struct entry {
    char *rel;                   /* path in the manifest */
    char *open_path;             /* what to open (the link's target for a symlink) */
    uint64_t size;
} entry_t;

typedef struct walk {
    const char *root_real;       /* realpath of the root */
    entry_t *v;
    size_t n, cap;
    uint64_t total;
    drv_error_t *err;
} walk_t;

static int add_entry(walk_t *w, const char *rel, const char *open_path, uint64_t size)
{
    if (w->n == DRV_MANIFEST_MAX_FILES)
        return drv_err_invalid(w->err, "", "%s: more than %d files", w->root_real,
                               DRV_MANIFEST_MAX_FILES);
    if (size > DRV_MANIFEST_MAX_FILE_SIZE)
        return drv_err_invalid(w->err, "", "%s: %llu bytes is over the %llu-byte bound of one "
                               "file", rel, (unsigned long long)size,
                               (unsigned long long)DRV_MANIFEST_MAX_FILE_SIZE);
    w->total += size;
    if (w->total > DRV_MANIFEST_MAX_TOTAL)
        return drv_err_invalid(w->err, "", "%s: the files add up to more than %llu bytes",
                               w->root_real, (unsigned long long)DRV_MANIFEST_MAX_TOTAL);
    json_t *probe = json_string(rel);   /* jansson takes UTF-8 only */
    if (!probe)
        return drv_err_invalid(w->err, "", "%s: the path is not valid UTF-8", rel);
    json_decref(probe);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        entry_t *v = realloc(w->v, cap * sizeof *v);
        if (!v)
            return drv_err_internal(w->err, "out of memory");
        w->v = v, w->cap = cap;
    }
    w->v[w->n++] = (entry_t){drv_strdup(rel), drv_strdup(open_path), size};
    return 0;
}

/* A symlink at abs (manifest path rel): its target must be a regular file
 * inside the tree. */
static int add_link(walk_t *w, const char *abs, const char *rel)
{
    char real[PATH_MAX];
    if (!realpath(abs, real))
        return drv_err_invalid(w->err, "", "%s: a symlink whose target cannot be resolved (%s)",
                               rel, strerror(errno));
    size_t rl = strlen(w->root_real);
    if (strncmp(real, w->root_real, rl) != 0 || real[rl] != '/')
        return drv_err_invalid(w->err, "", "%s: a symlink leaving the tree (to %s)", rel, real);
    struct stat st;
    if (stat(real, &st) < 0)
        return drv_err_invalid(w->err, "", "%s: %s", rel, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return drv_err_invalid(w->err, "", "%s: a symlink to %s, not to a regular file", rel,
                               S_ISDIR(st.st_mode) ? "a directory" : "a special file");
    return add_entry(w, rel, real, (uint64_t)st.st_size);
}

static int walk_dir(walk_t *w, const char *abs, const char *rel, int depth)
{
    DIR *d = opendir(abs);
    if (!d)
        return drv_err_invalid(w->err, "", "%s: cannot read the directory: %s",
                               *rel ? rel : abs, strerror(errno));
    int rc = 0;
    char ca[PATH_MAX], cr[DRV_MANIFEST_MAX_PATH + 2];
    for (struct dirent *de; rc == 0 && (errno = 0, de = readdir(d));) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (snprintf(ca, sizeof ca, "%s/%s", abs, de->d_name) >= (int)sizeof ca ||
            snprintf(cr, sizeof cr, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
                (int)sizeof cr) {
            rc = drv_err_invalid(w->err, "", "%s/%s: the path is longer than %d bytes", rel,
                                 de->d_name, DRV_MANIFEST_MAX_PATH);
            break;
        }
        const char *why = drv_manifest_path_problem(cr);
        if (*why) {
            rc = drv_err_invalid(w->err, "", "'%s': the path %s", cr, why);
            break;
        }
        struct stat st;
        if (lstat(ca, &st) < 0)
            rc = drv_err_invalid(w->err, "", "%s: %s", cr, strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = depth >= 128 ? drv_err_invalid(w->err, "", "%s: nested too deep", cr)
                              : walk_dir(w, ca, cr, depth + 1);
        else if (S_ISREG(st.st_mode))
            rc = access(ca, R_OK) == 0 ? add_entry(w, cr, ca, (uint64_t)st.st_size)
                                       : drv_err_invalid(w->err, "", "%s: not readable: %s",
                                                         cr, strerror(errno));
        else if (S_ISLNK(st.st_mode))
            rc = add_link(w, ca, cr);
        else
            rc = drv_err_invalid(w->err, "", "%s: a %s, not a regular file", cr,
                                 S_ISFIFO(st.st_mode) ? "fifo" : S_ISSOCK(st.st_mode) ? "socket"
                                                                                      : "device");
    }
    if (rc == 0 && errno)
        rc = drv_err_invalid(w->err, "", "%s: cannot read the directory: %s", *rel ? rel : abs,
                             strerror(errno));
    closedir(d);
    return rc;
}

/* --- the hashing pool ---------------------------------------------------- */

typedef struct task {
    size_t file;
    ssize_t chunk;               /* -1: the whole file */
} task_t;

typedef struct pool {
    const entry_t *ents;
    drv_manifest_t *m;
    task_t *tasks;
    size_t ntasks;
    atomic_size_t next;
    atomic_bool failed;
    pthread_mutex_t mu;          /* guards err */
    drv_error_t *err;
} pool_t;

static void pool_fail(pool_t *p, const char *fmt, const char *path, const char *what)
{
    pthread_mutex_lock(&p->mu);
    if (!atomic_load(&p->failed))
        drv_err_invalid(p->err, "", fmt, path, what);
    atomic_store(&p->failed, true);
    pthread_mutex_unlock(&p->mu);
}

static void hex_of(const unsigned char md[32], char out[65])
{
    static const char x[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++)
        out[2 * i] = x[md[i] >> 4], out[2 * i + 1] = x[md[i] & 15];
    out[64] = 0;
}

static void run_task(pool_t *p, const task_t *t, char *buf)
{
    const entry_t *e = &p->ents[t->file];
    drv_manifest_file_t *f = &p->m->files[t->file];
    uint64_t off = t->chunk < 0 ? 0 : (uint64_t)t->chunk * p->m->chunk_size;
    uint64_t len = t->chunk < 0 ? e->size : drv_manifest_chunk_len(e->size, p->m->chunk_size,
                                                                    (size_t)t->chunk);
    int fd = open(e->open_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        pool_fail(p, "%s: cannot open: %s", e->rel, strerror(errno));
        return;
    }
    if (t->chunk < 0)
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    drv_sha256_t c;
    drv_sha256_init(&c);
    while (len > 0 && !atomic_load(&p->failed)) {
        ssize_t n = pread(fd, buf, len < READ_BUF ? len : READ_BUF, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            pool_fail(p, "%s: %s", e->rel, n < 0 ? strerror(errno) : "shrank while it was hashed");
            close(fd);
            return;
        }
        drv_sha256_update(&c, buf, (size_t)n);
        off += (uint64_t)n, len -= (uint64_t)n;
    }
    /* the whole-file pass also sees a file that grew */
    if (t->chunk < 0 && !atomic_load(&p->failed) && pread(fd, buf, 1, (off_t)off) > 0)
        pool_fail(p, "%s: %s", e->rel, "grew while it was hashed");
    close(fd);
    unsigned char md[32];
    drv_sha256_final(&c, md);
    hex_of(md, t->chunk < 0 ? f->sha256 : f->chunks[t->chunk]);
    if (t->chunk < 0 && f->nchunks == 1)
        memcpy(f->chunks[0], f->sha256, 65);
}

static void *worker(void *arg)
{
    pool_t *p = arg;
    char *buf = malloc(READ_BUF);
    if (!buf) {
        pool_fail(p, "%s: %s", "hashing", "out of memory");
        return NULL;
    }
    for (size_t i; !atomic_load(&p->failed) && (i = atomic_fetch_add(&p->next, 1)) < p->ntasks;)
        run_task(p, &p->tasks[i], buf);
    free(buf);
    return NULL;
}

static int cmp_size_desc(const void *a, const void *b, void *ents)
{
    const entry_t *e = ents;
    uint64_t x = e[((const task_t *)a)->file].size, y = e[((const task_t *)b)->file].size;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int cmp_rel(const void *a, const void *b)
{
    return strcmp(((const entry_t *)a)->rel, ((const entry_t *)b)->rel);
}

static int hash_all(const entry_t *ents, drv_manifest_t *m, int threads, drv_error_t *err)
{
    size_t ntasks = m->nfiles;
    for (size_t i = 0; i < m->nfiles; i++)
        ntasks += m->files[i].nchunks >= 2 ? m->files[i].nchunks : 0;
    pool_t p = {.ents = ents, .m = m, .err = err};
    p.tasks = calloc(ntasks, sizeof *p.tasks);
    if (!p.tasks)
        return drv_err_internal(err, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < m->nfiles; i++)
        p.tasks[k++] = (task_t){i, -1};
    qsort_r(p.tasks, k, sizeof *p.tasks, cmp_size_desc, (void *)ents);
    for (size_t i = 0; i < m->nfiles; i++)
        for (size_t c = 0; m->files[i].nchunks >= 2 && c < m->files[i].nchunks; c++)
            p.tasks[k++] = (task_t){i, (ssize_t)c};
    p.ntasks = k;
    pthread_mutex_init(&p.mu, NULL);
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > 8 ? 8 : (int)n;
    }
    if ((size_t)threads > ntasks)
        threads = (int)ntasks;
    pthread_t tid[64];
    int started = 0;
    for (; started < threads && started < 64; started++)
        if (pthread_create(&tid[started], NULL, worker, &p) != 0)
            break;
    if (started == 0)
        worker(&p);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&p.mu);
    free(p.tasks);
    return atomic_load(&p.failed) ? -1 : 0;
}

int drv_manifest_build(const char *dir, uint64_t chunk_size, int threads, drv_manifest_t **out,
                       drv_error_t *err)
{
    *out = NULL;
    if (chunk_size == 0)
        chunk_size = DRV_MANIFEST_CHUNK_DEFAULT;
    if (chunk_size < DRV_MANIFEST_CHUNK_MIN || chunk_size > DRV_MANIFEST_CHUNK_MAX)
        return drv_err_invalid(err, "chunk_size", "chunk size %llu is outside %llu..%llu",
                               (unsigned long long)chunk_size,
                               (unsigned long long)DRV_MANIFEST_CHUNK_MIN,
                               (unsigned long long)DRV_MANIFEST_CHUNK_MAX);
    char root[PATH_MAX];
    struct stat st;
    if (!realpath(dir, root) || stat(root, &st) < 0)
        return drv_err_invalid(err, "", "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return drv_err_invalid(err, "", "%s: not a directory", dir);
    walk_t w = {.root_real = root, .err = err};
    drv_manifest_t *m = NULL;
    if (walk_dir(&w, root, "", 0) < 0)
        goto error;
    if (w.n == 0) {
        drv_err_invalid(err, "", "%s: no files to put in a manifest", dir);
        goto error;
    }
    m = calloc(1, sizeof *m);
    if (!m || !(m->files = calloc(w.n, sizeof *m->files))) {
        drv_err_internal(err, "out of memory");
        goto error;
    }
    m->chunk_size = chunk_size;
    m->total_size = w.total;
    /* sorted before hashing, so that entries and files share indexes */
    qsort(w.v, w.n, sizeof *w.v, cmp_rel);
    size_t nchunks = 0;
    for (size_t i = 0; i < w.n; i++) {
        drv_manifest_file_t *f = &m->files[i];
        m->nfiles = i + 1;
        f->path = drv_strdup(w.v[i].rel);
        f->size = w.v[i].size;
        f->nchunks = drv_manifest_nchunks(f->size, chunk_size);
        nchunks += f->nchunks;
        if (nchunks > DRV_MANIFEST_MAX_CHUNKS) {
            drv_err_invalid(err, "chunk_size", "%s: more than %u chunks of %llu bytes; use "
                            "larger chunks", dir, DRV_MANIFEST_MAX_CHUNKS,
                            (unsigned long long)chunk_size);
            goto error;
        }
        if (f->nchunks && !(f->chunks = calloc(f->nchunks, sizeof *f->chunks))) {
            drv_err_internal(err, "out of memory");
            goto error;
        }
    }
    if (hash_all(w.v, m, threads, err) < 0)
        goto error;
    if (drv_manifest_compute_digest(m, m->digest) < 0) {
        drv_err_internal(err, "out of memory");
        goto error;
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.v[i].rel), free(w.v[i].open_path);
    free(w.v);
    *out = m;
    return 0;
error:
    for (size_t i = 0; i < w.n; i++)
        free(w.v[i].rel), free(w.v[i].open_path);
    free(w.v);
    drv_manifest_free(m);
    return -1;
}
