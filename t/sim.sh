#!/usr/bin/env bash
# sim.sh — drover-sim end to end on a cut-down Alibaba GPU-sharing trace
# made at test time from the shared data (about 100 GPU nodes, 300 pods):
# `placement` prints the benchmark's keys for every policy asked, is
# deterministic (same seeds -> byte-identical JSON), reacts to the seed;
# malformed CSVs are rejected with FILE:LINE and a reason (exit 1); bad
# usage exits 2; `speed` and `policies` answer. Takes a few seconds.
# Skips (exit 0, with a message) only when the shared data is missing.
. "$(dirname "$0")/lib/common.bash"

SIM=$(dirname "$DROVERD")/drover-sim
if [ ! -x "$SIM" ]; then
    echo "drover-sim not built next to $DROVERD" >&2
    exit 1
fi
DATA=""
for d in "$DROVER_SRC/../shared/data/alibaba-gpu-v2023" "$DROVER_SRC/../shared/alibaba-gpu-v2023"; do
    if [ -f "$d/openb_node_list_gpu_node.csv" ] && [ -f "$d/openb_pod_list_default.csv" ]; then
        DATA=$d
        break
    fi
done
if [ -z "$DATA" ]; then
    echo "skip: no Alibaba trace under $DROVER_SRC/../shared/data or ../shared (see SOURCES.md)"
    exit 0
fi

# ---- a small trace: every 12th GPU node, every 27th pod (all kinds of each) ---------
awk -F, 'NR == 1 || (NR - 2) % 12 == 0' "$DATA/openb_node_list_gpu_node.csv" >nodes.csv
awk -F, 'NR == 1 || (NR - 2) % 27 == 0' "$DATA/openb_pod_list_default.csv" >pods.csv
N_NODES=$(($(wc -l <nodes.csv) - 1))
N_PODS=$(($(wc -l <pods.csv) - 1))
check "cut-down trace: ~100 nodes, ~300 pods ($N_NODES, $N_PODS)" \
    test "$N_NODES" -ge 90 -a "$N_PODS" -ge 280

# ---- placement: the output -----------------------------------------------------------
POLICIES=drover,fgd,random,best-fit,packing,spread,dotprod,clustering,paper-bestfit
"$SIM" placement --nodes nodes.csv --pods pods.csv --policy "$POLICIES" --seeds 1-3 -o json \
    >a.json 2>a.err
eq "placement exits 0" "$?" 0
OUT=$(cat a.json)
jqc "header: nodes, GPUs, pods, seeds, inflate" \
    ".nodes == $N_NODES and .pods == $N_PODS and .gpus > 0 and .seeds == [1,2,3] and .inflate == 1.3 and .typical_shapes > 0" "$OUT"
jqc "one result per policy, in the order asked" \
    '[.policies[].policy] == ["drover","fgd","random","best-fit","packing","spread","dotprod","clustering","paper-bestfit"]' "$OUT"
jqc "each: alloc and unallocated at arrival 100 % as {mean, sd}, summing to 100" \
    'all(.policies[]; (.alloc_gpu_pct_at_arrival_100 | (.mean | type == "number") and (.sd | type == "number") and .sd >= 0)
        and (.unallocated_gpu_pct_at_arrival_100.mean | type == "number")
        and ((.alloc_gpu_pct_at_arrival_100.mean + .unallocated_gpu_pct_at_arrival_100.mean - 100) | fabs < 0.011)
        and .alloc_gpu_pct_at_arrival_100.mean > 50 and .alloc_gpu_pct_at_arrival_100.mean <= 100)' "$OUT"
jqc "each: fragmentation % and pods placed / failed" \
    'all(.policies[]; (.frag_gpu_pct_at_arrival_100.mean | type == "number") and .frag_gpu_pct_at_arrival_100.mean >= 0
        and .pods_placed.mean > 0 and .pods_failed.mean >= 0)' "$OUT"
jqc "each: the curve over arrival 0..130 %, allocation never above arrival" \
    'all(.policies[]; (.curve.arrival_pct == [range(0;131)])
        and (.curve.alloc_gpu_pct | length == 131) and (.curve.frag_gpu_pct | length == 131)
        and ([.curve.arrival_pct, .curve.alloc_gpu_pct] | transpose | all(.[1] == null or .[1] <= .[0] + 1)))' "$OUT"
jqc "fragmentation-aware policies leave fewer GPUs unallocated than random" \
    '(.policies | map({(.policy): .unallocated_gpu_pct_at_arrival_100.mean}) | add) as $u
     | $u.drover < $u.random and $u.fgd < $u.random' "$OUT"

# ---- determinism -----------------------------------------------------------------------
"$SIM" placement --nodes nodes.csv --pods pods.csv --policy "$POLICIES" --seeds 1-3 -o json >b.json
check "same seeds: byte-identical JSON" cmp -s a.json b.json
"$SIM" placement --nodes nodes.csv --pods pods.csv --policy "$POLICIES" --seeds 4-6 -o json >c.json
check "other seeds: other numbers" bash -c '! cmp -s a.json c.json'
"$SIM" placement --nodes nodes.csv --pods pods.csv --policy drover --seeds 2 --timing \
    >t.txt 2>t.err
eq "table output exits 0" "$?" 0
contains "table lists the policy" "$(cat t.txt)" "drover"
contains "--timing reports decisions on stderr" "$(cat t.err)" "decisions in"

# ---- malformed input: FILE:LINE: reason, exit 1 ------------------------------------------
# bad_csv NAME KIND CONTENT WANT: drover-sim rejects the file with WANT in its message
bad_csv()
{
    local name=$1 kind=$2 content=$3 want=$4 args rc err
    printf '%b' "$content" >bad.csv
    if [ "$kind" == nodes ]; then args=(--nodes bad.csv --pods pods.csv); else args=(--nodes nodes.csv --pods bad.csv); fi
    err=$("$SIM" placement "${args[@]}" --policy drover --seeds 1 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" == 1 ] && [[ "$err" == *"$want"* ]]; then
        ok "malformed $kind ($name): exit 1, '$want'"
    else
        fail "malformed $kind ($name): exit 1, '$want'"
        why "rc $rc: $err"
    fi
}
P='name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n'
bad_csv "too few fields" pods "${P}p1,1000,1000,1,500,\np2,1000,1000,1\n" "bad.csv:3: 4 fields, the header has 6"
bad_csv "not a number" pods "${P}p1,10x0,1000,1,500,\n" "bad.csv:2: cpu_milli '10x0' is not a non-negative integer"
bad_csv "negative" pods "${P}p1,1000,-5,1,500,\n" "bad.csv:2: memory_mib '-5'"
bad_csv "missing column" pods 'name,cpu_milli,memory_mib,num_gpu\np1,1,1,0\n' "bad.csv:1: header has no column 'gpu_milli'"
bad_csv "duplicate name" pods "${P}p1,1000,1000,1,500,\np2,1,1,0,0,\np1,1,1,0,0,\n" "bad.csv:4: duplicate name 'p1' (also on line 2)"
bad_csv "multi-GPU share" pods "${P}p1,1000,1000,2,500,\n" "bad.csv:2: num_gpu 2 with gpu_milli 500"
bad_csv "gpu_milli without GPUs" pods "${P}p1,1000,1000,0,500,\n" "bad.csv:2: gpu_milli 500 with num_gpu 0"
bad_csv "more than a GPU" pods "${P}p1,1000,1000,1,1500,\n" "bad.csv:2: gpu_milli 1500 is more than 1000"
bad_csv "quoted field" pods "${P}\"p1\",1000,1000,1,500,\n" "bad.csv:2: field 1: quoted fields are not supported"
bad_csv "empty gpu model" pods "${P}p1,1000,1000,1,500,V100||T4\n" "bad.csv:2: gpu_spec has an empty GPU model"
bad_csv "header only" pods "${P}" "bad.csv:1: no pods after the header"
bad_csv "empty file" pods "" "bad.csv:1: empty file"
bad_csv "NUL byte" pods "${P}p1,1\\0000,1000,1,500,\n" "bad.csv:2: NUL byte"
bad_csv "too many GPUs" nodes 'sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,65,G2\n' "bad.csv:2: gpu 65 is more than 64"
bad_csv "node field count" nodes 'sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,8,G2,extra\n' "bad.csv:2: 6 fields, the header has 5"
bad_csv "empty name" nodes 'sn,cpu_milli,memory_mib,gpu,model\n,1000,1000,8,G2\n' "bad.csv:2: sn is empty"
bad_csv "no GPU node" nodes 'sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,0,nan\n' "bad.csv: no node has a GPU"
# CRLF and blank lines are fine
printf 'sn,cpu_milli,memory_mib,gpu,model\r\nn1,96000,393216,8,G2\r\n\r\n' >crlf.csv
"$SIM" placement --nodes crlf.csv --pods pods.csv --policy drover --seeds 1 >/dev/null 2>crlf.err
eq "CRLF line ends and blank lines are accepted" "$?" 0
err=$("$SIM" placement --nodes nope.csv --pods pods.csv 2>&1 >/dev/null)
rc=$?
eq "a missing file exits 1" "$rc" 1
contains "and says which" "$err" "nope.csv: No such file or directory"

# ---- usage: exit 2 ----------------------------------------------------------------------
# usage NAME ARGS...: drover-sim exits 2
usage()
{
    local name=$1
    shift
    "$SIM" "$@" >/dev/null 2>&1
    eq "usage error exits 2: $name" "$?" 2
}
usage "no command"
usage "unknown command" frobnicate
usage "unknown policy" placement --nodes nodes.csv --pods pods.csv --policy nope
usage "bad seeds" placement --nodes nodes.csv --pods pods.csv --seeds 5-3
usage "bad inflate" placement --nodes nodes.csv --pods pods.csv --inflate zero
usage "missing --pods" placement --nodes nodes.csv
usage "bad -o" placement --nodes nodes.csv --pods pods.csv -o yaml
usage "speed: bad count" speed --nodes nodes.csv --pods pods.csv --node-count -3
"$SIM" placement --help >h.txt
eq "placement --help exits 0" "$?" 0
contains "--help lists the policies" "$(cat h.txt)" "paper-bestfit"

# ---- speed and policies ------------------------------------------------------------------
OUT=$("$SIM" speed --nodes nodes.csv --pods pods.csv --policy drover,fgd --node-count 300 --replicas 2000 -o json)
eq "speed exits 0" "$?" 0
jqc "speed: decisions/s and latency per policy" \
    'length == 2 and all(.[]; .nodes == 300 and .decisions == 2000 and .placed > 0 and .decisions_per_s > 0
                              and .p99_us >= .p50_us and .max_us >= .p99_us)' "$OUT"
OUT=$("$SIM" policies)
contains "policies: drover is the default" "$(head -1 <<<"$OUT")" "drover"
contains "policies: the paper's fgd is there" "$OUT" "fgd "

t_done
