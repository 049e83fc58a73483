#!/usr/bin/env bash
# tls_renew.sh — certificates renewed while running (issue 18, item 1):
# droverd --tls with a short server certificate (--tls-cert-life 15) makes a
# new one under the same CA before it expires and serves it on the API and
# the inference listener without a restart (a new serial and notAfter, the
# pin unchanged, the key still 0600), while a connection opened before the
# renewal finishes its requests; droverd --tls-cert/--tls-key and
# drover-gateway read their files again when they change (polled every
# --tls-poll-seconds) and on SIGHUP, keeping the old pair when the new one is
# broken.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test
command -v openssl >/dev/null || { echo "1..0 # SKIP no openssl"; exit 0; }

# serial HOST:PORT CA: the serial of the certificate served there ("" when none)
serial()
{
    openssl s_client -connect "$1" -CAfile "$2" -verify_return_error </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null | cut -d= -f2
}
not_after() { openssl s_client -connect "$1" </dev/null 2>/dev/null | openssl x509 -noout -enddate 2>/dev/null | cut -d= -f2; }

"$DROVERD" --tls-cert-life 30 --data-dir "$TMP/bad" --listen 127.0.0.1:0 >/dev/null 2>"$TMP/bad.err"
eq "--tls-cert-life without --tls: a usage error" "$?" 2
"$DROVERD" --tls --tls-cert-life 5 --data-dir "$TMP/bad" --listen 127.0.0.1:0 >/dev/null 2>"$TMP/bad.err"
eq "--tls-cert-life 5 (below 10): a usage error" "$?/$(grep -c -- --tls-cert-life "$TMP/bad.err")" 2/1
"$DROVERD" --tls --tls-poll-seconds 1 --data-dir "$TMP/bad" --listen 127.0.0.1:0 >/dev/null 2>"$TMP/bad.err"
eq "--tls-poll-seconds without --tls-cert: a usage error" "$?/$(grep -c -- --tls-poll-seconds "$TMP/bad.err")" 2/1

# (a 15 s certificate: renewed when less than a third is left, ~9 s from now)
droverd_start "$TMP/d" --tls --tls-cert-life 15 --config "$CFG" --gateway-listen 127.0.0.1:0 || exit 1
T=$TMP/d/tls
CA=$T/ca.crt
export CURL_CA_BUNDLE=$CA
HP=${URL#https://}
GURL=$(tr -d '\n' <"$TMP/d/gateway.url")
GHP=${GURL#https://}
PIN=$(tr -d '\n' <"$T/ca.hash")
S1=$(serial "$HP" "$CA")
G1=$(serial "$GHP" "$CA")
NA1=$(not_after "$HP")
check "the API serves a certificate chaining to the CA ($S1)" test -n "$S1"
eq "the inference listener serves the same one" "$G1" "$S1"

# a connection opened now, kept open across the renewal
mkfifo "$TMP/old.in"
openssl s_client -connect "$HP" -CAfile "$CA" -quiet <"$TMP/old.in" >"$TMP/old.out" 2>"$TMP/old.err" &
OLDPID=$!
_BG_PIDS+=("$OLDPID")
exec 7>"$TMP/old.in"
printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n' >&7
answered() { [ "$(grep -o 'HTTP/1.1 200' "$TMP/old.out" | wc -l)" -ge "$1" ]; }
wait_check "$W" "a connection opened before the renewal: its first request answered" answered 1

renewed() { S2=$(serial "$HP" "$CA"); [ -n "$S2" ] && [ "$S2" != "$S1" ]; }
wait_check "$W" "the API serves a new certificate without a restart" renewed
NA2=$(not_after "$HP")
check "... with a later notAfter ($NA1 -> $NA2)" test "$(date -d "$NA2" +%s)" -gt "$(date -d "$NA1" +%s)"
eq "... the droverd that started is still the one serving" "$(kill -0 "$DPID" && echo up)" up
g_renewed() { G2=$(serial "$GHP" "$CA"); [ -n "$G2" ] && [ "$G2" != "$G1" ]; }
wait_check "$W" "the inference listener serves a new certificate too" g_renewed
eq "the pin is unchanged (same CA)" "$(tr -d '\n' <"$T/ca.hash")" "$PIN"
check "the new server.crt chains to the same CA" eval "openssl verify -CAfile '$CA' '$T/server.crt' >/dev/null"
eq "server.key is still mode 0600" "$(stat -c %a "$T/server.key")" 600
api GET /healthz
status "a new connection, trusting the CA, works" 200
TOKEN="" api GET /v1/tls/ca
eq "/v1/tls/ca still serves the CA" "$BODY" "$(<"$CA")"
printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&7
wait_check "$W" "... the old connection's next request is answered after the renewal" answered 2
exec 7>&-
check "droverd logged the renewal" grep -q "TLS: renewed the server certificate" "$TMP/d/droverd.log"
api POST /v1/tokens -d '{"id":"gw","scopes":["gateway"]}'
status "a gateway-scoped token (for drover-gateway below)" 201
GWT=$(jq -r .secret <<<"$BODY")

# ---- the operator's files: droverd --tls-cert and drover-gateway read them again ------------
mkcert() {   # mkcert NAME: NAME.crt/NAME.key signed by the test CA
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
        -keyout "$TMP/$1.key" -out "$TMP/$1.csr" 2>/dev/null &&
        openssl x509 -req -in "$TMP/$1.csr" -CA "$TMP/oca.crt" -CAkey "$TMP/oca.key" \
            -CAcreateserial -days 2 -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n') \
            -out "$TMP/$1.crt" 2>/dev/null
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=oca \
    -keyout "$TMP/oca.key" -out "$TMP/oca.crt" 2>/dev/null
mkcert one && mkcert two && mkcert three
check "test certificates one, two, three made" test -s "$TMP/three.crt"
put_pair() { cp "$TMP/$1.key" "$TMP/live.key.tmp" && mv "$TMP/live.key.tmp" "$TMP/live.key" &&
    cp "$TMP/$1.crt" "$TMP/live.crt.tmp" && mv "$TMP/live.crt.tmp" "$TMP/live.crt"; }
want() { local s; s=$(openssl x509 -in "$TMP/$1.crt" -noout -serial | cut -d= -f2)
    [ "$(serial "$2" "$TMP/oca.crt")" == "$s" ]; }
# gateway POLL LOG: drover-gateway on $GPORT serving the live pair, its files
# polled every POLL s (3600: only SIGHUP reads them while the test runs)
gateway() {
    (exec -a "$TMP/drover-gateway" "$BIN_DIR/drover-gateway" --server "$URL" --token "$GWT" \
        --listen "127.0.0.1:$GPORT" --ca-file "$CA" --tls-cert "$TMP/live.crt" \
        --tls-key "$TMP/live.key" --poll-seconds 1 --tls-poll-seconds "$1" >>"$2" 2>&1) &
    GWPID=$!
    _BG_PIDS+=("$GWPID")
}
"$BIN_DIR/drover-gateway" --server "$URL" --token x --tls-poll-seconds 1 >/dev/null 2>"$TMP/gwbad.err"
eq "drover-gateway --tls-poll-seconds without --tls-cert: a usage error naming the flag" \
    "$?/$(grep -c -- --tls-poll-seconds "$TMP/gwbad.err")" 2/1
put_pair one
GPORT=$(free_port)
gateway 1 "$TMP/gw.log"
wait_check "$W" "drover-gateway serves certificate one" want one "127.0.0.1:$GPORT"
put_pair two
wait_check "$W" "... after the files change: certificate two (polled every 1 s, no signal)" \
    want two "127.0.0.1:$GPORT"
kill -TERM "$GWPID"
wait "$GWPID"
eq "drover-gateway exits 0 on SIGTERM" "$?" 0
gateway 3600 "$TMP/gw2.log"
wait_check "$W" "drover-gateway polling every 3600 s serves certificate two" want two "127.0.0.1:$GPORT"
printf 'not a key\n' >"$TMP/live.key"
kill -HUP "$GWPID"
wait_check "$W" "... a broken key on SIGHUP: it says so" grep -q "cannot serve" "$TMP/gw2.log"
check "... and keeps serving two" want two "127.0.0.1:$GPORT"
put_pair three
kill -HUP "$GWPID"
wait_check "$W" "... SIGHUP with a good pair: certificate three" want three "127.0.0.1:$GPORT"
kill -TERM "$GWPID"
wait "$GWPID"
eq "... it exits 0 on SIGTERM" "$?" 0
droverd_finish tls_renew

put_pair one
droverd_start "$TMP/d2" --tls-cert "$TMP/live.crt" --tls-key "$TMP/live.key" --tls-poll-seconds 1 ||
    exit 1
HP2=${URL#https://}
check "droverd --tls-cert serves certificate one" want one "$HP2"
put_pair two
wait_check "$W" "... the files changed: certificate two (polled every 1 s)" want two "$HP2"
export CURL_CA_BUNDLE=$TMP/oca.crt
api GET /healthz
status "... a new connection works" 200
droverd_finish tls_renew_files
droverd_start "$TMP/d2" --tls-cert "$TMP/live.crt" --tls-key "$TMP/live.key" \
    --tls-poll-seconds 3600 || exit 1
HP2=${URL#https://}
check "droverd polling every 3600 s serves certificate two" want two "$HP2"
put_pair three
kill -HUP "$DPID"
wait_check "$W" "... SIGHUP after the files changed: certificate three, no restart" want three "$HP2"
droverd_finish tls_renew_sighup
t_done
