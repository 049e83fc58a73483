/* imports.h — droverd's artifact importer: the threads that read and hash
 * the sources of artifacts in state `importing` (POST /v1/artifacts of an
 * s3:// or https:// source without a manifest, api/h_artifacts.c) and turn
 * each into `ready` (its manifest stored) or `failed` (the reason stored).
 *
 * Level-triggered: every pass looks for importing artifacts no thread
 * works on, so an import cut off by a head restart or a leader change is
 * read again from its start by the head that leads next (only a leader
 * runs this). Progress (files and bytes hashed) is the artifact's soft
 * status. An artifact deleted (or imported again) while it is read stops
 * its reader within one tick and is left as it is. */
#ifndef DRV_IMPORTS_H
#define DRV_IMPORTS_H

#include "common/error.h"
#include "state/head.h"

typedef struct drv_imports drv_imports_t;

/* threads: imports read at once (1..8). */
drv_imports_t *drv_imports_create(drv_head_t *head, int threads, drv_error_t *err);
/* Stops the readers (an import in progress stays `importing`: the next
 * leader reads it again) and joins them. */
void drv_imports_destroy(drv_imports_t *im);

#endif
