#!/usr/bin/env bash
# gateway_upstream.sh — the gateway's own HTTP/1.1 client to replicas
# (src/gateway/upconn.c) against a replica that answers the odd ways real
# servers do (t/lib/odd_replica.py), through droverd's gateway (its API
# address and its inference listener, --gateway-listen) and through
# drover-gateway:
#
#   - connections are kept alive and reused (the replica counts accepts);
#   - chunked answers, answers delimited by the close, a 5 MiB answer read
#     slowly by the client (streamed through, paused and resumed) arrive
#     byte for byte;
#   - a replica that closes each kept-alive connection right after its
#     answer: every request still succeeds (the stale connection is
#     noticed, or the request is retried once on a new one);
#   - a malformed status line, a close without an answer, a close half way
#     through the body: 502 with a message that says so, and the gateway
#     goes on serving;
#   - a replica that never answers: 504 at X-Drover-Timeout;
#   - hop-by-hop headers are dropped, the others passed on;
#   - a stopped replica (SIGSTOP): the request's deadline ends the wait,
#     and it serves again once it runs;
#   - droverd's inference listener: the head's tokens (401, 403; new,
#     revoked and deleted users' tokens in force as soon as the API
#     answered), /healthz, the answers above.
ODD=$(cd "$(dirname "$0")/lib" && pwd)/odd_replica.py
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}
droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --gateway-listen 127.0.0.1:0 \
    --config "$CFG" || exit 1
LURL=$(head -n1 "$TMP/d/gateway.url")

predict() { local b=$1; shift; api POST /v1/deployments/odd/predict -d "$b" "$@"; }
replica_conns() { curl -s "$EP/stats" | jq -r .connections; }

api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-cpu"],"min_nodes":1,"max_nodes":1}'
status "create nodepool" 201
api POST /v1/models -d "{\"id\":\"odd\",\"runtime\":{\"command\":[\"python3\",\"-S\",\"$ODD\"]},\"resources\":{\"cpu_millis\":100,\"memory_mib\":64}}"
status "create model odd (t/lib/odd_replica.py)" 201
api POST /v1/models -d '{"id":"badpath","runtime":{"command":["x"],"predict_path":"/a b\r\nX: y"},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "a predict_path with a space and CR/LF (it would go into the request line)" 400
jqc "the error names runtime.predict_path" '.error.field == "runtime.predict_path"'
api POST /v1/deployments -d '{"id":"odd","model":"odd","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment odd" 201
wait_check "$W" "odd has a ready replica" deployment_ready odd 1
api GET /v1/deployments/odd/replicas
EP=$(jq -r '.items[0].status.endpoint' <<<"$BODY")

# ---- reuse ----------------------------------------------------------------------------------
predict '{"mode":"ok","n":0}'
status "a plain answer" 200
C0=$(replica_conns)
for i in $(seq 1 30); do
    predict "{\"mode\":\"ok\",\"n\":$i}"
    [ "$ST" == 200 ] || break
done
status "30 answers one after another" 200
jqc "the replica's answer comes back unchanged" '.mode == "ok" and .echo.n == 30'
C1=$(replica_conns)
check "kept alive: 30 requests after the first opened no new connection ($C0 -> $C1 carried predicts)" \
    test "$C1" -eq "$C0"

# ---- framing --------------------------------------------------------------------------------
predict '{"mode":"chunked"}'
status "a chunked answer" 200
eq "the chunked answer's body, reassembled" "$BODY" "alpha beta gamma"
eq "X-Mode passes through" "$(header X-Mode)" "chunked"
predict '{"mode":"close"}'
status "an answer delimited by the close" 200
eq "its body, all of it" "$BODY" "until the end"
predict '{"mode":"headers"}'
status "an answer with many headers" 200
eq "X-Odd passes through" "$(header X-Odd)" "yes"
eq "Keep-Alive (hop-by-hop) does not" "$(header Keep-Alive)" ""
eq "Proxy-Connection (hop-by-hop) does not" "$(header Proxy-Connection)" ""
check "a 2 KiB Set-Cookie passes through" test "$(header Set-Cookie | wc -c)" -gt 2000
predict '{"mode":"headers","cookie":9000}'
status "answer headers over 8 KiB" 502
contains "it says so" "$BODY" "headers are larger than the gateway passes on"

SIZE=$((5 * 1024 * 1024))
python3 -S -c "
import sys
pat = b'0123456789abcdef'
sys.stdout.buffer.write((pat * ($SIZE // 16 + 1))[:$SIZE])" >"$TMP/big.want"
big_through() { # URL OUT: a 5 MiB answer read at 1 MiB/s (the gateway pauses the replica)
    curl -s -m 60 -o "$2" -w '%{http_code}' --limit-rate 1M -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' -d "{\"mode\":\"big\",\"size\":$SIZE}" "$1"
}
eq "5 MiB answer to a slow reader -> 200" "$(big_through "$URL/v1/deployments/odd/predict" "$TMP/big.got")" 200
check "5 MiB answer arrives byte for byte" cmp -s "$TMP/big.want" "$TMP/big.got"

# ---- stale kept-alive connections ---------------------------------------------------------------
n_ok=0
for i in $(seq 1 40); do
    predict '{"mode":"drop"}'
    [ "$ST" == 200 ] && n_ok=$((n_ok + 1))
done
eq "a replica that closes every connection after answering: 40 of 40 requests answered" "$n_ok" 40

# ---- broken answers ---------------------------------------------------------------------------
predict '{"mode":"hang"}' -H 'X-Drover-Timeout: 1'
status "a replica that never answers, X-Drover-Timeout: 1" 504
predict '{"mode":"malformed"}'
status "a malformed status line" 502
contains "it says so" "$BODY" "malformed status line"
predict '{"mode":"reset"}'
status "a close without an answer" 502
contains "it says so" "$BODY" "without answering"
predict '{"mode":"half"}'
status "a close half way through the body (headers not sent yet: buffered)" 502
contains "it says so" "$BODY" "in the middle of"
wait_check 30 "the replica is back in rotation after the failures" \
    bash -c "curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' -d '{\"mode\":\"ok\"}' $URL/v1/deployments/odd/predict | grep -c 200 >/dev/null"
predict '{"mode":"ok"}'
status "and answers again" 200

# ---- droverd's inference listener (--gateway-listen) ------------------------------------------
lgw() { local u=$URL; URL=$LURL; api "$@"; URL=$u; }
lgw POST /v1/deployments/odd/predict -d '{"mode":"ok","n":7}'
status "the inference listener: predict" 200
jqc "the inference listener: the replica's answer" '.mode == "ok" and .echo.n == 7'
lgw POST /v1/deployments/odd/predict -d '{"mode":"chunked"}'
eq "the inference listener: a chunked answer" "$BODY" "alpha beta gamma"
eq "the inference listener: 5 MiB to a slow reader -> 200" "$(big_through "$LURL/v1/deployments/odd/predict" "$TMP/big.l")" 200
check "the inference listener: 5 MiB byte for byte" cmp -s "$TMP/big.want" "$TMP/big.l"
lgw POST /v1/deployments/odd/predict -d '{"mode":"malformed"}'
status "the inference listener: a malformed answer" 502
as "" lgw POST /v1/deployments/odd/predict -d '{"mode":"ok"}'
status "the inference listener: no token" 401
api POST /v1/tokens -d '{"id":"rd","scopes":["read"]}'
RD=$(jq -r .secret <<<"$BODY")
as "$RD" lgw POST /v1/deployments/odd/predict -d '{"mode":"ok"}'
status "the inference listener: a read token made a moment ago" 403
api POST /v1/tokens -d '{"id":"pr","scopes":["predict"]}'
PR=$(jq -r .secret <<<"$BODY")
as "$PR" lgw POST /v1/deployments/odd/predict -d '{"mode":"ok"}'
status "the inference listener: a predict token made a moment ago" 200
as "$PR" lgw POST /v1/deployments/nope/predict -d '{"mode":"ok"}'
status "the inference listener: an unknown deployment" 404
api DELETE /v1/tokens/pr
status "revoke the predict token" 200
as "$PR" lgw POST /v1/deployments/odd/predict -d '{"mode":"ok"}'
status "the inference listener: the revoked token, right after the revoke answered" 401
api POST /v1/users -d '{"id":"carol","role":"member"}'
CAROL=$(jq -r .token.secret <<<"$BODY")
as "$CAROL" lgw POST /v1/deployments/odd/predict -d '{"mode":"ok"}'
status "the inference listener: a new user's token (another user's deployment)" 404
api DELETE /v1/users/carol
status "delete user carol" 200
as "$CAROL" lgw POST /v1/deployments/odd/predict -d '{"mode":"ok"}'
status "the inference listener: a deleted user's token, right after the delete" 401
ST=$(curl -s -o "$TMP/hz" -w '%{http_code}' "$LURL/healthz")
status "the inference listener: /healthz without a token" 200
jqc "the inference listener: /healthz says it is the head's" '.status == "ok" and .in_head == true' "$(cat "$TMP/hz")"

# ---- drover-gateway: the same client, its own server ---------------------------------------------
api POST /v1/tokens -d '{"id":"gw","scopes":["gateway"]}'
GWT=$(jq -r .secret <<<"$BODY")
GPORT=$(free_port)
GURL=http://127.0.0.1:$GPORT
("$BIN_DIR/drover-gateway" --server "$URL" --token "$GWT" --listen "127.0.0.1:$GPORT" >>"$TMP/gw.log" 2>&1) &
GWPID=$!
_BG_PIDS+=("$GWPID")
gw() { local u=$URL; URL=$GURL; api "$@"; URL=$u; }
gw_ok() { gw POST /v1/deployments/odd/predict -d '{"mode":"ok"}'; [ "$ST" == 200 ]; }
wait_check 60 "drover-gateway serves odd" gw_ok
gw POST /v1/deployments/odd/predict -d '{"mode":"chunked"}'
eq "drover-gateway: the chunked answer" "$BODY" "alpha beta gamma"
eq "drover-gateway: 5 MiB to a slow reader -> 200" "$(big_through "$GURL/v1/deployments/odd/predict" "$TMP/big.gw")" 200
check "drover-gateway: 5 MiB byte for byte" cmp -s "$TMP/big.want" "$TMP/big.gw"
gw POST /v1/deployments/odd/predict -d '{"mode":"malformed"}'
status "drover-gateway: a malformed answer" 502

# ---- the replica's port closed ------------------------------------------------------------------
RPID=$(tmp_replica_pids | head -1)
if [ -n "$RPID" ]; then
    kill -STOP "$RPID"
    # connections it had stay open but silent; a new one waits in the
    # backlog: a short deadline ends it
    predict '{"mode":"ok"}' -H 'X-Drover-Timeout: 1'
    check "a stopped replica: 502 or 504 at the deadline, not a hang ($ST)" test "$ST" == 504 -o "$ST" == 502
    kill -CONT "$RPID"
fi
wait_check 30 "answers again once the replica runs" bash -c "curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' -d '{\"mode\":\"ok\"}' $URL/v1/deployments/odd/predict | grep -c 200 >/dev/null"

kill -TERM "$GWPID"
wait "$GWPID"
eq "drover-gateway exits 0 on SIGTERM" "$?" 0
logs_sanitizer_clean "drover-gateway" "$TMP/gw.log"
droverd_finish gateway_upstream
t_done
