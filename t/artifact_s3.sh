#!/usr/bin/env bash
# artifact_s3.sh — artifacts whose bytes are not on the head (issue 14,
# items 1-2): an operator's S3 store (moto_server in S3 mode behind
# t/lib/s3_helper.py, which checks every signature with botocore and logs
# every request) and a read-only http source on loopback
# (t/lib/range_server.py; https takes the same code path).
#   - stores: admin-only writes, the secret never shown, bad fields and
#     endpoints refused, 409 on delete while an artifact uses one;
#   - import of s3://BUCKET/PREFIX and of a directory listed in
#     drover-files.txt and of a single file: the head's manifest has the
#     files' real digests; refusals (a missing prefix, an unknown bucket, a
#     store whose secret is wrong: S3's 403, a source that answers 404 or
#     401, a list with "../") exit 1 with the reason; those the head reads
#     in the background (head/imports.c) leave a failed artifact with the
#     reason, deletable; the others create nothing;
#   - a manifest for s3://.../PREFIX whose blobs are not in the bucket: 409;
#     once they are (PREFIX/blobs/sha256/HEX): created, layout "blobs";
#   - replicas of the s3 and the http artifact see exactly those bytes (they
#     check them themselves); the node read them through presigned URLs
#     (never the store's key: its requests are query-signed) and through
#     the http source, after the head's redirects;
#   - one byte flipped in the bucket: a new node's replica fails naming the
#     chunk and the mismatch, no process started.
# shellcheck disable=SC2086
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}
LIB=$DROVER_SRC/t/lib

MOTO=$(command -v moto_server || true)
[ -z "$MOTO" ] && [ -x /root/.pyenv/shims/moto_server ] && MOTO=/root/.pyenv/shims/moto_server
if [ -z "$MOTO" ]; then
    fail "moto_server is installed (pip install 'moto[server]'): this test needs the S3 emulator"
    t_done
fi
python3 -c 'import botocore' 2>/dev/null || { fail "python3 has botocore (it comes with moto)"; t_done; }

BG=()
bg() { "$@" & BG+=($!); }
stop_bg() { local p; for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done; }
trap 'stop_bg; _workers_cleanup' EXIT
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

SECRET="s3-secret-$RANDOM"
echo "{\"AKIDS3TEST\": \"$SECRET\"}" >"$TMP/keys.json"
: >"$TMP/calls.log"
MPORT=$(free_port)
bg "$MOTO" -H 127.0.0.1 -p "$MPORT" >"$TMP/moto.log" 2>&1
PPORT=$(free_port)
bg python3 "$LIB/s3_helper.py" proxy "$PPORT" "$MPORT" "$TMP/calls.log" "$TMP/keys.json"
mkdir -p "$TMP/web/w/sub" "$TMP/locked"
bg python3 -S "$LIB/range_server.py" --root "$TMP/web" --port-file "$TMP/web.port"
bg python3 -S "$LIB/range_server.py" --root "$TMP/locked" --port-file "$TMP/locked.port" --token t0k
wait_until 60 "moto_server, the proxy and the http sources listen" \
    eval 'port_up $MPORT && port_up $PPORT && [ -s "$TMP/web.port" ] && [ -s "$TMP/locked.port" ]' ||
    { fail "moto_server starts"; cat "$TMP/moto.log"; t_done; }
WEB=http://127.0.0.1:$(cat "$TMP/web.port")
LOCKED=http://127.0.0.1:$(cat "$TMP/locked.port")
BUCKET=drover-models
M="http://127.0.0.1:$MPORT"   # moto itself: the operator's side, unsigned
# mput FILE KEY: put an object straight into moto (which checks no
# signature but refuses anonymous overwrites: a header it does not check)
mput() {
    curl -s -f -H "Content-Type: application/octet-stream" -T "$1" -o /dev/null \
        -H "Authorization: AWS4-HMAC-SHA256 Credential=AKIDS3TEST/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0" \
        "$M/$BUCKET/$2"
}
st=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$M/$BUCKET")
eq "the bucket is created in moto" "$st" 200

# the files, put straight into the bucket (as an operator's tooling would)
T=$TMP/tree
mkdir -p "$T/sub"
head -c 200000 /dev/urandom >"$T/big.bin"
printf 'tokenizer v1\n' >"$T/tok.txt"
head -c 5000 /dev/urandom >"$T/sub/other.bin"
for f in big.bin tok.txt sub/other.bin; do
    mput "$T/$f" "llama/$f" || fail "put $f into moto"
done
(cd "$T" && sha256sum big.bin tok.txt sub/other.bin) >"$TMP/expected"
# the http source's files are other bytes (blobs are shared by content: a
# node reads a blob from any artifact of its owner that holds it)
head -c 70000 /dev/urandom >"$TMP/web/w/big.bin"
printf 'tokenizer v2\n' >"$TMP/web/w/tok.txt"
head -c 3000 /dev/urandom >"$TMP/web/w/sub/other.bin"
(cd "$TMP/web/w" && sha256sum big.bin tok.txt sub/other.bin) >"$TMP/expected-h"
printf '# the files of w\nbig.bin\n\ntok.txt\nsub/other.bin\n' >"$TMP/web/w/drover-files.txt"
cp "$T/tok.txt" "$TMP/locked/tok.txt"

PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1

# ---- stores ---------------------------------------------------------------------------------
cat >"$TMP/store.yaml" <<EOF
store:
  id: models
  endpoint: http://127.0.0.1:$PPORT
  region: us-east-1
  bucket: $BUCKET
  path_style: true
  access_key_id: AKIDS3TEST
  secret_access_key: $SECRET
  description: the team's model bucket
EOF
cli apply -f "$TMP/store.yaml"
rc "drover apply adds store 'models'" 0
cli get stores -o json
rc "get stores" 0
jqc "the store is listed with its fields, the secret hidden" \
    '.[0].id == "models" and .[0].bucket == "'$BUCKET'" and .[0].path_style == true and
     .[0].secret_access_key == "(hidden)"' "$OUT"
cli get stores
contains "get stores shows the bucket" "$OUT" "$BUCKET"
cli describe store models
contains "describe store: the secret is hidden" "$OUT" "(hidden)"
cli apply -f "$TMP/store.yaml"
rc "applying it again" 0
grep -q "$SECRET" "$DDIR/droverd.log" 2>/dev/null && fail "the secret is not in droverd's log" ||
    ok "the secret is not in droverd's log"
api POST /v1/stores -d '{"id":"x","endpoint":"ftp://h","bucket":"abc","access_key_id":"a","secret_access_key":"b"}'
status "a store with an ftp endpoint" 400
contains "... the error names the endpoint" "$BODY" "endpoint"
api POST /v1/stores -d '{"id":"x","endpoint":"http://h:9000/path","bucket":"abc","access_key_id":"a","secret_access_key":"b"}'
status "a store endpoint with a path" 400
api POST /v1/stores -d '{"id":"x","endpoint":"http://h:9000","bucket":"abc","access_key_id":"a","secret_access_key":"b","colour":"red"}'
status "a store with an unknown field" 400
api POST /v1/stores -d '{"id":"x","endpoint":"http://h:9000","bucket":"Bad_Bucket","access_key_id":"a","secret_access_key":"b"}'
status "a store with a bad bucket name" 400
api POST /v1/stores -d "{\"id\":\"wrongkey\",\"endpoint\":\"http://127.0.0.1:$PPORT\",\"bucket\":\"other-bucket\",\"path_style\":true,\"access_key_id\":\"AKIDS3TEST\",\"secret_access_key\":\"not-it\"}"
status "a store whose secret is wrong (nothing checks it at creation)" 201
api POST /v1/users -d '{"id":"bob","role":"member"}'
BOB=$(jq -r .token.secret <<<"$BODY")
as "$BOB" api POST /v1/stores -d '{"id":"mine","endpoint":"http://h:9000","bucket":"abc","access_key_id":"a","secret_access_key":"b"}'
status "a member cannot add a store" 403
as "$BOB" api GET /v1/stores/models
status "a member reads a store" 200
jqc "... without its secret" '.secret_access_key == "(hidden)"'

# failed_then_deleted ID...: imports the head read in the background and
# refused: each visible as failed with its reason, then deleted
failed_then_deleted()
{
    local a
    for a in "$@"; do
        api GET /v1/artifacts/$a
        jqc "... $a is visible as failed with its reason" '.status.state == "failed" and (.status.reason | length) > 0'
        api DELETE /v1/artifacts/$a
        status "... and deletable" 200
    done
}
# ---- import from S3 -----------------------------------------------------------------------------
cli artifact import --id s1 --source "s3://$BUCKET/llama"
rc "import s3://$BUCKET/llama" 0
api GET /v1/artifacts/s1
XFILES=$(jq -Rsc 'split("\n") | map(select(. != "")) | sort' "$TMP/expected")
jqc "the manifest has the three files with their sha256s, store and layout set" \
    '.store == "models" and .layout == "files" and (.manifest.files | length) == 3 and
     ([.manifest.files[] | "\(.sha256)  \(.path)"] | sort) == '"$XFILES"
cli describe artifact s1
contains "describe shows the store" "$OUT" "Store:        models (layout files)"
n_before=$(list_all /v1/artifacts | jq length)
cli artifact import --id s2 --source "s3://$BUCKET/nothing-here"
rc "import of an empty prefix fails" 1
contains "... saying it holds nothing" "$ERR" "holds no object"
cli artifact import --id s3 --source "s3://no-such-bucket/x"
rc "import from a bucket no store has" 1
contains "... saying no store has it" "$ERR" "no store has bucket 'no-such-bucket'"
cli artifact import --id s4 --source "s3://other-bucket/x"
rc "import through a store whose secret is wrong" 1
contains "... with S3's 403" "$ERR" "SignatureDoesNotMatch"
cli artifact import --id s5 --source "s3://$BUCKET/llama" --store nope
rc "import naming an unknown store" 1
contains "... naming it" "$ERR" "store 'nope' not found"
failed_then_deleted s2 s4
eq "no artifact is left by the refusals" "$(list_all /v1/artifacts | jq length)" "$n_before"

# ---- a pushed layout: the manifest's blobs must be in the bucket ------------------------------
MAN=$(api GET /v1/artifacts/s1; jq -c .manifest <<<"$BODY")
api POST /v1/artifacts -d "{\"id\":\"p1\",\"source\":\"s3://$BUCKET/pushed\",\"manifest\":$MAN}"
status "a manifest whose blobs are not in s3://$BUCKET/pushed" 409
contains "... naming what is missing" "$BODY" "missing"
for f in big.bin tok.txt sub/other.bin; do
    h=$(sha256sum "$T/$f" | cut -d' ' -f1)
    mput "$T/$f" "pushed/blobs/sha256/$h" || fail "put blob $h into moto"
done
api POST /v1/artifacts -d "{\"id\":\"p1\",\"source\":\"s3://$BUCKET/pushed\",\"manifest\":$MAN}"
status "... once they are at PREFIX/blobs/sha256/HEX" 201
jqc "... layout blobs" '.layout == "blobs" and .store == "models"'
api DELETE /v1/artifacts/p1
status "delete p1 (its blobs are s1's: reads would go to either)" 200
api POST /v1/artifacts -d "{\"id\":\"p2\",\"source\":\"s3://$BUCKET/pushed\",\"layout\":\"files\",\"manifest\":$MAN}"
status "layout is the server's" 400

# ---- push --store: parts straight to the bucket through presigned URLs ------------------------
P=$TMP/ptree
mkdir -p "$P/d"
head -c $((9 * 1024 * 1024 + 777)) /dev/urandom >"$P/weights.bin"   # two 8 MiB parts
printf 'config v1\n' >"$P/config.json"
cp "$P/config.json" "$P/d/copy.json"
(cd "$P" && sha256sum weights.bin config.json d/copy.json) >"$TMP/expected-p"
PDISTINCT=$((9 * 1024 * 1024 + 777 + 10))
# a push cut off after one part: the plan, and part 1 of weights.bin sent by hand
"$(dirname "$DROVERD")/t/cache_tool" manifest "$P" 1048576 >"$TMP/p.json"
: >"$TMP/calls.log"
api POST /v1/stores/models/uploads -d "{\"manifest\":$(cat "$TMP/p.json"),\"prefix\":\"team\"}"
status "an upload plan for the tree" 200
jqc "... two blobs to send (the copy is the same blob), weights.bin in two parts" \
    '(.blobs | length) == 2 and .missing_bytes == '$PDISTINCT' and
     (.blobs[] | select(.path == "weights.bin") | .parts | length) == 2'
PART1=$(jq -r '.blobs[] | select(.path == "weights.bin") | .parts[0].url' <<<"$BODY")
head -c $((8 * 1024 * 1024)) "$P/weights.bin" >"$TMP/part1"
curl -s -f -T "$TMP/part1" "$PART1" -o /dev/null
eq "... part 1 PUT by hand through its presigned URL" "$?" 0
api POST /v1/stores/models/uploads -d "{\"manifest\":$(cat "$TMP/p.json"),\"prefix\":\"team\"}"
jqc "a second plan resumes that upload: part 1 comes with its ETag, no URL" \
    '.missing_bytes == '$((PDISTINCT - 8 * 1024 * 1024))' and
     (.blobs[] | select(.path == "weights.bin") | .parts[0] | has("etag") and (has("url") | not))'
cli artifact push "$P" --id ps1 --store models --prefix team --chunk-size 1M
rc "push --store models (resuming)" 0
contains "... says what it sent" "$OUT" "on store models"
api GET /v1/artifacts/ps1
jqc "... the artifact is on the store, layout blobs" \
    '.source == "s3://'$BUCKET'/team" and .store == "models" and .layout == "blobs" and .status.file_count == 3'
jqq -s 'map(select(.method == "PUT")) | length == 3 and all(.[]; .auth == "query" and .status == 200)' \
    "$TMP/calls.log" && ok "... three parts PUT in all through presigned URLs (1 by hand, then part 2 and config)" ||
    { fail "... three parts PUT in all through presigned URLs"; why "$(cat "$TMP/calls.log")"; }
eq "... the bucket got each distinct byte once (the resumed push did not resend part 1)" \
    "$(jq -s 'map(select(.method == "PUT") | .in) | add' "$TMP/calls.log")" "$PDISTINCT"
jqq -s 'all(.[]; .method != "PUT" or (.path | test("^/'$BUCKET'/team/blobs/sha256/[0-9a-f]{64}$")))' \
    "$TMP/calls.log" && ok "... at PREFIX/blobs/sha256/HEX" || fail "... at PREFIX/blobs/sha256/HEX"
: >"$TMP/calls.log"
cli artifact push "$P" --id ps2 --store models --prefix team --chunk-size 1M
rc "a second push of the same tree" 0
eq "... sends nothing (every blob is in the bucket)" "$(jq -s 'map(select(.method == "PUT")) | length' "$TMP/calls.log")" 0
n_before=$(list_all /v1/artifacts | jq length)
cli artifact push "$P" --id ps3 --store nope
rc "push to an unknown store" 1
contains "... says so" "$ERR" "store 'nope' not found"
cli artifact push "$P" --id ps3 --store wrongkey
rc "push through a store whose secret is wrong" 1
contains "... with S3's 403" "$ERR" "S3 answered 403"
eq "no artifact was created by the refusals" "$(list_all /v1/artifacts | jq length)" "$n_before"
Z64=$(printf '0%.0s' $(seq 64))
api POST /v1/stores/models/uploads -d "{\"manifest\":{\"version\":1,\"chunk_size\":67108864,\"total_size\":5497558138880,\"files\":[{\"path\":\"x\",\"size\":5497558138880,\"sha256\":\"$Z64\",\"chunks\":[]}],\"digest\":\"$Z64\"}}"
status "an upload plan with a 5 TiB file" 400
contains "... naming the bound" "$BODY" "files[0].size"
BAD=$(api GET /v1/artifacts/ps1; jq -c '.manifest | .files[0].sha256 = "'"$Z64"'"' <<<"$BODY")
api POST /v1/artifacts -d "{\"id\":\"ps4\",\"source\":\"s3://$BUCKET/team\",\"manifest\":$BAD}"
status "a manifest with a wrong sha256 for the store" 400
api POST /v1/stores/models/uploads -d '{"manifest":{},"bogus":1}'
status "an upload plan with an unknown field" 400
api POST /v1/stores/models/uploads/complete -d '{"sha256":"00","size":1,"upload_id":"x","etags":["e"]}'
status "completing a blob named by a bad sha256" 400

# ---- import from http(s) --------------------------------------------------------------------------
cli artifact import --id h1 --source "$WEB/w/"
rc "import a directory listed in drover-files.txt" 0
api GET /v1/artifacts/h1
XH=$(jq -Rsc 'split("\n") | map(select(. != "")) | sort' "$TMP/expected-h")
jqc "... its manifest has the three files with their sha256s" \
    '.layout == "files" and ([.manifest.files[] | "\(.sha256)  \(.path)"] | sort) == '"$XH"
cli artifact import --id h2 --source "$WEB/w/tok.txt" -o json
rc "import a single file" 0
jqc "... named by the URL's last segment" '.manifest.files | length == 1 and .[0].path == "tok.txt"' "$OUT"
n_before=$(list_all /v1/artifacts | jq length)
cli artifact import --id h3 --source "$WEB/w/missing.bin"
rc "a file that answers 404" 1
contains "... says so" "$ERR" "answered 404"
cli artifact import --id h4 --source "$LOCKED/tok.txt"
rc "a source that refuses (401)" 1
contains "... says so" "$ERR" "answered 401"
mkdir -p "$TMP/web/bad"
printf 'ok.txt\n../../etc/passwd\n' >"$TMP/web/bad/drover-files.txt"
cli artifact import --id h5 --source "$WEB/bad/"
rc "a list naming ../" 1
contains "... names the line" "$ERR" "line 2"
cli artifact import --id h6 --source "$WEB/nolist/"
rc "a directory without drover-files.txt" 1
contains "... says the list answered 404" "$ERR" "drover-files.txt answered 404"
cli artifact import --id h7 --source "ftp://x/y"
rc "an unknown scheme" 2
failed_then_deleted h3 h4 h5 h6
eq "no artifact is left by the refusals" "$(list_all /v1/artifacts | jq length)" "$n_before"

# ---- replicas read them -----------------------------------------------------------------------------
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
for np in np1 np2; do
    api POST /v1/clusters/sm/nodepools -d "{\"id\":\"$np\",\"instance_types\":[\"self-l4\"],\"min_nodes\":0,\"max_nodes\":2}"
    status "create nodepool $np" 201
done
api POST /v1/clusters/sm/nodepools/np1/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
JOIN1=$(jq -r .secret <<<"$BODY")
api POST /v1/clusters/sm/nodepools/np2/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
JOIN2=$(jq -r .secret <<<"$BODY")
mkdir -p "$TMP/markers"
for a in s1 h1 ps1; do
    exp=$TMP/expected
    [ $a == h1 ] && exp=$TMP/expected-h
    [ $a == ps1 ] && exp=$TMP/expected-p
    cmd=$(jq -nc --arg s "$LIB/model_dir_check.py" --arg e "$exp" --arg m "$TMP/markers" \
          '["python3", "-S", $s, $e, $m]')
    api POST /v1/models -d "{\"id\":\"m-$a\",\"artifact\":{\"id\":\"$a\"},\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
    status "create model m-$a with artifact $a" 201
    api POST /v1/deployments -d "{\"id\":\"d-$a\",\"model\":\"m-$a\",\"nodepools\":[{\"cluster\":\"sm\",\"nodepool\":\"np1\"}],\"autoscale\":{\"min_replicas\":1,\"max_replicas\":1}}"
    status "create deployment d-$a" 201
done
api DELETE /v1/stores/models
status "a store an artifact uses cannot be deleted" 409
contains "... naming an artifact" "$BODY" "is used by artifact"
: >"$TMP/calls.log"
start_agent a1 --join-token "$JOIN1"
for a in s1 h1 ps1; do
    wait_check "$W" "d-$a: its replica is ready" replicas_ready "d-$a" 1
    id=$(replicas_json "deployment=d-$a" | jq -r '.[0].id')
    eq "d-$a's replica checked its model dir: exact and read-only" "$(cat "$TMP/markers/$id" 2>/dev/null)" ok
done
jqq -s 'map(select(.method == "GET")) | length == 14 and all(.[]; .auth == "query" and .status == 206)' \
    "$TMP/calls.log" &&
    ok "the node read the bucket through presigned URLs only, ranged (206)" ||
    { fail "the node read the bucket through presigned URLs only, ranged (206)"; why "$(cat "$TMP/calls.log")"; }
bytes=$(jq -s 'map(select(.method == "GET") | .out) | add' "$TMP/calls.log")
eq "the bucket sent the two artifacts' bytes once" "$bytes" $((200000 + 13 + 5000 + PDISTINCT))
grep -q "$SECRET" "$TMP/agents/a1.log" "$TMP"/agents/a1/*.json 2>/dev/null &&
    fail "the store's secret never reaches the node" || ok "the store's secret never reaches the node"
api GET /metrics
redirects=$(grep '^drover_blob_redirects_total ' <<<"$BODY" | awk '{print $2}')
eq "the head redirected each chunk read (3 + 3 one-chunk blobs, 10 + 1 chunks of ps1's)" "$redirects" 17

# ---- a flipped byte in the bucket: detected, never served ------------------------------------------
# a1 goes first: it holds the good bytes and would serve them to a2 as a peer
kill -TERM "${AG_PID[a1]}"
wait "${AG_PID[a1]}"
eq "agent a1 exits 0 on SIGTERM" "$?" 0
python3 -S - "$T/big.bin" "$TMP/flipped" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[150000] ^= 0xFF
open(sys.argv[2], "wb").write(b)
PY
mput "$TMP/flipped" llama/big.bin
eq "one byte of llama/big.bin flipped in the bucket" "$?" 0
api POST /v1/deployments -d '{"id":"d2","model":"m-s1","nodepools":[{"cluster":"sm","nodepool":"np2"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment d2 (np2)" 201
start_agent a2 --join-token "$JOIN2"
failed_reason() {
    api GET "/v1/events?kind=deployment&object=d2&limit=1000"
    jq -e '.items | map(select(.type == "replica_failed")) | length > 0' <<<"$BODY" >/dev/null
}
wait_check "$W" "d2: an event says its replica failed" failed_reason
BIG=$(sha256sum "$T/big.bin" | cut -d' ' -f1)
jqc "the event's reason names the blob, chunk 0 and the mismatch" \
    '.items | map(select(.type == "replica_failed")) | .[0].reason |
     test("chunk 0") and test("'"$BIG"'") and test("mismatch")'
started=0
for id in $(replicas_json deployment=d2 | jq -r '.[].id'); do
    [ -e "$TMP/markers/$id" ] && started=1
done
eq "no d2 process ever started" "$started" 0
grep -q 'X-Amz-Signature' "$TMP/agents/a2.log" && fail "the agent's log shows no presigned signature" ||
    ok "the agent's log shows no presigned signature"

cli delete store wrongkey
rc "delete store wrongkey (no artifact uses it)" 0
kill -TERM "${AG_PID[a2]}"
wait "${AG_PID[a2]}"
eq "agent a2 exits 0 on SIGTERM" "$?" 0
# ---- a head restart: the store (and its secret) is durable ---------------------------------------
droverd_stop TERM
eq "droverd exits 0 on SIGTERM" "$DEXIT" 0
droverd_start "$DDIR" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api GET /v1/stores/models
jqc "after a restart the store is there, its secret still hidden" '.bucket == "'$BUCKET'" and .secret_access_key == "(hidden)"'
cli artifact import --id s9 --source "s3://$BUCKET/llama"
rc "... and its stored secret still signs (an import works)" 0
api GET /v1/artifacts/s9
jqc "... reading the bucket as it is now (the flipped big.bin has another sha256)" \
    '[.manifest.files[] | select(.path == "big.bin") | .sha256] == ["'"$(sha256sum "$TMP/flipped" | cut -d' ' -f1)"'"]'
logs_sanitizer_clean artifact_s3 "${EXTRA_AGENT_LOGS[@]}"
droverd_finish artifact_s3
t_done
