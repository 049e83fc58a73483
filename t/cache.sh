#!/usr/bin/env bash
# cache.sh — the node cache (src/agent/cache.c) through build/t/cache_tool
# against t/lib/range_server.py (Range, byte counts per path, flips, slow):
# exact bytes land read-only; two concurrent ensures make one download; a
# process SIGKILLed mid-download re-fetches on restart at most the chunks
# that were in flight; a flipped byte at the origin is caught, reported and
# not served; the size bound holds under eviction and pinned blobs stay.
. "$(dirname "$0")/lib/common.bash"

TOOL=${CACHE_TOOL:-$(dirname "$DROVERD")/t/cache_tool}
[ -x "$TOOL" ] || { echo "no $TOOL (build first)"; exit 1; }
MiB=1048576

mkdir -p origin
python3 -S "$DROVER_SRC/t/lib/range_server.py" --root origin --port-file port --token sekrit &
_BG_PIDS+=($!)
for ((i = 0; i < 100; i++)); do [ -s port ] && break; sleep 0.1; done
O=http://127.0.0.1:$(cat port)
stats() { curl -s "$O/_stats"; }
sent() { stats | jq -r --arg p "$1" '.[$p] // 0'; }
sent_all() { stats | jq '[.[]] | add // 0'; }
curl -s "$O/_reset" >/dev/null

# mk, cache_kill_resume
. "$DROVER_SRC/t/lib/cache_kill.bash"
digest() { jq -r .digest "$1.json"; }
# origin paths are NAME/PATH: the cache fetches BASE/PATH, so the base is $O/NAME
tool() { local c=$1 max=$2 thr=$3 name=$4; "$TOOL" run "$c" "$max" "$thr" "$O/$name" sekrit; }

# --- exact bytes, read-only, nested paths and odd names -------------------------
mkdir -p "origin/exact/sub dir/deeper"
head -c 3000001 /dev/urandom >"origin/exact/sub dir/deeper/w e+ights.bin"
head -c 10 /dev/urandom >origin/exact/small
: >origin/exact/empty
"$TOOL" manifest origin/exact $MiB >exact.json
out=$(printf 'ensure exact.json\nwait exact.json\n' | tool c1 $((100 * MiB)) 4 exact)
snap=$(sed -n 's/^ready \([^ ]*\).*/\1/p' <<<"$out")
check "exact: ready" test -n "$snap"
want=$(cd origin/exact && find . -type f -print0 | sort -z | xargs -0 sha256sum)
got=$(cd "$snap" 2>/dev/null && find . -type f -print0 | sort -z | xargs -0 sha256sum)
eq "exact: the snapshot holds exactly the origin's bytes" "$got" "$want"
[ -d "$snap" ] || snap=$TMP/no-snapshot
eq "exact: snapshot files are 0444" "$(find "$snap" -type f ! -perm 0444 2>&1 | wc -l)" 0
eq "exact: snapshot dirs are read-only" "$(find "$snap" -type d -perm -0200 2>&1 | wc -l)" 0
eq "exact: origin sent each byte once" "$(sent_all)" 3000011
eq "exact: tmp/ is empty" "$(ls c1/tmp | wc -l)" 0
out=$(printf 'ensure exact.json\nwait exact.json\n' | tool c1 $((100 * MiB)) 4 exact)
contains "exact: a second process finds it ready" "$out" "ready $snap"
eq "exact: ... without a byte from the origin" "$(sent_all)" 3000011
out=$(printf 'ensure exact.json\nwait exact.json\n' | "$TOOL" run c1b $((100 * MiB)) 2 "$O/exact" wrong)
contains "exact: a wrong credential is a clear error" "$out" "answered 401"

# --- one download for two callers -------------------------------------------------
mk two 6 3
curl -s "$O/_reset" >/dev/null
out=$(printf 'ensure2 two.json\n' | tool c2 $((100 * MiB)) 4 two)
eq "two callers: both ready" "$(grep -c '^ready' <<<"$out")" 2
eq "two callers: the origin sent the artifact once" "$(sent_all)" $((9 * MiB))

# --- SIGKILL mid-download, resume (t/lib/cache_kill.bash; over https: t/cache_https.sh) ---
cache_kill_resume kill c3

# --- a flipped byte at the origin ---------------------------------------------------
mk flip 3
curl -s "$O/_reset" >/dev/null
curl -s "$O/_flip?path=flip/f0.bin&offset=$((MiB + 12345))" >/dev/null
# one fetcher thread, so the order is fixed: chunk 0, chunk 1 four times, then it fails
out=$(printf 'ensure flip.json\nwait flip.json\nlist\n' | tool c4 $((100 * MiB)) 1 flip)
contains "flip: the download fails" "$out" "failed: "
contains "flip: the error names the chunk" "$out" "chunk 1 (bytes 1048576-2097151): sha256 mismatch: expected $(jq -r '.files[0].chunks[1]' flip.json), got "
contains "flip: ... and says it was not served" "$out" "not served"
hex=$(jq -r '.files[0].sha256' flip.json)
check "flip: no blob in the cache" test ! -e "c4/blobs/sha256/$hex"
check "flip: no snapshot" test ! -e "c4/snapshots/$(digest flip)"
eq "flip: the bad chunk was tried 4 times (3 retries), chunk 0 once, chunk 2 not at all" \
    "$(sent flip/f0.bin)" $((5 * MiB))
curl -s "$O/_flip?path=flip/f0.bin&offset=$((MiB + 12345))" >/dev/null
curl -s "$O/_reset" >/dev/null
out=$(printf 'ensure flip.json\nwait flip.json\n' | tool c4 $((100 * MiB)) 1 flip)
contains "flip: once the origin is right, ensure again succeeds" "$out" "ready "
eq "flip: ... fetching chunks 1 and 2, not the verified chunk 0" "$(sent flip/f0.bin)" $((2 * MiB))
snap=$(sed -n 's/^ready \([^ ]*\).*/\1/p' <<<"$out")
eq "flip: ... with the right bytes" "$(sha256sum <"$snap/f0.bin")" "$(sha256sum <origin/flip/f0.bin)"

# --- the bound and pins ----------------------------------------------------------------
mk A 8
mk B 8
mk C 8
# pins live in one process, so all three come from one base URL: their
# manifests are made from pre/NAME/NAME/f0.bin (paths "NAME/f0.bin").
run_bound() { "$TOOL" run c5 $((20 * MiB)) 2 "$O" sekrit; }
for n in A B C; do
    mkdir -p "pre/$n/$n"
    ln -f "origin/$n/f0.bin" "pre/$n/$n/f0.bin"
    "$TOOL" manifest "pre/$n" $MiB >"$n.json"
done
out=$(printf '%s\n' "ensure A.json" "wait A.json" "pin A.json" "ensure B.json" "wait B.json" \
    "ensure C.json" "wait C.json" "list" "pin C.json" "ensure B.json" "unpin A.json" \
    "ensure B.json" "wait B.json" "list" | run_bound)
hexA=$(jq -r '.files[0].sha256' A.json); hexB=$(jq -r '.files[0].sha256' B.json)
hexC=$(jq -r '.files[0].sha256' C.json)
list1=$(awk '/^held/{exit} {print}' <<<"$out" | grep '^blob' || true)
held1=$(grep -m1 '^held' <<<"$out" | cut -d' ' -f2)
check "bound: held after evicting B <= 20 MiB ($held1)" test "$held1" -le $((20 * MiB))
contains "bound: pinned A kept" "$list1" "$hexA"
check "bound: unpinned, least recently used B evicted" test -z "$(grep "$hexB" <<<"$list1")"
contains "bound: no room while A and C are pinned: a clear error" "$out" \
    "ensure error: the node cache cannot make room for 8388608 bytes: its bound is 20971520, 16777216 are in use"
contains "bound: after unpinning A, B fits" "$(grep '^ready' <<<"$out" | tail -1)" "$(digest B)"
list2=$(sed -n '/^held/,$p' <<<"$out" | sed 1d | grep '^blob' || true)
held2=$(tail -1 <<<"$out" | cut -d' ' -f2)
check "bound: held <= 20 MiB at the end ($held2)" test "$held2" -le $((20 * MiB))
contains "bound: pinned C never evicted" "$list2" "$hexC"
check "bound: A (unpinned, oldest) evicted" test -z "$(grep "$hexA" <<<"$list2")"
check "bound: A's snapshot removed with its blob" test ! -e "c5/snapshots/$(digest A)"
check "bound: C's snapshot still there" test -e "c5/snapshots/$(digest C)/C/f0.bin"
check "bound: what is on disk is what the cache says" test \
    "$(cat c5/blobs/sha256/* | wc -c)" -eq "$held2"
# the index survives a restart, with the bound enforced at open
out=$(printf 'list\n' | "$TOOL" run c5 $((9 * MiB)) 2 "$O" sekrit)
held3=$(tail -1 <<<"$out" | cut -d' ' -f2)
check "bound: reopened with a smaller bound, it shrinks to it ($held3)" test "$held3" -le $((9 * MiB))
contains "bound: ... keeping the most recently used (B)" "$out" "$hexB"

t_done
