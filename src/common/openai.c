/* openai.c — see openai.h: OpenAI's error and model shapes. Pure. */
#include "common/openai.h"

#include <string.h>

bool drv_openai_path(const char *path)
{
    return path && strncmp(path, "/openai/", 8) == 0;
}

const char *drv_openai_error_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 || status <= 0 ? "server_error" : "invalid_request_error";
    }
}

json_t *drv_openai_error(const drv_error_t *err)
{
    int status = err->status ? err->status : 500;
    return json_pack("{s:{s:s, s:s, s:o, s:s}}", "error", "message",
                     err->message[0] ? err->message : "internal error", "type",
                     drv_openai_error_type(status), "param",
                     err->field[0] ? json_string(err->field) : json_null(), "code",
                     err->code[0] ? err->code : "internal");
}

json_t *drv_openai_model(const char *id, const char *owner, int64_t created)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "id", id, "object", "model", "created",
                     (json_int_t)created, "owned_by", owner);
}
