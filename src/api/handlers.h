/* handlers.h — every route handler, grouped by the file that defines it.
 * The route table in routes.c refers to these. */
#ifndef DRV_HANDLERS_H
#define DRV_HANDLERS_H

#include "api/api.h"

/* h_catalog.c: providers, regions, instance types, recommendations */
int drv_h_providers_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_provider_get(drv_req_t *req, drv_resp_t *resp);
int drv_h_regions_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_instance_types_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_instance_type_get(drv_req_t *req, drv_resp_t *resp);
int drv_h_recommendations(drv_req_t *req, drv_resp_t *resp);



/* h_objects.c: clusters, nodepools, models, deployments (arg: kind descriptor) */
int drv_h_obj_create(drv_req_t *req, drv_resp_t *resp);
int drv_h_obj_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_obj_get(drv_req_t *req, drv_resp_t *resp);
int drv_h_obj_patch(drv_req_t *req, drv_resp_t *resp);
int drv_h_obj_delete(drv_req_t *req, drv_resp_t *resp);

/* h_artifacts.c: uploads to the embedded store, creating artifacts, blob reads */
/* h_store_uploads.c: push to an S3 store through presigned part URLs */
int drv_h_store_upload(drv_req_t *req, drv_resp_t *resp);
int drv_h_store_upload_complete(drv_req_t *req, drv_resp_t *resp);
int drv_h_upload_create(drv_req_t *req, drv_resp_t *resp);
int drv_h_upload_get(drv_req_t *req, drv_resp_t *resp);
int drv_h_upload_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_upload_chunk(drv_req_t *req, drv_resp_t *resp);
int drv_h_artifact_create(drv_req_t *req, drv_resp_t *resp);
int drv_h_blob_get(drv_req_t *req, drv_resp_t *resp);
/* Answer blob hex of this head's store (ranges; 404 when it is not
 * whole here): the body of the blob routes (also api/h_peer.c). -1 when
 * the answer is an error. */
int drv_h_blob_send(drv_req_t *req, drv_resp_t *resp, const char *hex);
/* h_peer.c: what one head serves another (signed URLs; api/peer.h) */
int drv_h_peer_blob(drv_req_t *req, drv_resp_t *resp);
int drv_h_peer_ckpts(drv_req_t *req, drv_resp_t *resp);
int drv_h_peer_replicate(drv_req_t *req, drv_resp_t *resp);
/* checkpoints (h_checkpoints.c) */
int drv_h_agent_ckpt_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_agent_ckpt_get(drv_req_t *req, drv_resp_t *resp);
int drv_h_agent_ckpt_upload(drv_req_t *req, drv_resp_t *resp);
int drv_h_agent_ckpt_chunk(drv_req_t *req, drv_resp_t *resp);
int drv_h_agent_ckpt_commit(drv_req_t *req, drv_resp_t *resp);
int drv_h_agent_ckpt_delete(drv_req_t *req, drv_resp_t *resp);
int drv_h_deployment_ckpts(drv_req_t *req, drv_resp_t *resp);
int drv_h_ckpt_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_ckpt_delete(drv_req_t *req, drv_resp_t *resp);

/* h_users.c: users, tokens, whoami */
int drv_h_me(drv_req_t *req, drv_resp_t *resp);
int drv_h_users_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_user_create(drv_req_t *req, drv_resp_t *resp);
int drv_h_user_get(drv_req_t *req, drv_resp_t *resp);
int drv_h_user_delete(drv_req_t *req, drv_resp_t *resp);
int drv_h_user_patch(drv_req_t *req, drv_resp_t *resp);
int drv_h_queues_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_tokens_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_token_create(drv_req_t *req, drv_resp_t *resp);
int drv_h_token_get(drv_req_t *req, drv_resp_t *resp);
int drv_h_token_revoke(drv_req_t *req, drv_resp_t *resp);

/* h_misc.c: health, reserved inference paths */
int drv_h_healthz(drv_req_t *req, drv_resp_t *resp);
int drv_h_tls_ca(drv_req_t *req, drv_resp_t *resp);
int drv_h_audit(drv_req_t *req, drv_resp_t *resp);
/* h_status.c: several heads (issue 17) */
int drv_h_status(drv_req_t *req, drv_resp_t *resp);
/* A standby answers every call but its own few with 503 and the leader's
 * URL: true when it answered resp. */
bool drv_api_standby_answer(drv_req_t *req, drv_resp_t *resp);
/* "leader" or "standby". */
const char *drv_api_role(const struct drv_head *h);
void drv_api_ha_metrics(struct drv_head *h, char **buf, size_t *len, size_t *cap);
int drv_h_predict_reserved(drv_req_t *req, drv_resp_t *resp);

/* h_predict.c: inference through the gateway (arg of drv_h_openai: the path
 * after /openai/v1, e.g. "/chat/completions"), metrics */
int drv_h_predict(drv_req_t *req, drv_resp_t *resp);
int drv_h_openai(drv_req_t *req, drv_resp_t *resp);
int drv_h_openai_models(drv_req_t *req, drv_resp_t *resp);
int drv_h_openai_model(drv_req_t *req, drv_resp_t *resp);
int drv_h_metrics(drv_req_t *req, drv_resp_t *resp);
int drv_h_deployment_metrics(drv_req_t *req, drv_resp_t *resp);

/* h_gateway.c: standalone gateways (drover-gateway) */
int drv_h_gateway_routes(drv_req_t *req, drv_resp_t *resp);
int drv_h_gateway_load(drv_req_t *req, drv_resp_t *resp);

/* h_agent.c: join tokens and the agents' API */
int drv_h_jointoken_create(drv_req_t *req, drv_resp_t *resp);
int drv_h_jointokens_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_jointoken_delete(drv_req_t *req, drv_resp_t *resp);
int drv_h_agent_register(drv_req_t *req, drv_resp_t *resp);
int drv_h_agent_sync(drv_req_t *req, drv_resp_t *resp);

/* h_nodes.c: nodes and replicas */
int drv_h_nodes_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_node_get(drv_req_t *req, drv_resp_t *resp);
int drv_h_node_cordon(drv_req_t *req, drv_resp_t *resp);
int drv_h_node_uncordon(drv_req_t *req, drv_resp_t *resp);
int drv_h_node_drain(drv_req_t *req, drv_resp_t *resp);
int drv_h_node_revoke(drv_req_t *req, drv_resp_t *resp);
int drv_h_node_delete(drv_req_t *req, drv_resp_t *resp);
int drv_h_replicas_list(drv_req_t *req, drv_resp_t *resp);
int drv_h_replica_get(drv_req_t *req, drv_resp_t *resp);

/* h_console.c: the web console's files (GET / and /ui/NAME) */
int drv_h_console_index(drv_req_t *req, drv_resp_t *resp);
int drv_h_console_asset(drv_req_t *req, drv_resp_t *resp);

/* h_events.c */
int drv_h_events(drv_req_t *req, drv_resp_t *resp);

/* h_jobs.c */
int drv_h_job_delete(drv_req_t *req, drv_resp_t *resp);

/* h_logs.c */
int drv_h_logs(drv_req_t *req, drv_resp_t *resp);

/* First start: create user admin and write its token to DATA_DIR/admin.token. */
struct drv_head;
int drv_users_bootstrap(struct drv_head *head, drv_error_t *err);

#endif
