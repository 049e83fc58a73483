/* openai.h — the OpenAI wire shapes every inference address of drover
 * answers in (droverd's API address, its --gateway-listen listener and
 * drover-gateway): the error document of /openai/ paths and a model
 * object of GET /openai/v1/models. Pure; no head state.
 */
#ifndef DRV_OPENAI_H
#define DRV_OPENAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/* Does path belong to the OpenAI-compatible routes ("/openai/...")? */
bool drv_openai_path(const char *path);

/* OpenAI's error "type" for an HTTP status: invalid_request_error,
 * authentication_error (401), permission_error (403), rate_limit_error
 * (429), server_error (5xx). */
const char *drv_openai_error_type(int status);

/* {"error":{"message","type","param","code"}}: message as err's, type by
 * its status, param its field (null when none), code drover's error code
 * ("not_found", "invalid_argument", ...). NULL only on OOM. */
json_t *drv_openai_error(const drv_error_t *err);

/* {"id","object":"model","created","owned_by"}: a deployment as a model. */
json_t *drv_openai_model(const char *id, const char *owner, int64_t created);

#endif
