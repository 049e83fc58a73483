#!/usr/bin/env bash
# selfmanaged.sh — self-managed nodes: join tokens (create, list, revoke,
# expiry), drover-agent joining with a valid, a forged, a revoked and an
# expired token; node credentials authenticate the agent API and nothing
# else; a joined node runs a replica; an agent restarted on its data dir is
# the same node; a deleted node's agent stops its replicas, forgets its
# credential and exits 3.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test
JT=/v1/clusters/sm/nodepools/np/join-tokens

# ---- helpers (this test) -----------------------------------------------------------

# agent_exit NAME: wait for agent NAME to exit; AG_RC gets its status
agent_exit()
{
    local p=${AG_PID[$1]}
    if wait_until "$W" "agent $1 to exit" eval "! pid_alive $p"; then
        wait "$p"
        AG_RC=$?
    else
        AG_RC=timeout
    fi
}

n_nodes() { nodes_json | jq length; }
node_of_token() { nodes_json | jq -r --arg t "$1" '[.[] | select(.join_token == $t)] | .[0].id // empty'; }
node_ready() { [ "$(node_state "$1")" == ready ]; }
node_gone() { api GET "/v1/nodes/$1"; [ "$ST" == 404 ]; }
forged() { echo "drvj_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
replica_ready_on() # NODE: the one replica of dep is ready on NODE
{
    replicas_json "deployment=dep" | jq -e --arg n "$1" 'length == 1 and .[0].node == $n
        and .[0].status.state == "ready" and (.[0].status.endpoint // "") != ""' >/dev/null
}
ppid_of() { sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2; }

# ---- a self-managed cluster and join tokens ---------------------------------------------
PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":5}'
status "create nodepool np (self-l4)" 201

api POST "$JT" -d '{"id":"good","ttl_seconds":3600,"description":"for a1","uses":2}'
status "create join token good" 201
GOOD=$(jq -r .secret <<<"$BODY")
jqc "join token: id, cluster, nodepool, expires_at and a drvj_ secret" \
    '.id == "good" and .cluster == "sm" and .nodepool == "np" and (.expires_at | type == "string")
     and (.secret | startswith("drvj_")) and (has("hash") | not)'
api POST "$JT" -d '{"id":"exp","ttl_seconds":60}'
status "create join token exp (ttl 60)" 201
EXPSECRET=$(jq -r .secret <<<"$BODY")
api POST "$JT" -d '{"id":"rev"}'
status "create join token rev (default ttl)" 201
REVSECRET=$(jq -r .secret <<<"$BODY")
api POST "$JT" -d '{}'
status "create a join token without id" 201
jqc "... gets a generated id" '.id | test("^[a-z0-9-]+$")'
AUTOID=$(jq -r .id <<<"$BODY")
api POST "$JT" -d '{"id":"good"}'
status "create join token good again" 409
api POST "$JT" -d '{"ttl_seconds":59}'
status "join token ttl_seconds 59" 400
error_shape "ttl 59"
api POST "$JT" -d '{"ttl":3600}'
status "join token with an unknown field" 400
api POST /v1/clusters/sm/nodepools/nope/join-tokens -d '{}'
status "join token of a missing nodepool" 404
api GET "$JT"
status "list join tokens" 200
jqc "the list has the 4 tokens" "[.items[].id] | sort == ([\"exp\",\"good\",\"rev\",\"$AUTOID\"] | sort)"
jqc "the list shows no secret and no hash" 'all(.items[]; (has("secret") | not) and (has("hash") | not))'

# ---- a valid join ----------------------------------------------------------------------------------
start_agent a1 --join-token "$GOOD"
has_node() { [ -n "$(node_of_token good)" ]; }
wait_check "$W" "agent a1 joins with a valid token" has_node
N1=$(node_of_token good)
wait_check "$W" "node $N1 becomes ready" node_ready "$N1"
api GET "/v1/nodes/$N1"
jqc "node: cluster sm, nodepool np, self-l4, registered, join_token good" \
    '.cluster == "sm" and .nodepool == "np" and .instance_type == "self-l4" and .registered == true
     and .join_token == "good"'
jqc "node status: 1 declared L4 of 24576 MiB, 4 cpus, 8192 MiB" \
    '(.status.gpus | length) == 1 and .status.gpus[0].name == "L4" and .status.gpus[0].memory_mib == 24576
     and .status.gpus[0].source == "declared" and .status.cpus == 4 and .status.memory_mib == 8192'
CRED_FILE=$TMP/agents/a1/credential
check "the agent stored its credential" test -s "$CRED_FILE"
eq "the credential file is mode 0600" "$(stat -c %a "$CRED_FILE" 2>/dev/null)" 600
CRED=$(tr -d '\n' <"$CRED_FILE")
contains "the credential is a node credential (drvn_)" "${CRED:0:5}" "drvn_"
check "a1's log says it joined" grep -q "joined as node $N1" "$TMP/agents/a1.log"
api GET "/v1/nodes?cluster=sm"
jqc "GET /v1/nodes?cluster=sm lists 1 node" '(.items | length) == 1'

# ---- what a node credential (and a join token) may not do ---------------------------------------------
for p in /v1/clusters /v1/nodes /v1/users/me /v1/replicas; do
    as "$CRED" api GET "$p"
    status "node credential: GET $p" 401
done
error_shape "node credential"
as "$CRED" api POST /v1/clusters -d '{"id":"x","provider":"local","region":"local"}'
status "node credential: POST /v1/clusters" 401
as "$GOOD" api GET /v1/clusters
status "join token: GET /v1/clusters" 401
as "$ADMIN" api POST /v1/agent/sync -d '{}'
status "admin token: POST /v1/agent/sync" 401
as "$GOOD" api POST /v1/agent/sync -d '{}'
status "join token: POST /v1/agent/sync" 401
as "$CRED" api POST /v1/agent/register -d '{}'
status "node credential: POST /v1/agent/register" 401
as "" api POST /v1/agent/sync -d '{}'
status "no token: POST /v1/agent/sync" 401
BEFORE=$(n_nodes)

# ---- a forged token ---------------------------------------------------------------------------------------
start_agent forged --join-token "$(forged)"
agent_exit forged
check "a forged token: the agent exits non-zero (got $AG_RC)" test "$AG_RC" != 0 -a "$AG_RC" != timeout
check "... and its log says the head refused" grep -qi "refused" "$TMP/agents/forged.log"
check "... and it stored no credential" test ! -e "$TMP/agents/forged/credential"
eq "... and no node was created" "$(n_nodes)" "$BEFORE"

# ---- revoke -------------------------------------------------------------------------------------------------
api DELETE "$JT/rev"
status "revoke join token rev" 200
api DELETE "$JT/rev"
status "revoke it again" 404
api GET "$JT"
jqc "rev is no longer listed" 'all(.items[]; .id != "rev")'
start_agent revoked --join-token "$REVSECRET"
agent_exit revoked
check "a revoked token: the agent exits non-zero (got $AG_RC)" test "$AG_RC" != 0 -a "$AG_RC" != timeout
check "... and its log says the head refused" grep -qi "refused" "$TMP/agents/revoked.log"
eq "... and no node was created" "$(n_nodes)" "$BEFORE"

# ---- a replica on the self-managed node -----------------------------------------------------------------------
api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","2"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000,"compute_percent":25},"cpu_millis":500,"memory_mib":512}}'
status "create model demo" 201
api POST /v1/deployments -d '{"id":"dep","model":"demo","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1}}'
status "create deployment dep on the self-managed nodepool" 201
wait_check "$W" "its replica is ready on $N1" replica_ready_on "$N1"
R=$(replicas_json "deployment=dep")
RPID=$(jq -r '.[0].status.pid' <<<"$R")
RID=$(jq -r '.[0].id' <<<"$R")
check "the replica answers /predict at its endpoint" predict_ok "$(jq -r '.[0].status.endpoint' <<<"$R")" "$RID"
eq "the replica process is a child of agent a1" "$(ppid_of "$RPID")" "${AG_PID[a1]}"

# ---- the same data dir is the same node ----------------------------------------------------------------------------
kill -TERM "${AG_PID[a1]}"
agent_exit a1
eq "a1 exits 0 on SIGTERM" "$AG_RC" 0
check "... its replica stopped" wait_until "$W" "replica $RPID to stop" pids_gone "$RPID"
check "... its credential stays" test -s "$CRED_FILE"
start_agent a1
wait_check "$W" "a1 restarted without a join token syncs as $N1" \
    eval 'grep -q "node $N1: synced" "$TMP/agents/a1.log" && node_ready "$N1"'
eq "no new node (still $BEFORE)" "$(n_nodes)" "$BEFORE"
new_pid() { replica_ready_on "$N1" && [ "$(replicas_json "deployment=dep" | jq -r '.[0].status.pid')" != "$RPID" ]; }
wait_check "$W" "the replica runs again on $N1 (a new process)" new_pid
eq "... same replica (placement kept)" "$(replicas_json "deployment=dep" | jq -r '.[0].id')" "$RID"

# ---- an expired token (expiry moved into the past while droverd is down) -------------------------------------------------
droverd_stop TERM
# an agent long-polling while droverd stops can make it abort in
# MHD_stop_daemon ("called while we have suspended connections")
check "droverd exits 0 on SIGTERM while a self-managed agent long-polls (got $DEXIT)" \
    test "$DEXIT" == 0
CHANGED=$(sqlite3 "$DDIR/drover.db" "UPDATE objects SET body = json_set(body, '\$.spec.expires_at', '2020-01-01T00:00:00Z') WHERE kind = 'jointoken' AND json_extract(body, '\$.spec.id') = 'exp'; SELECT changes();" 2>&1)
eq "the store holds join token exp (moved its expiry to 2020)" "$CHANGED" 1
droverd_start "$DDIR" --listen "127.0.0.1:$PORT" --config "$CFG" || { fail "droverd restarts"; t_done; }
api GET "$JT"
jqc "exp is listed as expiring in 2020" 'any(.items[]; .id == "exp" and (.expires_at | startswith("2020-01-01")))'
wait_check "$W" "a1 is back: $N1 ready after the restart" node_ready "$N1"
start_agent expired --join-token "$EXPSECRET"
agent_exit expired
check "an expired token: the agent exits non-zero (got $AG_RC)" test "$AG_RC" != 0 -a "$AG_RC" != timeout
check "... and its log says the token expired" grep -qi "expired" "$TMP/agents/expired.log"
check "... and it stored no credential" test ! -e "$TMP/agents/expired/credential"
eq "... and no node was created" "$(n_nodes)" "$BEFORE"
TOKEN=""
api POST /v1/agent/register -H "Authorization: Bearer $EXPSECRET" -d '{}'
TOKEN=$ADMIN
status "register with the expired token" 401
contains "... says expired" "$BODY" "expired"

# ---- delete the node: its agent stops its replicas, forgets, exits 3 ----------------------------------------------------------
RPID=$(replicas_json "deployment=dep" | jq -r '.[0].status.pid')
api DELETE "/v1/nodes/$N1"
status "delete node $N1" 200
agent_exit a1
eq "the deleted node's agent exits 3" "$AG_RC" 3
check "... its replica process stopped" wait_until "$W" "replica $RPID to stop" pids_gone "$RPID"
check "... it removed its credential" test ! -e "$CRED_FILE"
check "... its log says the head does not know it any more" grep -q "does not know this node" "$TMP/agents/a1.log"
wait_check "$W" "the node goes away" node_gone "$N1"
pending() { replicas_json "deployment=dep" | jq -e 'length == 1 and .[0].node == null and .[0].status.state == "pending"' >/dev/null; }
wait_check "$W" "the replica waits (pending) for a node" pending
as "$CRED" api POST /v1/agent/sync -d '{}'
status "the old credential: POST /v1/agent/sync" 401

# ---- rejoin on the same data dir: a new node, the replica goes there -----------------------------------------------------------
start_agent a1 --join-token "$GOOD"
new_node() { local n; n=$(node_of_token good); [ -n "$n" ] && [ "$n" != "$N1" ] && node_ready "$n"; }
wait_check "$W" "a1 rejoins with the token as a new node" new_node
N2=$(node_of_token good)
check "a new credential was stored" eval '[ -s "$CRED_FILE" ] && [ "$(cat "$CRED_FILE")" != "$CRED" ]'
wait_check "$W" "the pending replica is placed on $N2 and ready" replica_ready_on "$N2"

# ---- clean stop: the agent first, then droverd -------------------------------------------------------------------------------
kill -TERM "${AG_PID[a1]}"
agent_exit a1
eq "a1 exits 0 on SIGTERM" "$AG_RC" 0
no_replicas() { [ "$(tmp_replica_pids | wc -l)" == 0 ]; }
wait_check "$W" "no replica process is left" no_replicas
droverd_finish selfmanaged
logs_sanitizer_clean selfmanaged "${EXTRA_AGENT_LOGS[@]}"
t_done
