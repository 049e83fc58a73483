/* console_assets.h — the web console's files (web/), compiled into droverd.
 * The table is generated at build time by scripts/embed_assets.cmake into
 * the build dir (console_assets.c); h_console.c serves it. Read-only data:
 * any thread may read it. */
#ifndef DRV_CONSOLE_ASSETS_H
#define DRV_CONSOLE_ASSETS_H

#include <stddef.h>
#include <stdint.h>

typedef struct drv_console_asset {
    const char *name;          /* file name, e.g. "app.js" (served at /ui/NAME) */
    const char *content_type;
    const unsigned char *data;
    size_t len;
    int64_t etag;              /* first 60 bits of the SHA-256 of the file */
} drv_console_asset_t;

extern const drv_console_asset_t drv_console_assets[];
extern const size_t drv_console_n_assets;

#endif
