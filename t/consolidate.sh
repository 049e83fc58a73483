#!/usr/bin/env bash
# consolidate.sh — node consolidation end to end with the local provider: a
# nodepool with consolidation on and min_nodes 0 holds two nodes (one full
# of deployment a's two replicas, one with deployment b's); nothing moves
# while no node can be emptied; once a is scaled to one replica, both
# nodes are half used: with consolidation off they stay, and with it on
# while a replica waits for room in the nodepool; once none waits, one
# node's replica is started again on the other, the old one stops once the
# new one is ready, and the empty node goes — two nodes become one, and
# neither deployment ever has fewer ready replicas than before. Each step
# is an event of the nodepool and the node. Real droverd + drover-agent +
# drover-demo-model processes on loopback.
. "$(dirname "$0")/lib/common.bash"
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 5000}'
workers_init
W=${T_WAIT:-90}

n_nodes() { nodes_json | jq length; }
ready_nodes_are() {
    nodes_json | jq -e --argjson n "$1" 'length == $n and all(.[]; .status.state == "ready")' \
        >/dev/null
}
n_ready() { replicas_json "deployment=$1" | jq '[.[] | select(.status.state == "ready")] | length'; }

# a consolidation look every second (5 s by default): each wait below for
# "nothing moved" covers two or more looks
DROVER_TEST_CONSOLIDATION_PICK_MS=1000 droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" \
    --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create a local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np","instance_types":["local-l4"],"min_nodes":0,"max_nodes":2,"node_scale_down_delay_seconds":600,"consolidation":true}'
status "create a nodepool with consolidation on" 201
jqc "consolidation is in the spec" '.consolidation == true'
api POST /v1/clusters/c1/nodepools -d '{"id":"bad","instance_types":["local-l4"],"consolidation":"yes"}'
status "a non-boolean consolidation is refused" 400

# one local-l4 (1 x 24 GiB) holds two 10 GB shares
api POST /v1/models -d '{"id":"half","runtime":{"command":["drover-demo-model","--weights-mib","1"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":10000,"compute_percent":40},"cpu_millis":500,"memory_mib":512}}'
status "create a model of 10 GB shares" 201
api POST /v1/deployments -d '{"id":"a","model":"half","nodepools":[{"cluster":"c1","nodepool":"np"}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
status "deployment a: 2 replicas" 201
wait_check "$W" "a's two replicas run on one node" replicas_ready a 2
api POST /v1/deployments -d '{"id":"b","model":"half","nodepools":[{"cluster":"c1","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "deployment b: 1 replica" 201
wait_check "$W" "b's replica runs" replicas_ready b 1
wait_check "$W" "on a second node" ready_nodes_are 2
sleep 2.5   # longer than two consolidation looks (every 1 s here)
eq "nothing moves while no node can be emptied" "$(n_nodes)" 2
eq "a's replicas stayed" "$(n_ready a)" 2

api PATCH /v1/clusters/c1/nodepools/np -d '{"consolidation":false}'
status "turn consolidation off" 200
api PATCH /v1/deployments/a -d '{"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "scale a down to 1: both nodes half used" 200
wait_check "$W" "a is down to one replica" replicas_ready a 1
sleep 2.5
eq "with consolidation off, both nodes stay" "$(n_nodes)" 2
# a replica that cannot get room in the nodepool (a whole GPU; both GPUs
# hold shares, and max_nodes is reached) stays pending: consolidation waits
# while room is short there
api POST /v1/models -d '{"id":"whole","runtime":{"command":["drover-demo-model","--weights-mib","1"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1},"cpu_millis":500,"memory_mib":512}}'
status "create a model of a whole GPU" 201
api POST /v1/deployments -d '{"id":"huge","model":"whole","nodepools":[{"cluster":"c1","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "deployment huge: no room for its replica" 201
api PATCH /v1/clusters/c1/nodepools/np -d '{"consolidation":true}'
status "turn consolidation on" 200
sleep 2.5
jqc "its replica waits" 'length == 1 and .[0].node == null' "$(replicas_json deployment=huge)"
eq "no consolidation while a replica waits for room in the nodepool" "$(n_nodes)" 2
api DELETE /v1/deployments/huge
status "delete it" 200
VIOL=$TMP/violations
: >"$VIOL"
# one node left, and both deployments kept a ready replica all along
consolidated() {
    local a b
    a=$(n_ready a)
    b=$(n_ready b)
    [ "$a" -ge 1 ] && [ "$b" -ge 1 ] || echo "a=$a b=$b ready" >>"$VIOL"
    [ "$(n_nodes)" == 1 ] && [ "$a" == 1 ] && [ "$b" == 1 ]
}
wait_check "$W" "two nodes become one" consolidated
eq "neither deployment had fewer ready replicas during the move" "$(sort -u "$VIOL")" ""
check "a: one replica, ready" replicas_ready a 1
check "b: one replica, ready" replicas_ready b 1
REPS=$(replicas_json)
jqc "both run on the one node left" '[.[].node] | unique | length == 1' "$REPS"
for ep in $(jq -r '.[].status.endpoint' <<<"$REPS"); do
    check "replica at $ep answers /predict" predict_ok "$ep"
done

api GET "/v1/events?kind=nodepool&object=c1/np"
jqc "event: the move began, saying why" \
    '[.items[] | select(.type == "consolidate" and (.reason | test("under-used.*fit on")))] | length == 1'
jqc "event: the move ended, the node removed" \
    '[.items[] | select(.type == "consolidated" and (.reason | test("ready")))] | length == 1'
jqc "no move was given up" '[.items[] | select(.type == "consolidation_aborted")] | length == 0'
GONE=$(jq -r '[.items[] | select(.type == "consolidate")][0].reason | capture("node (?<n>[^ ]+):").n' <<<"$BODY")
api GET "/v1/events?kind=node&object=$GONE"
jqc "the emptied node has the events too" \
    '[.items[].type] | index("consolidate") != null and index("consolidated") != null and index("deleted") != null'
sleep 2.5
eq "one node stays (no flapping)" "$(n_nodes)" 1

droverd_finish consolidate
t_done
