/* catalog.h — the read-only instance catalog: providers, regions and
 * instance types with real figures, loaded from data/catalog.json (embedded
 * in the binaries at build time, see scripts/embed.cmake).
 *
 * The catalog is immutable after drv_catalog_create(), so any thread may
 * query it without locking.
 */
#ifndef DRV_CATALOG_H
#define DRV_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/error.h"

typedef struct drv_region {
    const char *id;          /* "us-east-1" */
    const char *name;        /* "US East (N. Virginia)" */
} drv_region_t;

typedef struct drv_provider {
    const char *id;          /* "aws", "gcp", "oracle", "vultr", "local", "self-managed" */
    const char *name;        /* "Amazon Web Services" */
    bool supports_spot;
    const drv_region_t *regions;
    size_t n_regions;
} drv_provider_t;

typedef struct drv_instance_type {
    const char *id;          /* "g5.xlarge"; unique across providers */
    const char *provider;
    const char *const *regions;  /* regions where offered */
    size_t n_regions;
    int vcpus;
    int64_t memory_mib;
    const char *gpu_type;    /* "A10G", "L4", "H100", ... ; "" for CPU-only */
    int gpu_count;
    int64_t gpu_memory_mib;  /* per GPU */
    double price_per_hour;       /* USD, on-demand */
    double spot_price_per_hour;  /* USD; < 0 when unknown */
    /* Where the figures come from (the entry's optional "sources"): each a
     * "URL (seen YYYY-MM-DD)" citation, NULL where unverified (then note
     * says why). has_sources false: the entry carries none. */
    bool has_sources;
    const char *src_shape;       /* vCPU, memory, GPUs, regions */
    const char *src_price;       /* price_per_hour */
    const char *src_spot_price;  /* spot_price_per_hour */
    const char *src_note;        /* "unverified: ..." or NULL */
} drv_instance_type_t;

/* Filters of GET /v1/instance-types. Unset: NULL strings, negative numbers. */
typedef struct drv_it_filter {
    const char *provider;
    const char *region;
    const char *gpu_type;            /* case-insensitive */
    int64_t min_gpu_memory_mib;      /* per GPU; -1 = any */
    int min_gpus;                    /* -1 = any */
    double max_price_per_hour;       /* < 0 = any */
} drv_it_filter_t;

typedef struct drv_catalog drv_catalog_t;

/* Parse a catalog from JSON text; validates every entry. */
drv_catalog_t *drv_catalog_create(const char *json_text, size_t len, drv_error_t *err);
/* The catalog embedded from data/catalog.json. */
drv_catalog_t *drv_catalog_create_default(drv_error_t *err);
void drv_catalog_destroy(drv_catalog_t *cat);

size_t drv_catalog_n_providers(const drv_catalog_t *cat);
const drv_provider_t *drv_catalog_provider_at(const drv_catalog_t *cat, size_t i);
const drv_provider_t *drv_catalog_provider(const drv_catalog_t *cat, const char *id);
const drv_region_t *drv_catalog_region(const drv_catalog_t *cat, const char *provider,
                                       const char *region);
const drv_instance_type_t *drv_catalog_instance_type(const drv_catalog_t *cat, const char *id);
/* True when the type exists, belongs to `provider` and is offered in `region`. */
bool drv_catalog_type_offered(const drv_catalog_t *cat, const char *type_id,
                              const char *provider, const char *region);

/* Matching instance types, sorted by price_per_hour ascending then id.
 * Fills out[0..max) and returns the total number that matched. */
size_t drv_catalog_query(const drv_catalog_t *cat, const drv_it_filter_t *f,
                         const drv_instance_type_t **out, size_t max);

/* JSON renderings used by the API and CLI (new references). */
json_t *drv_provider_to_json(const drv_provider_t *p);
json_t *drv_region_to_json(const drv_region_t *r);
json_t *drv_instance_type_to_json(const drv_instance_type_t *t);

#endif
