#!/usr/bin/env bash
# vultr.sh — the vultr provider end to end against t/lib/vultr_double.py (a
# strict double of the Vultr API v2 on loopback; no emulator exists), never
# real Vultr.
#   - a credential's API key is never shown by the API nor logged;
#   - a spot nodepool on vultr is refused (422, naming why);
#   - min_nodes: 2 -> a region availability check and two creates of the
#     right plan, tags and base64 user_data whose agents join (the test
#     runs the user data locally) and take replicas;
#   - a head restart adopts the instances: no new create; cursor paging;
#   - an orphan instance (tagged by this head, no node) is deleted;
#   - a plan the region does not offer now -> the nodepool's other plan;
#   - 429 -> retried with backoff, one instance;
#   - scale to zero -> the instances are deleted;
#   - a bad API key -> one clear give_up error, no retry storm.
# shellcheck disable=SC2086
. "$(dirname "$0")/lib/common.bash"
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 3000, "node_lost_ms": 8000}'
workers_init
W=${T_WAIT:-120}
DOUBLE=$DROVER_SRC/t/lib/vultr_double.py
BG=()
bg() { "$@" & BG+=($!); }
stop_bg() { local p; for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done; }
trap 'stop_bg; _workers_cleanup' EXIT
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

V=$TMP/vultr
mkdir -p "$V"
KEY="VULTRKEY$RANDOM$RANDOM-not-for-logs"
P1=vcg-a16-2c-8g-2vram
P2=vcg-a16-2c-16g-4vram
VPORT=$(free_port)
jq -n --arg k "$KEY" --arg a "$P1" --arg b "$P2" \
    '{api_key: $k, regions: {ewr: [$a, $b], ams: [$a]}, rate_per_s: 20, boot_delay_ms: 400}' >"$V/config.json"
echo '[]' >"$V/faults.json"
: >"$V/calls.log"
bg python3 -S "$DOUBLE" serve "$VPORT" "$V"
wait_until 30 "the Vultr double listens" port_up "$VPORT" || { fail "the Vultr double starts"; t_done; }
vcalls() { jq -s "[.[] | select(.call == \"$1\") ${2:+| select($2)}] | length" "$V/calls.log" 2>/dev/null || echo 0; }
instances() { curl -s "http://127.0.0.1:$VPORT/_test/instances" || echo '[]'; }
faults() { echo "$1" >"$V/faults.json"; }
jqa()
{
    local name=$1 doc=$2 filter=$3
    shift 3
    if jq -e "$@" "$filter" >/dev/null 2>&1 <<<"$doc"; then ok "$name"; else fail "$name"; why "jq '$filter' is false on: $doc"; fi
}

export DROVER_VULTR_PAGE_SIZE=1
droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
HEAD_ID=$(tr -d '\n' <"$TMP/d/head-id" 2>/dev/null)
EP=http://127.0.0.1:$VPORT/v2
SNAP=0b1f2c3d-aaaa-4bbb-8ccc-0123456789ab

# ---- credentials, spot -------------------------------------------------------------
api POST /v1/credentials -d "{\"id\":\"vk\",\"provider\":\"vultr\",\"api_key\":\"$KEY\"}"
eq "a vultr credential is created" "$ST" 201
api GET /v1/credentials/vk
if grep -q "$KEY" <<<"$BODY"; then fail "the API never shows the key"; else ok "the API never shows the key"; fi
jqc "it shows as hidden" '.api_key == "(hidden)"' "$BODY"
api POST /v1/credentials -d '{"id":"x","provider":"vultr"}'
eq "a vultr credential without api_key is refused" "$ST" 400
api POST /v1/clusters -d "{\"id\":\"vc\",\"provider\":\"vultr\",\"region\":\"ewr\",\"credential\":\"vk\",\"endpoint\":\"$EP\",\"image\":\"$SNAP\",\"head_url\":\"$URL\",\"orphan_grace_seconds\":2}"
eq "a vultr cluster is created" "$ST" 201
api POST /v1/clusters/vc/nodepools -d "{\"id\":\"s\",\"instance_types\":[\"$P1\"],\"capacity_type\":\"spot\"}"
eq "a spot nodepool on vultr is refused" "$ST" 422
jqc "naming why" '.error.message | contains("no spot")' "$BODY"

# ---- min_nodes: 2 -------------------------------------------------------------------
api POST /v1/clusters/vc/nodepools -d "{\"id\":\"gpu\",\"instance_types\":[\"$P1\"],\"min_nodes\":2,\"max_nodes\":3,\"node_scale_down_delay_seconds\":1}"
eq "nodepool created" "$ST" 201
two() { [ "$(instances | jq 'length')" == 2 ]; }
wait_check $W "min_nodes 2: two instances created" two
eq "exactly two creates, of the plan, in ewr" "$(vcalls create "select(.plan == \"$P1\" and .region == \"ewr\" and .status == 202)")" 2
eq "each after a region availability check" "$([ "$(vcalls availability)" -ge 2 ] && echo yes)" yes
INST=$(instances)
jqa "tags name head, owner, cluster, nodepool and node" "$INST" \
    'all(.[]; (.tags | index("drover-head=" + $h)) and (.tags | index("drover-owner=admin")) and (.tags | index("drover-cluster=vc")) and (.tags | index("drover-nodepool=gpu")))' --arg h "$HEAD_ID"
jqa "user_data (sent base64) starts drover-agent with the head URL and a join token" "$INST" \
    'all(.[]; (.user_data | startswith("#!/bin/sh")) and (.user_data | contains("exec drover-agent --server \u0027" + $u + "\u0027 --join-token \u0027drvj_")))' --arg u "$URL"
boot_vms()
{
    local id
    for id in $(instances | jq -r '.[] | .id'); do
        [ -e "$TMP/vm/$id" ] && continue
        mkdir -p "$TMP/vm/$id"
        instances | jq -r --arg i "$id" '.[] | select(.id == $i) | .user_data' >"$TMP/vm/$id/ud"
        grep -q drover-agent "$TMP/vm/$id/ud" || continue
        DROVER_AGENT_DIR=$TMP/vm/$id/agent DROVER_GPUS=1xA16:2048 DROVER_ADVERTISE_ADDR=127.0.0.1 \
            setsid sh "$TMP/vm/$id/ud" >"$TMP/vm/$id/agent.log" 2>&1 &
        EXTRA_AGENT_LOGS+=("$TMP/vm/$id/agent.log")
    done
}
boot_vms
ready_np() { [ "$(nodes_json | jq --arg p "$1" --argjson n "$2" '[.[] | select(.nodepool == $p and .status.state == "ready")] | length == $n')" == true ]; }
wait_check $W "the agents started by user_data join as the two nodes, ready" ready_np gpu 2
jqa "the nodes carry their instance ids" "$(nodes_json)" '[.[] | .instance_id] | sort == ([$i[].id] | sort)' --argjson i "$INST"

# ---- restart adopts; paging --------------------------------------------------------
BEFORE=$(vcalls create)
droverd_stop TERM
NL=$(vcalls list)
droverd_start "$TMP/d" --listen "${URL#http://}" --config "$CFG" || { fail "droverd restarts"; t_done; }
relisted() { [ "$(vcalls list)" -gt "$NL" ]; }
wait_check $W "after the restart the head lists its instances" relisted
wait_check $W "both nodes are ready again" ready_np gpu 2
eq "the restart created nothing" "$(vcalls create)" "$BEFORE"
eq "cursor paging is followed" "$([ "$(vcalls list '.cursor != ""')" -ge 1 ] && echo yes)" yes
eq "every listing is by the head's tag" "$(vcalls list ".tag != \"drover-head=$HEAD_ID\"")" 0

# ---- orphan ---------------------------------------------------------------------------
ORPH=$(curl -s -X POST "http://127.0.0.1:$VPORT/_test/create" -d "$(jq -nc --arg h "$HEAD_ID" '{region: "ewr", tags: ["drover-head=" + $h, "drover-owner=admin", "drover-node=ghost"]}')" | jq -r .id)
orphan_gone() { [ "$(instances | jq --arg i "$ORPH" '[.[] | select(.id == $i)] | length')" == 0 ]; }
wait_check $W "an instance tagged by this head with no node is deleted" orphan_gone

# ---- plan unavailable -> the other plan; 429 -> retried --------------------------------
faults "[{\"call\":\"availability\",\"plan\":\"$P1\",\"error\":\"unavailable\",\"times\":1},
         {\"call\":\"create\",\"plan\":\"$P2\",\"error\":\"rate_limited\",\"times\":2}]"
api POST /v1/clusters/vc/nodepools -d "{\"id\":\"alt\",\"instance_types\":[\"$P1\",\"$P2\"],\"min_nodes\":1,\"max_nodes\":1}"
alt_made() { [ "$(instances | jq '[.[] | select(.tags | index("drover-nodepool=alt"))] | length')" == 1 ]; }
wait_check $W "a plan the region lacks now: the other plan is created" alt_made
jqa "of the other plan" "$(instances)" '[.[] | select(.tags | index("drover-nodepool=alt"))][0].plan == $p' --arg p "$P2"
eq "after two 429 answers, retried: three create requests for it" "$(vcalls create "select(.plan == \"$P2\")")" 3
api DELETE /v1/clusters/vc/nodepools/alt
faults '[]'

# ---- scale to zero --------------------------------------------------------------------
api PATCH /v1/clusters/vc/nodepools/gpu -d '{"min_nodes":0}'
none_left() { [ "$(instances | jq 'length')" == 0 ]; }
wait_check $W "scale to zero: every instance is deleted" none_left

# ---- bad key --------------------------------------------------------------------------
api POST /v1/credentials -d '{"id":"bad","provider":"vultr","api_key":"WRONGKEY-0000"}'
api POST /v1/clusters -d "{\"id\":\"locked\",\"provider\":\"vultr\",\"region\":\"ewr\",\"credential\":\"bad\",\"endpoint\":\"$EP\",\"image\":\"$SNAP\"}"
U0=$(vcalls unauthorized)
api POST /v1/clusters/locked/nodepools -d "{\"id\":\"np\",\"instance_types\":[\"$P1\"],\"min_nodes\":1}"
locked() { api GET /v1/clusters/locked/nodepools/np; jq -e '.status.provider_error.class == "give_up"' >/dev/null <<<"$BODY"; }
wait_check $W "a bad API key: the nodepool shows a give_up error" locked
jqc "naming the cause" '.status.provider_error.message | contains("401")' "$BODY"
sleep 4
UB=$(( $(vcalls unauthorized) - U0 ))
if [ "$UB" -le 5 ]; then ok "no retry storm ($UB refused calls)"; else fail "no retry storm"; why "$UB refused calls"; fi
api DELETE "/v1/clusters/locked?cascade=true"
if grep -q "$KEY" "$TMP/d/droverd.log"; then fail "droverd never logs the key"; else ok "droverd never logs the key"; fi

droverd_finish vultr
logs_sanitizer_clean "vultr: the agents the user data started" "${EXTRA_AGENT_LOGS[@]}"
t_done
