/* isolate.h — replica isolation on the node (issue 18 item 4): each
 * command replica and job worker runs in its own cgroup under one parent
 * the agent owns (cgroup v2, or the v1 controllers where that is what the
 * host has), with a memory limit (swap off where the host can), a CPU
 * quota and a process limit; as an unprivileged user with a private
 * working directory; and a replica killed by its cgroup's OOM killer is
 * told apart from any other SIGKILL.
 *
 * Nothing here fails a replica: a limit the agent cannot apply (not root,
 * no such controller, a write refused) is reported as not enforced with
 * the reason (drv_iso_report_t), and the replica starts anyway.
 *
 * Threads: drv_iso_create/destroy run on the agent's main thread; the
 * rest on the supervisor thread, with the supervisor's mutex held (cgroupfs
 * writes only, no slow I/O); drv_iso_enter in the forked child.
 */
#ifndef DRV_ISOLATE_H
#define DRV_ISOLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <sys/types.h>

#include "common/error.h"

enum { DRV_ISO_MEMORY, DRV_ISO_CPU, DRV_ISO_PIDS, DRV_ISO_USER, DRV_ISO_WORKDIR, DRV_ISO_N };
#define DRV_ISO_MAXH 4           /* cgroup hierarchies a replica joins (v1: memory, cpu, pids) */

/* "memory", "cpu", "pids", "user", "workdir" */
const char *drv_iso_name(int limit);

typedef struct drv_iso_limit {
    bool enforced;
    char value[96];              /* enforced: "256 MiB", "250m (25000/100000 us)", "4096", ... */
    char file[320];              /* the cgroup file that holds it ("" for user and workdir) */
    char reason[256];            /* not enforced: why */
} drv_iso_limit_t;

typedef struct drv_iso_report {
    bool set;                    /* false: no isolation context (or not started yet) */
    drv_iso_limit_t lim[DRV_ISO_N];
    char cgroup[256];            /* the replica's cgroup, relative to the hierarchies' root */
} drv_iso_report_t;

/* Internal, for tests only (no flag or variable sets it): the cgroupfs the
 * agent works on, so a test can run it on a fake tree in a temp dir. Each
 * NULL member is the real one. */
typedef struct drv_iso_fs {
    const char *mountinfo;       /* NULL: /proc/self/mountinfo */
    int (*mkdir)(const char *path, mode_t mode);      /* like mkdir(2) */
    int (*rmdir)(const char *path);                   /* like rmdir(2) */
    int (*write)(const char *path, const char *text); /* one write to a cgroup file:
                                                         0, or -1 with errno */
} drv_iso_fs_t;

typedef struct drv_iso_opts {
    const char *cgroup_parent;   /* relative to each hierarchy's root, e.g. "drover/n1";
                                    "": no cgroups (every limit not enforced); NULL: the
                                    default drover/NODE_ID.HASH, HASH the first 8 hex digits
                                    of the SHA-256 of the data dir's real path (agents of
                                    several heads on one host never share a parent) */
    const char *node_id;         /* for the default; "" or NULL: "node" */
    const char *user;            /* NULL: the default (drover-replica, created with useradd
                                    --system when missing, else nobody); "" or "root": none */
    int pids_max;                /* 0: 4096; < 0: no process limit */
    const char *data_dir;        /* the agent's: the replica user must reach it */
    const char *sysfs;           /* where cgroups are mounted, for mountinfo; NULL: any */
    const drv_iso_fs_t *fs;      /* tests only: a fake cgroupfs (it must outlive the
                                    context; the last drv_iso_create sets it for the
                                    process); NULL: the real one */
} drv_iso_opts_t;

typedef struct drv_iso drv_iso_t;

/* The report as the agent sends it in a replica's status: {"cgroup": PATH,
 * LIMIT: {"enforced": true, "value": V[, "file": F]} | {"enforced": false,
 * "reason": R}} for memory, cpu, pids, user, workdir. */
json_t *drv_iso_report_json(const drv_iso_report_t *r);

/* Find the hierarchies, create the parent (enabling v2 controllers on the
 * way), kill and remove the cgroups of replicas a previous run left, and
 * resolve the user. Fails only for a --replica-user that names no user. */
drv_iso_t *drv_iso_create(const drv_iso_opts_t *o, drv_error_t *err);
/* Remove the parent (its replicas must be gone). Accepts NULL. */
void drv_iso_destroy(drv_iso_t *iso);
/* One line for the agent's log: what is enforced, what is not and why. */
const char *drv_iso_summary(const drv_iso_t *iso);

/* One start of one replica: owned by its supervisor record. */
typedef struct drv_iso_proc {
    char id[128];
    int fds[DRV_ISO_MAXH];       /* cgroup.procs of each hierarchy's cgroup (parent side) */
    int nfds;
    char dirs[DRV_ISO_MAXH][320];/* the replica's cgroup in each hierarchy */
    int ndirs;
    char oom_file[340];          /* memory.events (v2) / memory.oom_control (v1); "" = none */
    long long oom_base;          /* its oom_kill count at the start */
    bool set_user;
    uid_t uid;
    gid_t gid;
    char workdir[4200];          /* "" = none */
    drv_iso_report_t rep;
} drv_iso_proc_t;

/* Before the fork: the replica's cgroup (created afresh, limits written),
 * its working directory DATA_DIR/work/ID (0700, the replica user's) and
 * the report. Never fails: what cannot be done is in p->rep. */
void drv_iso_prepare(drv_iso_t *iso, const char *id, int64_t memory_mib, int64_t cpu_millis,
                     drv_iso_proc_t *p);
/* The parent after the fork: close the cgroup.procs descriptors. */
void drv_iso_forked(drv_iso_proc_t *p);
/* In the forked child, before exec: join the cgroups, chdir to the working
 * directory, drop to the replica user. Async-signal-safe; 0, or -1 with
 * *what naming the step that failed (errno set). */
int drv_iso_enter(const drv_iso_proc_t *p, const char **what);
/* The process is reaped: how many OOM kills its cgroup saw (0: none);
 * then what is left in the cgroups is killed and they are removed. */
int drv_iso_exited(drv_iso_t *iso, drv_iso_proc_t *p);
/* The replica is gone for good: remove its working directory. */
void drv_iso_forget(drv_iso_t *iso, const char *id);
/* Let the replica user use path inside the data dir: every directory from
 * the data dir down to path's parent gets o+x (traverse, no listing), and
 * path is chowned to the user (with everything under it when tree).
 * Nothing without a replica user. */
void drv_iso_grant(const drv_iso_t *iso, const char *path, bool tree);
/* Let the replica user search path (a directory in the data dir it must
 * reach but not own, e.g. the MPS pipe directory of its GPU): o+x on it and
 * on every directory above it up to the data dir. Nothing without a
 * replica user. */
void drv_iso_reach(const drv_iso_t *iso, const char *path);

#endif
