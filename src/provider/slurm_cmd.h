/* slurm_cmd.h — run one Slurm command (sbatch, scancel, squeue) the way
 * the slurm provider needs: argv executed directly (no shell), an optional
 * stdin text (sbatch's batch script), SLURM_CONF set for the child only,
 * stdout and stderr captured, and a time limit after which the command is
 * killed. Called from the slurm worker thread only. */
#ifndef DRV_SLURM_CMD_H
#define DRV_SLURM_CMD_H

#include <stddef.h>

#include "common/error.h"

typedef struct drv_slurm_out {
    int status;          /* exit status; -1: killed at the time limit or by a signal */
    int exec_errno;      /* != 0: the program could not be started (ENOENT: not in PATH) */
    char out[65536];     /* stdout (truncated past this; always NUL-terminated) */
    size_t out_len;
    char err[1024];      /* stderr, trimmed of trailing newlines */
} drv_slurm_out_t;

/* Run argv (argv[0] looked up in PATH) with SLURM_CONF=slurm_conf when
 * slurm_conf is not "" (else the environment's), stdin from input (NULL:
 * /dev/null), at most timeout_ms. 0 when it ran (whatever its exit
 * status: see *o), -1 with err when it could not be run at all. */
int drv_slurm_run(char *const argv[], const char *slurm_conf, const char *input, int timeout_ms,
                  drv_slurm_out_t *o, drv_error_t *err);

#endif
