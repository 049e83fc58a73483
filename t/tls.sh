#!/usr/bin/env bash
# tls.sh — droverd --tls (issue 18): the CA and server certificate it makes
# in DATA_DIR/tls/, TLS 1.2/1.3 only and no plaintext on the API port, the
# pin in `drover nodepool join-token`, an agent joining with the right pin
# and refused (its valid join token never used) with a wrong one and
# through a man in the middle (no secret reaches it), the CLI
# with --ca-file / `login --ca-hash` and without trust, plain http:// to a
# non-loopback address refused without --insecure (CLI and agent); the
# inference listener (--gateway-listen) and a standalone drover-gateway
# (--tls-cert/--tls-key, following the head with --ca-file) answer a
# predict over TLS and refuse plaintext; local agents trust the CA;
# droverd --tls-cert/--tls-key serves (and pins) the given certificate.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test
command -v openssl >/dev/null || { echo "1..0 # SKIP no openssl"; exit 0; }

droverd_start "$TMP/d" --tls --config "$CFG" --gateway-listen 127.0.0.1:0 || exit 1
T=$TMP/d/tls
CA=$T/ca.crt
export CURL_CA_BUNDLE=$CA   # the curl tool of api(); libcurl (the CLI) ignores it
contains "droverd --tls publishes an https:// URL" "$URL" "https://127.0.0.1:"
check "DATA_DIR/tls/ has ca.crt, server.crt, server.key" test -s "$CA" -a -s "$T/server.crt" -a -s "$T/server.key"
eq "server.key is mode 0600" "$(stat -c %a "$T/server.key")" 600
eq "ca.key is mode 0600" "$(stat -c %a "$T/ca.key")" 600
PIN=$(tr -d '\n' <"$T/ca.hash")
SPKI="sha256:$(openssl x509 -in "$CA" -pubkey -noout | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)"
eq "ca.hash is the SHA-256 of the CA's SubjectPublicKeyInfo (as openssl computes it)" "$PIN" "$SPKI"
check "the server certificate chains to the CA" eval "openssl verify -CAfile '$CA' '$T/server.crt' >/dev/null"

# ---- TLS versions, plaintext, trust -----------------------------------------------------
HP=${URL#https://}
api GET /healthz
status "GET /healthz over TLS with the CA" 200
s13=$(openssl s_client -connect "$HP" -tls1_3 -CAfile "$CA" </dev/null 2>&1)
contains "TLS 1.3 handshake" "$s13" "New, TLSv1.3, Cipher is TLS_"
s12=$(openssl s_client -connect "$HP" -tls1_2 -CAfile "$CA" </dev/null 2>&1)
contains "TLS 1.2 handshake" "$s12" "New, TLSv1.2, Cipher is ECDHE"
s11=$(openssl s_client -connect "$HP" -tls1_1 -cipher 'DEFAULT@SECLEVEL=0' </dev/null 2>&1)
contains "TLS 1.1 refused (no cipher agreed)" "$s11" "Cipher is (NONE)"
plain=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://$HP/healthz")
eq "plain HTTP to the TLS port gets no HTTP answer" "$plain" 000
unverified=$(env -u CURL_CA_BUNDLE curl -s -m 10 -o /dev/null -w '%{http_code}' "$URL/healthz")
eq "curl without the CA refuses the head's certificate" "$unverified" 000
TOKEN="" api GET /v1/tls/ca
status "GET /v1/tls/ca needs no token" 200
contains "... and is the CA" "$BODY" "$(sed -n 2p "$CA")"

# ---- the CLI ------------------------------------------------------------------------------------
cli get users
rc "the CLI without trust fails" 1
contains "... saying the certificate is not trusted and what to do" "$ERR" "--ca-file"
cli --ca-file "$CA" get users
rc "the CLI with --ca-file works" 0
DROVER_SERVER=$URL "$DROVER" login --token "$ADMIN" --ca-hash "sha256:$(printf '0%.0s' {1..64})" \
    >"$TMP/.out" 2>"$TMP/.err"
eq "drover login with a wrong --ca-hash fails" "$?" 1
contains "... saying the CA does not match the pin" "$(<"$TMP/.err")" "not the pinned"
DROVER_SERVER=$URL "$DROVER" login --token "$ADMIN" --ca-hash "$PIN" >"$TMP/.out" 2>"$TMP/.err"
eq "drover login --ca-hash PIN works" "$?" 0
check "... and saves the CA next to the config" test -s "$XDG_CONFIG_HOME/drover/ca.crt"
"$DROVER" get users >"$TMP/.out" 2>"$TMP/.err"
eq "a later command (no flags) uses the saved trust" "$?" 0

# ---- pinned joins ------------------------------------------------------------------------
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":5}'
status "create nodepool np" 201
"$DROVER" nodepool join-token sm/np --id jt --uses 5 >"$TMP/.out" 2>"$TMP/.err"
JOUT=$(<"$TMP/.out")
contains "join-token prints the agent command with --ca-hash" "$JOUT" "--ca-hash $PIN"
SECRET=$(sed -n 's/^secret: *//p' <<<"$JOUT")

agent_exit() # NAME: AG_RC gets its exit status once it exits
{
    local p=${AG_PID[$1]}
    AG_RC=timeout
    wait_until "$W" "agent $1 to exit" eval "! pid_alive $p" || return
    wait "$p"
    AG_RC=$?
}
BAD="sha256:$(printf 'ab%.0s' {1..32})"
start_agent bad --join-token "$SECRET" --ca-hash "$BAD"
agent_exit bad
eq "an agent with a wrong pin exits 2" "$AG_RC" 2
contains "... saying the head's CA does not match and nothing was sent" \
    "$(<"$TMP/agents/bad.log")" "refusing to send the join token"
eq "... no node joined with its (valid) token" "$(nodes_json | jq length)" 0
check "... and the head logged no registration" eval "! grep -q 'registered with join token' '$TMP/d/droverd.log'"
check "... and kept no CA" test ! -e "$TMP/agents/bad/ca.crt"

# a man in the middle with its own certificate, relaying /v1/tls/ca (so the
# pin matches): the agent's verification of the head fails, no secret leaves
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=mitm \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$TMP/mitm.key" -out "$TMP/mitm.crt" 2>/dev/null
(exec -a "$TMP/mitm" python3 -S "$DROVER_SRC/t/lib/tls_mitm.py" --target "$URL" --cert "$TMP/mitm.crt" \
    --key "$TMP/mitm.key" --port-file "$TMP/mitm.port" --log "$TMP/mitm.log" 2>>"$TMP/mitm.err") &
MITM=$!
_BG_PIDS+=("$MITM")
wait_until 30 "the proxy to listen" test -s "$TMP/mitm.port"
start_agent mitm --server "https://127.0.0.1:$(<"$TMP/mitm.port")" --join-token "$SECRET" --ca-hash "$PIN"
refused() { grep -qs "not signed by the trusted CA" "$TMP/agents/mitm.log"; }
wait_check "$W" "through a MITM with another certificate the agent refuses the head's certificate" refused
check "... the proxy saw the CA fetch" grep -q "GET /v1/tls/ca" "$TMP/mitm.log"
check "... and never the join token" eval "! grep -qF '$SECRET' '$TMP/mitm.log'"
check "... nor a register call" eval "! grep -q 'agent/register' '$TMP/mitm.log'"
kill -TERM "${AG_PID[mitm]}"
agent_exit mitm
eq "... no node joined" "$(nodes_json | jq length)" 0
kill -TERM "$MITM"
wait "$MITM" 2>/dev/null

DOWN=$(free_port)
start_agent early --server "https://127.0.0.1:$DOWN" --join-token "$SECRET" --ca-hash "$PIN"
retrying() { grep -qs "cannot fetch the head's CA.*retrying" "$TMP/agents/early.log"; }
wait_check "$W" "an agent whose head is not up yet keeps asking for the CA" retrying
kill -TERM "${AG_PID[early]}"
agent_exit early
eq "... and stops on SIGTERM (exit 0)" "$AG_RC" 0

start_agent good --join-token "$SECRET" --ca-hash "$PIN"
one_ready() { nodes_json | jq -e 'length == 1 and .[0].status.state == "ready"' >/dev/null; }
wait_check "$W" "an agent with the right pin joins over TLS and becomes ready" one_ready
check "... keeping the pinned CA in its data dir" cmp -s "$CA" "$TMP/agents/good/ca.crt"

# ---- plain http:// to a non-loopback head -----------------------------------------------
IP=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.' | grep -v '^127\.' | head -1)
if [ -n "$IP" ]; then
    DROVER_SERVER="http://$IP:1" "$DROVER" --token x get users >"$TMP/.out" 2>"$TMP/.err"
    eq "CLI: http:// to $IP fails" "$?" 1
    contains "... refused before connecting, naming --insecure" "$(<"$TMP/.err")" "--insecure"
    DROVER_SERVER="http://$IP:1" "$DROVER" --token x --insecure get users >"$TMP/.out" 2>"$TMP/.err"
    check "... with --insecure it tries (and cannot connect)" eval "grep -q 'cannot reach' '$TMP/.err'"
    start_agent plain --server "http://$IP:1" --join-token "$SECRET"
    agent_exit plain
    eq "agent: http:// to $IP exits 2" "$AG_RC" 2
    contains "... saying why and naming --insecure" "$(<"$TMP/agents/plain.log")" "--insecure"
else
    echo "# skip: this machine has no non-loopback IPv4 address for the http:// checks"
fi

# ---- inference over TLS: droverd's listener and drover-gateway ---------------------------
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-cpu"],"min_nodes":1,"max_nodes":1}'
status "create local nodepool" 201
api POST /v1/models -d '{"id":"fast","runtime":{"command":["drover-demo-model","--weights-mib","1"]},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model fast" 201
api POST /v1/deployments -d '{"id":"web","model":"fast","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment web" 201
wait_check "$W" "a local agent (given the CA) joins over TLS and web gets a ready replica" deployment_ready web 1
GURL=$(tr -d '\n' <"$TMP/d/gateway.url")
contains "the inference listener publishes an https:// URL" "$GURL" "https://127.0.0.1:"
gw() { local u=$URL; URL=$1; shift; api "$@"; URL=$u; }
"$DROVER" predict web --json '{"inputs":"the CLI over tls"}' >"$TMP/.out" 2>"$TMP/.err"
eq "drover predict over TLS with the saved CA" "$?" 0
contains "... answered by the replica" "$(<"$TMP/.out")" "outputs"
gw "$GURL" POST /v1/deployments/web/predict -d '{"inputs":"over tls"}'
status "predict through droverd's inference listener over TLS" 200
plain=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST -d '{}' "http://${GURL#https://}/v1/deployments/web/predict")
eq "plain HTTP to the inference listener gets no HTTP answer" "$plain" 000
s11=$(openssl s_client -connect "${GURL#https://}" -tls1_1 -cipher 'DEFAULT@SECLEVEL=0' </dev/null 2>&1)
contains "the inference listener refuses TLS 1.1" "$s11" "Cipher is (NONE)"

api POST /v1/tokens -d '{"id":"gw","scopes":["gateway"]}'
status "a gateway-scoped token" 201
GWT=$(jq -r .secret <<<"$BODY")
GPORT=$(free_port)
(exec -a "$TMP/drover-gateway" "$BIN_DIR/drover-gateway" --server "$URL" --token "$GWT" \
    --listen "127.0.0.1:$GPORT" --ca-file "$CA" --tls-cert "$T/server.crt" --tls-key "$T/server.key" \
    --poll-seconds 1 >>"$TMP/gw.log" 2>&1) &
GWPID=$!
_BG_PIDS+=("$GWPID")
SURL=https://127.0.0.1:$GPORT
gw_health() { curl -s -m 5 "$SURL/healthz" | jq -e '.head_reachable == true' >/dev/null 2>&1; }
wait_check 60 "drover-gateway serves over TLS and follows the TLS head (--ca-file)" gw_health
gw "$SURL" POST /v1/deployments/web/predict -d '{"inputs":"through the standalone gateway"}'
status "predict through drover-gateway over TLS" 200
jqc "... answered by the replica" '(.outputs | length) == 1 and (.replica | startswith("web-"))'
plain=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GPORT/healthz")
eq "plain HTTP to drover-gateway's TLS port gets no HTTP answer" "$plain" 000
kill -TERM "$GWPID"
wait "$GWPID"
eq "drover-gateway exits 0 on SIGTERM" "$?" 0

kill -TERM "${AG_PID[good]}"
droverd_finish tls

# ---- droverd --tls-cert/--tls-key: the operator's certificate ------------------------------
droverd_start "$TMP/d2" --tls-cert "$TMP/mitm.crt" --tls-key "$TMP/mitm.key" || exit 1
export CURL_CA_BUNDLE=$TMP/mitm.crt
api GET /healthz
status "droverd --tls-cert: /healthz over TLS with that certificate" 200
TOKEN="" api GET /v1/tls/ca
eq "... /v1/tls/ca serves it" "$BODY" "$(<"$TMP/mitm.crt")"
check "... and makes no DATA_DIR/tls/" test ! -e "$TMP/d2/tls"
droverd_finish tls-cert
t_done
