/* procmetrics.c — see procmetrics.h. */
#include "common/procmetrics.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/buildinfo.h"

typedef struct out {
    char *p;
    size_t n, len;
    bool full;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...)
{
    if (o->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->p + o->len, o->n - o->len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= o->n - o->len) {
        o->full = true;
        return;
    }
    o->len += (size_t)w;
}

static void series(out_t *o, const char *name, const char *type, const char *help,
                   const char *value)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, type, name, value);
}

/* Fields 14 (utime), 15 (stime), 22 (starttime), 23 (vsize), 24 (rss) of
 * /proc/self/stat; 0/-1. The command name (field 2) may hold spaces and
 * parentheses: fields are counted after its last ')'. */
static int self_stat(unsigned long long f[25])
{
    char buf[2048];
    FILE *fp = fopen("/proc/self/stat", "r");
    if (!fp)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    p++;
    /* field 3 (state) is a letter; count from there */
    for (int k = 3; k <= 24; k++) {
        while (*p == ' ')
            p++;
        if (!*p)
            return -1;
        char *end;
        f[k] = strtoull(p, &end, 10);
        if (k == 3)
            end = strchr(p, ' ') ? strchr(p, ' ') : p + strlen(p);
        p = end;
    }
    return 0;
}

/* The system's boot time (btime of /proc/stat), seconds since the epoch; -1. */
static long long boot_time(void)
{
    char line[256];
    long long bt = -1;
    FILE *fp = fopen("/proc/stat", "r");
    if (!fp)
        return -1;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "btime %lld", &bt) == 1)
            break;
    fclose(fp);
    return bt;
}

static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;   /* not the directory's own descriptor */
}

int drv_procmetrics_text(char *buf, size_t n)
{
    out_t o = {.p = buf, .n = n};
    char v[64];
    unsigned long long f[25] = {0};
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    if (n == 0)
        return -1;
    buf[0] = '\0';
    if (self_stat(f) == 0 && tick > 0 && page > 0) {
        snprintf(v, sizeof v, "%.2f", (double)(f[14] + f[15]) / (double)tick);
        series(&o, "process_cpu_seconds_total", "counter",
               "Total user and system CPU time spent in seconds.", v);
        snprintf(v, sizeof v, "%llu", f[24] * (unsigned long long)page);
        series(&o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
               v);
        snprintf(v, sizeof v, "%llu", f[23]);
        series(&o, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", v);
        long long bt = boot_time();
        if (bt >= 0) {
            snprintf(v, sizeof v, "%.2f", (double)bt + (double)f[22] / (double)tick);
            series(&o, "process_start_time_seconds", "gauge",
                   "Start time of the process since unix epoch in seconds.", v);
        }
    }
    long fds = open_fds();
    if (fds >= 0) {
        snprintf(v, sizeof v, "%ld", fds);
        series(&o, "process_open_fds", "gauge", "Number of open file descriptors.", v);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)rl.rlim_cur);
        series(&o, "process_max_fds", "gauge", "Maximum number of open file descriptors.", v);
    }
    put(&o, "# HELP drover_build_info The version and git commit this droverd was built "
            "from.\n# TYPE drover_build_info gauge\n"
            "drover_build_info{version=\"%s\",commit=\"%s\"} 1\n",
        drv_build_version, drv_build_commit);
    if (o.full) {
        buf[0] = '\0';
        return -1;
    }
    return (int)o.len;
}
