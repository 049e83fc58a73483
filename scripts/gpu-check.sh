#!/usr/bin/env bash
# scripts/gpu-check.sh — GPU shares on a machine with a real NVIDIA GPU, in
# under 5 minutes. What the test doubles cannot show (design §10):
#
#   1. drover-agent detects the GPUs through NVML (`drover-agent --print-gpus`
#      agrees with nvidia-smi);
#   2. four processes, each preloaded with libdrover-gpushare.so under a
#      quarter share of GPU 0, allocate (cudaMalloc in 64 MiB, then 1 MiB
#      chunks, then one cuMemAlloc_v2) until refused, and each is refused by
#      the library exactly at its share (within the 2 MiB the driver rounds
#      large allocations to), not before (the driver running out) and not
#      after; cudaMemGetInfo reports the share; the device really holds all
#      four shares at once (nvidia-smi);
#   3. the four then run kernels concurrently (every allocated byte written
#      and read back, plus a compute kernel) and all finish;
#   4. the per-call overhead of the interposer, against no preload, for
#      cuMemGetInfo, cuMemAlloc+cuMemFree and their runtime equivalents;
#   5. where nvidia-cuda-mps-control is present: a private MPS control
#      daemon on GPU 0 and the same compute-bound kernel run at 100 % and
#      with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25: the share is seen when the
#      25 % run takes at least twice as long (ideally 4x).
# It prints a table and exits non-zero on any FAIL (SKIP is not a failure).
#
# usage: scripts/gpu-check.sh [BUILD_DIR]
#   BUILD_DIR holds drover-agent and libdrover-gpushare.so (default
#   build-gpu-check, configured and built here when they are missing; when
#   the project cannot be built, the library alone is built with cc and the
#   NVML check fails). bench/gpushare/gpucheck.cu is built with nvcc (PATH,
#   $CUDA_HOME/bin or /usr/local/cuda/bin).
# Knobs: GPUCHECK_RESERVE_MIB [1536] per process kept out of the shares for
#   the CUDA context and the driver; GPUCHECK_BENCH_CALLS [20000];
#   GPUCHECK_PROGRAM: run this instead of building gpucheck.cu (for testing
#   this script without a GPU).
# Touches nothing outside its temp dir: it starts its own MPS daemon with a
# private pipe directory (quit at exit) and does not change GPU settings.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build-gpu-check}
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
RESERVE=${GPUCHECK_RESERVE_MIB:-1536}
CALLS=${GPUCHECK_BENCH_CALLS:-20000}
TMP=$(mktemp -d /tmp/drover-gpucheck.XXXXXX)
RID="gpucheck-$$"
START=$SECONDS
ROWS=()
FAILS=0
BG=()
MPS_UP=""

row()   # CHECK RESULT DETAIL
{
    ROWS+=("$1|$2|$3")
    [ "$2" == FAIL ] && FAILS=$((FAILS + 1))
    printf '%-4s  %s: %s\n' "$2" "$1" "$3" >&2
}

cleanup()
{
    local p
    for p in "${BG[@]}"; do kill -KILL "$p" 2>/dev/null; done
    if [ -n "$MPS_UP" ]; then
        echo quit | CUDA_MPS_PIPE_DIRECTORY="$TMP/mps/pipe" nvidia-cuda-mps-control >/dev/null 2>&1
        sleep 1
    fi
    rm -f /dev/shm/drover-gpushare-"$RID"-* 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

table()
{
    local r
    echo
    echo "| check | result | detail |"
    echo "|---|---|---|"
    for r in "${ROWS[@]}"; do
        IFS='|' read -r c res d <<<"$r"
        echo "| $c | $res | $d |"
    done
    echo
    echo "$((${#ROWS[@]} - FAILS)) of ${#ROWS[@]} checks passed or skipped, $FAILS failed, in $((SECONDS - START)) s"
}

finish() { table; [ "$FAILS" -eq 0 ]; exit $?; }

field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -n1; }   # field NAME LINE

# ---- prerequisites ------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
    row "NVIDIA GPU" FAIL "nvidia-smi not found"
    finish
fi
SMI=$(nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,memory.free \
    --format=csv,noheader,nounits 2>&1)
if [ -z "$SMI" ] || ! grep -q GPU- <<<"$SMI"; then
    row "NVIDIA GPU" FAIL "nvidia-smi sees no GPU: $(head -c 200 <<<"$SMI")"
    finish
fi
NGPU=$(grep -c GPU- <<<"$SMI")
IFS=',' read -r _ UUID GNAME GTOTAL GUSED GFREE <<<"$(head -n1 <<<"$SMI")"
UUID=$(tr -d ' ' <<<"$UUID")
GNAME=$(sed 's/^ *//' <<<"$GNAME")
GFREE=$(tr -d ' ' <<<"$GFREE")
GUSED=$(tr -d ' ' <<<"$GUSED")
GTOTAL=$(tr -d ' ' <<<"$GTOTAL")
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
echo "gpu-check: $NGPU GPU(s); GPU 0 = $GNAME $UUID, $GTOTAL MiB ($GFREE MiB free), driver $DRIVER" >&2

NVCC=$(command -v nvcc 2>/dev/null || true)
for c in "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
    [ -z "$NVCC" ] && [ -x "$c" ] && NVCC=$c
done
if [ -z "$NVCC" ] && [ -z "${GPUCHECK_PROGRAM:-}" ]; then
    row "nvcc" FAIL "not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
    finish
fi

# ---- build ----------------------------------------------------------------------------------
LIB="$BUILD/libdrover-gpushare.so"
AGENT="$BUILD/drover-agent"
if [ ! -x "$AGENT" ] || [ ! -e "$LIB" ]; then
    echo "gpu-check: building drover-agent and libdrover-gpushare.so in $BUILD" >&2
    if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
           cmake --build "$BUILD" -j "$(nproc)" --target drover-agent drover-gpushare; } \
           >"$TMP/build.log" 2>&1; then
        mkdir -p "$BUILD"
        if cc -O2 -fPIC -shared -fvisibility=hidden -foptimize-sibling-calls -I"$ROOT/src" \
              -o "$LIB" "$ROOT"/src/gpushare/{interpose,config,region,sizemap}.c -ldl -lpthread \
              >>"$TMP/build.log" 2>&1; then
            row "build" FAIL "the project did not build (only the library, with cc): $(grep -m1 -i error "$TMP/build.log" | head -c 160)"
        else
            row "build" FAIL "$(grep -m1 -i error "$TMP/build.log" | head -c 200)"
            finish
        fi
    fi
fi
GC="$TMP/gpucheck"
if [ -n "${GPUCHECK_PROGRAM:-}" ]; then
    cp "$GPUCHECK_PROGRAM" "$GC"
else
    "$NVCC" -O2 -arch=native -o "$GC" "$ROOT/bench/gpushare/gpucheck.cu" -lcuda \
        >"$TMP/nvcc.log" 2>&1 ||
        "$NVCC" -O2 -o "$GC" "$ROOT/bench/gpushare/gpucheck.cu" -lcuda \
            -L"$(dirname "$NVCC")/../lib64/stubs" >>"$TMP/nvcc.log" 2>&1
    if [ ! -x "$GC" ]; then
        row "nvcc build of gpucheck.cu" FAIL "$(tail -n 3 "$TMP/nvcc.log" | tr '\n' ' ' | head -c 200)"
        finish
    fi
fi

# ---- 1. NVML through the agent ------------------------------------------------------------------
if [ -x "$AGENT" ]; then
    "$AGENT" --print-gpus --gpus auto >"$TMP/gpus.json" 2>"$TMP/gpus.err"
    SRC=$(sed -n 's/.*"gpu_source": *"\([a-z]*\)".*/\1/p' "$TMP/gpus.json" | head -n1)
    AG_UUIDS=$(grep -o '"uuid": *"GPU-[^"]*"' "$TMP/gpus.json" | sed 's/.*"\(GPU-[^"]*\)"/\1/' | sort | tr '\n' ' ')
    SMI_UUIDS=$(grep -o 'GPU-[0-9a-fA-F-]*' <<<"$SMI" | sort | tr '\n' ' ')
    MSG=$(sed -n 's/.*"message": *"\([^"]*\)".*/\1/p' "$TMP/gpus.json" | head -n1)
    if [ "$SRC" == nvml ] && [ "$AG_UUIDS" == "$SMI_UUIDS" ]; then
        row "agent detects the GPUs through NVML" PASS "$MSG"
    else
        row "agent detects the GPUs through NVML" FAIL "source '$SRC' ($MSG), UUIDs '$AG_UUIDS' vs nvidia-smi '$SMI_UUIDS' $(head -c 120 "$TMP/gpus.err")"
    fi
fi

# ---- calibrate the compute kernel (whole GPU, no preload) --------------------------------------------
CAL=$(CUDA_VISIBLE_DEVICES=$UUID timeout 60 "$GC" calibrate 1000 2>&1)
WORK=$(field work "$CAL")
if [ -z "$WORK" ]; then
    row "compute kernel" FAIL "calibration failed: $(head -c 200 <<<"$CAL")"
    finish
fi

# ---- 2 + 3. four processes under quarter shares ---------------------------------------------------------
SHARE=$(((GFREE - 4 * RESERVE) / 4))
if [ "$SHARE" -lt 1024 ]; then
    row "quarter shares" FAIL "GPU 0 has $GFREE MiB free: less than 1 GiB per share after $RESERVE MiB per process"
    finish
fi
USED0=$(nvidia-smi --id="$UUID" --query-gpu=memory.used --format=csv,noheader,nounits | tr -d ' ')
for i in 0 1 2 3; do
    env CUDA_VISIBLE_DEVICES="$UUID" LD_PRELOAD="$LIB" DROVER_GPU_MEMORY_LIMIT_MIB="$SHARE" \
        DROVER_REPLICA_ID="$RID-$i" timeout 180 "$GC" fill 64 "$TMP/go" "$WORK" \
        >"$TMP/fill$i.out" 2>"$TMP/fill$i.err" &
    BG+=("$!")
done
for ((t = 0; t < 1200; t++)); do
    n=0
    for i in 0 1 2 3; do grep -q '^ready' "$TMP/fill$i.out" 2>/dev/null && n=$((n + 1)); done
    [ "$n" == 4 ] && break
    dead=0
    for p in "${BG[@]}"; do kill -0 "$p" 2>/dev/null || dead=1; done
    [ "$dead" == 1 ] && break
    sleep 0.1
done
USED4=$(nvidia-smi --id="$UUID" --query-gpu=memory.used --format=csv,noheader,nounits | tr -d ' ')
for i in 0 1 2 3; do
    L=$(grep '^filled' "$TMP/fill$i.out" 2>/dev/null)
    M=$(field mib "$L")
    RT=$(field runtime_err "$L")
    DR=$(field driver_rc "$L")
    IT=$(field info_total_mib "$L")
    IF=$(field info_free_mib "$L")
    REFUSED=$(grep -c "replica $RID-$i: refused" "$TMP/fill$i.err" 2>/dev/null)
    if [ -z "$L" ]; then
        row "process $i refused at its $SHARE MiB share" FAIL "no result: $(tail -n 2 "$TMP/fill$i.err" "$TMP/fill$i.out" | tr '\n' ' ' | head -c 200)"
    elif [ "$M" -le "$SHARE" ] && [ "$M" -ge $((SHARE - 2)) ] && [ "$RT" == 2 ] && [ "$DR" == 2 ] &&
         [ "${REFUSED:-0}" -ge 1 ] && [ "$IT" == "$SHARE" ] && [ "$IF" -le 2 ]; then
        row "process $i refused at its $SHARE MiB share" PASS "allocated $M MiB; cudaMalloc -> 2, cuMemAlloc_v2 -> 2, refused by drover-gpushare; cudaMemGetInfo total $IT free $IF MiB"
    else
        row "process $i refused at its $SHARE MiB share" FAIL "allocated $M MiB (runtime error $RT, driver $DR, $REFUSED refusals logged, cudaMemGetInfo total $IT free $IF MiB)"
    fi
done
DELTA=$((USED4 - USED0))
if [ "$DELTA" -ge $((4 * SHARE)) ]; then
    row "the device holds the four shares at once" PASS "nvidia-smi: +$DELTA MiB used for 4 x $SHARE MiB"
else
    row "the device holds the four shares at once" FAIL "nvidia-smi: +$DELTA MiB used, want >= $((4 * SHARE))"
fi
touch "$TMP/go"
OKS=0
MAXMS=0
for i in 0 1 2 3; do
    wait "${BG[$i]}" 2>/dev/null
    K=$(grep '^kernel' "$TMP/fill$i.out" 2>/dev/null)
    if [ "$(field ok "$K")" == 1 ]; then
        OKS=$((OKS + 1))
        MS=$(field ms "$K")
        MAXMS=$(awk -v a="$MAXMS" -v b="$MS" 'BEGIN { print (b > a ? b : a) }')
    fi
done
BG=()
if [ "$OKS" == 4 ]; then
    row "four processes run kernels concurrently" PASS "all finished, data verified; slowest ${MAXMS} ms (1 alone: $(field ms "$CAL") ms of compute)"
else
    row "four processes run kernels concurrently" FAIL "$OKS of 4 finished: $(grep -h '^kernel' "$TMP"/fill*.out | tr '\n' ' ' | head -c 200)"
fi

# ---- 4. overhead per call -----------------------------------------------------------------------------
bench() { CUDA_VISIBLE_DEVICES=$UUID timeout 120 env "$@" "$GC" bench "$CALLS" 2>/dev/null | grep '^bench'; }
B0=$(bench X=0)
B1=$(bench LD_PRELOAD="$LIB")
B2=$(bench LD_PRELOAD="$LIB" DROVER_GPU_MEMORY_LIMIT_MIB=8192 DROVER_REPLICA_ID="$RID-bench")
if [ -n "$B0" ] && [ -n "$B1" ] && [ -n "$B2" ]; then
    d() { awk -v a="$(field "$1" "$2")" -v b="$(field "$1" "$B0")" 'BEGIN { printf "%.0f ns (%+.0f)", a, a - b }'; }
    row "overhead, no limit (vs no preload)" PASS "cuMemGetInfo $(d drv_info_ns "$B1"); cuMemAlloc+Free $(d drv_pair_ns "$B1"); cudaMemGetInfo $(d rt_info_ns "$B1"); cudaMalloc+Free $(d rt_pair_ns "$B1")"
    row "overhead, 8 GiB share (vs no preload)" PASS "cuMemGetInfo $(d drv_info_ns "$B2"); cuMemAlloc+Free $(d drv_pair_ns "$B2"); cudaMemGetInfo $(d rt_info_ns "$B2"); cudaMalloc+Free $(d rt_pair_ns "$B2")"
else
    row "overhead per call" FAIL "a bench run failed"
fi

# ---- 5. MPS compute share ---------------------------------------------------------------------------------
if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    row "MPS compute share" SKIP "nvidia-cuda-mps-control not found: replicas time-slice"
else
    mkdir -p "$TMP/mps/pipe" "$TMP/mps/log"
    export CUDA_MPS_PIPE_DIRECTORY="$TMP/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/mps/log"
    CUDA_VISIBLE_DEVICES=$UUID nvidia-cuda-mps-control -d >"$TMP/mps.out" 2>&1
    for ((t = 0; t < 50; t++)); do
        [ -e "$TMP/mps/pipe/control" ] && break
        sleep 0.1
    done
    if [ ! -e "$TMP/mps/pipe/control" ]; then
        row "MPS compute share" SKIP "the control daemon did not start: $(cat "$TMP/mps.out" "$TMP/mps/log/control.log" 2>/dev/null | tail -n 2 | tr '\n' ' ' | head -c 160)"
    else
        MPS_UP=1
        S100=$(CUDA_VISIBLE_DEVICES=$UUID timeout 60 "$GC" spin "$WORK" 2>&1)
        S25=$(CUDA_VISIBLE_DEVICES=$UUID CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 timeout 60 "$GC" spin "$WORK" 2>&1)
        T100=$(field ms "$S100")
        T25=$(field ms "$S25")
        if [ -n "$T100" ] && [ -n "$T25" ]; then
            R=$(awk -v a="$T25" -v b="$T100" 'BEGIN { printf "%.2f", a / b }')
            if awk -v r="$R" 'BEGIN { exit !(r >= 2.0) }'; then
                row "MPS compute share (25 %)" PASS "kernel ${T25} ms at 25 % vs ${T100} ms at 100 %: ${R}x (SMs reported: $(field sms "$S25") vs $(field sms "$S100"))"
            else
                row "MPS compute share (25 %)" FAIL "kernel ${T25} ms at 25 % vs ${T100} ms at 100 %: only ${R}x"
            fi
        else
            row "MPS compute share (25 %)" FAIL "the kernel did not run under MPS: $(head -c 160 <<<"$S100 $S25")"
        fi
        echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
        MPS_UP=""
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
finish
