#!/usr/bin/env bash
# predict_progress.sh — `drover predict` against a cold deployment (issue
# 14, item 4): a deployment scaled to zero whose model has a drover://
# artifact, on a nodepool with no node yet. Two predictions wait for it:
# one with --progress (stderr is no terminal here), one without. The first
# says "waiting for a node" (checked before any node exists), the node
# joins, the replica fetches and starts (its process held at a gate until
# the progress says "starting the model"), and both answers come from the
# pushed weights (the demo model's weights_sha256). The --progress lines
# come one per change, in the start's order; the other prediction's stderr
# stays empty. The deployment's cold start then splits into waiting (which
# holds the time before the node joined), fetch and load.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np1","instance_types":["self-l4"],"min_nodes":0,"max_nodes":2}'
status "create nodepool np1" 201
api POST /v1/clusters/sm/nodepools/np1/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
status "join token for np1" 201
JOIN=$(jq -r .secret <<<"$BODY")

T=$TMP/tree
mkdir -p "$T"
# 1 MiB of finite float32 weights (random bytes would hold NaNs, which the demo model cannot answer)
python3 -S -c 'import array, random, sys; array.array("f", (random.uniform(-0.1, 0.1) for _ in range(262144))).tofile(open(sys.argv[1], "wb"))' "$T/weights.bin"
WSHA=$(sha256sum "$T/weights.bin" | cut -d' ' -f1)
cli artifact push "$T" --id w --chunk-size 65536
rc "push the weights" 0
GATE=$TMP/gate
cmd=$(jq -nc --arg g "$GATE" \
      '["sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.1; done; exec drover-demo-model --layers 1", $g]')
api POST /v1/models -d "{\"id\":\"m\",\"artifact\":{\"id\":\"w\"},\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":120},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
status "create model m (demo model behind a gate, artifact w)" 201
api POST /v1/deployments -d '{"id":"d","model":"m","nodepools":[{"cluster":"sm","nodepool":"np1"}],"autoscale":{"min_replicas":0,"max_replicas":1}}'
status "create deployment d (scaled to zero)" 201

predict_bg() {   # $1: name; the rest: flags
    local n=$1
    shift
    DROVER_SERVER=$URL DROVER_TOKEN=$TOKEN "$DROVER" predict d --json '{"inputs":"hello"}' \
        --timeout 300 "$@" >"$TMP/$n.out" 2>"$TMP/$n.err" </dev/null &
    PRED_PID[$n]=$!
    _BG_PIDS+=("$!")
}
declare -A PRED_PID
predict_bg loud --progress
predict_bg quiet
# a third on a terminal (script(1)'s pty; its typescript records what the terminal got)
if command -v script >/dev/null; then
    DROVER_SERVER=$URL DROVER_TOKEN=$TOKEN script -q -e -c \
        "$DROVER predict d --json '{\"inputs\":\"hello\"}' --timeout 300" "$TMP/tty.log" \
        >/dev/null 2>&1 </dev/null &
    PRED_PID[tty]=$!
    _BG_PIDS+=("$!")
fi
says() { grep -q "$1" "$TMP/loud.err" 2>/dev/null; }
wait_check "$W" "--progress: 'waiting for a node' while no node exists" says 'waiting for a node'
one_pending() { replicas_json deployment=d | jq -e 'length == 1 and .[0].status.state == "pending"' >/dev/null; }
wait_check "$W" "the held prediction scales d up from zero: one pending replica" one_pending
RID=$(replicas_json deployment=d | jq -r '.[0].id')
JOINED_MS=$(date +%s%3N)   # the node's agent starts now: nothing is placed before
start_agent a1 --join-token "$JOIN" --peer-listen off
wait_check "$W" "--progress: 'starting the model on node' once the replica's process runs" \
    says 'starting the model on node'
touch "$GATE"
for n in loud quiet; do
    wait "${PRED_PID[$n]}"
    eq "predict ($n) exits 0" "$?" 0
    jqc "predict ($n) answers from the pushed weights" '.weights_sha256 == "'"$WSHA"'"' "$(cat "$TMP/$n.out")"
done
if [ -n "${PRED_PID[tty]:-}" ]; then
    wait "${PRED_PID[tty]}"
    eq "predict on a terminal exits 0" "$?" 0
    TTY=$(tr -d '\000' <"$TMP/tty.log")
    contains "on a terminal: the line is redrawn in place (CR, erase line)" "$TTY" $'\r\033[Kdrover: ['
    contains "... it said it waited for a node" "$TTY" "waiting for a node"
    contains "... and the line was cleared before the answer" "$TTY" $'\r\033[K{'
    contains "... the answer from the pushed weights" "$TTY" "\"weights_sha256\":\"$WSHA\""
fi
eq "without --progress and no terminal, stderr stays empty" "$(cat "$TMP/quiet.err")" ""
ERR=$(cat "$TMP/loud.err")
jqc "--progress: every line is 'drover: [Ns] ...'" \
    'split("\n") | map(select(length > 0)) | length > 0 and all(.[]; test("^drover: \\[[0-9]+s\\] "))' \
    "$(jq -Rs . <<<"$ERR")"
# the phases in order: waiting (0) < fetching (1) < starting (2) < ready (3); one line per change
phases=$(sed -e 's/^drover: \[[0-9]*s\] //' "$TMP/loud.err" | awk '
    /^waiting for a node|^placed on node/ {print 0; next}
    /^fetching the model on node/ {print 1; next}
    /^starting the model|^the model.s process exited/ {print 2; next}
    /^a replica is ready/ {print 3; next}
    {print "?"}')
eq "--progress: every line is a known phase" "$(grep -c '?' <<<"$phases")" 0
eq "--progress: the phases never go back" "$(sort -n <<<"$phases" | tr '\n' ' ')" "$(tr '\n' ' ' <<<"$phases")"
eq "--progress: no line repeats the one before (one per change)" \
    "$(sed -e 's/^drover: \[[0-9]*s\] //' "$TMP/loud.err" | uniq -d | wc -l)" 0

wait_check "$W" "d: its replica is ready" replicas_ready d 1
R=$(replicas_json deployment=d)
eq "the replica that waited is the one that started" "$(jq -r '.[0].id' <<<"$R")" "$RID"
jqc "its timeline: created before the node existed, placed after" \
    '.[0].status.timeline | .created_ms < '"$JOINED_MS"' and .placed_ms >= '"$JOINED_MS" "$R"
jqc "its cold start: waiting (from creation to the node's first step) + fetch + load = total" \
    '.[0].status.cold_start as $c | .[0].status.timeline as $t
     | $c.waiting_seconds * 1000 >= ($t.placed_ms - $t.created_ms) - 1 and $c.load_seconds > 0
     and (($c.waiting_seconds + $c.fetch_seconds + $c.load_seconds - $c.total_seconds) | fabs) < 0.002' "$R"

kill -TERM "${AG_PID[a1]}"
wait "${AG_PID[a1]}"
eq "agent exits 0 on SIGTERM" "$?" 0
logs_sanitizer_clean predict_progress "${EXTRA_AGENT_LOGS[@]}"
droverd_finish predict_progress
t_done
