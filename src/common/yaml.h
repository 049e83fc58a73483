/* yaml.h — YAML <-> JSON (jansson) conversion on top of libyaml.
 *
 * Loading turns a (multi-document) YAML stream into a JSON array with one
 * element per document. Scalars are typed like the YAML 1.2 core schema:
 * plain `null`, `~` and empty -> null; `true`/`false` (any of the three
 * case spellings) -> booleans; decimal, 0x and 0o integers -> integers;
 * decimal floats, `.inf`, `.nan` -> reals. Quoted scalars (and `!!str`)
 * always stay strings. Mapping keys must be scalars and are used as text;
 * duplicate keys, anchors, aliases and unknown tags are rejected.
 *
 * Errors read "NAME:LINE:COL: problem" with 1-based line and column, so
 * editors can jump to them. Pure functions: no global state, no threads.
 * Nesting deeper than DRV_YAML_MAX_DEPTH is refused (the parser is fed
 * untrusted input and recurses).
 */
#ifndef DRV_YAML_H
#define DRV_YAML_H

#include <stddef.h>
#include <jansson.h>

#include "common/error.h"

#define DRV_YAML_MAX_DEPTH 64
#define DRV_YAML_MAX_FILE (16 * 1024 * 1024)   /* drv_yaml_load_file refuses more */

/* Parse text[0..len) (need not be NUL-terminated). `name` is used in error
 * messages (a file name, or "<stdin>"). Returns a new JSON array of the
 * documents (an empty stream gives an empty array; an empty document is
 * null), or NULL with err filled (status 400, code "invalid_argument"). */
json_t *drv_yaml_load(const char *text, size_t len, const char *name, drv_error_t *err);

/* Read and parse a file; path "-" reads standard input (named "<stdin>"). */
json_t *drv_yaml_load_file(const char *path, drv_error_t *err);

/* The scalar typing rule used by the loader, for one plain scalar. */
json_t *drv_yaml_plain_scalar(const char *text, size_t len);

/* Emit `value` as one YAML document (block style, no "---" marker).
 * Strings that would read back as another type are quoted (also those a
 * YAML 1.1 reader would mistype: yes/no/on/off, timestamps), so
 * drv_yaml_load(drv_yaml_dump(v)) gives v back. Returns a malloc'd
 * NUL-terminated string or NULL with err filled. */
char *drv_yaml_dump(const json_t *value, drv_error_t *err);

#endif
