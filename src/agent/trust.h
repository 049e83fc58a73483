/* trust.h — what drover-agent trusts before it sends the head anything
 * secret: --ca-file FILE (that CA), --ca-hash sha256:HEX (the CA fetched
 * from GET /v1/tls/ca over an unverified connection and accepted only when
 * the SHA-256 of its SubjectPublicKeyInfo is the pin; kept in DATA_DIR/ca.crt
 * for later starts), or the system's store. Plain http:// to a head that is
 * not on loopback is refused unless --insecure. Artifact origins reached
 * through the head's redirects (an https source, a presigned S3 URL) are
 * trusted apart: --origin-ca-file FILE, or the system's store. */
#ifndef DRV_AGENT_TRUST_H
#define DRV_AGENT_TRUST_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

typedef struct drv_agent_trust {
    const char *ca_file;   /* NULL: none */
    const char *ca_hash;   /* "sha256:HEX"; NULL: none */
    const char *origin_ca_file;   /* NULL: the system's store for https origins */
    bool insecure;
} drv_agent_trust_t;

/* Checks servers against the rules above and installs the CA for every
 * later https request (http_client.h). -1 with err saying why: nothing was
 * sent but an unauthenticated GET /v1/tls/ca. A head that cannot be reached
 * is asked again (1 s, then 3 s apart) until SIGTERM/SIGINT (blocked by the
 * caller): then 1. */
int drv_agent_trust_setup(const drv_agent_trust_t *t, const char (*servers)[512], size_t n,
                          const char *data_dir, drv_error_t *err);

#endif
