/* procmetrics.h — the standard Prometheus process series of this process
 * (process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds,
 * process_start_time_seconds, read from /proc/self and getrlimit) and
 * drover_build_info{version,commit} 1, as exposition text. A series whose
 * source cannot be read is left out. Reads a few small /proc files: call
 * it outside any lock. */
#ifndef DRV_PROCMETRICS_H
#define DRV_PROCMETRICS_H

#include <stddef.h>

/* Write the text into out (n bytes, NUL-terminated); its length, or -1
 * when it does not fit (4096 bytes always do). */
int drv_procmetrics_text(char *out, size_t n);

#endif
