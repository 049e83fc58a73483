#!/usr/bin/env bash
# gateway_standalone.sh — drover-gateway, the inference gateway outside
# droverd, end to end: a real droverd with a local agent and
# drover-demo-model replicas, and a drover-gateway process following it.
#
#   - the head's side: GET /v1/gateway/routes needs an admin's token of
#     scope gateway (403 otherwise), carries the table and token hashes (no
#     secrets), long-polls until the table changes (204, no body, when its
#     hold ends unchanged); POST /v1/gateway/load refuses malformed reports
#     (a bad total among them);
#   - through the gateway: predictions and OpenAI routes answered by the
#     replicas with the head's auth rules (401, 403 for another scope, 404
#     for others' deployments, 413, a revoked token stops working), and the
#     head counts what the gateway routed (its reported running totals);
#   - its own HTTP/1.1 server: pipelined requests answered in order on one
#     connection, a malformed request -> 400, HTTP/1.0, a chunked upload ->
#     411; a client that leaves while its request runs frees the slot;
#   - a deployment at zero replicas is woken through the gateway (its load
#     reaches the head's autoscaler at once) and every held request is
#     served; while it waits, the head's /metrics shows the gateway's queue;
#   - the head killed: the gateway keeps serving with its cached routes and
#     says the head is unreachable; the head back on the same address: the
#     gateway follows it again;
#   - SIGTERM stops the gateway with exit 0, no sanitizer report.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}
GW_BIN=$BIN_DIR/drover-gateway
HPORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$HPORT" --config "$CFG" || exit 1


# ---- a cluster, a CPU nodepool, a model with 1 replica ---------------------------------------
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-cpu"],"min_nodes":1,"max_nodes":1}'
status "create nodepool" 201
api POST /v1/models -d '{"id":"fast","runtime":{"command":["drover-demo-model","--weights-mib","1"]},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model fast" 201
api POST /v1/deployments -d '{"id":"web","model":"fast","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment web" 201
wait_check "$W" "web has a ready replica" deployment_ready web 1

# ---- tokens --------------------------------------------------------------------------------
api POST /v1/tokens -d '{"id":"gw","scopes":["gateway"]}'
status "an admin token with scope gateway" 201
GWT=$(jq -r .secret <<<"$BODY")
api POST /v1/tokens -d '{"id":"pr","scopes":["predict"]}'
PR=$(jq -r .secret <<<"$BODY")
api POST /v1/tokens -d '{"id":"rd","scopes":["read"]}'
RD=$(jq -r .secret <<<"$BODY")
api POST /v1/users -d '{"id":"bob","role":"member"}'
BOB=$(jq -r .token.secret <<<"$BODY")
as "$BOB" api POST /v1/tokens -d '{"id":"bgw","scopes":["gateway"]}'
status "a member may make a gateway-scoped token" 201
BOBGW=$(jq -r .secret <<<"$BODY")

# ---- the head's side ---------------------------------------------------------------------------
as "$PR" api GET /v1/gateway/routes
status "routes with a predict token" 403
as "$BOBGW" api GET /v1/gateway/routes
status "routes with a member's gateway token" 403
as "$GWT" api GET /v1/gateway/routes
status "routes with an admin's gateway token" 200
V1=$(jq -r .version <<<"$BODY")
jqc "routes: web with its replica endpoint and paths" '.deployments[] | select(.key == "admin/web") | .predict_path == "/predict" and (.replicas | length) == 1 and (.replicas[0].endpoint | startswith("http://")) and .replicas[0].ready == true'
PRH=$(printf '%s' "$PR" | sha256sum | cut -d' ' -f1)
RDH=$(printf '%s' "$RD" | sha256sum | cut -d' ' -f1)
check "routes: tokens by hash, with their user and whether they may predict" jqq --arg p "$PRH" --arg r "$RDH" \
    '(.tokens[] | select(.hash == $p) | .user == "admin" and .predict == true) and (.tokens[] | select(.hash == $r) | .predict == false)' <<<"$BODY"
check "routes: no secret in the document" bash -c "! grep -qF '$PR' <<<'$BODY'"
as "$GWT" api GET "/v1/gateway/routes?wait=$V1&x=1"
status "routes with an unknown query argument" 400
for t in 0 26 x; do
    as "$GWT" api GET "/v1/gateway/routes?wait=$V1&timeout_seconds=$t"
    status "routes with timeout_seconds=$t" 400
done
as "$GWT" api GET "/v1/gateway/routes?wait=0000000000000000"
status "routes waiting on another version: the document at once" 200
jqc "  ... the whole document" '(.version | length) == 16 and (.deployments | length) >= 1' "$BODY"
# a poll on the current version that nothing changes: 204, no body (the
# version could change under the poll, e.g. a replica's health: ask again)
unchanged_204()
{
    as "$GWT" api GET /v1/gateway/routes
    local v
    v=$(jq -r .version <<<"$BODY")
    as "$GWT" api GET "/v1/gateway/routes?wait=$v&timeout_seconds=1"
    [ "$ST" == 204 ] && [ -z "$BODY" ]
}
wait_check 30 "an unchanged long poll ends with 204 and no body (not the document again)" unchanged_204
# a long poll on the current version answers when the table changes
curl -s -m 60 -H "Authorization: Bearer $GWT" "$URL/v1/gateway/routes?wait=$V1" >"$TMP/poll" &
POLL=$!
sleep 0.5
api POST /v1/models -d '{"id":"slowload","runtime":{"command":["drover-demo-model","--weights-mib","1","--load-delay-ms","2000"]},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model slowload" 201
api POST /v1/deployments -d '{"id":"zero","model":"slowload","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":0,"max_replicas":1}}'
status "create deployment zero (min_replicas 0)" 201
wait "$POLL"
check "the held long poll answered with a new version listing zero" jqq --arg v "$V1" '.version != $v and ([.deployments[].id] | index("zero") != null)' "$TMP/poll"
as "$GWT" api POST /v1/gateway/load -d '{"gateway":"x","deployments":[{"deployment":"admin/web","in_flight":-1,"queued":0,"cold":false}]}'
status "a load report with a negative count" 400
as "$GWT" api POST /v1/gateway/load -d '{"gateway":"x","deployments":[{"deployment":"admin/web","in_flight":0,"queued":0,"cold":false,"arrivals":1,"prompt_hist":[[128,1]]}]}'
status "a load report with a prompt histogram bin out of range" 400
jqc "  ... naming the field" '.error.field == "deployments[0].prompt_hist"'
as "$GWT" api POST /v1/gateway/load -d '{"gateway":"x","deployments":[],"extra":1}'
status "a load report with an unknown field" 400
as "$GWT" api POST /v1/gateway/load -d '{"gateway":"x","deployments":'
status "a truncated load report" 400

# ---- drover-gateway ------------------------------------------------------------------------------
"$GW_BIN" --server "$URL" >/dev/null 2>&1
eq "drover-gateway without --token: usage (exit 2)" "$?" 2
"$GW_BIN" --server "$URL" --token "$GWT" --listen nowhere >/dev/null 2>&1
eq "drover-gateway with a malformed --listen: usage (exit 2)" "$?" 2
"$GW_BIN" --server "$URL" --token "$GWT" --poll-seconds 26 >/dev/null 2>&1
eq "drover-gateway with --poll-seconds over the head's 25: usage (exit 2)" "$?" 2
"$GW_BIN" --server "$URL" --token "$PR" --listen 127.0.0.1:0 --first-wait 2 >"$TMP/gw-bad.log" 2>&1
eq "drover-gateway with a predict token: cannot start (exit 1)" "$?" 1
contains "drover-gateway with a predict token: says why" "$(cat "$TMP/gw-bad.log")" "403"

GPORT=$(free_port)
GURL=http://127.0.0.1:$GPORT
start_gateway()
{
    (exec -a "$TMP/drover-gateway" "$GW_BIN" --server "$URL" --token "$GWT" \
        --listen "127.0.0.1:$GPORT" --name gw-test --threads 2 --poll-seconds 1 \
        --log-level debug >>"$TMP/gw.log" 2>&1) &
    GWPID=$!
    _BG_PIDS+=("$GWPID")
}
start_gateway
gw_health() { curl -s -m 5 "$GURL/healthz" | jq -e ".head_reachable == $1" >/dev/null 2>&1; }
wait_check 60 "drover-gateway serves and reaches the head" gw_health true
wait_check 30 "drover-gateway: a long poll that ends unchanged (204) keeps its table and asks again" \
    grep -q "still current (204)" "$TMP/gw.log"
gw() { local u=$URL; URL=$GURL; api "$@"; URL=$u; }

as "$PR" gw POST /v1/deployments/web/predict -d '{"inputs":"through the standalone gateway"}'
status "predict through drover-gateway" 200
jqc "the replica answered" '(.outputs | length) == 1 and (.replica | startswith("web-"))'
check "X-Drover-Replica names the replica" test "$(header X-Drover-Replica)" == "$(jq -r .replica <<<"$BODY")"
gw POST /v1/deployments/web/predict -d '{"inputs":"all scope"}'
status "an all-scoped token predicts through drover-gateway" 200
as "$RD" gw POST /v1/deployments/web/predict -d '{"inputs":"x"}'
status "a read token through drover-gateway" 403
as "" gw POST /v1/deployments/web/predict -d '{"inputs":"x"}'
status "no token through drover-gateway" 401
as "drv_$(printf '0%.0s' {1..64})" gw POST /v1/deployments/web/predict -d '{"inputs":"x"}'
status "an unknown token through drover-gateway" 401
as "$BOB" gw POST /v1/deployments/web/predict -d '{"inputs":"x"}'
status "another user's deployment through drover-gateway" 404
as "$PR" gw POST /v1/deployments/nope/predict -d '{"inputs":"x"}'
status "an unknown deployment through drover-gateway" 404
head -c $((1024 * 1024 + 10)) /dev/zero | tr '\0' 'a' >"$TMP/big"
as "$PR" gw POST /v1/deployments/web/predict --data-binary @"$TMP/big"
status "a body over 1 MiB through drover-gateway" 413
as "$PR" gw GET /v1/deployments/web/predict
status "GET on the predict path" 405
as "$PR" gw GET /openai/v1/models
jqc "drover-gateway: /openai/v1/models lists web" '.object == "list" and ([.data[].id] | index("web") != null)'
curl -sN -m 30 -H "Authorization: Bearer $PR" -H 'Content-Type: application/json' \
    -d '{"model":"web","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}' \
    "$GURL/openai/v1/chat/completions" >"$TMP/sse"
check "drover-gateway: a chat completion streams (data: events, then [DONE])" \
    bash -c "[ \$(grep -c '^data: {' '$TMP/sse') -ge 2 ] && grep -q '^data: \[DONE\]' '$TMP/sse'"
as "$PR" gw GET /metrics
contains "drover-gateway: its own /metrics counts web's answers" "$BODY" 'drover_gateway_requests_total{owner="admin",deployment="web",code="2xx"}'
contains "drover-gateway: its /metrics has the process series" "$BODY" 'process_resident_memory_bytes '
contains "drover-gateway: its /metrics has drover_build_info" "$BODY" 'drover_build_info{version="'
# its running totals reach the head (the SLO model's input): the head's sum
# of the gateway's arrivals on web equals the gateway's own count
GROUTED=$(grep -F 'drover_gateway_routed_total{owner="admin",deployment="web"}' <<<"$BODY" | awk '{print $2}')
check "drover-gateway has routed web's requests" test "${GROUTED:-0}" -ge 3
peer_routed() { curl -s -H "Authorization: Bearer $ADMIN" "$URL/metrics" | grep -qxF "drover_gateway_peer_routed_total{owner=\"admin\",deployment=\"web\"} $GROUTED"; }
wait_check 30 "the head counts the $GROUTED requests drover-gateway routed to web (its reported totals)" peer_routed

# ---- drover-gateway's own HTTP/1.1 server ------------------------------------------------------------
# a whole core (a CFS quota, agent/isolate.c): an input is ~0.1 s of CPU, ~2 s
# under ASan; at a tenth of a core each one-input request below took ~30 s there
# (20 inputs took 20 s: the client that leaves below now sends 200)
api POST /v1/models -d '{"id":"slow","runtime":{"command":["drover-demo-model","--weights-mib","1","--layers","100000"],"max_concurrency":1},"resources":{"cpu_millis":1000,"memory_mib":64}}'
status "create model slow (max_concurrency 1)" 201
api POST /v1/deployments -d '{"id":"slow","model":"slow","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment slow" 201
# raw PORT: send stdin on one connection, print what came back until the server closed it
raw() { python3 -S -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(sys.stdin.buffer.read())
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
sys.stdout.buffer.write(out)' "$1"; }
PBODY='{"inputs":"pipelined"}'
{ for _ in 1 2 3; do
    printf 'POST /v1/deployments/web/predict HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' "$PR" "${#PBODY}" "$PBODY"
  done
  printf 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'; } | raw "$GPORT" >"$TMP/pipe"
eq "drover-gateway: 3 pipelined predictions and a health check on one connection, all answered in order" \
    "$(grep -ao 'HTTP/1.1 200 ' "$TMP/pipe" | wc -l)/$(grep -ao '"outputs"' "$TMP/pipe" | wc -l)/$(tail -c 200 "$TMP/pipe" | grep -c head_reachable)" "4/3/1"
printf 'BLAH\r\n\r\n' | raw "$GPORT" >"$TMP/bad"
contains "drover-gateway: a malformed request line -> 400, then the connection closes" "$(head -1 "$TMP/bad")" "HTTP/1.1 400"
printf 'POST /v1/deployments/web/predict HTTP/1.0\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s' "$PR" "${#PBODY}" "$PBODY" | raw "$GPORT" >"$TMP/h10"
contains "drover-gateway: an HTTP/1.0 request is answered and closed" "$(cat "$TMP/h10")" '"outputs"'
printf 'POST /v1/deployments/web/predict HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' "$PR" | raw "$GPORT" >"$TMP/chunked"
contains "drover-gateway: a chunked upload -> 411" "$(head -1 "$TMP/chunked")" "HTTP/1.1 411"

# a client that leaves while its request runs frees the replica's only slot
wait_check "$W" "slow has a ready replica" deployment_ready slow 1
gmetric() { curl -s -H "Authorization: Bearer $PR" "$GURL/metrics" | grep -F "$1" | awk '{print $2}' | head -1; }
as "$PR" gw POST /v1/deployments/slow/predict -d '{"inputs":"warm"}' -H 'X-Drover-Timeout: 60'
status "slow answers through drover-gateway" 200
# 200 inputs: ~20 s of work, longer than the waits below, so only an early
# release (the client left) passes them
curl -s -o /dev/null -m 0.3 -H "Authorization: Bearer $PR" -H 'Content-Type: application/json' \
    -d "$(jq -cn '{inputs: [range(200) | "abcdefghijklmnopqrst"[. % 20:. % 20 + 1]]}')" \
    "$GURL/v1/deployments/slow/predict"
gw_gone_counted() { [ "$(gmetric 'drover_gateway_rejected_total{owner="admin",deployment="slow",reason="client_closed"}')" == 1 ]; }
wait_check 10 "drover-gateway notices a client that left (client_closed counted)" gw_gone_counted
wait_check 10 "its slot is free again (in flight 0)" bash -c "curl -s -H 'Authorization: Bearer $PR' $GURL/metrics | grep -q 'drover_gateway_in_flight{owner=\"admin\",deployment=\"slow\"} 0'"
as "$PR" gw POST /v1/deployments/slow/predict -d '{"inputs":"x"}' -H 'X-Drover-Timeout: 60'
status "the next request through drover-gateway gets the freed slot" 200

# ---- scale from zero through the gateway ------------------------------------------------------------
api GET /v1/deployments/zero
jqc "zero has no replica" '(.status.ready_replicas // 0) == 0'
for ((i = 0; i < 10; i++)); do
    curl -s -m 120 -o "$TMP/cold.$i" -w '%{http_code}\n' -H "Authorization: Bearer $PR" \
        -H 'Content-Type: application/json' -d '{"inputs":"wake up"}' \
        "$GURL/v1/deployments/zero/predict" >>"$TMP/cold" &
    _BG_PIDS+=($!)
done
peer_queued() { curl -s -H "Authorization: Bearer $ADMIN" "$URL/metrics" | grep -E '^drover_gateway_peer_queued\{gateway="gw-test",owner="admin",deployment="zero"\} [1-9]' >/dev/null; }
wait_check 60 "the head's /metrics shows the requests held in drover-gateway" peer_queued
wait_check 120 "all 10 requests held through the cold start are answered" bash -c "[ \$(wc -l <'$TMP/cold') -ge 10 ]"
eq "all 10 answered 200" "$(grep -c '^200$' "$TMP/cold")" 10
api GET /v1/events?kind=deployment
jqc "the head's autoscaler scaled zero from zero for the gateway's requests" '[.items[] | select(.object == "zero" and .type == "scale_from_zero")] | length >= 1'

# ---- a revoked token stops working on the gateway ---------------------------------------------------
api DELETE /v1/tokens/pr
status "revoke the predict token" 200
pr_refused() { as "$PR" gw POST /v1/deployments/web/predict -d '{"inputs":"x"}'; [ "$ST" == 401 ]; }
wait_check 30 "the revoked token is refused by drover-gateway" pr_refused
api POST /v1/tokens -d '{"id":"pr2","scopes":["predict"]}'
PR=$(jq -r .secret <<<"$BODY")
pr_ok() { as "$PR" gw POST /v1/deployments/web/predict -d '{"inputs":"x"}'; [ "$ST" == 200 ]; }
wait_check 30 "a new token works on drover-gateway" pr_ok

# ---- the head goes away and comes back -----------------------------------------------------------------
droverd_kill9
wait_check 30 "drover-gateway notices the head is unreachable" gw_health false
as "$PR" gw POST /v1/deployments/web/predict -d '{"inputs":"head down"}'
status "predict through drover-gateway while the head is down (cached routes)" 200
droverd_start "$TMP/d" --listen "127.0.0.1:$HPORT" --config "$CFG" || exit 1
wait_check 60 "drover-gateway follows the head again" gw_health true
wait_check 60 "predictions through drover-gateway after the head came back" pr_ok

# ---- stop -------------------------------------------------------------------------------------------------
kill -TERM "$GWPID"
wait "$GWPID"
eq "drover-gateway exits 0 on SIGTERM" "$?" 0
check "drover-gateway never took the head's 204 for an error" bash -c "! grep -q 'HTTP 204' '$TMP/gw.log'"
logs_sanitizer_clean "drover-gateway" "$TMP/gw.log" "$TMP/gw-bad.log"
t_done
