/* slurm.h — the `slurm` provider: a node is a Slurm batch job holding its
 * GPUs, run on the cloud worker (cloudw.h) through the Slurm commands
 * (slurm_cmd.h). create = `sbatch --parsable` of a batch script (the boot
 * script every cloud machine runs, with the job's own agent data dir and
 * the GPUs Slurm granted), asking --gres=gpu:N from the instance type
 * (slurm-gpu-N), the nodepool's partition, account and time limit, named
 * drover-NODE with a --comment of drover's tags (head, owner, cluster,
 * nodepool, node); delete = `scancel`; list = `squeue --me` with a
 * machine-readable format, filtered by the head's tag in the comment. A job
 * Slurm ends or preempts is no longer listed: its node is lost and
 * replaced. Commands run with SLURM_CONF from the cluster's slurm_conf, or
 * droverd's own environment. */
#ifndef DRV_SLURM_H
#define DRV_SLURM_H

#include <stdbool.h>

#include "common/error.h"
#include "provider/ec2.h"
#include "provider/provider.h"

struct drv_cloudw;

struct drv_cloudw *drv_slurm_create_worker(const char *data_dir, drv_error_t *err);
void drv_slurm_destroy(struct drv_cloudw *w);

extern const drv_provider_ops_t drv_slurm_ops;

/* What to do about a failed Slurm command, from its message: give up
 * (invalid partition, account, qos, gres, time; permissions, policy),
 * fall back (no node configuration fits), else retry (busy or unreachable
 * controller, timeouts). */
drv_prov_class_t drv_slurm_classify(const char *msg);
/* The jobs of head head_id in squeue's --format=%i|%T|%P|%k output (text
 * is cut up): ids, states in EC2's words, partitions as zones, drover's
 * tags from the comment; *out malloc'd (caller frees). */
int drv_slurm_parse_squeue(char *text, const char *head_id, drv_ec2_instance_t **out,
                           size_t *n, drv_error_t *err);

/* Slurm commands run so far (for /metrics and tests). */
unsigned long long drv_slurm_calls(struct drv_cloudw *w);

/* Is s a Slurm --time value (MIN, MIN:SEC, H:M:S, D-H, D-H:M, D-H:M:S,
 * UNLIMITED or INFINITE)? */
bool drv_slurm_time_ok(const char *s);
/* Is s a partition, account or cluster name drover passes on (letters,
 * digits, '_', '-', '.'; 1..63)? */
bool drv_slurm_name_ok(const char *s);

#endif
