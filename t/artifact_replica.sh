#!/usr/bin/env bash
# artifact_replica.sh — replicas of a model with a drover:// artifact (issue
# 14, items 3 and 4): `drover artifact push` of a small tree (one file over
# several 4 KiB chunks, a repeated content); a deployment of 2 replicas on
# one self-managed node: each goes fetching -> starting -> ready, sees
# exactly the pushed bytes, read-only, in its DROVER_MODEL_DIR (the model,
# t/lib/model_dir_check.py, checks them itself and is healthy only then);
# the head sends each distinct blob's bytes once (drover_blob_bytes_sent_total
# on /metrics); the node reports fetch times and the artifact it holds. Then
# one byte flipped in a blob on the head's disk and a new node: its replica
# fails with the cache's reason naming the chunk, an event says so, and no
# process ever starts.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test
LIB=$(cd "$(dirname "$0")/lib" && pwd)

PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
for np in np1 np2; do
    api POST /v1/clusters/sm/nodepools -d "{\"id\":\"$np\",\"instance_types\":[\"self-l4\"],\"min_nodes\":0,\"max_nodes\":2}"
    status "create nodepool $np" 201
done
api POST /v1/clusters/sm/nodepools/np1/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
status "join token for np1" 201
JOIN1=$(jq -r .secret <<<"$BODY")
api POST /v1/clusters/sm/nodepools/np2/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
status "join token for np2" 201
JOIN2=$(jq -r .secret <<<"$BODY")

# ---- the artifact: big.bin spans 5 chunks of 4 KiB, a.txt twice --------------------------
T=$TMP/tree
mkdir -p "$T/sub"
head -c 20000 /dev/urandom >"$T/big.bin"
printf 'weights v1\n' >"$T/a.txt"
printf 'weights v1\n' >"$T/sub/same.txt"
head -c 5000 /dev/urandom >"$T/sub/other.bin"
(cd "$T" && sha256sum big.bin a.txt sub/same.txt sub/other.bin) >"$TMP/expected"
DISTINCT=$((20000 + 11 + 5000))   # bytes of the distinct blobs
cli artifact push "$T" --id w1 --chunk-size 4096
rc "push the tree" 0
mkdir -p "$TMP/markers"

cmd=$(jq -nc --arg s "$LIB/model_dir_check.py" --arg e "$TMP/expected" --arg m "$TMP/markers" \
      '["python3", "-S", $s, $e, $m]')
api POST /v1/models -d "{\"id\":\"m\",\"artifact\":{\"id\":\"w1\"},\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
status "create model m with artifact w1" 201
api POST /v1/deployments -d '{"id":"d1","model":"m","nodepools":[{"cluster":"sm","nodepool":"np1"}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
status "create deployment d1 (2 replicas, np1)" 201

# ---- two replicas on one node: one download ---------------------------------------------------
# (no peer cache server: the corrupted origin below must be a2's only source;
# t/artifact_peers.sh covers peers)
start_agent a1 --join-token "$JOIN1" --cache-max-gib 1 --peer-listen off
wait_check "$W" "d1: both replicas ready" replicas_ready d1 2
R=$(replicas_json deployment=d1)
eq "both on one node" "$(jq -r '[.[].node] | unique | length' <<<"$R")" 1
jqc "each reports its fetch: the artifact's bytes, all done, a time" \
    'all(.[]; .status.fetch.total == '"$DISTINCT"' and .status.fetch.bytes == .status.fetch.total
          and (.status.fetch.seconds | type) == "number")' "$R"
for id in $(jq -r '.[].id' <<<"$R"); do
    eq "replica $id checked its model dir: exact and read-only" "$(cat "$TMP/markers/$id" 2>/dev/null)" ok
done
api GET /metrics
sent=$(grep '^drover_blob_bytes_sent_total ' <<<"$BODY" | awk '{print $2}')
eq "the head sent each distinct blob's bytes once" "$sent" "$DISTINCT"
NODE1=$(jq -r '.[0].node' <<<"$R")
DIGEST=$(api GET /v1/artifacts/w1; jq -r .status.digest <<<"$BODY")
TOTAL=$((20000 + 11 + 11 + 5000))   # the artifact's size (a.txt's content twice)
holds() { [ "$(node_field "$NODE1" '.status.cache | "\(.held_bytes) \(.artifacts | map(select(.digest == "'"$DIGEST"'")) | .[0].bytes)"')" == "$DISTINCT $TOTAL" ]; }
wait_check "$W" "node status: the cache holds the distinct bytes, lists the artifact (digest, size)" holds ||
    why "$(node_field "$NODE1" .status.cache)"
SNAP=$TMP/agents/a1/cache/snapshots/$DIGEST
cmp -s "$T/big.bin" "$SNAP/big.bin" && ok "the snapshot's big.bin is the pushed bytes" ||
    fail "the snapshot's big.bin is the pushed bytes"
cli get replicas
rc "get replicas" 0
contains "get replicas has a FETCH column" "$OUT" "FETCH"
cli describe replica "d1/$(jq -r '.[0].id' <<<"$R")"
rc "describe replica" 0
contains "describe replica shows the fetch time" "$OUT" "seconds:"
contains "describe replica splits the cold start" "$OUT" "waiting for a node"
contains "... with its timeline" "$OUT" "process started"

# ---- cold starts: each replica's timeline and its split (state/timeline.h) -------------------
R=$(replicas_json deployment=d1)
jqc "each replica's timeline is in order: created <= placed <= (fetch started <=) process started <= ready" \
    'all(.[]; .status.timeline as $t | $t.created_ms > 0 and $t.placed_ms >= $t.created_ms
          and ($t.fetch_started_ms // $t.placed_ms) >= $t.placed_ms
          and $t.process_started_ms >= ($t.fetch_started_ms // $t.placed_ms)
          and $t.ready_ms >= $t.process_started_ms)' "$R"
jqc "at least one replica was seen fetching" 'any(.[]; .status.timeline.fetch_started_ms > 0)' "$R"
jqc "each cold start splits into waiting + fetch + load = total, placement within waiting" \
    'all(.[]; .status.cold_start as $c | $c != null
          and (($c.waiting_seconds + $c.fetch_seconds + $c.load_seconds - $c.total_seconds) | fabs) < 0.002
          and $c.placement_seconds <= $c.waiting_seconds
          and $c.total_seconds == (.status.timeline.ready_ms - .status.timeline.created_ms) / 1000)' "$R"
R0=$(jq -r '.[0].id' <<<"$R")
cli -o json describe replica "d1/$R0"
jqc "describe replica -o json carries the split" '.status.cold_start.fetch_seconds >= 0 and .status.timeline.ready_ms > 0' "$OUT"
cli describe deployment d1
rc "describe deployment" 0
contains "describe deployment has a Cold starts table" "$OUT" "Cold starts"
contains "... naming the replica" "$OUT" "$R0"
contains "... with the split's columns" "$OUT" "WAITING"
cli -o json describe deployment d1
jqc "describe deployment -o json: status.cold_starts, one per replica, with the split" \
    '(.status.cold_starts | length) == 2 and all(.status.cold_starts[];
        (.replica | type) == "string" and (.waiting_seconds | type) == "number"
        and (.fetch_seconds | type) == "number" and (.load_seconds | type) == "number")' "$OUT"

# ---- the sync answer carries each manifest once per node (by digest) -------------------------
CRED=$(cat "$TMP/agents/a1/credential")
sync_as_a1() {   # $1: the report's JSON
    curl -s -H "Authorization: Bearer $CRED" -H 'Content-Type: application/json' \
        -d "$1" "$URL/v1/agent/sync"
}
FULL=$(sync_as_a1 '{"version":0}')
REFS=$(sync_as_a1 '{"version":0,"manifest_refs":true}')
jqc "without manifest_refs: the manifest in each of the 2 replicas' artifact" \
    '[.replicas[].artifact.manifest.digest] == ["'"$DIGEST"'", "'"$DIGEST"'"] and .manifests == null' "$FULL"
jqc "with manifest_refs: once, by digest, and each artifact names it" \
    '(.manifests | keys) == ["'"$DIGEST"'"] and all(.replicas[]; .artifact.manifest == null
        and .artifact.manifest_digest == "'"$DIGEST"'")' "$REFS"
if jqq -n --argjson full "$FULL" --argjson r "$REFS" \
    '[$r.replicas[] | .artifact.manifest = $r.manifests[.artifact.manifest_digest]
      | .artifact |= del(.manifest_digest)] == $full.replicas'; then
    ok "... and putting the manifest back gives the same desired set"
else
    fail "... and putting the manifest back gives the same desired set"
fi
MLEN=$(jq -c '.replicas[0].artifact.manifest' <<<"$FULL" | wc -c)
# saved: one of the two manifests, less two "manifest_digest" references and the map's key (< 300 bytes)
eq "the answer shrinks by a manifest less the references (${#FULL} -> ${#REFS} bytes; a manifest is $MLEN)" \
    "$(( ${#FULL} - ${#REFS} > MLEN - 300 ))" 1
check "d1 is still ready after the extra syncs" replicas_ready d1 2

# ---- a corrupted blob at the origin, a new node: failed, never started ------------------------
BIG=$(sha256sum "$T/big.bin" | cut -d' ' -f1)
B=$DDIR/blobs/sha256/$BIG
chmod u+w "$B"
python3 -S - "$B" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(9000)   # in chunk 2
    b = f.read(1)
    f.seek(9000)
    f.write(bytes([b[0] ^ 0xFF]))
PY
api POST /v1/deployments -d '{"id":"d2","model":"m","nodepools":[{"cluster":"sm","nodepool":"np2"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d2 (1 replica, np2)" 201
start_agent a2 --join-token "$JOIN2"
failed_reason() {
    api GET "/v1/events?kind=deployment&object=d2&limit=1000"
    jq -e '.items | map(select(.type == "replica_failed")) | length > 0' <<<"$BODY" >/dev/null
}
wait_check "$W" "d2: an event says its replica failed" failed_reason
jqc "the event's reason names the blob's chunk 2 and the mismatch" \
    '.items | map(select(.type == "replica_failed")) | .[0].reason |
     test("chunk 2") and test("'"$BIG"'") and test("fetching the artifact failed")'
R2=$(replicas_json deployment=d2)
jqc "d2's replicas: failed (or fetching a retry), none ever ready" \
    'all(.[]; .status.state != "ready" and .status.state != "starting")' "$R2"
started=0
for id in $(replicas_json | jq -r '.[] | select(.deployment == "d2") | .id'); do
    [ -e "$TMP/markers/$id" ] && started=1
done
eq "no d2 process ever started (no marker)" "$started" 0
grep -q "starting on port" "$TMP"/agents/a2/replicas/*/stdout.log 2>/dev/null && started=1
eq "a2's replica logs show no start" "$started" 0
check "d1 is still ready" replicas_ready d1 2

# ---- backoff: a2's desired set changes (a replica without artifact comes and goes) while its
# failed artifact stays in the set: one retry at the first change, none at the next ones ------
api POST /v1/models -d '{"id":"plain","runtime":{"command":["sleep","600"],"startup_timeout_seconds":600},"resources":{"gpu":{"count":0},"cpu_millis":100,"memory_mib":64}}'
status "create model plain (no artifact)" 201
metric_sent() { api GET /metrics; grep '^drover_blob_bytes_sent_total ' <<<"$BODY" | awk '{print $2}'; }
d3_on_a2() { [ "$(replicas_json deployment=d3 | jq -r '.[0].status.state // ""')" == starting ]; }
d3_gone() { [ "$(replicas_json deployment=d3 | jq length)" == 0 ]; }
change() {   # $1: create | delete
    if [ "$1" == create ]; then
        api POST /v1/deployments -d '{"id":"d3","model":"plain","nodepools":[{"cluster":"sm","nodepool":"np2"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
        wait_until "$W" "d3's replica starting on a2" d3_on_a2
    else
        api DELETE /v1/deployments/d3
        wait_until "$W" "d3 gone" d3_gone
    fi
}
change create
retried() { grep -q "trying again (retry 1;" "$TMP/agents/a2.log"; }
wait_check "$W" "the first change of a2's set retries the failed artifact once (agent log)" retried
change delete   # (also backed off; by now the retry's download has failed again)
s1=$(metric_sent)
for c in create delete; do change $c; done
wait_until "$W" "a2 reports d3 gone" d3_gone
s2=$(metric_sent)
eq "the next changes fetch no byte of it again (backoff)" "$((s2 - s1))" 0
eq "... and log no second retry" "$(grep -c 'trying again (retry 2;' "$TMP/agents/a2.log")" 0

# ---- the agents stop cleanly (their replicas and the cache's fetchers with them) ---------------
for a in a1 a2; do
    kill -TERM "${AG_PID[$a]}"
    wait "${AG_PID[$a]}"
    eq "agent $a exits 0 on SIGTERM" "$?" 0
done
logs_sanitizer_clean artifact_replica "${EXTRA_AGENT_LOGS[@]}"
droverd_finish artifact_replica
t_done
