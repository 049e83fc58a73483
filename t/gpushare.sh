#!/usr/bin/env bash
# gpushare.sh — GPU shares without a GPU.
#
# Part 1: libdrover-gpushare.so preloaded into a probe program
# (t/gpushare_probe.c) that drives a test double of the CUDA driver
# (t/fake/fake_cuda.c: a 4096 MiB "device" of host memory): allocations of
# every kind up to the share succeed and the next fails with
# CUDA_ERROR_OUT_OF_MEMORY (2) without reaching the driver; frees give the
# budget back; cuMemGetInfo / cuDeviceTotalMem report the share; the same
# through dlsym, dlsym(RTLD_DEFAULT), cuGetProcAddress(_v2) and the
# per-thread-default-stream variants, with the driver answering its exported
# symbols or internal addresses; two processes of one replica share one
# budget; with DROVER_GPUSHARE_DIR (containers) the region is a file there; a killed process's usage is reclaimed (at attach, and before a
# refusal); a forked child has its own slot; a malformed limit fails
# closed; with no limit every call passes straight through and nothing is
# logged; RTLD_NEXT still resolves from the caller.
#
# Part 2: the agent end to end (droverd + self-managed agents): a node whose
# GPU comes from NVML (the fake NVML) and where a fake
# nvidia-cuda-mps-control runs per GPU reports compute_sharing "mps"; a
# fractional replica there gets LD_PRELOAD, its share and
# CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, and reports enforcement {memory:
# enforced, compute: mps} (shown by `drover describe replica`); on a
# time-slicing node a deployment with strict_isolation is refused (failed,
# with the reason) while one without it runs.
#
# The probe, the fake driver and the library are built without sanitizers
# in both build trees (see CMakeLists.txt), so part 1 is the same there; in
# the ASan tree the library is in lib/ (not next to drover-agent), the
# agents get it with --gpushare-lib, and their replicas — ASan programs with
# a non-ASan library preloaded — need ASAN_OPTIONS=verify_asan_link_order=0.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}

# the library is next to drover-agent, except in the sanitizer tree (lib/: see CMakeLists.txt)
LIB=$(cd "$BIN_DIR" && pwd -P)/libdrover-gpushare.so
AGENT_LIB=()
if [ ! -e "$LIB" ]; then
    LIB=$(cd "$BIN_DIR" && pwd -P)/lib/libdrover-gpushare.so
    AGENT_LIB=(--gpushare-lib "$LIB")
fi
PROBE=$BIN_DIR/t/gpushare_probe
FAKE_NVML=$BIN_DIR/t/fake/libnvidia-ml.so.1
for f in "$LIB" "$PROBE" "$BIN_DIR/t/fake/libcuda.so.1"; do
    [ -e "$f" ] || { fail "built: $f"; t_done; }
done
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
RID_BASE="gst-$$"
trap 'rm -f /dev/shm/drover-gpushare-$RID_BASE-* 2>/dev/null; _workers_cleanup' EXIT

# probe [VAR=VALUE...] -- OPS...: run the probe on the fake 4096 MiB device;
# stdout in $OUT, stderr in $ERR
probe()
{
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    OUT=$(env FAKE_CUDA_DEVICE_MIB=4096 "${envs[@]}" "$PROBE" "$@" 2>"$TMP/probe.err")
    ERR=$(cat "$TMP/probe.err")
}
# rid: a new replica id in $RID, and in $GS the environment of a 1000 MiB share of it
N=0
rid()
{
    N=$((N + 1))
    RID="$RID_BASE-$N"
    GS=(LD_PRELOAD="$LIB" DROVER_GPU_MEMORY_LIMIT_MIB=1000 DROVER_REPLICA_ID="$RID")
}

# ---- part 1: the preload library against the fake driver ------------------------------------------
probe -- fill=256 info
eq "without the library the fake device holds 4096 MiB" "$OUT" \
    "fill n=16 mib=4096 rc=2
info free=0 total=4096 devtotal=4096 rc=0,0"

# Every kind of allocation, through every way of reaching the driver (proc_rt:
# cuGetProcAddress_v2 with the per-symbol versions the CUDA 13 runtime asks
# for, as traced with FAKE_CUDA_TRACE=1 under libcudart.so.13).
EXPECT="alloc 400 rc=0
async 300 rc=0
pool 200 rc=0
managed 100 rc=0
allocb 1 rc=2
info free=0 total=1000 devtotal=1000 rc=0,0
freeasync rc=0
vmm 100 rc=0
vmm 2 rc=2
vmmhost 64 rc=0
free rc=0
free rc=0
array 5120,5120 rc=0
array3d 1,1,1 rc=2
free rc=0
mipmap 5120,5120,1 rc=0
allocb 1 rc=2
free rc=0
pitch 1000,102400 rc=0 pitch=1024
pitch 1,1 rc=2 pitch=0
freeall n=4 rc=0
info free=1000 total=1000 devtotal=1000 rc=0,0
fill n=10 mib=1000 rc=2
freeall n=10 rc=0"
# shellcheck disable=SC2054
OPS=(alloc=400 async=300 pool=200 managed=100 allocb=1 info freeasync vmm=100 vmm=2 vmmhost=64
     free free array=5120,5120 array3d=1,1,1 free mipmap=5120,5120,1 allocb=1 free
     pitch=1000,102400 pitch=1,1 freeall info fill=100 freeall)
for via in direct dlsym dlsym_default proc proc_v2 proc_ptsz proc_rt; do
    for internal in 0 1; do
        [ "$internal" == 1 ] && [[ "$via" != proc* ]] && continue
        rid
        probe "${GS[@]}" FAKE_CUDA_PROC_INTERNAL=$internal -- via=$via "${OPS[@]}" \
            calls=cuMemAlloc_v2 calls=cuMemCreate calls=cuArray3DCreate_v2 calls=cuMemAllocPitch_v2 \
            calls=cuMemAllocAsync_ptsz calls=cuMemAllocFromPoolAsync_ptsz used
        what="via $via"
        [ "$internal" == 1 ] && what="$what (driver answers internal addresses)"
        eq "$what: every kind up to the 1000 MiB share, refused past it, budget back on free" \
            "$(sed -n '2,$p' <<<"$OUT" | grep -v '^calls\|^used')" "$EXPECT"
        # refused calls never reached the "device": 1 alloc + 10 fill, 1 vmm + 1 host vmm, ...
        ptsz=0
        [ "$via" == proc_ptsz ] && ptsz=1
        eq "$what: refused allocations never reach the driver" \
            "$(grep '^calls\|^used' <<<"$OUT" | tr '\n' ' ')" \
            "calls cuMemAlloc_v2=11 calls cuMemCreate=2 calls cuArray3DCreate_v2=0 calls cuMemAllocPitch_v2=1 calls cuMemAllocAsync_ptsz=$ptsz calls cuMemAllocFromPoolAsync_ptsz=$ptsz used mib=0 "
    done
done
contains "a refusal is logged on stderr with the replica, the call and the share" "$ERR" \
    "replica $RID: refused cuMemAlloc_v2 of 512 B (CUDA_ERROR_OUT_OF_MEMORY): its GPU memory share is 1000 MiB and 1000 MiB of it is in use by 1 process"
contains "the start-up line names the share and the region" "$ERR" \
    "replica $RID: GPU memory share 1000 MiB, counted in /drover-gpushare-$RID"

rid
probe "${GS[@]}" DROVER_GPU_COMPUTE_PERCENT=25 -- rtldnext missing=cuGetProcAddress_v2_ptsz \
    missing=cuMemAlloc_v2 alloc=1
eq "RTLD_NEXT resolves from the caller; missing driver functions stay missing through dlsym" "$OUT" \
    "rtldnext ok
missing cuGetProcAddress_v2_ptsz yes
missing cuMemAlloc_v2 no
alloc 1 rc=0"
contains "... the start-up line shows the compute share" "$ERR" "1000 MiB, compute 25 %"

# No limit: straight through, silent.
for lim in unset "" 0; do
    rid
    if [ "$lim" == unset ]; then envs=(LD_PRELOAD="$LIB" DROVER_REPLICA_ID="$RID")
    else envs=(LD_PRELOAD="$LIB" DROVER_GPU_MEMORY_LIMIT_MIB="$lim" DROVER_REPLICA_ID="$RID"); fi
    probe "${envs[@]}" -- via=proc_v2 fill=256 info freeall via=dlsym alloc=4096 info rtldnext
    eq "no limit (${lim:-empty}): every call passes straight through" "$OUT" \
        "via proc_v2 ok
fill n=16 mib=4096 rc=2
info free=0 total=4096 devtotal=4096 rc=0,0
freeall n=16 rc=0
via dlsym ok
alloc 4096 rc=0
info free=0 total=4096 devtotal=4096 rc=0,0
rtldnext ok"
    eq "no limit (${lim:-empty}): nothing logged, no region" "$ERR$([ -e "/dev/shm/drover-gpushare-$RID" ] && echo region)" ""
done

# A malformed limit fails closed.
rid
probe LD_PRELOAD="$LIB" DROVER_GPU_MEMORY_LIMIT_MIB=lots DROVER_REPLICA_ID="$RID" -- alloc=1 \
    managed=1 info calls=cuMemAlloc_v2
eq "a malformed limit refuses every allocation, without calling the driver" "$OUT" \
    "alloc 1 rc=2
managed 1 rc=2
info free=0 total=4096 devtotal=4096 rc=0,0
calls cuMemAlloc_v2=0"
contains "... and says why" "$ERR" 'DROVER_GPU_MEMORY_LIMIT_MIB="lots" is not a number'

# Two processes of one replica share one budget; a normal exit gives its part back.
rid
mkfifo "$TMP/p1.in"
env FAKE_CUDA_DEVICE_MIB=4096 "${GS[@]}" "$PROBE" alloc=600 wait <"$TMP/p1.in" >"$TMP/p1.out" 2>&1 &
P1=$!
_BG_PIDS+=("$P1")
exec 7>"$TMP/p1.in"
wait_until "$W" "process 1 to allocate" grep -q waiting "$TMP/p1.out"
probe "${GS[@]}" -- fill=100 region=$RID info
eq "a second process of the replica gets what the first left (400 of 1000 MiB)" "$OUT" \
    "fill n=4 mib=400 rc=2
region used_mib=1000 limit_mib=1000 procs=2
info free=0 total=1000 devtotal=1000 rc=0,0"
exec 7>&-
wait "$P1"
probe "${GS[@]}" -- region=$RID fill=100
eq "after process 1 exits, the whole share is free again" "$OUT" \
    "region used_mib=0 limit_mib=1000 procs=0
fill n=10 mib=1000 rc=2"

# DROVER_GPUSHARE_DIR (a container's: the agent shares the directory with the
# host): the region is a file there, not in /dev/shm, and outlives a process
rid
mkdir -p "$TMP/gsd"
probe "${GS[@]}" DROVER_GPUSHARE_DIR="$TMP/gsd" -- alloc=600 region=$RID
eq "DROVER_GPUSHARE_DIR: the replica's region is counted there" "$OUT" "alloc 600 rc=0
region used_mib=600 limit_mib=1000 procs=1"
check "... as the file DIR/drover-gpushare-ID, not in /dev/shm" \
    bash -c "[ -f '$TMP/gsd/drover-gpushare-$RID' ] && [ ! -e '/dev/shm/drover-gpushare-$RID' ]"
probe "${GS[@]}" DROVER_GPUSHARE_DIR="$TMP/gsd" -- region=$RID fill=100
eq "a later process of the replica finds it (the first gave its part back)" "$OUT" \
    "region used_mib=0 limit_mib=1000 procs=0
fill n=10 mib=1000 rc=2"

# A killed process's usage is reclaimed: when another attaches, and before a refusal.
rid
rm -f "$TMP/p1.in"; mkfifo "$TMP/p1.in"
env FAKE_CUDA_DEVICE_MIB=4096 "${GS[@]}" "$PROBE" alloc=700 wait <"$TMP/p1.in" >"$TMP/p1.out" 2>&1 &
P1=$!
_BG_PIDS+=("$P1")
exec 7>"$TMP/p1.in"
wait_until "$W" "process 1 to allocate" grep -q waiting "$TMP/p1.out"
mkfifo "$TMP/p2.in"
env FAKE_CUDA_DEVICE_MIB=4096 "${GS[@]}" "$PROBE" alloc=200 wait info fill=100 region=$RID <"$TMP/p2.in" >"$TMP/p2.out" 2>&1 &
P2=$!
_BG_PIDS+=("$P2")
exec 8>"$TMP/p2.in"
wait_until "$W" "process 2 to allocate" grep -q waiting "$TMP/p2.out"
{ kill -KILL "$P1"; wait "$P1"; } 2>/dev/null
exec 7>&-
exec 8>&-
wait "$P2"
eq "process 2, attached before process 1 was killed, reclaims its 700 MiB" \
    "$(grep -v drover-gpushare "$TMP/p2.out")" \
    "alloc 200 rc=0
waiting
info free=800 total=1000 devtotal=1000 rc=0,0
fill n=8 mib=800 rc=2
region used_mib=1000 limit_mib=1000 procs=1"
env FAKE_CUDA_DEVICE_MIB=4096 "${GS[@]}" "$PROBE" alloc=900 wait <"$TMP/p2.in" >"$TMP/p3.out" 2>&1 &
P3=$!
exec 8>"$TMP/p2.in"
wait_until "$W" "process 3 to allocate" grep -q waiting "$TMP/p3.out"
{ kill -KILL "$P3"; wait "$P3"; } 2>/dev/null
exec 8>&-
probe "${GS[@]}" -- fill=100
eq "a process attaching after a kill gets the killed one's share back" "$OUT" "fill n=10 mib=1000 rc=2"

# fork: the child has its own slot and gets what the parent left; its exit gives it back.
rid
probe "${GS[@]}" -- alloc=300 fork fill=100 join info fork info join
eq "a forked child counts in the same budget, under its own slot" "$OUT" \
    "alloc 300 rc=0
fill n=7 mib=700 rc=2
join status=0
info free=700 total=1000 devtotal=1000 rc=0,0
info free=700 total=1000 devtotal=1000 rc=0,0
join status=0"

# ---- part 2: the agent, end to end ------------------------------------------------------------------
PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || { fail "droverd starts"; t_done; }
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create a self-managed cluster" 201
declare -A JT
for np in mps ts; do
    api POST /v1/clusters/sm/nodepools -d "{\"id\":\"$np\",\"instance_types\":[\"self-l4\"],\"min_nodes\":0,\"max_nodes\":2}"
    status "create nodepool $np" 201
    api POST "/v1/clusters/sm/nodepools/$np/join-tokens" -d '{"uses":10}'
    status "join token for $np" 201
    JT[$np]=$(jq -r .secret <<<"$BODY")
done

# node 1: its L4 comes from NVML (the fake), and MPS (a fake control program) runs on it
mkdir -p "$TMP/bin" "$TMP/agents"
cat >"$TMP/bin/nvidia-cuda-mps-control" <<'EOF'
#!/bin/sh
d="$CUDA_MPS_PIPE_DIRECTORY"
if [ "$1" = -f ]; then
  echo $$ > "$d/../pid"; mkfifo "$d/control" || exit 1; exec sleep 1000
fi
read cmd; echo "$cmd" > "$d/../pid.quit"; [ "$cmd" = quit ] && kill "$(cat "$d/../pid")"; exit 0
EOF
chmod +x "$TMP/bin/nvidia-cuda-mps-control"
UUID=GPU-5f3c7a1e-0b1d-4c2e-9a6f-1234567890ab
cat >"$TMP/nvml.json" <<EOF
{"driver_version": "550.54.15",
 "gpus": [{"name": "NVIDIA L4", "uuid": "$UUID", "memory_total_mib": 24576, "memory_used_mib": 0}]}
EOF
PATH="$TMP/bin:$PATH" DROVER_NVML_LIBRARY="$FAKE_NVML" FAKE_NVML_CONFIG="$TMP/nvml.json" \
    "$BIN_DIR/drover-agent" --server "$URL" --data-dir "$TMP/agents/a1" --join-token "${JT[mps]}" \
    --gpus auto --cpus 4 --memory-mib 8192 "${AGENT_LIB[@]}" >>"$TMP/agents/a1.log" 2>&1 </dev/null &
A1=$!
_BG_PIDS+=("$A1")
EXTRA_AGENT_LOGS+=("$TMP/agents/a1.log")
# node 2: a declared L4, no MPS
"$BIN_DIR/drover-agent" --server "$URL" --data-dir "$TMP/agents/a2" --join-token "${JT[ts]}" \
    --gpus 1xL4:24576 --cpus 4 --memory-mib 8192 --mps off "${AGENT_LIB[@]}" \
    >>"$TMP/agents/a2.log" 2>&1 </dev/null &
A2=$!
_BG_PIDS+=("$A2")
EXTRA_AGENT_LOGS+=("$TMP/agents/a2.log")
node_of() { nodes_json | jq -r --arg np "$1" '[.[] | select(.nodepool == $np and .status.state == "ready")] | .[0].id // empty'; }
wait_check "$W" "both agents join and become ready" eval '[ -n "$(node_of mps)" ] && [ -n "$(node_of ts)" ]'
N1=$(node_of mps)
N2=$(node_of ts)
api GET "/v1/nodes/$N1"
jqc "node 1: the GPU from NVML, with MPS in force" \
    ".status.gpu_source == \"nvml\" and .status.gpus[0].uuid == \"$UUID\" and .status.gpus[0].compute_sharing == \"mps\""
check "node 1's log says MPS runs on its GPU" grep -q "compute shares: MPS on 1 of 1 GPU" "$TMP/agents/a1.log"
api GET "/v1/nodes/$N2"
jqc "node 2: a declared GPU, time-slicing" '.status.gpus[0].compute_sharing == "time-slicing"'

api POST /v1/models -d '{"id":"frac","runtime":{"command":["drover-demo-model","--weights-mib","1"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000,"compute_percent":25},"cpu_millis":500,"memory_mib":256}}'
status "create a fractional model (6000 MiB, 25 %)" 201
api POST /v1/deployments -d '{"id":"onmps","model":"frac","nodepools":[{"cluster":"sm","nodepool":"mps"}],"autoscale":{"min_replicas":1},"strict_isolation":true}'
status "create a strict deployment on the MPS node" 201
jqc "... strict_isolation is part of the deployment" '.strict_isolation == true'
ready_in() { replicas_json "deployment=$1" | jq -e '.[0].status.state == "ready"' >/dev/null; }
wait_check "$W" "its replica is ready" ready_in onmps
R=$(replicas_json "deployment=onmps")
RID1=$(jq -r '.[0].id' <<<"$R")
RPID=$(jq -r '.[0].status.pid' <<<"$R")
jqc "the replica reports enforcement {memory: enforced, compute: mps}" \
    '.[0].status.enforcement == {"memory":"enforced","compute":"mps"}' "$R"
ENVIRON=$(tr '\0' '\n' <"/proc/$RPID/environ" 2>/dev/null)
contains "the replica runs with LD_PRELOAD of the library (next to the agent, by default)" "$ENVIRON" "LD_PRELOAD=$LIB"
contains "... with its memory share" "$ENVIRON" "DROVER_GPU_MEMORY_LIMIT_MIB=6000"
check "... as an MPS client of its GPU's daemon" grep -q '^CUDA_MPS_PIPE_DIRECTORY=/.*/0/pipe$' <<<"$ENVIRON"
contains "... with its compute share as MPS active thread percentage" "$ENVIRON" "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"
cli describe replica "onmps/$RID1"
contains "drover describe replica shows the enforcement" "$OUT" "enforcement"
contains "... memory enforced" "$OUT" "enforced"
contains "... compute by MPS" "$OUT" "mps"

api POST /v1/deployments -d '{"id":"strict","model":"frac","nodepools":[{"cluster":"sm","nodepool":"ts"}],"autoscale":{"min_replicas":1},"strict_isolation":true}'
status "create a strict deployment on the time-slicing node" 201
failed_in() { replicas_json "deployment=$1" | jq -e '.[0].status.state == "failed"' >/dev/null; }
wait_check "$W" "its replica is refused (failed)" failed_in strict
jqc "... with the reason" '.[0].status.reason | test("strict isolation: its compute share of 25 % cannot be enforced")' \
    "$(replicas_json "deployment=strict")"
api POST /v1/deployments -d '{"id":"lenient","model":"frac","nodepools":[{"cluster":"sm","nodepool":"ts"}],"autoscale":{"min_replicas":1}}'
status "create a deployment without strict isolation on the time-slicing node" 201
wait_check "$W" "its replica runs" ready_in lenient
jqc "... time-slicing, memory enforced" \
    '.[0].status.enforcement == {"memory":"enforced","compute":"time-slicing"}' "$(replicas_json "deployment=lenient")"
MPSD=$(cat "$TMP/agents/a1/mps/0/pid" 2>/dev/null)
check "node 1's MPS control daemon runs" pid_alive "$MPSD"
kill -TERM "$A1" "$A2"
wait "$A1"
eq "agent 1 exits 0 on SIGTERM" "$?" 0
wait "$A2"
eq "agent 2 exits 0 on SIGTERM" "$?" 0
check "... and agent 1 stopped its MPS daemon" pids_gone "$MPSD"
check "... after asking it to quit" grep -q "quit" "$TMP/agents/a1/mps/0/pid.quit"
logs_sanitizer_clean "gpushare" "$TMP/agents/a1.log" "$TMP/agents/a2.log"
t_done
