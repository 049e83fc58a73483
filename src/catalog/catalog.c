/* catalog.c — the read-only instance catalog (see catalog.h): parse and
 * validate the catalog JSON (data/catalog.json, embedded at build time),
 * answer lookups and filtered queries, render entries as JSON.
 *
 * Invariants after drv_catalog_create():
 *   - provider ids are unique; region ids are unique within a provider;
 *     instance type ids are unique across the whole catalog;
 *   - every instance type names an existing provider and only regions of
 *     that provider, at least one; numbers are finite and not negative;
 *   - gpu_count == 0 exactly when gpu_type is "" and gpu_memory_mib is 0;
 *   - a spot price appears only for providers that support spot;
 *   - an entry's "sources", when present, cite its shape and price (and its
 *     spot price exactly when it has one) as "URL (seen YYYY-MM-DD)",
 *     optionally prefixed "third-party: "; a null citation needs a note
 *     starting "unverified: ";
 *   - types[] is sorted by price_per_hour ascending, then id, so queries
 *     return in that order without sorting.
 * Strings point into the parsed JSON document, which the catalog keeps.
 * Nothing changes after creation: any thread may read without locking.
 */
#include "catalog/catalog.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern const char drv_catalog_embedded[];
extern const size_t drv_catalog_embedded_len;

#define MAX_ID_LEN 63
#define MAX_GPUS 64
#define MAX_VCPUS 65536
#define MAX_MEMORY_MIB ((int64_t)1 << 40)   /* 1 EiB: far above any machine */
#define MAX_PRICE 100000.0

struct drv_catalog {
    json_t *root;                   /* owns every string below */
    drv_provider_t *providers;
    size_t n_providers;
    drv_region_t *regions;          /* all providers' regions, flat */
    drv_instance_type_t *types;     /* sorted by price, then id */
    size_t n_types;
    const char **type_regions;      /* all types' region ids, flat */
};

/* --- validation helpers --------------------------------------------------- */

static bool id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_ID_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '.' && c != '_')
            return false;
    }
    return true;
}

/* Reject keys of obj not in allowed (NULL-terminated). */
static int check_keys(json_t *obj, const char *const *allowed, const char *path,
                      const char *what, drv_error_t *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool found = false;
        for (size_t i = 0; allowed[i]; i++)
            if (strcmp(key, allowed[i]) == 0)
                found = true;
        if (!found) {
            char field[128];
            snprintf(field, sizeof field, "%s.%s", path, key);
            return drv_err_invalid(err, field, "%s: unknown field '%s'", what, key);
        }
    }
    return 0;
}

static int get_string(json_t *obj, const char *key, bool need_id, const char *path,
                      const char *what, const char **out, drv_error_t *err)
{
    char field[128];
    snprintf(field, sizeof field, "%s.%s", path, key);
    json_t *v = json_object_get(obj, key);
    if (!v)
        return drv_err_invalid(err, field, "%s: '%s' is required", what, key);
    if (!json_is_string(v))
        return drv_err_invalid(err, field, "%s: '%s' must be a string", what, key);
    *out = json_string_value(v);
    if (need_id && !id_ok(*out))
        return drv_err_invalid(err, field,
                               "%s: '%s' must be 1-%d characters of letters, digits, '-', '.', '_'",
                               what, key, MAX_ID_LEN);
    return 0;
}

static int get_int(json_t *obj, const char *key, int64_t min, int64_t max, const char *path,
                   const char *what, int64_t *out, drv_error_t *err)
{
    char field[128];
    snprintf(field, sizeof field, "%s.%s", path, key);
    json_t *v = json_object_get(obj, key);
    if (!v)
        return drv_err_invalid(err, field, "%s: '%s' is required", what, key);
    if (!json_is_integer(v))
        return drv_err_invalid(err, field, "%s: '%s' must be an integer", what, key);
    int64_t x = json_integer_value(v);
    if (x < min || x > max)
        return drv_err_invalid(err, field, "%s: '%s' is %lld, must be in [%lld, %lld]", what,
                               key, (long long)x, (long long)min, (long long)max);
    *out = x;
    return 0;
}

/* A price: a finite number in [0, MAX_PRICE]; null allowed (-> -1) when nullable. */
static int get_price(json_t *obj, const char *key, bool nullable, const char *path,
                     const char *what, double *out, drv_error_t *err)
{
    char field[128];
    snprintf(field, sizeof field, "%s.%s", path, key);
    json_t *v = json_object_get(obj, key);
    if (nullable && (!v || json_is_null(v))) {
        *out = -1.0;
        return 0;
    }
    if (!v)
        return drv_err_invalid(err, field, "%s: '%s' is required", what, key);
    if (!json_is_number(v))
        return drv_err_invalid(err, field, "%s: '%s' must be a number", what, key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0 || x > MAX_PRICE)
        return drv_err_invalid(err, field, "%s: '%s' is %g, must be in [0, %g]", what, key, x,
                               MAX_PRICE);
    *out = x;
    return 0;
}

/* A citation: ["third-party: "]"https://HOST/..." " (seen YYYY-MM-DD)". */
static bool citation_ok(const char *s)
{
    if (strncmp(s, "third-party: ", 13) == 0)
        s += 13;
    if (strncmp(s, "https://", 8) != 0)
        return false;
    const char *url_end = strstr(s, " (seen ");
    if (!url_end || url_end == s + 8)
        return false;
    for (const char *c = s; c < url_end; c++)
        if (isspace((unsigned char)*c) || !isprint((unsigned char)*c))
            return false;
    const char *d = url_end + 7;
    static const char pat[] = "dddd-dd-dd)";
    for (size_t i = 0; i < sizeof pat - 1; i++) {
        if (pat[i] == 'd' ? !isdigit((unsigned char)d[i]) : d[i] != pat[i])
            return false;
    }
    return d[sizeof pat - 1] == '\0';
}

/* One figure's citation: a citation string or null (-> NULL). */
static int get_citation(json_t *src, const char *key, const char *path, const char *what,
                        const char **out, drv_error_t *err)
{
    char field[128];
    snprintf(field, sizeof field, "%s.sources.%s", path, key);
    json_t *v = json_object_get(src, key);
    if (!v)
        return drv_err_invalid(err, field, "%s: sources.%s is required (a citation or null)",
                               what, key);
    if (json_is_null(v)) {
        *out = NULL;
        return 0;
    }
    if (!json_is_string(v) || !citation_ok(json_string_value(v)))
        return drv_err_invalid(err, field, "%s: sources.%s must be null or "
                               "\"https://... (seen YYYY-MM-DD)\" (optionally prefixed "
                               "\"third-party: \")", what, key);
    *out = json_string_value(v);
    return 0;
}

/* The entry's optional "sources" object; call after the prices are parsed. */
static int parse_sources(json_t *t, const char *path, const char *what,
                         drv_instance_type_t *it, drv_error_t *err)
{
    static const char *const keys[] = {"shape", "price", "spot_price", "note", NULL};
    char field[128];
    json_t *src = json_object_get(t, "sources");
    snprintf(field, sizeof field, "%s.sources", path);
    it->has_sources = false;
    it->src_shape = it->src_price = it->src_spot_price = it->src_note = NULL;
    if (!src)
        return 0;
    if (!json_is_object(src))
        return drv_err_invalid(err, field, "%s: 'sources' must be an object", what);
    if (check_keys(src, keys, field, what, err) < 0 ||
        get_citation(src, "shape", path, what, &it->src_shape, err) < 0 ||
        get_citation(src, "price", path, what, &it->src_price, err) < 0)
        return -1;
    bool has_spot = it->spot_price_per_hour >= 0;
    if (has_spot && get_citation(src, "spot_price", path, what, &it->src_spot_price, err) < 0)
        return -1;
    if (!has_spot && json_object_get(src, "spot_price"))
        return drv_err_invalid(err, field, "%s: sources.spot_price given, but "
                               "spot_price_per_hour is null", what);
    json_t *note = json_object_get(src, "note");
    if (note && (!json_is_string(note) || !json_string_value(note)[0]))
        return drv_err_invalid(err, field, "%s: sources.note must be a non-empty string", what);
    it->src_note = note ? json_string_value(note) : NULL;
    bool unverified = !it->src_shape || !it->src_price || (has_spot && !it->src_spot_price);
    if (unverified && (!it->src_note || strncmp(it->src_note, "unverified: ", 12) != 0 ||
                       !it->src_note[12]))
        return drv_err_invalid(err, field, "%s: a null citation needs sources.note "
                               "\"unverified: <why>\"", what);
    it->has_sources = true;
    return 0;
}

static const drv_provider_t *find_provider(const drv_catalog_t *cat, const char *id)
{
    for (size_t i = 0; i < cat->n_providers; i++)
        if (strcmp(cat->providers[i].id, id) == 0)
            return &cat->providers[i];
    return NULL;
}

static const drv_region_t *find_region(const drv_provider_t *p, const char *id)
{
    for (size_t i = 0; i < p->n_regions; i++)
        if (strcmp(p->regions[i].id, id) == 0)
            return &p->regions[i];
    return NULL;
}

/* --- parsing -------------------------------------------------------------- */

static int parse_providers(drv_catalog_t *cat, json_t *arr, drv_error_t *err)
{
    static const char *const pkeys[] = {"id", "name", "supports_spot", "regions", NULL};
    static const char *const rkeys[] = {"id", "name", NULL};
    size_t n = json_array_size(arr), n_regions = 0, i;
    json_t *p;

    if (n == 0)
        return drv_err_invalid(err, "providers", "catalog: 'providers' must not be empty");
    json_array_foreach(arr, i, p) {
        if (!json_is_object(p))
            return drv_err_invalid(err, "providers", "catalog: providers[%zu] must be an object", i);
        json_t *r = json_object_get(p, "regions");
        n_regions += json_is_array(r) ? json_array_size(r) : 0;
    }
    cat->providers = calloc(n, sizeof *cat->providers);
    cat->regions = calloc(n_regions ? n_regions : 1, sizeof *cat->regions);
    if (!cat->providers || !cat->regions)
        return drv_err_internal(err, "catalog: out of memory");

    size_t next_region = 0;
    json_array_foreach(arr, i, p) {
        drv_provider_t *pv = &cat->providers[i];
        char path[64], what[128];
        snprintf(path, sizeof path, "providers[%zu]", i);
        snprintf(what, sizeof what, "provider #%zu", i + 1);
        if (get_string(p, "id", true, path, what, &pv->id, err) < 0)
            return -1;
        snprintf(what, sizeof what, "provider '%s'", pv->id);
        if (check_keys(p, pkeys, path, what, err) < 0 ||
            get_string(p, "name", false, path, what, &pv->name, err) < 0)
            return -1;
        if (find_provider(cat, pv->id))   /* only [0, i) are filled yet */
            return drv_err_invalid(err, "providers", "provider '%s' is listed twice", pv->id);
        cat->n_providers = i + 1;
        json_t *spot = json_object_get(p, "supports_spot");
        if (!json_is_boolean(spot))
            return drv_err_invalid(err, "providers", "%s: 'supports_spot' must be true or false",
                                   what);
        pv->supports_spot = json_is_true(spot);

        json_t *regions = json_object_get(p, "regions"), *r;
        size_t j;
        if (!json_is_array(regions) || json_array_size(regions) == 0)
            return drv_err_invalid(err, "providers", "%s: 'regions' must be a non-empty array",
                                   what);
        pv->regions = &cat->regions[next_region];
        json_array_foreach(regions, j, r) {
            drv_region_t *rg = &cat->regions[next_region];
            char rpath[96], rwhat[192];
            snprintf(rpath, sizeof rpath, "%s.regions[%zu]", path, j);
            snprintf(rwhat, sizeof rwhat, "%s region #%zu", what, j + 1);
            if (!json_is_object(r))
                return drv_err_invalid(err, rpath, "%s must be an object", rwhat);
            if (get_string(r, "id", true, rpath, rwhat, &rg->id, err) < 0)
                return -1;
            snprintf(rwhat, sizeof rwhat, "%s region '%s'", what, rg->id);
            if (check_keys(r, rkeys, rpath, rwhat, err) < 0 ||
                get_string(r, "name", false, rpath, rwhat, &rg->name, err) < 0)
                return -1;
            if (find_region(pv, rg->id))
                return drv_err_invalid(err, rpath, "%s: region '%s' is listed twice", what, rg->id);
            pv->n_regions = j + 1;
            next_region++;
        }
    }
    return 0;
}

static int parse_type(drv_catalog_t *cat, json_t *t, size_t i, const char **region_slots,
                      drv_instance_type_t *it, drv_error_t *err)
{
    static const char *const keys[] = {"id", "provider", "regions", "vcpus", "memory_mib",
                                       "gpu_type", "gpu_count", "gpu_memory_mib",
                                       "price_per_hour", "spot_price_per_hour", "sources",
                                       NULL};
    char path[64], what[128];
    int64_t x;

    snprintf(path, sizeof path, "instance_types[%zu]", i);
    snprintf(what, sizeof what, "instance type #%zu", i + 1);
    if (!json_is_object(t))
        return drv_err_invalid(err, path, "%s must be an object", what);
    if (get_string(t, "id", true, path, what, &it->id, err) < 0)
        return -1;
    snprintf(what, sizeof what, "instance type '%s'", it->id);
    if (check_keys(t, keys, path, what, err) < 0 ||
        get_string(t, "provider", true, path, what, &it->provider, err) < 0)
        return -1;
    const drv_provider_t *pv = find_provider(cat, it->provider);
    if (!pv)
        return drv_err_invalid(err, path, "%s: unknown provider '%s'", what, it->provider);

    json_t *regions = json_object_get(t, "regions"), *r;
    size_t j;
    if (!json_is_array(regions) || json_array_size(regions) == 0)
        return drv_err_invalid(err, path, "%s: 'regions' must be a non-empty array", what);
    it->regions = region_slots;
    json_array_foreach(regions, j, r) {
        if (!json_is_string(r))
            return drv_err_invalid(err, path, "%s: regions[%zu] must be a string", what, j);
        const char *rid = json_string_value(r);
        if (!find_region(pv, rid))
            return drv_err_invalid(err, path, "%s: unknown region '%s' of provider '%s'", what,
                                   rid, pv->id);
        for (size_t k = 0; k < j; k++)
            if (strcmp(region_slots[k], rid) == 0)
                return drv_err_invalid(err, path, "%s: region '%s' is listed twice", what, rid);
        region_slots[j] = rid;
    }
    it->n_regions = json_array_size(regions);

    if (get_int(t, "vcpus", 1, MAX_VCPUS, path, what, &x, err) < 0)
        return -1;
    it->vcpus = (int)x;
    if (get_int(t, "memory_mib", 1, MAX_MEMORY_MIB, path, what, &it->memory_mib, err) < 0 ||
        get_string(t, "gpu_type", false, path, what, &it->gpu_type, err) < 0 ||
        get_int(t, "gpu_count", 0, MAX_GPUS, path, what, &x, err) < 0)
        return -1;
    it->gpu_count = (int)x;
    if (get_int(t, "gpu_memory_mib", 0, MAX_MEMORY_MIB, path, what, &it->gpu_memory_mib, err) < 0)
        return -1;
    if (it->gpu_count == 0 && (it->gpu_type[0] || it->gpu_memory_mib != 0))
        return drv_err_invalid(err, path,
                               "%s: gpu_count is 0, so gpu_type must be \"\" and gpu_memory_mib 0",
                               what);
    if (it->gpu_count > 0 && (!it->gpu_type[0] || it->gpu_memory_mib <= 0))
        return drv_err_invalid(err, path,
                               "%s: gpu_count is %d, so gpu_type and gpu_memory_mib are required",
                               what, it->gpu_count);
    if (get_price(t, "price_per_hour", false, path, what, &it->price_per_hour, err) < 0 ||
        get_price(t, "spot_price_per_hour", true, path, what, &it->spot_price_per_hour, err) < 0)
        return -1;
    if (it->spot_price_per_hour >= 0 && !pv->supports_spot)
        return drv_err_invalid(err, path, "%s: provider '%s' has no spot capacity, so "
                               "spot_price_per_hour must be null", what, pv->id);
    return parse_sources(t, path, what, it, err);
}

static int type_cmp(const void *a, const void *b)
{
    const drv_instance_type_t *x = a, *y = b;
    if (x->price_per_hour < y->price_per_hour)
        return -1;
    if (x->price_per_hour > y->price_per_hour)
        return 1;
    return strcmp(x->id, y->id);
}

static int parse_types(drv_catalog_t *cat, json_t *arr, drv_error_t *err)
{
    size_t n = json_array_size(arr), n_regions = 0, i;
    json_t *t;

    json_array_foreach(arr, i, t) {
        json_t *r = json_object_get(t, "regions");   /* NULL-safe on non-objects */
        n_regions += json_is_array(r) ? json_array_size(r) : 0;
    }
    cat->types = calloc(n ? n : 1, sizeof *cat->types);
    cat->type_regions = calloc(n_regions ? n_regions : 1, sizeof *cat->type_regions);
    if (!cat->types || !cat->type_regions)
        return drv_err_internal(err, "catalog: out of memory");

    size_t next_region = 0;
    json_array_foreach(arr, i, t) {
        drv_instance_type_t *it = &cat->types[i];
        if (parse_type(cat, t, i, &cat->type_regions[next_region], it, err) < 0)
            return -1;
        next_region += it->n_regions;
        for (size_t k = 0; k < i; k++)
            if (strcmp(cat->types[k].id, it->id) == 0)
                return drv_err_invalid(err, "instance_types", "instance type '%s' is listed twice",
                                       it->id);
    }
    cat->n_types = n;
    qsort(cat->types, n, sizeof *cat->types, type_cmp);
    return 0;
}

drv_catalog_t *drv_catalog_create(const char *json_text, size_t len, drv_error_t *err)
{
    static const char *const keys[] = {"version", "as_of", "sources", "conventions",
                                       "providers", "instance_types", NULL};
    json_error_t jerr;
    drv_catalog_t *cat = NULL;

    if (!json_text) {
        drv_err_invalid(err, "", "catalog: no text");
        return NULL;
    }
    cat = calloc(1, sizeof *cat);
    if (!cat) {
        drv_err_internal(err, "catalog: out of memory");
        return NULL;
    }
    cat->root = json_loadb(json_text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!cat->root) {
        drv_err_invalid(err, "", "catalog: line %d column %d: %s", jerr.line, jerr.column,
                        jerr.text);
        goto error;
    }
    if (!json_is_object(cat->root)) {
        drv_err_invalid(err, "", "catalog: the document must be a JSON object");
        goto error;
    }
    if (check_keys(cat->root, keys, "catalog", "catalog", err) < 0)
        goto error;
    json_t *v = json_object_get(cat->root, "version");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        drv_err_invalid(err, "version", "catalog: 'version' must be 1");
        goto error;
    }
    static const char *const texts[] = {"as_of", "sources", "conventions"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        v = json_object_get(cat->root, texts[i]);
        if (v && !json_is_string(v)) {
            drv_err_invalid(err, texts[i], "catalog: '%s' must be a string", texts[i]);
            goto error;
        }
    }
    json_t *providers = json_object_get(cat->root, "providers");
    json_t *types = json_object_get(cat->root, "instance_types");
    if (!json_is_array(providers)) {
        drv_err_invalid(err, "providers", "catalog: 'providers' must be an array");
        goto error;
    }
    if (!json_is_array(types)) {
        drv_err_invalid(err, "instance_types", "catalog: 'instance_types' must be an array");
        goto error;
    }
    if (parse_providers(cat, providers, err) < 0 || parse_types(cat, types, err) < 0)
        goto error;
    return cat;
error:
    drv_catalog_destroy(cat);
    return NULL;
}

drv_catalog_t *drv_catalog_create_default(drv_error_t *err)
{
    drv_catalog_t *cat = drv_catalog_create(drv_catalog_embedded, drv_catalog_embedded_len, err);
    if (!cat)
        drv_err_prefix(err, "embedded data/catalog.json");
    return cat;
}

void drv_catalog_destroy(drv_catalog_t *cat)
{
    if (!cat)
        return;
    free(cat->type_regions);
    free(cat->types);
    free(cat->regions);
    free(cat->providers);
    json_decref(cat->root);
    free(cat);
}

/* --- queries -------------------------------------------------------------- */

size_t drv_catalog_n_providers(const drv_catalog_t *cat)
{
    return cat ? cat->n_providers : 0;
}

const drv_provider_t *drv_catalog_provider_at(const drv_catalog_t *cat, size_t i)
{
    if (!cat || i >= cat->n_providers)
        return NULL;
    return &cat->providers[i];
}

const drv_provider_t *drv_catalog_provider(const drv_catalog_t *cat, const char *id)
{
    if (!cat || !id)
        return NULL;
    return find_provider(cat, id);
}

const drv_region_t *drv_catalog_region(const drv_catalog_t *cat, const char *provider,
                                       const char *region)
{
    const drv_provider_t *p = drv_catalog_provider(cat, provider);
    if (!p || !region)
        return NULL;
    return find_region(p, region);
}

const drv_instance_type_t *drv_catalog_instance_type(const drv_catalog_t *cat, const char *id)
{
    if (!cat || !id)
        return NULL;
    for (size_t i = 0; i < cat->n_types; i++)
        if (strcmp(cat->types[i].id, id) == 0)
            return &cat->types[i];
    return NULL;
}

static bool offered_in(const drv_instance_type_t *t, const char *region)
{
    for (size_t i = 0; i < t->n_regions; i++)
        if (strcmp(t->regions[i], region) == 0)
            return true;
    return false;
}

bool drv_catalog_type_offered(const drv_catalog_t *cat, const char *type_id,
                              const char *provider, const char *region)
{
    const drv_instance_type_t *t = drv_catalog_instance_type(cat, type_id);
    if (!t || !provider || !region)
        return false;
    return strcmp(t->provider, provider) == 0 && offered_in(t, region);
}

static bool matches(const drv_instance_type_t *t, const drv_it_filter_t *f)
{
    if (!f)
        return true;
    if (f->provider && strcmp(t->provider, f->provider) != 0)
        return false;
    if (f->region && !offered_in(t, f->region))
        return false;
    if (f->gpu_type && strcasecmp(t->gpu_type, f->gpu_type) != 0)
        return false;
    if (f->min_gpu_memory_mib >= 0 && t->gpu_memory_mib < f->min_gpu_memory_mib)
        return false;
    if (f->min_gpus >= 0 && t->gpu_count < f->min_gpus)
        return false;
    if (f->max_price_per_hour >= 0 && t->price_per_hour > f->max_price_per_hour)
        return false;
    return true;
}

size_t drv_catalog_query(const drv_catalog_t *cat, const drv_it_filter_t *f,
                         const drv_instance_type_t **out, size_t max)
{
    size_t n = 0;
    if (!cat)
        return 0;
    for (size_t i = 0; i < cat->n_types; i++) {   /* types[] is already in price, id order */
        if (!matches(&cat->types[i], f))
            continue;
        if (out && n < max)
            out[n] = &cat->types[i];
        n++;
    }
    return n;
}

/* --- JSON renderings ------------------------------------------------------ */

json_t *drv_region_to_json(const drv_region_t *r)
{
    if (!r)
        return NULL;
    return json_pack("{s:s, s:s}", "id", r->id, "name", r->name);
}

json_t *drv_provider_to_json(const drv_provider_t *p)
{
    if (!p)
        return NULL;
    json_t *regions = json_array();
    if (!regions)
        return NULL;
    for (size_t i = 0; i < p->n_regions; i++)
        if (json_array_append_new(regions, drv_region_to_json(&p->regions[i])) < 0) {
            json_decref(regions);
            return NULL;
        }
    return json_pack("{s:s, s:s, s:b, s:o}", "id", p->id, "name", p->name, "supports_spot",
                     p->supports_spot, "regions", regions);
}

json_t *drv_instance_type_to_json(const drv_instance_type_t *t)
{
    if (!t)
        return NULL;
    json_t *regions = json_array();
    if (!regions)
        return NULL;
    for (size_t i = 0; i < t->n_regions; i++)
        if (json_array_append_new(regions, json_string(t->regions[i])) < 0) {
            json_decref(regions);
            return NULL;
        }
    json_t *spot = t->spot_price_per_hour >= 0 ? json_real(t->spot_price_per_hour) : json_null();
    json_t *o = json_pack("{s:s, s:s, s:o, s:i, s:I, s:s, s:i, s:I, s:f, s:o}",
                          "id", t->id, "provider", t->provider, "regions", regions,
                          "vcpus", t->vcpus, "memory_mib", (json_int_t)t->memory_mib,
                          "gpu_type", t->gpu_type, "gpu_count", t->gpu_count,
                          "gpu_memory_mib", (json_int_t)t->gpu_memory_mib,
                          "price_per_hour", t->price_per_hour, "spot_price_per_hour", spot);
    if (!o || !t->has_sources)
        return o;
    json_t *src = json_pack("{s:s?, s:s?}", "shape", t->src_shape, "price", t->src_price);
    if (src && t->spot_price_per_hour >= 0)
        json_object_set_new(src, "spot_price", t->src_spot_price ? json_string(t->src_spot_price)
                                                                 : json_null());
    if (src && t->src_note)
        json_object_set_new(src, "note", json_string(t->src_note));
    if (!src || json_object_set_new(o, "sources", src) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
