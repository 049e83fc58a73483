#!/usr/bin/env bash
# ha_blobs.sh — blobs and checkpoints across heads (issue 17): two heads on
# one PostgreSQL, no shared file system. An artifact pushed to the leader
# and a checkpoint committed there are copied by the standby in the
# background (head/blob_sync.c: signed head-to-head URLs, sha256 checked);
# the leader SIGKILLed, the new leader lists the checkpoint and serves its
# bytes, and an agent with an empty cache fetches the artifact from it (its
# replica checks every byte). A head that lacks a blob answers a node's
# read with a 307 to a head that has it (a signed URL that a wrong
# signature or an unsigned request cannot use). A push is answered only once
# the standby holds its blobs: SIGKILLed right after, the new leader serves
# it. `drover predict` and
# `drover artifact push` given a standby or a dead head first move on, and
# a push whose leader is SIGKILLed mid-way asks the heads again and ends.
. "$(dirname "$0")/lib/common.bash"
# shellcheck source=lib/pg.bash
. "$DROVER_SRC/t/lib/pg.bash"
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 600000}'
workers_init
W=${T_WAIT:-90}
LIB=$(cd "$(dirname "$0")/lib" && pwd)

# shellcheck source=lib/heads.bash
. "$DROVER_SRC/t/lib/heads.bash"
two_heads hab

api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
for np in np1 np2; do
    api POST /v1/clusters/sm/nodepools -d "{\"id\":\"$np\",\"instance_types\":[\"self-l4\"],\"min_nodes\":0,\"max_nodes\":1}"
    status "create nodepool $np" 201
done
join() { api POST "/v1/clusters/sm/nodepools/$1/join-tokens" -d '{"ttl_seconds":3600}'; jq -r .secret <<<"$BODY"; }
JOIN1=$(join np1)
JOIN2=$(join np2)

# ---- on the leader: an artifact pushed, a checkpoint committed -------------------------------
T=$TMP/tree
mkdir -p "$T/sub"
head -c 20000 /dev/urandom >"$T/big.bin"
printf 'weights v1\n' >"$T/a.txt"
head -c 5000 /dev/urandom >"$T/sub/other.bin"
(cd "$T" && sha256sum big.bin a.txt sub/other.bin) >"$TMP/expected"
cli artifact push "$T" --id w1 --chunk-size 4096
rc "push artifact w1 to the leader" 0
HEXES=$(awk '{print $1}' "$TMP/expected")
BIG=$(awk '$2 == "big.bin" {print $1}' "$TMP/expected")

CTL=$TMP/control
MARK=$TMP/marks
mkdir -p "$MARK" "$TMP/markers"
# replicas run as the unprivileged replica user once $TMP is reachable (pg.bash
# opens it for the postgres user): they write their marks here
chmod 1777 "$MARK" "$TMP/markers"
: >"$CTL"
cmd=$(jq -nc --arg s "$LIB/ckpt_workload.py" --arg c "$CTL" --arg m "$MARK" '["python3", "-S", $s, $c, $m]')
api POST /v1/models -d "{\"id\":\"c\",\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
status "create model c (checkpoints)" 201
api POST /v1/deployments -d '{"id":"dck","model":"c","nodepools":[{"cluster":"sm","nodepool":"np1"}],"autoscale":{"min_replicas":1,"max_replicas":1},"checkpoint":{"keep":2}}'
status "create deployment dck (checkpoint keep 2)" 201
api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","2"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000,"compute_percent":25},"cpu_millis":500,"memory_mib":512}}'
status "create model demo" 201
api POST /v1/deployments -d '{"id":"demo","model":"demo","nodepools":[{"cluster":"sm","nodepool":"np1"}],"autoscale":{"min_replicas":1}}'
status "create deployment demo" 201
start_agent n1 --server "${HURL[a]},${HURL[b]}" --join-token "$JOIN1"
wait_check "$W" "dck's replica is ready" replicas_ready dck 1
wait_check "$W" "demo's replica is ready" replicas_ready demo 1

# ---- predict and artifact push given a standby first ---------------------------------------
URL="${HURL[b]},${HURL[a]}" cli predict demo --json '{"inputs":"ha"}'
rc "drover --server STANDBY,LEADER predict: moves on to the leader" 0
T2=$TMP/tree2
mkdir -p "$T2"
head -c 9000 /dev/urandom >"$T2/x.bin"
URL="${HURL[b]},${HURL[a]}" cli artifact push "$T2" --id w2 --chunk-size 4096
rc "drover --server STANDBY,LEADER artifact push: moves on to the leader" 0
api GET /v1/artifacts/w2
status "... w2 is on the leader" 200
printf 'c1 0.25\n' >"$CTL"
SCOPE=deployment:dck:0
c1_on() { URL=${HURL[$1]} api GET "/v1/checkpoints/$SCOPE"; jqq '[.items[].name] == ["c1"]' <<<"$BODY"; }
wait_check "$W" "c1 committed on the leader" c1_on a
DIGEST=$(api GET "/v1/checkpoints/$SCOPE"; jq -r '.items[0].digest' <<<"$BODY")
held_ckpt() { grep -q "blob sync: ${HURL[b]} holds the checkpoint of admin" "$TMP/a/droverd.log"; }
wait_check "$W" "the leader answered c1's commit once the standby held it" held_ckpt
held_n=$(curl -s -H "Authorization: Bearer $TOKEN" "${HURL[a]}/metrics" |
         awk '$1 == "drover_head_uploads_total{replication=\"held\"}" {print $2}')
check "... /metrics counts the uploads answered held ($held_n)" [ "${held_n:-0}" -ge 1 ]

# ---- the standby copies them --------------------------------------------------------------------
REC=$TMP/b/blobs/checkpoints/admin/$SCOPE/c1.json
b_has_all()
{
    local h
    for h in $HEXES; do [ -s "$TMP/b/blobs/sha256/$h" ] || return 1; done
    [ -s "$REC" ] || return 1
    for h in $(jq -r '.manifest.files[].sha256' "$REC"); do [ -e "$TMP/b/blobs/sha256/$h" ] || return 1; done
}
wait_check "$W" "the standby copied w1's blobs and checkpoint c1 (its blobs first)" b_has_all
bytes_ok=0
for h in $HEXES; do
    [ "$(sha256sum <"$TMP/b/blobs/sha256/$h" | cut -d' ' -f1)" == "$h" ] && bytes_ok=$((bytes_ok + 1))
done
eq "every blob the standby holds has the sha256 it is named by" "$bytes_ok" 3
check "... it logged the copies" grep -q "blob sync: copied checkpoint $SCOPE/c1 of admin" "$TMP/b/droverd.log"

# the head-to-head routes want the heads' signature
code=$(curl -s -o /dev/null -w '%{http_code}' "${HURL[b]}/v1/heads/blobs/sha256/$BIG")
eq "an unsigned head-to-head read: 401" "$code" 401
code=$(curl -s -o /dev/null -w '%{http_code}' "${HURL[b]}/v1/heads/checkpoints?expires=9999999999&sig=$(printf '0%.0s' {1..64})")
eq "a forged signature: 403" "$code" 403

# ---- a push acknowledged only once the standby holds it (semi-synchronous) --------------------
# the leader answers the create once b holds every blob, sha256 checked
# (POST /v1/heads/replicate); then SIGKILL at once: b serves it
T5=$TMP/tree5
mkdir -p "$T5"
head -c 300000 /dev/urandom >"$T5/last.bin"
W5=$(sha256sum <"$T5/last.bin" | cut -d' ' -f1)
cli -o json artifact push "$T5" --id w5 --chunk-size 65536
kill -KILL "${HPID[a]}"
rc "push w5 to the leader, SIGKILLed right after its 2xx" 0
jqc "... its answer: a standby holds it" '.replication == "held"' "$OUT"
check "... b held w5's blob when the leader answered (bytes verified)" \
    [ "$(sha256sum <"$TMP/b/blobs/sha256/$W5" 2>/dev/null | cut -d' ' -f1)" == "$W5" ]

# ---- SIGKILL of the leader --------------------------------------------------------------------
wait "${HPID[a]}" 2>/dev/null
wait_for "b to lead" is_role b leader
eq "b leads" "$(role_of b)" leader
URL=${HURL[b]}
check "the new leader lists checkpoint c1" c1_on b
api GET "/v1/checkpoints/$SCOPE"
eq "... with the digest it had on the old leader" "$(jq -r '.items[0].digest' <<<"$BODY")" "$DIGEST"
served=0 want=0
for h in $(jq -r '.manifest.files[].sha256' "$REC" | sort -u); do
    want=$((want + 1))
    curl -s -o "$TMP/blob.out" -H "Authorization: Bearer $TOKEN" "$URL/v1/blobs/sha256/$h"
    [ "$(sha256sum <"$TMP/blob.out" | cut -d' ' -f1)" == "$h" ] && served=$((served + 1))
done
check "the new leader serves every blob of c1, bytes verified ($served of $want)" [ "$served" == "$want" -a "$want" -gt 0 ]
curl -s -o "$TMP/w5.out" -H "Authorization: Bearer $TOKEN" "$URL/v1/blobs/sha256/$W5"
eq "the new leader serves w5, pushed right before the SIGKILL (bytes verified)" \
    "$(sha256sum <"$TMP/w5.out" | cut -d' ' -f1)" "$W5"
api GET /v1/artifacts/w5
status "... and lists it" 200

cmd=$(jq -nc --arg s "$LIB/model_dir_check.py" --arg e "$TMP/expected" --arg m "$TMP/markers" \
      '["python3", "-S", $s, $e, $m]')
api POST /v1/models -d "{\"id\":\"m\",\"artifact\":{\"id\":\"w1\"},\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
status "create model m with artifact w1 on the new leader" 201
api POST /v1/deployments -d '{"id":"dw","model":"m","nodepools":[{"cluster":"sm","nodepool":"np2"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment dw (np2)" 201
start_agent n2 --server "${HURL[a]},${HURL[b]}" --join-token "$JOIN2" --peer-listen off
wait_check "$W" "dw's replica, on a fresh node, is ready" replicas_ready dw 1
RID=$(replicas_json deployment=dw | jq -r '.[0].id')
eq "its replica checked the artifact fetched from the new leader: every byte" \
    "$(cat "$TMP/markers/$RID" 2>/dev/null)" ok

predicts() { URL="${HURL[a]},${HURL[b]}" cli predict demo --json '{"inputs":"ha"}'; [ "$RC" == 0 ]; }
wait_for "a predict through DEAD,NEW-LEADER to answer" predicts
check "drover --server DEAD,NEW-LEADER predict: moves on past the dead head" predicts
URL="${HURL[a]},${HURL[b]}" cli artifact push "$T" --id w3 --chunk-size 4096
rc "drover --server DEAD,NEW-LEADER artifact push (w1's tree again as w3)" 0
contains "... sends nothing: the copied blobs are held by their owner on the new leader" "$OUT" " 0 B sent"

# ---- a head that lacks a blob: 307 to one that has it --------------------------------------
head_start a   # back, as a standby, with its blobs
wait_for "a to stand by" is_role a standby
eq "the old leader came back as a standby" "$(role_of a)" standby
a_listed() { api GET /v1/status; jqq "any(.heads[]; .url == \"${HURL[a]}\" and .role == \"standby\")" <<<"$BODY"; }
wait_for "b's roster to list a" a_listed
try_307()
{
    rm -f "$TMP/b/blobs/sha256/$BIG"
    curl -s -o /dev/null -D "$TMP/h307" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
        "$URL/v1/blobs/sha256/$BIG" | grep -q 307
}
wait_for "a read on b of a blob it lacks to be answered 307" try_307
check "b answers 307 for a blob it lacks" grep -q '^HTTP/1.1 307' "$TMP/h307"
LOC=$(grep -i '^location:' "$TMP/h307" | tr -d '\r' | cut -d' ' -f2)
contains "... to a's signed head-to-head URL" "$LOC" "${HURL[a]}/v1/heads/blobs/sha256/$BIG?expires="
curl -s -o "$TMP/via" "$LOC"
eq "that URL gives the blob's bytes, without a token" "$(sha256sum <"$TMP/via" | cut -d' ' -f1)" "$BIG"
code=$(curl -s -o /dev/null -w '%{http_code}' "${LOC%?}0")
[ "${LOC: -1}" == 0 ] && code=$(curl -s -o /dev/null -w '%{http_code}' "${LOC%?}1")
eq "... and with its signature changed: 403" "$code" 403
wait_for "b to copy the blob back" test -s "$TMP/b/blobs/sha256/$BIG"
eq "b copied it back, bytes verified" "$(sha256sum <"$TMP/b/blobs/sha256/$BIG" | cut -d' ' -f1)" "$BIG"

# ---- artifact push across a failover: SIGKILL of the leader mid-push -----------------------
T4=$TMP/tree4
mkdir -p "$T4"
head -c $((32 << 20)) /dev/urandom >"$T4/big.bin"
DROVER_SERVER="${HURL[b]},${HURL[a]}" DROVER_TOKEN=$TOKEN "$DROVER" artifact push "$T4" --id w4 \
    --chunk-size 65536 --parallel 1 >"$TMP/push4.out" 2>&1 &
PP=$!
under_way() { [ -n "$(ls "$TMP/b/blobs/partial/admin/" 2>/dev/null)" ]; }
wait_for "the push to b to be under way" under_way
kill -KILL "${HPID[b]}"
wait "${HPID[b]}" 2>/dev/null
wait "$PP"
PRC=$?
eq "a push whose leader was SIGKILLed mid-way ends well (exit 0)" "$PRC" 0
[ "$PRC" == 0 ] || why "$(cat "$TMP/push4.out")"
check "... it asked the heads again" grep -q "went away or stands by; asking the heads again" "$TMP/push4.out"
URL=${HURL[a]}
api GET /v1/artifacts/w4
status "... and the artifact is on the new leader" 200
eq "... whole: its blob's bytes verify" \
    "$(sha256sum <"$TMP/a/blobs/sha256/$(sha256sum <"$T4/big.bin" | cut -d' ' -f1)" 2>/dev/null | cut -d' ' -f1)" \
    "$(sha256sum <"$T4/big.bin" | cut -d' ' -f1)"

kill -TERM "${HPID[a]}" 2>/dev/null
wait "${HPID[a]}" 2>/dev/null
eq "head a stops cleanly" "$?" 0
logs_sanitizer_clean "heads and agents" "$TMP"/{a,b}/droverd.log "$TMP"/agents/n{1,2}.log
t_done
