/* region.c — a replica's GPU memory, counted across its processes in shared
 * memory (see region.h for the protocol and the layout).
 *
 * Slot states: pid 0 free; -2 being claimed (the claimer writes start and
 * bytes, then publishes its pid with release order, so a reclaimer that
 * sees a pid also sees its start time); > 0 owned; -1 being reclaimed.
 * Only slots with pid > 0 are ever judged dead.
 */
#define _GNU_SOURCE
#include "gpushare/region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CLAIMING (-2)
#define RECLAIMING (-1)
#define WAIT_STEPS 2000          /* x 1 ms: how long to wait for a creator to finish */

_Static_assert(sizeof(struct drv_gs_slot) == 32, "slot layout");
_Static_assert(sizeof(struct drv_gs_shared) % 8 == 0, "header layout");

size_t drv_gs_region_size(uint32_t nslots)
{
    return sizeof(struct drv_gs_shared) + (size_t)nslots * sizeof(struct drv_gs_slot);
}

int drv_gs_region_name(const char *id, char *buf, size_t len)
{
    if (!id || !*id || id[0] == '.' || strlen(id) > 127)
        return -1;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return -1;
    return snprintf(buf, len, "%s%s", DRV_GS_REGION_PREFIX, id) < (int)len ? 0 : -1;
}

static bool is_path(const char *name)
{
    return name[0] == '/' && strchr(name + 1, '/') != NULL;
}

int drv_gs_region_in_dir(const char *dir, char *buf, size_t len)
{
    if (!dir || dir[0] != '/' || strstr(dir, "..") || buf[0] != '/')
        return -1;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%.*s%s", (int)dl, dir, buf);
    if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof tmp)
        return -1;
    memcpy(buf, tmp, (size_t)n + 1);
    return 0;
}

int drv_gs_region_open(const char *name, int flags, mode_t mode)
{
    return is_path(name) ? open(name, flags, mode) : shm_open(name, flags, mode);
}

int drv_gs_region_unlink(const char *name)
{
    return is_path(name) ? unlink(name) : shm_unlink(name);
}

/* --- processes ---------------------------------------------------------------- */

/* State character and start time (field 22) of /proc/PID/stat; -1 if unreadable. */
static int read_stat(pid_t pid, char *state, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
    if (!p || p[1] != ' ' || !p[2])
        return -1;
    p += 2;
    *state = *p;
    for (int field = 3; field < 22; field++) {   /* p is at field 3 (state) */
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 0;
}

uint64_t drv_gs_pid_start(pid_t pid)
{
    char st;
    uint64_t start = 0;
    return read_stat(pid, &st, &start) == 0 ? start : 0;
}

bool drv_gs_pid_alive(pid_t pid, uint64_t start)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return false;
    char st;
    uint64_t now_start;
    if (read_stat(pid, &st, &now_start) < 0)
        return errno != ENOENT;   /* exists (kill said so) but /proc is not ours to read */
    if (st == 'Z' || st == 'X')
        return false;             /* exited: the driver has freed its memory */
    return start == 0 || now_start == start;
}

/* --- mapping ------------------------------------------------------------------ */

static void init_header(struct drv_gs_shared *sh, size_t size, const char *replica,
                        int64_t limit, uint32_t nslots)
{
    sh->version = DRV_GS_VERSION;
    sh->nslots = nslots;
    sh->map_size = size;
    sh->limit = limit;
    atomic_store(&sh->used, 0);
    atomic_store(&sh->peak, 0);
    atomic_store(&sh->refusals, 0);
    atomic_store(&sh->slot_hwm, 0);
    snprintf(sh->replica, sizeof sh->replica, "%s", replica ? replica : "");
    atomic_store_explicit(&sh->magic, DRV_GS_MAGIC, memory_order_release);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static struct drv_gs_shared *map_named(const char *name, const char *replica, int64_t limit,
                                       uint32_t nslots, size_t size, char *why, size_t wl)
{
    int fd = drv_gs_region_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    bool creator = fd >= 0;
    struct stat st;
    if (creator) {
        if (ftruncate(fd, (off_t)size) < 0) {
            snprintf(why, wl, "cannot size %s: %s", name, strerror(errno));
            close(fd);
            drv_gs_region_unlink(name);
            return NULL;
        }
    } else {
        if (errno != EEXIST || (fd = drv_gs_region_open(name, O_RDWR | O_CLOEXEC, 0)) < 0) {
            snprintf(why, wl, "cannot open %s: %s", name, strerror(errno));
            return NULL;
        }
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
            snprintf(why, wl, "%s belongs to uid %d, not to this process's uid %d", name,
                     (int)st.st_uid, (int)geteuid());
            close(fd);
            return NULL;
        }
        for (int i = 0; i < WAIT_STEPS && st.st_size == 0; i++) {   /* its creator is sizing it */
            sleep_ms(1);
            if (fstat(fd, &st) < 0)
                break;
        }
        if ((size_t)st.st_size != size) {
            snprintf(why, wl, "%s has %lld bytes, expected %zu (another layout version?)", name,
                     (long long)st.st_size, size);
            close(fd);
            return NULL;
        }
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(why, wl, "cannot map %s: %s", name, strerror(e));
        if (creator)
            drv_gs_region_unlink(name);
        return NULL;
    }
    struct drv_gs_shared *sh = p;
    if (creator) {
        init_header(sh, size, replica, limit, nslots);
        return sh;
    }
    for (int i = 0; i < WAIT_STEPS; i++) {   /* its creator is filling the header */
        if (atomic_load_explicit(&sh->magic, memory_order_acquire) == DRV_GS_MAGIC)
            break;
        sleep_ms(1);
    }
    if (atomic_load_explicit(&sh->magic, memory_order_acquire) != DRV_GS_MAGIC ||
        sh->version != DRV_GS_VERSION || sh->nslots != nslots || sh->map_size != size) {
        snprintf(why, wl, "%s is not a drover-gpushare region of version %u (magic %llx, "
                 "version %u)", name, DRV_GS_VERSION,
                 (unsigned long long)atomic_load(&sh->magic), sh->version);
        munmap(p, size);
        return NULL;
    }
    return sh;
}

/* --- slots -------------------------------------------------------------------- */

static int claim(drv_gs_region_t *r)
{
    struct drv_gs_shared *sh = r->sh;
    pid_t pid = getpid();
    uint64_t start = drv_gs_pid_start(pid);
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < sh->nslots; i++) {
            int32_t expect = 0;
            if (atomic_load_explicit(&sh->slots[i].pid, memory_order_relaxed) != 0 ||
                !atomic_compare_exchange_strong(&sh->slots[i].pid, &expect, CLAIMING))
                continue;
            atomic_store(&sh->slots[i].start, start);
            atomic_store(&sh->slots[i].bytes, 0);
            atomic_store_explicit(&sh->slots[i].pid, (int32_t)pid, memory_order_release);
            uint32_t hwm = atomic_load(&sh->slot_hwm);
            while (hwm < i + 1 && !atomic_compare_exchange_weak(&sh->slot_hwm, &hwm, i + 1))
                ;
            r->slot = (int)i;
            r->pid = pid;
            return 0;
        }
        if (pass == 0)
            drv_gs_region_reclaim(r);
    }
    r->pid = pid;   /* no slot: charges go to `used` only */
    return -1;
}

int drv_gs_region_attach(drv_gs_region_t *r, const char *name, const char *replica, int64_t limit,
                         uint32_t nslots, char *why, size_t whylen)
{
    memset(r, 0, sizeof *r);
    r->slot = -1;
    if (limit <= 0 || nslots == 0) {
        snprintf(why, whylen, "invalid region parameters");
        return -1;
    }
    size_t size = drv_gs_region_size(nslots);
    if (name && *name) {
        if (!(r->sh = map_named(name, replica, limit, nslots, size, why, whylen)))
            return -1;
        r->shared = true;
        snprintf(r->name, sizeof r->name, "%s", name);
    } else {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            snprintf(why, whylen, "cannot map an anonymous region: %s", strerror(errno));
            return -1;
        }
        r->sh = p;
        init_header(r->sh, size, replica, limit, nslots);
    }
    r->map_size = size;
    drv_gs_region_reclaim(r);
    claim(r);
    return 0;
}

void drv_gs_region_release_slot(drv_gs_region_t *r)
{
    if (!r->sh || r->slot < 0 || r->pid != getpid())
        return;
    struct drv_gs_slot *s = &r->sh->slots[r->slot];
    int64_t b = atomic_exchange(&s->bytes, 0);
    atomic_fetch_sub(&r->sh->used, b);
    atomic_store_explicit(&s->pid, 0, memory_order_release);
    r->slot = -1;
}

void drv_gs_region_detach(drv_gs_region_t *r)
{
    if (!r || !r->sh)
        return;
    drv_gs_region_release_slot(r);
    munmap(r->sh, r->map_size);
    memset(r, 0, sizeof *r);
    r->slot = -1;
}

void drv_gs_region_after_fork(drv_gs_region_t *r)
{
    r->slot = -1;
    r->pid = 0;
}

int64_t drv_gs_region_reclaim(drv_gs_region_t *r)
{
    struct drv_gs_shared *sh = r->sh;
    if (!sh)
        return 0;
    uint32_t hwm = atomic_load(&sh->slot_hwm);
    if (hwm > sh->nslots)
        hwm = sh->nslots;
    int64_t total = 0;
    for (uint32_t i = 0; i < hwm; i++) {
        struct drv_gs_slot *s = &sh->slots[i];
        int32_t p = atomic_load_explicit(&s->pid, memory_order_acquire);
        if (p <= 0 || ((int)i == r->slot && p == r->pid))
            continue;
        uint64_t start = atomic_load(&s->start);
        if (drv_gs_pid_alive(p, start))
            continue;
        int32_t expect = p;
        if (!atomic_compare_exchange_strong(&s->pid, &expect, RECLAIMING))
            continue;   /* someone else reclaimed it (or its owner left) */
        int64_t b = atomic_exchange(&s->bytes, 0);
        atomic_fetch_sub(&sh->used, b);
        total += b;
        atomic_store_explicit(&s->pid, 0, memory_order_release);
    }
    return total;
}

/* --- charging ----------------------------------------------------------------- */

bool drv_gs_region_charge(drv_gs_region_t *r, int64_t n)
{
    struct drv_gs_shared *sh = r->sh;
    if (!sh || n <= 0)
        return n == 0;
    if (r->pid == 0)   /* a forked child's first charge */
        claim(r);
    int64_t u = 0;
    if (n <= sh->limit) {
        for (int attempt = 0; attempt < 2; attempt++) {
            u = atomic_load(&sh->used);
            while (u <= sh->limit - n)
                if (atomic_compare_exchange_weak(&sh->used, &u, u + n))
                    goto admitted;
            if (attempt > 0 || drv_gs_region_reclaim(r) == 0)
                break;
        }
    }
    atomic_fetch_add(&sh->refusals, 1);
    return false;
admitted:
    if (r->slot >= 0)
        atomic_fetch_add(&sh->slots[r->slot].bytes, n);
    int64_t peak = atomic_load(&sh->peak);
    while (peak < u + n && !atomic_compare_exchange_weak(&sh->peak, &peak, u + n))
        ;
    return true;
}

void drv_gs_region_uncharge(drv_gs_region_t *r, int64_t n)
{
    struct drv_gs_shared *sh = r->sh;
    if (!sh || n <= 0)
        return;
    if (r->slot >= 0)
        atomic_fetch_sub(&sh->slots[r->slot].bytes, n);
    atomic_fetch_sub(&sh->used, n);
}

int64_t drv_gs_region_used(const drv_gs_region_t *r)
{
    return r->sh ? atomic_load(&r->sh->used) : 0;
}

int64_t drv_gs_region_limit(const drv_gs_region_t *r)
{
    return r->sh ? r->sh->limit : 0;
}

int drv_gs_region_processes(const drv_gs_region_t *r)
{
    if (!r->sh)
        return 0;
    uint32_t hwm = atomic_load(&r->sh->slot_hwm);
    int n = 0;
    for (uint32_t i = 0; i < hwm && i < r->sh->nslots; i++)
        n += atomic_load(&r->sh->slots[i].pid) > 0;
    return n;
}
