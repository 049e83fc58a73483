#!/usr/bin/env bash
# overflow.sh — nodepool priority with overflow, and events in describe,
# with the local provider: a deployment lists a high-priority nodepool with
# max_nodes 1 and a low-priority one; of its two replicas (one per node),
# the first nodepool takes one and the other overflows to the second, with
# an "overflow" event on both nodepools saying why. `drover describe`
# shows those events under the nodepool, the cluster, the deployment and
# the node; GET /v1/events filters by object and by cluster. Real droverd +
# drover-agent + drover-demo-model processes on loopback.
. "$(dirname "$0")/lib/common.bash"
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 5000}'
workers_init
W=${T_WAIT:-90}

n_nodes_in() { nodes_json "cluster=c1&nodepool=$1" | jq length; }
ready_in() {
    nodes_json "cluster=c1&nodepool=$1" | jq -e --argjson n "$2" \
        'length == $n and all(.[]; .status.state == "ready")' >/dev/null
}

droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create a local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"first","instance_types":["local-l4"],"min_nodes":0,"max_nodes":1,"node_scale_down_delay_seconds":2}'
status "create the preferred nodepool (max_nodes 1)" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"second","instance_types":["local-l4"],"min_nodes":0,"max_nodes":2,"node_scale_down_delay_seconds":2}'
status "create the overflow nodepool" 201

# one local-l4 (1 x 24 GiB) holds one 20 GiB replica
api POST /v1/models -d '{"id":"big","runtime":{"command":["drover-demo-model","--weights-mib","1"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":20000,"compute_percent":50},"cpu_millis":500,"memory_mib":512}}'
status "create a model needing most of an L4" 201
api POST /v1/deployments -d '{"id":"dep","model":"big","nodepools":[{"cluster":"c1","nodepool":"second","priority":1},{"cluster":"c1","nodepool":"first","priority":10}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
status "create a deployment of 2 replicas over both nodepools" 201

wait_check "$W" "one node comes in the preferred nodepool" ready_in first 1
wait_check "$W" "the other overflows: one node in the second nodepool" ready_in second 1
wait_check "$W" "both replicas run" replicas_ready dep 2
sleep 2
eq "never past max_nodes in the preferred nodepool" "$(n_nodes_in first)" 1
eq "no over-provisioning in the second" "$(n_nodes_in second)" 1

api GET "/v1/events?kind=nodepool&object=c1/second"
status "events of the second nodepool" 200
jqc "it says the replica came from the first, at max_nodes" \
    '[.items[] | select(.type == "overflow" and (.reason | test("from nodepool c1/first.*max_nodes \\(1\\)")))] | length >= 1'
jqc "and that it scaled up" '[.items[] | select(.type == "scale_up")] | length == 1'
api GET "/v1/events?kind=nodepool&object=c1/first"
jqc "the first nodepool says where the replica went" \
    '[.items[] | select(.type == "overflow" and (.reason | test("to nodepool c1/second")))] | length >= 1'
api GET "/v1/events?cluster=c1"
status "events of the cluster" 200
jqc "the cluster's events are its nodepools'" \
    '(.items | length) >= 4 and all(.items[]; .kind == "nodepool" and (.object | startswith("c1/")))'
api GET "/v1/events?cluster=nope"
jqc "another cluster has none" '.items == []'
api GET "/v1/events?colour=red"
status "an unknown filter is refused" 400

cli describe nodepool c1/second
rc "describe nodepool" 0
contains "describe nodepool: an Events section" "$OUT" "Events:"
contains "describe nodepool: the overflow event" "$OUT" "overflow here from nodepool c1/first"
cli describe np second --cluster c1
contains "describe nodepool ID --cluster: the same events" "$OUT" "overflow here from"
cli describe cluster c1
rc "describe cluster" 0
contains "describe cluster: its nodepools' events" "$OUT" "to nodepool c1/second"
cli describe deployment dep
rc "describe deployment" 0
contains "describe deployment: its scale-up" "$OUT" "0 -> 2 replicas"
NODE=$(nodes_json "cluster=c1&nodepool=second" | jq -r '.[0].id')
cli describe node "$NODE"
rc "describe node" 0
contains "describe node: its events" "$OUT" "its agent syncs"
api POST /v1/clusters -d '{"id":"c2","provider":"local","region":"local"}'
cli describe cluster c2
contains "describe of an object without events" "$OUT" "Events:  <none>"
cli describe deployment dep -o json
jqc "describe -o json stays the object alone" '.id == "dep"' "$OUT"
cli events cluster/c1
rc "drover events cluster/ID" 0
contains "drover events cluster/ID lists the nodepools'" "$OUT" "c1/first"

api DELETE /v1/deployments/dep
status "delete the deployment" 200
gone() { [ "$(nodes_json | jq length)" == 0 ]; }
wait_check "$W" "the empty nodes of both nodepools go" gone

droverd_finish overflow
t_done
