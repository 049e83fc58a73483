#!/usr/bin/env bash
# scale_down_drain.sh — a scale-down loses no request: a deployment of 3
# replicas (drover-demo-model's LLM emulator, each answer a stream of about
# 4 s) has 12 streamed completions in flight when it is scaled down to 1
# (PATCH min/max); more are sent while it goes down. Every one of them
# must end whole (200, the last chunk and "data: [DONE]"): the gateway
# stops routing to the victims at once (they leave its table in the pass
# that deletes them), and a victim's server, on its SIGTERM, stops
# accepting and finishes what it holds before it exits (the agent's
# SIGKILL only follows after stop_grace). Real droverd + drover-agent +
# drover-demo-model processes on loopback.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

droverd_start "$TMP/d" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np","instance_types":["local-cpu"],"min_nodes":1,"max_nodes":1}'
status "create nodepool (1 local-cpu node)" 201
# 40 tokens at 10 per second: about 4 s a request, the first chunk at once
api POST /v1/models -d '{"id":"llm","runtime":{"command":["drover-demo-model","--weights-mib","1","--prefill-tps","100000","--decode-tps","10"],"predict_path":"/v1/completions"},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model llm (the LLM emulator, 10 tokens/s)" 201
api POST /v1/deployments -d '{"id":"d","model":"llm","nodepools":[{"cluster":"c1","nodepool":"np"}],"autoscale":{"min_replicas":3,"max_replicas":3}}'
status "create deployment d (3 replicas)" 201
wait_check "$W" "3 replicas of d are ready" deployment_ready d 3

# streams N TAG: N streamed completions through the gateway, in the
# background; each one's status in $TMP/TAG.I.code, its body in $TMP/TAG.I
CURLS=()
streams()
{
    local i
    for ((i = 0; i < $1; i++)); do
        curl -s -N -m 60 -o "$TMP/$2.$i" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
            -H 'Content-Type: application/json' \
            -d '{"prompt":"hello","max_tokens":40,"stream":true}' \
            "$URL/v1/deployments/d/predict" >"$TMP/$2.$i.code" &
        _BG_PIDS+=("$!")
        CURLS+=("$!")
    done
}
in_flight_is() { curl -s -H "Authorization: Bearer $TOKEN" "$URL/metrics" | grep -qF "drover_gateway_in_flight{owner=\"admin\",deployment=\"d\"} $1"; }

streams 12 a
wait_check "$W" "12 streams in flight on the gateway" in_flight_is 12
api PATCH /v1/deployments/d -d '{"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "scale d down to 1 while they run" 200
streams 6 b   # and more while it goes down
one_left() { [ "$(replicas_json deployment=d | jq length)" == 1 ]; }
wait_check "$W" "d is down to 1 replica (the victims deleted)" one_left
wait "${CURLS[@]}"   # each ends by itself (-m 60 at most)

whole() # TAG I: 200, 40 tokens and [DONE]
{
    [ "$(cat "$TMP/$1.$2.code" 2>/dev/null)" == 200 ] &&
        [ "$(grep -c '^data: {' "$TMP/$1.$2")" -ge 40 ] &&
        grep -q '"finish_reason":"length"' "$TMP/$1.$2" &&
        grep -q '^data: \[DONE\]' "$TMP/$1.$2"
}
bad=""
for i in $(seq 0 11); do whole a "$i" || bad+=" a.$i($(cat "$TMP/a.$i.code"))"; done
for i in $(seq 0 5); do whole b "$i" || bad+=" b.$i($(cat "$TMP/b.$i.code"))"; done
eq "every stream (12 in flight at the scale-down, 6 sent during it) ends whole" "${bad:-none}" none
if [ -n "$bad" ]; then
    for f in $bad; do why "${f%%(*} ends: $(tail -c 200 "$TMP/${f%%(*}")"; done
    dump_workers
fi
# ---- a replica gone with requests still in its accept queue -----------------
# A server that closes its listener (stopping, or killed) resets the
# connections the kernel had queued for it: those requests never ran, and
# the gateway sends them to another replica (a reset before a byte of the
# answer, soon after the request went out). Here replica A is stopped
# (SIGSTOP: the kernel still completes connects, nothing is read), requests
# are sent, A is killed while some sit in its queue, and every one ends 200.
api POST /v1/models -d '{"id":"plain","runtime":{"command":["drover-demo-model","--weights-mib","1"]},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model plain" 201
api POST /v1/deployments -d '{"id":"q","model":"plain","nodepools":[{"cluster":"c1","nodepool":"np"}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
status "create deployment q (2 replicas)" 201
wait_check "$W" "2 replicas of q are ready" deployment_ready q 2
queued_rounds=0 lost=""
for round in 1 2 3; do
    read -r A APORT < <(replicas_json deployment=q |
        jq -r '[.[] | select(.status.state == "ready")][0] | "\(.status.pid) \(.status.endpoint | sub(".*:"; ""))"')
    [ -n "$A" ] && [ "$A" != null ] || break
    kill -STOP "$A"
    PIDS=()
    for i in 0 1 2 3 4 5; do
        curl -s -m 30 -o "$TMP/q.$round.$i" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
            -H 'Content-Type: application/json' -d '{"inputs":"hello"}' \
            "$URL/v1/deployments/q/predict" >"$TMP/q.$round.$i.code" &
        PIDS+=("$!")
        _BG_PIDS+=("$!")
    done
    # A's listener's accept queue (ss: Recv-Q of a listening socket) holds
    # one, or every request was answered (none went to A this round)
    a_queued() { [ "$(ss -Hltn "sport = :$APORT" | awk '{ print $2; exit }')" -ge 1 ] 2>/dev/null; }
    all_answered() { local p; for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
    wait_until "$W" "a request in A's accept queue, or every request answered" eval 'a_queued || all_answered'
    stuck=0
    a_queued && stuck=1
    kill -KILL "$A"
    kill -CONT "$A" 2>/dev/null
    wait "${PIDS[@]}"
    [ "$stuck" -gt 0 ] && queued_rounds=$((queued_rounds + 1))
    for i in 0 1 2 3 4 5; do
        [ "$(cat "$TMP/q.$round.$i.code")" == 200 ] || lost+=" $round.$i($(cat "$TMP/q.$round.$i.code"): $(head -c 200 "$TMP/q.$round.$i"))"
    done
    [ "$queued_rounds" -gt 0 ] && break
    wait_until "$W" "2 replicas of q are ready again" deployment_ready q 2
done
eq "some requests sat in the killed replica's accept queue (rounds that had some)" "$((queued_rounds > 0))" 1
eq "every request ends 200 (those in the killed replica's queue through the other one)" "${lost:-none}" none

droverd_finish scale_down_drain
t_done
