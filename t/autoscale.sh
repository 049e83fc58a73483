#!/usr/bin/env bash
# autoscale.sh — the node autoscaler with the local provider: a nodepool with
# min_nodes 0 starts empty; a deployment whose replicas need two nodes makes
# two nodes come (never more than the pending replicas need, never past
# max_nodes) and its replicas run; deleting the deployment makes the empty
# nodes go after node_scale_down_delay_seconds; min_nodes is kept. Real
# droverd + drover-agent + drover-demo-model processes on loopback.
. "$(dirname "$0")/lib/common.bash"
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 5000}'
workers_init
W=${T_WAIT:-90}

n_nodes() { nodes_json | jq length; }
n_ready_nodes() { nodes_json | jq '[.[] | select(.status.state == "ready")] | length'; }
nodes_are() { [ "$(n_nodes)" == "$1" ]; }
ready_nodes_are() { [ "$(n_ready_nodes)" == "$1" ] && [ "$(n_nodes)" == "$1" ]; }

droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create a local cluster" 201
# one local-l4 (1 x 24 GiB) holds one 20 GiB replica: 2 replicas need 2 nodes
api POST /v1/clusters/c1/nodepools -d '{"id":"np","instance_types":["local-l4"],"min_nodes":0,"max_nodes":3,"node_scale_down_delay_seconds":2}'
status "create a nodepool with min_nodes 0" 201
sleep 1
check "min_nodes 0: no node while nothing needs one" nodes_are 0

api POST /v1/models -d '{"id":"big","runtime":{"command":["drover-demo-model","--weights-mib","1"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":20000,"compute_percent":50},"cpu_millis":500,"memory_mib":512}}'
status "create a model needing most of an L4" 201
api POST /v1/deployments -d '{"id":"dep","model":"big","nodepools":[{"cluster":"c1","nodepool":"np"}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
status "create a deployment of 2 replicas" 201

wait_check "$W" "two nodes come up (ready)" ready_nodes_are 2
wait_check "$W" "both replicas run (ready)" replicas_ready dep 2
check "no over-provisioning: exactly 2 nodes" nodes_are 2
REPS=$(replicas_json "deployment=dep")
jqc "the replicas are on different nodes" '[.[].node] | unique | length == 2' "$REPS"
for ep in $(jq -r '.[].status.endpoint' <<<"$REPS"); do
    check "replica at $ep answers /predict" predict_ok "$ep"
done
api GET /v1/clusters/c1/nodepools/np
jqc "the nodepool says why it scaled up" '.status.last_scale_event.kind == "scale_up" and (.status.last_scale_event.reason | test("pending"))'

# more replicas than max_nodes can hold: never past max_nodes
api PATCH /v1/deployments/dep -d '{"autoscale":{"min_replicas":5,"max_replicas":5}}'
status "ask for 5 replicas (3 nodes at most)" 200
wait_check "$W" "three nodes (max_nodes) come up" ready_nodes_are 3
sleep 2
check "never past max_nodes: still 3 nodes" nodes_are 3
two_pending() { replicas_json "deployment=dep" | jq -e '[.[] | select(.node == null)] | length == 2' >/dev/null; }
wait_check "$W" "two replicas stay pending (no room, max_nodes reached)" two_pending
api GET /v1/deployments/dep/replicas
jqc "a pending replica says why" '[.items[] | select(.node == null)][0].status.reason | test("no ready node")'
sleep 2   # several controller passes (every 250 ms) while the replicas wait
api GET "/v1/events?kind=nodepool&object=c1/np"
jqc "the nodepool's events say it is at max_nodes, once while it lasts" \
    '[.items[] | select(.type == "at_max_nodes" and (.reason | test("2 replica.*max_nodes \\(3\\)")))] | length == 1'

# the deployment goes: its nodes go after their delay, down to min_nodes
api DELETE /v1/deployments/dep
status "delete the deployment" 200
wait_check "$W" "the empty nodes go after node_scale_down_delay_seconds" nodes_are 0
api PATCH /v1/clusters/c1/nodepools/np -d '{"min_nodes":1}'
status "raise min_nodes to 1" 200
wait_check "$W" "min_nodes 1 brings one node" ready_nodes_are 1
sleep 3
check "an empty node is kept at min_nodes" nodes_are 1

droverd_finish autoscale
t_done
