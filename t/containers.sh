#!/usr/bin/env bash
# containers.sh — replicas in OCI containers through podman (issue 16): an
# image built here from drover-demo-model, drover-demo-train and the libraries ldd lists
# (`podman import`, no registry), a model naming it (runtime.image); its
# replica runs in a container with host networking, answers predictions
# through the gateway, sees its model dir read-only at /models, has
# --memory from resources.memory_mib in the container's cgroup, and its
# output in `drover logs`; the agent kill -9'ed and restarted adopts the
# running container (same container, none restarted, none added); a job's
# two drover-demo-train workers in the image run to success with their
# checkpoint dirs, adopted after a kill -9 of the agent; a preset (vllm)
# renders its command line ($(PORT) expanded by the agent), and `drover
# recommend --preset` prints a model YAML that applies; deleting
# the deployment removes the container; an image that is not there with
# pull_policy never fails the replica with a clear reason and event and no
# retry; a failed pull backs off; a deployment deleted while its agent was
# down has its container removed by the restarted agent; a node whose agent
# has no engine gets no image replica; bad
# runtime.image input is a 400; registry credentials pull from a registry of
# the test's own with a login; a nodepool with prefetch: true pulls the
# image of its deployment (with the login) on its node before any replica
# is placed. Podman runs on the test's own storage and
# configuration in $TMP (vfs, cgroupfs, runc); the system's are untouched.
# CTR_ENGINE=docker runs the same through a dockerd of the test's own
# (t/containers_docker.sh). Skipped (77) when the engine is missing or
# cannot run a container here.
. "$(dirname "$0")/lib/common.bash"
# node_lost_ms: an agent kill -9'ed and restarted comes back before its node
# is lost (a job's gang would restart: its workers' adoption is the point);
# node_timeout_ms, the node's lease on its job workers, is droverd's default
# 10 s: with 2 s, a loaded machine (the restarted agent's first syncs slow)
# let the lease run out and the agent stop tj's workers (no restarts left)
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 10000, "node_lost_ms": 20000}'
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

# ---- the engine on the test's own storage ---------------------------------------------------
# CTR_ENGINE=docker (t/containers_docker.sh): the same scenarios through a
# dockerd of the test's own (its data, exec root and socket in $TMP)
ENGINE=${CTR_ENGINE:-podman}
export DEMO_IMAGE_ENGINE=$ENGINE
if [ "$ENGINE" == podman ]; then
    if ! command -v podman >/dev/null 2>&1; then
        echo "skip: podman is not installed (scripts/install-deps installs it)"
        exit 77
    fi
    RUNTIME=runc
    command -v runc >/dev/null 2>&1 || RUNTIME=crun
    mkdir -p "$TMP/pm/root" "$TMP/pm/run" "$TMP/pm/tmp"
    printf '[storage]\ndriver = "vfs"\ngraphroot = "%s"\nrunroot = "%s"\n' \
        "$TMP/pm/root" "$TMP/pm/run" >"$TMP/pm/storage.conf"
    printf '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\nruntime = "%s"\ntmp_dir = "%s"\n' \
        "$RUNTIME" "$TMP/pm/tmp" >"$TMP/pm/containers.conf"
    export CONTAINERS_STORAGE_CONF=$TMP/pm/storage.conf CONTAINERS_CONF=$TMP/pm/containers.conf
    ctr_cleanup() { podman rm -a -f -t 0 >/dev/null 2>&1; }
    _EXIT_HOOKS+=(ctr_cleanup)
    ENGINE_DESC="podman ($RUNTIME, vfs)"
else
    if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
        echo "skip: dockerd is not installed (Debian package docker.io)"
        exit 77
    fi
    mkdir -p "$TMP/pm" "$TMP/dk"
    dockerd --data-root "$TMP/dk/root" --exec-root "$TMP/dk/exec" -H "unix://$TMP/dk/sock" \
        --pidfile "$TMP/dk/pid" --bridge=none --iptables=false --ip6tables=false \
        --storage-driver=vfs --containerd-namespace "dt-${TMP##*.}" \
        --containerd-plugins-namespace "dtp-${TMP##*.}" >"$TMP/dk/log" 2>&1 &
    DKPID=$!
    export DOCKER_HOST=unix://$TMP/dk/sock
    # before the workers' cleanup kills every process naming $TMP: the
    # containers first (their processes do not name it), then dockerd
    ctr_cleanup() {
        docker ps -aq | xargs -r docker rm -f >/dev/null 2>&1
        kill -TERM "$DKPID" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$DKPID" 2>/dev/null || break; sleep 0.1; done
        local m   # what dockerd leaves mounted (its default network namespace)
        for m in $(awk -v t="$TMP/" 'index($2, t) == 1 { print $2 }' /proc/mounts | sort -r); do
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
        done
        _workers_cleanup
    }
    trap ctr_cleanup EXIT
    dk_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
    if ! wait_until 60 "dockerd answers" dk_up; then
        echo "skip: dockerd does not start here: $(tail -3 "$TMP/dk/log")"
        exit 77
    fi
    ENGINE_DESC="docker $(docker version --format '{{.Server.Version}}') (vfs)"
fi
ENGINE_VERSION=$($ENGINE --version | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
EARGS=(--container-engine "$ENGINE")
export DROVER_CONTAINER_ENGINE=$ENGINE   # agents started without EARGS too

# the image: drover-demo-model, a shell and their libraries (scripts/demo-image)
if ! "$DROVER_SRC/scripts/demo-image" "$BIN_DIR/drover-demo-model" "$TMP" t >"$TMP/image.log" 2>&1; then
    echo "skip: $ENGINE cannot import an image here: $(tail -3 "$TMP/image.log")"
    exit 77
fi
lim() { ulimit -"$1"; }
PIDMAX=$(cat /proc/sys/kernel/pid_max)
NPROC=$(lim u); [ "$NPROC" == unlimited ] || [ "$NPROC" -gt $((PIDMAX / 2)) ] && NPROC=$((PIDMAX / 2))
if ! $ENGINE run --rm --network host --ulimit "nofile=$(lim n):$(lim n)" --ulimit "nproc=$NPROC:$NPROC" \
        --entrypoint /bin/sh localhost/drover-demo:t -c 'echo probe-ok' >"$TMP/probe.log" 2>&1 ||
   ! grep -q probe-ok "$TMP/probe.log"; then
    echo "skip: $ENGINE cannot run a container here: $(tail -3 "$TMP/probe.log")"
    exit 77
fi
ok "$ENGINE_DESC runs a container of the image built here"

# a registry of our own (Debian's docker-registry) with a login (htpasswd), for
# pulls with registry credentials; podman may speak plain http to it only
for t in docker-registry htpasswd; do
    command -v "$t" >/dev/null 2>&1 || { fail "$t is installed (scripts/install-deps)"; t_done; }
done
REGP=$(free_port)
REG=127.0.0.1:$REGP
mkdir -p "$TMP/reg"
htpasswd -Bbn alice 'pw-Zq81x' >"$TMP/reg/htpasswd"
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\nauth:\n  htpasswd:\n    realm: drover-test\n    path: %s\n' \
    "$TMP/reg/data" "$REG" "$TMP/reg/htpasswd" >"$TMP/reg/config.yml"
docker-registry serve "$TMP/reg/config.yml" >"$TMP/reg/log" 2>&1 &
_BG_PIDS+=("$!")
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REG" >"$TMP/pm/registries.conf"
export CONTAINERS_REGISTRIES_CONF=$TMP/pm/registries.conf
reg_up() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$REG/v2/")" == 401 ]; }
wait_check 30 "the test's registry answers (and wants a login)" reg_up

PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":4}'
status "create nodepool np" 201
api POST /v1/clusters/sm/nodepools/np/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
status "join token" 201
JOIN=$(jq -r .secret <<<"$BODY")

# ---- bad input: 400 with the field ------------------------------------------------------
bad() # NAME RUNTIME-JSON FIELD
{
    api POST /v1/models -d "{\"id\":\"bad\",\"runtime\":$2}"
    status "$1: 400" 400
    jqc "$1: names $3" ".error.field == \"$3\"" "$BODY"
}
bad "no command and no image" '{}' runtime.command
bad "an image with a space" '{"image":"localhost/a b"}' runtime.image
bad "an image starting with -" '{"image":"--privileged"}' runtime.image
bad "an unknown pull_policy" '{"image":"localhost/a:1","pull_policy":"sometimes"}' runtime.pull_policy
bad "args without an image" '{"command":["x"],"args":["y"]}' runtime.args
bad "pull_policy without an image" '{"command":["x"],"pull_policy":"never"}' runtime.pull_policy
api GET /v1/models/bad
status "nothing was stored" 404
badjob() # NAME RUNTIME-JSON FIELD: a job's runtime is checked as a model's
{
    api POST /v1/jobs -d "{\"id\":\"badj\",\"runtime\":$2,\"nodepools\":[{\"cluster\":\"sm\",\"nodepool\":\"np\"}]}"
    status "job: $1: 400" 400
    jqc "job: $1: names $3" ".error.field == \"$3\"" "$BODY"
}
badjob "no command and no image" '{}' runtime.command
badjob "an image starting with -" '{"image":"--privileged"}' runtime.image
badjob "pull_policy without an image" '{"command":["x"],"pull_policy":"never"}' runtime.pull_policy

# ---- a node without an engine gets no image replica ----------------------------------------
# (through DROVER_CONTAINER_ENGINE, the flag's default; a bad value is refused)
OUT=$(DROVER_CONTAINER_ENGINE=podmn timeout 20 "$BIN_DIR/drover-agent" --server "$URL" --data-dir "$TMP/bad-engine" 2>&1)
RC=$?
eq "DROVER_CONTAINER_ENGINE=podmn: exit 2, says what it takes" \
    "$RC $(grep -c "DROVER_CONTAINER_ENGINE takes auto, podman, docker or none, not 'podmn'" <<<"$OUT")" "2 1"
DROVER_CONTAINER_ENGINE=none start_agent plain --join-token "$JOIN"
plain_reported() { nodes_json | jq -e 'any(.[]; .status.container_runtime.engine == "none")' >/dev/null; }
wait_check "$W" "node without an engine (DROVER_CONTAINER_ENGINE=none): container_runtime.engine none" plain_reported

CMD='["/bin/sh","-c","if (: >/models/probe) 2>/dev/null; then echo MODELDIR=rw; else echo MODELDIR=ro; fi; echo MODELDIR_ENV=$DROVER_MODEL_DIR; exec /bin/drover-demo-model --weights /tmp/w.bin --weights-mib 1"]'
api POST /v1/models -d "{\"id\":\"m\",\"runtime\":{\"image\":\"localhost/drover-demo:t\",\"pull_policy\":\"never\",\"command\":$CMD,\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":500,\"memory_mib\":256}}"
status "create model m with runtime.image" 201
jqc "the model keeps image and pull_policy" '.runtime.image == "localhost/drover-demo:t" and .runtime.pull_policy == "never"' "$BODY"
api POST /v1/deployments -d '{"id":"d1","model":"m","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d1" 201
pending_no_engine() {
    replicas_json deployment=d1 | jq -e '.[0].status.state == "pending" and (.[0].status.reason | test("no container engine"))' >/dev/null
}
wait_check "$W" "d1's replica stays pending: the only node has no container engine (reason says so)" pending_no_engine

# ---- GPUs wanted and no CDI spec: failed with the reason ------------------------------------
api POST /v1/clusters/sm/nodepools -d '{"id":"gp","instance_types":["self-l4"],"min_nodes":0,"max_nodes":1}'
status "create nodepool gp (its own: nothing else is placed there)" 201
api POST /v1/clusters/sm/nodepools/gp/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
status "join token for gp" 201
mkdir -p "$TMP/nocdi"
DROVER_CDI_DIRS=$TMP/nocdi start_agent g1 --join-token "$(jq -r .secret <<<"$BODY")" "${EARGS[@]}"
if [ "$ENGINE" == podman ]; then   # docker takes --gpus, no CDI spec
    api POST /v1/models -d '{"id":"mg","runtime":{"image":"localhost/drover-demo:t","pull_policy":"never","startup_timeout_seconds":60},"resources":{"gpu":{"count":1},"cpu_millis":100,"memory_mib":64}}'
    status "create model mg (an image, one GPU)" 201
    api POST /v1/deployments -d '{"id":"d5","model":"mg","nodepools":[{"cluster":"sm","nodepool":"gp"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
    status "create deployment d5" 201
    no_cdi() { replicas_json deployment=d5 | jq -e '.[0].status.state == "failed" and (.[0].status.reason | test("wants GPUs GPU-.* and no CDI spec names nvidia.com/gpu"))' >/dev/null; }
    wait_check "$W" "d5's GPU container replica fails: no CDI spec for its GPUs (reason says so)" no_cdi
    eq "no container was created for it" "$($ENGINE ps -aq --filter label=drover.deployment=d5 | wc -l)" 0
    api DELETE /v1/deployments/d5
    check "delete d5" [ "$ST" -lt 300 ]
fi
g1_reports() { nodes_json | jq -e --arg e "$ENGINE" 'any(.[]; .nodepool == "gp" and .status.container_runtime.engine == $e)' >/dev/null; }
wait_check "$W" "node g1 reports $ENGINE" g1_reports
cli get nodes -o wide
contains "get nodes -o wide: a CONTAINERS column with the engine's version" "$OUT" "$ENGINE $ENGINE_VERSION"
kill -TERM "${AG_PID[g1]}"
wait "${AG_PID[g1]}" 2>/dev/null

# ---- a node with the engine: the replica runs in a container -----------------------------------
start_agent a1 --join-token "$JOIN" --gpus none "${EARGS[@]}"
wait_check "$W" "d1: the replica is ready (in a container)" replicas_ready d1 1
REP=$(replicas_json deployment=d1 | jq -c '.[0]')
RID=$(jq -r .id <<<"$REP")
NODE=$(jq -r .node <<<"$REP")
EP=$(jq -r .status.endpoint <<<"$REP")
jqc "node a1 reports $ENGINE and its version" '.status.container_runtime.engine == "'"$ENGINE"'" and (.status.container_runtime.version | test("^[0-9]"))' \
    "$(api GET "/v1/nodes/$NODE"; echo "$BODY")"
ctr_ids() { $ENGINE ps -q --no-trunc --filter "label=drover.replica=$RID"; }
CID=$(ctr_ids)
eq "one container runs for the replica" "$(wc -w <<<"$CID")" 1
LBL=$($ENGINE inspect --format '{{index .Config.Labels "drover.deployment"}} {{index .Config.Labels "drover.node"}} {{.HostConfig.NetworkMode}} {{.HostConfig.Memory}}' "$CID")
eq "labels, host networking, --memory from resources (256 MiB)" "$LBL" "d1 $NODE host $((256 << 20))"
CG=$(find /sys/fs/cgroup/memory -maxdepth 3 -type d -name "*${CID}*" 2>/dev/null | head -1)
if [ -n "$CG" ]; then
    eq "the container's memory cgroup has the limit" "$(cat "$CG/memory.limit_in_bytes")" $((256 << 20))
else
    fail "the container's memory cgroup is found under /sys/fs/cgroup/memory"
fi
predict_ok "$EP" "$RID" && ok "the replica answers /predict on its endpoint" || fail "the replica answers /predict on its endpoint"
cli logs deployment/d1
rc "drover logs deployment/d1" 0
contains "the container's output is in the replica log: model dir read-only" "$OUT" "MODELDIR=ro"
contains "DROVER_MODEL_DIR is /models inside" "$OUT" "MODELDIR_ENV=/models"
api POST /v1/deployments/d1/predict -d '{"inputs":"hello"}'
status "a prediction through the gateway" 200
jqc "it is answered by the container" ".replica == \"$RID\" and (.outputs | length == 1)" "$BODY"

# ---- the agent kill -9'ed and restarted adopts the container -----------------------------
STARTED=$($ENGINE inspect --format '{{.State.StartedAt}}' "$CID")
kill -KILL "${AG_PID[a1]}"
wait "${AG_PID[a1]}" 2>/dev/null
eq "the container outlives its agent" "$(ctr_ids)" "$CID"
start_agent a1 --gpus none "${EARGS[@]}"
adopted() { replicas_json deployment=d1 | jq -e --arg r "$RID" 'length == 1 and .[0].id == $r and .[0].status.state == "ready" and .[0].status.restarts == 0' >/dev/null && grep -q "adopting the running container" "$TMP/agents/a1/replicas/$RID/stdout.log" 2>/dev/null; }
wait_check "$W" "the restarted agent adopts it: same replica, ready, no restart" adopted
eq "the same container, not restarted" "$(ctr_ids) $($ENGINE inspect --format '{{.State.StartedAt}}' "$CID")" "$CID $STARTED"
eq "no second container" "$($ENGINE ps -aq | wc -l)" 1
predict_ok "$EP" "$RID" && ok "the adopted replica still answers on its endpoint" || fail "the adopted replica still answers on its endpoint"

# ---- pull_policy never and no such image: failed, an event, no retry ----------------------
api POST /v1/models -d '{"id":"nope","runtime":{"image":"localhost/no-such-image:1","pull_policy":"never","startup_timeout_seconds":60},"resources":{"gpu":{"count":0},"cpu_millis":100,"memory_mib":64}}'
status "create model nope" 201
api POST /v1/deployments -d '{"id":"d2","model":"nope","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d2" 201
failed_clear() { replicas_json deployment=d2 | jq -e '.[0].status.state == "failed" and (.[0].status.reason | test("localhost/no-such-image:1 is not on this node and its pull_policy is never"))' >/dev/null; }
wait_check "$W" "d2's replica fails with the reason: no such image, pull_policy never" failed_clear
api GET "/v1/events?kind=deployment&object=d2&limit=1000"
jqc "an event says so" '.items | map(select(.type == "replica_failed")) | .[0].reason | test("no-such-image:1 is not on this node")' "$BODY"
R2=$(replicas_json deployment=d2)
eq "no retry: one replica, no restart" "$(jq -r 'length, .[0].status.restarts' <<<"$R2" | tr '\n' ' ')" "1 0 "
eq "no container was created for it" "$($ENGINE ps -aq --filter label=drover.deployment=d2 | wc -l)" 0

# ---- a pull that fails: pulling, then a backoff with the reason (no storm) ----------------
api POST /v1/models -d '{"id":"unreachable","runtime":{"image":"localhost:1/none:1","pull_policy":"always","startup_timeout_seconds":60},"resources":{"gpu":{"count":0},"cpu_millis":100,"memory_mib":64}}'
status "create model unreachable (pull_policy always, a registry that does not answer)" 201
api POST /v1/deployments -d '{"id":"d3","model":"unreachable","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d3" 201
pull_backoff() { replicas_json deployment=d3 | jq -e '.[0].status.state == "backoff" and (.[0].status.reason | test("pulling image localhost:1/none:1 failed.*restarting in")) and .[0].status.restarts >= 1' >/dev/null; }
wait_check "$W" "d3: the failed pull backs off with the reason" pull_backoff
R3=$(replicas_json deployment=d3 | jq -r '.[0].id')
cli logs deployment/d3
contains "the replica log shows the pull" "$OUT" "drover: pulling image localhost:1/none:1"
api DELETE /v1/deployments/d3
check "delete d3" [ "$ST" -lt 300 ]

# ---- deleting the deployment removes its container -----------------------------------------
api DELETE /v1/deployments/d1
check "delete d1" [ "$ST" -lt 300 ]
gone() { [ -z "$($ENGINE ps -aq --filter label=drover.deployment=d1)" ]; }
wait_check "$W" "d1's container is stopped and removed" gone

# ---- a job's workers in containers: the torchrun env, checkpoints, adoption -------------------
# 2 workers of drover-demo-train in the image (its entrypoint replaced): they
# meet at MASTER_ADDR:MASTER_PORT over the host network, write checkpoints
# into DROVER_CHECKPOINT_DIR (/checkpoints inside, the agent's local dir of
# the rank outside); the agent kill -9'ed and restarted adopts both (running,
# or exited meanwhile), and the job succeeds in its first attempt. 80 steps
# of 100 ms: the first checkpoint comes at 1 s, the adoption a second or two
# later, well inside the 8 s the workers run (and an exited worker is adopted too)
TCMD='["/bin/drover-demo-train","--steps","80","--checkpoint-every","10","--step-ms","100"]'
api POST /v1/jobs -d "{\"id\":\"tj\",\"runtime\":{\"image\":\"localhost/drover-demo:t\",\"pull_policy\":\"never\",\"command\":$TCMD},\"workers\":2,\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64},\"nodepools\":[{\"cluster\":\"sm\",\"nodepool\":\"np\"}],\"max_restarts\":0}"
status "create job tj (2 workers in the image)" 201
job_field() { api GET "/v1/jobs/tj"; [ "$ST" == 200 ] && jq -r "$1 // empty" <<<"$BODY"; }
CK=$TMP/agents/a1/job-checkpoints/tj
tj_running() { [ "$(job_field .status.state)" == running ] && [ -e "$CK/rank-0/step-00000010/COMPLETE" ] && [ -e "$CK/rank-1/step-00000010/COMPLETE" ]; }
wait_check "$W" "tj runs and both ranks wrote a checkpoint into the node's dir through /checkpoints" tj_running
eq "both workers on a1 (the node without an engine in np gets none)" \
    "$(job_field '[.status.placement[].node] | unique | join(" ")')" "$NODE"
contains "the torchrun env inside: rank 1 of 2 and the master" \
    "$(cat "$TMP/agents/a1/replicas/tj-a1-r1/stdout.log" 2>/dev/null)" "rank 1 of 2, master "
wctr() { $ENGINE ps -q --no-trunc --filter label=drover.job=tj | sort | tr '\n' ' '; }
WC=$(wctr)
eq "two worker containers" "$(wc -w <<<"$WC")" 2
kill -KILL "${AG_PID[a1]}"
wait "${AG_PID[a1]}" 2>/dev/null
start_agent a1 --gpus none "${EARGS[@]}"
A0='' A1=''   # each worker's log says it was adopted (a log can go with its worker: seen once is enough)
tj_adopted() {
    local r
    for r in 0 1; do
        grep -qE "adopting the (running|exited) container drover-tj-a1-r$r" \
            "$TMP/agents/a1/replicas/tj-a1-r$r/stdout.log" 2>/dev/null && eval "A$r=1"
    done
    [ -n "$A0" ] && [ -n "$A1" ]
}
wait_check "$W" "the restarted agent adopts both workers' containers" tj_adopted
tj_done() { [ "$(job_field .status.state)" == succeeded ]; }
wait_check "$W" "tj succeeds" tj_done
eq "in its first attempt, no restart (the gang went on)" \
    "$(job_field '"\(.status.attempt) \(.status.restarts)"')" "1 0"
eq "the workers' containers are removed" "$($ENGINE ps -aq --filter label=drover.job=tj | wc -l)" 0

# ---- a preset: the server's command line, rendered and expanded -------------------------------
# runtime.preset vllm with the local image and a command that prints the
# arguments the preset gives it ($(PORT) and $(DROVER_DEPLOYMENT) expanded
# by the agent), then serves drover-demo-model on PORT
api POST /v1/models -d '{"id":"pv","runtime":{"preset":"nope"}}'
status "an unknown runtime.preset: 400" 400
jqc "it names runtime.preset" '.error.field == "runtime.preset"' "$BODY"
PCMD='["/bin/sh","-c","echo PRESET_ARGS: \"$*\"; exec /bin/drover-demo-model --weights /tmp/w.bin --weights-mib 1","sh"]'
api POST /v1/models -d "{\"id\":\"pv\",\"runtime\":{\"preset\":\"vllm\",\"image\":\"localhost/drover-demo:t\",\"pull_policy\":\"never\",\"command\":$PCMD,\"args\":[\"--max-model-len\",\"4096\"],\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":128}}"
status "create model pv (preset vllm, the local image)" 201
jqc "the preset's paths are filled" '.runtime.health_path == "/health" and .runtime.metrics_path == "/metrics" and .runtime.predict_path == "/v1/completions"' "$BODY"
api POST /v1/deployments -d '{"id":"d8","model":"pv","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d8" 201
wait_check "$W" "d8: ready in a container" replicas_ready d8 1
R8=$(replicas_json deployment=d8 | jq -c '.[0]')
P8=$(jq -r '.status.endpoint | sub(".*:"; "")' <<<"$R8")
contains "the container got vLLM's command line, expanded, then the model's args" \
    "$(cat "$TMP/agents/a1/replicas/$(jq -r .id <<<"$R8")/stdout.log" 2>/dev/null)" \
    "PRESET_ARGS: --model /models --served-model-name d8 --host 0.0.0.0 --port $P8 --tensor-parallel-size 1 --max-model-len 4096"
C8PID=$($ENGINE inspect --format '{{.State.Pid}}' "$($ENGINE ps -q --filter label=drover.deployment=d8)")
eq "and --ipc=host: the node's IPC namespace" "$(readlink "/proc/$C8PID/ns/ipc")" "$(readlink /proc/self/ns/ipc)"
api DELETE /v1/deployments/d8
check "delete d8" [ "$ST" -lt 300 ]

# drover recommend --preset: a ready model YAML that applies as it is
cli recommend --params-b 70 --preset vllm --id big
rc "recommend --params-b 70 --preset vllm" 0
contains "its comment names the preset, image and instance type" "$OUT" "# runtime.preset vllm (image docker.io/vllm/vllm-openai:latest) on instance type "
printf '%s\n' "$OUT" >"$TMP/big.yaml"
cli apply -f "$TMP/big.yaml"
rc "apply -f the printed YAML" 0
api GET /v1/models/big
jqc "model big: preset vllm, several GPUs (70B), the preset's paths" '.runtime.preset == "vllm" and .resources.gpu.count >= 2 and .params_b == 70 and .runtime.health_path == "/health"' "$BODY"
cli recommend --params-b 7 --preset vllm2
check "recommend --preset vllm2: refused, naming the presets" bash -c '[ "$1" != 0 ] && grep -q "must be one of vllm, sglang" <<<"$2"' _ "$RC" "$ERR"

# ---- deleted while its agent was down: the restarted agent removes the container ------------
api POST /v1/deployments -d '{"id":"d4","model":"m","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d4" 201
wait_check "$W" "d4: ready in a container" replicas_ready d4 1
eq "d4's container runs" "$($ENGINE ps -q --filter label=drover.deployment=d4 | wc -l)" 1
kill -KILL "${AG_PID[a1]}"
wait "${AG_PID[a1]}" 2>/dev/null
api DELETE /v1/deployments/d4
check "delete d4 while its node's agent is down" [ "$ST" -lt 300 ]
d4_gone() { [ "$(replicas_json deployment=d4)" == "[]" ]; }
wait_check "$W" "the head dropped d4's replica" d4_gone
start_agent a1 --gpus none "${EARGS[@]}"
swept() { [ -z "$($ENGINE ps -aq --filter label=drover.deployment=d4)" ] && grep -q "containers: removed 1 whose replica is no longer this node's" "$TMP/agents/a1.log"; }
wait_check "$W" "the restarted agent removes the container the head no longer lists" swept

# ---- registry credentials: stored by the head, never shown; a pull with the login -------------
regcred() { api POST /v1/credentials -d "{\"id\":\"reg\",\"provider\":\"registry\",$1}"; }
regcred "\"registry\":\"$REG\",\"username\":\"alice\""
status "a registry credential without a password: 400" 400
jqc "it names password" '.error.field == "password"' "$BODY"
regcred "\"registry\":\"$REG\",\"username\":\"alice\",\"password\":\"x\",\"access_key_id\":\"AKIA\""
status "a registry credential with an aws field: 400" 400
regcred "\"registry\":\"http://$REG\",\"username\":\"alice\",\"password\":\"x\""
status "a registry with a scheme: 400" 400
regcred "\"registry\":\"$REG\",\"username\":\"alice\",\"password\":\"pw-Zq81x\""
status "create registry credential reg" 201
jqc "the password is never shown" '.password == "(hidden)"' "$BODY"
api POST /v1/models -d '{"id":"bad","runtime":{"image":"x/y:1","image_credential":"nope"}}'
status "a model naming an unknown credential: 400" 400
jqc "it names runtime.image_credential" '.error.field == "runtime.image_credential"' "$BODY"
# the image goes to the registry; then it is no longer on the node
printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$REG" "$(printf 'alice:pw-Zq81x' | base64)" >"$TMP/auth.json"
mkdir -p "$TMP/dkcfg" && cp "$TMP/auth.json" "$TMP/dkcfg/config.json"
$ENGINE tag localhost/drover-demo:t "$REG/drover/demo:t"
REGISTRY_AUTH_FILE=$TMP/auth.json DOCKER_CONFIG=$TMP/dkcfg $ENGINE push -q "$REG/drover/demo:t" >"$TMP/push.log" 2>&1
check "push the image to the test's registry" [ $? == 0 ]
$ENGINE rmi -f localhost/drover-demo:t "$REG/drover/demo:t" >/dev/null 2>&1
check "the image is no longer on the node" bash -c "! $ENGINE image inspect $REG/drover/demo:t >/dev/null 2>&1"
api POST /v1/models -d "{\"id\":\"priv\",\"runtime\":{\"image\":\"$REG/drover/demo:t\",\"image_credential\":\"reg\",\"args\":[\"--weights\",\"/tmp/w.bin\",\"--weights-mib\",\"1\"],\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":128}}"
status "create model priv (its image in the registry, with the credential)" 201
api POST /v1/models -d "{\"id\":\"nologin\",\"runtime\":{\"image\":\"$REG/drover/demo:t\",\"pull_policy\":\"always\",\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
status "create model nologin (the same image, no credential)" 201
api DELETE /v1/credentials/reg
status "the credential cannot go while a model uses it: 409" 409
api POST /v1/deployments -d '{"id":"d6","model":"nologin","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d6" 201
nologin_backoff() { replicas_json deployment=d6 | jq -e '.[0].status.state == "backoff" and (.[0].status.reason | test("pulling image .* failed"))' >/dev/null; }
wait_check "$W" "d6: without the login the pull fails and backs off" nologin_backoff
api DELETE /v1/deployments/d6
check "delete d6" [ "$ST" -lt 300 ]
api POST /v1/deployments -d '{"id":"d7","model":"priv","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d7" 201
wait_check "$W" "d7: pulled with the login, ready in a container" replicas_ready d7 1
R7=$(replicas_json deployment=d7 | jq -r '.[0].id')
L7=$(cat "$TMP/agents/a1/replicas/$R7/stdout.log" 2>/dev/null)
contains "its log shows the pull" "$L7" "drover: pulling image $REG/drover/demo:t"
check "the agent saw it go pulling, then start" \
    grep -q "replica $R7: pulling image $REG/drover/demo:t" "$TMP/agents/a1.log"
if [ "$ENGINE" == podman ]; then LAYER="Copying blob"; else LAYER="Pull complete"; fi
contains "... and the layers copied" "$L7" "$LAYER"
api POST /v1/deployments/d7/predict -d '{"inputs":"hello"}'
status "a prediction through the gateway to the pulled image" 200
check "the password is in no log" bash -c "! grep -rqs 'pw-Zq81x' '$TMP/agents' '$TMP/d/droverd.log'"
check "the login file is private to the agent (0600)" \
    [ "$(stat -c %a "$TMP/agents/a1/containers/$R7.auth/config.json" 2>/dev/null)" == 600 ]
api DELETE /v1/deployments/d7
check "delete d7" [ "$ST" -lt 300 ]
auth_gone() { [ ! -e "$TMP/agents/a1/containers/$R7.auth" ] && [ -z "$($ENGINE ps -aq --filter label=drover.deployment=d7)" ]; }
wait_check "$W" "its container and login file are removed" auth_gone

# ---- nodepool prefetch: the images of its deployments pulled before any replica ------------
$ENGINE rmi -f "$REG/drover/demo:t" >/dev/null 2>&1
check "the registry's image is no longer on the node" bash -c "! $ENGINE image inspect $REG/drover/demo:t >/dev/null 2>&1"
api POST /v1/clusters/sm/nodepools -d '{"id":"pp","instance_types":["self-l4"],"min_nodes":0,"max_nodes":1,"prefetch":true}'
status "create nodepool pp (prefetch: true)" 201
api POST /v1/deployments -d '{"id":"d9","model":"priv","nodepools":[{"cluster":"sm","nodepool":"pp"}],"autoscale":{"min_replicas":0,"max_replicas":1}}'
status "create deployment d9 (the registry's image, no replica yet)" 201
api POST /v1/clusters/sm/nodepools/pp/join-tokens -d '{"id":"t","ttl_seconds":3600}'
status "join token for pp" 201
start_agent p1 --join-token "$(jq -r .secret <<<"$BODY")" --gpus none "${EARGS[@]}"
prefetched() { nodes_json | jq -e --arg i "$REG/drover/demo:t" 'any(.[]; .nodepool == "pp" and any(.status.container_runtime.images[]?; .image == $i and .state == "ready"))' >/dev/null; }
wait_check "$W" "the node of pp reports d9's image pulled (with its login) before any replica" prefetched
check "the image is on the node" bash -c "$ENGINE image inspect '$REG/drover/demo:t' >/dev/null"
eq "no replica was placed for it" "$(replicas_json deployment=d9)" "[]"
PPN=$(nodes_json | jq -r '.[] | select(.nodepool == "pp") | .id')
api GET "/v1/events?kind=node&object=$PPN&limit=1000"
jqc "events say so: prefetching, then prefetched" '[.items[] | select(.type == "prefetching" or .type == "prefetched") | .type] | index("prefetched") != null' "$BODY"
api DELETE /v1/deployments/d9
check "delete d9" [ "$ST" -lt 300 ]

logs_sanitizer_clean "containers" "$TMP"/agents/*.log
t_done
