#!/usr/bin/env bash
# jq_fast.sh — t/jq_fast.c answers as jq 1.6 does, byte for byte: stdout,
# stderr and exit status of both on the same arguments and input, for the
# filters it answers itself (checked that it did: JQ_FAST_NO_FALLBACK=1
# makes a fallback exit 98) and for ones it must leave to jq (checked that
# it did, and that jq's answer came through, input replayed). Then 3,000
# numbers of every size and shape through both printers; common.bash's
# _uri (list_all's page tokens) against jq's @uri.
. "$(dirname "$0")/lib/common.bash"

FAST=$(dirname "$DROVERD")/t/jq_fast
if [ ! -x "$FAST" ]; then
    fail "t/jq_fast is built ($FAST)"
    finish
fi
JQ=$(type -P jq)
[ -x "$JQ" ] || JQ=/usr/bin/jq

# same NAME WANT DOC ARGS...: jq_fast on DOC gives jq's stdout, stderr and
# exit status; WANT fast: it answered itself; jq: it handed over to jq
same()
{
    local name=$1 want=$2 doc=$3
    shift 3
    local o1 o2 e1 e2 r1 r2 nf
    o1=$("$JQ" "$@" <<<"$doc" 2>"$TMP/e1"; echo "rc=$?")
    o2=$("$FAST" "$@" <<<"$doc" 2>"$TMP/e2"; echo "rc=$?")
    e1=$(cat "$TMP/e1") e2=$(cat "$TMP/e2")
    JQ_FAST_NO_FALLBACK=1 "$FAST" "$@" <<<"$doc" >/dev/null 2>&1
    nf=$?
    if [ "$o1" == "$o2" ] && [ "$e1" == "$e2" ]; then
        ok "$name: as jq"
    else
        fail "$name: as jq"
        why "jq:      ${o1//$'\n'/⏎} ${e1:+stderr: $e1}"
        why "jq_fast: ${o2//$'\n'/⏎} ${e2:+stderr: $e2}"
    fi
    if [ "$want" == fast ]; then
        [ "$nf" != 98 ] && ok "$name: answered itself" || fail "$name: answered itself"
    else
        [ "$nf" == 98 ] && ok "$name: left to jq" || fail "$name: left to jq (exit $nf)"
    fi
}

OBJ='{"id":"d-1","owner":"alice","resource_version":3,"status":{"state":"ready","ready_replicas":2,"reason":null,"ok":true,"no":false,"ratio":0.25},
 "items":[{"id":"a","n":1},{"id":"b","n":2.5,"tags":["x","y"],"e":{}}],"text":"tab\there \"quoted\" back\\slash é ☃ \u0001 \u007f","big":123456789012345678,"neg":-17,"tiny":1e-7,"huge":1.5e300,"empty":"","zero":0,"arr":[],"nested":{"a":{"b":[10,20,{"c":"deep"}]}}}'
LIST='{"items":[{"id":"r1","status":{"state":"ready"}},{"id":"r2","status":{"state":"starting"}}],"next_page_token":"tok+/=?&"}'
LIST_LAST='{"items":[{"id":"r1","status":{"state":"ready"},"gpus":[{"uuid":"GPU-1","memory_mib":24576,"compute_percent":50}],"rate":12.75}]}'
READY2='[{"id":"r1","status":{"state":"ready"}},{"id":"r2","status":{"state":"ready"}}]'

# --- what it answers itself --------------------------------------------------
same "identity" fast "$OBJ" .
same "identity, compact" fast "$OBJ" -c .
same "identity of a scalar" fast '"just a string"' .
same "raw identity of a scalar" fast '"just a string"' -r .
same "key" fast "$OBJ" .id
same "raw key" fast "$OBJ" -r .id
same "nested key" fast "$OBJ" -r .status.state
same "missing key" fast "$OBJ" -r .status.nothing
same "key of null" fast "$OBJ" .status.reason.deeper
same "number" fast "$OBJ" .resource_version
same "big integer (as a double)" fast "$OBJ" .big
same "negative" fast "$OBJ" .neg
same "small real" fast "$OBJ" .tiny
same "huge real" fast "$OBJ" .huge
same "fraction" fast "$OBJ" .status.ratio
same "escapes in a string" fast "$OBJ" .text
same "escapes in a raw string" fast "$OBJ" -r .text
same "an object, pretty" fast "$OBJ" .nested
same "an object, compact" fast "$OBJ" -c .nested
same "an array of objects, pretty" fast "$OBJ" .items
same "empty array and object" fast "$OBJ" -c '.items[1].e'
same "index" fast "$OBJ" -r '.items[0].id'
same "index from the end" fast "$OBJ" -r '.items[-1].id'
same "index past the end" fast "$OBJ" -r '.items[5].id'
same "index path" fast "$OBJ" -c '.nested.a.b[2]'
same "iteration" fast "$OBJ" -r '.items[].id'
same "iteration of the top" fast "$READY2" -r '.[].id'
same "iteration of an object" fast '{"a":1,"b":"two"}' -r '.[]'
same "iteration, nothing" fast '{"items":[]}' -e '.items[].id'
same "alternative taken" fast "$OBJ" -r '.status.state // empty'
same "alternative: empty" fast "$OBJ" -r '.status.reason // empty'
same "alternative: empty, -e" fast "$OBJ" -e '.status.reason // empty'
same "alternative: string" fast "$OBJ" -r '.role // "down"'
same "alternative: false is falsy" fast "$OBJ" -r '.status.no // "down"'
same "alternative: number" fast "$OBJ" -r '.status.replicas // 0'
same "alternative: {} on an object: jq's error" jq "$OBJ" -c '.[0] // {}'
same "alternative: {} on an array" fast "$READY2" -c '.[0] // {}'
same "alternative: []" fast "$OBJ" -c '.missing // []'
same "alternative: null, -e" fast "$OBJ" -e '.missing // null'
same "length of an array" fast "$READY2" length
same "length of an object" fast "$OBJ" length
same "length of a string (code points)" fast '"é☃x"' length
same "length of null" fast 'null' length
same "length of a number" fast '-2.5' length
same "path | length" fast "$OBJ" '.items | length'
same "path | length, missing" fast "$OBJ" '.nothing | length'
same "equal" fast "$OBJ" -e '.owner == "alice"'
same "equal, false" fast "$OBJ" -e '.owner == "bob"'
same "not equal" fast "$OBJ" -e '.owner != "bob"'
same "equal number" fast "$OBJ" -e '.resource_version == 3'
same "equal: 2.5 and 2.5" fast "$OBJ" -e '.items[1].n != 2'
same "equal []" fast "$OBJ" -e '.arr == []'
same "equal [] on a full one" fast "$OBJ" -e '.items == []'
same "equal null" fast "$OBJ" -e '.status.reason == null'
same "equal true" fast "$OBJ" -e '.status.ok == true'
same "-e on false" fast "$OBJ" -e '.status.no'
same "-e on null" fast "$OBJ" -e '.status.reason'
same "-e on an empty string (truthy)" fast "$OBJ" -e '.empty'
same "-e on 0 (truthy)" fast "$OBJ" -e '.zero'
same "options together" fast "$OBJ" -rc '.items'
same "options -er" fast "$OBJ" -er '.id'
same "list_all: a page and its token" fast "$LIST" -r '(.next_page_token // ""), ((.items // []) | tojson)'
same "list_all: the last page" fast "$LIST_LAST" -r '(.next_page_token // ""), ((.items // []) | tojson)'
same "list_all: no items" fast '{}' -r '(.next_page_token // ""), ((.items // []) | tojson)'
same "list_all: escapes" fast "{\"items\":[$OBJ]}" -r '(.next_page_token // ""), ((.items // []) | tojson)'
same "replicas_ready: yes" fast "$READY2" -e --argjson n 2 'length == $n and all(.[]; .status.state == "ready")'
same "replicas_ready: count" fast "$READY2" -e --argjson n 3 'length == $n and all(.[]; .status.state == "ready")'
same "replicas_ready: one starting" fast "$(jq -c .items <<<"$LIST")" -e --argjson n 2 'length == $n and all(.[]; .status.state == "ready")'
same "replicas_ready: none" fast '[]' -e --argjson n 0 'length == $n and all(.[]; .status.state == "ready")'
same "replicas_ready: no status" fast '[{"id":"x"}]' -e --argjson n 1 'length == $n and all(.[]; .status.state == "ready")'
same "whitespace around the filter" fast "$OBJ" -r '  .id  '

# --- what it leaves to jq ------------------------------------------------------
same "another option" jq "$OBJ" -S .
same "slurp" jq "$OBJ" -s length
same "null input" jq "$OBJ" -n '1 + 1'
same "an --arg" jq "$OBJ" --arg x y '.id == $x'
same "a file argument" jq "" -r .id "$TMP/e1"
same "another filter" jq "$OBJ" '[.items[].id] | join(",")'
same "select" jq "$READY2" -r '.[] | select(.id == "r1") | .status.state'
same "recursion" jq "$OBJ" -c '[..|numbers]'
same "optional" jq "$OBJ" '.id?'
same "a quoted key" jq "$OBJ" '."id"'
same "a string literal with an escape" jq "$OBJ" -r '.nothing // "a\tb"'
same "a real literal" jq "$OBJ" -e '.status.ratio == 0.25'
same "two iterations" jq '[[1,2],[3]]' -c '.[][]'
same "alternative after iteration" jq "$OBJ" -r '.items[].id // "x"'
same "key of a number: jq's error" jq "$OBJ" .resource_version.x
same "index of an object: jq's error" jq "$OBJ" '.status[0]'
same "iteration of null: jq's error" jq "$OBJ" '.nothing[]'
same "length of a boolean: jq's error" jq "$OBJ" '.status.ok | length'
same "replicas_ready on an object" jq '{"a":{"status":{"state":"ready"}}}' -e --argjson n 1 'length == $n and all(.[]; .status.state == "ready")'
same "replicas_ready: a string in the list" jq '[{"status":{"state":"x"}},"s"]' -e --argjson n 5 'length == $n and all(.[]; .status.state == "ready")'
same "two documents" jq '{"id":1} {"id":2}' .id
same "empty input" jq '' .id
same "malformed input" jq '{"id":' .id
same "duplicate keys" jq '{"id":1,"id":2}' .id
same "NUL in a string" jq '{"id":"a\u0000b"}' -r .id
same "minus zero" jq '{"z":-0}' .z
same "minus zero in an array" jq '[1,-0]' -c .
same "-0 in a string is no minus zero" fast '{"id":"worker-0","n":"a\"-0"}' -r .id
same "-0.5 is no minus zero" fast '{"z":-0.5}' .z
same "an integer past 64 bits" jq '{"n":123456789012345678901234567890}' .n
same "a number past a double" jq '{"n":1e400}' .n
same "invalid UTF-8" jq $'{"s":"\xff"}' -r .s

# --- numbers: 3,000 of every size through both printers -----------------------------
nums=$(python3 - <<'EOF'
import random, struct
r = random.Random(20261206)
out = []
for e in range(-30, 31):
    out += [repr(2.0 ** e), repr(10.0 ** e), repr(-(10.0 ** e)), repr(1.5 * 10.0 ** e)]
for i in range(14, 19):
    out += [str(10 ** i), str(10 ** i - 1), str(2 ** 53 + i), str(-(10 ** i))]
for _ in range(1500):
    out.append(repr(struct.unpack('<d', struct.pack('<Q', r.getrandbits(64) & ~(0x7ff << 52) | (r.randrange(900, 1150) << 52)))[0]))
for _ in range(800):
    out.append(repr(round(r.uniform(-1e6, 1e6), r.randrange(0, 8))))
for _ in range(400):
    out.append(str(r.randrange(-10 ** 17, 10 ** 17)))
out += ['5e-324', '2.2250738585072014e-308', '1.7976931348623157e308', '0.1', '0.3', '1e21', '1e-7', '123e-20']
print('[' + ','.join(out) + ']')
EOF
)
# --- list_all's page token: common.bash's _uri, as jq's @uri ---------------------------
for t in "a-_.!~*'()b /+=é" "eyJvIjoiYSIsImkiOjN9" "x%y&z?#[]" ""; do
    _uri "$t"
    eq "_uri '$t' is jq's @uri" "$_URI" "$("$JQ" -rn --arg t "$t" '$t|@uri')"
done

same "3,000 numbers" fast "$nums" -c .
same "3,000 numbers, one a line" fast "$nums" '.[]'

t_done
