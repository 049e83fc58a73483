/* pin.h — CA pins as kubeadm writes them: "sha256:HEX", the SHA-256 of a
 * certificate's DER SubjectPublicKeyInfo. Computed from a PEM certificate
 * with a small DER walk and common/sha256.c, so that the agent and the CLI
 * check a pin without linking libcrypto. */
#ifndef DRV_COMMON_PIN_H
#define DRV_COMMON_PIN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The pin of the first certificate in pem (NUL-terminated), as
 * "sha256:" + 64 lowercase hex digits into out (at least 72 bytes). */
int drv_pin_of_pem(const char *pem, char *out, size_t n, drv_error_t *err);

/* Checks that s is "sha256:" + 64 hex digits; copies it, lowercased. */
int drv_pin_parse(const char *s, char *out, size_t n, drv_error_t *err);

/* A PEM file (certificate, key; at most 1 MiB), NUL-terminated, malloc'd;
 * NULL with err naming the file. */
char *drv_pem_read_file(const char *path, drv_error_t *err);

/* Whether url's host is a loopback address or "localhost" (where plain
 * http:// is allowed without --insecure). */
bool drv_url_is_loopback(const char *url);

#endif
