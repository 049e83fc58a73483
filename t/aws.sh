#!/usr/bin/env bash
# aws.sh — the aws provider end to end against moto_server (an EC2 emulator)
# on loopback, never real AWS. A fault-injecting, call-counting proxy
# (t/lib/aws_helper.py) sits between droverd and moto: it logs every EC2
# Action and, when told, answers spot RunInstances with a capacity error
# (moto never runs out of capacity by itself).
#   - a credential's secret is never shown by the API nor logged;
#   - a nodepool with min_nodes: 2 -> two RunInstances of the right type,
#     tags and user-data (drover-agent with the head URL and a join token);
#   - the test plays each booting VM by running its user-data locally: real
#     drover-agents join as exactly those nodes, which become ready and take
#     replicas;
#   - a head restart adopts the running instances: no new RunInstances;
#   - an orphan instance (tagged by this head, no node) is terminated;
#   - an instance terminated behind drover's back (a spot interruption): its
#     node is released and replaced;
#   - spot_with_fallback: spot capacity errors -> an on-demand node;
#   - a node that never joins is released at the nodepool's provisioning
#     timeout, and its instance terminated;
#   - scale to zero -> the instances are terminated;
#   - bad credentials (a second moto with its IAM checks on, which refuses
#     keys it never issued) -> a clear error on the nodepool, and one
#     RunInstances, not a retry storm.
# shellcheck disable=SC2086
. "$(dirname "$0")/lib/common.bash"
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 3000, "node_lost_ms": 8000}'
workers_init
W=${T_WAIT:-120}
HELPER=$DROVER_SRC/t/lib/aws_helper.py

MOTO=$(command -v moto_server || true)
[ -z "$MOTO" ] && [ -x /root/.pyenv/shims/moto_server ] && MOTO=/root/.pyenv/shims/moto_server
if [ -z "$MOTO" ]; then
    fail "moto_server is installed (pip install 'moto[server]'): this test needs the EC2 emulator"
    t_done
fi
if ! python3 -c 'import boto3' 2>/dev/null; then
    fail "python3 has boto3 (it comes with moto): the test reads the emulator through it"
    t_done
fi

BG=()
bg() { "$@" & BG+=($!); }
stop_bg() { local p; for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done; }
trap 'stop_bg; _workers_cleanup' EXIT

port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

MPORT=$(free_port)
bg "$MOTO" -H 127.0.0.1 -p "$MPORT" >"$TMP/moto.log" 2>&1
PPORT=$(free_port)
echo '{}' >"$TMP/faults.json"
: >"$TMP/calls.log"
: >"$TMP/calls2.log"
bg python3 "$HELPER" proxy "$PPORT" "$MPORT" "$TMP/calls.log" "$TMP/faults.json"
wait_until 60 "moto_server and the proxy listen" eval 'port_up $MPORT && port_up $PPORT' ||
    { fail "moto_server starts"; cat "$TMP/moto.log"; t_done; }

# the helper's calls to moto, from one long-lived process (see aws_helper.py serve)
HPORT=$(free_port)
bg python3 "$HELPER" serve "$HPORT" "$MPORT" >"$TMP/helper.log" 2>&1
wait_until 60 "the helper listens" port_up "$HPORT" ||
    { fail "the helper starts"; cat "$TMP/helper.log"; t_done; }
helper() { curl -sf -X "$1" "http://127.0.0.1:$HPORT$2"; }
instances() { helper GET /instances || echo '[]'; }
orphan() { helper POST "/orphan?head=$HEAD_ID&owner=admin&node=$1"; }
# jqa NAME DOC FILTER [jq args...]: one check line, like jqc, with --arg/--argjson.
jqa()
{
    local name=$1 doc=$2 filter=$3
    shift 3
    if jq -e "$@" "$filter" >/dev/null 2>&1 <<<"$doc"; then ok "$name"; else fail "$name"; why "jq '$filter' is false on: $doc"; fi
}
calls() { jq -s --arg a "$1" "[.[] | select(.action == \$a) ${2:+| select($2)}] | length" "$TMP/calls.log" 2>/dev/null || echo 0; }

# listings come in pages of 5 (EC2's smallest), so NextToken paging is exercised
export DROVER_AWS_PAGE_SIZE=5
droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
HEAD_ID=$(tr -d '\n' <"$TMP/d/head-id" 2>/dev/null)
AMI=ami-03cf127a   # one of moto's built-in images

# ---- credentials -----------------------------------------------------------------
SECRET="s3cr3t-$RANDOM-not-for-logs"
cat >"$TMP/aws.yaml" <<YAML
credential:
  id: moto
  access_key_id: AKIDTESTDROVER
  secret_access_key: $SECRET
---
cluster:
  id: ec2
  provider: aws
  region: us-east-1
  credential: moto
  endpoint: http://127.0.0.1:$PPORT
  image: $AMI
  head_url: $URL
  orphan_grace_seconds: 2
---
nodepool:
  id: gpu
  cluster: ec2
  instance_types: [g4dn.xlarge]
  min_nodes: 2
  max_nodes: 3
  node_scale_down_delay_seconds: 1
YAML
cli apply -f "$TMP/aws.yaml"
rc "apply of a credential, an aws cluster and a nodepool" 0
api GET /v1/credentials/moto
eq "GET credential answers 200" "$ST" 200
if grep -q "$SECRET" <<<"$BODY"; then fail "the API never shows the secret"; why "$BODY"; else ok "the API never shows the secret"; fi
jqc "the credential shows its key id" '.access_key_id == "AKIDTESTDROVER" and .secret_access_key == "(hidden)"' "$BODY"
cli get credentials
if grep -q "$SECRET" <<<"$OUT"; then fail "drover get credentials hides the secret"; else ok "drover get credentials hides the secret"; fi
api POST /v1/clusters -d '{"id":"nocred","provider":"aws","region":"us-east-1"}'
eq "an aws cluster without a credential is accepted (planning)" "$ST" 201
api POST /v1/clusters/nocred/nodepools -d '{"id":"np","instance_types":["g4dn.xlarge"],"min_nodes":1}'
nocred_error() { api GET /v1/clusters/nocred/nodepools/np; jq -e '.status.provider_error.class == "give_up" and (.status.provider_error.message | contains("no credential"))' >/dev/null <<<"$BODY"; }
wait_check $W "its nodepool shows that it has no credential" nocred_error
api DELETE "/v1/clusters/nocred?cascade=true"
eq "and goes" "$ST" 200
api POST /v1/clusters -d '{"id":"badcred","provider":"aws","region":"us-east-1","credential":"nope"}'
eq "an aws cluster naming an unknown credential is refused" "$ST" 422
api DELETE /v1/credentials/moto
eq "a credential in use cannot be deleted" "$ST" 409

# ---- min_nodes: 2 -> two RunInstances ------------------------------------------------
two_launched() { [ "$(calls RunInstances)" -ge 2 ] && [ "$(instances | jq '[.[] | select(.state != "terminated")] | length')" == 2 ]; }
wait_check $W "min_nodes 2: two instances launched" two_launched
eq "exactly two RunInstances calls" "$(calls RunInstances)" 2
eq "both of type g4dn.xlarge, on demand" "$(calls RunInstances '.type == "g4dn.xlarge" and .market == "on-demand"')" 2
INST=$(instances)
jqa "tags name head, owner, cluster, nodepool and node" "$INST" \
    'all(.[]; .tags["drover:head"] == $h and .tags["drover:owner"] == "admin" and .tags["drover:cluster"] == "ec2" and .tags["drover:nodepool"] == "gpu" and (.tags["drover:node"] | startswith("gpu-")))' --arg h "$HEAD_ID"
NODES=$(nodes_json)
jqa "the tagged node ids are the nodepool's nodes" "$INST" \
    '([.[].tags["drover:node"]] | sort) == ([$n[] | select(.nodepool == "gpu") | .id] | sort)' --argjson n "$NODES"
jqa "user-data starts drover-agent with the head URL and a join token, installs nothing" "$INST" \
    'all(.[]; (.user_data | startswith("#!/bin/sh")) and (.user_data | contains("exec drover-agent --server \u0027" + $u + "\u0027 --join-token \u0027drvj_")) and (.user_data | test("apt|yum|curl|wget") | not))' --arg u "$URL"
if grep -q "$SECRET" "$TMP/d/droverd.log"; then fail "droverd never logs the secret"; else ok "droverd never logs the secret"; fi

# ---- play the booting VMs: run each instance's user-data -----------------------------
boot_vms()
{
    local id
    for id in $(instances | jq -r '.[] | select(.state != "terminated") | .id'); do
        [ -e "$TMP/vm/$id" ] && continue
        mkdir -p "$TMP/vm/$id"
        instances | jq -r --arg i "$id" '.[] | select(.id == $i) | .user_data' >"$TMP/vm/$id/user-data"
        DROVER_AGENT_DIR=$TMP/vm/$id/agent DROVER_GPUS=1xT4:16384 DROVER_ADVERTISE_ADDR=127.0.0.1 \
            setsid sh "$TMP/vm/$id/user-data" >"$TMP/vm/$id/agent.log" 2>&1 &
        EXTRA_AGENT_LOGS+=("$TMP/vm/$id/agent.log")
    done
}
boot_vms
ready_gpu() { [ "$(nodes_json | jq --argjson n "$1" '[.[] | select(.nodepool == "gpu" and .status.state == "ready")] | length == $n')" == true ]; }
wait_check $W "the agents started by user-data join as the two nodes, ready" ready_gpu 2
eq "no other node registered" "$(nodes_json | jq '[.[] | select(.nodepool == "gpu")] | length')" 2
jqa "the nodes carry their instance ids" "$(nodes_json)" \
    '[.[] | select(.nodepool == "gpu") | .instance_id] | sort == ([$i[].id] | sort)' --argjson i "$INST"
api POST /v1/clusters/ec2/nodepools/gpu/join-tokens -d '{}'
api GET /v1/clusters/ec2/nodepools/gpu/join-tokens
jqc "the boot join tokens were used up" '[.items[] | select(.id | startswith("gpu-"))] | length == 0' "$BODY"

# ---- cost: catalog price per node, sums per nodepool and cluster -----------------------
cost_shown() { api GET /v1/clusters/ec2/nodepools/gpu; jq -e '.status.cost.nodes == 2' >/dev/null <<<"$BODY"; }
wait_check $W "the nodepool shows its running cost" cost_shown
jqc "nodepool: 2 x g4dn.xlarge on demand = \$1.052/h (the catalog's price)" '.status.cost.running_usd_per_hour == 1.052 and .status.cost.accrued_usd >= 0' "$BODY"
api GET /v1/clusters/ec2
jqc "cluster: the same running cost" '.status.cost.nodes == 2 and .status.cost.running_usd_per_hour == 1.052' "$BODY"
jqc "each node: its price per hour and capacity" 'all(.[] | select(.nodepool == "gpu"); .status.cost.price_per_hour == 0.526 and .status.cost.capacity_type == "on_demand")' "$(nodes_json)"
cli describe nodepool ec2/gpu
if grep -q "running_usd_per_hour" <<<"$OUT"; then ok "drover describe nodepool shows the running cost"; else fail "drover describe nodepool shows the running cost"; why "$OUT"; fi

api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","2"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000,"compute_percent":25},"cpu_millis":500,"memory_mib":512}}'
api POST /v1/deployments -d '{"id":"dep","model":"demo","nodepools":[{"cluster":"ec2","nodepool":"gpu"}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
eq "deployment on the aws nodepool created" "$ST" 201
reps_ready() { replicas_json "deployment=dep" | jq -e 'length == 2 and all(.[]; .status.state == "ready")' >/dev/null; }
wait_check $W "the aws nodes take replicas (2 ready)" reps_ready

# ---- head restart: adopt, no new launches -----------------------------------------
BEFORE=$(calls RunInstances)
droverd_stop TERM
: >"$TMP/calls.after"
droverd_start "$TMP/d" --listen "${URL#http://}" --config "$CFG" || { fail "droverd restarts"; t_done; }
listed_again() { [ "$(jq -s '[.[] | select(.action == "DescribeInstances")] | length' "$TMP/calls.log")" -gt "$1" ]; }
NDESC=$(jq -s '[.[] | select(.action == "DescribeInstances")] | length' "$TMP/calls.log")
wait_check $W "after the restart the head lists its instances" listed_again $((NDESC + 1))
wait_check $W "after the restart both nodes are ready again" ready_gpu 2
wait_check $W "and the replicas too" reps_ready
eq "the restart launched nothing" "$(calls RunInstances)" "$BEFORE"
for i in 1 2 3 4; do   # instances 3..6 (orphans, cleaned up below)
    orphan "ghost-$i" >/dev/null
done
paged() { [ "$(calls DescribeInstances '.next_token')" -ge 1 ]; }
wait_check $W "listings of more than a page follow NextToken" paged
eq "the same two instances run" "$(instances | jq '[.[] | select(.tags["drover:nodepool"] == "gpu" and (.state == "running" or .state == "pending"))] | length')" 2

# ---- an orphan instance is terminated ---------------------------------------------
ORPH=$(orphan ghost-node)
[ -n "$ORPH" ] || { fail "the helper launches an orphan"; cat "$TMP/helper.log"; }
orphan_gone() { [ "$(instances | jq -r --arg i "$ORPH" '.[] | select(.id == $i) | .state')" == terminated ]; }
wait_check $W "an instance tagged by this head with no node is terminated" orphan_gone
all_orphans_gone() { [ "$(instances | jq '[.[] | select((.tags["drover:node"] // "") | startswith("ghost")) | select(.state != "terminated")] | length')" == 0 ]; }
wait_check $W "so are the other orphans" all_orphans_gone
eq "the nodes' instances still run" "$(instances | jq '[.[] | select(.tags["drover:nodepool"] == "gpu" and .state != "terminated")] | length')" 2

# ---- an instance that disappears: its node is released and replaced ---------------------
VICTIM=$(instances | jq -r '[.[] | select(.tags["drover:nodepool"] == "gpu" and .state == "running")][0].id')
VNODE=$(instances | jq -r --arg i "$VICTIM" '.[] | select(.id == $i) | .tags["drover:node"]')
BEFORE=$(calls RunInstances)
helper POST "/terminate?id=$VICTIM" >/dev/null
node_gone() { api GET "/v1/nodes/$1"; [ "$ST" == 404 ]; }
wait_check $W "an instance terminated behind drover's back: its node is released" node_gone "$VNODE"
replaced() { [ "$(calls RunInstances)" -gt "$BEFORE" ]; }
wait_check $W "and a replacement instance is launched" replaced
boot_vms
wait_check $W "the replacement joins: two ready nodes again" ready_gpu 2
wait_check $W "and the replicas are placed again" reps_ready

# ---- spot_with_fallback: capacity errors -> on demand ------------------------------
echo '{"spot": "InsufficientInstanceCapacity"}' >"$TMP/faults.json"
api POST /v1/clusters/ec2/nodepools -d '{"id":"spot","instance_types":["g4dn.xlarge"],"capacity_type":"spot_with_fallback","min_nodes":1,"max_nodes":1,"node_scale_down_delay_seconds":1}'
eq "a spot_with_fallback nodepool is created" "$ST" 201
OD_BEFORE=$(calls RunInstances '.market == "on-demand"')
fell_back() { [ "$(calls RunInstances '.market == "on-demand"')" -gt "$OD_BEFORE" ]; }
wait_check $W "after the injected spot failure an on-demand instance is launched" fell_back
eq "one spot attempt, refused by the injected capacity error" "$(calls RunInstances '.market == "spot" and .injected == "InsufficientInstanceCapacity"')" 1
SPOT_NODES=$(nodes_json | jq '[.[] | select(.nodepool == "spot" and (.terminating | not))]')
jqc "the spot nodepool's node is on demand" 'length == 1 and .[0].capacity_type == "on_demand"' "$SPOT_NODES"
api GET "/v1/events?limit=1000"
jqc "the nodepool's events tell the provider error and the fallback" \
    '[.items[] | select(.kind == "nodepool" and .object == "ec2/spot")] | (any(.type == "provider_error" and (.reason | contains("InsufficientInstanceCapacity")))) and any(.type == "fallback")' "$BODY"
echo '{}' >"$TMP/faults.json"
boot_vms
spot_ready() { [ "$(nodes_json | jq '[.[] | select(.nodepool == "spot" and .status.state == "ready")] | length')" == 1 ]; }
wait_check $W "the on-demand fallback node joins" spot_ready

# ---- a node that never joins is released at its provisioning timeout ---------------------
api POST /v1/clusters/ec2/nodepools -d '{"id":"slow","instance_types":["g4dn.xlarge"],"min_nodes":1,"provision_timeout_seconds":3}'
eq "a nodepool with a 3 s provisioning timeout is created" "$ST" 201
slow_launched() { [ "$(instances | jq '[.[] | select(.tags["drover:nodepool"] == "slow")] | length')" -ge 1 ]; }
wait_check $W "its node's instance is launched (and never booted here)" slow_launched
SLOW=$(instances | jq -r '[.[] | select(.tags["drover:nodepool"] == "slow")][0].id')
slow_gone() { [ "$(instances | jq -r --arg i "$SLOW" '.[] | select(.id == $i) | .state')" == terminated ]; }
wait_check $W "the node that never joined is released and its instance terminated" slow_gone
api GET "/v1/events?limit=1000"
jqc "the nodepool says why" '[.items[] | select(.object == "ec2/slow" and .type == "provision_timeout")] | length >= 1' "$BODY"
api DELETE /v1/clusters/ec2/nodepools/slow
eq "nodepool slow deleted" "$ST" 200

# ---- a credential naming a profile of the head's ~/.aws/credentials ----------------
mkdir -p "$HOME/.aws"
printf '[other]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = x\n[drover-test]\naws_access_key_id = AKIDFROMPROFILE\naws_secret_access_key = y\n' >"$HOME/.aws/credentials"
api POST /v1/credentials -d '{"id":"byprofile","profile":"drover-test"}'
eq "a credential naming a profile is created" "$ST" 201
api POST /v1/clusters -d "{\"id\":\"prof\",\"provider\":\"aws\",\"region\":\"us-east-1\",\"credential\":\"byprofile\",\"endpoint\":\"http://127.0.0.1:$PPORT\",\"image\":\"$AMI\"}"
api POST /v1/clusters/prof/nodepools -d '{"id":"p","instance_types":["g4dn.xlarge"],"min_nodes":1}'
prof_launched() { [ "$(calls RunInstances '.nodepool == "p"')" -ge 1 ]; }
wait_check $W "the profile's credential launches an instance" prof_launched
eq "signed with the profile's key id" "$(calls RunInstances '.nodepool == "p" and .key == "AKIDFROMPROFILE"')" 1
api DELETE "/v1/clusters/prof?cascade=true"
eq "the cluster on the profile credential is deleted" "$ST" 200

# ---- scale to zero: instances terminated -----------------------------------------
api DELETE /v1/deployments/dep
api PATCH /v1/clusters/ec2/nodepools/gpu -d '{"min_nodes":0}'
eq "nodepool gpu scaled to min 0" "$ST" 200
api PATCH /v1/clusters/ec2/nodepools/spot -d '{"min_nodes":0}'
all_terminated() { [ "$(instances | jq '[.[] | select(.state != "terminated")] | length')" == 0 ]; }
wait_check $W "scale to zero: every instance is terminated" all_terminated
no_nodes() { [ "$(nodes_json | jq 'length')" == 0 ]; }
wait_check $W "and their nodes are gone" no_nodes
eq "TerminateInstances was called" "$([ "$(calls TerminateInstances)" -ge 3 ] && echo yes)" yes

# ---- bad credentials: a clear error, no retry storm ---------------------------------
M2=$(free_port)
INITIAL_NO_AUTH_ACTION_COUNT=0 bg "$MOTO" -H 127.0.0.1 -p "$M2" >"$TMP/moto2.log" 2>&1
P2=$(free_port)
bg python3 "$HELPER" proxy "$P2" "$M2" "$TMP/calls2.log" "$TMP/nofaults.json"
wait_until 60 "the second moto_server and proxy listen" eval 'port_up $M2 && port_up $P2'
calls2() { jq -s --arg a "$1" '[.[] | select(.action == $a)] | length' "$TMP/calls2.log" 2>/dev/null || echo 0; }
api POST /v1/credentials -d '{"id":"wrong","access_key_id":"AKIDNEVERISSUED","secret_access_key":"nope"}'
api POST /v1/clusters -d "{\"id\":\"locked\",\"provider\":\"aws\",\"region\":\"us-east-1\",\"credential\":\"wrong\",\"endpoint\":\"http://127.0.0.1:$P2\",\"image\":\"$AMI\"}"
eq "a cluster with credentials the emulator refuses is accepted" "$ST" 201
api POST /v1/clusters/locked/nodepools -d '{"id":"np","instance_types":["g4dn.xlarge"],"min_nodes":1}'
np_error() { api GET /v1/clusters/locked/nodepools/np; jq -e '.status.provider_error.class == "give_up"' >/dev/null <<<"$BODY"; }
wait_check $W "bad credentials: the nodepool shows a give_up provider error" np_error
jqc "the error names the cause" '.status.provider_error.message | contains("AuthFailure")' "$BODY"
api GET "/v1/events?limit=1000"
jqc "an event on the nodepool says so" '[.items[] | select(.kind == "nodepool" and .object == "locked/np" and .type == "provider_error")] | length >= 1' "$BODY"
# the backoff (60 s at first) holds the next attempt: watch a while
sleep 5
eq "no retry storm: one RunInstances" "$(calls2 RunInstances)" 1
DESC2=$(calls2 DescribeInstances)
if [ "$DESC2" -le 4 ]; then ok "listing backs off too ($DESC2 DescribeInstances)"; else fail "listing backs off too"; why "$DESC2 DescribeInstances"; fi
api GET /metrics
if grep -qE '^drover_aws_api_calls_total [1-9]' <<<"$BODY"; then ok "/metrics counts the EC2 calls"; else fail "/metrics counts the EC2 calls"; why "$(grep aws <<<"$BODY")"; fi
api DELETE "/v1/clusters/locked?cascade=true"

droverd_finish aws
logs_sanitizer_clean "aws: the agents the user-data started" "${EXTRA_AGENT_LOGS[@]}"
t_done
