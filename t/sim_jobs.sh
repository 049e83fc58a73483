#!/usr/bin/env bash
# sim_jobs.sh — `drover-sim jobs` end to end on a tiny trace made at test
# time by bench/jobs/gen_trace.py (60 jobs, 4 nodes of 8 GPUs): the JSON
# report's structure (the three scenarios in order, every metric a number),
# every job completes in every scenario, FIFO never preempts nor does EASY,
# gen_trace.py --from-helios on a 4-line Helios log, the per-job comparison
# with FIFO (recomputed from --jobs-out), the FIFO shadow's waits (exact:
# FIFO's own; --refine-shadow: closer to them under noisy estimates), the
# no-queue bound, --no-preemption, --aging,
# the table output, determinism (same input -> identical output), a
# malformed trace refused with FILE:LINE (exit 1), usage errors (exit 2).
# Checks structure, not timing. Takes about a second.
. "$(dirname "$0")/lib/common.bash"

SIM=$(dirname "$DROVERD")/drover-sim
if [ ! -x "$SIM" ]; then
    echo "drover-sim not built next to $DROVERD" >&2
    exit 1
fi
python3 -S "$DROVER_SRC/bench/jobs/gen_trace.py" --jobs 60 --users 4 --hours 2 --seed 3 \
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

# ---- gen_trace.py --from-helios: (GPUs, duration) pairs resampled from a Helios log --------
cat >helios.csv <<'EOT'
job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1,uA,vc1,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0
2,uB,vc1,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0
3,uC,vc1,0,1,1,COMPLETED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-17 14:15:21,675233,0
4,uD,vc2,16,64,2,COMPLETED,2020-06-09 09:00:00,2020-06-09 09:00:00,2020-06-09 10:00:00,3600,0
EOT
python3 -S "$DROVER_SRC/bench/jobs/gen_trace.py" --jobs 40 --from-helios helios.csv --seed 5 >ht.csv
eq "from-helios: 40 jobs" "$(($(wc -l <ht.csv) - 1))" 40
eq "from-helios: only the log's GPU jobs (1x1 36848 s, 1x4 249 s, 2x8 3600 s), never the 0-GPU one" \
    "$(tail -n +2 ht.csv | awk -F, '{print $3"x"$4" "$5}' | sort -u | tr '\n' ';')" \
    "1x1 36848.0;1x4 249.0;2x8 3600.0;"
eq "from-helios: arrivals only in the log's hours (09 and 18)" \
    "$(tail -n +2 ht.csv | awk -F, '{h = int($1 / 3600) % 24; print h}' | sort -un | tr '\n' ' ')" "9 18 "
"$SIM" jobs --trace ht.csv --nodes nodes.csv -o json >/dev/null
eq "the resampled trace runs" "$?" 0
printf 'a,b\n1,2\n' >nothelios.csv
python3 -S "$DROVER_SRC/bench/jobs/gen_trace.py" --from-helios nothelios.csv >/dev/null 2>nh.err
eq "not a Helios log -> exit 1" "$?" 1
contains "not a Helios log: the missing columns named" "$(cat nh.err)" "not a Helios cluster_log.csv"

# ---- the per-job comparison with FIFO, aging, --no-preemption, --jobs-out -------------------
OUT=$("$SIM" jobs --trace trace.csv --nodes nodes.csv -o json --jobs-out perjob.csv)
jqc "vs_fifo: every completed job compared; FIFO against itself: none over 2x, worst 1" \
    '(.scenarios[1].vs_fifo | .jobs == 60 and .over_2x == 0 and .worst_ratio <= 1)
     and all(.scenarios[]; .vs_fifo.jobs == 60)' "$OUT"
jqc "defaults: aging 600 s, floor 600 s, bounded heads reserved by placement, the EDF guard on, due sticky" \
  '.aging_s == 600 and .wait_floor_s == 600 and .reserve_bounded == true and .reserve_due == true and .edf_guard == true and .sticky_due == true' "$OUT"
jqc "--no-sticky-due is in the header" '.sticky_due == false' \
    "$("$SIM" jobs --trace trace.csv --nodes nodes.csv -o json --no-sticky-due)"
jqc "queued in all >= first wait" 'all(.scenarios[]; .queued_total_s.mean >= .queueing_s.mean - 1e-6)' "$OUT"
eq "jobs-out: a header and 60 rows" "$(wc -l <perjob.csv)" 61
# the reported over_2x recomputed from the per-job file (floor 600)
eq "jobs-out agrees with vs_fifo.over_2x" \
    "$(awk -F, 'NR > 1 { b = $9 > 600 ? $9 : 600; if ($8 > 2 * b + 1e-6) n++ } END { print n + 0 }' perjob.csv)" \
    "$(jq '.scenarios[0].vs_fifo.over_2x' <<<"$OUT")"
eq "jobs-out: exact estimates, so the FIFO shadow's wait is FIFO's own, job by job" \
    "$(awk -F, 'NR > 1 && $9 >= 0 { d = $11 - $9; if (d < -0.05 || d > 0.05) n++ } END { print n + 0 }' perjob.csv)" 0
eq "no-queue bound: the mean duration of the trace, the same in every scenario" \
    "$(jq '[.scenarios[].jct_s.no_queue_mean | . * 10 | round] | unique | length' <<<"$OUT")" 1
eq "no-queue bound = mean duration" \
    "$(awk -F, 'NR > 1 { s += $5; n++ } END { printf "%d", s / n * 10 + 0.5 }' perjob.csv)" \
    "$(jq '.scenarios[0].jct_s.no_queue_mean * 10 | round' <<<"$OUT")"
jqc "no scenario beats the no-queue bound" 'all(.scenarios[]; .jct_s.mean >= .jct_s.no_queue_mean - 1e-6)' "$OUT"
# --refine-shadow: with exact estimates nothing is learnt, so the same report
R=$("$SIM" jobs --trace trace.csv --nodes nodes.csv -o json --refine-shadow)
jqc "--refine-shadow is in the header" '.refine_shadow == true' "$R"
eq "--refine-shadow, exact estimates: the same scenarios" "$(jq -c .scenarios <<<"$R")" \
    "$(jq -c .scenarios <<<"$OUT")"
# with noisy estimates the shadow's FIFO waits run late; replayed with the
# run times known as jobs end, they come closer to FIFO's own
"$SIM" jobs --trace trace.csv --nodes nodes.csv -o json --estimate-noise 3 --jobs-out noisy.csv >/dev/null
"$SIM" jobs --trace trace.csv --nodes nodes.csv -o json --estimate-noise 3 --refine-shadow \
    --jobs-out refined.csv >/dev/null
err_of() { awk -F, 'NR > 1 && $9 >= 0 && $11 >= 0 { d = $11 - $9; s += d < 0 ? -d : d } END { printf "%d", s }' "$1"; }
check "--refine-shadow: the shadow's FIFO waits closer to FIFO's ($(err_of refined.csv) s < $(err_of noisy.csv) s in all)" \
    test "$(err_of refined.csv)" -lt "$(err_of noisy.csv)"
OUT=$("$SIM" jobs --trace trace.csv --nodes nodes.csv -o json --no-preemption --aging 0)
jqc "--no-preemption: drover preempts nothing" '.scenarios[0].preemptions == 0 and .aging_s == 0' "$OUT"
"$SIM" jobs --trace trace.csv --nodes nodes.csv --aging -1 >/dev/null 2>&1
eq "--aging -1 -> exit 2" "$?" 2
"$SIM" jobs --trace trace.csv --nodes nodes.csv --wait-floor 0 >/dev/null 2>&1
eq "--wait-floor 0 -> exit 2" "$?" 2
"$SIM" jobs --trace trace.csv --nodes nodes.csv --jobs-out /nonexistent/dir/x.csv >/dev/null 2>jo.err
eq "--jobs-out into a missing folder -> exit 1" "$?" 1
contains "--jobs-out: the path in the error" "$(cat jo.err)" "/nonexistent/dir/x.csv"

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
