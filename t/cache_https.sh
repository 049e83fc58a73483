#!/usr/bin/env bash
# cache_https.sh — the node cache's resume rule over https (issue 14): the
# cache (build/t/cache_tool, the agent's cache code, fetch.c -> http_tls.c)
# reads from t/lib/range_server.py --tls under a private CA it is told to
# trust (CACHE_CA_FILE, as drover-agent --ca-file), is SIGKILLed mid-
# download, and on restart re-fetches exactly what it had not verified: at
# most the remainder plus one chunk per file in all (the scenario of
# t/cache.sh over http: t/lib/cache_kill.bash). An origin whose CA it does
# not trust fails the download naming the certificate.
. "$(dirname "$0")/lib/common.bash"
TOOL=${CACHE_TOOL:-$(dirname "$DROVERD")/t/cache_tool}
[ -x "$TOOL" ] || { echo "no $TOOL (build first)"; exit 1; }
command -v openssl >/dev/null || { fail "openssl is installed"; t_done; }
. "$DROVER_SRC/t/lib/certs.bash"
MiB=1048576
for n in o x; do
    mkca $n || { fail "openssl makes CA $n and its server certificate"; cat "$TMP/openssl.log"; t_done; }
done

mkdir -p origin
python3 -S "$DROVER_SRC/t/lib/range_server.py" --root origin --port-file port --token sekrit \
    --tls "$TMP/o.crt" "$TMP/o.key" &
_BG_PIDS+=($!)
wait_until 30 "the https origin listens" test -s port || { fail "the https origin starts"; t_done; }
O=https://127.0.0.1:$(cat port)
sent_all() { curl -s --cacert "$TMP/o-ca.crt" "$O/_stats" | jq '[.[]] | add // 0'; }
# the scenario's curl calls (/_reset, /_slow) trust the origin's CA too
export CURL_CA_BUNDLE=$TMP/o-ca.crt
export CACHE_CA_FILE=$TMP/o-ca.crt

. "$DROVER_SRC/t/lib/cache_kill.bash"   # mk, cache_kill_resume
cache_kill_resume kill-https c1

# a CA the cache does not trust: nothing served, the reason names it
mk untrusted 1
out=$(printf 'ensure untrusted.json\nwait untrusted.json\n' |
      CACHE_CA_FILE=$TMP/x-ca.crt "$TOOL" run c2 $((100 * MiB)) 1 "$O/untrusted" sekrit)
contains "untrusted: the download fails" "$out" "failed: "
contains "untrusted: ... naming the certificate" "$out" "certificate"
check "untrusted: nothing in the cache" test -z "$(ls c2/blobs/sha256 2>/dev/null)"
t_done
