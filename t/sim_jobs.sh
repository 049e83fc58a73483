#!/usr/bin/env bash
# sim_jobs.sh — `drover-sim jobs` end to end on a tiny trace made at test
# time by bench/jobs/gen_trace.py (60 jobs, 4 nodes of 8 GPUs): the JSON
# report's structure (the three scenarios in order, every metric a number),
# every job completes in every scenario, FIFO never preempts nor does EASY,
# the table output, determinism (same input -> identical output), a
# malformed trace refused with FILE:LINE (exit 1), usage errors (exit 2).
# Checks structure, not timing. Takes about a second.
. "$(dirname "$0")/lib/common.bash"

SIM=$(dirname "$DROVERD")/drover-sim
if [ ! -x "$SIM" ]; then
    echo "drover-sim not built next to $DROVERD" >&2
    exit 1
fi
python3 "$DROVER_SRC/bench/jobs/gen_trace.py" --jobs 60 --users 4 --hours 2 --seed 3 \
    --max-gpus 32 --nodes 4 --nodes-out nodes.csv >trace.csv
eq "generator wrote 60 jobs" "$(($(wc -l <trace.csv) - 1))" 60

"$SIM" jobs --trace trace.csv --nodes nodes.csv -o json >a.json 2>a.err
eq "jobs -o json exits 0" "$?" 0
OUT=$(cat a.json)
jqc "header: 60 jobs, 32 GPUs on 4 nodes" '.trace == {"jobs":60,"gpus":32,"nodes":4}' "$OUT"
jqc "the three scenarios, in order" '[.scenarios[].name] == ["drover","fifo","easy"]' "$OUT"
jqc "every metric is a number" \
    'all(.scenarios[]; ([.jct_s.mean, .jct_s.p99, .queueing_s.mean, .queueing_s.p99,
         .gpu_utilisation, .makespan_s, .preemptions, .gpu_hours_lost] | all(type == "number")))' "$OUT"
jqc "every job completes in every scenario" \
    'all(.scenarios[]; .jobs_completed == 60 and .jobs_unschedulable == 0)' "$OUT"
jqc "p99 >= mean, JCT >= queueing, utilisation in (0, 1]" \
    'all(.scenarios[]; .jct_s.p99 >= .jct_s.mean and .jct_s.mean >= .queueing_s.mean
        and .gpu_utilisation > 0 and .gpu_utilisation <= 1)' "$OUT"
jqc "only drover preempts" \
    '.scenarios[1].preemptions == 0 and .scenarios[2].preemptions == 0
     and .scenarios[1].gpu_hours_lost == 0' "$OUT"

"$SIM" jobs --trace trace.csv --nodes nodes.csv -o json >b.json
check "deterministic: same input, same report" cmp -s a.json b.json
TABLE=$("$SIM" jobs --trace trace.csv --nodes nodes.csv)
contains "table: the header" "$TABLE" "JCT mean s"
contains "table: the drover row" "$TABLE" "drover"
contains "table: the easy row" "$TABLE" "easy"

# a job bigger than the cluster is unschedulable, the others complete
{ cat trace.csv; echo "7200,u9,8,8,60,0,0"; } >big.csv
OUT=$("$SIM" jobs --trace big.csv --nodes nodes.csv -o json)
jqc "a 64-GPU job on 32 GPUs: unschedulable, the 60 others complete" \
    'all(.scenarios[]; .jobs_completed == 60 and .jobs_unschedulable == 1)' "$OUT"

# ---- bad input ------------------------------------------------------------------------------
printf 'submit_time,user,workers,gpus_per_worker,duration,priority,preemptible\n0,a,0,1,10,0,0\n' >bad.csv
"$SIM" jobs --trace bad.csv --nodes nodes.csv >/dev/null 2>bad.err
eq "workers 0 -> exit 1" "$?" 1
contains "workers 0: FILE:LINE and the reason" "$(cat bad.err)" "bad.csv:2: workers must be an integer 1..4096"
printf 'submit_time,user,workers\n0,a,1\n' >cols.csv
"$SIM" jobs --trace cols.csv --nodes nodes.csv >/dev/null 2>cols.err
eq "missing column -> exit 1" "$?" 1
contains "missing column named" "$(cat cols.err)" "no column 'gpus_per_worker'"
"$SIM" jobs --trace trace.csv >/dev/null 2>&1
eq "no --nodes -> exit 2" "$?" 2
"$SIM" jobs --trace trace.csv --nodes nodes.csv -o xml >/dev/null 2>&1
eq "-o xml -> exit 2" "$?" 2

t_done
