/* error.h — the error record every drover function fills on failure.
 *
 * Convention (flux-core RFC 7 style): functions return 0 / -1 (or NULL) and,
 * on failure, fill a caller-provided drv_error_t with a readable message.
 * `status` is the HTTP status the error maps to (400, 401, 403, 404, 409,
 * 413, 422, 429, 500, 503), `code` a stable machine-readable word and
 * `field` the JSON path of the offending input field ("" when none).
 * A NULL drv_error_t pointer is allowed everywhere: the error is dropped.
 */
#ifndef DRV_ERROR_H
#define DRV_ERROR_H

#include <stdarg.h>

typedef struct drv_error {
    int status;          /* HTTP status, 0 when unset */
    char code[32];       /* e.g. "invalid_argument", "not_found" */
    char field[128];     /* e.g. "autoscale.max_replicas" */
    char message[512];   /* one readable sentence */
} drv_error_t;

/* Fill err (if not NULL). Always returns -1 so callers can `return drv_err(...)`. */
int drv_err(drv_error_t *err, int status, const char *code, const char *field,
            const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Common shorthands. */
#define drv_err_invalid(e, field, ...) drv_err((e), 400, "invalid_argument", (field), __VA_ARGS__)
#define drv_err_unprocessable(e, field, ...) drv_err((e), 422, "unprocessable", (field), __VA_ARGS__)
#define drv_err_not_found(e, ...) drv_err((e), 404, "not_found", "", __VA_ARGS__)
#define drv_err_conflict(e, ...) drv_err((e), 409, "conflict", "", __VA_ARGS__)
#define drv_err_internal(e, ...) drv_err((e), 500, "internal", "", __VA_ARGS__)

/* Prefix the message with "prefix: " (for adding context while propagating). */
void drv_err_prefix(drv_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void drv_err_clear(drv_error_t *err);

#endif
