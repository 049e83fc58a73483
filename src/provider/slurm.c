/* slurm.c — the `slurm` provider (see slurm.h): Slurm batch jobs as drover
 * nodes, the Slurm backend of the cloud worker (cloudw.h). Every command
 * is an argv run by slurm_cmd.c (no shell); the batch script goes to
 * sbatch on stdin. No secret is ever on a command line: the join token is
 * in the script, which Slurm keeps readable by the job's user only. */
#define _GNU_SOURCE
#include "provider/slurm.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "provider/cloudw.h"
#include "provider/slurm_cmd.h"

#define CMD_TIMEOUT_MS 30000
#define MAX_JOBS 100000

/* --- names and values --------------------------------------------------------- */

bool drv_slurm_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
            return false;
    return true;
}

/* n numbers of at most 2 digits (the first any length) separated by ':'. */
static bool colon_numbers(const char *s, int min_parts, int max_parts)
{
    int parts = 0;
    while (*s) {
        size_t d = strspn(s, "0123456789");
        if (d == 0 || (parts > 0 && d > 2) || d > 9)
            return false;
        parts++;
        s += d;
        if (*s == ':' && s[1])
            s++;
        else if (*s)
            return false;
    }
    return parts >= min_parts && parts <= max_parts;
}

bool drv_slurm_time_ok(const char *s)
{
    if (!*s || strlen(s) > 31)
        return false;
    if (strcasecmp(s, "UNLIMITED") == 0 || strcasecmp(s, "INFINITE") == 0)
        return true;
    const char *dash = strchr(s, '-');
    if (!dash)
        return colon_numbers(s, 1, 3);   /* MIN, MIN:SEC, H:M:S */
    size_t d = strspn(s, "0123456789");
    if (d == 0 || d > 5 || s + d != dash)
        return false;
    return colon_numbers(dash + 1, 1, 3);   /* D-H, D-H:M, D-H:M:S */
}

/* GPUs per node of a launch: N of its "NxTYPE:MiB" spec (0: "none"). */
static int gpu_count(const char *spec, char *type, size_t tlen, long long *mib)
{
    int n = 0;
    *mib = 0;
    type[0] = '\0';
    char t[64];
    if (sscanf(spec, "%dx%63[^:]:%lld", &n, t, mib) != 3 || n < 0)
        return 0;
    snprintf(type, tlen, "%s", t);
    return n;
}

/* --- errors ------------------------------------------------------------------- */

drv_prov_class_t drv_slurm_classify(const char *msg)
{
    static const char *const give_up[] = {
        "Invalid partition", "Invalid account", "Invalid qos", "Invalid generic resource",
        "Invalid time limit", "Invalid wckey", "Access/permission denied",
        "User's group not permitted", "Invalid user id", "Job violates accounting/QOS policy",
        "Unrecognized option", "unrecognized option", "invalid option",
        "Node count specification invalid", NULL};
    static const char *const fallback[] = {
        "Requested node configuration is not available", "Requested partition configuration "
        "not available", NULL};
    for (size_t i = 0; give_up[i]; i++)
        if (strcasestr(msg, give_up[i]))
            return DRV_PROV_GIVE_UP;
    for (size_t i = 0; fallback[i]; i++)
        if (strcasestr(msg, fallback[i]))
            return DRV_PROV_FALLBACK;
    /* "Resources temporarily unavailable", "Socket timed out", "Unable to
     * contact slurm controller", "Zero Bytes were transmitted", a command
     * killed at its time limit, ...: the controller is busy or away */
    return DRV_PROV_RETRY;
}

/* Run argv; on failure fill err (and *cls) with the command's own words. */
static int run(char *const argv[], const drv_cloud_settings_t *s, const char *input,
               drv_slurm_out_t *o, drv_prov_class_t *cls, unsigned *calls, drv_error_t *err)
{
    if (drv_slurm_run(argv, s->slurm_conf, input, CMD_TIMEOUT_MS, o, err) < 0) {
        *cls = DRV_PROV_RETRY;
        return -1;
    }
    (*calls)++;
    if (o->exec_errno) {
        *cls = DRV_PROV_GIVE_UP;
        return drv_err(err, 503, "slurm", "", "Slurm: cannot run %s (%s): install the Slurm "
                       "client commands on the head's machine and put them in droverd's PATH",
                       argv[0], strerror(o->exec_errno));
    }
    if (o->status != 0) {
        const char *m = o->err[0] ? o->err : "no message";
        *cls = drv_slurm_classify(m);
        return drv_err(err, 503, "slurm", "", "Slurm: %s failed (%s%d): %s", argv[0],
                       o->status < 0 ? "killed, " : "exit ", o->status < 0 ? 0 : o->status, m);
    }
    return 0;
}

/* --- the backend --------------------------------------------------------------- */

static bool same_account(const drv_cloud_settings_t *a, const drv_cloud_settings_t *b)
{
    return strcmp(a->slurm_conf, b->slurm_conf) == 0 && strcmp(a->region, b->region) == 0;
}

/* The batch script: the cloud boot script, after the first line the
 * Slurm-specific part (one agent dir per job, its log there, the GPUs
 * Slurm granted when NVML is absent). */
static char *batch_script(const drv_node_launch_t *l, int gpus, const char *type, long long mib)
{
    char *boot = drv_cloud_boot_script(l);
    if (!boot)
        return NULL;
    char *nl = strchr(boot, '\n');
    char *s = NULL;
    int rc = asprintf(
        &s,
        "%.*s\n"
        "# A Slurm job: its own agent data dir (and log); the GPUs Slurm granted: NVML's\n"
        "# when present (devices constrained by Slurm), else declared with that count.\n"
        "DROVER_AGENT_DIR=\"${DROVER_AGENT_DIR:-${HOME:-/tmp}/.drover-agent}/slurm-${SLURM_JOB_ID:-0}\"\n"
        "mkdir -p \"$DROVER_AGENT_DIR\" && exec >>\"$DROVER_AGENT_DIR/agent.log\" 2>&1\n"
        "if [ -z \"${DROVER_GPUS:-}\" ]; then\n"
        "  N=\"${SLURM_GPUS_ON_NODE:-}\"\n"
        "  if [ -z \"$N\" ] && [ -n \"${SLURM_JOB_GPUS:-}\" ]; then\n"
        "    N=$(echo \"$SLURM_JOB_GPUS\" | tr ',' '\\n' | grep -c .)\n"
        "  fi\n"
        "  N=\"${N:-%d}\"\n"
        "  if [ \"$N\" -gt 0 ] 2>/dev/null; then\n"
        "    if drover-agent --print-gpus --gpus auto 2>/dev/null | grep -q '\"gpu_source\": \"nvml\"'; then\n"
        "      DROVER_GPUS=auto\n"
        "    else\n"
        "      DROVER_GPUS=\"${N}x%s:%lld\"\n"
        "    fi\n"
        "  else\n"
        "    DROVER_GPUS=none\n"
        "  fi\n"
        "fi\n"
        "echo \"drover: Slurm job ${SLURM_JOB_ID:-?} on $(hostname): GPUs $DROVER_GPUS\"\n"
        "export DROVER_AGENT_DIR DROVER_GPUS\n"
        "%s",
        nl ? (int)(nl - boot) : 0, boot, gpus, gpus ? type : "GPU", gpus ? mib : 1,
        nl ? nl + 1 : boot);
    free(boot);
    return rc < 0 ? NULL : s;
}

static int slurm_create(void *ctx, const char *head_id, const drv_node_launch_t *l,
                        drv_ec2_instance_t *out, drv_prov_class_t *cls, unsigned *calls,
                        drv_error_t *err)
{
    (void)ctx;
    *cls = DRV_PROV_GIVE_UP;
    if (strcmp(l->capacity, "on_demand") != 0)
        return drv_err_unprocessable(err, "capacity_type", "Slurm has no spot capacity");
    char type[64];
    long long mib;
    int gpus = gpu_count(l->gpus, type, sizeof type, &mib);
    char *script = batch_script(l, gpus, type, mib);
    if (!script)
        return drv_err_invalid(err, "", "cannot build the batch script (a quote or newline in "
                               "the head URL?)");
    char name[96], comment[512], gres[32], part[80], acct[80], tl[48];
    snprintf(name, sizeof name, "--job-name=drover-%s", l->node_id);
    snprintf(comment, sizeof comment,
             "--comment=drover-head=%s drover-owner=%s drover-cluster=%s drover-nodepool=%s "
             "drover-node=%s drover-type=%s",
             head_id, l->owner, l->cluster, l->nodepool, l->node_id, l->instance_type);
    char *argv[16];
    int k = 0;
    argv[k++] = "sbatch";
    argv[k++] = "--parsable";
    argv[k++] = name;
    argv[k++] = comment;
    argv[k++] = "--output=/dev/null";   /* the script logs to the agent's dir */
    /* what the agent needs of droverd's environment, nothing else (no
     * secret of the head's reaches the job) */
    argv[k++] = "--export=PATH,HOME,USER,LANG,LD_LIBRARY_PATH,DROVER_AGENT_DIR,"
                "DROVER_ADVERTISE_ADDR,DROVER_GPUS,DROVER_NVML_LIBRARY";
    if (gpus > 0) {
        snprintf(gres, sizeof gres, "--gres=gpu:%d", gpus);
        argv[k++] = gres;
    }
    if (l->cloud.partition[0]) {
        snprintf(part, sizeof part, "--partition=%s", l->cloud.partition);
        argv[k++] = part;
    }
    if (l->cloud.account[0]) {
        snprintf(acct, sizeof acct, "--account=%s", l->cloud.account);
        argv[k++] = acct;
    }
    if (l->cloud.time_limit[0]) {
        snprintf(tl, sizeof tl, "--time=%s", l->cloud.time_limit);
        argv[k++] = tl;
    }
    argv[k] = NULL;
    drv_slurm_out_t *o = malloc(sizeof *o);
    int rc = -1;
    if (!o) {
        *cls = DRV_PROV_RETRY;
        drv_err_internal(err, "out of memory");
        goto out;
    }
    if (run(argv, &l->cloud, script, o, cls, calls, err) < 0)
        goto out;
    /* --parsable: "JOBID" or "JOBID;CLUSTER" */
    size_t d = strspn(o->out, "0123456789");
    if (d == 0 || d >= sizeof out->id || (o->out[d] && !strchr(";\r\n", o->out[d]))) {
        *cls = DRV_PROV_RETRY;   /* the job may exist: the listing finds it as an orphan */
        drv_err(err, 503, "slurm", "", "Slurm: sbatch printed no job id ('%.80s')", o->out);
        goto out;
    }
    memset(out, 0, sizeof *out);
    memcpy(out->id, o->out, d);
    snprintf(out->state, sizeof out->state, "pending");
    snprintf(out->type, sizeof out->type, "%s", l->instance_type);
    snprintf(out->zone, sizeof out->zone, "%s",
             l->cloud.partition[0] ? l->cloud.partition : "the default partition");
    rc = 0;
out:
    explicit_bzero(script, strlen(script));
    free(script);
    free(o);
    return rc;
}

static int slurm_terminate(void *ctx, const drv_cloud_settings_t *s, const drv_ec2_instance_t *v,
                           size_t n, unsigned *calls, drv_error_t *err)
{
    (void)ctx;
    char **argv = calloc(n + 2, sizeof *argv);
    drv_slurm_out_t *o = malloc(sizeof *o);
    int rc = -1;
    if (!argv || !o) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    argv[0] = "scancel";
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)v[i].id;
    drv_prov_class_t cls;
    rc = run(argv, s, NULL, o, &cls, calls, err);
    /* a job Slurm no longer knows (ended, purged) is gone already */
    if (rc < 0 && o->status > 0 && strcasestr(o->err, "Invalid job id"))
        rc = 0;
out:
    free(argv);
    free(o);
    return rc;
}

/* Slurm's job state in EC2's words (cloudw.h). */
static const char *state_of(const char *st)
{
    static const char *const map[][2] = {
        {"PENDING", "pending"},        {"CONFIGURING", "pending"},
        {"REQUEUED", "pending"},       {"REQUEUE_HOLD", "pending"},
        {"REQUEUE_FED", "pending"},    {"RESV_DEL_HOLD", "pending"},
        {"RESIZING", "running"},       {"RUNNING", "running"},
        {"SUSPENDED", "stopped"},      {"STOPPED", "stopped"},
        {"COMPLETING", "shutting-down"}, {"SIGNALING", "shutting-down"},
        {"STAGE_OUT", "shutting-down"},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (strcmp(st, map[i][0]) == 0)
            return map[i][1];
    return "terminated";   /* COMPLETED, CANCELLED, FAILED, TIMEOUT, PREEMPTED, NODE_FAIL, ... */
}

/* The value of "drover-KEY=" in a job's comment into dst ("" when absent). */
static void tag(const char *comment, const char *key, char *dst, size_t len)
{
    char k[48];
    snprintf(k, sizeof k, "drover-%s=", key);
    dst[0] = '\0';
    for (const char *p = comment; (p = strstr(p, k)); p++)
        if (p == comment || p[-1] == ' ') {
            p += strlen(k);
            size_t n = strcspn(p, " ");
            snprintf(dst, len, "%.*s", (int)(n < len ? n : len - 1), p);
            return;
        }
}

int drv_slurm_parse_squeue(char *text, const char *head_id, drv_ec2_instance_t **out,
                           size_t *n, drv_error_t *err)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *f[4] = {line, NULL, NULL, NULL};
        for (int i = 1; i < 4 && f[i - 1]; i++) {
            char *bar = strchr(f[i - 1], '|');
            if (bar)
                *bar = '\0';
            f[i] = bar ? bar + 1 : NULL;
        }
        if (!f[3])
            continue;
        drv_ec2_instance_t x;
        memset(&x, 0, sizeof x);
        tag(f[3], "head", x.head, sizeof x.head);
        size_t d = strspn(f[0], "0123456789");
        if (strcmp(x.head, head_id) != 0 || d == 0 || f[0][d] || d >= sizeof x.id)
            continue;   /* not ours */
        snprintf(x.id, sizeof x.id, "%s", f[0]);
        snprintf(x.state, sizeof x.state, "%s", state_of(f[1]));
        snprintf(x.zone, sizeof x.zone, "%s", f[2]);
        tag(f[3], "owner", x.owner, sizeof x.owner);
        tag(f[3], "cluster", x.cluster, sizeof x.cluster);
        tag(f[3], "nodepool", x.nodepool, sizeof x.nodepool);
        tag(f[3], "node", x.node, sizeof x.node);
        tag(f[3], "type", x.type, sizeof x.type);
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            drv_ec2_instance_t *nv = cap <= MAX_JOBS ? realloc(*out, cap * sizeof **out) : NULL;
            if (!nv) {
                free(*out);
                *out = NULL;
                *n = 0;
                return drv_err_internal(err, "out of memory listing Slurm jobs");
            }
            *out = nv;
        }
        (*out)[(*n)++] = x;
    }
    return 0;
}

static int slurm_list(void *ctx, const drv_cloud_settings_t *s, const char *head_id,
                      drv_ec2_instance_t **out, size_t *n, unsigned *calls, drv_error_t *err)
{
    (void)ctx;
    *out = NULL;
    *n = 0;
    /* the comment last: it is free text (a '|' in it stays in it) */
    char *argv[] = {"squeue", "--me", "--noheader", "--format=%i|%T|%P|%k", NULL};
    drv_slurm_out_t *o = malloc(sizeof *o);
    if (!o)
        return drv_err_internal(err, "out of memory");
    drv_prov_class_t cls;
    int rc = run(argv, s, NULL, o, &cls, calls, err);
    if (rc == 0 && o->out_len == sizeof o->out - 1)
        rc = drv_err(err, 503, "slurm", "", "Slurm: squeue printed more than %zu bytes",
                     sizeof o->out - 1);
    if (rc == 0)
        rc = drv_slurm_parse_squeue(o->out, head_id, out, n, err);
    free(o);
    return rc;
}

struct drv_cloudw *drv_slurm_create_worker(const char *data_dir, drv_error_t *err)
{
    drv_cloud_backend_t be = {
        .name = "slurm", .same_account = same_account, .create = slurm_create,
        .terminate = slurm_terminate, .list = slurm_list,
    };
    return drv_cloudw_create(data_dir, &be, err);
}

void drv_slurm_destroy(struct drv_cloudw *w)
{
    drv_cloudw_destroy(w);
}

unsigned long long drv_slurm_calls(struct drv_cloudw *w)
{
    return drv_cloudw_calls(w);
}

/* --- provider ops (controller thread, no state lock) ------------------------ */

DRV_CLOUDW_PROVIDER_OPS(drv_slurm_ops, "slurm", slurm);
