#!/usr/bin/env bash
# isolation.sh — replicas isolated on their node (issue 18 item 4): each runs
# in its own cgroup (v2, or the v1 controllers this host has) with
# resources.memory_mib, cpu_millis and the agent's process limit in its
# cgroup files, as the unprivileged replica user with a private working
# directory; its status says per limit enforced or not; one that allocates
# past its memory limit is OOM-killed alone and reported (last_exit,
# oom_kills, event oom_killed) while its neighbour keeps answering and the
# agent lives; the cgroups are gone once the agent stops.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

if [ "$(id -u)" != 0 ]; then
    ok "# SKIP: cgroups and the replica user need root"
    t_done
fi
T_REPLICA_REACH=1   # the replica user must reach the agent's data dir (lib/common.bash)

rep() { replicas_json "deployment=$1" | jq -c '.[0] // {}'; }
rfield() { rep "$1" | jq -r "$2 // empty"; }

model() # ID MEMORY_MIB ARGS...: a CPU-only demo-model model with 250m CPU
{
    local id=$1 mem=$2
    shift 2
    local cmd
    cmd=$(printf '%s\n' drover-demo-model --weights-mib 2 "$@" | jq -R . | jq -sc .)
    api POST /v1/models -d "{\"id\":\"$id\",\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":60},\"resources\":{\"cpu_millis\":250,\"memory_mib\":$mem}}"
    status "create model $id (memory_mib $mem${*:+, $*})" 201
    [ "$ST" == 201 ] || t_done
    api POST /v1/deployments -d "{\"id\":\"$id\",\"model\":\"$id\",\"nodepools\":[{\"cluster\":\"c1\",\"nodepool\":\"np1\"}],\"autoscale\":{\"min_replicas\":1,\"max_replicas\":1}}"
    status "create deployment $id" 201
    [ "$ST" == 201 ] || t_done
}

droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster c1" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-cpu"],"min_nodes":1,"max_nodes":1}'
status "create nodepool np1 (1 x local-cpu)" 201
model good 256
model hog 64 --alloc-mib 200

# ---- the healthy one: its cgroup, its user, its working directory ---------------------
good_ready() { [ "$(rfield good .status.state)" == ready ]; }
wait_check "$W" "good: the replica becomes ready" good_ready
G=$(rep good)
GID=$(jq -r .id <<<"$G")
GPID=$(jq -r .status.pid <<<"$G")
NODE=$(jq -r .node <<<"$G")
echo "# good: $(jq -c .status.isolation <<<"$G")"
for l in memory cpu pids user workdir; do
    jqc "good: status.isolation.$l is enforced" ".status.isolation.$l.enforced == true" "$G"
done
jqc "good: the memory limit is 256 MiB" '.status.isolation.memory.value | startswith("256 MiB")' "$G"
jqc "good: the CPU quota is 250m" '.status.isolation.cpu.value | startswith("250m")' "$G"
jqc "good: its cgroup is drover/$NODE.HASH/$GID" \
    ".status.isolation.cgroup | test(\"^drover/$NODE[.][0-9a-f]{8}/$GID\$\")" "$G"

MEMF=$(jq -r .status.isolation.memory.file <<<"$G")
CPUF=$(jq -r .status.isolation.cpu.file <<<"$G")
PIDF=$(jq -r .status.isolation.pids.file <<<"$G")
eq "good: $MEMF holds 256 MiB" "$(cat "$MEMF" 2>&1)" $((256 << 20))
case $CPUF in
*/cpu.max) eq "good: $CPUF holds 25000 100000" "$(cat "$CPUF" 2>&1)" "25000 100000" ;;
*) eq "good: $CPUF holds 25000 (of $(cat "$(dirname "$CPUF")/cpu.cfs_period_us" 2>&1))" \
    "$(cat "$CPUF" 2>&1)/$(cat "$(dirname "$CPUF")/cpu.cfs_period_us" 2>&1)" "25000/100000" ;;
esac
eq "good: $PIDF holds 4096" "$(cat "$PIDF" 2>&1)" 4096
check "good: its process $GPID is in that cgroup's cgroup.procs" \
    grep -qx "$GPID" "$(dirname "$MEMF")/cgroup.procs"
RUID=$(awk '/^Uid:/ {print $2}' "/proc/$GPID/status")
RUSER=$(getent passwd "$RUID" | cut -d: -f1)
check "good: the process runs as an unprivileged user (uid $RUID, $RUSER)" test "${RUID:-0}" -ne 0
contains "good: ... the one its status names" "$(jq -r .status.isolation.user.value <<<"$G")" "$RUSER (uid $RUID"
WD=$(jq -r .status.isolation.workdir.path <<<"$G")
eq "good: its working directory is the private one" "$(readlink "/proc/$GPID/cwd")" "$WD"
eq "good: which is 0700 and the replica user's" "$(stat -c '%a %u' "$WD" 2>&1)" "700 $RUID"
check "good: it answers /predict" predict_ok "$(jq -r .status.endpoint <<<"$G")" "$GID"
check "good: it wrote its weights into its model dir as that user" \
    eval "[ \"\$(stat -c %u \"$TMP\"/d/nodes/*/*/models/good/weights.bin 2>&1)\" == $RUID ]"
cli describe replica "good/$GID"
rc "drover describe replica good/$GID" 0
contains "describe replica shows the isolation section" "$OUT" "isolation:"
contains "... with the memory limit's file" "$OUT" "$MEMF"

# ---- the hog: OOM-killed alone, reported -------------------------------------------------
AGENT=$(agent_pid "$NODE")
oom_seen() { [ "$(rfield hog .status.oom_kills)" -ge 1 ] 2>/dev/null; }
wait_check "$W" "hog: its cgroup's OOM killer killed it (status.oom_kills >= 1)" oom_seen
H=$(rep hog)
echo "# hog: $(jq -c '{state: .status.state, restarts: .status.restarts, last_exit: .status.last_exit, reason: .status.reason, oom_kills: .status.oom_kills}' <<<"$H")"
jqc "hog: last_exit says the OOM killer, over its 64 MiB limit" \
    '.status.last_exit | test("OOM killer") and test("64 MiB")' "$H"
jqc "hog: restarted like any crash (backoff or starting again, reason says OOM)" \
    '(.status.state | IN("backoff", "starting", "ready")) and (((.status.reason // "") | test("OOM")) or .status.state != "backoff")' "$H"
oom_event() {
    api GET "/v1/events?kind=deployment&object=hog&limit=100"
    jq -e '.items | map(select(.type == "oom_killed")) | length > 0' <<<"$BODY" >/dev/null
}
wait_check "$W" "hog: an oom_killed event" oom_event
check "the agent ($AGENT) is alive" pid_alive "$AGENT"
G2=$(rep good)
eq "good: untouched (same pid, no restart)" "$(jq -r '"\(.status.state) \(.status.pid) \(.status.restarts)"' <<<"$G2")" \
    "ready $GPID 0"
check "good: still answers /predict" predict_ok "$(jq -r .status.endpoint <<<"$G2")" "$GID"

# ---- an agent that is not root: replicas still run, limits reported as not enforced ----------
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np2","instance_types":["self-cpu"],"min_nodes":0,"max_nodes":1}'
status "create nodepool sm/np2" 201
api POST /v1/clusters/sm/nodepools/np2/join-tokens -d '{"id":"t","ttl_seconds":3600}'
status "join token for np2" 201
JOIN=$(jq -r .secret <<<"$BODY")
api POST /v1/models -d '{"id":"plain","runtime":{"command":["drover-demo-model","--weights-mib","1"],"startup_timeout_seconds":60},"resources":{"cpu_millis":100,"memory_mib":128}}'
status "create model plain" 201
api POST /v1/deployments -d '{"id":"plain","model":"plain","nodepools":[{"cluster":"sm","nodepool":"np2"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment plain (on np2)" 201
mkdir -p "$TMP/agents/u1"
chown 65534:65534 "$TMP/agents/u1"
chmod o+x "$TMP/agents"
setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN_DIR/drover-agent" --server "$URL" \
    --data-dir "$TMP/agents/u1" --gpus none --cpus 2 --memory-mib 2048 --join-token "$JOIN" \
    >>"$TMP/agents/u1.log" 2>&1 </dev/null &
UPID=$!
_BG_PIDS+=("$UPID")
EXTRA_AGENT_LOGS+=("$TMP/agents/u1.log")
plain_ready() { [ "$(rfield plain .status.state)" == ready ]; }
wait_check "$W" "plain: ready on the unprivileged agent's node" plain_ready
P=$(rep plain)
echo "# plain: $(jq -c .status.isolation <<<"$P")"
jqc "plain: memory, cpu, pids and user not enforced, each with a reason" \
    '.status.isolation | [.memory, .cpu, .pids, .user] | all(.enforced == false and (.reason | length) > 0)' "$P"
jqc "plain: the user's reason says the agent is not root" '.status.isolation.user.reason | test("not root")' "$P"
jqc "plain: its private working directory is" '.status.isolation.workdir.enforced == true' "$P"
check "plain: it answers /predict" predict_ok "$(jq -r .status.endpoint <<<"$P")"
eq "plain: its process runs as the agent's user (65534)" \
    "$(awk '/^Uid:/ {print $2}' "/proc/$(jq -r .status.pid <<<"$P")/status")" 65534

# ---- bad flags: exit 2 with the reason, before anything is sent ---------------------------
"$BIN_DIR/drover-agent" --server "$URL" --data-dir "$TMP/agents/bad" --replica-user no-such-user-x \
    --join-token "$JOIN" >"$TMP/bad.out" 2>&1
eq "--replica-user no-such-user-x exits 2" "$?" 2
contains "... naming the user" "$(cat "$TMP/bad.out")" "no user 'no-such-user-x'"
"$BIN_DIR/drover-agent" --server "$URL" --data-dir "$TMP/agents/bad" --replica-pids-max 0 \
    --join-token "$JOIN" >"$TMP/bad.out" 2>&1
eq "--replica-pids-max 0 exits 2" "$?" 2
contains "... saying what it takes" "$(cat "$TMP/bad.out")" "--replica-pids-max takes"
check "no credential was saved for them" test ! -e "$TMP/agents/bad/credential"

# ---- stop: no cgroup left ------------------------------------------------------------------
CG=$(dirname "$(dirname "$MEMF")")   # the agent's parent in the memory hierarchy
check "the agent's cgroup parent $CG exists while it runs" test -d "$CG"
kill -TERM "$UPID"
wait "$UPID"
eq "the unprivileged agent exits 0 on SIGTERM" "$?" 0
droverd_finish isolation
gone() { [ ! -d "$CG" ] && [ ! -d "$(dirname "$(dirname "$PIDF")")" ]; }
wait_check "$W" "the agent's cgroups are removed once it stops" gone
no_replicas() { [ "$(tmp_replica_pids | wc -l)" == 0 ]; }
wait_check "$W" "no replica process is left" no_replicas
t_done
