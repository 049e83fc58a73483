#!/usr/bin/env bash
# artifact_import.sh — `drover artifact import` as a background operation
# (head/imports.c, issue 14): an http source served slowly
# (t/lib/range_server.py /_slow) so that the import is seen in progress.
#   - POST answers 202 with the artifact `importing`; its status shows files
#     and bytes hashed; `get artifacts` shows the state;
#   - a model naming it is accepted; its deployment's replica waits
#     (pending, the reason naming the import) and is not placed;
#   - droverd SIGKILLed mid-import: restarted, the import is read again
#     from the start and ends `ready` with the right sha256s (never stuck);
#   - the CLI waits (exit 0, "imported"), --no-wait returns at once;
#   - a source that answers 404, a list naming ../: exit 1 with the reason,
#     the artifact visible as `failed` with it (an event too), deletable,
#     and importable again under the same id;
#   - an artifact deleted while it is read stays deleted (the result is
#     dropped); malformed sources are refused at once, nothing created.
. "$(dirname "$0")/lib/common.bash"
LIB=$DROVER_SRC/t/lib
WEBP=""
stop_web() { [ -n "$WEBP" ] && kill "$WEBP" 2>/dev/null; }
_EXIT_HOOKS+=(stop_web)

mkdir -p "$TMP/web/w" "$TMP/web/bad"
head -c 3000000 /dev/urandom >"$TMP/web/w/a.bin"
head -c 1500000 /dev/urandom >"$TMP/web/w/sub b.bin"
printf 'a.bin\n# a comment\nsub b.bin\n' >"$TMP/web/w/drover-files.txt"
printf 'ok.txt\n../../etc/passwd\n' >"$TMP/web/bad/drover-files.txt"
XW=$(cd "$TMP/web/w" && sha256sum a.bin "sub b.bin" | jq -Rsc 'split("\n") | map(select(. != "")) | sort')
python3 -S "$LIB/range_server.py" --root "$TMP/web" --port-file "$TMP/web.port" &
WEBP=$!
wait_until 30 "the origin listens" test -s "$TMP/web.port" || { fail "the origin starts"; t_done; }
WEB=http://127.0.0.1:$(cat "$TMP/web.port")
slow() { curl -s -o /dev/null "$WEB/_slow?bps=$1"; }

droverd_start "$TMP/d" || exit 1

# ---- in progress: 202, importing, progress -----------------------------------------------------
slow 400000   # 4.5 MB at 400 KB/s: about 11 s
api POST /v1/artifacts -d "{\"id\":\"w\",\"source\":\"$WEB/w/\"}"
status "POST of an import" 202
jqc "... the artifact is importing, without a manifest yet" \
    '.status.state == "importing" and (has("manifest") | not) and .layout == "files"'
has_bytes() { api GET /v1/artifacts/w; jqq '.status.state == "importing" and .status.progress.bytes > 0 and .status.progress.files == 2' <<<"$BODY"; }
wait_check 60 "its status shows files and bytes hashed while it is read" has_bytes
cli get artifacts
contains "get artifacts shows the state" "$OUT" "importing"
cli describe artifact w
contains "describe shows the progress" "$OUT" "Progress:"

api POST /v1/models -d '{"id":"m","runtime":{"command":["true"]},"artifact":{"id":"w"}}'
status "a model naming the importing artifact is accepted" 201
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":2}'
api POST /v1/deployments -d '{"id":"d","model":"m","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "a deployment of it" 201
waits() { replicas_json | jqq '.[0].status.state == "pending" and (.[0].status.reason | test("waiting for artifact .w. to be imported")) and (.[0].node == null)'; }
wait_check 60 "its replica waits, pending, the reason naming the import" waits

# ---- head killed mid-import: read again, never stuck ---------------------------------------------
droverd_kill9
api GET /v1/artifacts/w >/dev/null 2>&1
droverd_start "$TMP/d" || exit 1
api GET /v1/artifacts/w
jqc "after a SIGKILL and a restart the artifact is importing again" '.status.state == "importing"'
slow 0
ready() { api GET /v1/artifacts/w; jqq '.status.state == "ready"' <<<"$BODY"; }
wait_check 60 "... and becomes ready" ready
jqc "... with the source's sha256s" '([.manifest.files[] | "\(.sha256)  \(.path)"] | sort) == '"$XW"
eq "the restarted head read it again" "$(grep -c 'importing artifact admin/w from' "$TMP/d/droverd.log")" 2
placed() { replicas_json | jqq '.[0].status.reason | test("waiting for artifact") | not'; }
wait_check 60 "the replica no longer waits for the artifact" placed
api GET "/v1/events?kind=artifact&object=w"
jqc "an 'imported' event" 'any(.items[]?; .type == "imported")'

# ---- the CLI ----------------------------------------------------------------------------------------
cli artifact import --id one --source "$WEB/w/a.bin"
rc "the CLI waits for the import" 0
contains "... and says what it imported" "$OUT" "artifact/one imported from"
slow 200000
cli artifact import --id nw --source "$WEB/w/" --no-wait -o json
rc "--no-wait" 0
jqc "... returns while it is importing" '.status.state == "importing"' "$OUT"

# ---- deleted while it is read: stays deleted ---------------------------------------------------------
nw_read() { api GET /v1/artifacts/nw; jqq '.status.progress.bytes > 0' <<<"$BODY"; }
wait_check 60 "nw is being read" nw_read
api DELETE /v1/artifacts/nw
status "an importing artifact can be deleted" 200
slow 0
dropped() { grep -q 'import of artifact admin/nw: deleted or imported again' "$TMP/d/droverd.log"; }
wait_check 60 "its reader stops and drops the result" dropped
api GET /v1/artifacts/nw
status "... and it stays deleted" 404

# ---- failures: visible with the reason, deletable, importable again -----------------------------------
cli artifact import --id bad --source "$WEB/w/missing.bin"
rc "a file that answers 404" 1
contains "... exit 1 with the reason" "$ERR" "answered 404"
api GET /v1/artifacts/bad
jqc "... the artifact is failed, with the reason" '.status.state == "failed" and (.status.reason | test("answered 404")) and (has("manifest") | not)'
cli describe artifact bad
contains "describe shows the reason" "$OUT" "Reason:"
api GET "/v1/events?kind=artifact&object=bad"
jqc "an 'import_failed' event" 'any(.items[]?; .type == "import_failed")'
cli artifact import --id bad --source "$WEB/w/a.bin"
rc "a failed artifact is imported again under its id" 0
api GET /v1/artifacts/bad
jqc "... and is ready" '.status.state == "ready" and (.manifest.files | length) == 1'
cli artifact import --id bad2 --source "$WEB/bad/"
rc "a list naming ../" 1
contains "... names the line" "$ERR" "line 2"
api DELETE /v1/artifacts/bad2
status "a failed artifact is deletable" 200
cli artifact import --id one --source "$WEB/w/a.bin"
rc "an id a ready artifact holds" 1
contains "... 409" "$ERR" "already exists"

# ---- refused at once: nothing created ----------------------------------------------------------------------
n_before=$(list_all /v1/artifacts | jq length)
api POST /v1/artifacts -d '{"id":"x1","source":"https://example.invalid/a#b"}'
status "a URL holding '#'" 400
api POST /v1/artifacts -d '{"id":"x2","source":"s3://no-such-bucket/x"}'
status "a bucket no store has" 422
api POST /v1/artifacts -d '{"id":"x3","source":"https://example.invalid/d/?q=1"}'
status "a directory URL with a query" 400
eq "nothing created by the refusals" "$(list_all /v1/artifacts | jq length)" "$n_before"

droverd_finish artifact_import
t_done
