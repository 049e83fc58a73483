/* region.h — the GPU memory a replica uses, counted across all of its
 * processes in one small shared-memory region (libdrover-gpushare.so).
 *
 * A replica may fork or exec workers; each process that touches CUDA maps
 * the replica's region (POSIX shared memory "/drover-gpushare-<replica id>",
 * created by the first one, mode 0600, owned by the replica's user) and
 * claims a slot: {pid, start time, bytes}. The header holds a magic number,
 * a layout version, the limit and `used`, the sum of every slot's bytes.
 *
 * Charging n bytes: a compare-and-swap loop on `used` admits n only while
 * used + n <= limit, then adds n to the process's slot; a free subtracts
 * from the slot, then from `used`. So `used` never undercounts: a process
 * that dies between the two steps leaves at most that one allocation
 * counted (conservative) until the agent resets the region.
 *
 * Dead processes: a slot whose pid no longer exists, is a zombie, or was
 * reused by a process with another start time (from /proc/PID/stat) is
 * reclaimed by any live process: it takes the slot (pid -> -1 by CAS, so
 * exactly one reclaimer), moves its bytes out of `used` and frees the slot.
 * Reclaim runs before refusing an allocation, when a process attaches, and
 * (at most every 100 ms) when cuMemGetInfo asks what is free. A process
 * exiting normally releases its slot itself.
 *
 * Layout version 1 (all integers native-endian, 8-byte aligned):
 *   magic u64 (written last, with release order, by the creator) | version
 *   u32 | nslots u32 | map_size u64 | limit i64 | used i64 | peak i64 |
 *   refusals u64 | slot_hwm u32 | pad u32 | replica char[128] |
 *   slots[nslots] {pid i32, pad i32, start u64, bytes i64, pad u64}
 * A process finding another magic, version or size does not use the
 * region: it falls back to a private one (limit per process) and says so.
 *
 * Without a replica id (someone preloaded the library by hand) the region
 * is an anonymous shared mapping: processes forked from the first one share
 * it, exec'd ones do not.
 *
 * Threads: every operation is lock-free on the shared atomics; any thread
 * of any process may call. drv_gs_region_t itself (the process's view) is
 * written at attach and after fork only.
 */
#ifndef DRV_GPUSHARE_REGION_H
#define DRV_GPUSHARE_REGION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DRV_GS_MAGIC 0x31534750474e5244ULL   /* "DRNGPGS1" little-endian */
#define DRV_GS_VERSION 1u
#define DRV_GS_SLOTS 1024u
#define DRV_GS_REGION_PREFIX "/drover-gpushare-"

struct drv_gs_slot {
    _Atomic int32_t pid;        /* 0 free, > 0 owner, -1 being reclaimed */
    int32_t pad0;
    _Atomic uint64_t start;     /* the owner's start time (clock ticks since boot) */
    _Atomic int64_t bytes;      /* charged to the owner */
    uint64_t pad1;
};

struct drv_gs_shared {
    _Atomic uint64_t magic;
    uint32_t version;
    uint32_t nslots;
    uint64_t map_size;
    int64_t limit;              /* bytes */
    _Atomic int64_t used;       /* bytes, all slots */
    _Atomic int64_t peak;
    _Atomic uint64_t refusals;
    _Atomic uint32_t slot_hwm;  /* 1 + highest slot index ever claimed */
    uint32_t pad;
    char replica[128];
    struct drv_gs_slot slots[];
};

typedef struct drv_gs_region {
    struct drv_gs_shared *sh;   /* NULL: not attached */
    size_t map_size;
    int slot;                   /* this process's slot, -1 none (then only `used` counts) */
    pid_t pid;                  /* the process the slot belongs to */
    bool shared;                /* named shm (false: anonymous / private fallback) */
    char name[160];             /* shm name, "" when anonymous */
} drv_gs_region_t;

/* Size of a mapping with nslots slots. */
size_t drv_gs_region_size(uint32_t nslots);

/* The region's shm name for a replica id ([A-Za-z0-9._-]{1,127}, not
 * starting with '.'): "/drover-gpushare-<id>". -1 for an invalid id. */
int drv_gs_region_name(const char *replica_id, char *buf, size_t len);

/* Containers (agent/container.h): DROVER_GPUSHARE_DIR, an absolute
 * directory (no "..") that the agent shares between the host and the
 * replica's container, holds the region as the file DIR<name> instead of
 * POSIX shared memory (the container's /dev/shm is its own). Rewrites the
 * shm name in buf (len) to that path; 0, or -1 (dir invalid or too long:
 * buf untouched). drv_gs_region_open and _unlink take either form: a name
 * with a '/' after the first character is a file path. */
int drv_gs_region_in_dir(const char *dir, char *buf, size_t len);
int drv_gs_region_open(const char *name, int flags, mode_t mode);
int drv_gs_region_unlink(const char *name);

/* Map the region `name` (create it, with limit and nslots, when absent),
 * or an anonymous shared one when name is NULL or "". Then claim a slot for
 * this process (reclaiming dead ones first). 0, or -1 with a reason in
 * why (the region is then not attached). */
int drv_gs_region_attach(drv_gs_region_t *r, const char *name, const char *replica, int64_t limit,
                         uint32_t nslots, char *why, size_t whylen);

/* Unmap (and release the slot, giving its bytes back). */
void drv_gs_region_detach(drv_gs_region_t *r);

/* Release this process's slot (its bytes leave `used`); the mapping stays. */
void drv_gs_region_release_slot(drv_gs_region_t *r);

/* In a forked child: forget the parent's slot (the next charge claims one). */
void drv_gs_region_after_fork(drv_gs_region_t *r);

/* Admit n bytes (n > 0) if used + n <= limit; reclaims dead processes once
 * before refusing. true when charged. */
bool drv_gs_region_charge(drv_gs_region_t *r, int64_t n);

/* Give n bytes back (what charge took). */
void drv_gs_region_uncharge(drv_gs_region_t *r, int64_t n);

/* Reclaim the slots of dead processes; returns the bytes given back. */
int64_t drv_gs_region_reclaim(drv_gs_region_t *r);

int64_t drv_gs_region_used(const drv_gs_region_t *r);
int64_t drv_gs_region_limit(const drv_gs_region_t *r);
/* Live processes holding a slot (one pass over the slots). */
int drv_gs_region_processes(const drv_gs_region_t *r);

/* Whether pid (with start time `start`, 0 = unknown) still runs: exists,
 * is not a zombie, and has that start time. Exposed for the tests. */
bool drv_gs_pid_alive(pid_t pid, uint64_t start);
/* The start time of pid from /proc/PID/stat (field 22), 0 if unknown. */
uint64_t drv_gs_pid_start(pid_t pid);

#endif
