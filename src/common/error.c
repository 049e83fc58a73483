/* error.c — filling drv_error_t records (see error.h). */
#include "common/error.h"

#include <stdio.h>
#include <string.h>

int drv_err(drv_error_t *err, int status, const char *code, const char *field,
            const char *fmt, ...)
{
    if (!err)
        return -1;
    err->status = status;
    snprintf(err->code, sizeof err->code, "%s", code ? code : "error");
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

void drv_err_prefix(drv_error_t *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[256], old[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(old, sizeof old, "%s", err->message);
    snprintf(err->message, sizeof err->message, "%s: %s", prefix, old);
}

void drv_err_clear(drv_error_t *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}
