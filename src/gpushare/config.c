/* config.c — the preload library's configuration and charging rules (see
 * config.h). No I/O, no allocation: safe to call from a library constructor.
 */
#include "gpushare/config.h"

#include <stdio.h>
#include <string.h>

#include "gpushare/cuda_api.h"
#include "gpushare/region.h"

#define SAT (UINT64_MAX >> 1)

/* A decimal integer of digits only (no sign, no spaces), <= max; -1 otherwise. */
static int64_t parse_uint(const char *s, int64_t max)
{
    if (!s || !*s)
        return -1;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > max)
            return -1;
    }
    return v;
}

void drv_gs_config_parse(const char *limit_mib, const char *replica_id,
                         const char *compute_percent, drv_gs_config_t *out)
{
    memset(out, 0, sizeof *out);
    if (limit_mib && *limit_mib) {
        int64_t v = parse_uint(limit_mib, DRV_GS_MAX_LIMIT_MIB);
        if (v < 0) {
            out->limited = out->refuse_all = true;
            snprintf(out->error, sizeof out->error,
                     "DROVER_GPU_MEMORY_LIMIT_MIB=\"%.40s\" is not a number of MiB in 0..%lld",
                     limit_mib, (long long)DRV_GS_MAX_LIMIT_MIB);
        } else if (v > 0) {
            out->limited = true;
            out->limit_mib = v;
            out->limit_bytes = v << 20;
        }
    }
    if (compute_percent && *compute_percent) {
        int64_t c = parse_uint(compute_percent, 100);
        out->compute_percent = c > 0 ? (int)c : 0;
    }
    if (replica_id && *replica_id &&
        drv_gs_region_name(replica_id, out->region, sizeof out->region) == 0) {
        snprintf(out->replica, sizeof out->replica, "%s", replica_id);
    } else {
        out->region[0] = '\0';
        if (out->limited && !out->refuse_all)
            snprintf(out->warning, sizeof out->warning,
                     "DROVER_REPLICA_ID is %s: the share is counted per process tree, not "
                     "across the replica", replica_id && *replica_id ? "invalid" : "not set");
    }
}

uint64_t drv_gs_charge_size(uint64_t n)
{
    if (n == 0)
        return 0;
    if (n > SAT - DRV_GS_PAGE)
        return SAT;
    if (n >= DRV_GS_PAGE)
        return (n + DRV_GS_PAGE - 1) / DRV_GS_PAGE * DRV_GS_PAGE;
    return (n + DRV_GS_SMALL_ALIGN - 1) / DRV_GS_SMALL_ALIGN * DRV_GS_SMALL_ALIGN;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) || r > SAT ? SAT : r;
}

uint64_t drv_gs_array_bytes(uint64_t w, uint64_t h, uint64_t d, int format, unsigned channels,
                            unsigned levels)
{
    uint64_t elem;
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        elem = 1;
        break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        elem = 2;
        break;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        elem = 4;
        break;
    default:
        elem = 16;
        channels = 1;
        break;
    }
    elem = mul_sat(elem, channels ? channels : 1);
    w = w ? w : 1;
    h = h ? h : 1;
    d = d ? d : 1;
    levels = levels ? levels : 1;
    uint64_t total = 0;
    for (unsigned l = 0; l < levels && l < 64; l++) {
        uint64_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = d >> l ? d >> l : 1;
        uint64_t level = mul_sat(mul_sat(mul_sat(lw, lh), ld), elem);
        total = total > SAT - level ? SAT : total + level;
    }
    return total;
}

void drv_gs_fmt_bytes(uint64_t n, char *buf, size_t len)
{
    if (n < 1024)
        snprintf(buf, len, "%llu B", (unsigned long long)n);
    else if (n < (1ULL << 20))
        snprintf(buf, len, "%.4g KiB", (double)n / 1024.0);
    else if (n < (1ULL << 30))
        snprintf(buf, len, "%.4g MiB", (double)n / 1048576.0);
    else
        snprintf(buf, len, "%.4g GiB", (double)n / 1073741824.0);
}
