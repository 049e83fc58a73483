# shellcheck shell=bash
# bench/artifacts/fetch.bash — the fetch rows of bench/artifacts (sourced by
# bench/artifacts/run after droverd and the checkpoint node are up; uses its
# api, stop_pid, $CLI, $AGENT, $URL, $TOKEN, $TMP and appends agent pids to
# XPIDS for its cleanup). Three measures, each next to its reference from
# the same run:
#
#   cold fetch   a BENCH_COLD_MIB MiB artifact (BENCH_COLD_FILES files, 64 MiB
#                chunks) pushed to the embedded store; a replica of a model
#                naming it on the checkpoint node: the replica's fetch.seconds
#                (the agent's clock: from its ensure to the verified snapshot,
#                polled every 50 ms). Reference: max(curl -o /dev/null of the
#                same blobs from the same droverd, sha256sum of the same
#                bytes), the two things a verified fetch must do. Goal ≤ 1.15.
#   warm start   a second deployment of the same model on that node: its
#                replica's fetch.seconds per file (goal ≤ 5 ms) and the bytes
#                the head sent for it (drover_blob_bytes_sent_total; goal 0).
#   fan-out      BENCH_FAN_AGENTS agents (one replica each: a GPU apiece) want a
#                BENCH_FAN_MIB MiB artifact (16 MiB chunks) at once: the bytes
#                the head sent ÷ the artifact's size (goal ≤ 1.05) and the wall
#                time from the deployment's creation to every replica's fetch
#                done; the reference: the same with agents that have no peer
#                server (--peer-listen off), i.e. independent fetches from the
#                origin, of another artifact of the same size.

FCOLD_MIB=${BENCH_COLD_MIB:-2048}
FCOLD_FILES=${BENCH_COLD_FILES:-8}
FFAN_MIB=${BENCH_FAN_MIB:-256}
FFAN_N=${BENCH_FAN_AGENTS:-8}
for v in FCOLD_MIB FCOLD_FILES FFAN_MIB FFAN_N; do
  case "${!v}" in ''|0*|*[!0-9]*) die "$v must be a positive integer, not '${!v}'" ;; esac
done

sent_bytes() { curl -s -H "$AUTH" "$URL/metrics" | awk '/^drover_blob_bytes_sent_total / { print $2 }'; }
secs_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }

# make_tree DIR MIB FILES: FILES files of random bytes, MIB MiB in all
make_tree() {
  local d=$1 mib=$2 files=$3 i per
  mkdir -p "$d"
  per=$(( (mib << 20) / files ))
  for i in $(seq "$files"); do head -c "$per" /dev/urandom >"$d/shard-$i.bin"; done
}
# push_art DIR ID [CHUNK]: drover artifact push; prints the artifact's digest
push_art() {
  "$CLI" --server "$URL" --token "$TOKEN" artifact push "$1" --id "$2" ${3:+--chunk-size "$3"} \
    >/dev/null 2>"$TMP/push.err" || { cat "$TMP/push.err" >&2; die "pushing $2 failed"; }
  api GET "/v1/artifacts/$2" | jq -r .status.digest
}
# model_of ID ARTIFACT GPUS: a model whose process only sleeps (the fetch is what is timed)
model_of() {
  api POST /v1/models "{\"id\":\"$1\",\"artifact\":{\"id\":\"$2\"},
    \"runtime\":{\"command\":[\"sleep\",\"3600\"],\"startup_timeout_seconds\":3600},
    \"resources\":{\"gpu\":{\"count\":$3},\"cpu_millis\":10,\"memory_mib\":16}}" >/dev/null
}
# fetched DEPLOYMENT N: every one of its N replicas' fetch is done
fetched() {
  api GET "/v1/deployments/$1/replicas" | jq -e --argjson n "$2" '.items | length == $n and
    all(.[]; .status.fetch != null and .status.fetch.bytes == .status.fetch.total
             and .status.state != "fetching" and .status.state != "pending")' >/dev/null
}
wait_fetched() {   # wait_fetched DEPLOYMENT N
  for _ in $(seq 36000); do
    fetched "$1" "$2" && return 0
    api GET "/v1/deployments/$1/replicas" |
      jq -e '.items | any(.[]; .status.state == "failed")' >/dev/null &&
      die "a replica of $1 failed: $(api GET "/v1/deployments/$1/replicas" | jq -c '[.items[].status.reason]')"
    sleep 0.05
  done
  die "$1's replicas never fetched their artifact"
}
deploy() {   # deploy ID MODEL NODEPOOL N
  api POST /v1/deployments "{\"id\":\"$1\",\"model\":\"$2\",
    \"nodepools\":[{\"cluster\":\"bench\",\"nodepool\":\"$3\"}],
    \"autoscale\":{\"min_replicas\":$4,\"max_replicas\":$4}}" >/dev/null
}

echo "bench/artifacts: fetch rows: cold $FCOLD_MIB MiB in $FCOLD_FILES files, fan-out $FFAN_MIB MiB to $FFAN_N agents"
# ---- cold fetch ------------------------------------------------------------------------------
make_tree "$TMP/cold" "$FCOLD_MIB" "$FCOLD_FILES"
CDIG=$(push_art "$TMP/cold" cold)
CBYTES=$(api GET /v1/artifacts/cold | jq -r .status.total_size)
mapfile -t CHEX < <(api GET /v1/artifacts/cold | jq -r '.manifest.files[].sha256' | sort -u)
[ "${#CHEX[@]}" -gt 0 ] || die "the cold artifact lists no files"
rm -rf "$TMP/cold"
model_of mcold cold 0
s0=$(sent_bytes)
deploy cold mcold np 1
wait_fetched cold 1
COLD_S=$(api GET /v1/deployments/cold/replicas | jq -r '.items[0].status.fetch.seconds')
COLD_SENT=$(( $(sent_bytes) - s0 ))
t0=$(date +%s.%N)
for h in "${CHEX[@]}"; do
  curl -sf -o /dev/null -H "$AUTH" "$URL/v1/blobs/sha256/$h" || die "curl of blob $h failed"
done
CURL_S=$(secs_since "$t0")
t0=$(date +%s.%N)
( cd "$DATA/blobs/sha256" && sha256sum "${CHEX[@]}" >/dev/null )
SHA_S=$(secs_since "$t0")
REF_S=$(awk -v a="$CURL_S" -v b="$SHA_S" 'BEGIN { print (a > b ? a : b) }')
COLD_RATIO=$(awk -v a="$COLD_S" -v b="$REF_S" 'BEGIN { printf "%.2f", a / b }')
CURL_RATIO=$(awk -v a="$COLD_S" -v b="$CURL_S" 'BEGIN { printf "%.2f", a / b }')
COLD_MIBS=$(awk -v m="$FCOLD_MIB" -v s="$COLD_S" 'BEGIN { printf "%.0f", (s > 0 ? m / s : 0) }')
echo "  cold fetch ${COLD_S}s (${COLD_MIBS} MiB/s; head sent $COLD_SENT of $CBYTES bytes); curl ${CURL_S}s, sha256sum ${SHA_S}s: ratio $COLD_RATIO"

# ---- warm start ------------------------------------------------------------------------------
s0=$(sent_bytes)
deploy warm mcold np 1
wait_fetched warm 1
WARM_S=$(api GET /v1/deployments/warm/replicas | jq -r '.items[0].status.fetch.seconds')
WARM_SENT=$(( $(sent_bytes) - s0 ))
WARM_MS_FILE=$(awk -v s="$WARM_S" -v n="$FCOLD_FILES" 'BEGIN { printf "%.2f", 1000 * s / n }')
echo "  warm start ${WARM_S}s for $FCOLD_FILES files ($WARM_MS_FILE ms per file), head sent $WARM_SENT bytes"
api DELETE /v1/deployments/warm >/dev/null
api DELETE /v1/deployments/cold >/dev/null

# ---- fan-out ---------------------------------------------------------------------------------
# fan_round NODEPOOL ARTIFACT-ID PEERS(on|off): sets FR_S (wall seconds) and FR_SENT (bytes)
fan_round() {
  local np=$1 art=$2 peers=$3 i join pids=() t0 s0 n=0
  api POST /v1/clusters/bench/nodepools "{\"id\":\"$np\",\"instance_types\":[\"self-l4\"]}" >/dev/null
  join=$(api POST "/v1/clusters/bench/nodepools/$np/join-tokens" '{"ttl_seconds":3600,"uses":100}' | jq -r .secret)
  for i in $(seq "$FFAN_N"); do
    local extra=()
    [ "$peers" = off ] && extra=(--peer-listen off)
    "$AGENT" --server "$URL" --join-token "$join" --data-dir "$TMP/$np-$i" --gpus 1xL4:24576 \
      --cpus 2 --memory-mib 4096 --container-engine none "${extra[@]}" >"$TMP/$np-$i.log" 2>&1 &
    pids+=("$!")
    XPIDS+=("$!")
  done
  for _ in $(seq 600); do
    n=$(api GET "/v1/nodes?nodepool=$np" | jq '[.items[] | select(.status.state == "ready"
          and ('"$([ "$peers" = on ] && echo '.status.cache.peer_url != null' || echo true)"'))] | length')
    [ "$n" = "$FFAN_N" ] && break
    sleep 0.1
  done
  [ "$n" = "$FFAN_N" ] || die "only $n of $FFAN_N agents of $np became ready"
  model_of "m$np" "$art" 1
  s0=$(sent_bytes)
  t0=$(date +%s.%N)
  deploy "$np" "m$np" "$np" "$FFAN_N"
  wait_fetched "$np" "$FFAN_N"
  FR_S=$(secs_since "$t0")
  FR_SENT=$(( $(sent_bytes) - s0 ))
  api DELETE "/v1/deployments/$np" >/dev/null
  for p in "${pids[@]}"; do stop_pid "$p" 15; done
  for i in $(seq "$FFAN_N"); do rm -rf "$TMP/$np-$i"; done
}
make_tree "$TMP/fan" "$FFAN_MIB" 4
push_art "$TMP/fan" fanart 16M >/dev/null
make_tree "$TMP/ind" "$FFAN_MIB" 4
push_art "$TMP/ind" indart 16M >/dev/null
rm -rf "$TMP/fan" "$TMP/ind"
FBYTES=$(api GET /v1/artifacts/fanart | jq -r .status.total_size)
fan_round fan fanart on
FAN_S=$FR_S FAN_SENT=$FR_SENT
fan_round ind indart off
IND_S=$FR_S IND_SENT=$FR_SENT
FAN_X=$(awk -v s="$FAN_SENT" -v b="$FBYTES" 'BEGIN { printf "%.2f", s / b }')
IND_X=$(awk -v s="$IND_SENT" -v b="$FBYTES" 'BEGIN { printf "%.2f", s / b }')
FAN_RATIO=$(awk -v a="$FAN_S" -v b="$IND_S" 'BEGIN { printf "%.2f", a / b }')
echo "  fan-out with peers ${FAN_S}s, head sent ${FAN_X}x; independent ${IND_S}s, ${IND_X}x"

FETCH_ROWS=(
  "| cold fetch of $FCOLD_MIB MiB ($FCOLD_FILES files), verified into the node cache | $COLD_S s ($COLD_MIBS MiB/s) | max(curl $CURL_S s, sha256sum $SHA_S s) = $REF_S s | $COLD_RATIO (÷ curl alone: $CURL_RATIO) | ≤ 1.15 |"
  "| warm start: a second replica on the node gets its model dir | $WARM_MS_FILE ms per file ($WARM_S s for $FCOLD_FILES files; the agent's clock counts ms), $WARM_SENT bytes from the head | — | — | ≤ 5 ms per file, 0 bytes |"
  "| fan-out: $FFAN_N agents want $FFAN_MIB MiB at once, bytes the head sent | ${FAN_X} × the size | $IND_X × (independent fetches) | — | ≤ 1.05 × |"
  "| fan-out: wall time to every replica's fetch done | $FAN_S s | $IND_S s (independent fetches) | $FAN_RATIO | — |"
)
echo
echo "| row | measured | reference (same run) | ratio | goal |"
echo "|---|---|---|---|---|"
printf '%s\n' "${FETCH_ROWS[@]}"
