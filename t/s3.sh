#!/usr/bin/env bash
# s3.sh — src/objstore (S3-compatible stores) against moto_server in S3
# mode on loopback, never real S3, driven by build/t/s3_tool (t/s3_tool.c).
# A checking proxy (t/lib/s3_helper.py) sits in front of moto and, as S3
# does, refuses what is not signed right or has expired (moto checks no
# signature); it logs every request, so the test sees which were presigned.
#   - a ~12 MiB blob at PREFIX/blobs/sha256/HEX, multipart-uploaded through
#     presigned part URLs with curl (the library creates and completes the
#     upload); HEAD gives its size; a ranged GET through a presigned URL
#     gives exactly those bytes, a whole GET the whole blob;
#   - ListObjectsV2 of a prefix in pages of 3: every key, once, in order;
#   - a wrong secret: 403, classified, S3's SignatureDoesNotMatch (library
#     calls and a presigned URL alike); a missing key, bucket or upload: 404,
#     classified; an expired or altered presigned URL: refused;
#   - an aborted upload is gone; bad input is refused clearly.
# shellcheck disable=SC2086
. "$(dirname "$0")/lib/common.bash"
HELPER=$DROVER_SRC/t/lib/s3_helper.py
TOOL=${S3_TOOL:-$(dirname "$DROVERD")/t/s3_tool}
[ -x "$TOOL" ] || { fail "s3_tool is built next to droverd ($TOOL)"; t_done; }

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
trap 'stop_bg' EXIT
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

SECRET="s3-secret-$RANDOM"
echo "{\"AKIDS3TEST\": \"$SECRET\"}" >"$TMP/keys.json"
: >"$TMP/calls.log"
MPORT=$(free_port)
bg "$MOTO" -H 127.0.0.1 -p "$MPORT" >"$TMP/moto.log" 2>&1
PPORT=$(free_port)
bg python3 "$HELPER" proxy "$PPORT" "$MPORT" "$TMP/calls.log" "$TMP/keys.json"
wait_until 60 "moto_server and the proxy listen" eval 'port_up $MPORT && port_up $PPORT' ||
    { fail "moto_server starts"; cat "$TMP/moto.log"; t_done; }

export S3_ENDPOINT=http://127.0.0.1:$PPORT S3_REGION=us-east-1 S3_BUCKET=drover-s3 \
    S3_ACCESS_KEY=AKIDS3TEST S3_SECRET_KEY=$SECRET S3_PATH_STYLE=1
# the bucket, straight at moto (the store is the operator's; drover never creates it)
st=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "http://127.0.0.1:$MPORT/drover-s3")
eq "the test bucket is created in moto" "$st" 200

# tool ARGS...: run s3_tool; $OUT its stdout, $ERR its stderr, $RC its status.
tool() { OUT=$("$TOOL" "$@" 2>"$TMP/err"); RC=$?; ERR=$(cat "$TMP/err"); }
calls() { jq -s "[.[] | select($1)] | length" "$TMP/calls.log"; }

# ---- a blob, multipart through presigned part URLs ----------------------------------
head -c $((12 * 1024 * 1024 + 12345)) /dev/urandom >"$TMP/blob"
SIZE=$(stat -c %s "$TMP/blob")
HEX=$(sha256sum "$TMP/blob" | cut -d' ' -f1)
tool blob-key /models/ "$HEX"
eq "the blob's key is PREFIX/blobs/sha256/HEX" "$OUT" "models/blobs/sha256/$HEX"
KEY=$OUT
tool head "$KEY"
eq "HEAD of a blob not yet there: absent (not an error)" "$RC $OUT" "0 absent"
tool mp-create "$KEY"
UPLOAD=$OUT
eq "CreateMultipartUpload gives an upload id" "$RC $([ -n "$UPLOAD" ] && echo id)" "0 id"
split -b $((5 * 1024 * 1024)) -d "$TMP/blob" "$TMP/part."
ETAGS=()
n=0
for part in "$TMP"/part.*; do
    n=$((n + 1))
    tool presign-part "$KEY" "$UPLOAD" "$n" 600
    etag=$(curl -s -f -T "$part" -D - -o /dev/null "$OUT" | tr -d '\r' |
        sed -n 's/^[Ee][Tt][Aa][Gg]: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p')
    [ -n "$etag" ] && ETAGS+=("$etag")
done
eq "three parts (5 + 5 + 2 MiB) PUT with curl through presigned URLs, each with an ETag" \
    "$n ${#ETAGS[@]}" "3 3"
eq "the parts went as presigned requests, not header-signed ones" \
    "$(calls '.method == "PUT" and (.query | contains("partNumber")) and .auth == "query" and .status == 200')" 3
tool mp-complete "$KEY" "$UPLOAD" "${ETAGS[@]}"
eq "CompleteMultipartUpload" "$RC" 0
tool head "$KEY"
eq "HEAD: the blob exists with its size" "$RC $(cut -d' ' -f1,2 <<<"$OUT")" "0 exists $SIZE"

# ---- reads through presigned GETs ---------------------------------------------------
tool presign GET "$KEY" 600
URL=$OUT
curl -s -f -r 5242870-5242899 -o "$TMP/range" "$URL"
cmp -s "$TMP/range" <(tail -c +5242871 "$TMP/blob" | head -c 30) && ok "a ranged GET through a presigned URL gives exactly those bytes" ||
    fail "a ranged GET through a presigned URL gives exactly those bytes"
st=$(curl -s -r 0-9 -o /dev/null -w '%{http_code}' "$URL")
eq "and is answered 206" "$st" 206
got=$(curl -s -f "$URL" | sha256sum | cut -d' ' -f1)
eq "a whole GET gives the blob (sha256)" "$got" "$HEX"
tool presign HEAD "$KEY" 600
len=$(curl -s -f -I "$OUT" | tr -d '\r' | sed -n 's/^[Cc]ontent-[Ll]ength: *//p')
eq "a presigned HEAD answers its length" "$len" "$SIZE"

# ---- listing, paginated ----------------------------------------------------------------
for i in 1 2 3 4 5 6 7; do
    tool presign PUT "list/obj-$i" 600
    printf 'object %s' "$i" >"$TMP/obj"
    curl -s -f -T "$TMP/obj" -o /dev/null "$OUT" || fail "presigned PUT of list/obj-$i"
done
tool presign PUT "lister/other" 600
curl -s -f -T "$TMP/obj" -o /dev/null "$OUT"
tool list list/ 3
want=$(printf 'list/obj-%s 8\n' 1 2 3 4 5 6 7; echo "pages 3")
eq "ListObjectsV2 of a prefix in pages of 3: every key once, in order, then 3 pages" "$OUT" "$want"
eq "the pages followed continuation tokens" \
    "$(calls '.method == "GET" and (.query | contains("continuation-token="))')" 2
tool list models/
eq "the blob is listed under its prefix with its size" "$OUT" "$KEY $SIZE
pages 1"

# ---- refusals, classified ------------------------------------------------------------
S3_SECRET_KEY=wrong tool head "$KEY"
eq "a wrong secret: HEAD is classed 403 (exit 3)" "$RC" 3
contains "with S3's reason" "$ERR" "403 AccessDenied"
S3_SECRET_KEY=wrong tool list list/
eq "a wrong secret: ListObjectsV2 is classed 403" "$RC" 3
contains "with S3's code and message" "$ERR" "SignatureDoesNotMatch: The request signature we calculated"
S3_SECRET_KEY=wrong tool presign GET "$KEY" 600
body=$(curl -s -w ' %{http_code}' "$OUT")
contains "a presigned URL signed with a wrong secret is refused (403 SignatureDoesNotMatch)" \
    "$body" "<Code>SignatureDoesNotMatch</Code>"
S3_ACCESS_KEY=AKIDNOBODY tool mp-create "$KEY.x"
eq "an unknown access key: classed 403" "$RC $(grep -c InvalidAccessKeyId <<<"$ERR")" "3 1"
tool presign GET "$KEY" 60 $(($(date +%s) - 3600))
body=$(curl -s -w ' %{http_code}' "$OUT")
contains "a presigned URL past its expiry is refused" "$body" "Request has expired</Message>"
contains "with 403" "$body" " 403"
tool presign GET "$KEY" 600
altered=${OUT/blobs\/sha256/blobs\/sha512}
st=$(curl -s -o /dev/null -w '%{http_code}' "$altered")
eq "a presigned URL for another key does not open it" "$st" 403
st=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$OUT")
eq "nor a presigned GET a DELETE" "$st" 403
tool presign GET models/blobs/sha256/nothing 600
body=$(curl -s -w ' %{http_code}' "$OUT")
contains "a presigned GET of a missing key: 404 NoSuchKey" "$body" "<Code>NoSuchKey</Code>"
S3_BUCKET=no-such-bucket tool list x/
eq "a missing bucket: classed 404 (exit 4)" "$RC" 4
contains "with S3's code" "$ERR" "NoSuchBucket"
tool mp-create "$KEY.aborted"
UP2=$OUT
tool mp-abort "$KEY.aborted" "$UP2"
eq "AbortMultipartUpload" "$RC" 0
# (completing it would be S3's 404 NoSuchUpload too, but moto answers that with a 500)
tool mp-abort "$KEY.aborted" "$UP2"
eq "an aborted upload is gone: aborting it again is classed 404" "$RC" 4
contains "with S3's code" "$ERR" "NoSuchUpload"
tool mp-abort "$KEY" "no-such-upload-id"
eq "aborting an unknown upload: classed 404" "$RC" 4
tool delete "list/obj-7"
tool head "list/obj-7"
eq "DELETE removes an object" "$OUT" "absent"

# ---- bad input -----------------------------------------------------------------------
S3_ENDPOINT=ftp://x tool head k
eq "an endpoint that is not http(s): exit 1" "$RC" 1
contains "naming it" "$ERR" "not an http(s):// URL"
S3_BUCKET=Bad_Bucket tool head k
contains "a bad bucket name is refused" "$ERR" "bucket name 'Bad_Bucket' is not valid"
tool presign GET "$KEY" 0
contains "a presigned URL living 0 s is refused" "$ERR" "1 to 604800 seconds"
tool presign POST "$KEY" 60
contains "POST is never presigned" "$ERR" "cannot presign S3 method 'POST'"
tool blob-key p NOTHEX
contains "a blob name that is not a sha256 is refused" "$ERR" "64 lower-case hex digits"
S3_ENDPOINT=http://127.0.0.1:$(free_port) tool head k
eq "an unreachable endpoint: classed 503 (exit 1)" "$RC $(cut -d' ' -f2 <<<"$ERR")" "1 503"
eq "no request reached the store unsigned" "$(calls '.auth == "none"')" 0

t_done
