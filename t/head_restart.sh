#!/usr/bin/env bash
# head_restart.sh — head down is not workloads down: SIGKILL of droverd
# leaves the agents and their replicas running and answering; droverd
# restarted on the same data dir and port adopts them: same nodes, same
# replicas (no duplicates), same processes (no restarts). Then an agent
# restarted by hand with the same data dir is the same node again (its
# credential is on disk), within node_lost, so no replacement node appears.
# shellcheck disable=SC2086,SC2046  # lists of pids are split on purpose
. "$(dirname "$0")/lib/common.bash"
# node_lost long enough that an agent restart by hand stays within it
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 30000}'
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

# ---- helpers (this test) -----------------------------------------------------------

nodes_ready() # N: exactly N nodes, all ready
{
    nodes_json | jq -e --argjson n "$1" 'length == $n and all(.[]; .status.state == "ready")' >/dev/null
}

replicas_settled() # N: exactly N replicas, all ready with an endpoint and a pid
{
    replicas_json | jq -e --argjson n "$1" 'length == $n and all(.[]; .status.state == "ready"
        and (.status.endpoint // "") != "" and (.status.pid | type == "number"))' >/dev/null
}

# summary of replicas: "id node pid endpoint restarts", sorted
rsummary() { jq -r '.[] | "\(.id) \(.node) \(.status.pid) \(.status.endpoint) \(.status.restarts)"' | sort; }

ppid_of() { sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2; }

# endpoints_answer NAME SUMMARY: every replica answers /predict
endpoints_answer()
{
    local name=$1 id node pid ep r bad=""
    while read -r id node pid ep r; do
        predict_ok "$ep" "$id" || bad="$bad $id($ep)"
    done <<<"$2"
    if [ -z "$bad" ]; then
        ok "$name: every replica answers POST /predict at its endpoint"
    else
        fail "$name: every replica answers POST /predict at its endpoint"
        why "no answer from:$bad"
    fi
}

sorted_words() { tr ' ' '\n' | grep . | sort -n | tr '\n' ' '; }

# ---- 2 nodes, 4 half-GPU replicas (2 per node) --------------------------------------------
PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
URL0=$URL
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster c1" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-l4"],"min_nodes":2,"max_nodes":2}'
status "create nodepool np1 (local-l4, min_nodes 2)" 201
api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","2"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000,"compute_percent":50},"cpu_millis":500,"memory_mib":512}}'
status "create model demo (6000 MiB / 50 % of a GPU)" 201
api POST /v1/deployments -d '{"id":"dep","model":"demo","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":4,"max_replicas":4}}'
status "create deployment dep (4 replicas)" 201
wait_check "$W" "2 nodes ready" nodes_ready 2
wait_check "$W" "4 replicas ready" replicas_settled 4

NODE_IDS=$(nodes_json | jq -r '[.[].id] | sort | join(" ")')
S0=$(replicas_json | rsummary)
jqc "2 replicas on each node" 'group_by(.node) | length == 2 and all(.[]; length == 2)' "$(replicas_json)"
AGENTS0=""
for n in $NODE_IDS; do AGENTS0="$AGENTS0 $(agent_pid "$n")"; done
AGENTS0=$(sorted_words <<<"$AGENTS0")
RPIDS0=$(awk '{print $3}' <<<"$S0" | sorted_words)
PROCS0=$(tmp_replica_pids | sorted_words)
eq "the replica processes are the 4 pids the replicas report" "$PROCS0" "$RPIDS0"
bad=""
for p in $PROCS0; do
    pp=$(ppid_of "$p")
    [[ " $AGENTS0 " == *" $pp "* ]] || bad="$bad $p(ppid $pp)"
done
eq "each replica process is a child of a drover-agent" "$bad" ""
endpoints_answer "before" "$S0"

# ---- SIGKILL droverd: replicas keep serving --------------------------------------------------
DPID_OLD=$DPID
droverd_kill9
eq "droverd killed by SIGKILL" "$DEXIT" 137
check "droverd is gone" pids_gone "$DPID_OLD"
check "the agents keep running without the head" pids_alive $AGENTS0
endpoints_answer "head down" "$S0"
agents_noticed()
{
    local n
    for n in $NODE_IDS; do
        grep -q "failed" "$DDIR/nodes/$T_OWNER/$n/agent.log" || return 1
    done
}
wait_check "$W" "each agent notices its syncs failing" agents_noticed
check "the agents still run" pids_alive $AGENTS0
check "the replica processes still run" pids_alive $PROCS0
endpoints_answer "head down, after the agents noticed" "$S0"

# ---- restart droverd on the same port: adopt, do not restart --------------------------------------
LOGLINES=$(wc -l <"$DDIR/droverd.log")
# (DROVER_TEST_FIRST_PASS_DELAY_MS: the agents, retrying each second, sync
# before the controller's first pass, as they may on a loaded machine; the
# agent restarted by hand below must get its desired set all the same)
DROVER_TEST_FIRST_PASS_DELAY_MS=3000 \
    droverd_start "$DDIR" --listen "127.0.0.1:$PORT" --config "$CFG" || { fail "droverd restarts"; t_done; }
eq "droverd is back at the same URL" "$URL" "$URL0"
wait_check "$W" "the 2 nodes are ready again" nodes_ready 2
wait_check "$W" "the 4 replicas are ready again" replicas_settled 4
# (the controller renders the deployment's status, after its first pass,
# held 3 s above: what follows is checked after that pass)
dep_status_4() { api GET /v1/deployments/dep; jqq '.status.desired_replicas == 4 and .status.ready_replicas == 4' <<<"$BODY"; }
wait_check "$W" "deployment status: 4 desired, 4 ready" dep_status_4
eq "same nodes (no new node)" "$(nodes_json | jq -r '[.[].id] | sort | join(" ")')" "$NODE_IDS"
S1=$(replicas_json | rsummary)
eq "same replicas: ids, nodes, pids, endpoints, 0 restarts" "$S1" "$S0"
jqc "no replica restarted (restarts 0)" 'all(.[]; .status.restarts == 0)' "$(replicas_json)"
AGENTS1=""
for n in $NODE_IDS; do AGENTS1="$AGENTS1 $(agent_pid "$n")"; done
eq "the agents were adopted, not restarted (same pids)" "$(sorted_words <<<"$AGENTS1")" "$AGENTS0"
check "the adopted agents run" pids_alive $AGENTS0
eq "the replica processes are the same 4 (no duplicates, none restarted)" \
    "$(tmp_replica_pids | sorted_words)" "$PROCS0"
NEWLOG=$(tail -n +"$((LOGLINES + 1))" "$DDIR/droverd.log")
if grep -q "started drover-agent" <<<"$NEWLOG"; then
    fail "the restarted droverd started no agent"
    why "$(grep "started drover-agent" <<<"$NEWLOG")"
else
    ok "the restarted droverd started no agent"
fi
endpoints_answer "after the restart" "$S1"
for n in $NODE_IDS; do
    check "agent of $n logged that the head is back" grep -q "the head is back" "$DDIR/nodes/$T_OWNER/$n/agent.log"
done

# ---- an agent restarted with the same data dir is the same node ---------------------------------------
N1=${NODE_IDS%% *}
N2=${NODE_IDS##* }
NDIR=$DDIR/nodes/$T_OWNER/$N1
APID=$(agent_pid "$N1")
mapfile -d '' ACMD <"/proc/$APID/cmdline"
check "saved the agent's command line (${ACMD[*]})" test "${#ACMD[@]}" -gt 2
ON_N1=$(awk -v n="$N1" '$2 == n {print $3}' <<<"$S1" | sorted_words)
ON_N1_IDS=$(awk -v n="$N1" '$2 == n {print $1}' <<<"$S1" | sort | tr '\n' ' ')
ON_N2=$(awk -v n="$N2" '$2 == n {print $3}' <<<"$S1" | sorted_words)
CRED0=$(cat "$NDIR/credential")
kill -TERM "$APID"
wait_check "$W" "SIGTERM: the agent of $N1 exits" pids_gone "$APID"
wait_check "$W" "its replicas stopped" pids_gone $ON_N1
check "the other node's replicas keep running" pids_alive $ON_N2
check "the agent's credential stays on disk" test "$(cat "$NDIR/credential")" == "$CRED0"
wait_check "$W" "$N1 goes not_ready while its agent is down" eval '[ "$(node_state "$N1")" == not_ready ]'
echo "# while $N1 is not_ready: $(replicas_json | jq -c --arg n "$N1" '[.[] | select(.node == $n) | {id, state: .status.state, pid: .status.pid}]'); deployment: $(api GET /v1/deployments/dep; jq -c .status <<<"$BODY")"
ALOG_SIZE=$(stat -c %s "$NDIR/agent.log")
setsid "${ACMD[@]}" >>"$NDIR/agent.log" 2>&1 </dev/null &
NEWPID=$!
_BG_PIDS+=("$NEWPID")
echo "# restarted the agent of $N1 by hand (pid $NEWPID)"
synced_as_n1() { tail -c +"$((ALOG_SIZE + 1))" "$NDIR/agent.log" | grep -q "node $N1: synced"; }
wait_check "$W" "the restarted agent syncs as node $N1" synced_as_n1
wait_check "$W" "$N1 is ready again" eval '[ "$(node_state "$N1")" == ready ]'
# (right after the agent's first sync the head still shows the old, dead
# processes as ready: wait for the new agent's report)
n1_renewed()
{
    replicas_settled 4 || return 1
    replicas_json | jq -e --arg n "$N1" --args '[.[] | select(.node == $n)]
        | length > 0 and all(.[]; (.status.pid | tostring) as $p | $ARGS.positional | index($p) | not)' \
        $ON_N1 >/dev/null
}
wait_check "$W" "4 replicas ready again, those of $N1 with new pids" n1_renewed
eq "still the same 2 nodes (no new node for the restarted agent)" \
    "$(nodes_json | jq -r '[.[].id] | sort | join(" ")')" "$NODE_IDS"
S2=$(replicas_json | rsummary)
eq "the replicas of $N1 are the same placements (same ids)" \
    "$(awk -v n="$N1" '$2 == n {print $1}' <<<"$S2" | sort | tr '\n' ' ')" "$ON_N1_IDS"
NEW_ON_N1=$(awk -v n="$N1" '$2 == n {print $3}' <<<"$S2" | sorted_words)
check "they run as new processes of the new agent" eval \
    "[ -n \"$NEW_ON_N1\" ] && [ \"$NEW_ON_N1\" != \"$ON_N1\" ] && pids_alive $NEW_ON_N1"
bad=""
for p in $NEW_ON_N1; do [ "$(ppid_of "$p")" == "$NEWPID" ] || bad="$bad $p"; done
eq "... children of the restarted agent" "$bad" ""
eq "the other node's replicas were not touched" \
    "$(awk -v n="$N2" '$2 == n {print $3}' <<<"$S2" | sorted_words)" "$ON_N2"
eq "4 replica processes in all" "$(tmp_replica_pids | wc -l)" 4
endpoints_answer "after the agent restart" "$S2"
NEWLOG=$(tail -n +"$((LOGLINES + 1))" "$DDIR/droverd.log")
if grep -q "started drover-agent" <<<"$NEWLOG"; then
    fail "droverd started no agent of its own meanwhile"
    why "$(grep "started drover-agent" <<<"$NEWLOG")"
else
    ok "droverd started no agent of its own meanwhile"
fi

# ---- clean stop ------------------------------------------------------------------------------------
# the hand-started agent first: droverd does not know its pid (agent.pid
# names the old one), and an agent still long-polling while droverd stops
# can make droverd abort (see selfmanaged.sh)
kill -TERM "$NEWPID" 2>/dev/null
wait "$NEWPID"
eq "the hand-started agent exits 0 on SIGTERM" "$?" 0
check "... and its replicas stopped" pids_gone $NEW_ON_N1
N2PID=$(agent_pid "$N2")
droverd_finish head_restart
wait_check "$W" "droverd's SIGTERM stopped its agent ($N2)" pids_gone "$N2PID"
no_replicas() { [ "$(tmp_replica_pids | wc -l)" == 0 ]; }
wait_check "$W" "no replica process is left" no_replicas
t_done
