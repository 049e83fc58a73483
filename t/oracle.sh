#!/usr/bin/env bash
# oracle.sh — the oracle provider end to end against t/lib/oci_double.py (a
# strict double of the OCI Core Services API 20160918 on loopback; no
# emulator exists), never real OCI. An API key pair is made here with
# openssl: the double verifies every request's signature with its public half.
#   - the double itself is strict: requests signed here with openssl pass,
#     another key, a stale date, a wrong x-content-sha256, an unknown field,
#     preemptible bare metal and non-base64 user data are refused;
#   - an oracle credential's private key is never shown by the API nor
#     logged; a key that cannot sign, a fingerprint that is not the key's
#     and missing fields are refused at write time;
#   - min_nodes: 2 -> two signed LaunchInstance of the right shape, tags,
#     base64 user_data and each its own opc-retry-token; the double boots
#     the user_data when the instance is RUNNING: real agents join;
#   - a head restart adopts the instances: no new launch; ListInstances
#     paging (opc-next-page) is followed;
#   - an orphan instance (tagged by this head, no node) is terminated;
#   - spot_with_fallback: "Out of host capacity" in every availability
#     domain -> the next one, then on demand (preemptibleInstanceConfig
#     first); TooManyRequests and a lost answer -> retried with the same
#     retry token, one instance; LimitExceeded -> the nodepool's other
#     shape; spot on a bare-metal shape -> on demand without a spot call;
#   - scale to zero -> TerminateInstance, TERMINATING -> TERMINATED;
#   - a key OCI does not know (401 NotAuthenticated) -> one clear give_up
#     error, no retry storm.
# shellcheck disable=SC2086
. "$(dirname "$0")/lib/common.bash"
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 3000, "node_lost_ms": 8000}'
workers_init
W=${T_WAIT:-120}
DOUBLE=$DROVER_SRC/t/lib/oci_double.py

if ! python3 -c 'import cryptography' 2>/dev/null; then
    fail "python3-cryptography is installed (the OCI double verifies signatures with it)"
    t_done
fi
BG=()
bg() { "$@" & BG+=($!); }
stop_bg() { local p; for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done; }
trap 'stop_bg; _workers_cleanup' EXIT
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---- an API key pair, and the double ------------------------------------------------
O=$TMP/oci
mkdir -p "$O" "$TMP/vm"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$O/key.pem" 2>/dev/null
openssl pkey -in "$O/key.pem" -pubout -out "$O/pub.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$O/other.pem" 2>/dev/null
fpr() { openssl pkey -in "$1" -pubout -outform DER 2>/dev/null | openssl md5 -c | sed 's/^.*= //'; }
FP=$(fpr "$O/key.pem")
FP2=$(fpr "$O/other.pem")
TEN=ocid1.tenancy.oc1..aaaadrovertest
USR=ocid1.user.oc1..aaaadroveruser
COMP=ocid1.compartment.oc1..aaaadrovercomp
IMG=ocid1.image.oc1.phx.aaaadroverimage
SUB=ocid1.subnet.oc1.phx.aaaadroversubnet
AD1=Uocm:PHX-AD-1
AD2=Uocm:PHX-AD-2
OPORT=$(free_port)
jq -n --arg t "$TEN" --arg u "$USR" --arg f "$FP" --arg p "$O/pub.pem" --arg c "$COMP" \
    --arg a1 "$AD1" --arg a2 "$AD2" --arg i "$IMG" --arg s "$SUB" --arg d "$TMP/vm" \
    '{tenancy: $t, user: $u, fingerprint: $f, public_key: $p, compartment: $c,
      ads: [$a1, $a2], shapes: ["VM.GPU.A10.1", "BM.GPU.A10.4"], images: [$i], subnets: [$s],
      provision_ms: 300, terminate_ms: 300, terminated_keep_s: 5,
      boot: {dir: $d, env: {DROVER_GPUS: "1xA10:24576", DROVER_ADVERTISE_ADDR: "127.0.0.1"}}}' >"$O/config.json"
echo '[]' >"$O/faults.json"
: >"$O/calls.log"
bg python3 "$DOUBLE" serve "$OPORT" "$O"
wait_until 30 "the OCI double listens" port_up "$OPORT" || { fail "the OCI double starts"; t_done; }
ocalls() { jq -s "[.[] | select(.call == \"$1\") ${2:+| select($2)}] | length" "$O/calls.log" 2>/dev/null || echo 0; }
instances() { curl -s "http://127.0.0.1:$OPORT/_test/instances" || echo '[]'; }
live() { instances | jq "[.[] | select(.lifecycleState != \"TERMINATED\" and .lifecycleState != \"TERMINATING\") ${1:+| select($1)}]"; }
faults() { echo "$1" >"$O/faults.json"; }
jqa()
{
    local name=$1 doc=$2 filter=$3
    shift 3
    if jq -e "$@" "$filter" >/dev/null 2>&1 <<<"$doc"; then ok "$name"; else fail "$name"; why "jq '$filter' is false on: $doc"; fi
}
cred() {   # cred ID KEYFILE FINGERPRINT: the credential's JSON
    jq -nc --arg id "$1" --rawfile k "$2" --arg f "$3" --arg t "$TEN" --arg u "$USR" \
        '{id: $id, provider: "oracle", tenancy: $t, user: $u, fingerprint: $f, private_key: $k}'
}

export DROVER_OCI_PAGE_SIZE=1   # listings of several pages
droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
HEAD_ID=$(tr -d '\n' <"$TMP/d/head-id" 2>/dev/null)
EP=http://127.0.0.1:$OPORT

# ---- the double is strict: signatures made here with openssl ------------------------
T="/20160918/instances?compartmentId=$COMP&limit=1"
H="127.0.0.1:$OPORT"
sig() { printf 'date: %s\n(request-target): get %s\nhost: %s' "$2" "$T" "$H" | openssl dgst -sha256 -sign "$1" | base64 -w0; }
raw_get() {   # raw_get KEY DATE: the status of a ListInstances signed with KEY
    local a
    a=$(printf 'Signature version="1",headers="date (request-target) host",keyId="%s/%s/%s",algorithm="rsa-sha256",signature="%s"' "$TEN" "$USR" "$FP" "$(sig "$1" "$2")")
    curl -s -o /dev/null -w '%{http_code}' -H "Date: $2" -H "Authorization: $a" "http://$H$T"
}
NOW=$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')
OLD=$(LC_ALL=C date -u -d '-10 min' '+%a, %d %b %Y %H:%M:%S GMT')
eq "the double takes a request signed by openssl with the key" "$(raw_get "$O/key.pem" "$NOW")" 200
eq "it refuses one signed with another key under that keyId" "$(raw_get "$O/other.pem" "$NOW")" 401
eq "and one dated 10 minutes ago (clock skew)" "$(raw_get "$O/key.pem" "$OLD")" 401
raw_post() {   # raw_post BODY [SHA]: the status of a LaunchInstance signed with the key
    local body=$1 sha=${2:-} ss a
    [ -n "$sha" ] || sha=$(printf '%s' "$body" | openssl dgst -sha256 -binary | base64 -w0)
    ss=$(printf 'date: %s\n(request-target): post /20160918/instances\nhost: %s\ncontent-length: %s\ncontent-type: application/json\nx-content-sha256: %s' "$NOW" "$H" "${#body}" "$sha")
    a=$(printf 'Signature version="1",headers="date (request-target) host content-length content-type x-content-sha256",keyId="%s/%s/%s",algorithm="rsa-sha256",signature="%s"' "$TEN" "$USR" "$FP" "$(printf '%s' "$ss" | openssl dgst -sha256 -sign "$O/key.pem" | base64 -w0)")
    curl -s -o /dev/null -w '%{http_code}' -H "Date: $NOW" -H "Authorization: $a" -H 'Content-Type: application/json' \
        -H "x-content-sha256: $sha" --data-binary "$body" "http://$H/20160918/instances"
}
LB=$(jq -nc --arg a "$AD1" --arg c "$COMP" --arg i "$IMG" --arg s "$SUB" '{availabilityDomain: $a, compartmentId: $c, shape: "VM.GPU.A10.1",
    sourceDetails: {sourceType: "image", imageId: $i}, createVnicDetails: {subnetId: $s}, freeformTags: {t: "1"}}')
eq "a launch body with an unknown field is refused (400)" "$(raw_post "$(jq -c '.sourceDetails.bogus = 1' <<<"$LB")")" 400
eq "a preemptible bare-metal launch is refused (400)" "$(raw_post "$(jq -c '.shape = "BM.GPU.A10.4" | .preemptibleInstanceConfig = {preemptionAction: {type: "TERMINATE"}}' <<<"$LB")")" 400
eq "user_data that is not base64 is refused (400)" "$(raw_post "$(jq -c '.metadata = {user_data: "not base64!"}' <<<"$LB")")" 400
eq "a signed x-content-sha256 that is not the body's is refused (401)" "$(raw_post "$LB" "$(printf x | openssl dgst -sha256 -binary | base64 -w0)")" 401
eq "and none of those made an instance" "$(instances | jq length)" 0
eq "the same body without the faults is taken (200)" "$(raw_post "$LB")" 200
curl -s -X POST "http://127.0.0.1:$OPORT/_test/remove" -d "$(instances | jq -c '{id: .[0].id}')" >/dev/null
: >"$O/calls.log"

# ---- credentials -------------------------------------------------------------------
api POST /v1/credentials -d "$(cred bad "$O/key.pem" "$FP2")"
eq "a fingerprint that is not the key's is refused" "$ST" 400
jqc "naming the field" '.error.field == "fingerprint"' "$BODY"
printf -- '-----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY-----\n' "$(head -c 300 /dev/zero | base64 -w 64)" >"$O/junk.pem"
api POST /v1/credentials -d "$(cred bad "$O/junk.pem" "$FP")"
eq "a private key that cannot sign is refused" "$ST" 400
jqc "naming private_key" '.error.field == "private_key"' "$BODY"
api POST /v1/credentials -d "$(cred bad "$O/key.pem" "$FP" | jq -c 'del(.user)')"
eq "a credential without user is refused" "$ST" 400
api POST /v1/credentials -d "$(cred bad "$O/key.pem" "$FP" | jq -c '.api_key = "x12345678"')"
eq "a vultr field on an oracle credential is refused" "$ST" 400
api POST /v1/credentials -d "$(cred oc "$O/key.pem" "$FP")"
eq "an oracle credential is created" "$ST" 201
api GET /v1/credentials/oc
if grep -q "PRIVATE KEY" <<<"$BODY"; then fail "the API never shows the key"; why "$BODY"; else ok "the API never shows the key"; fi
jqa "the key shows as hidden, the OCIDs as given" "$BODY" '.private_key == "(hidden)" and .tenancy == $t' --arg t "$TEN"
api POST /v1/clusters -d '{"id":"x","provider":"aws","region":"us-east-1","compartment":"ocid1.compartment.oc1..x"}'
eq "compartment on an aws cluster is refused" "$ST" 400
CL=$(jq -nc --arg e "$EP" --arg c "$COMP" --arg a1 "$AD1" --arg a2 "$AD2" --arg i "$IMG" --arg s "$SUB" --arg u "$URL" \
    '{id: "oc", provider: "oracle", region: "us-phoenix-1", credential: "oc", endpoint: $e, compartment: $c,
      availability_domains: [$a1, $a2], image: $i, subnet: $s, head_url: $u, orphan_grace_seconds: 2,
      security_group: "ocid1.networksecuritygroup.oc1.phx.aaaadrover"}')
api POST /v1/clusters -d "$(jq -c '.compartment = "not-an-ocid"' <<<"$CL")"
eq "a compartment that is not an OCID is refused" "$ST" 400
api POST /v1/clusters -d "$CL"
eq "an oracle cluster is created" "$ST" 201

# ---- min_nodes: 2 -------------------------------------------------------------------
api POST /v1/clusters/oc/nodepools -d '{"id":"gpu","instance_types":["VM.GPU.A10.1"],"min_nodes":2,"max_nodes":3,"node_scale_down_delay_seconds":1}'
eq "nodepool created" "$ST" 201
two() { [ "$(live '.freeformTags["drover-nodepool"] == "gpu"' | jq length)" == 2 ]; }
wait_check $W "min_nodes 2: two instances launched" two
eq "exactly two launches, VM.GPU.A10.1, on demand, in the first AD" "$(ocalls launch ".status == 200 and .shape == \"VM.GPU.A10.1\" and (.preemptible | not) and .ad == \"$AD1\"")" 2
eq "the cluster's security group as the VNIC's nsgIds" "$(ocalls launch '.nsg_ids == ["ocid1.networksecuritygroup.oc1.phx.aaaadrover"]')" 2
eq "each with its own opc-retry-token" "$(jq -s '[.[] | select(.call == "launch") | .retry_token] | unique | length' "$O/calls.log")" 2
eq "every request's signature verified" "$(ocalls unauthenticated)" 0
INST=$(live)
jqa "freeformTags name head, owner, cluster, nodepool and node" "$INST" \
    'all(.[]; .freeformTags["drover-head"] == $h and .freeformTags["drover-owner"] == "admin" and .freeformTags["drover-cluster"] == "oc" and (.freeformTags["drover-node"] | startswith("gpu-")))' --arg h "$HEAD_ID"
jqa "user_data (sent base64) starts drover-agent with the head URL and a join token" "$INST" \
    'all(.[]; (.user_data | startswith("#!/bin/sh")) and (.user_data | contains("exec drover-agent --server \u0027" + $u + "\u0027 --join-token \u0027drvj_")))' --arg u "$URL"
ready_np() { [ "$(nodes_json | jq --arg p "$1" --argjson n "$2" '[.[] | select(.nodepool == $p and .status.state == "ready")] | length == $n')" == true ]; }
wait_check $W "the agents the booted user_data started join as the two nodes, ready" ready_np gpu 2
jqa "the nodes carry their instance OCIDs" "$(nodes_json)" '[.[] | .instance_id] | sort == ([$i[].id] | sort)' --argjson i "$INST"

# ---- restart adopts; paging ---------------------------------------------------------
BEFORE=$(ocalls launch)
droverd_stop TERM
NL=$(ocalls list)
droverd_start "$TMP/d" --listen "${URL#http://}" --config "$CFG" || { fail "droverd restarts"; t_done; }
relisted() { [ "$(ocalls list)" -gt "$NL" ]; }
wait_check $W "after the restart the head lists its instances" relisted
wait_check $W "both nodes are ready again" ready_np gpu 2
eq "the restart launched nothing" "$(ocalls launch)" "$BEFORE"
eq "opc-next-page paging is followed" "$([ "$(ocalls list '.page != ""')" -ge 1 ] && echo yes)" yes

# ---- orphan -------------------------------------------------------------------------
ORPH=$(curl -s -X POST "http://127.0.0.1:$OPORT/_test/create" -d "$(jq -nc --arg h "$HEAD_ID" '{tags: {"drover-head": $h, "drover-owner": "admin", "drover-node": "ghost"}}')" | jq -r .id)
orphan_gone() { [ "$(live ".id == \"$ORPH\"" | jq length)" == 0 ]; }
wait_check $W "an instance tagged by this head with no node is terminated" orphan_gone

# ---- capacity: next AD, then on demand ----------------------------------------------------
faults "[{\"call\":\"launch\",\"preemptible\":true,\"error\":\"capacity\"},
         {\"call\":\"launch\",\"nodepool\":\"spot\",\"ad\":\"$AD1\",\"error\":\"capacity\"}]"
api POST /v1/clusters/oc/nodepools -d '{"id":"spot","instance_types":["VM.GPU.A10.1"],"capacity_type":"spot_with_fallback","min_nodes":1,"max_nodes":1,"node_scale_down_delay_seconds":1}'
fell_back() { [ "$(live '.freeformTags["drover-nodepool"] == "spot"' | jq length)" == 1 ]; }
wait_check $W "out of host capacity everywhere for spot: an on-demand instance is made" fell_back
SP=$(jq -sc '[.[] | select(.call == "launch" and .nodepool == "spot")]' "$O/calls.log")
jqa "preemptible first in AD-1 then AD-2, then on demand AD-1 (out too) then AD-2" "$SP" \
    '[.[] | [.preemptible, .ad, .injected]] == [[true, $a1, "capacity"], [true, $a2, "capacity"], [false, $a1, "capacity"], [false, $a2, null]]' --arg a1 "$AD1" --arg a2 "$AD2"
jqc "the spot nodepool's node is on demand" 'length == 1 and .[0].capacity_type == "on_demand"' \
    "$(nodes_json | jq '[.[] | select(.nodepool == "spot" and (.terminating | not))]')"
api DELETE "/v1/clusters/oc/nodepools/spot"
faults '[]'

# ---- TooManyRequests and a lost answer: the same retry token, one instance ----------------
faults '[{"call":"launch","nodepool":"retry","error":"throttle","times":2},
         {"call":"launch","nodepool":"retry","error":"lost_answer","times":1}]'
api POST /v1/clusters/oc/nodepools -d '{"id":"retry","instance_types":["VM.GPU.A10.1"],"min_nodes":1,"max_nodes":1,"node_scale_down_delay_seconds":1}'
retry_made() { [ "$(nodes_json | jq '[.[] | select(.nodepool == "retry" and .instance_id != null)] | length')" == 1 ]; }
wait_check $W "after two 429s and a lost answer the node has its instance" retry_made
RT=$(jq -sc '[.[] | select(.call == "launch" and .nodepool == "retry")]' "$O/calls.log")
jqa "four tries with one retry token; the last answered from the first launch" "$RT" \
    'length == 4 and ([.[].retry_token] | unique | length) == 1 and [.[].injected] == ["throttle", "throttle", "lost_answer", null] and .[3].replayed == true'
eq "and exactly one instance" "$(instances | jq '[.[] | select(.freeformTags["drover-nodepool"] == "retry")] | length')" 1
api DELETE /v1/clusters/oc/nodepools/retry

# ---- LimitExceeded -> the other shape; spot on bare metal -> on demand, no spot call -------
faults '[{"call":"launch","nodepool":"lim","shape":"VM.GPU.A10.1","error":"limit"}]'
api POST /v1/clusters/oc/nodepools -d '{"id":"lim","instance_types":["VM.GPU.A10.1","BM.GPU.A10.4"],"capacity_type":"spot_with_fallback","min_nodes":1,"max_nodes":1,"node_scale_down_delay_seconds":1}'
lim_made() { [ "$(live '.freeformTags["drover-nodepool"] == "lim"' | jq length)" == 1 ]; }
wait_check $W "LimitExceeded on a shape: the other shape is launched" lim_made
jqa "on demand BM.GPU.A10.4, without a preemptibleInstanceConfig" "$(live '.freeformTags["drover-nodepool"] == "lim"')" \
    '.[0].shape == "BM.GPU.A10.4" and (.[0] | has("preemptibleInstanceConfig") | not)'
eq "no preemptible launch of a bare-metal shape was sent" "$(ocalls launch '.shape == "BM.GPU.A10.4" and .preemptible')" 0
api GET /v1/clusters/oc/nodepools/lim
api DELETE /v1/clusters/oc/nodepools/lim
faults '[]'

# ---- scale to zero --------------------------------------------------------------------
api PATCH /v1/clusters/oc/nodepools/gpu -d '{"min_nodes":0}'
none_left() { [ "$(instances | jq '[.[] | select(.lifecycleState != "TERMINATED")] | length')" == 0 ]; }
wait_check $W "scale to zero: every instance is terminated (TERMINATING -> TERMINATED)" none_left
eq "through TerminateInstance" "$([ "$(ocalls terminate '.status == 204')" -ge 2 ] && echo yes)" yes
no_nodes() { [ "$(nodes_json | jq 'length')" == 0 ]; }
wait_check $W "and their nodes are gone" no_nodes

# ---- a key OCI does not know: 401 -> give up, no storm -----------------------------------
api POST /v1/credentials -d "$(cred unknown "$O/other.pem" "$FP2")"
eq "a credential with a key OCI never saw is accepted (it signs)" "$ST" 201
U0=$(ocalls unauthenticated)
api POST /v1/clusters -d "$(jq -c '.id = "locked" | .credential = "unknown"' <<<"$CL")"
api POST /v1/clusters/locked/nodepools -d '{"id":"np","instance_types":["VM.GPU.A10.1"],"min_nodes":1}'
locked() { api GET /v1/clusters/locked/nodepools/np; jq -e '.status.provider_error.class == "give_up"' >/dev/null <<<"$BODY"; }
wait_check $W "401 NotAuthenticated: the nodepool shows a give_up error" locked
jqc "naming the cause" '.status.provider_error.message | contains("NotAuthenticated")' "$BODY"
sleep 3
UB=$(( $(ocalls unauthenticated) - U0 ))
if [ "$UB" -le 6 ]; then ok "no retry storm ($UB refused calls)"; else fail "no retry storm"; why "$UB refused calls"; fi
api DELETE "/v1/clusters/locked?cascade=true"

api GET /metrics
if grep -qE '^drover_oracle_api_calls_total [1-9]' <<<"$BODY"; then ok "/metrics counts the oracle calls"; else fail "/metrics counts the oracle calls"; why "$(grep oracle <<<"$BODY")"; fi
LEAK=0
for k in "$O/key.pem" "$O/other.pem"; do grep -qF "$(sed -n 2p "$k")" "$TMP/d/droverd.log" && LEAK=1; done
grep -q "PRIVATE KEY" "$TMP/d/droverd.log" && LEAK=1
eq "droverd never logs a private key" "$LEAK" 0

droverd_finish oracle
EXTRA_AGENT_LOGS+=("$TMP"/vm/*/agent.log)
logs_sanitizer_clean "oracle: the agents the user data started" "${EXTRA_AGENT_LOGS[@]}"
t_done
