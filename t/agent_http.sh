#!/usr/bin/env bash
# agent_http.sh — drover-agent's own HTTP (src/agent/http1.c, httpd.c,
# http_client.c, http_tls.c) with real processes: an agent joins a
# self-managed nodepool and syncs over its plain-socket client; its
# process maps no libcurl, libcrypto, libssl, GnuTLS or libmicrohttpd;
# its log endpoint refuses requests without the key (401), malformed ones
# (400) and oversized heads (431) and keeps serving; an agent given an
# https:// server loads libcurl only then, reports the TLS failure and
# keeps retrying without crashing, and stops on SIGTERM; an agent given
# the head by name (localhost) joins; one whose head name does not
# resolve says so, keeps retrying and stops on SIGTERM; a bad --log-level
# is refused.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test
# maps_has PID REGEX: a shared object matching REGEX is mapped by PID
# (grep -c reads all its input: with pipefail, grep -q could leave awk to
# die of SIGPIPE after a match and fail the pipeline)
maps_has() { [ "$(awk '{ print $6 }' "/proc/$1/maps" 2>/dev/null | grep -cE "$2")" -gt 0 ]; }
# listen_ports PID: the TCP ports PID listens on (from /proc/net/tcp*)
listen_ports()
{
    local inodes
    inodes=$(ls -l "/proc/$1/fd" 2>/dev/null | grep -o 'socket:\[[0-9]*\]' | tr -dc '0-9\n' | sort -u)
    [ -n "$inodes" ] || return 0
    local hex
    for hex in $(awk -v ino="$(echo $inodes)" '
                   BEGIN { n = split(ino, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 }
                   $4 == "0A" && ($10 in want) { split($2, p, ":"); print p[2] }' \
                 /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
        echo $((16#$hex))
    done
}
# raw PORT BYTES...: send bytes (printf format) to 127.0.0.1:PORT, print the answer
raw()
{
    local port=$1
    shift
    # ("x": $(...) would strip the request's final newlines; python drops it)
    # shellcheck disable=SC2059
    python3 -S - "$port" "$(printf "$@"; echo x)" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(sys.argv[2][:-1].encode("latin-1"))
out = b""
while True:
    try:
        b = s.recv(65536)
    except Exception:
        break
    if not b:
        break
    out += b
sys.stdout.write(out.decode("latin-1"))
PY
}

# ---- droverd, a self-managed nodepool, a join token -----------------------------------
PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":5}'
status "create nodepool np" 201
api POST /v1/clusters/sm/nodepools/np/join-tokens -d '{"uses":10,"id":"t","ttl_seconds":3600}'
status "create a join token" 201
JOIN=$(jq -r .secret <<<"$BODY")

# a bad --log-level is refused (exit 2, as droverd's), not taken for info
OUT=$("$BIN_DIR/drover-agent" --server "$URL" --log-level verbose --data-dir "$TMP/bad-level" 2>&1)
eq "drover-agent --log-level verbose: exit 2, says what it takes" \
    "$? $(grep -c -- "--log-level must be debug, info, warn or error" <<<"$OUT")" "2 1"

# ---- a plain-http agent: joins, syncs, maps no TLS stack --------------------------------
start_agent a1 --server "$URL/" --join-token "$JOIN"
A1=${AG_PID[a1]}
one_ready() { nodes_json | jq -e 'length == 1 and .[0].status.state == "ready"' >/dev/null; }
wait_check "$W" "an agent joins over its own HTTP client and becomes ready" one_ready
no_tls_libs() { ! maps_has "$A1" '/(libcurl|libcrypto|libssl|libgnutls|libmicrohttpd)[.-]'; }
check "the agent maps no libcurl, libcrypto, libssl, GnuTLS or libmicrohttpd" no_tls_libs
maps_has "$A1" '/libc[.-]' && ok "(the check sees the agent's mappings: libc is there)" ||
    fail "the agent's maps cannot be read"

# ---- its log endpoint ------------------------------------------------------------------------
LP=""
find_lp() { LP=$(listen_ports "$A1" | head -n1); [ -n "$LP" ]; }
wait_check "$W" "the agent listens for log reads" find_lp
out=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$LP/logs/x?offset=0")
eq "log read without X-Drover-Key" "$out" 401
out=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Drover-Key: $(printf 'a%.0s' {1..64})" \
      "http://127.0.0.1:$LP/logs/x")
eq "log read with a wrong key" "$out" 401
out=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "http://127.0.0.1:$LP/logs/x")
eq "DELETE on the log endpoint" "$out" 405
out=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d x "http://127.0.0.1:$LP/logs/x")
eq "a request with a body" "$out" 413
out=$(raw "$LP" 'NOT HTTP AT ALL\r\n\r\n')
contains "a malformed request: 400 and the connection closed" "$out" "HTTP/1.1 400 "
out=$(raw "$LP" 'GET /logs/x HTTP/1.1\r\n\r\n')
contains "HTTP/1.1 without Host: 400" "$out" "HTTP/1.1 400 "
big=$(head -c 20000 /dev/zero | tr '\0' a)
out=$(raw "$LP" "GET /logs/x HTTP/1.1\r\nHost: x\r\nX-Big: $big\r\n\r\n")
contains "a 20 kB request head: 431" "$out" "HTTP/1.1 431 "
out=$(raw "$LP" 'GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
n=$(grep -c '^HTTP/1.1 401 ' <<<"$out")
eq "two pipelined requests on one connection get two answers" "$n" 2
check "the agent is still running" pid_alive "$A1"
check "the node is still ready" one_ready

# ---- an https server: libcurl only then, a clear error, no crash ------------------------
start_agent a2 --server "https://127.0.0.1:$PORT" --join-token "$JOIN"
A2=${AG_PID[a2]}
tls_tried() { grep -q "cannot reach the head at https://" "$TMP/agents/a2.log"; }
wait_check "$W" "an agent with an https:// server reports that it cannot reach the head" tls_tried
check "... and keeps running, retrying" pid_alive "$A2"
has_curl() { maps_has "$A2" '/libcurl[.-]'; }
check "... having loaded libcurl for https" has_curl
kill -TERM "$A2"
a2_gone() { ! pid_alive "$A2"; }
wait_check "$W" "... and stops on SIGTERM" a2_gone
n=$(nodes_json | jq length)
eq "the https agent did not join" "$n" 1

# ---- the head by name: looked up on the resolver's thread (src/common/resolver.c) -----------
start_agent a3 --server "http://localhost:$PORT" --join-token "$JOIN"
A3=${AG_PID[a3]}
two_ready() { nodes_json | jq -e '[.[] | select(.status.state == "ready")] | length == 2' >/dev/null; }
wait_check "$W" "an agent given the head by name (localhost) joins and becomes ready" two_ready
start_agent a4 --server "http://no-such-head.invalid:$PORT" --join-token "$JOIN" --insecure
A4=${AG_PID[a4]}
unresolved() { grep -q "cannot resolve no-such-head.invalid" "$TMP/agents/a4.log"; }
wait_check "$W" "an agent whose head name does not resolve says so" unresolved
check "... and keeps running, retrying" pid_alive "$A4"
kill -TERM "$A3" "$A4"
a34_gone() { ! pid_alive "$A3" && ! pid_alive "$A4"; }
wait_check "$W" "... and both stop on SIGTERM" a34_gone

kill -TERM "$A1"
a1_gone() { ! pid_alive "$A1"; }
wait_check "$W" "the plain agent stops on SIGTERM" a1_gone
droverd_finish agent_http
logs_sanitizer_clean agent_http "${EXTRA_AGENT_LOGS[@]}"
t_done
