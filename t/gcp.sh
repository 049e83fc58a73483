#!/usr/bin/env bash
# gcp.sh — the gcp provider end to end against t/lib/gcp_double.py (a strict
# double of Google's token endpoint and Compute Engine v1 on loopback; no
# emulator exists), never real GCP. A service-account key pair is made here
# with openssl: the double verifies every JWT grant with its public half.
#   - a credential's service-account key is never shown by the API nor
#     logged, and neither is an access token; a bad key is refused;
#   - min_nodes: 2 -> two instances.insert of the right machine type,
#     labels, scheduling and startup-script (drover-agent with the head URL
#     and a join token), each with a requestId, operations waited for (zoneOperations.wait) to DONE;
#   - the test plays each booting VM by running its startup-script locally:
#     real drover-agents join as exactly those nodes and take replicas;
#   - the catalog's price per node; tokens are refreshed before they expire;
#   - a head restart adopts the running instances: no new insert;
#     aggregatedList paging (pageToken) is followed;
#   - an orphan instance (labelled by this head, no node) is deleted;
#   - spot_with_fallback: ZONE_RESOURCE_POOL_EXHAUSTED in every zone -> the
#     next zone, then an on-demand node (SPOT requests with DELETE on
#     termination); rateLimitExceeded and a lost answer -> retried with the
#     same requestId, one instance; QUOTA_EXCEEDED -> the other type;
#     QUOTA_EXCEEDED on GPUS_ALL_REGIONS -> give up;
#   - an instance deleted behind drover's back (a spot preemption): its node
#     is released and replaced;
#   - scale to zero -> the instances are deleted;
#   - a key the token endpoint refuses (invalid_grant) and a project the key
#     may not use (403) -> one clear give_up error each, no retry storm.
# shellcheck disable=SC2086
. "$(dirname "$0")/lib/common.bash"
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 3000, "node_lost_ms": 8000}'
workers_init
W=${T_WAIT:-120}
DOUBLE=$DROVER_SRC/t/lib/gcp_double.py

if ! python3 -c 'import cryptography' 2>/dev/null; then
    fail "python3-cryptography is installed (the GCP double verifies RS256 JWTs with it)"
    t_done
fi
BG=()
bg() { "$@" & BG+=($!); }
stop_bg() { local p; for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done; }
trap 'stop_bg; _workers_cleanup' EXIT
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---- a service-account key pair, and the double --------------------------------
G=$TMP/gcp
mkdir -p "$G"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$G/key.pem" 2>/dev/null
openssl pkey -in "$G/key.pem" -pubout -out "$G/pub.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$G/other.pem" 2>/dev/null
GPORT=$(free_port)
EMAIL=drover-test@drover-test.iam.gserviceaccount.com
sa_key() {   # sa_key PEM: a JSON key as IAM hands it out
    jq -n --rawfile pk "$1" --arg e "$EMAIL" --arg u "http://127.0.0.1:$GPORT/token" \
        '{type: "service_account", project_id: "drover-test", private_key_id: "k1",
          private_key: $pk, client_email: $e, client_id: "1", token_uri: $u}'
}
sa_key "$G/key.pem" >"$G/key.json"
sa_key "$G/other.pem" >"$G/other.json"
jq -n --arg e "$EMAIL" --arg p "$G/pub.pem" \
    '{project: "drover-test", client_email: $e, key_id: "k1", public_key: $p,
      zones: ["us-central1-a", "us-central1-b", "us-central1-c", "europe-west4-a"],
      machine_types: ["g2-standard-4", "g2-standard-8"], token_ttl: 8, op_delay_ms: 400}' >"$G/config.json"
echo '[]' >"$G/faults.json"
: >"$G/calls.log"
: >"$G/tokens.log"
bg python3 "$DOUBLE" serve "$GPORT" "$G"
wait_until 30 "the GCP double listens" port_up "$GPORT" || { fail "the GCP double starts"; t_done; }

gcalls() { jq -s "[.[] | select(.call == \"$1\") ${2:+| select($2)}] | length" "$G/calls.log" 2>/dev/null || echo 0; }
instances() { curl -s "http://127.0.0.1:$GPORT/_test/instances" || echo '[]'; }
faults() { echo "$1" >"$G/faults.json"; }
jqa()
{
    local name=$1 doc=$2 filter=$3
    shift 3
    if jq -e "$@" "$filter" >/dev/null 2>&1 <<<"$doc"; then ok "$name"; else fail "$name"; why "jq '$filter' is false on: $doc"; fi
}

export DROVER_GCP_PAGE_SIZE=1   # listings of several pages
droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
HEAD_ID=$(tr -d '\n' <"$TMP/d/head-id" 2>/dev/null)
IMAGE=projects/debian-cloud/global/images/family/debian-12

# ---- credentials -------------------------------------------------------------------
api POST /v1/credentials -d '{"id":"junk","provider":"gcp","service_account_key":"not json"}'
eq "a service-account key that is not JSON is refused" "$ST" 400
jqc "naming the field" '.error.field == "service_account_key"' "$BODY"
BADPK=$(jq -c '.private_key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"' "$G/key.json")
api POST /v1/credentials -d "$(jq -nc --arg k "$BADPK" '{id:"junk",provider:"gcp",service_account_key:$k}')"
eq "a key whose private key OpenSSL cannot read is refused" "$ST" 400
api POST /v1/credentials -d '{"id":"junk","provider":"gcp","access_key_id":"A","secret_access_key":"B"}'
eq "aws keys on a gcp credential are refused" "$ST" 400
{ printf 'credential:\n  id: sa\n  provider: gcp\n  service_account_key: |\n'; sed 's/^/    /' "$G/key.json"; echo '---'; } >"$G/apply.yaml"
cat >>"$G/apply.yaml" <<YAML
cluster:
  id: gce
  provider: gcp
  region: us-central1
  credential: sa
  endpoint: http://127.0.0.1:$GPORT/compute/v1
  image: $IMAGE
  head_url: $URL
  orphan_grace_seconds: 2
  zones: [us-central1-a, us-central1-b]
---
nodepool:
  id: gpu
  cluster: gce
  instance_types: [g2-standard-4]
  min_nodes: 2
  max_nodes: 3
  node_scale_down_delay_seconds: 1
YAML
cli apply -f "$G/apply.yaml"
rc "apply of a gcp credential (the JSON key as a block scalar), cluster and nodepool" 0
api GET /v1/credentials/sa
eq "GET credential answers 200" "$ST" 200
if grep -q "PRIVATE KEY" <<<"$BODY"; then fail "the API never shows the key"; why "$BODY"; else ok "the API never shows the key"; fi
jqc "the key shows as hidden" '.service_account_key == "(hidden)" and .provider == "gcp"' "$BODY"
api POST /v1/clusters -d '{"id":"z","provider":"gcp","region":"us-central1","zones":["europe-west4-a"]}'
eq "a zone outside the cluster's region is refused" "$ST" 400
api POST /v1/clusters -d '{"id":"z","provider":"aws","region":"us-east-1","project":"p"}'
eq "project on an aws cluster is refused" "$ST" 400

# ---- min_nodes: 2 -> two inserts --------------------------------------------------------
two_launched() { [ "$(instances | jq '[.[] | select(.labels["drover-nodepool"] == "gpu")] | length')" == 2 ] && [ "$(gcalls insert '.status == 200')" -ge 2 ]; }
wait_check $W "min_nodes 2: two instances inserted" two_launched
eq "exactly two inserts" "$(gcalls insert)" 2
eq "both g2-standard-4, STANDARD, TERMINATE on maintenance" "$(gcalls insert '.machine_type == "g2-standard-4" and .provisioning_model == "STANDARD" and .scheduling.onHostMaintenance == "TERMINATE"')" 2
eq "each with its own requestId" "$(jq -s '[.[] | select(.call == "insert") | .request_id] | unique | length' "$G/calls.log")" 2
have_ids() { [ "$(nodes_json | jq '[.[] | select(.nodepool == "gpu" and .instance_id != null)] | length')" == 2 ]; }
wait_check $W "the launches are done: both nodes have their instance" have_ids
eq "their operations were waited for until DONE (zoneOperations.wait)" "$([ "$(gcalls op_wait '.status == 200')" -ge 2 ] && echo yes)" yes
INST=$(instances)
jqa "labels name head, owner, cluster, nodepool and node" "$INST" \
    'all(.[]; .labels["drover-head"] == $h and .labels["drover-owner"] == "admin" and .labels["drover-cluster"] == "gce" and .labels["drover-nodepool"] == "gpu" and (.labels["drover-node"] | startswith("gpu-")))' --arg h "$HEAD_ID"
jqa "in the cluster's first zone" "$INST" 'all(.[]; .zone == "us-central1-a")'
NODES=$(nodes_json)
jqa "the labelled node ids are the nodepool's nodes" "$INST" \
    '([.[].labels["drover-node"]] | sort) == ([$n[] | select(.nodepool == "gpu") | .id] | sort)' --argjson n "$NODES"
jqa "startup-script starts drover-agent with the head URL and a join token, installs nothing" "$INST" \
    'all(.[]; (.startup_script | startswith("#!/bin/sh")) and (.startup_script | contains("exec drover-agent --server \u0027" + $u + "\u0027 --join-token \u0027drvj_")) and (.startup_script | test("apt|yum|curl|wget") | not))' --arg u "$URL"
eq "every JWT grant verified" "$(gcalls token '.status != 200')" 0

# ---- play the booting VMs: run each instance's startup-script --------------------------
boot_vms()
{
    local id
    for id in $(instances | jq -r '.[] | select(.status == "RUNNING" or .status == "PROVISIONING") | .name'); do
        [ -e "$TMP/vm/$id" ] && continue
        mkdir -p "$TMP/vm/$id"
        instances | jq -r --arg i "$id" '.[] | select(.name == $i) | .startup_script' >"$TMP/vm/$id/startup"
        grep -q drover-agent "$TMP/vm/$id/startup" || continue   # an orphan made by the test
        DROVER_AGENT_DIR=$TMP/vm/$id/agent DROVER_GPUS=1xL4:24576 DROVER_ADVERTISE_ADDR=127.0.0.1 \
            setsid sh "$TMP/vm/$id/startup" >"$TMP/vm/$id/agent.log" 2>&1 &
        EXTRA_AGENT_LOGS+=("$TMP/vm/$id/agent.log")
    done
}
boot_vms
ready_np() { [ "$(nodes_json | jq --arg p "$1" --argjson n "$2" '[.[] | select(.nodepool == $p and .status.state == "ready")] | length == $n')" == true ]; }
wait_check $W "the agents started by startup-script join as the two nodes, ready" ready_np gpu 2
jqa "the nodes carry their instance names" "$(nodes_json)" \
    '[.[] | select(.nodepool == "gpu") | .instance_id] | sort == ([$i[].name] | sort)' --argjson i "$INST"

# ---- cost from the catalog ----------------------------------------------------------
PRICE=$(jq '.instance_types[] | select(.id == "g2-standard-4") | .price_per_hour' "$DROVER_SRC/data/catalog.json")
cost_shown() { api GET /v1/clusters/gce/nodepools/gpu; jq -e '.status.cost.nodes == 2' >/dev/null <<<"$BODY"; }
wait_check $W "the nodepool shows its running cost" cost_shown
jqc "nodepool: 2 x the catalog's g2-standard-4 price" "(.status.cost.running_usd_per_hour - 2 * $PRICE | fabs) < 0.0001" "$BODY"

api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","2"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000,"compute_percent":25},"cpu_millis":500,"memory_mib":512}}'
api POST /v1/deployments -d '{"id":"dep","model":"demo","nodepools":[{"cluster":"gce","nodepool":"gpu"}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
eq "deployment on the gcp nodepool created" "$ST" 201
reps_ready() { replicas_json "deployment=dep" | jq -e 'length == 2 and all(.[]; .status.state == "ready")' >/dev/null; }
wait_check $W "the gcp nodes take replicas (2 ready)" reps_ready

# ---- tokens: refreshed before they expire (8 s here) -----------------------------------
refreshed() { [ "$(gcalls token)" -ge 3 ]; }
wait_check $W "access tokens are refreshed as they age" refreshed
eq "no call was made with an expired token" "$(gcalls unauthenticated '.expired')" 0

# ---- head restart: adopt, no new inserts; paging ----------------------------------
BEFORE=$(gcalls insert)
droverd_stop TERM
NLIST=$(gcalls list)
# ... and the first listing after it misses one node's machine: no earlier listing
# keeps it, so its node waits for the second listing, not released
RNAME=$(instances | jq -r '[.[] | select(.labels["drover-nodepool"] == "gpu")][0].name')
faults "$(jq -nc --arg n "$RNAME" '[{call: "list", name: $n, error: "omit", times: 1}]')"
droverd_start "$TMP/d" --listen "${URL#http://}" --config "$CFG" || { fail "droverd restarts"; t_done; }
listed_again() { [ "$(gcalls list)" -gt "$NLIST" ]; }
wait_check $W "after the restart the head lists its instances" listed_again
wait_check $W "after the restart both nodes are ready again" ready_np gpu 2
wait_check $W "and the replicas too" reps_ready
eq "the restart inserted nothing" "$(gcalls insert)" "$BEFORE"
eq "... though its first listing left a machine out" "$(jq '.[0].times' "$G/faults.json")" 0
api GET "/v1/events?limit=1000"
eq "... and no node was released for it" "$(jq '[.items[] | select(.type == "machine_gone")] | length' <<<"$BODY")" 0
faults '[]'
paged() { [ "$(gcalls list '.page_token != ""')" -ge 1 ]; }
wait_check $W "aggregatedList pages are followed (pageToken)" paged
eq "every listing filtered by the head's label" "$(gcalls list "(.filter | contains(\"labels.drover-head = \\\"$HEAD_ID\\\"\") | not)")" 0

# ---- an orphan instance is deleted -----------------------------------------------------
curl -s -X POST "http://127.0.0.1:$GPORT/_test/create" -d "$(jq -nc --arg h "$HEAD_ID" \
    '{zone: "us-central1-b", name: "drover-ghost", labels: {"drover-head": $h, "drover-owner": "admin", "drover-node": "ghost"}}')" >/dev/null
curl -s -X POST "http://127.0.0.1:$GPORT/_test/create" -d "$(jq -nc --arg h "$HEAD_ID" \
    '{zone: "europe-west4-a", name: "drover-elsewhere", labels: {"drover-head": $h, "drover-owner": "admin", "drover-node": "ghost2"}}')" >/dev/null
orphan_gone() { [ "$(instances | jq '[.[] | select(.name == "drover-ghost")] | length')" == 0 ]; }
wait_check $W "an instance labelled by this head with no node is deleted" orphan_gone
eq "one in another region (not this cluster's) is left alone" "$(instances | jq '[.[] | select(.name == "drover-elsewhere")] | length')" 1
curl -s -X POST "http://127.0.0.1:$GPORT/_test/remove" -d '{"zone":"europe-west4-a","name":"drover-elsewhere"}' >/dev/null
eq "the nodes' instances still run" "$(instances | jq '[.[] | select(.labels["drover-nodepool"] == "gpu")] | length')" 2

# ---- a listing that misses a live machine once: nothing happens ------------------------
# (a page boundary moving under a deletion did this with DROVER_GCP_PAGE_SIZE=1: the
# node was released and its machine terminated as an orphan)
KEEP=$(instances | jq -c '[.[] | select(.labels["drover-nodepool"] == "gpu")][0]')
KNODE=$(jq -r '.labels["drover-node"]' <<<"$KEEP")
faults "$(jq -nc --arg n "$(jq -r .name <<<"$KEEP")" '[{call: "list", name: $n, error: "omit", times: 1}]')"
omitted() { [ "$(jq '.[0].times' "$G/faults.json")" == 0 ]; }
wait_check $W "a listing leaves one node's machine out" omitted
FIRST=$(gcalls list '.page_token == ""')
listed_on() { [ "$(gcalls list '.page_token == ""')" -ge $((FIRST + 3)) ]; }
wait_check $W "... and the head lists twice more" listed_on
api GET "/v1/nodes/$KNODE"
jqc "... its node is still ready, not terminating" '.status.state == "ready" and (.terminating | not)' "$BODY"
api GET "/v1/events?limit=1000"
eq "... no machine_gone event" "$(jq --arg n "$KNODE" '[.items[] | select(.type == "machine_gone" and .object == $n)] | length' <<<"$BODY")" 0
eq "... and both instances still run" "$(instances | jq '[.[] | select(.labels["drover-nodepool"] == "gpu")] | length')" 2
faults '[]'

# ---- an instance that disappears (spot preemption): released and replaced ----------------
VICTIM=$(instances | jq -c '[.[] | select(.labels["drover-nodepool"] == "gpu")][0]')
VNODE=$(jq -r '.labels["drover-node"]' <<<"$VICTIM")
BEFORE=$(gcalls insert)
curl -s -X POST "http://127.0.0.1:$GPORT/_test/remove" -d "$(jq -c '{zone, name}' <<<"$VICTIM")" >/dev/null
node_gone() { api GET "/v1/nodes/$1"; [ "$ST" == 404 ]; }
wait_check $W "an instance deleted behind drover's back: its node is released" node_gone "$VNODE"
replaced() { [ "$(gcalls insert)" -gt "$BEFORE" ]; }
wait_check $W "and a replacement instance is inserted" replaced
boot_vms
wait_check $W "the replacement joins: two ready nodes again" ready_np gpu 2

# ---- spot_with_fallback: every zone exhausted -> next zone, then on demand ------------------
faults '[{"call":"insert","provisioningModel":"SPOT","error":"ZONE_RESOURCE_POOL_EXHAUSTED"},
         {"call":"insert","nodepool":"spot","zone":"us-central1-a","error":"ZONE_RESOURCE_POOL_EXHAUSTED"}]'
api POST /v1/clusters/gce/nodepools -d '{"id":"spot","instance_types":["g2-standard-4"],"capacity_type":"spot_with_fallback","min_nodes":1,"max_nodes":1,"node_scale_down_delay_seconds":1}'
eq "a spot_with_fallback nodepool is created" "$ST" 201
fell_back() { [ "$(instances | jq '[.[] | select(.labels["drover-nodepool"] == "spot")] | length')" == 1 ]; }
wait_check $W "after spot capacity errors in every zone an on-demand instance is made" fell_back
SP=$(jq -sc '[.[] | select(.call == "insert" and .labels["drover-nodepool"] == "spot")]' "$G/calls.log")
jqa "spot asked first: SPOT, deleted on termination, no automatic restart, zone a then zone b" "$SP" \
    '[.[] | select(.provisioning_model == "SPOT")] | length == 2 and .[0].zone == "us-central1-a" and .[1].zone == "us-central1-b" and all(.scheduling.instanceTerminationAction == "DELETE" and .scheduling.automaticRestart == false)'
jqa "then on demand: zone a exhausted too, so it lands in zone b" "$SP" \
    '[.[] | select(.provisioning_model == "STANDARD")] | length == 2 and .[0].zone == "us-central1-a" and .[1].zone == "us-central1-b"'
jqc "the spot nodepool's node is on demand" 'length == 1 and .[0].capacity_type == "on_demand"' \
    "$(nodes_json | jq '[.[] | select(.nodepool == "spot" and (.terminating | not))]')"
api GET "/v1/events?limit=1000"
jqc "the nodepool's events tell the capacity error and the fallback" \
    '[.items[] | select(.kind == "nodepool" and .object == "gce/spot")] | (any(.type == "provider_error" and (.reason | contains("ZONE_RESOURCE_POOL_EXHAUSTED")))) and any(.type == "fallback")' "$BODY"
faults '[]'
boot_vms
wait_check $W "the on-demand fallback node joins" ready_np spot 1
api PATCH /v1/clusters/gce/nodepools/spot -d '{"min_nodes":0}'

# ---- rateLimitExceeded and a lost answer: retried with the same requestId --------------------
faults '[{"call":"insert","nodepool":"retry","error":"rateLimitExceeded","times":2},
         {"call":"insert","nodepool":"retry","error":"lost_answer","times":1}]'
api POST /v1/clusters/gce/nodepools -d '{"id":"retry","instance_types":["g2-standard-4"],"min_nodes":1,"max_nodes":1,"node_scale_down_delay_seconds":1}'
retry_made() { [ "$(nodes_json | jq '[.[] | select(.nodepool == "retry" and .instance_id != null)] | length')" == 1 ]; }
wait_check $W "after two rate limits and a lost answer the node has its instance" retry_made
RT=$(jq -sc '[.[] | select(.call == "insert" and .labels["drover-nodepool"] == "retry")]' "$G/calls.log")
jqa "four tries, one requestId; the last answered from the first run" "$RT" \
    'length == 4 and ([.[].request_id] | unique | length) == 1 and ([.[].injected] == ["rateLimitExceeded", "rateLimitExceeded", "lost_answer", null]) and .[3].replayed == true'
eq "and exactly one instance" "$(instances | jq '[.[] | select(.labels["drover-nodepool"] == "retry")] | length')" 1
api DELETE /v1/clusters/gce/nodepools/retry

# ---- QUOTA_EXCEEDED (a regional GPU quota) -> the nodepool's other type ----------------------
faults '[{"call":"insert","nodepool":"quota","error":"QUOTA_EXCEEDED","times":1}]'
api POST /v1/clusters/gce/nodepools -d '{"id":"quota","instance_types":["g2-standard-4","g2-standard-8"],"min_nodes":1,"max_nodes":1,"node_scale_down_delay_seconds":1}'
quota_made() { [ "$(instances | jq '[.[] | select(.labels["drover-nodepool"] == "quota")] | length')" == 1 ]; }
wait_check $W "after a quota error the other instance type is made" quota_made
QT=$(jq -sc '[.[] | select(.call == "insert" and .labels["drover-nodepool"] == "quota")]' "$G/calls.log")
jqa "the second insert is of the other type" "$QT" 'length == 2 and .[0].injected == "QUOTA_EXCEEDED" and .[0].machine_type != .[1].machine_type'
api DELETE /v1/clusters/gce/nodepools/quota

# ---- GPUS_ALL_REGIONS -> give up --------------------------------------------------------
faults '[{"call":"insert","nodepool":"global","error":"QUOTA_EXCEEDED_ALL"}]'
api POST /v1/clusters/gce/nodepools -d '{"id":"global","instance_types":["g2-standard-4"],"min_nodes":1,"max_nodes":1}'
global_error() { api GET /v1/clusters/gce/nodepools/global; jq -e '.status.provider_error.class == "give_up"' >/dev/null <<<"$BODY"; }
wait_check $W "a GPUS_ALL_REGIONS quota: the nodepool gives up" global_error
jqc "naming the quota" '.status.provider_error.message | contains("GPUS_ALL_REGIONS")' "$BODY"
sleep 3
eq "one insert, not one per zone nor a retry storm" "$(gcalls insert '.labels["drover-nodepool"] == "global"')" 1
api DELETE /v1/clusters/gce/nodepools/global
faults '[]'

# ---- scale to zero: instances deleted ----------------------------------------------------
api DELETE /v1/deployments/dep
api PATCH /v1/clusters/gce/nodepools/gpu -d '{"min_nodes":0}'
eq "nodepool gpu scaled to min 0" "$ST" 200
all_deleted() { [ "$(instances | jq 'length')" == 0 ]; }
wait_check $W "scale to zero: every instance is deleted" all_deleted
no_nodes() { [ "$(nodes_json | jq 'length')" == 0 ]; }
wait_check $W "and their nodes are gone" no_nodes

# ---- bad credentials: one clear error, no retry storm -----------------------------------
api POST /v1/credentials -d "$(jq -nc --rawfile k "$G/other.json" '{id:"wrong",provider:"gcp",service_account_key:$k}')"
eq "a credential with a key the double never issued is accepted (it signs)" "$ST" 201
T0=$(gcalls token)
api POST /v1/clusters -d "$(jq -nc --arg u "http://127.0.0.1:$GPORT/compute/v1" --arg i "$IMAGE" '{id:"locked",provider:"gcp",region:"us-central1",credential:"wrong",endpoint:$u,image:$i}')"
api POST /v1/clusters/locked/nodepools -d '{"id":"np","instance_types":["g2-standard-4"],"min_nodes":1}'
locked_error() { api GET /v1/clusters/locked/nodepools/np; jq -e '.status.provider_error.class == "give_up"' >/dev/null <<<"$BODY"; }
wait_check $W "invalid_grant: the nodepool shows a give_up provider error" locked_error
jqc "the error names the cause" '.status.provider_error.message | contains("invalid_grant")' "$BODY"
sleep 4
TB=$(( $(gcalls token) - T0 ))
if [ "$TB" -le 5 ]; then ok "no retry storm on the token endpoint ($TB grants)"; else fail "no retry storm on the token endpoint"; why "$TB grants"; fi
eq "the refused grants carried a signature the double could not verify" "$([ "$(gcalls token '.bad_signature')" -ge 1 ] && echo yes)" yes
api DELETE "/v1/clusters/locked?cascade=true"
api POST /v1/clusters -d "$(jq -nc --arg u "http://127.0.0.1:$GPORT/compute/v1" --arg i "$IMAGE" '{id:"other",provider:"gcp",region:"us-central1",credential:"sa",endpoint:$u,image:$i,project:"not-mine"}')"
api POST /v1/clusters/other/nodepools -d '{"id":"np","instance_types":["g2-standard-4"],"min_nodes":1}'
other_error() { api GET /v1/clusters/other/nodepools/np; jq -e '.status.provider_error.class == "give_up"' >/dev/null <<<"$BODY"; }
wait_check $W "permission denied on a project: give_up" other_error
jqc "naming the permission" '.status.provider_error.message | contains("forbidden")' "$BODY"
api DELETE "/v1/clusters/other?cascade=true"

api GET /metrics
if grep -qE '^drover_gcp_api_calls_total [1-9]' <<<"$BODY"; then ok "/metrics counts the gcp calls"; else fail "/metrics counts the gcp calls"; why "$(grep gcp <<<"$BODY")"; fi
if grep -q "PRIVATE KEY\|$(sed -n 2p "$G/key.pem")" "$TMP/d/droverd.log"; then fail "droverd never logs the key"; else ok "droverd never logs the key"; fi
LEAK=0
while read -r t; do grep -qF "$t" "$TMP/d/droverd.log" && LEAK=1; done <"$G/tokens.log"
eq "droverd never logs an access token" "$LEAK" 0

droverd_finish gcp
logs_sanitizer_clean "gcp: the agents the startup-script started" "${EXTRA_AGENT_LOGS[@]}"
t_done
