/* config.h — what libdrover-gpushare.so enforces and how much each
 * allocation is charged; pure functions (no I/O), unit-tested on their own.
 *
 * Configuration comes only from the replica contract's environment
 * (design §6), read once when the library loads:
 *   DROVER_GPU_MEMORY_LIMIT_MIB  the share, in MiB: a decimal integer in
 *                                1..16777216. Unset, empty or "0": no limit,
 *                                every call passes straight through.
 *                                Anything else (garbage, negative, too
 *                                large) fails closed: every device memory
 *                                allocation is refused, with a log line that
 *                                says why (a share that cannot be read must
 *                                not become "no share").
 *   DROVER_REPLICA_ID            names the region shared by the replica's
 *                                processes (/drover-gpushare-<id>); unset or
 *                                invalid: an anonymous region (shared with
 *                                forked children only), with a warning.
 *   DROVER_GPU_COMPUTE_PERCENT   informational only (MPS enforces it); shown
 *                                in the library's start-up line.
 *
 * Charging: a request of n bytes is charged drv_gs_charge_size(n): n
 * rounded up to 512 bytes (the driver's minimum alignment), and, from 2 MiB
 * on, to a multiple of 2 MiB (the page size the driver backs large
 * allocations with), so the count follows what the device really gives.
 * CUDA arrays are charged an estimate from their descriptor.
 */
#ifndef DRV_GPUSHARE_CONFIG_H
#define DRV_GPUSHARE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DRV_GS_MAX_LIMIT_MIB (1LL << 24)   /* 16 TiB */
#define DRV_GS_SMALL_ALIGN 512ULL
#define DRV_GS_PAGE (2ULL << 20)

typedef struct drv_gs_config {
    bool limited;            /* a share is enforced (limit_bytes > 0, or refuse_all) */
    bool refuse_all;         /* the limit was malformed: refuse every allocation */
    int64_t limit_mib;
    int64_t limit_bytes;
    int compute_percent;     /* 0: unset or malformed */
    char replica[128];       /* "" when unset or invalid */
    char region[512];        /* shm name, or a path (DROVER_GPUSHARE_DIR); "" = anonymous */
    char error[200];         /* why refuse_all */
    char warning[200];       /* a problem that does not stop enforcement ("" none) */
} drv_gs_config_t;

/* Fill *out from the three variables' values (each NULL when unset). */
void drv_gs_config_parse(const char *limit_mib, const char *replica_id,
                         const char *compute_percent, drv_gs_config_t *out);

/* Bytes charged for a request of n bytes (0 for 0; saturates near 2^63). */
uint64_t drv_gs_charge_size(uint64_t n);

/* Bytes an array of w x h x d elements (0 read as 1) of `format` with
 * `channels` channels and `levels` mip levels (0 read as 1) is charged,
 * before drv_gs_charge_size. Unknown formats count 16 bytes per element
 * (the largest element of any format). Saturates near 2^63. */
uint64_t drv_gs_array_bytes(uint64_t w, uint64_t h, uint64_t d, int format, unsigned channels,
                            unsigned levels);

/* "512 B", "1.5 MiB", "3.25 GiB": for log lines. */
void drv_gs_fmt_bytes(uint64_t n, char *buf, size_t len);

#endif
