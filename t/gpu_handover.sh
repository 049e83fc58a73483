#!/usr/bin/env bash
# gpu_handover.sh — a replica placed on a GPU that a deleted replica still
# holds waits for it: the head frees the GPU when it deletes a replica, but
# the replica's server holds the GPU's memory until it has drained and
# exited. Here the old replica's process lives 8 s after its SIGTERM (a shell
# that ignores TERM around drover-demo-model); the new deployment's replica,
# placed on the node's only GPU, is `waiting` with the GPU and the old
# replica in its reason, then starts and becomes ready once the old one has
# exited. Real droverd + drover-agent + drover-demo-model on loopback.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}

droverd_start "$TMP/d" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np","instance_types":["local-l4"],"min_nodes":1,"max_nodes":1}'
status "create nodepool (1 local-l4 node: one GPU)" 201
api POST /v1/models -d '{"id":"slow","runtime":{"command":["sh","-c","trap \"\" TERM; drover-demo-model --weights-mib 1; sleep 8"]},"resources":{"gpu":{"count":1},"cpu_millis":100,"memory_mib":64}}'
status "create model slow (its process lives 8 s after a SIGTERM)" 201
api POST /v1/deployments -d '{"id":"a","model":"slow","nodepools":[{"cluster":"c1","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment a (1 replica)" 201
wait_check "$W" "a's replica is ready" deployment_ready a 1
OLD=$(replicas_json deployment=a | jq -r '.[0].id')
GPU=$(replicas_json deployment=a | jq -r '.[0].gpus[0].uuid')
OLDPID=$(replicas_json deployment=a | jq -r '.[0].status.pid')
check "a's replica holds a GPU" test -n "$GPU" -a "$GPU" != null

api DELETE /v1/deployments/a
status "delete deployment a (its replica goes)" 200
api POST /v1/deployments -d '{"id":"b","model":"slow","nodepools":[{"cluster":"c1","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment b on the same node" 201
b_waits()
{
    replicas_json deployment=b | jq -e --arg g "$GPU" --arg o "$OLD" \
        '.[0] | .gpus[0].uuid == $g and .status.state == "waiting"
         and .status.reason == "waiting for GPU \($g): replica \($o) is stopping"' >/dev/null
}
wait_check "$W" "b's replica, on the same GPU, waits for a's to exit (state and reason)" b_waits
wait_check "$W" "b's replica is ready once a's has exited" deployment_ready b 1
check "a's process is gone (b started after it exited)" pids_gone "$OLDPID"

droverd_finish gpu_handover
t_done
