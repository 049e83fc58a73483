#!/usr/bin/env bash
# artifacts.sh — artifacts in the head's embedded drover:// store: `drover
# artifact push` of a small tree (a file over the chunk size, an empty file,
# a nested dir, a repeated content), get/describe/delete, ranged blob reads
# as a node (node credential) and as the owner (the bytes match; another
# user gets 404), a model with `artifact: {id}` (unknown id 400, delete of a
# used artifact 409); a resumed upload (chunks PUT by hand first, the
# head's `missing` shrinks and push sends only the rest), a head restart
# mid-upload keeping what it got; and bad input (missing path, symlink out
# of the tree, wrong chunk sha256, wrong length, absurd size, malformed
# manifest, unknown source scheme, unknown upload, missing blobs), each a
# clear 4xx / exit 1 with nothing created.
. "$(dirname "$0")/lib/common.bash"

droverd_start "$TMP/d" || exit 1

# sha FILE: its sha256
sha() { sha256sum "$1" | cut -d' ' -f1; }
n_artifacts() { api GET /v1/artifacts; jq '.items | length' <<<"$BODY"; }

# ---- a tree: big.bin spans 3 chunks of 4 KiB (the last short) ---------------------------
T=$TMP/tree
mkdir -p "$T/sub/deeper"
head -c 10000 /dev/urandom >"$T/big.bin"
printf 'hello\n' >"$T/sub/a.txt"
: >"$T/empty"
printf 'hello\n' >"$T/sub/deeper/same-as-a.txt"
head -c 4096 /dev/urandom >"$T/sub/deeper/exact.bin"
ln -s big.bin "$T/link-in-tree"

cli artifact push "$T" --id w1 --chunk-size 4096
rc "push a tree" 0
contains "push says what it created" "$OUT" "artifact/w1 created: 6 file(s)"
api GET /v1/artifacts/w1
status "GET /v1/artifacts/w1" 200
jqc "artifact: source drover://, 6 files, total size, digest" \
    '.source == "drover://" and .status.file_count == 6 and .status.total_size == (10000+6+0+6+4096+10000)
     and (.status.digest | test("^[0-9a-f]{64}$")) and .status.digest == .manifest.digest'
jqc "manifest: big.bin has 3 chunks, empty has none, nested paths" \
    '(.manifest.files | map({(.path): (.chunks | length)}) | add) ==
     {"big.bin": 3, "empty": 0, "link-in-tree": 3, "sub/a.txt": 1, "sub/deeper/exact.bin": 1, "sub/deeper/same-as-a.txt": 1}'
DIGEST=$(jq -r .status.digest <<<"$BODY")
test -f "$DDIR/blobs/sha256/$(sha "$T/big.bin")" && ok "big.bin is a blob in DATA_DIR/blobs/sha256" ||
    fail "big.bin is a blob in DATA_DIR/blobs/sha256"
cmp -s "$T/big.bin" "$DDIR/blobs/sha256/$(sha "$T/big.bin")" && ok "the stored blob is the file's bytes" ||
    fail "the stored blob is the file's bytes"
eq "no temporary file is left" "$(find "$DDIR/blobs/tmp" -type f | wc -l)" 0

cli get artifacts
rc "get artifacts" 0
contains "get artifacts: a row for w1" "$OUT" "w1"
cli get artifacts -o json
jqc "get artifacts -o json: a list of one" 'length == 1 and .[0].id == "w1"' "$OUT"
cli describe artifact w1
rc "describe artifact w1" 0
contains "describe: the digest" "$OUT" "$DIGEST"
contains "describe: a nested file" "$OUT" "sub/deeper/exact.bin"
contains "describe: no model uses it yet" "$OUT" "<none>"

cli artifact push "$T" --id w1 --chunk-size 4096
rc "pushing again under a taken id" 1
contains "... says it exists" "$ERR" "already exists"

# ---- blob reads ---------------------------------------------------------------------------
BIG=$(sha "$T/big.bin")
curl -s -H "Authorization: Bearer $ADMIN" -H "Range: bytes=4000-8999" -o "$TMP/range" -w '%{http_code}' \
    "$URL/v1/blobs/sha256/$BIG" >"$TMP/code"
eq "owner: a ranged read answers 206" "$(cat "$TMP/code")" 206
eq "owner: the range's bytes match" "$(sha "$TMP/range")" "$(tail -c +4001 "$T/big.bin" | head -c 5000 | sha256sum | cut -d' ' -f1)"
eq "owner: the whole blob (no Range) is the file" \
    "$(curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/blobs/sha256/$BIG" | sha256sum | cut -d' ' -f1)" "$BIG"
api GET "/v1/blobs/sha256/$BIG" -H "Range: bytes=20000-"
status "owner: a range past the end" 416

# a node of admin's (a self-managed nodepool's join token, registered by hand)
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":2}'
api POST /v1/clusters/sm/nodepools/np/join-tokens -d '{"uses":10,"id":"j"}'
JOIN=$(jq -r .secret <<<"$BODY")
as "$JOIN" api POST /v1/agent/register -d '{"hostname":"n1"}'
status "a node registers" 201
NODE=$(jq -r .credential <<<"$BODY")
pids=()
for r in "0-4095" "4096-8191" "8192-9999"; do   # three ranges at once, as a cache fetches chunks
    curl -s -H "Authorization: Bearer $NODE" -H "Range: bytes=$r" -o "$TMP/node.$r" "$URL/v1/blobs/sha256/$BIG" &
    pids+=($!)
done
wait "${pids[@]}"
cat "$TMP/node.0-4095" "$TMP/node.4096-8191" "$TMP/node.8192-9999" >"$TMP/node.all"
cmp -s "$TMP/node.all" "$T/big.bin" && ok "node: three concurrent ranges put together are the file" ||
    fail "node: three concurrent ranges put together are the file"

api POST /v1/users -d '{"id":"bob"}'
BOB=$(jq -r .token.secret <<<"$BODY")
as "$BOB" api GET "/v1/blobs/sha256/$BIG"
status "another user cannot read the blob" 404
TOKEN="" api GET "/v1/blobs/sha256/$BIG"
status "no token" 401
as "$BOB" api POST /v1/artifacts/uploads --data-binary "{\"manifest\": $(api GET /v1/artifacts/w1; jq -c .manifest <<<"$BODY")}"
status "bob starts an upload of the same manifest" 201
jqc "... he must send every chunk himself (knowing a sha256 is not holding it)" \
    '(.missing | length) == 3 and .missing_bytes == (10000+6+4096)'
as "$BOB" api POST /v1/artifacts -d "{\"id\":\"stolen\",\"source\":\"drover://\",\"upload\":\"$DIGEST\"}"
status "bob cannot create an artifact of blobs he never sent" 409
contains "... the 409 names a missing blob" "$BODY" "not whole in the store"

# ---- models ------------------------------------------------------------------------------
MODEL='{"id":"m1","runtime":{"command":["true"]},"artifact":{"id":"w1"}}'
api POST /v1/models -d "$MODEL"
status "a model with artifact: {id: w1}" 201
api POST /v1/models -d '{"id":"m2","runtime":{"command":["true"]},"artifact":{"id":"nope"}}'
status "a model naming an unknown artifact" 400
contains "... names it" "$BODY" "'nope'"
api POST /v1/models -d '{"id":"m3","runtime":{"command":["true"]},"artifact":{"path":"/srv/w"}}'
status "artifact.path keeps working" 201
api POST /v1/models -d '{"id":"m4","runtime":{"command":["true"]},"artifact":{"path":"/srv/w","id":"w1"}}'
status "artifact with both path and id" 400
cli describe artifact w1
contains "describe lists the model using it" "$OUT" "  m1"
cli delete artifact w1
rc "delete artifact used by a model" 1
contains "... 409 names the model" "$ERR" "model 'm1'"
api DELETE /v1/models/m1
api DELETE /v1/models/m3
cli delete artifact w1
rc "delete artifact w1" 0
api GET /v1/artifacts/w1
status "w1 is gone" 404

# ---- resume: PUT some chunks by hand, then push sends only the rest --------------------------
R=$TMP/tree2
mkdir -p "$R"
head -c 20000 /dev/urandom >"$R/r.bin"
head -c 5000 /dev/urandom >"$R/s.bin"
cs=4096
chunks_json() { # FILE: its chunks' sha256s as a JSON array
    local f=$1 size i n out=""
    size=$(stat -c %s "$f"); n=$(( (size + cs - 1) / cs ))
    for ((i = 0; i < n; i++)); do
        out+="\"$(dd if="$f" bs=$cs skip=$i count=1 2>/dev/null | sha256sum | cut -d' ' -f1)\","
    done
    echo "[${out%,}]"
}
manifest_json() { # digest-less manifest of r.bin and s.bin, then digest it
    local body
    body="{\"version\":1,\"chunk_size\":$cs,\"total_size\":25000,\"files\":[{\"path\":\"r.bin\",\"size\":20000,\"sha256\":\"$(sha "$R/r.bin")\",\"chunks\":$(chunks_json "$R/r.bin")},{\"path\":\"s.bin\",\"size\":5000,\"sha256\":\"$(sha "$R/s.bin")\",\"chunks\":$(chunks_json "$R/s.bin")}]}"
    local d
    d=$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)
    echo "${body%\}},\"digest\":\"$d\"}"
}
M2=$(manifest_json)
api POST /v1/artifacts/uploads -d "{\"manifest\":$M2}"
status "start an upload (hand-written manifest)" 201
jqc "... everything is missing: 5 + 2 chunks" '[.missing[].chunks | length] == [5, 2] and .missing_bytes == 25000'
UP=$(jq -r .id <<<"$BODY")
RSHA=$(sha "$R/r.bin")
put_chunk() { # FILE HEX I
    dd if="$1" bs=$cs skip="$3" count=1 2>/dev/null >"$TMP/chunk"
    api PUT "/v1/artifacts/uploads/$UP/blobs/$2/chunks/$3" --data-binary @"$TMP/chunk" -H 'Content-Type: application/octet-stream'
}
put_chunk "$R/r.bin" "$RSHA" 0
status "PUT chunk 0 of r.bin" 204
put_chunk "$R/r.bin" "$RSHA" 3
status "PUT chunk 3 of r.bin" 204
api GET "/v1/artifacts/uploads/$UP"
jqc "resume: missing shrank to chunks 1, 2, 4 of r.bin (and s.bin's 2)" \
    '.missing[0].chunks == [1, 2, 4] and (.missing[1].chunks | length) == 2 and .missing_bytes == (25000 - 8192)'

# ---- bad chunks: nothing kept ----------------------------------------------------------------
head -c 4096 /dev/urandom >"$TMP/bad"
api PUT "/v1/artifacts/uploads/$UP/blobs/$RSHA/chunks/1" --data-binary @"$TMP/bad"
status "a chunk with the wrong sha256" 400
contains "... names blob, chunk, expected and got" "$BODY" "blob $RSHA chunk 1: sha256 mismatch: expected $(dd if="$R/r.bin" bs=$cs skip=1 count=1 2>/dev/null | sha256sum | cut -d' ' -f1), got $(sha "$TMP/bad")"
head -c 100 /dev/urandom >"$TMP/short"
api PUT "/v1/artifacts/uploads/$UP/blobs/$RSHA/chunks/1" --data-binary @"$TMP/short"
status "a chunk of the wrong length" 400
head -c 5000 /dev/urandom >"$TMP/long"
api PUT "/v1/artifacts/uploads/$UP/blobs/$RSHA/chunks/1" --data-binary @"$TMP/long"
status "a chunk too long" 413
api PUT "/v1/artifacts/uploads/$UP/blobs/$RSHA/chunks/9" --data-binary @"$TMP/bad"
status "a chunk index past the blob's" 404
TOKEN="" api PUT "/v1/artifacts/uploads/$UP/blobs/$RSHA/chunks/1" --data-binary @"$TMP/bad"
status "a chunk without a token" 401
api GET "/v1/artifacts/uploads/$UP"
jqc "after the bad chunks, still missing 1, 2, 4" '.missing[0].chunks == [1, 2, 4]'
eq "no temporary file is left" "$(find "$DDIR/blobs/tmp" -type f | wc -l)" 0
api POST /v1/artifacts -d "{\"id\":\"early\",\"source\":\"drover://\",\"upload\":\"$UP\"}"
status "create before every blob is whole" 409
eq "nothing created" "$(n_artifacts)" 0

# ---- a head restart mid-upload keeps the received chunks ----------------------------------
droverd_stop TERM
droverd_start "$DDIR" || exit 1
TOKEN=$ADMIN
api GET "/v1/artifacts/uploads/$UP"
status "after a restart the upload is there" 200
jqc "... with the chunks it had" '.missing[0].chunks == [1, 2, 4] and .missing_bytes == (25000 - 8192)'

cli artifact push "$R" --id w2 --chunk-size 4096
rc "push resumes the upload" 0
contains "... and sends only what was missing (16808 B)" "$OUT" "16.4 KiB sent"
contains "... same digest as the hand-written manifest" "$OUT" "$UP"
api GET /v1/artifacts/w2
status "w2 exists" 200
cli artifact push "$R" --id w3 --chunk-size 4096 -o json
rc "push of held content" 0
jqc "... -o json prints the artifact" '.id == "w3" and .status.total_size == 25000' "$OUT"

# ---- chunks over the API's 1 MiB body limit stream to a file ---------------------------
mkdir -p "$TMP/large"
head -c $((3 * 1024 * 1024 + 17)) /dev/urandom >"$TMP/large/l.bin"
cli artifact push "$TMP/large" --id large --chunk-size 2M --parallel 2
rc "push with 2 MiB chunks" 0
cmp -s "$TMP/large/l.bin" "$DDIR/blobs/sha256/$(sha "$TMP/large/l.bin")" && ok "... the blob is the file's bytes" ||
    fail "... the blob is the file's bytes"

# ---- bad input: nothing created ----------------------------------------------------------
before=$(n_artifacts)
cli artifact push "$TMP/nope" --id x
rc "push of a missing path" 1
contains "... says so" "$ERR" "No such file or directory"
mkdir -p "$TMP/esc"
printf x >"$TMP/esc/ok"
ln -s /etc/passwd "$TMP/esc/out"
cli artifact push "$TMP/esc" --id x
rc "push of a tree with a symlink leaving it" 1
contains "... names the link" "$ERR" "out"
cli artifact push "$R"
rc "push without --id" 2
cli artifact push "$R" --id x --chunk-size 12
rc "push with a tiny chunk size" 2
api POST /v1/artifacts/uploads -d '{"manifest": {"version":1,'
status "malformed JSON" 400
api POST /v1/artifacts/uploads -d '{"manifest": {"version":1,"chunk_size":4096,"total_size":1,"files":[],"digest":"x"}}'
status "a manifest that does not validate" 400
error_shape "bad manifest"
ABSURD="{\"version\":1,\"chunk_size\":4096,\"total_size\":99999999999999999,\"files\":[{\"path\":\"a\",\"size\":99999999999999999,\"sha256\":\"$RSHA\",\"chunks\":[]}],\"digest\":\"$RSHA\"}"
api POST /v1/artifacts/uploads -d "{\"manifest\":$ABSURD}"
status "a manifest with an absurd size" 400
api POST /v1/artifacts/uploads -d "{\"manifest\":$M2,\"extra\":1}"
status "an upload with an unknown field" 400
api POST /v1/artifacts -d "{\"id\":\"x\",\"source\":\"ftp://h/p\",\"upload\":\"$UP\"}"
status "unknown source scheme" 400
contains "... says so" "$BODY" "unknown scheme"
api POST /v1/artifacts -d "{\"id\":\"x\",\"source\":\"s3://bucket/prefix\",\"store\":\"minio\",\"upload\":\"$UP\"}"
status "s3:// with an upload to the head's store (t/artifact_s3.sh has S3 and https sources)" 400
contains "... says so" "$BODY" "upload names an upload to the head's own store"
api POST /v1/artifacts -d "{\"id\":\"x\",\"source\":\"https://example.com/m\",\"upload\":\"$UP\"}"
status "https:// with an upload" 400
api POST /v1/artifacts -d "{\"id\":\"x\",\"source\":\"s3://bucket/prefix\",\"store\":\"minio\"}"
status "s3:// on a store that does not exist" 422
contains "... says so" "$BODY" "store 'minio' not found"
api POST /v1/artifacts -d '{"id":"x","source":"drover://","upload":"0000000000000000000000000000000000000000000000000000000000000000"}'
status "an unknown upload" 400
api POST /v1/artifacts -d '{"id":"x","source":"drover://"}'
status "neither upload nor manifest" 400
api POST /v1/artifacts -d "{\"id\":\"x\",\"source\":\"drover://\",\"manifest\":$M2}"
status "an inline manifest of held blobs" 201
api DELETE /v1/artifacts/x
api GET /v1/artifacts/uploads/nothex
status "GET an unknown upload" 404
eq "nothing else created" "$(n_artifacts)" "$before"

droverd_finish "artifacts"
t_done
