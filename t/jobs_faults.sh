#!/usr/bin/env bash
# jobs_faults.sh — training jobs (issue 15) when things around them fail,
# on one local node of 2 GPUs running a job's worker next to a
# deployment's replica (job ports: a range of two, job_port_min/max):
#   - both job ports held by another program: rank 0's MASTER_PORT is in
#     use, so the gang starts again on another port, up to 8 times, none of
#     them a restart; the 9th counts as a failure (restart 1); once the
#     ports are free the job succeeds;
#   - droverd SIGKILLed and restarted on the same data dir and port while
#     a job runs: its worker is not restarted (same pid, attempt 1) and the
#     job finishes, its wait bound the same; its GPU-hours (1 GPU x its time held) in status and
#     drover describe;
#   - droverd SIGSTOPped past the node's lease (node_timeout_ms): the
#     agent stops the job's worker (SIGTERM, grace, SIGKILL) while the
#     replica on the same node keeps answering; after SIGCONT the job
#     restarts (attempt 2, the reason names the lease), resumes from its
#     checkpoint and finishes;
#   - the node's agent killed: past the lease (node_timeout + its grace +
#     1 s) the gang restarts, while the node is not yet lost.
# shellcheck disable=SC2086  # lists of pids are split on purpose
. "$(dirname "$0")/lib/common.bash"
# node_timeout (the lease) long enough for a head restart under load,
# node_lost past the SIGSTOP (the restart comes from the lease's report)
# two consecutive free ports, the jobs' MASTER_PORT range, bound and held from
# here on by a program of this test's (its command line names $TMP for the
# cleanup), so that nothing else running takes one before the port test below
python3 -S -c 'import random, socket, sys, time
for p in range(20000 + random.randrange(20000), 65000):
    s = [socket.socket() for _ in (0, 1)]
    try:
        for k in (0, 1):
            s[k].bind(("0.0.0.0", p + k)); s[k].listen()
    except OSError:
        for x in s: x.close()
        continue
    print(p, flush=True); break
time.sleep(600)' "$TMP" >"$TMP/held" 2>&1 &
HOLDER=$!
wait_for "the port holder to bind its pair" test -s "$TMP/held" || exit 1
P=$(head -n 1 "$TMP/held")
WORKERS_CFG="{\"heartbeat_ms\": 500, \"node_timeout_ms\": 4000, \"node_lost_ms\": 60000, \"job_port_min\": $P, \"job_port_max\": $((P + 1))}"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

job_field() { api GET "/v1/jobs/$1"; [ "$ST" == 200 ] && jq -r "$2 // empty" <<<"$BODY"; }
job_is() { [ "$(job_field "$1" .status.state)" == "$2" ]; }
worker_pid() { job_field "$1" '.status.workers["0"].pid'; }
node_ready() { nodes_json | jq -e 'length == 1 and .[0].status.state == "ready"' >/dev/null; }
replica_ready() { replicas_json | jq -e 'length == 1 and .[0].status.state == "ready" and (.[0].status.endpoint // "") != ""' >/dev/null; }
# job ID STEPS: a 1-worker drover-demo-train job (checkpoint every 20 steps, 50 ms a step)
job()
{
    printf '{"id":"%s","runtime":{"command":["drover-demo-train","--steps","%s","--checkpoint-every","20","--step-ms","50"]},"workers":1,"resources":{"gpu":{"count":1},"cpu_millis":500,"memory_mib":256},"nodepools":[{"cluster":"c1","nodepool":"gpu"}],"max_restarts":2}' "$1" "$2"
}

PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster c1" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"gpu","instance_types":["local-l4x2"],"min_nodes":1,"max_nodes":1}'
status "create nodepool gpu (1 x local-l4x2)" 201
api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","2"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000,"compute_percent":50},"cpu_millis":500,"memory_mib":512}}'
status "create model demo (half a GPU)" 201
api POST /v1/deployments -d '{"id":"dep","model":"demo","nodepools":[{"cluster":"c1","nodepool":"gpu"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment dep (1 replica)" 201
wait_check "$W" "the node is ready" node_ready || t_done
wait_check "$W" "dep's replica is ready" replica_ready || t_done
EP=$(replicas_json | jq -r '.[0].status.endpoint')
NODE=$(nodes_json | jq -r '.[0].id')

# ---- MASTER_PORT in use: another port, not a restart (8 times), then a failure ----------
# (held since the start by the program above)
check "ports $P and $((P + 1)) are held" kill -0 "$HOLDER"
api POST /v1/jobs -d "$(job busy 20)"
status "submit busy (1 worker, 20 steps)" 201
restarted() { job_field busy .status.restarts | grep -qx 1; }
wait_check "$W" "busy restarts once its port tries are spent" restarted
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
ok "the ports are free again"
wait_check "$W" "busy succeeds" job_is busy succeeded
jqc "busy: attempt 2, 1 restart" '.status.attempt == 2 and .status.restarts == 1' "$(api GET /v1/jobs/busy; echo "$BODY")"
api GET "/v1/events?kind=job&object=busy"
EV=$BODY
jqc "attempt 1 started again on another port 8 times, none a restart" \
    '[.items[] | select(.type == "port_in_use") | .reason | test("not a restart")] | length >= 8' "$EV"
jqc "... then its 9th port in use was a failure: restart 1 of 2" \
    '[.items[] | select(.type == "restarting") | .reason | test("MASTER_PORT [0-9]+ is in use.*restart 1 of 2")] == [true]' "$EV"

# ---- head restart: the job's worker goes on, the job finishes --------------------------
api POST /v1/jobs -d "$(job steady 200 | jq -c '.timeout_seconds = 600')"
status "submit steady (1 worker, 200 steps of 50 ms, timeout_seconds 600)" 201
wait_check "$W" "steady runs" job_is steady running
P0=$(worker_pid steady)
check "steady's worker runs (pid $P0)" pid_alive "$P0"
api GET /v1/jobs/steady
BOUND=$(jq -c '.status.wait_bound | {epoch, fifo_start}' <<<"$BODY")
jqc "steady has a wait bound" '.status.wait_bound.epoch > 0' "$BODY"
droverd_kill9
droverd_start "$DDIR" --listen "127.0.0.1:$PORT" --config "$CFG" || { fail "droverd restarts"; t_done; }
ok "droverd SIGKILLed and restarted on the same data dir and port"
reported() { [ "$(worker_pid steady)" == "$P0" ]; }
wait_check "$W" "the restarted head sees steady's worker again, the same pid" reported
jqc "steady is still attempt 1, running, no restart" \
    '.status.attempt == 1 and .status.restarts == 0 and .status.state == "running"' "$(api GET /v1/jobs/steady; echo "$BODY")"
api GET /v1/jobs/steady
eq "... with the same wait bound (recorded, not computed again)" \
    "$(jq -c '.status.wait_bound | {epoch, fifo_start}' <<<"$BODY")" "$BOUND"
wait_check "$W" "steady succeeds" job_is steady succeeded
jqc "... in attempt 1" '.status.attempt == 1 and .status.restarts == 0' "$(api GET /v1/jobs/steady; echo "$BODY")"
# GPU-hours: its 1 GPU from admission to the end (the local catalog's price is 0)
api GET /v1/jobs/steady
jqc "steady's GPU-hours are 1 GPU x its time held, its cost 0 (local prices)" \
    '(.status.finished_at | fromdate) as $f | (.status.admitted_at | fromdate) as $a |
     (.status.gpu_hours - ($f - $a) / 3600 | fabs) < 0.0006 and .status.gpu_hours > 0 and .status.cost_usd == 0' "$BODY"
cli describe job steady
contains "drover describe job shows its GPU-hours" "$OUT" "gpu_hours"
cli logs job/steady --rank 0
contains "its worker ran to the last step, once (no resume)" "$OUT" "step 200 "
check "... and never resumed" eval '! grep -q "resumed from" <<<"$OUT"'

# ---- head cut off past the node's lease: the worker stops, the replica serves ----------
api POST /v1/jobs -d "$(job cut 400)"
status "submit cut (1 worker, 400 steps of 50 ms)" 201
wait_check "$W" "cut runs" job_is cut running
ckpt() { ls -d "$DDIR"/nodes/*/*/job-checkpoints/cut/rank-0/step-* 2>/dev/null | grep -q .; }
wait_check "$W" "cut wrote a checkpoint" ckpt
P1=$(worker_pid cut)
check "cut's worker runs (pid $P1)" pid_alive "$P1"
kill -STOP "$DPID"
ok "SIGSTOP droverd"
wait_check "$W" "the agent stops cut's worker once its lease (node_timeout_ms 4000) runs out" pids_gone "$P1"
check "dep's replica on the same node still answers" predict_ok "$EP"
# its log: in replicas/ while the agent keeps its record, in job-logs/ once
# the record went (a failed worker's log is kept there); the paths seen, if not
cut_log() { cat "$DDIR"/nodes/*/"$NODE"/{replicas,job-logs}/cut-a1-r0/stdout.log 2>/dev/null; }
if [[ "$(cut_log)" == *"lease ran out"* ]]; then
    ok "the worker's log says why"
else
    fail "the worker's log says why"
    why "no 'lease ran out' in: $(cut_log)"
    why "cut-a1's paths under the node: $(find "$DDIR/nodes" -path '*cut-a1*' 2>/dev/null | tr '\n' ' ')"
fi
kill -CONT "$DPID"
ok "SIGCONT droverd"
again() { api GET /v1/jobs/cut; jqq '.status.attempt == 2 and (.status.state == "running" or .status.state == "succeeded")' <<<"$BODY"; }
wait_check "$W" "cut restarts as attempt 2" again
api GET "/v1/events?kind=job&object=cut"
jqc "the restart's reason names the node's lease" \
    '[.items[] | select(.type == "restarting") | .reason | test("lost its lease|past its lease")] == [true]' "$BODY"
wait_check "$W" "cut succeeds" job_is cut succeeded
cli logs job/cut --rank 0
contains "attempt 2 resumed from its checkpoint" "$OUT" "resumed from step"
contains "... and ran to the last step" "$OUT" "step 400 "
check "dep's replica still answers" predict_ok "$EP"
jqc "the replica never restarted" '.[0].status.restarts == 0' "$(replicas_json)"

# ---- a node gone silent (its agent killed): the gang restarts past the lease -----------
# (node_timeout 4 s + the lease's 2 s grace + 1 s, long before node_lost's 60 s)
api POST /v1/jobs -d "$(job gone 100000)"
status "submit gone (1 worker, long)" 201
wait_check "$W" "gone runs" job_is gone running
kill -9 "$(agent_pid "$NODE")"
ok "kill -9 the node's agent"
past() { api GET "/v1/events?kind=job&object=gone"; jqq '[.items[] | select(.type == "restarting") | .reason | test("has been silent for [0-9.]+ s, past its lease")] | any' <<<"$BODY"; }
wait_check "$W" "gone restarts: its node has been silent past its lease" past
eq "... while the node is not lost yet (node_lost_ms 60000)" "$(node_state "$NODE")" not_ready

droverd_finish jobs_faults
t_done
