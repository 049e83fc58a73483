#!/usr/bin/env bash
# slurm.sh — the slurm provider end to end against a real Slurm: the
# Debian packages' slurmctld and slurmd (22.05), configured here in $TMP
# on loopback (auth/none, cred/none: no munge; a gpu GRES of 4 empty files
# standing in for devices), started in the foreground and killed at exit;
# never a system service. Skipped (exit 77) when the Slurm binaries are
# missing (scripts/install-deps installs slurmctld, slurmd, slurm-client).
#   - cluster and nodepool validation (no credential, region = the Slurm
#     cluster's name, slurm {partition, account, time_limit}, unknown
#     fields refused);
#   - min_nodes: 2 on slurm-gpu-1 -> two sbatch jobs (gres gpu:1, the
#     partition, the time limit, drover's tags in the comment) whose agents
#     join, report the GPU Slurm granted, and take a deployment's replicas;
#   - a head restart adopts the running jobs: no new sbatch;
#   - an orphan job (this head's tag, no node) is cancelled;
#   - a job cancelled by hand -> the node is lost and replaced;
#   - scale to zero -> scancel, the jobs are gone;
#   - a bad partition -> one clear give_up error on the nodepool, no storm.
# shellcheck disable=SC2086
. "$(dirname "$0")/lib/common.bash"
for b in slurmctld slurmd sbatch squeue scancel; do
    if ! command -v "$b" >/dev/null 2>&1; then
        echo "SKIP: $b is not installed (scripts/install-deps installs slurmctld, slurmd and slurm-client)"
        exit 77
    fi
done
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 3000, "node_lost_ms": 8000}'
workers_init
W=${T_WAIT:-120}

# ---- a Slurm of the test's own (t/lib/slurm.bash) -----------------------------------------
. "$DROVER_SRC/t/lib/slurm.bash"
trap 'slurm_down; _workers_cleanup' EXIT
if ! slurm_up "$TMP/slurm"; then
    fail "slurmctld and slurmd start, the node idle"
    sl sinfo -N -l 2>&1 | sed 's/^/    # /'
    tail -n 20 "$TMP/slurm/slurmctld.log" "$TMP/slurm/slurmd.log" 2>&1 | sed 's/^/    # /'
    t_done
fi
ok "slurmctld and slurmd run; the node ($SNODE, 4 GPUs) is idle"
export SLURM_CONF=$SC      # the test's own Slurm commands; droverd gets the cluster's slurm_conf

# squeue of the jobs drover made, one line each: ID|NAME|PARTITION|GRES|STATE|TIMELIMIT|COMMENT
jobs() { sl squeue --me --noheader --format='%i|%j|%P|%b|%T|%l|%k' 2>/dev/null | grep 'drover-head=' || true; }
njobs() { jobs | grep -c "drover-nodepool=$1 " || true; }
jqa()
{
    local name=$1 doc=$2 filter=$3
    shift 3
    if jq -e "$@" "$filter" >/dev/null 2>&1 <<<"$doc"; then ok "$name"; else fail "$name"; why "jq '$filter' is false on: $doc"; fi
}

# droverd's DROVER_AGENT_DIR and DROVER_ADVERTISE_ADDR reach the jobs (sbatch --export): each job
# gets its own agent dir below DROVER_AGENT_DIR; no SLURM_CONF of its own
unset SLURM_CONF
export DROVER_AGENT_DIR=$TMP/jobs DROVER_ADVERTISE_ADDR=127.0.0.1
droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
export SLURM_CONF=$SC
HEAD_ID=$(tr -d '\n' <"$TMP/d/head-id" 2>/dev/null)

# ---- validation -------------------------------------------------------------------------
api POST /v1/clusters -d '{"id":"x","provider":"slurm","region":"bad name"}'
eq "a slurm cluster's region must be a Slurm cluster name" "$ST" 400
api POST /v1/clusters -d '{"id":"x","provider":"slurm","region":"drvtest","credential":"c"}'
eq "a slurm cluster takes no credential" "$ST" 400
api POST /v1/clusters -d '{"id":"x","provider":"slurm","region":"drvtest","slurm_conf":"relative/slurm.conf"}'
eq "slurm_conf must be an absolute path" "$ST" 400
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default","slurm_conf":"/etc/slurm/slurm.conf"}'
eq "slurm_conf is refused on other providers" "$ST" 400
api POST /v1/clusters -d "{\"id\":\"sc\",\"provider\":\"slurm\",\"region\":\"drvtest\",\"slurm_conf\":\"$SC\",\"head_url\":\"$URL\",\"orphan_grace_seconds\":2}"
eq "a slurm cluster is created" "$ST" 201
api POST /v1/clusters/sc/nodepools -d '{"id":"v","instance_types":["slurm-gpu-1"],"slurm":{"partition":"gpu","qos":"high"}}'
eq "an unknown field of slurm is refused" "$ST" 400
api POST /v1/clusters/sc/nodepools -d '{"id":"v","instance_types":["slurm-gpu-1"],"slurm":{"time_limit":"soon"}}'
eq "a bad time_limit is refused" "$ST" 400
jqc "naming the field" '.error.field == "slurm.time_limit"' "$BODY"
api POST /v1/clusters/sc/nodepools -d '{"id":"v","instance_types":["slurm-gpu-1"],"slurm":{"account":"a;b"}}'
eq "a bad account name is refused" "$ST" 400
api POST /v1/clusters/sc/nodepools -d '{"id":"v","instance_types":["slurm-gpu-1"],"capacity_type":"spot"}'
eq "a spot nodepool on slurm is refused" "$ST" 422
api POST /v1/clusters/sc/nodepools -d '{"id":"v","instance_types":["g4dn.xlarge"]}'
eq "an aws instance type is refused on slurm" "$ST" 422

# ---- min_nodes: 2 -> two sbatch jobs whose agents join ------------------------------------
api POST /v1/clusters/sc/nodepools -d '{"id":"gpu","instance_types":["slurm-gpu-1"],"min_nodes":2,"max_nodes":3,"node_scale_down_delay_seconds":1,"slurm":{"partition":"gpu","time_limit":"30:00"}}'
eq "nodepool created" "$ST" 201
two_jobs() { [ "$(njobs gpu)" == 2 ]; }
wait_check $W "min_nodes 2: two sbatch jobs" two_jobs
J=$(jobs)
if awk -F'|' '$3 != "gpu" || $4 != "gres:gpu:1" || $6 != "30:00" { bad = 1 } END { exit bad }' <<<"$J"; then
    ok "each asks gres gpu:1 in partition gpu for 30:00"
else
    fail "each asks gres gpu:1 in partition gpu for 30:00"; why "$J"
fi
if awk -F'|' -v h="$HEAD_ID" '$2 !~ /^drover-/ || index($7, "drover-head=" h " drover-owner=admin drover-cluster=sc drover-nodepool=gpu drover-node=") != 1 { bad = 1 } END { exit bad }' <<<"$J"; then
    ok "named drover-NODE, the comment carries head, owner, cluster, nodepool and node"
else
    fail "named drover-NODE, the comment carries head, owner, cluster, nodepool and node"; why "$J"
fi
ready_np() { [ "$(nodes_json | jq --arg p "$1" --argjson n "$2" '[.[] | select(.nodepool == $p and .status.state == "ready")] | length == $n')" == true ]; }
wait_check $W "the jobs' agents join as the two nodes, ready" ready_np gpu 2
for f in "$TMP"/jobs/slurm-*/agent.log; do EXTRA_AGENT_LOGS+=("$f"); done
IDS=$(jobs | cut -d'|' -f1 | sort | jq -R . | jq -sc .)
jqa "the nodes carry their job ids" "$(nodes_json)" '[.[] | select(.nodepool == "gpu") | .instance_id] | sort == $i' --argjson i "$IDS"
jqa "each reports the one GPU Slurm granted (declared: no NVML here)" "$(nodes_json)" \
    'all(.[] | select(.nodepool == "gpu"); (.status.gpus | length) == 1)'
if grep -q "GPUs 1xGPU:81920" "$TMP"/jobs/slurm-*/agent.log 2>/dev/null; then
    ok "the batch script passed SLURM_GPUS_ON_NODE's count"
else
    fail "the batch script passed SLURM_GPUS_ON_NODE's count"; why "$(cat "$TMP"/jobs/slurm-*/agent.log 2>&1 | head -20)"
fi
api PATCH /v1/clusters/sc/nodepools/gpu -d '{"slurm":{"partition":"gpu","time_limit":"30:00","price_per_hour":0.25}}'
eq "the nodepool takes an operator-set price" "$ST" 200
priced() { api GET /v1/clusters/sc/nodepools/gpu; jq -e '.status.cost.nodes == 2 and .status.cost.running_usd_per_hour == 0.5' >/dev/null <<<"$BODY"; }
wait_check $W "its cost: 2 nodes x the operator's 0.25/h (the catalog says 0)" priced
api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","2"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000},"cpu_millis":100,"memory_mib":256}}'
api POST /v1/deployments -d '{"id":"dep","model":"demo","nodepools":[{"cluster":"sc","nodepool":"gpu"}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
eq "a deployment on the slurm nodepool" "$ST" 201
wait_check $W "the Slurm nodes take its replicas (2 ready)" replicas_ready dep 2

# ---- head restart adopts; an orphan job is cancelled ----------------------------------------
droverd_stop TERM
unset SLURM_CONF
droverd_start "$TMP/d" --listen "${URL#http://}" --config "$CFG" || { fail "droverd restarts"; t_done; }
export SLURM_CONF=$SC
wait_check $W "after the restart both nodes are ready again" ready_np gpu 2
slurm_cmds() { api GET /metrics; sed -n 's/^drover_slurm_commands_total //p' <<<"$BODY"; }
listed_thrice() { [ "$(slurm_cmds)" -ge 3 ] 2>/dev/null; }
wait_check $W "the restarted head runs its Slurm commands (/metrics counts them)" listed_thrice
eq "the restart submitted nothing (the same two jobs)" "$(jobs | cut -d'|' -f1 | sort | jq -R . | jq -sc .)" "$IDS"
ORPH=$(sl sbatch --parsable --output=/dev/null --job-name=drover-ghost \
    "--comment=drover-head=$HEAD_ID drover-owner=admin drover-cluster=sc drover-nodepool=gpu drover-node=ghost drover-type=slurm-cpu" \
    --wrap 'sleep 300')
orphan_gone() { ! jobs | grep -q "^$ORPH|"; }
wait_check $W "a job tagged by this head with no node is cancelled" orphan_gone

# ---- a job cancelled by hand: the node is lost, replaced ----------------------------------
VICTIM=$(jobs | grep "drover-nodepool=gpu " | head -1 | cut -d'|' -f1)
VNODE=$(nodes_json | jq -r --arg j "$VICTIM" '.[] | select(.instance_id == $j) | .id')
sl scancel "$VICTIM"
replaced()
{
    local n
    n=$(nodes_json | jq --arg v "$VNODE" '[.[] | select(.nodepool == "gpu" and .status.state == "ready" and .id != $v)] | length')
    [ "$n" == 2 ] && ! jobs | grep -q "^$VICTIM|"
}
wait_check $W "scancel by hand: the node is lost and replaced by a new job's" replaced
eq "two jobs again (the new one another id)" "$(njobs gpu),$(jobs | grep -c "^$VICTIM|")" "2,0"
wait_check $W "the replicas are ready again" replicas_ready dep 2
for f in "$TMP"/jobs/slurm-*/agent.log; do EXTRA_AGENT_LOGS+=("$f"); done

# ---- scale to zero --------------------------------------------------------------------------
api DELETE /v1/deployments/dep
api PATCH /v1/clusters/sc/nodepools/gpu -d '{"min_nodes":0}'
no_jobs() { [ "$(njobs gpu)" == 0 ]; }
wait_check $W "scale to zero: scancel, every job is gone" no_jobs
no_nodes() { [ "$(nodes_json | jq '[.[] | select(.nodepool == "gpu")] | length')" == 0 ]; }
wait_check $W "and the nodes" no_nodes

# ---- a bad partition: one clear error, no retry storm ---------------------------------------
api POST /v1/clusters/sc/nodepools -d '{"id":"bad","instance_types":["slurm-cpu"],"min_nodes":1,"slurm":{"partition":"nosuch"}}'
eq "a nodepool naming a partition Slurm lacks is accepted (Slurm decides)" "$ST" 201
locked() { api GET /v1/clusters/sc/nodepools/bad; jq -e '.status.provider_error.class == "give_up"' >/dev/null <<<"$BODY"; }
wait_check $W "the nodepool shows a give_up error" locked
jqc "in Slurm's words" '.status.provider_error.message | contains("Invalid partition")' "$BODY"
attempts() { grep -c "launch failed (give_up): Slurm: sbatch failed" "$TMP/d/droverd.log" || true; }
A0=$(attempts)
sleep 4
AB=$(( $(attempts) - A0 ))
if [ "$AB" -le 2 ]; then ok "no retry storm ($AB more sbatch attempts in 4 s)"; else fail "no retry storm"; why "$AB attempts"; fi
api DELETE /v1/clusters/sc/nodepools/bad
eq "no job was left behind" "$(jobs | wc -l)" 0

droverd_finish slurm
logs_sanitizer_clean "slurm: the agents the batch jobs started" "${EXTRA_AGENT_LOGS[@]}"
t_done
