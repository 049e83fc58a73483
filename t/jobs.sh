#!/usr/bin/env bash
# jobs.sh — training jobs (issue 15) end to end with the local provider and
# drover-demo-train on two nodes of 2 GPUs each (declared GPUs):
#   - bad input gets a clear 4xx and queues nothing;
#   - a user's gpu_quota (PATCH /v1/users/ID) holds a job past it queued;
#   - a 4-worker job runs across both nodes with ranks 0-3, one world size
#     and one master; its rank 2 exits 1 in attempt 1, so the whole gang
#     restarts as attempt 2 and resumes from its newest checkpoint;
#   - two gangs that each need 3 of the 4 GPUs: one runs, the other waits
#     whole (no placement) and starts only once the first has ended (cancelled);
#   - a higher-priority job preempts a preemptible one, which queues again
#     and runs as its next attempt once there is room; so does a
#     deployment's replica owed;
#   - kill -9 of a node's agent during training (job checkpoint: {keep: 3}):
#     the gang restarts whole on the surviving node and the lost one's
#     replacement, every rank resuming from the newest step all ranks had
#     committed at the head, and finishes its steps;
#   - a gang on a nodepool without nodes: the node autoscaler starts them;
#     a gang that could not fit whole within max_nodes (other work on the
#     nodes) gets no node, and says why in status.provisioning;
#   - drover delete job cancels a running job (its workers stop), then
#     removes it; a PATCH changes only priority and description;
#   - a job with timeout_seconds gets a wait bound (status.wait_bound), one
#     without gets none (status.wait_unbounded says why);
#   - the CLI: apply -f, get jobs, get queues, describe job; logs of an ended
#     job's last attempt.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

job_field() { api GET "/v1/jobs/$1"; [ "$ST" == 200 ] && jq -r "$2 // empty" <<<"$BODY"; }
job_state() { job_field "$1" .status.state; }
job_is() { [ "$(job_state "$1")" == "$2" ]; }
jobs_count() { api GET /v1/jobs; jq '.items | length' <<<"$BODY"; }
nodes_ready() { nodes_json | jq -e 'map(select(.status.state == "ready" and (.status.gpus | length) == 2)) | length == 2' >/dev/null; }

# job ID WORKERS GPUS ARGS...: the JSON of a drover-demo-train job
job()
{
    local id=$1 workers=$2 gpus=$3
    shift 3
    local cmd
    cmd=$(printf '%s\n' drover-demo-train "$@" | jq -R . | jq -sc .)
    printf '{"id":"%s","runtime":{"command":%s},"workers":%s,"resources":{"gpu":{"count":%s},"cpu_millis":500,"memory_mib":256},"nodepools":[{"cluster":"c1","nodepool":"gpu"}],"max_restarts":2}' \
        "$id" "$cmd" "$workers" "$gpus"
}

droverd_start "$TMP/d" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster c1" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"gpu","instance_types":["local-l4x2"],"min_nodes":2,"max_nodes":2}'
status "create nodepool gpu (2 x local-l4x2: 4 GPUs)" 201
wait_check "$W" "two nodes of 2 GPUs each are ready" nodes_ready || t_done

# ---- bad input: a clear 4xx, nothing queued -------------------------------------------
bad() # NAME STATUS FIELD BODY
{
    api POST /v1/jobs -d "$4"
    if [ "$ST" == "$2" ] && [ "$(jq -r .error.field <<<"$BODY")" == "$3" ]; then
        ok "$1 -> $2 ($3)"
    else
        fail "$1 -> $2 ($3)"
        why "$ST $BODY"
    fi
}
bad "workers 0" 400 workers "$(job b1 0 1 --steps 1)"
bad "an absurd GPU count" 400 resources.gpu.count "$(job b2 1 99 --steps 1)"
bad "an unknown nodepool" 422 'nodepools[0]' \
    "$(job b3 1 1 --steps 1 | jq -c '.nodepools[0].nodepool = "nope"')"
bad "a worker no instance type holds (3 GPUs on 2-GPU nodes)" 422 'nodepools[0]' "$(job b4 1 3 --steps 1)"
bad "a gang the nodepool can never hold (5 x 1 GPU on 4 GPUs)" 422 workers "$(job b5 5 1 --steps 1)"
bad "no command" 400 runtime.command '{"id":"b6","runtime":{},"nodepools":[{"cluster":"c1","nodepool":"gpu"}]}'
contains "the never-fitting gang's error says what the nodepools hold" \
    "$(api POST /v1/jobs -d "$(job b5 5 1 --steps 1)"; jq -r .error.message <<<"$BODY")" "c1/gpu: 2 node(s) x 2"
contains "the worker that fits nowhere is told why" \
    "$(api POST /v1/jobs -d "$(job b4 1 3 --steps 1)"; jq -r .error.message <<<"$BODY")" "a worker needs 3"
eq "nothing was queued" "$(jobs_count)" 0

# ---- an admin's per-user gpu_quota: a job past it waits, and runs once it is lifted ----
api PATCH /v1/users/admin -d '{"gpu_quota":1}'
status "PATCH /v1/users/admin gpu_quota 1" 200
api PATCH /v1/users/admin -d '{"gpu_quota":-1}'
status "a negative gpu_quota -> 400" 400
api PATCH /v1/users/admin -d '{"role":"member"}'
status "PATCH of anything but gpu_quota -> 400" 400
api POST /v1/jobs -d "$(job q1 2 1 --steps 3 --checkpoint-every 0 --step-ms 10)"
status "submit q1 (2 x 1 GPU) past the quota" 201
over() { job_field q1 .status.waiting | grep -q "quota of 1"; }
wait_check "$W" "q1 waits: its user would pass the quota of 1 GPU" over
eq "... still queued" "$(job_state q1)" queued
api GET /v1/queues
jqc "GET /v1/queues: admin's queue has 1 queued, 0 running, quota 1" \
    '.items == [{"queue":"admin","user":"admin","queued":1,"running":0,"gpus_used":0,"gpu_share":0,"gpu_quota":1}] and .cluster_gpus == 4' "$BODY"
api PATCH /v1/users/admin -d '{"gpu_quota":null}'
status "PATCH gpu_quota null (no quota)" 200
wait_check "$W" "q1 succeeds once the quota is lifted" job_is q1 succeeded

# ---- a 4-worker gang across two nodes; rank 2 fails once ------------------------------
api POST /v1/jobs -d "$(job train4 4 1 --steps 30 --checkpoint-every 5 --step-ms 40 --fail-at 12 --fail-rank 2)"
status "submit train4 (4 workers x 1 GPU)" 201
wait_check "$W" "train4 succeeds" job_is train4 succeeded
api GET /v1/jobs/train4
J=$BODY
jqc "train4 ran twice: attempt 2 after 1 restart" '.status.attempt == 2 and .status.restarts == 1' "$J"
# what each rank wrote into its last checkpoint (the program's own record)
CK=$(cat "$TMP"/d/nodes/*/*/job-checkpoints/train4/rank-*/step-00000030/state 2>/dev/null | grep '^rank')
eq "4 ranks wrote the last step's checkpoint" "$(wc -l <<<"$CK")" 4
eq "ranks 0-3" "$(awk '{print $2}' <<<"$CK" | sort -n | tr '\n' ' ')" "0 1 2 3 "
eq "one world size, 4" "$(awk '{print $4}' <<<"$CK" | sort -u | tr '\n' ' ')" "4 "
eq "one master" "$(awk '{print $6}' <<<"$CK" | sort -u | wc -l)" 1
eq "all in attempt 2" "$(awk '{print $8}' <<<"$CK" | sort -u | tr '\n' ' ')" "2 "
eq "attempt 2 resumed from step 10 (the newest complete checkpoint before step 12)" \
    "$(awk '{print $10}' <<<"$CK" | sort -u | tr '\n' ' ')" "10 "
# rank R on node N: ranks 0,1 on node 0 and 2,3 on node 1 (packed), local ranks 0,1 on each
eq "LOCAL_RANK/LOCAL_WORLD_SIZE and NODE_RANK/NNODES per rank" \
    "$(sort -n -k2 <<<"$CK" | awk '{printf "%s:%s:%s ", $2, $12, $14}')" "0:0/2:0/2 1:1/2:0/2 2:0/2:1/2 3:1/2:1/2 "
eq "the gang used both nodes (2 ranks each)" \
    "$(ls -d "$TMP"/d/nodes/*/*/job-checkpoints/train4/rank-* | sed 's|/job-checkpoints/.*||' | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')" "2 2 "
# the ended job's workers are gone, their logs are not (the last attempt's)
cli logs job/train4 --rank 3
rc "drover logs job/train4 --rank 3 after the job ended" 0
contains "... is attempt 2's rank 3, to its last step" "$OUT" "step 30"
contains "... which resumed from its checkpoint" "$OUT" "resumed from step 10"
api GET /v1/jobs/train4/logs
contains "the ended job's logs name attempt 2's workers" "$BODY" "==> worker train4-a2-r0"
api GET "/v1/events?kind=job&object=train4"
EV=$(jq -r '[.items[].type] | join(" ")' <<<"$BODY")
contains "events: admitted, starting, running, restarting, ..., succeeded" "$EV" "admitted starting running restarting admitted starting running succeeded"
# (the first rank reported failed: rank 2 itself, or a peer that lost it)
jqc "the restart's reason names a failed rank and its exit" \
    '[.items[] | select(.type == "restarting") | .reason | test("rank [0-3] on node .* failed: exited with status 1")] == [true]' "$BODY"

# ---- two gangs that each need 3 of the 4 GPUs ---------------------------------------
# (g1 runs until the test has looked at g2, then is cancelled: on a loaded
# machine a g1 of a fixed length could end before the look)
api POST /v1/jobs -d "$(job g1 3 1 --steps 100000 --checkpoint-every 0 --step-ms 40)"
status "submit g1 (3 x 1 GPU)" 201
api POST /v1/jobs -d "$(job g2 3 1 --steps 5 --checkpoint-every 0 --step-ms 10)"
status "submit g2 (3 x 1 GPU)" 201
wait_check "$W" "g1 runs" job_is g1 running
# (the reason comes with the first admission pass that tries g2 after g1
# took its GPUs: right after g1 runs, the look may come first)
g2_says_why() { api GET /v1/jobs/g2; jqq '(.status.waiting // "") | test("head|no_fit")' <<<"$BODY"; }
wait_check "$W" "g2 says why it waits" g2_says_why
jqc "g2 waits whole: queued, no placement, no worker" \
    '.status.state == "queued" and (.status.placement // [] | length) == 0 and .status.workers_ready == 0 and (.status.workers | length) == 0' "$BODY"
eq "g1 still runs (the look at g2 was while g1 held its GPUs)" "$(job_state g1)" running
api DELETE /v1/jobs/g1
status "cancel g1" 202
wait_check "$W" "g2 succeeds after g1" job_is g2 succeeded
G1END=$(job_field g1 .status.finished_at)
G2ADM=$(job_field g2 .status.admitted_at)
check "g2 was admitted only once g1 had ended ($G2ADM >= $G1END)" eval '[[ ! "$G2ADM" < "$G1END" ]]'

# ---- preemption: a higher-priority job stops a preemptible one, which comes back -------
api POST /v1/jobs -d "$(job low 4 1 --steps 100000 --checkpoint-every 10 --step-ms 20 | jq -c '.preemptible = true')"
status "submit low (4 x 1 GPU, preemptible)" 201
wait_check "$W" "low runs" job_is low running
api POST /v1/jobs -d "$(job high 2 1 --steps 5 --checkpoint-every 0 --step-ms 10 | jq -c '.priority = 10 | .timeout_seconds = 600')"
status "submit high (2 x 1 GPU, priority 10, timeout_seconds 600)" 201
wait_check "$W" "high succeeds" job_is high succeeded
# its wait bound, from the FIFO shadow at submission (low holds no GPUs
# there: it has no timeout_seconds, so no estimate): submit + 2 x 600 s
api GET /v1/jobs/high
jqc "high has a wait bound: submit + 1200 s (FIFO wait 0, the 600 s floor)" \
    '(.status.wait_bound.epoch - (.created_at | fromdate)) == 1200 and .status.wait_bound.fifo_wait_seconds == 0' "$BODY"
api GET /v1/jobs/low
jqc "low (no timeout_seconds) has none, and says why" \
    '.status.wait_bound == null and (.status.wait_unbounded | test("no timeout_seconds"))' "$BODY"
low_back() { api GET /v1/jobs/low; jqq '.status.state == "running" and .status.attempt == 2' <<<"$BODY"; }
wait_check "$W" "low runs again, as attempt 2" low_back
jqc "low: 1 preemption, which is not a restart" '.status.preemptions == 1 and .status.restarts == 0' "$BODY"
api GET "/v1/events?kind=job&object=low"
jqc "low's preemption is an event naming high" \
    '[.items[] | select(.type == "preempted") | .reason | test("for job high")] == [true]' "$BODY"
# (from byte 0: the plain tail may no longer hold the first line on a slow machine)
api GET "/v1/jobs/low/logs?rank=0&offset=0"
contains "low's rank 0 log (GET /v1/jobs/low/logs?rank=0&offset=0) is attempt 2's" "$BODY" "rank 0 of 4, master"
contains "... attempt 2" "$BODY" "attempt 2,"
# a deployment's replica owed preempts it too (replicas come before jobs)
api POST /v1/models -d '{"id":"web","runtime":{"command":["drover-demo-model","--weights-mib","1"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1},"cpu_millis":250,"memory_mib":128}}'
status "create model web (1 whole GPU)" 201
api POST /v1/deployments -d '{"id":"web","model":"web","nodepools":[{"cluster":"c1","nodepool":"gpu"}],"autoscale":{"min_replicas":1}}'
status "create deployment web (min_replicas 1)" 201
wait_check "$W" "web's replica is ready" deployment_ready web 1
low_waits() { api GET /v1/jobs/low; jqq '.status.state == "preempted" and .status.preemptions == 2 and (.status.placement // [] | length) == 0' <<<"$BODY"; }
wait_check "$W" "low was preempted for it and waits whole (3 GPUs free, it needs 4)" low_waits
api GET "/v1/events?kind=job&object=low"
jqc "... the event names the deployment" \
    '[.items[] | select(.type == "preempted") | .reason] | any(test("deployment web"))' "$BODY"
api DELETE /v1/deployments/web
status "delete deployment web" 200
low_again() { api GET /v1/jobs/low; jqq '.status.state == "running" and .status.attempt == 3' <<<"$BODY"; }
wait_check "$W" "low runs again once the GPU is free (attempt 3)" low_again
cli delete job low
rc "cancel low" 0

# ---- the CLI: apply, get, describe, delete (cancel) ------------------------------------
cat >"$TMP/job.yaml" <<EOF
job:
  id: long
  runtime:
    command: [drover-demo-train, --steps, "100000", --step-ms, "50"]
  workers: 2
  resources: {gpu: {count: 1}, cpu_millis: 500, memory_mib: 256}
  nodepools: [{cluster: c1, nodepool: gpu}]
EOF
cli apply -f "$TMP/job.yaml"
rc "drover apply -f job.yaml" 0
contains "apply says job/long created" "$OUT" "job/long created"
wait_check "$W" "long runs" job_is long running
cli get jobs
rc "drover get jobs" 0
contains "get jobs shows long running with 2/2 workers" "$(grep '^long' <<<"$OUT")" "running"
contains "... and 2/2" "$(grep '^long' <<<"$OUT")" "2/2"
cli get queues
rc "drover get queues" 0
eq "get queues: admin's queue, 0 queued, 1 running, 2 GPUs, a 50% share, no quota" \
    "$(awk '$1 == "admin" {print $2, $3, $4, $5, $6, $7}' <<<"$OUT")" "admin 0 1 2 50% -"
cli describe job long
rc "drover describe job long" 0
contains "describe shows rank 1's placement" "$OUT" "rank 1"
contains "describe says long has no wait bound" "$OUT" "none: no timeout_seconds"
cli describe job high
contains "describe job high prints its wait bound" "$OUT" "FIFO would start it at"
PIDS=$(jq -r '.status.workers[].pid' <<<"$(api GET /v1/jobs/long; echo "$BODY")")
api PATCH /v1/jobs/long -d '{"workers":3}'
status "PATCH of workers -> 422" 422
api PATCH /v1/jobs/long -d '{"priority":5}'
status "PATCH of priority -> 200" 200
cli apply -f "$TMP/job.yaml"
contains "re-applying job.yaml leaves the job unchanged" "$OUT" "job/long unchanged"
cli delete job long
rc "drover delete job long" 0
contains "it says cancelled" "$OUT" "job/long cancelled"
eq "long is cancelled" "$(job_state long)" cancelled
gone() { for p in $PIDS; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
wait_check "$W" "its workers stopped" gone
cli delete job long
rc "deleting an ended job removes it" 0
api GET /v1/jobs/long
status "GET /v1/jobs/long after that -> 404" 404

# ---- a node lost during training: the gang resumes from its checkpoint on the replacement --
# (checkpoint: {keep: 3}: each rank's scope job:survive:R at the head, restored on any node;
# max_restarts 4: a survivor's rank may see its peer die and fail before the head sees the
# node lost, which restarts the gang once more, onto the dying node);
# --hold-at 60: attempt 1 waits after step 60 (its checkpoint written) until
# the node is lost, so the kill always comes mid-training, however slow
# the machine (attempt 2 runs on to step 120)
api POST /v1/jobs -d "$(job survive 4 1 --steps 120 --checkpoint-every 20 --step-ms 50 --hold-at 60 | jq -c '.checkpoint = {keep: 3} | .max_restarts = 4')"
status "submit survive (4 workers x 1 GPU, checkpoint keep 3, attempt 1 held at step 60)" 201
newest() { api GET "/v1/checkpoints/job:survive:$1"; jq -r '.items[0].name // "step-00000000"' <<<"$BODY" | sed 's/step-0*//; s/^$/0/'; }
all_have() { for r in 0 1 2 3; do [ "$(newest $r)" -ge "$1" ] || return 1; done; }
wait_check "$W" "every rank committed a checkpoint at step >= 40 at the head" all_have 40
eq "survive still runs, attempt 1" "$(job_field survive '"\(.status.state) \(.status.attempt)"')" "running 1"
LOST=$(job_field survive '.status.placement[3].node')
LOSTR=$(api GET /v1/jobs/survive; jq -r --arg n "$LOST" '.status.placement | to_entries[] | select(.value.node == $n) | .key' <<<"$BODY")
BEFORE=$(nodes_json | jq -r '[.[].id] | sort | join(" ")')
# rank 0's step just before the kill (its log goes with the worker once the
# gang restarts, which can be before a read after the kill)
K=$(api GET "/v1/jobs/survive/logs?rank=0"; grep -o '^step [0-9]*' <<<"$BODY" | tail -1 | awk '{print $2}')
kill -9 "$(agent_pid "$LOST")"
ok "kill -9 the agent of $LOST (ranks $(echo $LOSTR))"
C=$(for r in $LOSTR; do newest "$r"; done | sort -n | head -1)   # the lost ranks' newest committed
again() { api GET /v1/jobs/survive; J=$BODY; jqq '.status.state == "running" and .status.attempt >= 2' <<<"$J"; }
wait_check "$W" "survive runs again (attempt >= 2)" again
NEWNODE=$(comm -13 <(tr ' ' '\n' <<<"$BEFORE") <(jq -r '.status.placement[].node' <<<"$J" | sort -u))
check "the new attempt runs on the lost node's replacement (${NEWNODE:-none}), not on $LOST" \
    eval '[ -n "$NEWNODE" ] && ! jq -r ".status.placement[].node" <<<"$J" | grep -qx "$LOST"'
NEWR=$(jq -r --arg n "$NEWNODE" '.status.placement | to_entries[] | select(.value.node == $n) | .key' <<<"$J" | tr '\n' ' ')
resumed() # RANK: the step it resumed from, once it says
{
    api GET "/v1/jobs/survive/logs?rank=$1"
    grep -o '^resumed from step [0-9]*' <<<"$BODY" | awk '{print $4}' | grep .
}
all_resumed() { for r in 0 1 2 3; do resumed "$r" >/dev/null || return 1; done; }
wait_check "$W" "every rank of the new attempt says where it resumed" all_resumed
eq "all 4 ranks resumed from step $C, the newest step every rank had committed when $LOST was lost" \
    "$(for r in 0 1 2 3; do resumed "$r"; done | tr '\n' ' ')" "$C $C $C $C "
check "... ranks ${NEWR:-none}of them on the replacement node" test -n "$NEWR"
wait_check "$W" "survive succeeds" job_is survive succeeded
jqc "it restarted (attempt >= 2, restarts >= 1)" '.status.attempt >= 2 and .status.restarts >= 1' "$(api GET /v1/jobs/survive; echo "$BODY")"
wait_check "$W" "every rank committed its last checkpoint, step 120" all_have 120
check "rank 0 was at step $K when the node was lost: redone $((K - C)) steps (interval 20, plus the upload in flight)" \
    test "$((K - C))" -ge 0 -a "$((K - C))" -le 40

# ---- a gang on a nodepool with no node yet: the node autoscaler starts them -------------
api POST /v1/clusters/c1/nodepools -d '{"id":"burst","instance_types":["local-l4x2"],"min_nodes":0,"max_nodes":2}'
status "create nodepool burst (0..2 x local-l4x2)" 201
api POST /v1/jobs -d "$(job grow 4 1 --steps 3 --checkpoint-every 0 --step-ms 10 | jq -c '.nodepools[0].nodepool = "burst"')"
status "submit grow (4 x 1 GPU on burst)" 201
wait_check "$W" "grow succeeds on the nodes started for it" job_is grow succeeded
eq "burst has the 2 nodes the gang needed" \
    "$(nodes_json | jq '[.[] | select(.nodepool == "burst")] | length')" 2

# ---- a gang that cannot fit whole within max_nodes gets no node -----------------------
# burst may have 3 nodes now; hold takes 3 of its 4 GPUs, so big (4 x 1 GPU)
# would need two new nodes next to the 1 GPU left: no node is started for it
burst_nodes() { nodes_json | jq '[.[] | select(.nodepool == "burst")] | length'; }
api PATCH /v1/clusters/c1/nodepools/burst -d '{"max_nodes":3}'
status "burst: max_nodes 3" 200
api POST /v1/jobs -d "$(job hold 3 1 --steps 100000 --checkpoint-every 0 --step-ms 100 | jq -c '.nodepools[0].nodepool = "burst"')"
status "submit hold (3 x 1 GPU on burst)" 201
wait_check "$W" "hold runs on burst's two nodes" job_is hold running
api POST /v1/jobs -d "$(job big 4 1 --steps 3 --checkpoint-every 0 --step-ms 10 | jq -c '.nodepools[0].nodepool = "burst"')"
status "submit big (4 x 1 GPU on burst)" 201
big_held() { job_field big .status.provisioning | grep -q "cannot fit whole within max_nodes 3"; }
wait_check "$W" "big says why no node is started for it" big_held
contains "big's reason names the nodes it needs" "$(job_field big .status.provisioning)" \
    "a gang of 4 worker(s) needs 2 node(s) of local-l4x2"
eq "no node was started for the gang that cannot fit whole" "$(burst_nodes)" 2
eq "big is still queued" "$(job_state big)" queued
api DELETE /v1/jobs/hold
status "cancel hold" 202
wait_check "$W" "big runs whole on the two nodes once hold is gone, and succeeds" job_is big succeeded
eq "still no third node" "$(burst_nodes)" 2
eq "big's provisioning reason is gone" "$(job_field big .status.provisioning)" ""

droverd_finish jobs
t_done
