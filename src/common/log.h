/* log.h — one-line log records on stderr: "2026-11-29T17:40:00.123Z droverd info: message".
 * Thread-safe (one fprintf per record). */
#ifndef DRV_LOG_H
#define DRV_LOG_H

enum { DRV_LOG_DEBUG, DRV_LOG_INFO, DRV_LOG_WARN, DRV_LOG_ERROR };

void drv_log_init(const char *program, int min_level);
/* DRV_LOG_* of "debug", "info", "warn" or "error"; -1 for anything else. */
int drv_log_level_of(const char *name);
void drv_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define drv_debug(...) drv_log(DRV_LOG_DEBUG, __VA_ARGS__)
#define drv_info(...) drv_log(DRV_LOG_INFO, __VA_ARGS__)
#define drv_warn(...) drv_log(DRV_LOG_WARN, __VA_ARGS__)
#define drv_error(...) drv_log(DRV_LOG_ERROR, __VA_ARGS__)

#endif
