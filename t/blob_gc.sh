#!/usr/bin/env bash
# blob_gc.sh — garbage collection of the head's blob store (store/blobs_gc.c,
# head/blob_gc.c), with a 1 s interval and no grace period: blobs that an
# artifact or an unfinished upload names stay; once no artifact names
# them, their owners/ markers go at one pass and the blobs at a later one;
# a partial blob of an upload stays while the upload does; pushing the same
# bytes again afterwards works (they are sent again, since nobody holds
# them any more); a blob that a committed checkpoint's record names stays
# until the record goes; an unfinished upload is listed (drover get
# uploads) with its expiry, kept alive by a chunk, and once untouched for
# upload_expiry_s (its manifest's time set two days back) expires: its
# partial chunks and the blob only it named are collected.
. "$(dirname "$0")/lib/common.bash"
TOOL=${CACHE_TOOL:-$(dirname "$DROVERD")/t/cache_tool}
printf '{"blob_gc_interval_s": 1, "blob_gc_grace_s": 0, "log_level": "debug"}\n' >"$TMP/cfg.json"
droverd_start "$TMP/d" --config "$TMP/cfg.json" || exit 1
B=$DDIR/blobs

mk() { head -c "$2" /dev/urandom >"$1"; sha256sum "$1" | cut -d' ' -f1; }
mkdir -p "$TMP/t1" "$TMP/t2" "$TMP/t3"
A=$(mk "$TMP/t1/a.bin" 10000)
S=$(mk "$TMP/t1/shared.bin" 7000)
cp "$TMP/t1/shared.bin" "$TMP/t2/shared.bin"
C=$(mk "$TMP/t2/c.bin" 5000)
cp "$TMP/t1/a.bin" "$TMP/t3/a.bin"
D=$(mk "$TMP/t3/d.bin" 8192)
cli artifact push "$TMP/t1" --id w1 --chunk-size 4096
rc "push w1 (a, shared)" 0
cli artifact push "$TMP/t2" --id w2 --chunk-size 4096
rc "push w2 (shared, c)" 0
# an upload left unfinished: a (whole already) and d (one chunk of two sent)
"$TOOL" manifest "$TMP/t3" 4096 >"$TMP/m3.json"
api POST /v1/artifacts/uploads -d "{\"manifest\": $(cat "$TMP/m3.json")}"
status "start an upload of a and d" 201
UP=$(jq -r .id <<<"$BODY")
head -c 4096 "$TMP/t3/d.bin" >"$TMP/d0"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $TOKEN" \
       --data-binary @"$TMP/d0" "$URL/v1/artifacts/uploads/$UP/blobs/$D/chunks/0")
eq "send chunk 0 of d" "$code" 204

passes() { grep -c 'blob gc pass' "$DDIR/droverd.log"; }
# wait_passes N: N more passes than now
passes_at_least() { [ "$(passes)" -ge "$1" ]; }
wait_passes() { wait_for "$1 gc passes" passes_at_least $(($(passes) + $1)) || fail "no $1 gc passes"; }

api DELETE /v1/artifacts/w1
status "delete w1" 200
wait_passes 3
check "a stays: the unfinished upload names it" test -e "$B/sha256/$A"
check "shared stays: w2 names it" test -e "$B/sha256/$S"
check "c stays" test -e "$B/sha256/$C"
check "d's partial chunk stays: its upload is alive" \
    bash -c "ls '$B'/partial/*/$D.* | grep -q ."
check "a is still held by its user" test -e "$B/owners/admin/$A"

# a committed checkpoint (the record layout of store/checkpoints.h) names c
CK="$B/checkpoints/admin/deployment:w:0"
mkdir -p "$CK"
printf '{"scope": "deployment:w:0", "name": "c1", "manifest": {"files": [{"path": "c.bin", "size": 5000, "sha256": "%s"}]}}\n' "$C" >"$CK/c1.json"
api DELETE /v1/artifacts/w2
status "delete w2" 200
gone() { [ ! -e "$B/sha256/$S" ]; }
wait_check 30 "shared is removed once nothing names it" gone
check "its owners/ marker went first" test ! -e "$B/owners/admin/$S"
wait_passes 2
check "c stays: a committed checkpoint names it" test -e "$B/sha256/$C"
check "... and its user still holds it" test -e "$B/owners/admin/$C"
rm "$CK/c1.json"
cgone() { [ ! -e "$B/sha256/$C" ]; }
wait_check 30 "c is removed once the checkpoint record is gone" cgone
grep -q 'no longer held by anyone' "$DDIR/droverd.log" && ok "the log says markers went (first pass)" ||
    fail "the log says markers went (first pass)"
grep -q ' removed ([0-9]* bytes)' "$DDIR/droverd.log" && ok "the log says blobs went (later pass)" ||
    fail "the log says blobs went (later pass)"
check "a stays all along (the upload)" test -e "$B/sha256/$A"
api GET /v1/artifacts/uploads/$UP
status "the upload is still there" 200
jqc "it still wants only d's chunk 1" '.missing == [{"sha256": "'"$D"'", "chunks": [1]}]'

cli artifact push "$TMP/t2" --id w2 --chunk-size 4096
rc "pushing w2 again works" 0
check "shared is back" test -e "$B/sha256/$S"
cli describe artifact w2
rc "describe w2" 0
wait_passes 2
check "... and stays (w2 names it again)" test -e "$B/sha256/$S"

# ---- upload expiry (upload_expiry_s, default 24 h) -----------------------------------------------
cli get uploads -o json
rc "get uploads" 0
jqc "... lists the unfinished upload with its expiry (24 h after its last touch)" \
    '(if type == "array" then . else [.] end) | map(select(.id == "'"$UP"'")) | length == 1 and (.[0].expires_at - .[0].updated_at) == 86400 and .[0].missing_bytes == 4096'
cli get uploads
contains "... as a table" "$OUT" "${UP:0:12}"
# a chunk received keeps an upload alive: its manifest's time moves
M=$B/uploads/admin/$UP.json
m0=$(stat -c %Y "$M")
sleep 1.1
head -c 4096 "$TMP/t3/d.bin" >"$TMP/d0"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $TOKEN" \
       --data-binary @"$TMP/d0" "$URL/v1/artifacts/uploads/$UP/blobs/$D/chunks/0")
eq "send chunk 0 of d again" "$code" 204
check "... its upload's last touch moved" test "$(stat -c %Y "$M")" -gt "$m0"
wait_passes 2
check "... and it is not expired" test -e "$M"
# left untouched for two days: it expires and its bytes go
touch -d '2 days ago' "$M"
expired() { [ ! -e "$M" ]; }
wait_check 30 "an upload untouched for 2 days expires" expired
api GET /v1/artifacts/uploads/$UP
status "... GET of it" 404
dpart() { ! ls "$B"/partial/*/$D.* >/dev/null 2>&1; }
wait_check 30 "... d's partial chunk is collected" dpart
agone() { [ ! -e "$B/sha256/$A" ] && [ ! -e "$B/owners/admin/$A" ]; }
wait_check 30 "... a (only the upload named it) is collected, marker and blob" agone
grep -q '1 upload(s) expired' "$DDIR/droverd.log" && ok "the log says the upload expired" ||
    fail "the log says the upload expired"
cli get uploads
contains "get uploads says there is none" "$OUT" "No unfinished uploads"

droverd_finish blob_gc
t_done
