#!/usr/bin/env bash
# netns.sh — drover across hosts (issue 18 item 5): the head and three
# agents, each in its own network namespace with its own address on a
# bridge (itself in a namespace of its own: nothing changes in the host's
# network), TLS on (droverd --tls on its netns address, advertised).
# Agents join with the pin (--ca-hash) over that network; a man in the
# middle in a namespace of its own, presenting another certificate, is refused
# and sees no join token; a deployment of 3 replicas spread over the
# agents; one agent partitioned (its veth link down on the bridge) ->
# not_ready -> lost, its replica placed again on the others, while it
# keeps serving its local clients; healed (link up) -> it is ready again
# and stops its orphaned replica: 3 replicas, 3 replica processes.
# Needs root (ip netns) and iproute2; SKIPs without them. Namespaces are
# named drvtPID-*, and removed at exit (a previous run's, whose pid is
# gone, at start).
. "$(dirname "$0")/lib/common.bash"
skip() { echo "1..0 # SKIP netns.sh: $*"; exit 0; }
[ "$(id -u)" == 0 ] || skip "needs root (it creates network namespaces and veth pairs)"
command -v ip >/dev/null 2>&1 || skip "no 'ip' (iproute2): run scripts/install-deps"
command -v openssl >/dev/null 2>&1 || skip "no openssl: run scripts/install-deps"
# short timeouts (not_ready after 2 s without a sync, lost after 5 s) keep
# the partition lean; spread puts one replica on each agent
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 5000, "placement_policy": "spread"}'
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

# ---- the network: a bridge in namespace sw, one veth pair per host -----------------------
NSP=drvt$$                       # every namespace of this run: drvtPID-NAME
NET=10.77.$(($$ % 200 + 20))     # its /24 (private to the bridge: no clash with the host)
HOSTS=(head a1 a2 a3 mitm)
declare -A IP=([head]=$NET.1 [a1]=$NET.11 [a2]=$NET.12 [a3]=$NET.13 [mitm]=$NET.66)

# shellcheck source=lib/netns.bash
. "$(dirname "$0")/lib/netns.bash"
_netns_cleanup()
{
    _workers_cleanup
    ns_remove "$NSP"
}
trap _netns_cleanup EXIT
ns_remove_stale drvt

ip netns add "$NSP-sw" 2>"$TMP/.err" || skip "ip netns add fails here: $(<"$TMP/.err")"
check "five namespaces on one bridge ($NET.0/24)" net_setup
link() { ip -n "$NSP-sw" link set "$1" "$2"; }   # link HOST up|down: its cable

# droverd and the CLI run in the head's namespace; so do the test's curl
# calls (api, predict_ok): the host's namespace has no route to the bridge
for b in droverd drover; do
    real=$DROVERD
    [ $b == drover ] && real=$DROVER
    printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$NSP-head" "$real" >"$TMP/$b-in-head"
    chmod +x "$TMP/$b-in-head"
done
DROVERD=$TMP/droverd-in-head
DROVER=$TMP/drover-in-head
curl() { ip netns exec "$NSP-head" curl "$@"; }

HURL=https://${IP[head]}:7480
droverd_start "$TMP/d" --tls --config "$CFG" --listen "${IP[head]}:7480" --advertise-url "$HURL" || exit 1
CA=$TMP/d/tls/ca.crt
PIN=$(tr -d '\n' <"$TMP/d/tls/ca.hash")
export CURL_CA_BUNDLE=$CA
eq "droverd publishes its netns address over TLS" "$URL" "$HURL"
check "the server certificate names the netns address" \
    eval "openssl x509 -in '$TMP/d/tls/server.crt' -noout -ext subjectAltName | grep -q 'IP Address:${IP[head]}'"
api GET /healthz
status "GET /healthz over TLS from the head's namespace" 200
check "an agent's namespace reaches the head's port over the bridge" reach a1 "${IP[head]}" 7480

api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":5}'
status "create nodepool np" 201
cli --ca-file "$CA" nodepool join-token sm/np --id j1
rc "drover nodepool join-token over TLS" 0
contains "... prints the agent command for the head's advertised address" "$OUT" "--server $HURL"
contains "... with the pin" "$OUT" "--ca-hash $PIN"
S1=$(sed -n 's/^secret: *//p' <<<"$OUT")
secret_of() # ID: a new join token's secret (one per agent: tokens may be one-use)
{
    cli --ca-file "$CA" -o json nodepool join-token sm/np --id "$1"
    jq -r .secret <<<"$OUT"
}

# start_ns_agent NAME HOST [drover-agent args]: an agent in HOST's namespace,
# replicas advertised on HOST's address; data dir $TMP/agents/NAME
start_ns_agent()
{
    local name=$1 host=$2
    shift 2
    mkdir -p "$TMP/agents"
    # ip netns exec execs the agent: $! is the agent's pid
    ip netns exec "$NSP-$host" "$BIN_DIR/drover-agent" --data-dir "$TMP/agents/$name" \
        --advertise-addr "${IP[$host]}" --gpus 1xL4:24576 --cpus 4 --memory-mib 8192 "$@" \
        >>"$TMP/agents/$name.log" 2>&1 </dev/null &
    AG_PID[$name]=$!
    _BG_PIDS+=("$!")
    EXTRA_AGENT_LOGS+=("$TMP/agents/$name.log")
}
node_is() { [ "$(node_state "$1")" == "$2" ]; }
agent_stop() # NAME: SIGTERM, and reap it
{
    local p=${AG_PID[$1]}
    kill -TERM "$p" 2>/dev/null
    wait_until "$W" "agent $1 to exit" eval "! pid_alive $p"
    wait "$p" 2>/dev/null
}

# ---- a man in the middle in its own namespace --------------------------------------------
M=${IP[mitm]}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=mitm \
    -addext "subjectAltName=IP:$M" -keyout "$TMP/mitm.key" -out "$TMP/mitm.crt" 2>/dev/null
ip netns exec "$NSP-mitm" python3 -S "$DROVER_SRC/t/lib/tls_mitm.py" --target "$HURL" --listen "$M" \
    --cert "$TMP/mitm.crt" --key "$TMP/mitm.key" --port-file "$TMP/mitm.port" \
    --log "$TMP/mitm.log" 2>>"$TMP/mitm.err" &
MITM=$!
_BG_PIDS+=("$MITM")
wait_until 30 "the proxy to listen" test -s "$TMP/mitm.port"
start_ns_agent mitm a1 --server "https://$M:$(<"$TMP/mitm.port")" --join-token "$S1" --ca-hash "$PIN"
refused() { grep -qs "not signed by the trusted CA" "$TMP/agents/mitm.log"; }
wait_check "$W" "an agent sent through a MITM in another namespace refuses its certificate" refused
check "... the proxy relayed the CA fetch (so the pin itself matched)" grep -q "GET /v1/tls/ca" "$TMP/mitm.log"
check "... and never saw the join token" eval "! grep -qF '$S1' '$TMP/mitm.log'"
check "... nor any part of it" eval "! grep -qF '${S1:5:16}' '$TMP/mitm.log'"
check "... nor a register call" eval "! grep -q 'agent/register' '$TMP/mitm.log'"
agent_stop mitm
eq "... no node joined" "$(nodes_json | jq length)" 0
kill -TERM "$MITM"
wait "$MITM" 2>/dev/null

# ---- three agents join with the pin over the bridge ---------------------------------------
start_ns_agent a1 a1 --server "$HURL" --join-token "$S1" --ca-hash "$PIN"   # the token the MITM held
start_ns_agent a2 a2 --server "$HURL" --join-token "$(secret_of j2)" --ca-hash "$PIN"
start_ns_agent a3 a3 --server "$HURL" --join-token "$(secret_of j3)" --ca-hash "$PIN"
three_ready() { nodes_json | jq -e 'length == 3 and all(.[]; .status.state == "ready")' >/dev/null; }
wait_check "$W" "three agents in three namespaces join over TLS with the pin and are ready" three_ready
node_of() { nodes_json | jq -r --arg t "$1" '.[] | select(.join_token == $t) | .id'; }
N1=$(node_of j1) N2=$(node_of j2) N3=$(node_of j3)
check "... a1 joined with the token the MITM never saw" test -n "$N1"
check "... each kept the pinned CA" eval "cmp -s '$CA' '$TMP/agents/a1/ca.crt' && cmp -s '$CA' '$TMP/agents/a3/ca.crt'"
api GET "/v1/nodes/$N3"
eq "... a3 reports its own netns address" "$(jq -r '.status.address // empty' <<<"$BODY")" "${IP[a3]}"

# ---- a deployment over the three ---------------------------------------------------------
api POST /v1/models -d '{"id":"fast","runtime":{"command":["drover-demo-model","--weights-mib","1"]},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model fast" 201
api POST /v1/deployments -d '{"id":"web","model":"fast","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":3,"max_replicas":3}}'
status "create deployment web (3 replicas)" 201
# settled [AVOID]: exactly 3 replicas of web, all ready with an endpoint, none on AVOID
settled()
{
    replicas_json "deployment=web" | jq -e --arg a "${1-}" 'length == 3 and all(.[];
        .status.state == "ready" and (.status.endpoint // "") != "" and .node != $a)' >/dev/null
}
wait_check "$W" "web has 3 ready replicas" settled
REPS=$(replicas_json "deployment=web")
jqc "... one on each agent (spread)" '[.[].node] | unique | length == 3' "$REPS"
R3=$(jq -r --arg n "$N3" '.[] | select(.node == $n) | .id' <<<"$REPS")
E3=$(jq -r --arg n "$N3" '.[] | select(.node == $n) | .status.endpoint' <<<"$REPS")
P3=$(jq -r --arg n "$N3" '.[] | select(.node == $n) | .status.pid' <<<"$REPS")
contains "... a3's replica listens on a3's address" "$E3" "http://${IP[a3]}:"
check "... and answers the head's namespace across the bridge" predict_ok "$E3" "$R3"
local_ok() { in_ns a3 env -u CURL_CA_BUNDLE curl -s -m 10 -X POST -H 'Content-Type: application/json' \
    -d '{"inputs":"local"}' "$E3/predict" | jq -e --arg r "$R3" '.replica == $r' >/dev/null 2>&1; }

# ---- partition a3 ------------------------------------------------------------------------
link a3 down
wait_check "$W" "the head marks a3's node lost" node_is "$N3" lost
# its events say how it got there (a poll could miss the not_ready window)
node_events() { api GET "/v1/events?kind=node&object=$1"; jq -c '[.items[].type]' <<<"$BODY"; }
contains "... after not_ready (its events)" "$(node_events "$N3")" '"not_ready","lost"'
wait_check "$W" "web's replica is placed again: 3 ready, none on a3" settled "$N3"
REPS=$(replicas_json "deployment=web")
eq "... on a1 and a2" "$(jq -r '[.[].node] | unique | sort | join(" ")' <<<"$REPS")" \
    "$(printf '%s\n' "$N1" "$N2" | sort | paste -sd' ')"
jqc "... and a3's replica is no longer listed" "all(.[]; .id != \"$R3\")" "$REPS"
check "the head's namespace cannot reach a3's replica" eval "! reach head '${IP[a3]}' '${E3##*:}'"
check "partitioned a3 keeps serving its local clients (curl from its namespace)" local_ok
check "... its replica process still runs" pid_alive "$P3"

# ---- heal ---------------------------------------------------------------------------------
link a3 up
HEALED=$SECONDS
wait_check "$W" "healed: a3's node is ready again" node_is "$N3" ready
contains "... (its events: lost, then ready)" "$(node_events "$N3")" '"lost","ready"'
echo "# a3 synced again $((SECONDS - HEALED)) s after its link came back"
orphan_stopped() { ! pid_alive "$P3"; }
wait_check "$W" "... and a3 stops its orphaned replica" orphan_stopped
check "... which no longer answers on a3" eval "! local_ok"
wait_check "$W" "web: 3 ready replicas" settled
REPS=$(replicas_json "deployment=web")
jqc "... 3 distinct replica ids, none of them a3's old one" \
    "([.[].id] | unique | length) == 3 and all(.[]; .id != \"$R3\")" "$REPS"
three_procs() { [ "$(tmp_replica_pids | grep -c .)" == 3 ]; }
wait_check "$W" "... and 3 replica processes on all hosts together (no duplicate)" three_procs
all_answer() # REPLICAS: each answers POST /predict at its endpoint
{
    local e r
    while read -r e r; do
        predict_ok "$e" "$r" || return 1
    done < <(jq -r '.[] | "\(.status.endpoint) \(.id)"' <<<"$1")
}
check "... each listed replica answers at its endpoint" all_answer "$REPS"

for a in a1 a2 a3; do agent_stop "$a"; done
logs_sanitizer_clean netns "$TMP"/agents/*.log
droverd_finish netns
t_done
