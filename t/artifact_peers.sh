#!/usr/bin/env bash
# artifact_peers.sh — peer fan-out of drover:// artifacts between the agents
# of one cluster (issue 14, item 6): four agents, each serving its node
# cache on a loopback port (reported as cache.peer_url), wanting one
# artifact at once (a deployment of 4 one-GPU replicas on 1-GPU nodes): the
# head names each one the others as peers and hands out peer tokens; the
# origin (drover_blob_bytes_sent_total) sends at most 1.1 x the artifact's
# distinct bytes, and each replica checks its model dir itself. A peer's
# cache server refuses a missing or wrong token and accepts the head's.
# Then a fifth node wants it while only one peer is up, and that peer dies
# mid-transfer (behind t/lib/cut_proxy.py, which cuts its connections after
# 2 MiB, while the agent is SIGKILLed): the fifth node falls back to the
# origin, its log names the peer it stopped using, and its replica sees
# exactly the pushed bytes. Last, a nodepool with prefetch: true: its new
# node fetches the artifact of the deployment placed there (from a peer)
# before any replica exists, says so in events, its status and describe.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test
LIB=$(cd "$(dirname "$0")/lib" && pwd)

PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
for np in np1 np2; do
    api POST /v1/clusters/sm/nodepools -d "{\"id\":\"$np\",\"instance_types\":[\"self-l4\"],\"min_nodes\":0,\"max_nodes\":4}"
    status "create nodepool $np" 201
    api POST "/v1/clusters/sm/nodepools/$np/join-tokens" -d '{"uses":10,"id":"t","ttl_seconds":3600}'
    status "join token for $np" 201
    declare "JOIN_$np=$(jq -r .secret <<<"$BODY")"
done

# ---- the artifact: 4 MiB + 1 MiB + a small file, 256 KiB chunks (21 of them) -----------
T=$TMP/tree
mkdir -p "$T/sub"
head -c $((4 << 20)) /dev/urandom >"$T/big.bin"
head -c $((1 << 20)) /dev/urandom >"$T/sub/mid.bin"
printf 'config v1\n' >"$T/config.txt"
(cd "$T" && sha256sum big.bin sub/mid.bin config.txt) >"$TMP/expected"
DISTINCT=$(((4 << 20) + (1 << 20) + 10))
cli artifact push "$T" --id w1 --chunk-size 262144
rc "push the tree" 0
mkdir -p "$TMP/markers"
cmd=$(jq -nc --arg s "$LIB/model_dir_check.py" --arg e "$TMP/expected" --arg m "$TMP/markers" \
      '["python3", "-S", $s, $e, $m]')
api POST /v1/models -d "{\"id\":\"m\",\"artifact\":{\"id\":\"w1\"},\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":1},\"cpu_millis\":100,\"memory_mib\":64}}"
status "create model m with artifact w1 (one whole GPU)" 201

# ---- four agents, all up and serving before anything is placed ---------------------------
for a in a1 a2 a3 a4; do
    extra=()
    if [ "$a" == a1 ]; then   # a1's peers reach it through the cut proxy (second part)
        P1=$(free_port)
        python3 -S "$LIB/cut_proxy.py" --target "127.0.0.1:$P1" --port-file "$TMP/proxy.port" \
            --pause-after $((2 << 20)) --paused-file "$TMP/paused" --go-file "$TMP/go" --arm-file "$TMP/arm" &
        _BG_PIDS+=($!)
        wait_for "the proxy" test -s "$TMP/proxy.port"
        extra=(--peer-listen "127.0.0.1:$P1" --peer-url "http://127.0.0.1:$(cat "$TMP/proxy.port")")
    fi
    start_agent "$a" --join-token "$JOIN_np1" --cache-max-gib 1 "${extra[@]}"
done
serving() {
    [ "$(nodes_json | jq '[.[] | select(.status.state == "ready" and
        (.status.cache.peer_url // "" | startswith("http://127.0.0.1:")))] | length')" == 4 ]
}
wait_check "$W" "four nodes ready, each reporting its peer cache server" serving

# the peer server: the head's token only
N2=$(nodes_json | jq -r '.[] | select(.status.cache.peer_url | test(":'"$P1"'$") | not) | .status.cache.peer_url' | head -1)
ZERO=$(printf '0%.0s' {1..64})
code=$(curl -s -o /dev/null -w '%{http_code}' "$N2/v1/cache/blobs/sha256/$ZERO")
eq "a peer cache server refuses a request without a token" "$code" 401
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer drvp_$ZERO" \
       "$N2/v1/cache/blobs/sha256/$ZERO")
eq "... and a made-up token" "$code" 401

api POST /v1/deployments -d '{"id":"d1","model":"m","nodepools":[{"cluster":"sm","nodepool":"np1"}],"autoscale":{"min_replicas":4,"max_replicas":4}}'
status "create deployment d1 (4 replicas, one per node)" 201
wait_check "$W" "d1: four replicas ready" replicas_ready d1 4
R=$(replicas_json deployment=d1)
eq "one replica per node" "$(jq -r '[.[].node] | unique | length' <<<"$R")" 4
for id in $(jq -r '.[].id' <<<"$R"); do
    eq "replica $id checked its model dir: exact and read-only" "$(cat "$TMP/markers/$id" 2>/dev/null)" ok
done
api GET /metrics
sent=$(grep '^drover_blob_bytes_sent_total ' <<<"$BODY" | awk '{print $2}')
echo "# origin bytes for 4 nodes: $sent (artifact: $DISTINCT distinct bytes)"
check "origin bytes for four nodes <= 1.1 x the artifact ($sent <= 1.1 x $DISTINCT)" \
    [ "$sent" -le $((DISTINCT * 11 / 10)) ]
check "... and at least the artifact once" [ "$sent" -ge "$DISTINCT" ]

# a peer token from a real sync answer is accepted (the head's, presented as an agent does)
CRED=$(cat "$TMP/agents/a2/credential")
api_tok() { curl -s -X POST -H "Authorization: Bearer $CRED" -H 'Content-Type: application/json' \
            -d '{"version":0,"wait_ms":0}' "$URL/v1/agent/sync"; }
PT=$(api_tok | jq -r .peer.token)
check "the sync answer carries a peer token" [ "${PT:0:5}" == drvp_ ]
BIG=$(sha256sum "$T/big.bin" | cut -d' ' -f1)
N3=$(nodes_json | jq -r '.[] | select(.status.cache.peer_url | test(":'"$P1"'$") | not) | .status.cache.peer_url' | tail -1)
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $PT" -r 0-99 \
       "$N3/v1/cache/blobs/sha256/$BIG")
eq "a peer serves a range of a blob it holds with the head's token" "$code" 206

# ---- a peer that dies mid-transfer -----------------------------------------------------------
# only a1 (behind the proxy) stays up; a fifth node on np2 wants w1
for a in a2 a3 a4; do kill -KILL "${AG_PID[$a]}"; wait "${AG_PID[$a]}" 2>/dev/null; done
api POST /v1/deployments -d '{"id":"d2","model":"m","nodepools":[{"cluster":"sm","nodepool":"np2"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d2 (1 replica, np2)" 201
before=$sent
touch "$TMP/arm"   # the proxy counts a1's bytes from now on
start_agent a5 --join-token "$JOIN_np2" --cache-max-gib 1
wait_check "$W" "a5 reads from peer a1 until the proxy pauses after 2 MiB" test -s "$TMP/paused"
kill -KILL "${AG_PID[a1]}"
wait "${AG_PID[a1]}" 2>/dev/null
touch "$TMP/go"   # the proxy cuts a1's connections: a dead node
wait_check "$W" "d2: its replica becomes ready all the same" replicas_ready d2 1
id=$(replicas_json deployment=d2 | jq -r '.[0].id')
eq "replica $id on a5 checked its model dir: exact" "$(cat "$TMP/markers/$id" 2>/dev/null)" ok
api GET /metrics
sent=$(grep '^drover_blob_bytes_sent_total ' <<<"$BODY" | awk '{print $2}')
echo "# origin bytes for a5: $((sent - before))"
check "a5 fell back to the origin for what a1 did not send" [ "$sent" -gt "$before" ]
check "... less than the whole artifact (whole chunks of the 2 MiB came from a1)" \
    [ $((sent - before)) -lt "$DISTINCT" ]
contains "a5's log names the peer it stopped using" "$(cat "$TMP/agents/a5.log")" "not asked again during this download"

# ---- nodepool prefetch: a node of np3 fetches w1 when it joins, before any replica ---------
api POST /v1/clusters/sm/nodepools -d '{"id":"np3","instance_types":["self-l4"],"min_nodes":0,"max_nodes":2,"prefetch":true}'
status "create nodepool np3 with prefetch: true" 201
jqc "the nodepool shows prefetch: true" '.prefetch == true'
api POST /v1/clusters/sm/nodepools/np3/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
JOIN3=$(jq -r .secret <<<"$BODY")
api POST /v1/deployments -d '{"id":"d3","model":"m","nodepools":[{"cluster":"sm","nodepool":"np3"}],"autoscale":{"min_replicas":0,"max_replicas":1}}'
status "create deployment d3 on np3 (no replica wanted yet)" 201
before=$sent
start_agent a6 --join-token "$JOIN3" --cache-max-gib 1
N6=
prefetched() {
    N6=$(nodes_json | jq -r '.[] | select(.nodepool == "np3") | .id' | head -1)
    [ -n "$N6" ] && [ "$(node_field "$N6" '.status.cache.prefetch[0].state')" == ready ]
}
wait_check "$W" "a6 reports w1 prefetched (cache.prefetch: ready)" prefetched ||
    why "$(node_field "$N6" .status.cache)"
eq "no replica was placed on it" "$(replicas_json deployment=d3 | jq length)" 0
DIGEST=$(api GET /v1/artifacts/w1; jq -r .status.digest <<<"$BODY")
check "its snapshot holds the pushed bytes" cmp -s "$T/big.bin" "$TMP/agents/a6/cache/snapshots/$DIGEST/big.bin"
api GET "/v1/events?kind=node&object=$N6&limit=100"
jqc "events say prefetching, then prefetched" \
    '[.items[] | select(.type == "prefetching" or .type == "prefetched") | .type] == ["prefetching", "prefetched"]
     or [.items[] | select(.type == "prefetching" or .type == "prefetched") | .type] == ["prefetched"]'
cli describe node "$N6"
rc "describe node" 0
contains "describe node shows the prefetch" "$OUT" "prefetch"
api GET /metrics
sent=$(grep '^drover_blob_bytes_sent_total ' <<<"$BODY" | awk '{print $2}')
eq "the prefetch came from peer a5: no byte from the origin" "$((sent - before))" 0

for a in a5 a6; do
    kill -TERM "${AG_PID[$a]}"
    wait "${AG_PID[$a]}"
    eq "agent $a exits 0 on SIGTERM" "$?" 0
done
logs_sanitizer_clean artifact_peers "${EXTRA_AGENT_LOGS[@]}"
droverd_finish artifact_peers
t_done
