#!/usr/bin/env bash
# jq_fast.sh — t/jq_fast.c answers as jq 1.6 does, byte for byte: stdout,
# stderr and exit status of both on the same arguments and input, for the
# filters it answers itself (checked that it did: with JQ_FAST_TRACE=FILE
# a fallback writes FILE) and for ones it must leave to jq (checked that
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
# (JQ_FAST_TRACE names a file it writes before handing over). Outputs go
# through files and read -d '' (no command substitution: two processes a
# case, not eight; trailing newlines count, as before).
same()
{
    local name=$1 want=$2 doc=$3
    shift 3
    local o1="" o2="" e1="" e2="" r1 r2
    "$JQ" "$@" <<<"$doc" >"$TMP/o1" 2>"$TMP/e1"
    r1=$?
    rm -f "$TMP/trace"
    JQ_FAST_TRACE=$TMP/trace "$FAST" "$@" <<<"$doc" >"$TMP/o2" 2>"$TMP/e2"
    r2=$?
    IFS= read -r -d '' o1 <"$TMP/o1"
    IFS= read -r -d '' o2 <"$TMP/o2"
    IFS= read -r -d '' e1 <"$TMP/e1"
    IFS= read -r -d '' e2 <"$TMP/e2"
    if [ "$o1" == "$o2" ] && [ "$e1" == "$e2" ] && [ "$r1" == "$r2" ]; then
        ok "$name: as jq"
    else
        fail "$name: as jq"
        why "jq:      ${o1//$'\n'/⏎} ${e1:+stderr: $e1} rc=$r1"
        why "jq_fast: ${o2//$'\n'/⏎} ${e2:+stderr: $e2} rc=$r2"
    fi
    if [ "$want" == fast ]; then
        [ ! -e "$TMP/trace" ] && ok "$name: answered itself" || fail "$name: answered itself"
    else
        [ -e "$TMP/trace" ] && ok "$name: left to jq" || fail "$name: left to jq"
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

same "null input" fast "$OBJ" -n '1 + 1'
same "an --arg" fast "$OBJ" --arg x y '.id == $x'
same "collect and join" fast "$OBJ" '[.items[].id] | join(",")'
same "select" fast "$READY2" -r '.[] | select(.id == "r1") | .status.state'
same "a quoted key" fast "$OBJ" '."id"'
same "a string literal with an escape" fast "$OBJ" -r '.nothing // "a\tb"'
same "a real literal" fast "$OBJ" -e '.status.ratio == 0.25'
same "two iterations" fast '[[1,2],[3]]' -c '.[][]'
same "alternative after iteration" fast "$OBJ" -r '.items[].id // "x"'
same "replicas_ready on an object" fast '{"a":{"status":{"state":"ready"}}}' -e --argjson n 1 'length == $n and all(.[]; .status.state == "ready")'
same "replicas_ready: a string in the list (length differs: no error)" fast '[{"status":{"state":"x"}},"s"]' -e --argjson n 5 'length == $n and all(.[]; .status.state == "ready")'
same "-0 in a string is no minus zero" fast '{"id":"worker-0","n":"a\"-0"}' -r .id
same "-0.5 is no minus zero" fast '{"z":-0.5}' .z

# --- the language subset (t/jq_fast_parse.c, t/jq_fast_eval.c) ---------------------
NODES='[{"id":"r1","node":"n1","nodepool":"gpu","status":{"state":"ready","pid":11}},{"id":"r2","node":"n2","nodepool":"cpu","status":{"state":"starting"}},{"id":"r3","node":"n1","nodepool":"gpu","status":{"state":"ready","pid":13},"labels":{"drover-nodepool":"gpu"}}]'
same "select with --arg" fast "$NODES" -r --arg n n1 '.[] | select(.node == $n) | .id'
same "select, and, --arg, --argjson" fast "$NODES" -e --arg p gpu --argjson n 2 '[.[] | select(.nodepool == $p and .status.state == "ready")] | length == $n'
same "map(select) | length" fast "$NODES" '[.[] | select(.status.state == "ready")] | length'
same "map" fast "$NODES" -c 'map(.status.state)'
same "map of an object" fast "$OBJ" -c '.status | map(type)'
same "select on a missing key" fast "$NODES" -r '.[] | select(.labels["drover-nodepool"] == "gpu") | .id'
same "object construction" fast "$NODES" -c '[.[] | {id, node, state: .status.state, "pid": .status.pid}]'
same "object construction, \$x and a pipe" fast "$NODES" -c --arg x X '.[0] | {$x, n: .status | length}'
same "object: a repeated key keeps its place" fast "$OBJ" -c '{a: 1, b: 2, a: 3}'
same "sort, join" fast "$NODES" -r '[.[].node] | sort | join(" ")'
same "unique | length" fast "$NODES" -r '[.[].node] | unique | length'
same "sort: jq's order of kinds" fast 'null' -c '[{"a":0,"b":1},[0,1],"B",0.5,{"a":1},[1],"a",1,false,true,null,"",[],{},-1,"ab"] | sort'
same "sort: stable, objects equal whatever their key order" fast 'null' -c '[{"b":2,"a":1},{"a":1,"b":2},{"a":0}] | sort'
same "unique keeps the first of equals" fast 'null' -c '[{"b":2,"a":1},{"a":1,"b":2},1,1.0] | unique'
same "keys" fast "$OBJ" -c 'keys'
same "keys: bytes order" fast '{"b":1,"é":2,"B":3,"a_":4,"a":5}' -c 'keys'
same "keys of an array" fast '[5,6,7]' -c 'keys'
same "add: numbers" fast '[1,2.5,-4]' 'add'
same "add: strings, arrays, objects, nothing" fast 'null' -c '(["a","b"] | add), ([[1],[2,3]] | add), ([{"a":1,"b":2},{"c":3,"a":4}] | add), ([] | add), ([null,1] | add)'
same "add // 0" fast '{"a":3,"b":4}' '[.[]] | add // 0'
same "join: null, numbers, booleans" fast '[1,null,"a",true,2.5]' -r 'join("-")'
same "join: nothing" fast '[]' -r 'join(",")'
same "all(g; c): true" fast "$READY2" -e 'all(.[]; .status.state == "ready")'
same "all(g; c): false" fast "$NODES" -e 'all(.[]; .status.state == "ready")'
same "any(g; c)" fast "$NODES" -e 'any(.[]; .status.state == "starting")'
same "any(g; c): the next element's condition is not asked" fast '[{"x":1},5]' 'any(.[]; .x == 1)'
same "any(g; c): the next element is (an error there is jq's)" jq '[{"x":1},5]' 'any(.[] | .x; . == 1)'
same "all(g; c): the same" jq '[{"x":2},5]' 'all(.[] | .x; . == 1)'
same "any(g; c): the condition's next value is asked" jq '[1,5]' 'any(.[]; if . == 1 then (true, false) else .x end)'
same "any(g; c): two deciding values make it false" fast '[1,5]' -c '[any(.[]; (true, true))], [any(.[]; if . == 1 then (false, true) else .x end)], [any(if . == 1 then (true, true) else .x end)]'
same "any, all of nothing" fast '[1,5]' -c '[any(.[]; empty)], [all(.[]; empty)], ([] | [any, all])'
same "any(g; c): an error before the answer is jq's" jq '[5,{"x":1}]' 'any(.[]; .x == 1)'
same "any, all, any(f), all(f)" fast '[1,null,false]' -c '[any, all, any(. == null), all(. != 7)]'
same "binary operators: right outside, left inside" fast 'null' -c '[(1,2) + (10,20)], [(1,2) == (1,2)], [(1,2) < (2,1)]'
same "and, or over several values" fast 'null' -c '[(true,false) and (true,false)], [(false,true) or (false,true)], [(null,1) and 1]'
same "// over several values" fast "$OBJ" -c '[.items[].id // "x"], [(null,false) // 3], [(1,null,2) // 3], [empty // 4]'
same "comparisons across kinds" fast 'null' -c '[1 < "a", "a" < [], [] < {}, null < false, false < true, {"a":1} < {"a":2}, {"b":0} < {"a":0,"c":0}, [1,2] < [1,2,0], "ab" > "a", 2 >= 2.0, 1 <= 0]'
same "equality by value" fast 'null' -c '[[1] == [1.0], {"a":1,"b":2} == {"b":2,"a":1}, "a" != "a", null == false]'
same "string interpolation" fast "$OBJ" -r '.items[] | "\(.id)=\(.n) \(.tags) \(.e) \("x")\("")!"'
same "if elif else" fast "$OBJ" -r '.items[] | if .n > 2 then "big" elif .n == 1 then "one" else "none" end'
same "as \$x" fast "$OBJ" -r '. as $o | .items[] | "\($o.id)/\(.id)"'
same "as \$x, a path on it" fast "$OBJ" -c '.status as $s | $s.state, $s.ratio'
same "tojson, tostring, type" fast "$OBJ" -c '(.status | tojson), ([1, "a", null, [2], {"b":1}] | map(tostring)), (.[] | type)'
same "has" fast "$OBJ" -c '[has("id"), has("nope"), (.items | has(1)), (.items | has(5))]'
same "first, last, first(f)" fast "$OBJ" -c '(.items | first | .id), (.items | last), first(.items[] | .id), ([] | first), (null | last)'
same "startswith, endswith" fast "$OBJ" -c '[(.id | startswith("d-")), (.id | endswith("1")), (.id | startswith("x"))]'
same "ltrimstr, rtrimstr" fast "$OBJ" -c '[(.id | ltrimstr("d-")), (.id | rtrimstr("-1")), (.id | ltrimstr("x")), (.resource_version | ltrimstr("x")), (.id | ltrimstr(1))]'
same "split" fast 'null' -c '("a,b,,c," | split(",")), ("" | split(",")), ("," | split(",")), ("a--b" | split("--")), ("é☃é" | split("☃"))'
same "ascii_downcase, ascii_upcase" fast '"Abc-É z"' -c '[ascii_downcase, ascii_upcase]'
same "to_entries" fast "$OBJ" -c '.status | to_entries'
same "-n with --arg" fast "" -nc --arg s "a b" --arg c 'x"y' '["python3", $s, $c]'
same "--argjson" fast "$OBJ" -c --argjson a '{"x":[1,2]}' '$a.x[1], $a'
same "--argjson: a document equals the input" fast "$READY2" -e --argjson a "$READY2" '. == $a'
same "arithmetic" fast "$OBJ" -c '[.resource_version + 1, .neg - 0.5, "a" + "b", ({"a":1} + {"b":2,"a":3}), ([1] + [2]), (null + 1), (1 + null), 1 - 1, 0.1 + 0.2]'
same "an index expression" fast "$OBJ" -c --arg k id '.[$k], .items[.zero].id, .nested["a"].b[1], .items[-2 + 1].id'
same "literals" fast 'null' -c '[1e3, -1.5, 0.25, 100000000000000000000, "a\"b\\c\/d\n", true, false, null, [], {}]'
same "-e: no output" fast "$OBJ" -e '.items[] | select(.n > 5)'
same "-e: the last output decides" fast "$OBJ" -e '.items[] | .n > 2'
same "nested map, select, length" fast "$OBJ" -e '.items | map(select(.id == "a")) | length > 0'
same "empty" fast "$OBJ" -c '[.items[] | empty], 1'
same "a key that is a keyword" fast '{"and":1,"if":2}' -c '.and, .if'
same "keys_unsorted" fast "$OBJ" -c 'keys_unsorted, ([5,6] | keys_unsorted)'
same "index of an array" fast '["a","b","a",1]' -c '[index("a"), index("b"), index("z"), index(1), index(1.0)], ([] | index("a"))'
same "index of a string: jq's" jq '"abc"' 'index("b")'
same "? after a step" fast "$OBJ" -c '[.items[].tags[]?], [.id.x?], [.items[] | .n.x?], [.resource_version[]?], [.id[0]?], [.items?[0]?.id], [."id"?]'
same "? after a step: the error before it is jq's" jq "$OBJ" -c '[.resource_version.x.y?]'
same "? after a (term): jq's" jq "$OBJ" -c '[(.id.x)?]'
same "test: plain patterns" fast "$OBJ" -c '[(.id | test("^d-[0-9]+$")), (.owner | test("b|c")), (.owner | test("^(al|bo)i?ce$")), (.owner | test("[^a-z]")), (.id | test("d-1|\\.")), ("has been silent for 12.5 s, past its lease" | test("has been silent for [0-9.]+ s, past its lease"))]'
same "test: a subject beyond ASCII: jq's" jq "$OBJ" '.text | test("x")'
same "test: \\d: jq's" jq "$OBJ" '.id | test("\\d")'
same "test: {N} and {N,M}" fast '{"s":"drv_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}' -c '[(.s | test("^drv_[0-9a-f]{64}$")), (.s | test("^drv_[0-9a-f]{63}$")), (.s | test("f{1,2}$")), (.s | test("_(0|1){2,3}"))]'
same "test: {N} lazy, {,N}, a { alone: jq's" jq "$OBJ" -c '[(.id | test("d{1}?")), (.id | test("d{,1}")), (.id | test("d{"))]'
same "test: a quantifier after {N}: jq's" jq "$OBJ" '.id | test("d{1}*")'
same "contains of strings" fast "$OBJ" -c '[(.owner | contains("lic")), (.owner | contains("")), (.owner | contains("bob"))]'
same "contains of arrays: jq's" jq "$OBJ" -c '.items | contains([{"id":"a"}])'
same "contains of a string and a number: jq's" jq "$OBJ" -c '.owner | contains(1)'
same "test: a lazy quantifier: jq's" jq "$OBJ" '.id | test("d+?")'
same "test: an empty branch: jq's" jq "$OBJ" '.id | test("d|")'
same "test: an escaped letter or -: jq's" jq "$OBJ" '.id | test("d\\-")'
same "test of a number: jq's" jq "$OBJ" '.zero | test("0")'
# --- inputs: several values, -s, -R, files ------------------------------------------
printf '%s' "$OBJ" >"$TMP/api.json"
printf '{"call":"launch","n":1}\n{"call":"list"}\n{"call":"launch","n":2}\n' >"$TMP/calls.log"
same "several values, each" fast $'{"a":1} {"a":2}\n[3]' -c '.a?'
same "-s: several values in one array" fast $'{"a":1} {"a":2}\n[3]' -c -s '.'
same "-s: one number" fast '5' -c -s '.'
same "-s: nothing" fast '' -c -s '.'
same "-s: numbers in a row: jq's" jq '1 2 3' -c -s '.'
same "-s: strings in a row (jq -R . | jq -sc .)" fast $'"a"\n"b" "c\\"d"\n""' -c -s '.'
same "-s: a string, then a number: jq's" jq '"a" 1' -c -s '.'
same "several values: -e is the last one's" fast $'{"a":1}\n{"a":null}' -e '.a'
same "several values: -e, the last one has no output" fast $'{"a":1}\n{"a":2}' -e '.a | select(. == 1)'
same "-R: lines" fast $'a\n\nb\tc\r' -R -c '.'
same "-R -e: the last line's" fast $'a\nb' -R -e 'select(. == "a")'
same "-Rs: all the text" fast $'a\nb' -Rs -c 'split("\n")'
same "-R -s" fast $'{"x":1}\nb' -R -s -c '.'
same "-R: invalid UTF-8: jq's" jq $'\xff' -R '.'
same "long options" fast "$OBJ" --raw-output --compact-output '.items, .id'
same "--slurpfile" fast "$OBJ" -e --slurpfile a "$TMP/api.json" '. == $a[0]'
same "--rawfile" fast 'null' -c --rawfile t "$TMP/calls.log" '$t | split("\n") | length'
same "a file argument" fast '' -s '[.[] | select(.call == "launch")] | length' "$TMP/calls.log"
same "a file argument, each value" fast '' -c '.n' "$TMP/calls.log"
same "two file arguments: jq's" jq '' -c '.' "$TMP/calls.log" "$TMP/api.json"
same "-n with -s: jq's" jq '' -n -s '.'
# errors and what is outside the subset: jq's
same "select: an error is jq's" jq "$OBJ" '.items[] | select(.id | length > 0) | .n | length | .x'
same "sort of an object" jq "$OBJ" 'sort'
same "keys of a string" jq '"s"' 'keys'
same "join of arrays" jq '[[1],[2]]' 'join(",")'
same "a fractional index" jq "$OBJ" '.items[0.5]'
same "has of a number on an object" jq "$OBJ" 'has(1)'
same "an unknown \$name" jq "$OBJ" '$nope'
same "an escape \\u" jq "$OBJ" '"\u00e9"'
same "def" jq "$OBJ" 'def f: .id; f'
same "reduce" jq '[1,2]' 'reduce .[] as $x (0; . + $x)'
same "assignment" jq "$OBJ" -c '.id = 1 | .id'
same "a slice" jq '[1,2,3]' -c '.[1:2]'
same "a computed key" jq "$OBJ" -c '{(.id): 1}'
same "regular expressions" jq "$OBJ" 'test("x")'
same "if without else (1.6 refuses)" jq "$OBJ" 'if . then 1 end'
same "subtraction of strings" jq "$OBJ" '.id - "d"'
same "adding a number to a string" jq "$OBJ" '.id + 1'
same "an object value with two outputs" jq "$OBJ" -c '{a: (1,2)}'
same "an error inside //" jq "$OBJ" -c '.id.x // 1'

# --- what it leaves to jq ------------------------------------------------------
same "another option" jq "$OBJ" -S .
same "slurp" fast "$OBJ" -s length
same "an empty file argument: no output" fast "" -r .id "$TMP/e1"
same "recursion" jq "$OBJ" -c '[..|numbers]'
same "optional" fast "$OBJ" '.id?'
same "key of a number: jq's error" jq "$OBJ" .resource_version.x
same "index of an object: jq's error" jq "$OBJ" '.status[0]'
same "iteration of null: jq's error" jq "$OBJ" '.nothing[]'
same "length of a boolean: jq's error" jq "$OBJ" '.status.ok | length'
same "two documents" fast '{"id":1} {"id":2}' .id
same "empty input: no output" fast '' .id
same "white space only, -e: no output, 0" fast ' ' -e '.x'
same "malformed input" jq '{"id":' .id
same "duplicate keys" jq '{"id":1,"id":2}' .id
same "NUL in a string" jq '{"id":"a\u0000b"}' -r .id
same "minus zero" jq '{"z":-0}' .z
same "minus zero in an array" jq '[1,-0]' -c .
same "an integer past 64 bits" jq '{"n":123456789012345678901234567890}' .n
same "a number past a double" jq '{"n":1e400}' .n
same "invalid UTF-8" jq $'{"s":"\xff"}' -r .s

# --- numbers: 3,000 of every size through both printers -----------------------------
nums=$(python3 -S - <<'EOF'
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
