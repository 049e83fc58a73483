#!/usr/bin/env bash
# sim_serve.sh — `drover-sim serve` end to end on a committed cut-down Azure
# LLM trace (t/data/azure-llm-conv-cut.csv, 280 requests with a 20-minute
# gap) and a small stack (t/data/serve-stack.yaml): the JSON and table
# output, determinism (same seed -> byte-identical output; another seed ->
# other numbers), sanity properties (fixed at peak costs at least the
# autoscaler's GPU-hours, a scale-to-zero config has cold starts and
# requests that waited for one, SLO attainment in [0, 1], request counts
# add up, p99 >= p50), malformed trace lines and configs refused with
# FILE:LINE (exit 1), usage errors (exit 2). Takes about a second.
. "$(dirname "$0")/lib/common.bash"

SIM=$(dirname "$DROVERD")/drover-sim
if [ ! -x "$SIM" ]; then
    echo "drover-sim not built next to $DROVERD" >&2
    exit 1
fi
TRACE=$DROVER_SRC/t/data/azure-llm-conv-cut.csv
STACK=$DROVER_SRC/t/data/serve-stack.yaml
SCENARIOS='["drover","ray-serve","knative","fixed-peak","fixed-mean"]'

# ---- the output ------------------------------------------------------------------------
"$SIM" serve --trace "$TRACE" --config "$STACK" -o json >a.json 2>a.err
eq "serve -o json exits 0" "$?" 0
OUT=$(cat a.json)
jqc "header: trace, seed, SLO" \
    '.trace.requests == 280 and .trace.duration_s > 3000 and .seed == 7
     and .slo.ttft_seconds == 2 and .slo.e2e_seconds == 90' "$OUT"
jqc "the five scenarios, in order" "[.scenarios[].name] == $SCENARIOS" "$OUT"
jqc "every scenario: GPU-hours, cost, replicas, cold starts, latency, SLO, requests" \
    'all(.scenarios[]; (.gpu_hours | type == "number") and .gpu_hours > 0 and .cost_usd > 0
        and .nodes_created >= 1 and .replicas.peak >= 1 and .replicas.mean > 0
        and (.cold_starts.count | type == "number") and (.cold_starts.total_delay_s >= 0)
        and (.latency_s | [.ttft_p50, .ttft_p99, .e2e_p50, .e2e_p99] | all(type == "number" and . >= 0))
        and (.slo_attainment | type == "number"))' "$OUT"
jqc "SLO attainment is in [0, 1]" 'all(.scenarios[]; .slo_attainment >= 0 and .slo_attainment <= 1)' "$OUT"
jqc "requests: completed + timeouts + dropped = 280" \
    'all(.scenarios[]; .requests.total == 280 and .requests.completed + .requests.timeouts + .requests.dropped == 280)' "$OUT"
jqc "p99 >= p50, and a request's e2e >= its TTFT (at p50)" \
    'all(.scenarios[]; .latency_s.ttft_p99 >= .latency_s.ttft_p50 and .latency_s.e2e_p99 >= .latency_s.e2e_p50
        and .latency_s.e2e_p50 >= .latency_s.ttft_p50)' "$OUT"
jqc "fixed at peak holds at least the GPU-hours of the autoscaler (drover)" \
    '(.scenarios | map({(.name): .}) | add) as $s | $s["fixed-peak"].gpu_hours >= $s.drover.gpu_hours' "$OUT"
jqc "fixed at peak / mean: drover's peak / ceil(mean after warm-up) replicas, no cold starts" \
    '(.scenarios | map({(.name): .}) | add) as $s
     | $s["fixed-peak"].fixed_replicas == $s.drover.replicas.peak
     and $s["fixed-mean"].fixed_replicas == ($s.drover.replicas.mean_after_warmup | ceil)
     and $s["fixed-peak"].cold_starts.count == 0 and $s["fixed-mean"].replicas.peak == $s["fixed-mean"].fixed_replicas' "$OUT"
jqc "baselines carry the Ray Serve and Knative defaults" \
    '(.scenarios | map({(.name): .}) | add) as $s
     | $s["ray-serve"].autoscale.target_concurrency == 2 and $s["ray-serve"].autoscale.scale_up_delay_seconds == 30
       and $s["ray-serve"].autoscale.scale_down_delay_seconds == 600 and $s["ray-serve"].autoscale.sample_interval_seconds == 10
     and $s.knative.autoscale.target_concurrency == 70 and $s.knative.autoscale.traffic_history_seconds == 60
       and $s.knative.autoscale.panic_factor == 2 and $s.knative.autoscale.min_replicas == 0 and $s.knative.autoscale.knative_panic_mode
     and $s.drover.autoscale.target_concurrency == 1 and $s.drover.autoscale.max_replicas == 6
     and $s.drover.autoscale.max_scale_up_rate == 20
     and $s["ray-serve"].autoscale.max_scale_up_rate == null and $s.knative.autoscale.max_scale_up_rate == null' "$OUT"
jqc "the autoscaler moved: drover scaled and started replicas during the trace" \
    '.scenarios[0].replicas.scale_events > 2 and .scenarios[0].cold_starts.count > 0 and .scenarios[0].replicas.peak > 1' "$OUT"

# ---- determinism -------------------------------------------------------------------------
"$SIM" serve --trace "$TRACE" --config "$STACK" -o json >b.json
check "same seed: byte-identical JSON" cmp -s a.json b.json
"$SIM" serve --trace "$TRACE" --config "$STACK" -o json --seed 8 >c.json
check "--seed 8: other numbers (provisioning and load jitter)" bash -c '! cmp -s a.json c.json'
jqc "--seed is reported" '.seed == 8' "$(cat c.json)"

# ---- ttft_slo_ms: the SLO-aware sizing ------------------------------------------------------
jqc "without ttft_slo_ms: null in every autoscaled scenario" \
    'all(.scenarios[] | select(.autoscale); .autoscale.ttft_slo_ms == null)' "$OUT"
jqc "after warm-up: GPU-hours within the whole run's, and all of them when the warm-up is 0" \
    'all(.scenarios[]; .gpu_hours_after_warmup >= 0 and .gpu_hours_after_warmup <= .gpu_hours + 1e-9)' "$OUT"
# warm-up 0: the window is the whole run
sed 's/^sim:$/sim:\n  warmup_seconds: 0/' "$STACK" >w0.yaml
"$SIM" serve --trace "$TRACE" --config w0.yaml -o json >w0.json 2>w0.err
jqc "warmup_seconds 0: mean replicas after it are the whole run's; GPU-hours up to the last arrival" \
    'all(.scenarios[]; (.replicas.mean_after_warmup - .replicas.mean | fabs) < 1e-6
         and .gpu_hours_after_warmup <= .gpu_hours + 1e-9)' "$(cat w0.json)"
# the window ends at the last arrival for every run alike (each run ends at
# its own last completion): a fixed count billed from 0 is cut in proportion
jqc "warmup_seconds 0: a fixed count's GPU-hours after it are its whole run's up to the last arrival" \
    '.trace.duration_s as $d | all(.scenarios[] | select(.name | startswith("fixed-"));
       .end_s > $d and (.gpu_hours_after_warmup - .gpu_hours * $d / .end_s | fabs) < 1e-6)' "$(cat w0.json)"
jqc "slo_attainment_after_warmup: a number in [0, 1] or null" \
    'all(.scenarios[]; .slo_attainment_after_warmup == null or (.slo_attainment_after_warmup >= 0 and .slo_attainment_after_warmup <= 1))' "$OUT"
sed 's/max_replicas: 6/max_replicas: 6\n    ttft_slo_ms: 2000/' "$STACK" >slo.yaml
"$SIM" serve --trace "$TRACE" --config slo.yaml -o json >s1.json
eq "ttft_slo_ms: exits 0" "$?" 0
"$SIM" serve --trace "$TRACE" --config slo.yaml -o json >s2.json
check "ttft_slo_ms: same seed, byte-identical JSON" cmp -s s1.json s2.json
jqc "ttft_slo_ms: drover carries it, the baselines do not" \
    '.scenarios[0].autoscale.ttft_slo_ms == 2000 and .scenarios[1].autoscale.ttft_slo_ms == null
     and (.scenarios[0].params | test("ttft-slo 2000ms"))' "$(cat s1.json)"
check "ttft_slo_ms: drover sizes differently (another replica history)" \
    jq -e --slurpfile a a.json '.scenarios[0].replicas != $a[0].scenarios[0].replicas' s1.json

# ---- --series: one CSV row per scenario and minute ------------------------------------------
"$SIM" serve --trace "$TRACE" --config slo.yaml -o json --series ser.csv >s3.json
eq "--series: exits 0" "$?" 0
check "--series: the JSON is unchanged" cmp -s s1.json s3.json
check "--series: header" grep -qx 'scenario,minute,ready_lo,ready_hi,on_way_hi,queue_hi,desired,ups,downs,last_change,arrivals,miss_ttft,miss_e2e,lost,slo_need_hi,lambda,mean_service_s,first_p99_s,cold_start_s,held_hi,dispersion' ser.csv
# held_hi: the scale-down memory (slo.held), from the passes whose model was ready, as slo_need_hi
eq "--series: held_hi >= 1 exactly in the minutes with a need (the SLO model ready)" \
    "$(awk -F, '$1 == "drover" && ($15 > 0) != ($20 > 0) { bad++ } $1 == "drover" && $20 > 0 { n++ }
                END { print bad + 0, (n > 0) }' ser.csv)" "0 1"
eq "--series: the baselines have no memory (held_hi 0)" \
    "$(awk -F, '$1 != "drover" && NR > 1 && $20 != 0 { bad++ } END { print bad + 0 }' ser.csv)" "0"
# dispersion: the SLO model's learned dispersion at the minute's last pass (>= 1), none (0) for
# the baselines
eq "--series: drover's dispersion is at least Poisson's 1, the baselines' 0" \
    "$(awk -F, 'NR > 1 && (($1 == "drover") != ($21 >= 1)) { bad++ } END { print bad + 0 }' ser.csv)" "0"
# sim.initial_wave_timed [true]: the initial replicas were a wave the autoscaler timed (droverd
# times a new deployment's); the stack's model load is 40 s (no jitter on it: nodes stand)
eq "initial_wave_timed: minute 0's learned cold start is the initial replicas' model load" \
    "$(awk -F, '$1 == "drover" && $2 == 0 { print $19 }' ser.csv)" "40.0"
sed 's/^sim:$/sim:\n  initial_wave_timed: false/' slo.yaml >nowave.yaml
"$SIM" serve --trace "$TRACE" --config nowave.yaml -o json --series nowave.csv >/dev/null
eq "initial_wave_timed false: none learned in minute 0 (as before the option)" \
    "$(awk -F, '$1 == "drover" && $2 == 0 { print $19 }' nowave.csv)" "0.0"
for i in 0 1 2 3 4; do
    name=$(jq -r ".scenarios[$i].name" s3.json)
    total=$(jq -r '.trace.requests' s3.json)
    met=$(jq -r ".scenarios[$i].slo_attainment * .trace.requests | round" s3.json)
    got=$(awk -F, -v n="$name" '$1 == n { a += $11; m += $12 + $13 + $14 } END { print a, a - m }' ser.csv)
    eq "--series: $name's arrivals add up to the trace, its misses to its SLO attainment" "$got" "$total $met"
done

# ---- a scale-up during a scale-down's drain ------------------------------------------------------
# droverd deletes a scaled-down replica at once (its GPU is free for the
# scheduler) and the agent starts a replica placed on that GPU only once the
# draining one has exited ("waiting"). Here: the victim drains its long
# request until 0.001 + 1000/2000 + 1200/12 = 100.501 s; the scale-up's pass at
# 20.25 s places the new replica on its GPU (no third node), which loads
# (40 s) from then: ready at 140.501 s, a cold start of 120.251 s.
{ echo TIMESTAMP,ContextTokens,GeneratedTokens
  echo "2023-11-16 18:00:00.0000000,1000,1200"
  echo "2023-11-16 18:00:00.0010000,1000,1200"
  for i in $(seq 20 150); do printf '2023-11-16 18:%02d:%02d.0000000,100,60\n' $((i / 60)) $((i % 60)); done
} >drain.csv
OUT=$("$SIM" serve --trace drain.csv --config "$DROVER_SRC/t/data/serve-drain.yaml" -o json)
eq "drain: exits 0" "$?" 0
jqc "drain: no node beyond the two, both billed the whole run; one cold start, 120.251 s" \
    '.scenarios[0] | .nodes_created == 2 and ((.gpu_hours - 2 * .end_s / 3600) | fabs) < 2e-6
     and .cold_starts.count == 1 and ((.cold_starts.total_delay_s - 120.251) | fabs) < 1e-3
     and .requests.completed == .requests.total' "$OUT"

# ---- scale to zero ---------------------------------------------------------------------------
sed -e 's/min_replicas: 1/min_replicas: 0/' "$STACK" >zero.yaml
OUT=$("$SIM" serve --trace "$TRACE" --config zero.yaml -o json)
eq "scale-to-zero config exits 0" "$?" 0
jqc "min_replicas 0: drover scales to zero in the gap and back (cold starts, requests that waited)" \
    '.scenarios[0].autoscale.min_replicas == 0 and .scenarios[0].cold_starts.count > 0
     and .scenarios[0].cold_starts.requests_waited > 0 and .scenarios[0].cold_starts.total_delay_s > 0' "$OUT"
jqc "knative (min-scale 0) too" '.scenarios[2].cold_starts.requests_waited > 0' "$OUT"

# ---- the service model, worked out by hand ------------------------------------------------------
# L4 in the stack: prefill 2000 tok/s, decode 12 tok/s, batch_slowdown 0.1; drover starts with
# min_replicas 1 warm. One request of 1000 + 100 tokens alone: TTFT = 1000/2000 + 1/12 s,
# e2e = 0.5 + 100/12 s. Two at once on one replica: each at 1/1.1 of that speed.
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0,1000,100\n' >one.csv
OUT=$("$SIM" serve --trace one.csv --config "$STACK" -o json)
jqc "one request alone: TTFT = prefill + one token, e2e = prefill + decode" \
    '.scenarios[0].latency_s | ((.ttft_p50 - (0.5 + 1/12)) | fabs) < 1e-5 and ((.e2e_p50 - (0.5 + 100/12)) | fabs) < 1e-5' "$OUT"
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0,1000,100\n2023-11-16 18:00:00.0,1000,100\n' >two.csv
OUT=$("$SIM" serve --trace two.csv --config "$STACK" -o json)
jqc "two at once on one replica: both 1.1x slower (batch_slowdown 0.1; the second replica is still starting)" \
    '.scenarios[0] | (((.latency_s.e2e_p99 - 1.1 * (0.5 + 100/12)) | fabs) < 1e-5)
     and (((.latency_s.e2e_p50 - .latency_s.e2e_p99) | fabs) < 1e-9)' "$OUT"

# ---- the table -----------------------------------------------------------------------------
"$SIM" serve --trace "$TRACE" --config "$STACK" --timing >t.txt 2>t.err
eq "table output exits 0" "$?" 0
TABLE=$(cat t.txt)
contains "table: header" "$TABLE" "SCENARIO    GPU-HOURS  COST-USD     SLO TTFT-P50 TTFT-P99  E2E-P50  E2E-P99"
for s in drover ray-serve knative fixed-peak fixed-mean; do
    check "table: a row for $s" grep -q "^$s " t.txt
done
contains "table: the SLO" "$TABLE" "SLO: TTFT <= 2s and e2e <= 90s"
contains "--timing: wall time on stderr" "$(cat t.err)" "requests simulated in"

# ---- malformed traces: FILE:LINE: reason, exit 1 ----------------------------------------------
# bad_trace NAME CONTENT WANT
bad_trace()
{
    local name=$1 err rc
    printf '%b' "$2" >bad.csv
    err=$("$SIM" serve --trace bad.csv --config "$STACK" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" == 1 ] && [[ "$err" == *"$3"* ]]; then
        ok "malformed trace ($name): exit 1, '$3'"
    else
        fail "malformed trace ($name): exit 1, '$3'"
        why "rc $rc: $err"
    fi
}
H='TIMESTAMP,ContextTokens,GeneratedTokens\n'
R='2023-11-16 18:15:46.6805900,374,44\n'
bad_trace "bad timestamp" "${H}${R}2023-11-16 18:15:4x.1,10,10\n" "bad.csv:3: TIMESTAMP '2023-11-16 18:15:4x.1' is not"
bad_trace "not a number" "${H}${R}${R}2023-11-16 18:16:00.0,12a,5\n" "bad.csv:4: ContextTokens '12a' is not a non-negative integer"
bad_trace "negative" "${H}${R}2023-11-16 18:16:00.0,12,-5\n" "bad.csv:3: GeneratedTokens '-5'"
bad_trace "field count" "${H}${R}2023-11-16 18:16:00.0,12\n" "bad.csv:3: 2 fields, the header has 3"
bad_trace "backwards" "${H}${R}2023-11-16 18:15:40.0,1,1\n" "bad.csv:3: TIMESTAMP goes backwards"
bad_trace "missing column" 'TIMESTAMP,ContextTokens\n2023-11-16 18:15:40.0,1\n' "bad.csv:1: header has no column 'GeneratedTokens'"
bad_trace "header only" "${H}" "bad.csv:1: no requests after the header"
bad_trace "empty" "" "bad.csv:1: empty file"
bad_trace "NUL byte" "${H}${R}2023-11-16 18:16:00.0,1\\0000,5\n" "bad.csv:3: NUL byte"
# columns in another order, CRLF, blank lines, extra columns: fine
printf 'GeneratedTokens,x,TIMESTAMP,ContextTokens\r\n44,a,2023-11-16 18:15:46.68,374\r\n\r\n10,b,2023-11-16 18:15:50,10\r\n' >ok.csv
OUT=$("$SIM" serve --trace ok.csv --config "$STACK" -o json 2>&1)
jqc "columns by name, CRLF, blank lines and extra columns are accepted" '.trace.requests == 2 and .trace.duration_s > 3.3' "$OUT"
err=$("$SIM" serve --trace nope.csv --config "$STACK" 2>&1 >/dev/null)
eq "a missing trace exits 1" "$?" 1
contains "and says which" "$err" "nope.csv: No such file or directory"

# ---- malformed configs: exit 1, what and where ----------------------------------------------------
# bad_config NAME SED-EXPRESSION WANT
bad_config()
{
    local name=$1 err rc
    sed -e "$2" "$STACK" >bad.yaml
    err=$("$SIM" serve --trace "$TRACE" --config bad.yaml 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" == 1 ] && [[ "$err" == *"$3"* ]]; then
        ok "malformed config ($name): exit 1, '$3'"
    else
        fail "malformed config ($name): exit 1, '$3'"
        why "rc $rc: $err"
    fi
}
bad_config "YAML syntax, with the line" 's/^  e2e_seconds: 90/  e2e_seconds: [90/' "bad.yaml:6:8: did not find expected ',' or ']'"
bad_config "unknown field" 's/^  max_queue: 100/  max_queue: 100\n  retries: 3/' "bad.yaml: gateway.retries: unknown field"
bad_config "unknown autoscale field" 's/target_concurrency: 1/target_concurency: 1/' "deployment.autoscale.target_concurency: unknown field"
bad_config "wrong type" 's/max_replicas: 6/max_replicas: six/' "deployment.autoscale.max_replicas: must be an integer"
bad_config "autoscaler's own check" 's/max_replicas: 6/max_replicas: 0/' "max_replicas must be >= 1"
bad_config "max_scale_up_rate 1 refused" 's/max_replicas: 6/max_replicas: 6\n    max_scale_up_rate: 1/' "max_scale_up_rate must be >= 2"
bad_config "ttft_slo_ms out of range" 's/max_replicas: 6/max_replicas: 6\n    ttft_slo_ms: 600001/' "ttft_slo_ms must be from 1 to 600000"
bad_config "ttft_slo_ms not an integer" 's/max_replicas: 6/max_replicas: 6\n    ttft_slo_ms: 2s/' "deployment.autoscale.ttft_slo_ms: must be an integer"
bad_config "unknown instance type" 's/\[g6.xlarge, g5.xlarge\]/[g6.xlarge, g9.huge]/' "unknown instance type 'g9.huge'"
bad_config "a GPU without a service model" '/^  A10G:/d' "gpus: no service model for A10G (the GPU of g5.xlarge)"
bad_config "initial_wave_timed not a boolean" 's/^sim:$/sim:\n  initial_wave_timed: 1/' "sim.initial_wave_timed: must be true or false"
bad_config "absurd speed" 's/decode_tokens_per_second: 12/decode_tokens_per_second: -1/' "gpus.L4.decode_tokens_per_second: must be a number in"
bad_config "no SLO" '/^  ttft_seconds/d; /^  e2e_seconds/d' "slo: name ttft_seconds and/or e2e_seconds"
bad_config "per_type outside the nodepool" 's/per_type: {g5.xlarge: 80}/per_type: {p5.48xlarge: 80}/' "provisioning.per_type.p5.48xlarge: not an instance type of the nodepool"

# ---- usage: exit 2 ---------------------------------------------------------------------------
usage()
{
    local name=$1
    shift
    "$SIM" serve "$@" >/dev/null 2>&1
    eq "usage error exits 2: $name" "$?" 2
}
usage "no --config" --trace "$TRACE"
usage "no --trace" --config "$STACK"
usage "bad -o" --trace "$TRACE" --config "$STACK" -o yaml
usage "bad --seed" --trace "$TRACE" --config "$STACK" --seed -1
usage "extra argument" --trace "$TRACE" --config "$STACK" extra
"$SIM" serve --help >h.txt
eq "serve --help exits 0" "$?" 0
contains "--help names the format" "$(cat h.txt)" "TIMESTAMP,ContextTokens"
contains "drover-sim lists serve" "$("$SIM" --help)" "serve"

t_done
