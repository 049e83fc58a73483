#!/usr/bin/env bash
# artifact_https.sh — artifacts at https:// sources, read by a node of an
# https head (droverd --tls; agent --ca-file) (issue 14): three https
# origins on loopback (t/lib/range_server.py --tls, Range support), with
# certificates made here by openssl under three private CAs: A and B are in
# droverd's --origin-ca-file bundle, C in nobody's; the agent trusts only A
# (--origin-ca-file).
#   - import of an https://127.0.0.1:PORT/ directory (CA A) and of one at
#     CA B: the head hashes them; one at CA C: exit 1 naming the
#     certificate, the artifact failed with that reason, deletable;
#   - a replica of the CA-A artifact sees exactly its bytes (it checks them
#     itself); the node read them once, with ranged GETs over https after
#     the head's redirects (its CA is not the origin's: both trusts hold);
#   - a replica of an artifact pushed to the head in 64 KiB chunks: exact
#     bytes (ranges at offsets > 0 over https, from the head itself);
#   - a replica of the CA-B artifact: failed, its event naming the
#     certificate and --origin-ca-file, no process started;
#   - a byte flipped at the CA-A origin (another artifact, not cached):
#     detected, failed naming the mismatch, no process started.
# shellcheck disable=SC2086
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}
LIB=$DROVER_SRC/t/lib
command -v openssl >/dev/null || { fail "openssl is installed"; t_done; }

BG=()
bg() { "$@" & BG+=($!); }
stop_bg() { local p; for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done; }
trap 'stop_bg; _workers_cleanup' EXIT

# ---- three CAs, a server certificate for 127.0.0.1 under each -------------------------------
. "$DROVER_SRC/t/lib/certs.bash"
for n in a b c; do
    mkca $n || { fail "openssl makes CA $n and its server certificate"; cat "$TMP/openssl.log"; t_done; }
done
cat "$TMP/a-ca.crt" "$TMP/b-ca.crt" >"$TMP/head-cas.pem"

# ---- the origins ------------------------------------------------------------------------------
for n in a b c; do
    mkdir -p "$TMP/web-$n"
    bg python3 -S "$LIB/range_server.py" --root "$TMP/web-$n" --port-file "$TMP/$n.port" \
        --tls "$TMP/$n.crt" "$TMP/$n.key"
done
wait_until 30 "the https origins listen" \
    eval '[ -s "$TMP/a.port" ] && [ -s "$TMP/b.port" ] && [ -s "$TMP/c.port" ]' ||
    { fail "the https origins start"; t_done; }
OA=https://127.0.0.1:$(cat "$TMP/a.port")
OB=https://127.0.0.1:$(cat "$TMP/b.port")
OC=https://127.0.0.1:$(cat "$TMP/c.port")
# ca_curl ORIGIN-NAME PATH: the origin's control routes, verified with its CA
ca_curl() { env -u CURL_CA_BUNDLE curl -s -f --cacert "$TMP/$1-ca.crt" "$(eval echo "\$O${1^^}")$2"; }
ca_curl a /_stats >/dev/null
eq "origin A answers https under CA A (curl --cacert)" "$?" 0

mkfiles() {   # mkfiles DIR SIZE: big.bin (SIZE random bytes), tok.txt, drover-files.txt
    mkdir -p "$1/sub"
    head -c "$2" /dev/urandom >"$1/big.bin"
    printf 'tokenizer %s\n' "$RANDOM" >"$1/tok.txt"
    head -c 3000 /dev/urandom >"$1/sub/x.bin"
    printf 'big.bin\ntok.txt\nsub/x.bin\n' >"$1/drover-files.txt"
    (cd "$1" && sha256sum big.bin tok.txt sub/x.bin)
}
mkfiles "$TMP/web-a/w" 300000 >"$TMP/expected-a"
mkfiles "$TMP/web-a/f" 90000 >"$TMP/expected-f"
mkfiles "$TMP/web-b/w" 40000 >"$TMP/expected-b"
mkfiles "$TMP/web-c/w" 1000 >/dev/null

# the head itself over TLS too (its own CA): the node's first hop (the
# head's blob route) must chain to that CA, the redirect's target to CA A
droverd_start "$TMP/d" --tls --config "$CFG" --origin-ca-file "$TMP/head-cas.pem" || exit 1
contains "droverd --tls publishes an https:// URL" "$URL" "https://127.0.0.1:"
HEAD_CA=$TMP/d/tls/ca.crt
export CURL_CA_BUNDLE=$HEAD_CA DROVER_CA_FILE=$HEAD_CA   # api()'s curl, cli()'s drover

# ---- imports ---------------------------------------------------------------------------------
cli artifact import --id ha --source "$OA/w/"
rc "import $OA/w/ (CA A, in droverd's --origin-ca-file)" 0
api GET /v1/artifacts/ha
XA=$(jq -Rsc 'split("\n") | map(select(. != "")) | sort' "$TMP/expected-a")
jqc "... its manifest has the three files with their sha256s" \
    '([.manifest.files[] | "\(.sha256)  \(.path)"] | sort) == '"$XA"
cli artifact import --id hf --source "$OA/f/"
rc "import $OA/f/" 0
cli artifact import --id hb --source "$OB/w/"
rc "import $OB/w/ (CA B, also in droverd's bundle)" 0
n_before=$(list_all /v1/artifacts | jq length)
cli artifact import --id hc --source "$OC/w/"
rc "import from an origin under CA C, which droverd does not trust" 1
contains "... names the certificate" "$ERR" "certificate"
contains "... and the flag" "$ERR" "--origin-ca-file"
api GET /v1/artifacts/hc
jqc "... the artifact is failed, naming the certificate" '.status.state == "failed" and (.status.reason | test("certificate"))'
api DELETE /v1/artifacts/hc
status "... and deletable" 200
eq "... nothing left" "$(list_all /v1/artifacts | jq length)" "$n_before"

# ---- bad trust files: exit 2 with the reason -------------------------------------------------
"$DROVERD" --data-dir "$TMP/d-bad" --origin-ca-file "$TMP/nope.pem" >"$TMP/.out" 2>"$TMP/.err"
RC=$? ERR=$(<"$TMP/.err")
rc "droverd --origin-ca-file naming a missing file" 2
contains "... naming it" "$ERR" "nope.pem"
mkdir -p "$TMP/agents"
"$BIN_DIR/drover-agent" --server "$URL" --data-dir "$TMP/agents/bad" --ca-file "$HEAD_CA" \
    --origin-ca-file "$TMP/expected-a" >"$TMP/.out" 2>"$TMP/.err"
RC=$? ERR=$(<"$TMP/.err")
rc "drover-agent --origin-ca-file naming a file that is no certificate" 2
contains "... naming it" "$ERR" "expected-a"

# ---- replicas -----------------------------------------------------------------------------------
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np1","instance_types":["self-l4"],"min_nodes":0,"max_nodes":1}'
status "create nodepool np1" 201
api POST /v1/clusters/sm/nodepools/np1/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
JOIN=$(jq -r .secret <<<"$BODY")
mkdir -p "$TMP/markers"
model() {   # model ID ARTIFACT EXPECTED
    local cmd
    cmd=$(jq -nc --arg s "$LIB/model_dir_check.py" --arg e "$3" --arg m "$TMP/markers" \
          '["python3", "-S", $s, $e, $m]')
    api POST /v1/models -d "{\"id\":\"$1\",\"artifact\":{\"id\":\"$2\"},\"runtime\":{\"command\":$cmd,\"startup_timeout_seconds\":60},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
    status "create model $1 with artifact $2" 201
}
deploy() {
    api POST /v1/deployments -d "{\"id\":\"$1\",\"model\":\"$2\",\"nodepools\":[{\"cluster\":\"sm\",\"nodepool\":\"np1\"}],\"autoscale\":{\"min_replicas\":1,\"max_replicas\":1}}"
    status "create deployment $1" 201
}
model m-a ha "$TMP/expected-a"
deploy d-a m-a
ca_curl a /_reset >/dev/null
start_agent a1 --join-token "$JOIN" --ca-file "$HEAD_CA" --origin-ca-file "$TMP/a-ca.crt"
wait_check "$W" "d-a: its replica is ready" replicas_ready d-a 1
id=$(replicas_json deployment=d-a | jq -r '.[0].id')
eq "d-a's replica checked its model dir: exact and read-only" "$(cat "$TMP/markers/$id" 2>/dev/null)" ok
eq "origin A sent the artifact's bytes once, over https" \
    "$(ca_curl a /_stats | jq '[.[]] | add')" "$(cat "$TMP"/web-a/w/{big.bin,tok.txt,sub/x.bin} | wc -c)"

# a pushed artifact in small chunks: ranges at offsets > 0, read from the
# https head itself (its CA, not the origin's)
mkdir -p "$TMP/push"
head -c 300000 /dev/urandom >"$TMP/push/w.bin"
printf 'cfg\n' >"$TMP/push/c.json"
(cd "$TMP/push" && sha256sum w.bin c.json) >"$TMP/expected-p"
cli artifact push "$TMP/push" --id hp --chunk-size 64K
rc "push an artifact in 64 KiB chunks to the https head" 0
model m-p hp "$TMP/expected-p"
deploy d-p m-p
wait_check "$W" "d-p: its replica is ready" replicas_ready d-p 1
id=$(replicas_json deployment=d-p | jq -r '.[0].id')
eq "d-p's replica checked its model dir (5 ranges of w.bin over https)" "$(cat "$TMP/markers/$id" 2>/dev/null)" ok

failed_reason() {   # failed_reason DEPLOYMENT: its replica_failed event's reason in $REASON
    api GET "/v1/events?kind=deployment&object=$1&limit=1000"
    REASON=$(jq -r '.items | map(select(.type == "replica_failed")) | .[0].reason // empty' <<<"$BODY")
    [ -n "$REASON" ]
}
no_process() {   # no_process DEPLOYMENT
    local started=0 id
    for id in $(replicas_json deployment=$1 | jq -r '.[].id'); do
        [ -e "$TMP/markers/$id" ] && started=1
    done
    eq "no $1 process ever started" "$started" 0
}

# an origin under CA B: the head trusts it, the node does not
model m-b hb "$TMP/expected-b"
deploy d-b m-b
wait_check "$W" "d-b: an event says its replica failed" failed_reason d-b
contains "... naming the origin's certificate and --origin-ca-file" "$REASON" "origin-ca-file"
contains "... and the origin (without a query)" "$REASON" "$OB/"
no_process d-b

# a flipped byte at origin A (artifact hf, not on the node yet)
ca_curl a "/_flip?path=f/big.bin&offset=70000" >/dev/null
eq "one byte of f/big.bin flipped as origin A serves it" "$?" 0
model m-f hf "$TMP/expected-f"
deploy d-f m-f
wait_check "$W" "d-f: an event says its replica failed" failed_reason d-f
BIG=$(grep ' big.bin$' "$TMP/expected-f" | cut -d' ' -f1)
contains "... naming the blob" "$REASON" "$BIG"
contains "... and the mismatch" "$REASON" "mismatch"
no_process d-f
kill -TERM "${AG_PID[a1]}"
wait "${AG_PID[a1]}"
eq "agent a1 exits 0 on SIGTERM" "$?" 0
logs_sanitizer_clean artifact_https "${EXTRA_AGENT_LOGS[@]}"
droverd_finish artifact_https
t_done
