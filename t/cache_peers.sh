#!/usr/bin/env bash
# cache_peers.sh — peer fan-out of the node cache (src/agent/cache_peers.c,
# cacheserve.c) through build/t/cache_tool processes, each a node with its
# own cache dir serving peers on a loopback port, against one origin
# (t/lib/range_server.py, counting bytes): four nodes wanting one artifact
# at once make the origin send it about once; a node killed mid-download is
# routed around and, restarted, gets everything from peers; a peer serving
# corrupted bytes is caught, named and not used again; a stalled peer is
# given up on; the peer server's credentials, ranges and partial downloads;
# two artifacts sharing a blob, on two nodes that are peers of that blob
# only: the origin sends each distinct byte once.
. "$(dirname "$0")/lib/common.bash"

TOOL=${CACHE_TOOL:-$(dirname "$DROVERD")/t/cache_tool}
[ -x "$TOOL" ] || { echo "no $TOOL (build first)"; exit 1; }
MiB=1048576
SECRET=peer-secret

mkdir -p origin
python3 -S "$DROVER_SRC/t/lib/range_server.py" --root origin --port-file port --token sekrit &
OPID=$!
_BG_PIDS+=($OPID)
for ((i = 0; i < 100; i++)); do [ -s port ] && break; sleep 0.1; done
O=http://127.0.0.1:$(cat port)
sent_all() { curl -s "$O/_stats" | jq '[.[]] | add // 0'; }
reset() { curl -s "$O/_reset" >/dev/null; }

# mk NAME SIZE_MIB...: origin/NAME/fN.bin of random bytes; NAME.json its
# manifest (1 MiB chunks) with paths NAME/fN.bin, so that every node's one
# origin base URL serves all artifacts (made from m/NAME/NAME/, hard links)
mk()
{
    local name=$1 i=0
    shift
    mkdir -p "origin/$name" "m/$name/$name"
    for s in "$@"; do
        head -c $((s * MiB)) /dev/urandom >"origin/$name/f$i.bin"
        ln -f "origin/$name/f$i.bin" "m/$name/$name/f$i.bin"
        i=$((i + 1))
    done
    "$TOOL" manifest "m/$name" $MiB >"$name.json"
}
size_of() { jq .total_size "$1.json"; }

declare -A PID FD PORT
# node NAME THREADS: a cache_tool reading commands from NAME.in, answers in
# NAME.out, log in NAME.log, serving peers (secrets $SECRET and $SECRET-2)
node()
{
    local n=$1 thr=$2 fd
    [ -p "$n.in" ] || mkfifo "$n.in"
    # the others' fifo ends are not the new node's: each sees EOF when we close it
    (for f in "${FD[@]}"; do eval "exec $f>&-"; done
     exec "$TOOL" run "$n" $((500 * MiB)) "$thr" "$O" sekrit <"$n.in" >>"$n.out" 2>>"$n.log") &
    PID[$n]=$!
    _BG_PIDS+=($!)
    exec {fd}>"$n.in"
    FD[$n]=$fd
    say "$n" "serve $SECRET $SECRET-2"
    wait_for "$n serving" grep -q '^serving' "$n.out"
    PORT[$n]=$(sed -n 's/^serving //p' "$n.out" | tail -1)
}
say() { printf '%s\n' "$2" >&"${FD[$1]}"; }
# peers NAME OTHER...: NAME's id and its peers
peers()
{
    local n=$1 p
    shift
    say "$n" "self $n"
    for p in "$@"; do say "$n" "peer $p http://127.0.0.1:${PORT[$p]} $SECRET"; done
}
answers() { grep -cE '^(ready|failed|ensure error)' "$1.out"; }
# fetch NAME ART: ensure and wait (answer read later with last_answer)
fetch() { say "$1" "ensure $2.json"; say "$1" "wait $2.json"; }
has_answers() { [ "$(answers "$1")" -ge "$2" ]; }
wait_answer() { wait_for "$1: answer $2" has_answers "$1" "$2"; }
last_answer() { grep -E '^(ready|failed|ensure error)' "$1.out" | tail -1; }
# same_bytes NAME ART: the node's snapshot holds exactly the origin's files
same_bytes()
{
    local snap want got
    snap=$(last_answer "$1" | sed -n 's/^ready \([^ ]*\).*/\1/p')
    want=$(cd "origin/$2" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
    got=$(cd "${snap:-/nonexistent}/$2" 2>/dev/null && find . -type f -print0 | sort -z | xargs -0 sha256sum)
    eq "$3" "$got" "$want"
}
field() { last_answer "$1" | sed -n "s/.* $2=\([0-9]*\).*/\1/p"; }

# --- four nodes at once: the origin sends the artifact about once ----------------
mk big 24 8
for n in n1 n2 n3 n4; do node $n 4; done
peers n1 n2 n3 n4; peers n2 n1 n3 n4; peers n3 n1 n2 n4; peers n4 n1 n2 n3
reset
for n in n1 n2 n3 n4; do fetch $n big; done
for n in n1 n2 n3 n4; do wait_answer $n 1; done
size=$(size_of big)
total_peers=0
for n in n1 n2 n3 n4; do
    contains "four: $n ready" "$(last_answer $n)" "ready "
    same_bytes $n big "four: $n holds exactly the origin's bytes"
    eq "four: $n verified each byte once (origin + peers = size)" \
        $(( $(field $n origin) + $(field $n peers) )) "$size"
    total_peers=$((total_peers + $(field $n peers)))
done
origin_bytes=$(sent_all)
check "four: origin sent $origin_bytes <= 1.1 x $size" test $((origin_bytes * 10)) -le $((size * 11))
check "four: peers sent the rest ($total_peers >= 2.9 x $size)" \
    test $((total_peers * 10)) -ge $((size * 29))

# --- the peer server: credentials, ranges ------------------------------------------
hex0=$(jq -r '.files[0].sha256' big.json)
U=http://127.0.0.1:${PORT[n2]}/v1/cache/blobs/sha256/$hex0
eq "serve: a wrong credential is 401" \
    "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer nope' "$U")" 401
eq "serve: no credential is 401" "$(curl -s -o /dev/null -w '%{http_code}' "$U")" 401
eq "serve: a range of a whole blob is 206 with exactly those bytes" \
    "$(curl -s -H "Authorization: Bearer $SECRET" -r 1000-4999 "$U" | sha256sum)" \
    "$(tail -c +1001 origin/big/f0.bin | head -c 4000 | sha256sum)"
eq "serve: the second secret is accepted too, and no Range is the whole blob" \
    "$(curl -s -H "Authorization: Bearer $SECRET-2" "$U" | sha256sum)" \
    "$(sha256sum <origin/big/f0.bin)"
contains "serve: Content-Range names the range and the size" \
    "$(curl -s -D - -o /dev/null -H "Authorization: Bearer $SECRET" -r 5- "$U" | tr -d '\r')" \
    "Content-Range: bytes 5-$((24 * MiB - 1))/$((24 * MiB))"
eq "serve: a range past the end is 416" "$(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $SECRET" -r $((24 * MiB))- "$U")" 416
eq "serve: a blob not held is 404" "$(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $SECRET" "${U%/*}/$(printf '%064d' 0)")" 404

# --- a peer serving corrupted bytes --------------------------------------------------
# one byte flipped on n1's disk in every chunk of f0 (blobs are not re-hashed
# at start: a reader catches it); n5 (one thread: a fixed order) asks n1 and n2
python3 -S - "n1/blobs/sha256/$hex0" <<'PY'
import os, sys
p = sys.argv[1]
os.chmod(p, 0o644)
with open(p, "r+b") as f:
    for k in range(24):
        f.seek(k * 1048576 + 777)
        b = f.read(1)
        f.seek(k * 1048576 + 777)
        f.write(bytes([b[0] ^ 0xFF]))
PY
node n5 1
peers n5 n1 n2
reset
fetch n5 big
wait_answer n5 1
contains "flip: n5 ready" "$(last_answer n5)" "ready "
same_bytes n5 big "flip: n5 holds exactly the origin's bytes (the bad chunk was not used)"
eq "flip: one bad chunk was seen: n1 was not asked again" "$(grep -c 'sent a bad chunk' n5.log)" 1
contains "flip: a clear log line names the peer, blob, chunk and digests" "$(cat n5.log)" \
    "cache: peer n1 sent a bad chunk: blob $hex0 chunk "
contains "flip: ... and says it was not used" "$(grep 'bad chunk' n5.log)" \
    "sha256 mismatch: expected "
eq "flip: the other peer (n2) served the rest: nothing from the origin" "$(sent_all)" 0

# --- a stalled peer --------------------------------------------------------------------
kill -STOP "${PID[n2]}"
CACHE_PEER_STALL_MS=300 node n6 1
peers n6 n2
reset
fetch n6 big
wait_answer n6 1
kill -CONT "${PID[n2]}"
contains "stall: n6 ready" "$(last_answer n6)" "ready "
same_bytes n6 big "stall: n6 holds exactly the origin's bytes"
contains "stall: the stalled peer is named and given up on" "$(cat n6.log)" \
    "cache: peer n2 failed for blob "
eq "stall: ... once: the origin sent the artifact once" "$(sent_all)" "$size"

# --- a node killed mid-download ----------------------------------------------------------
mk kill 24
reset
curl -s "$O/_slow?bps=$MiB" >/dev/null
for n in n1 n2 n3 n4; do fetch $n kill; done
lines() { cat n4/tmp/*.chunks 2>/dev/null | grep -cv '^drover'; }
some_lines() { [ "$(lines)" -ge 1 ]; }
wait_for "n4 verified a chunk" some_lines
kill -KILL "${PID[n4]}"
wait "${PID[n4]}" 2>/dev/null
check "kill: n4 died before it had the artifact" test ! -e "n4/snapshots/$(jq -r .digest kill.json)"
for n in n1 n2 n3; do wait_answer $n 2; done
curl -s "$O/_slow?bps=0" >/dev/null
for n in n1 n2 n3; do
    contains "kill: $n ready" "$(last_answer $n)" "ready "
    same_bytes $n kill "kill: $n holds exactly the origin's bytes"
done
contains "kill: the dead peer is named" "$(cat n1.log n2.log n3.log)" "cache: peer n4 failed for blob "
reset
node n4 4
peers n4 n1 n2 n3
fetch n4 kill
wait_answer n4 2
contains "kill: restarted, n4 completes" "$(last_answer n4)" "ready "
same_bytes n4 kill "kill: ... with exactly the origin's bytes"
eq "kill: ... all of it from peers and its own resumed chunks: nothing from the origin" \
    "$(sent_all)" 0

# --- a partial download serves only its verified chunks ----------------------------------
# a prepared partial of part/f0.bin (4 chunks, the sidecar lists chunk 0);
# the origin is stopped, so the download stays in progress while we ask
mk part 4
hexp=$(jq -r '.files[0].sha256' part.json)
mkdir -p n7/tmp
cp origin/part/f0.bin "n7/tmp/$hexp.partial"
printf 'drover-chunks 1 %d %d 4\n0\n' $((4 * MiB)) $MiB >"n7/tmp/$hexp.chunks"
kill -STOP "$OPID"
CACHE_TIMEOUT_MS=600000 node n7 2
fetch n7 part
P=http://127.0.0.1:${PORT[n7]}/v1/cache/blobs/sha256/$hexp
A="Authorization: Bearer $SECRET"
wait_for "n7 resumed the partial" grep -q 'resuming blob' n7.log
eq "partial: a verified chunk is served (206, exact bytes)" \
    "$(curl -s -H "$A" -r 0-$((MiB - 1)) "$P" | sha256sum)" "$(head -c $MiB origin/part/f0.bin | sha256sum)"
eq "partial: a chunk not verified is 404" \
    "$(curl -s -o /dev/null -w '%{http_code}' -H "$A" -r $((2 * MiB))-$((2 * MiB + 9)) "$P")" 404
eq "partial: a range reaching past the verified chunk is 404" \
    "$(curl -s -o /dev/null -w '%{http_code}' -H "$A" -r 100-$((MiB + 100)) "$P")" 404
eq "partial: the whole blob is 404" "$(curl -s -o /dev/null -w '%{http_code}' -H "$A" "$P")" 404
kill -CONT "$OPID"

# --- clean exits (under ASan: no leak, no report) --------------------------------------------
for n in n1 n2 n5 n6; do
    eval "exec ${FD[$n]}>&-"
    wait "${PID[$n]}"
    eq "exit: $n stops cleanly at the end of its input" "$?" 0
done
eq "exit: no sanitizer report in the nodes' logs" \
    "$(grep -lE 'Sanitizer|runtime error:' n*.log | wc -l)" 0

# --- two artifacts sharing a blob: peers by blob ------------------------------------------
# X = shared + x, Y = shared + y; p1 wants X, p2 wants Y, each names the
# other as a peer of the shared blob only (what the head sends, agent_peers.h)
mkdir -p origin/X origin/Y m/X/X m/Y/Y
head -c $((8 * MiB)) /dev/urandom >origin/X/f0.bin
ln -f origin/X/f0.bin origin/Y/f0.bin
head -c $((2 * MiB)) /dev/urandom >origin/X/f1.bin
head -c $((2 * MiB)) /dev/urandom >origin/Y/f1.bin
for a in X Y; do
    ln -f origin/$a/f0.bin m/$a/$a/f0.bin
    ln -f origin/$a/f1.bin m/$a/$a/f1.bin
    "$TOOL" manifest "m/$a" $MiB >"$a.json"
done
SH=$(jq -r '.files[] | select(.path == "X/f0.bin") | .sha256' X.json)
node p1 4
node p2 4
say p1 "self p1"; say p1 "peer p2 http://127.0.0.1:${PORT[p2]} $SECRET $SH"
say p2 "self p2"; say p2 "peer p1 http://127.0.0.1:${PORT[p1]} $SECRET $SH"
reset
fetch p1 X
fetch p2 Y
wait_answer p1 1
wait_answer p2 1
contains "by blob: p1 ready" "$(last_answer p1)" "ready "
contains "by blob: p2 ready" "$(last_answer p2)" "ready "
same_bytes p1 X "by blob: p1 holds exactly X"
same_bytes p2 Y "by blob: p2 holds exactly Y"
eq "by blob: the origin sent the shared blob once and x, y once each (1.0 x distinct bytes)" \
    "$(sent_all)" $((12 * MiB))
check "by blob: the shared blob's chunks went between the peers" \
    test $(( $(field p1 peers) + $(field p2 peers) )) -gt 0

t_done
