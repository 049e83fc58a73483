/* buildinfo.h — what this build is: the version (CMake's project version)
 * and the git commit it was built from ("unknown" outside a git checkout).
 * Defined in a source generated at build time (scripts/buildinfo.cmake). */
#ifndef DRV_BUILDINFO_H
#define DRV_BUILDINFO_H

extern const char drv_build_version[];   /* "0.1.0" */
extern const char drv_build_commit[];    /* 12 hex digits, or "unknown" */

#endif
