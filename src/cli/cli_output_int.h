/* cli_output_int.h — the column tables' types, shared by cli_output.c (which
 * lays tables out) and cli_columns.c (the per-kind columns and their cell
 * formatters). Not for other code: use cli.h. */
#ifndef DRV_CLI_OUTPUT_INT_H
#define DRV_CLI_OUTPUT_INT_H

#include <jansson.h>
#include <stddef.h>

typedef void (*cell_fn)(const json_t *item, const json_t *v, char *out, size_t n);

enum {
    COL_WIDE = 1,      /* only with -o wide */
    COL_NARROW = 2,    /* only without -o wide */
    COL_OWNER = 4,     /* with -o wide or --all-users */
};

typedef struct column {
    const char *header;
    const char *path;  /* dotted path into the item; NULL: the item itself */
    cell_fn fmt;       /* NULL: plain rendering of the value */
    unsigned flags;
} column_t;

/* cli_output.c: RFC 3339 -> epoch seconds; -1 when unparsable. */
long long drv_cli__parse_time(const char *s);
/* cli_columns.c: the columns of kind's table (a default one for others). */
const column_t *drv_cli__columns_of(const char *kind);

#endif
