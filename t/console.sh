#!/usr/bin/env bash
# console.sh — the web console end to end. curl checks the serving itself
# (content types, CSP and the other security headers, ETag revalidation,
# unknown files, no clash with the API); then t/console/e2e.mjs drives
# headless Chromium (Debian's chromium via playwright-core from
# t/console/node_modules, installed by scripts/install-deps) against this
# real droverd with a local cluster: sign-in (the card names the quick
# start's token file; no navigation before sign-in or after sign-out), New Cluster and New Nodepool
# through the forms, a validation error next to its field, the demo model
# registered and deployed, its serving metrics after test predictions and
# the charts from droverd's history, the Edit forms of a deployment and a
# nodepool (a change seen, a refusal next to its field), nodes coming up
# and the GPU share bars, a cluster's page asking only for its own replicas,
# a read token without write buttons, an artifact pushed with `drover
# artifact push` on the Artifacts page (list row, files, the models using
# it, delete refused with the API's 409 while a model uses it, then done),
# each artifact's import state on the list and its page (a failed import
# with its reason, an importing one's progress faked in the browser) and
# an unfinished upload under the list,
# the deployment's cold starts and checkpoints, a job submitted with New Job
# (a refusal next to its field first) on the Jobs page and its page (state,
# placement, workers, Cancel after a confirmation), a store on
# the Stores page with its secret never in the page nor in any answer,
# a fetching replica's progress bar (its status faked in the browser), sign-out. Screenshots of every page go to
# BUILD/t-artifacts/console/. No Chromium or no node: the test FAILS.
. "$(dirname "$0")/lib/common.bash"
# shellcheck source=lib/browser.bash
. "$DROVER_SRC/t/lib/browser.bash"
workers_init
ARTIFACTS=$BIN_DIR/t-artifacts/console

droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1

# ---- serving: headers, caching, paths -----------------------------------------------
TOKEN=""
api GET /
status "GET / (no token needed)" 200
contains "GET / is the console's HTML" "$BODY" '<script type="module" src="/ui/app.js">'
eq "GET /: Content-Type" "$(header Content-Type)" "text/html; charset=utf-8"
CSP=$(header Content-Security-Policy)
for d in "default-src 'self'" "script-src 'self'" "style-src 'self'" "frame-ancestors 'none'" "object-src 'none'" "base-uri 'none'"; do
    contains "CSP has $d" "$CSP" "$d"
done
if [[ "$CSP" == *unsafe-inline* || "$CSP" == *unsafe-eval* || "$CSP" == *"*"* ]]; then
    fail "CSP allows no inline code, eval or wildcard"; why "$CSP"
else
    ok "CSP allows no inline code, eval or wildcard"
fi
eq "X-Content-Type-Options" "$(header X-Content-Type-Options)" "nosniff"
eq "X-Frame-Options" "$(header X-Frame-Options)" "DENY"
eq "Cache-Control (revalidate with the ETag)" "$(header Cache-Control)" "no-cache"
ETAG=$(header ETag)
check "GET / has an ETag" test -n "$ETAG"
api GET / -H "If-None-Match: $ETAG"
status "If-None-Match with the current ETag" 304
eq "304 has no body" "$(header Content-Length)" "0"
api GET / -H 'If-None-Match: "1"'
status "If-None-Match with another ETag" 200
for f in app.js:text/javascript api.js:text/javascript style.css:text/css icon.svg:image/svg+xml; do
    api GET "/ui/${f%%:*}"
    status "GET /ui/${f%%:*}" 200
    contains "/ui/${f%%:*}: Content-Type" "$(header Content-Type)" "${f#*:}"
    eq "/ui/${f%%:*}: nosniff" "$(header X-Content-Type-Options)" nosniff
done
api GET /ui/nope.js
status "unknown console file" 404
error_shape "unknown console file"
api GET /ui/../v1/clusters --path-as-is
check "a dot-dot path serves no data (got $ST)" test "$ST" != 200
if grep -qiE '<script>|<style|[[:space:]]style="|[[:space:]]on[a-z]+="|https?://' "$DROVER_SRC/web/index.html"; then
    fail "index.html has no inline script/style, handler attribute or external URL"
else
    ok "index.html has no inline script/style, handler attribute or external URL"
fi
EXT=$(grep -hoE "https?://[^'\" ]+" "$DROVER_SRC"/web/* | grep -vxF 'http://www.w3.org/2000/svg')
eq "the console names no other origin (only the SVG namespace)" "$EXT" ""
api POST /
status "POST / is not allowed" 405
api GET /v1/clusters
status "the API still needs a token next to the console" 401
TOKEN=$ADMIN
api GET /healthz
status "/healthz still answers" 200

# ---- an artifact for the Artifacts page, and a model that uses it -------------------------
mkdir -p "$TMP/weights/sub"
head -c 5000 /dev/urandom >"$TMP/weights/model.bin"
printf '{"layers": 2}\n' >"$TMP/weights/sub/config.json"
cli artifact push "$TMP/weights" --id weights --chunk-size 4096 -o json
rc "drover artifact push of a small tree" 0
ART_DIGEST=$(jq -r '.status.digest // empty' <<<"$OUT")
check "the pushed artifact has a digest" test -n "$ART_DIGEST"
api POST /v1/models -d '{"id":"uses-weights","runtime":{"command":["true"]},"artifact":{"id":"weights"}}'
status "a model with artifact: {id: weights}" 201

# ---- a failed import and an unfinished upload for the Artifacts page --------------------------
# a source on a port nothing listens on: the import fails, the artifact stays with the reason
api POST /v1/artifacts -d '{"id":"broken","source":"http://127.0.0.1:'"$(free_port)"'/none/"}'
status "an import from a source that refuses" 202
broken_failed() { api GET /v1/artifacts/broken; jqq '.status.state == "failed" and (.status.reason | length > 0)' <<<"$BODY"; }
wait_check 60 "... fails, with a reason" broken_failed
BROKEN_REASON=$(jq -r .status.reason <<<"$BODY")
# an upload of one 8 KiB file (two 4 KiB chunks) with nothing sent: all of it missing
mkdir -p "$TMP/upl"
head -c 8192 /dev/urandom >"$TMP/upl/u.bin"
"$(dirname "$DROVERD")/t/cache_tool" manifest "$TMP/upl" 4096 >"$TMP/upl.json"
check "a manifest of the upload's tree" test -s "$TMP/upl.json"
api POST /v1/artifacts/uploads -d "{\"manifest\": $(cat "$TMP/upl.json")}"
status "an upload started and left unfinished" 201
UPLOAD_ID=$(jq -r .id <<<"$BODY")
eq "... missing all of its 8192 bytes" "$(jq -r .missing_bytes <<<"$BODY")" 8192

# ---- a store for the Stores page (nothing is called at creation) ------------------------
STORE_SECRET="console-secret-$RANDOM$RANDOM"
api POST /v1/stores -d '{"id":"s3a","endpoint":"http://127.0.0.1:9","bucket":"console-bucket","path_style":true,"access_key_id":"AKIACONSOLE","secret_access_key":"'"$STORE_SECRET"'"}'
status "an S3 store s3a" 201
eq "the store's secret is answered hidden" "$(jq -r .secret_access_key <<<"$BODY")" "(hidden)"

# ---- the browser ----------------------------------------------------------------------
api POST /v1/tokens -d '{"id":"console-read","scopes":["read"]}'
status "a read-scoped token for the read-only checks" 201
READ_TOKEN=$(jq -r .secret <<<"$BODY")

rm -rf "$ARTIFACTS"
mkdir -p "$ARTIFACTS"
URL=$URL ADMIN=$ADMIN READ_TOKEN=$READ_TOKEN ARTIFACTS=$ARTIFACTS ART_DIGEST=$ART_DIGEST \
    STORE_SECRET=$STORE_SECRET BROKEN_REASON=$BROKEN_REASON UPLOAD_ID=$UPLOAD_ID \
    browser_run e2e.mjs
check "the browser run ended cleanly (exit $E2E_RC)" test "$E2E_RC" == 0
[ "$E2E_RC" == 0 ] || dump_workers
n=$(find "$ARTIFACTS" -name '*.png' | wc -l)
check "screenshots saved in $ARTIFACTS ($n)" test "$n" -ge 20

sanitizer_clean "console"
t_done
