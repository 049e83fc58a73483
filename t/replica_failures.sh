#!/usr/bin/env bash
# replica_failures.sh — replicas that go wrong, as users see it: one that
# crashes at start is restarted with growing backoff and reported (restarts,
# last exit, reason, log tail); one that never becomes healthy is reported
# failed with its log tail once startup_timeout_seconds passes; replica logs
# through GET /v1/deployments/{d}/logs (all replicas, or one from an offset
# with X-Drover-Next-Offset).
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

# ---- helpers (this test) -----------------------------------------------------------

rep() { replicas_json "deployment=$1" | jq -c '.[0] // {}'; }   # the one replica of a deployment
rfield() { rep "$1" | jq -r "$2 // empty"; }

# logs_get PATH: GET with headers; LOG_ST, LOG_BODY, LOG_NEXT
logs_get()
{
    LOG_ST=$(curl -s -g -o "$TMP/.log" -D "$TMP/.loghdr" -w '%{http_code}' \
        -H "Authorization: Bearer $ADMIN" "$URL$1")
    LOG_BODY=$(cat "$TMP/.log")
    LOG_LEN=$(stat -c %s "$TMP/.log")
    LOG_NEXT=$(grep -i '^X-Drover-Next-Offset:' "$TMP/.loghdr" | head -1 | sed -e 's/^[^:]*:[[:space:]]*//' -e 's/\r$//')
    LOG_CT=$(grep -i '^Content-Type:' "$TMP/.loghdr" | head -1 | sed -e 's/^[^:]*:[[:space:]]*//' -e 's/\r$//')
}

model() # ID STARTUP_TIMEOUT ARGS...: a demo-model model with a 4000 MiB / 20 % share
{
    local id=$1 to=$2
    shift 2
    local cmd
    cmd=$(printf '%s\n' drover-demo-model --weights-mib 2 "$@" | jq -R . | jq -sc .)
    api POST /v1/models -d "{\"id\":\"$id\",\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":$to},\"resources\":{\"gpu\":{\"count\":1,\"memory_mib\":4000,\"compute_percent\":20},\"cpu_millis\":250,\"memory_mib\":256}}"
    status "create model $id (${*:-no extra flags})" 201
    [ "$ST" == 201 ] || t_done
    api POST /v1/deployments -d "{\"id\":\"$id\",\"model\":\"$id\",\"nodepools\":[{\"cluster\":\"c1\",\"nodepool\":\"np1\"}],\"autoscale\":{\"min_replicas\":1}}"
    status "create deployment $id" 201
    [ "$ST" == 201 ] || t_done
}

# ---- one node, three deployments ---------------------------------------------------------
droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster c1" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-l4"],"min_nodes":1,"max_nodes":1}'
status "create nodepool np1 (1 x local-l4)" 201
model good 60
model crash 60 --fail-start
model stuck 3 --never-ready

# ---- a healthy one, and its logs ----------------------------------------------------------------
good_ready() { [ "$(rfield good .status.state)" == ready ]; }
wait_check "$W" "good: the replica becomes ready" good_ready
G=$(rep good)
GID=$(jq -r .id <<<"$G")
GNODE=$(jq -r .node <<<"$G")
check "good: answers /predict at its endpoint" predict_ok "$(jq -r .status.endpoint <<<"$G")" "$GID"
jqc "good: a ready replica reports no reason, no log tail" \
    '(.status.reason // "") == "" and (.status.log_tail // "") == "" and .status.restarts == 0' "$G"

logs_get /v1/deployments/good/logs
eq "GET /v1/deployments/good/logs -> 200" "$LOG_ST" 200
contains "the logs are text/plain" "$LOG_CT" "text/plain"
contains "the logs have a header for the replica" "$LOG_BODY" "==> replica $GID (node $GNODE) <=="
contains "the logs have the demo model's 'listening on port' line" "$LOG_BODY" "listening on port"
contains "... and its 'ready' line" "$LOG_BODY" "demo-model: ready"

logs_get "/v1/deployments/good/logs?replica=$GID&offset=0"
eq "one replica from offset 0 -> 200" "$LOG_ST" 200
check "X-Drover-Next-Offset is a number ('$LOG_NEXT')" eval '[[ "$LOG_NEXT" =~ ^[0-9]+$ ]]'
eq "X-Drover-Next-Offset = offset 0 + the bytes returned" "$LOG_NEXT" "$LOG_LEN"
contains "from offset 0: 'listening on port'" "$LOG_BODY" "listening on port"
if [[ "$LOG_BODY" == *"==> replica"* ]]; then
    fail "one replica's log comes without the per-replica header"
else
    ok "one replica's log comes without the per-replica header"
fi
NEXT=$LOG_NEXT
FIRST=$LOG_BODY
logs_get "/v1/deployments/good/logs?replica=$GID&offset=$NEXT"
eq "from X-Drover-Next-Offset -> 200" "$LOG_ST" 200
check "from X-Drover-Next-Offset: only what came after (${LOG_LEN} bytes), next >= previous" \
    eval '[[ "$LOG_NEXT" =~ ^[0-9]+$ ]] && [ "$LOG_NEXT" -eq $((NEXT + LOG_LEN)) ]'
logs_get "/v1/deployments/good/logs?replica=$GID&offset=10"
eq "from offset 10 -> 200" "$LOG_ST" 200
check "from offset 10: the same bytes from the 11th on" eval '[ -n "$LOG_BODY" ] && [[ "$LOG_BODY" == "${FIRST:10}"* ]]'
logs_get "/v1/deployments/good/logs?replica=$GID&offset=-20"
eq "offset -20 (the last 20 bytes) -> 200" "$LOG_ST" 200
check "offset -20: at most 20 bytes (got $LOG_LEN)" test "$LOG_LEN" -le 20
logs_get "/v1/deployments/good/logs?replica=no-such-replica"
eq "logs of an unknown replica -> 404" "$LOG_ST" 404
logs_get "/v1/deployments/good/logs?offset=abc"
eq "logs with offset=abc -> 400" "$LOG_ST" 400
logs_get "/v1/deployments/good/logs?bogus=1"
eq "logs with an unknown query argument -> 400" "$LOG_ST" 400
logs_get /v1/deployments/no-such-dep/logs
eq "logs of an unknown deployment -> 404" "$LOG_ST" 404

# ---- crash at start: restarted with backoff ----------------------------------------------------------
crashed_twice() { [ "$(rfield crash .status.restarts)" -ge 2 ] 2>/dev/null; }
wait_check "$W" "crash: restarted at least twice" crashed_twice
C=$(rep crash)
echo "# crash: $(jq -c '{state: .status.state, restarts: .status.restarts, last_exit: .status.last_exit, reason: .status.reason}' <<<"$C")"
jqc "crash: state is backoff or starting" '.status.state == "backoff" or .status.state == "starting"' "$C"
jqc "crash: last_exit mentions status 1" '.status.last_exit | test("status 1")' "$C"
jqc "crash: the reason says it exited and when it restarts" \
    '(.status.reason | test("status 1")) and (.status.reason | test("restarting in"))' "$C"
jqc "crash: the log tail has the model's own message" '.status.log_tail | test("failing at start")' "$C"
eq "crash: still on its node" "$(jq -r .node <<<"$C")" "$GNODE"
CID=$(jq -r .id <<<"$C")
api GET /v1/deployments/crash
jqc "crash: deployment status 1 desired, 0 ready" '.status.desired_replicas == 1 and .status.ready_replicas == 0'
logs_get "/v1/deployments/crash/logs?replica=$CID&offset=0"
eq "crash: its log -> 200" "$LOG_ST" 200
contains "crash: its log has the model's message" "$LOG_BODY" "failing at start as asked"
contains "crash: its log notes restart 2" "$LOG_BODY" "(restart 2)"
# backoff grows: the delays noted in the log, in order, do not shrink and
# the second is longer than the first
DELAYS=$(grep -o 'restarting in [0-9.]* m\?s' <<<"$LOG_BODY" |
    awk '{v = $3; if ($4 == "s") v *= 1000; print v}' | tr '\n' ' ')
echo "# crash: backoff delays (ms): $DELAYS"
check "crash: the backoff grows (${DELAYS})" eval \
    'awk "{ for (i = 2; i <= NF; i++) if (\$i < \$(i-1)) exit 1; exit !(NF >= 2 && \$2 > \$1) }" <<<"$DELAYS"'

# ---- never healthy: failed, with its log tail ------------------------------------------------------------
stuck_failed() { [ "$(rfield stuck .status.state)" == failed ]; }
wait_check "$W" "stuck: reported failed after startup_timeout_seconds 3" stuck_failed
S=$(rep stuck)
echo "# stuck: $(jq -c '{state: .status.state, restarts: .status.restarts, last_exit: .status.last_exit, reason: .status.reason}' <<<"$S")"
jqc "stuck: the reason mentions healthy/timeout" '.status.reason | test("health|timeout|time out"; "i")' "$S"
jqc "stuck: the reason names the 3 s" '.status.reason | test("3 ?s")' "$S"
jqc "stuck: the log tail is not empty" '(.status.log_tail // "") | length > 0' "$S"
jqc "stuck: the log tail has the model's output" '.status.log_tail | test("listening on port")' "$S"
SPIDS=$(grep -h "replica $(jq -r .id <<<"$S"): started pid" "$DDIR"/nodes/*/*/agent.log | sed 's/.*started pid \([0-9]*\).*/\1/' | tr '\n' ' ')
# shellcheck disable=SC2086
check "stuck: its process was stopped (pids $SPIDS)" wait_until "$W" "stuck's process to stop" pids_gone $SPIDS
api GET /v1/deployments/stuck
jqc "stuck: deployment status 0 ready" '.status.ready_replicas == 0'
logs_get /v1/deployments/stuck/logs
contains "stuck: the deployment's logs say why it failed" "$LOG_BODY" "never became healthy"
S2=$(rep stuck)
jqc "stuck: stays failed (not restarted in a loop)" '.status.state == "failed" and .status.restarts == 0' "$S2"
eq "stuck: same replica" "$(jq -r .id <<<"$S2")" "$(jq -r .id <<<"$S")"

# the healthy one was not disturbed by its neighbours
G2=$(rep good)
eq "good: still ready with the same pid" "$(jq -r '"\(.status.state) \(.status.pid) \(.status.restarts)"' <<<"$G2")" \
    "ready $(jq -r .status.pid <<<"$G") 0"

droverd_finish replica_failures
no_replicas() { [ "$(tmp_replica_pids | wc -l)" == 0 ]; }
wait_check "$W" "no replica process is left" no_replicas
t_done
