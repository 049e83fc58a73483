#!/usr/bin/env bash
# checkpoints.sh — checkpoints (issue 14 item 7): a deployment with
# checkpoint: {keep: 2}; its workload (t/lib/ckpt_workload.py) writes
# checkpoints into DROVER_CHECKPOINT_DIR and marks each complete (COMPLETE
# last). The agent uploads them in the background, content-addressed (the
# 1 MiB static.bin every checkpoint shares is sent once), commits each last
# and keeps the newest 2 (at the head and on the node). A marker without
# files is refused; a commit whose manifest does not parse, or whose blobs
# were never sent, is refused with nothing committed. The workload killed
# with a half-written checkpoint restarts on its node with the newest
# complete one and no trace of the half one. The agent SIGKILLed during an
# upload (throttled with --checkpoint-upload-mibps so that it is still
# running): that checkpoint never counts; restarted on its node, the agent
# finishes it sending only what the head lacks. Killed again during the next
# upload and its node drained: the replacement replica on another node takes
# the same slot and restores the newest committed checkpoint, byte for byte.
. "$(dirname "$0")/lib/common.bash"
# node_lost long: an agent restarted on its node finds its replica there; the
# move to node 2 is a drain
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 600000}'
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test
LIB=$(cd "$(dirname "$0")/lib" && pwd)

PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":2}'
status "create nodepool np" 201
api POST /v1/clusters/sm/nodepools/np/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
status "join token" 201
JOIN=$(jq -r .secret <<<"$BODY")

CTL=$TMP/control
MARK=$TMP/marks
mkdir -p "$MARK"
: >"$CTL"
cmd=$(jq -nc --arg s "$LIB/ckpt_workload.py" --arg c "$CTL" --arg m "$MARK" '["python3", "-S", $s, $c, $m]')
api POST /v1/models -d "{\"id\":\"m\",\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
status "create model m" 201

# ---- bad input on the deployment: a clear 400, nothing created -----------------------------
DEP='{"id":"d1","model":"m","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}'
for bad in '{"keep":0}' '{"keep":"two"}' '{}' '{"keep":2,"every":5}' '3'; do
    api POST /v1/deployments -d "$DEP,\"checkpoint\":$bad}"
    status "deployment with checkpoint $bad: 400" 400
    contains "  and the error names checkpoint" "$BODY" "checkpoint"
done
api GET /v1/deployments/d1
status "  nothing was created" 404
api POST /v1/deployments -d "$DEP,\"checkpoint\":{\"keep\":2}}"
status "create deployment d1 with checkpoint {keep: 2}" 201

# ---- node 1: several checkpoints, content-addressed, newest 2 kept -----------------------
start_agent a1 --join-token "$JOIN" --checkpoint-upload-mibps 2
wait_check "$W" "d1's replica is ready" replicas_ready d1 1
R1=$(replicas_json deployment=d1 | jq -r '.[0].id')
NODE1=$(replicas_json deployment=d1 | jq -r '.[0].node')
eq "the replica has slot 0" "$(replicas_json deployment=d1 | jq -r '.[0].slot')" 0
SCOPE=deployment:d1:0
DIR1=$TMP/agents/a1/checkpoints/$SCOPE
eq "a first start resumes from nothing" "$(cut -d' ' -f1 "$MARK/$R1.resumed")" none
printf 'c1 0.25\n' >"$CTL"
names() { api GET /v1/deployments/d1/checkpoints; jq -r '[.items[].name] | join(",")' <<<"$BODY"; }
has_names() { [ "$(names)" == "$1" ]; }
wait_check "$W" "c1 committed" has_names c1 || why "$(tail -5 "$TMP/agents/a1.log")"
printf 'c2 0.25\n' >"$CTL"
wait_check "$W" "c2 committed" has_names c2,c1
printf 'c3 0.25\n' >"$CTL"
wait_check "$W" "c3 committed, c1 pruned at the head (keep 2): c3,c2" has_names c3,c2
pruned_local() { [ ! -e "$DIR1/c1" ] && [ -e "$DIR1/c3/COMPLETE" ]; }
wait_check "$W" "c1 pruned in the node's directory too" pruned_local
sent2=$(grep -o "$SCOPE/c2 committed: [0-9]* bytes in [0-9]* files, [0-9]* sent" "$TMP/agents/a1.log" |
        sed 's/.* \([0-9]*\) sent/\1/')
if [ -n "$sent2" ] && [ "$sent2" -lt $((1 << 20)) ]; then
    ok "c2's upload did not send static.bin again ($sent2 bytes sent)"
else
    fail "c2's upload did not send static.bin again (sent: '$sent2')"
fi
api GET /v1/deployments/d1/checkpoints
jqc "the list: scope, digest, size and files of each" \
    'all(.items[]; .scope == "'"$SCOPE"'" and (.digest | length) == 64 and .total_size > 1048576
         and .files == 4 and (.manifest == null))'

# ---- bad input: a marker without files; commits that do not parse or were never sent ------
printf 'hollow empty\n' >"$CTL"
refused() { grep -q "checkpoint hollow has no file besides its COMPLETE marker" "$TMP/agents/a1.log"; }
wait_check "$W" "a marker without files is refused (agent log)" refused
eq "  and never committed" "$(names)" c3,c2
NODECRED=$(cat "$TMP/agents/a1/credential")
agent_api() { as "$NODECRED" api "$@"; }
agent_api POST "/v1/agent/checkpoints/$SCOPE" -d '{"name":"bad","manifest":{"version":1,"chunk_size":"x"}}'
status "a commit whose manifest does not parse: 400" 400
contains "  the error names the manifest" "$BODY" "manifest"
agent_api POST "/v1/agent/checkpoints/$SCOPE" -d '{"name":"bad","manifest":{"version":1,"chunk_size":4096,"total_size":3,"files":[{"path":"a","size":3,"sha256":"'"$(printf abc | sha256sum | cut -c1-64)"'","chunks":["'"$(printf abc | sha256sum | cut -c1-64)"'"]}]}}'
status "a commit whose manifest has no digest: 400" 400
M=$(python3 -S - <<'PY'
import hashlib, json
h = hashlib.sha256(b"never sent").hexdigest()
m = {"version": 1, "chunk_size": 4096, "total_size": 10,
     "files": [{"path": "w.bin", "size": 10, "sha256": h, "chunks": [h]}]}
m["digest"] = hashlib.sha256(json.dumps(m, separators=(",", ":")).encode()).hexdigest()
print(json.dumps(m))
PY
)
agent_api POST "/v1/agent/checkpoints/$SCOPE" -d "{\"name\":\"bad\",\"manifest\":$M}"
status "a commit of blobs never sent: 409" 409
agent_api POST "/v1/agent/checkpoints/$SCOPE" -d '{"name":"../x","upload":"00"}'
status "a bad checkpoint name: 400" 400
agent_api GET "/v1/agent/checkpoints/$SCOPE"
status "the agent's list" 200
eq "  nothing half-committed: still c3,c2" "$(jq -r '[.items[].name] | join(",")' <<<"$BODY")" c3,c2
api GET "/v1/agent/checkpoints/$SCOPE"
status "a user token on the agents' route: 401" 401
api GET /v1/deployments/nope/checkpoints
status "checkpoints of an unknown deployment: 404" 404
cli get checkpoints d1
rc "drover get checkpoints d1" 0
contains "  lists c3" "$OUT" "c3"
contains "  with its scope" "$OUT" "$SCOPE"
cli get checkpoints d1 -o json
rc "drover get checkpoints d1 -o json" 0
eq "  two items" "$(jq 'length' <<<"$OUT")" 2
cli describe deployment d1
rc "drover describe deployment d1" 0
contains "  shows the checkpoints" "$OUT" "c3"

# ---- the workload killed with a half-written checkpoint: restarts on its node ----------------
printf 'half partial\n' >"$CTL"
wait_check "$W" "the workload wrote a half checkpoint" test -e "$DIR1/half/delta.bin"
OLDPID=$(cat "$MARK/$R1.pid")
: >"$CTL"   # the restarted process must not write "half" again
rm -f "$MARK/$R1.resumed"
kill -9 "$OLDPID"
restarted() { [ "$(cat "$MARK/$R1.pid" 2>/dev/null)" != "$OLDPID" ] && [ -s "$MARK/$R1.resumed" ]; }
wait_check "$W" "the workload restarted" restarted
eq "  it resumes from c3, the newest complete one" "$(cut -d' ' -f1 "$MARK/$R1.resumed")" c3
if ! grep -qx c3 "$MARK/$R1.entries" || grep -qx half "$MARK/$R1.entries"; then
    fail "  the half-written checkpoint was removed before the restart"
else
    ok "  the half-written checkpoint was removed before the restart"
fi

# ---- the agent SIGKILLed during an upload, restarted on its node: the upload resumes ---------
printf 'c4 12\n' >"$CTL"
uploading() { compgen -G "$DDIR/blobs/partial/$T_OWNER/*/*" >/dev/null; }
wait_check "$W" "c4's upload has begun (its first chunk at the head)" uploading
kill -9 "${AG_PID[a1]}"
wait "${AG_PID[a1]}" 2>/dev/null
eq "the cut-off upload never counts: still c3,c2" "$(names)" c3,c2
: >"$CTL"
rm -f "$MARK/$R1.resumed"
start_agent a1 --checkpoint-upload-mibps 2   # its credential is in its data dir
wait_check "$W" "after the agent's restart c4 is committed (c4,c3)" has_names c4,c3 ||
    why "$(tail -5 "$TMP/agents/a1.log")"
sent4=$(grep -o "$SCOPE/c4 committed: [0-9]* bytes in [0-9]* files, [0-9]* sent" "$TMP/agents/a1.log" |
        tail -1 | sed 's/.* \([0-9]*\) sent/\1/')
if [ -n "$sent4" ] && [ "$sent4" -le $(((12 << 20) - (8 << 20) + 4096)) ]; then
    ok "  only the rest was sent again: $sent4 bytes (the 8 MiB chunk the head had was not)"
else
    fail "  only the rest was sent again (sent: '$sent4' of 12 MiB)"
fi
wait_check "$W" "the workload restarted with the agent" test -s "$MARK/$R1.resumed"
eq "  it resumes from c4 (complete on its node)" "$(cut -d' ' -f1 "$MARK/$R1.resumed")" c4

# ---- killed again during an upload; the node drained: the replica moves to node 2 -------------
printf 'c5 12\n' >"$CTL"
wait_check "$W" "c5's upload has begun" uploading
kill -9 "${AG_PID[a1]}"
wait "${AG_PID[a1]}" 2>/dev/null
: >"$CTL"
eq "c5, cut off, never counts: still c4,c3" "$(names)" c4,c3
start_agent a2 --join-token "$JOIN"
node2_ready() { nodes_json | jq -e --arg n "$NODE1" 'any(.[]; .id != $n and .status.state == "ready")' >/dev/null; }
wait_check "$W" "node 2 is ready" node2_ready
api POST "/v1/nodes/$NODE1/drain"
status "drain node 1 (its agent is dead)" 200
moved() {
    replicas_json deployment=d1 | jq -e --arg n "$NODE1" \
        'length == 1 and .[0].node != $n and .[0].status.state == "ready"' >/dev/null
}
wait_check "$W" "d1's replica is ready on the other node" moved || dump_workers
R2=$(replicas_json deployment=d1 | jq -r '.[0].id')
eq "  it has slot 0 again" "$(replicas_json deployment=d1 | jq -r '.[0].slot')" 0
eq "  it resumes from c4, the newest committed one" "$(cut -d' ' -f1 "$MARK/$R2.resumed" 2>/dev/null)" c4
DIR2=$TMP/agents/a2/checkpoints/$SCOPE
same=1
for f in static.bin delta.bin state.json COMPLETE; do
    cmp -s "$DIR1/c4/$f" "$DIR2/c4/$f" || same=0
done
eq "  c4 restored byte for byte" "$same" 1
[ ! -e "$DIR2/c5" ] && ok "  c5 (cut off) is not there" || fail "  c5 (cut off) is not there"
eq "still c4,c3 at the head" "$(names)" c4,c3

# ---- deleting one, as a user -----------------------------------------------------------------
api DELETE "/v1/checkpoints/$SCOPE/c3"
status "delete c3" 204
api DELETE "/v1/checkpoints/$SCOPE/c3"
status "delete c3 again: 404" 404
eq "c4 left" "$(names)" c4

# ---- the deployment goes: the node forgets the scope and its directory -----------------------
api DELETE /v1/deployments/d1
status "delete deployment d1" 200
wait_check "$W" "a2 removed the scope's directory" test ! -e "$DIR2"

kill -TERM "${AG_PID[a2]}"
wait "${AG_PID[a2]}"
eq "agent a2 exits 0 on SIGTERM" "$?" 0
logs_sanitizer_clean checkpoints "${EXTRA_AGENT_LOGS[@]}"
droverd_finish checkpoints
t_done
