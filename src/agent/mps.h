/* mps.h — the agent's side of compute shares (design §3): one NVIDIA MPS
 * control daemon per GPU where MPS is available, so fractional replicas can
 * be started with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; elsewhere replicas
 * time-slice. Part of drover-agent (drvagent), not of the preload library.
 *
 * For each GPU the agent starts `nvidia-cuda-mps-control -f` (foreground,
 * so the agent supervises it) in its own process group with
 *   CUDA_VISIBLE_DEVICES=<the GPU's UUID>      (clients name their GPU by
 *                                               UUID too, which MPS maps)
 *   CUDA_MPS_PIPE_DIRECTORY=<dir>/<i>/pipe     (clients join with this)
 *   CUDA_MPS_LOG_DIRECTORY=<dir>/<i>/log
 * and PR_SET_PDEATHSIG=SIGKILL, so a daemon dies with its agent. A daemon
 * counts as up once its control pipe (<pipe>/control) exists. A GPU whose
 * daemon does not come up within the timeout, or exits later, time-slices
 * from then on (the reason is in drv_mps_message / the agent's log);
 * nothing is restarted. destroy asks each daemon to quit ("quit" on the
 * control program's stdin, as `echo quit | nvidia-cuda-mps-control`), then
 * kills its process group (the MPS servers it started) after a grace
 * period.
 *
 * UNIX socket paths are short (108 bytes), so when <dir> is long the pipe
 * and log directories go to a fresh /tmp/drover-mps-XXXXXX instead.
 *
 * Threads: create from a thread that lives as long as the daemons should
 * (PDEATHSIG fires when the forking thread exits: the agent's main thread);
 * after that, one thread at a time may call pipe_dir/mode/message (the
 * agent's sync thread); destroy once nobody else calls. Children are reaped
 * by pid only.
 */
#ifndef DRV_AGENT_MPS_H
#define DRV_AGENT_MPS_H

#include <stddef.h>

#include "common/error.h"

typedef struct drv_mps drv_mps_t;

typedef struct drv_mps_opts {
    const char *control;      /* nvidia-cuda-mps-control's path; NULL: looked up in PATH */
    const char *dir;          /* base directory for the pipe and log directories */
    int start_timeout_ms;     /* per daemon (they start together); 0: 5000 */
    int stop_timeout_ms;      /* grace after "quit"; 0: 5000 */
} drv_mps_opts_t;

/* Find `name` in PATH (an executable file); 0 with its path in buf, -1. */
int drv_mps_which(const char *name, char *buf, size_t len);

/* Start a daemon for each of the n GPU UUIDs. Never fails for a daemon
 * that does not start (that GPU time-slices); NULL with err only for bad
 * arguments or when no control program is found (err says which). */
drv_mps_t *drv_mps_create(const drv_mps_opts_t *o, const char *const *uuids, size_t n,
                          drv_error_t *err);

/* Quit every daemon and free m. Accepts NULL. */
void drv_mps_destroy(drv_mps_t *m);

/* The CUDA_MPS_PIPE_DIRECTORY for clients on GPU uuid, or NULL when MPS is
 * not in force there (m NULL, unknown GPU, daemon down: reaped here). */
const char *drv_mps_pipe_dir(drv_mps_t *m, const char *uuid);

/* "mps" or "time-slicing" for GPU uuid (m may be NULL). */
const char *drv_mps_mode(drv_mps_t *m, const char *uuid);

/* One line for the agent's log: "MPS on 2 of 2 GPUs", "MPS on 0 of 1 GPU:
 * GPU-...: control daemon exited with status 1". */
const char *drv_mps_message(const drv_mps_t *m);

#endif
