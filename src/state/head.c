/* head.c — small helpers of the head context (see head.h). */
#include "state/head.h"

#include <string.h>

void drv_head_config_defaults(drv_head_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->heartbeat_ms = 2000;
    cfg->node_timeout_ms = 10000;
    cfg->node_lost_ms = 30000;
    cfg->job_port_min = 29500;
    cfg->job_port_max = 29999;
    cfg->job_wait_margin_s = 600;
    cfg->lease_ttl_ms = 5000;
    cfg->blob_sync_timeout_ms = 30000;
    cfg->auth_fail_rate = 10;
    cfg->auth_fail_burst = 20;
    cfg->auth_fail_table = 4096;
    cfg->audit_max_entries = 10000;
    cfg->audit_max_age_s = 90LL * 86400;
    cfg->upload_expiry_s = 86400;
}

uint64_t drv_key_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}
