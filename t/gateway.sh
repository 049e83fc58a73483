#!/usr/bin/env bash
# gateway.sh — the inference gateway end to end: real droverd, drover-agent
# and drover-demo-model processes on loopback.
#
#   - --listen and --gateway-listen may both be port 0; one fixed address
#     and port twice is refused;
#   - predictions through POST /v1/deployments/D/predict are answered by
#     the replicas and balanced across them (counts in a fair band);
#   - an OpenAI chat completion streams through (several data: events, then
#     [DONE], chunked text/event-stream); non-streamed and /models too; the
#     gateway counts their generated tokens (the usage, else the chunks);
#   - scopes: read -> 403, predict -> allowed; unknown and other users'
#     deployments -> 404; bodies over 1 MiB -> 413; X-Drover-Timeout checked;
#   - drover predict prints the answer, exit 1 with the error otherwise;
#   - drover predict takes deployment/ID too, and ends with a newline on a
#     terminal only;
#   - GET /metrics: the gateway's counters, a token needed; droverd's
#     process_* series and drover_build_info;
#   - cold start: 50 concurrent requests sent before any replica is ready
#     are all held and all answered 200;
#   - capacity: with max_concurrency 1 and a queue of 2, extra requests get
#     429 at once and waiting ones 503 at their deadline, with Retry-After;
#   - a client that disconnects while its request runs frees the slot;
#   - a replica killed under load: requests not sent to it succeed, the
#     ones it held get a clear 502/503.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}
# both on port 0 (droverd_start's --listen 127.0.0.1:0): two addresses, two ports
droverd_start "$TMP/d" --gateway-listen 127.0.0.1:0 --config "$CFG" || exit 1

# ---- listen addresses ------------------------------------------------------------------
LURL=$(tr -d '\n' <"$TMP/d/gateway.url" 2>/dev/null)
check "--listen and --gateway-listen both 127.0.0.1:0: two listeners" \
    test -n "$LURL" -a "$LURL" != "$URL"
LP=$(free_port)
"$DROVERD" --data-dir "$TMP/same" --listen "127.0.0.1:$LP" --gateway-listen "localhost:$LP" \
    >"$TMP/same.log" 2>&1
eq "--gateway-listen the same address and port as --listen: refused (exit 2)" "$?" 2
check "... saying so" grep -q 'must differ from --listen' "$TMP/same.log"

# ---- helpers ------------------------------------------------------------------------

# predict DEP BODY [curl args]: POST through the gateway; sets ST/BODY/HDRS
predict() { local d=$1 b=$2; shift 2; api POST "/v1/deployments/$d/predict" -d "$b" "$@"; }

# parallel N URL BODY OUT [headers...]: N POSTs, $PAR_MAX (default N) at a time; one
# status per line in OUT, bodies in OUT.0 .. OUT.N-1
parallel()
{
    local n=$1 url=$2 body=$3 out=$4 i
    shift 4
    {
        for ((i = 0; i < n; i++)); do
            printf 'url = "%s"\nrequest = "POST"\nheader = "Authorization: Bearer %s"\n' "$url" "$TOKEN"
            printf 'header = "Content-Type: application/json"\ndata = "%s"\n' "${body//\"/\\\"}"
            for h in "$@"; do printf 'header = "%s"\n' "$h"; done
            printf 'output = "%s.%d"\nwrite-out = "%%{http_code}\\n"\n' "$out" "$i"
            [ "$i" -lt $((n - 1)) ] && printf 'next\n'
        done
    } >"$out.cfg"
    curl -s --parallel --parallel-immediate --parallel-max "${PAR_MAX:-$n}" -m 120 -K "$out.cfg" >"$out" 2>/dev/null
}

# ---- a cluster, a CPU nodepool, a fast model with 2 replicas -----------------------------
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-cpu"],"min_nodes":1,"max_nodes":1}'
status "create nodepool (1 local-cpu node)" 201
api POST /v1/models -d '{"id":"fast","runtime":{"command":["drover-demo-model","--weights-mib","1"]},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model fast" 201
jqc "model: runtime.max_concurrency defaults to 64" '.runtime.max_concurrency == 64'
api POST /v1/deployments -d '{"id":"web","model":"fast","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":2,"max_replicas":2}}'
status "create deployment web (2 replicas)" 201
jqc "deployment: autoscale.cold_start_timeout_seconds defaults to 300" '.autoscale.cold_start_timeout_seconds == 300'
wait_check "$W" "2 replicas of web are ready" deployment_ready web 2

# ---- predictions and balancing ---------------------------------------------------------------
predict web '{"inputs":"hello"}'
status "predict through the gateway" 200
jqc "the replica's answer comes back unchanged" '(.outputs | length) == 1 and (.replica | startswith("web-"))'
eq "Content-Type passes through" "$(header Content-Type)" "application/json"
check "X-Drover-Replica names the replica that answered" test "$(header X-Drover-Replica)" == "$(jq -r .replica <<<"$BODY")"

N=200
parallel "$N" "$URL/v1/deployments/web/predict" '{"inputs":"balance me"}' "$TMP/bal" # 200 at once
eq "$N concurrent predictions all answered 200" "$(grep -c '^200$' "$TMP/bal")" "$N"
cat "$TMP"/bal.[0-9]* 2>/dev/null | jq -r .replica | sort | uniq -c >"$TMP/bal.counts"
for ((i = 0; i < 40; i++)); do
    predict web '{"inputs":"one at a time"}'
    jq -r .replica <<<"$BODY"
done | sort | uniq -c >"$TMP/seq.counts"
for f in bal seq; do
    if awk -v tot=0 '{n[NR] = $1; tot += $1} END { if (NR != 2) exit 1; for (i = 1; i <= 2; i++) if (n[i] < tot * 0.2) exit 1 }' "$TMP/$f.counts"; then
        ok "balanced ($f): both replicas get at least 20 % ($(tr '\n' ' ' <"$TMP/$f.counts"))"
    else
        fail "balanced ($f): both replicas get at least 20 %"
        why "$(cat "$TMP/$f.counts")"
    fi
done

# ---- OpenAI-style --------------------------------------------------------------------------
# generated tokens the gateway counted for web (gateway/gentok.h), from /metrics
gen_tokens() {
    api GET /metrics
    awk -F'} ' '/^drover_gateway_generated_tokens_total\{owner="admin",deployment="web"\}/ { print $2 }' <<<"$BODY"
}
GEN0=$(gen_tokens)
curl -s -N -D "$TMP/sse.h" -o "$TMP/sse" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"model":"web","stream":true,"max_tokens":6,"messages":[{"role":"user","content":"stream please"}]}' \
    "$URL/openai/v1/chat/completions"
SSE=$(<"$TMP/sse")
check "stream: 6 word chunks and a final one, then [DONE]" test "$(grep -c '^data: {' <<<"$SSE")" == 7
jqc "stream: the final chunk has the finish_reason" '.choices[0].finish_reason == "length"' \
    "$(grep '^data: {' "$TMP/sse" | tail -1 | sed 's/^data: //')"
contains "stream: ends with data: [DONE]" "$(tail -n 2 "$TMP/sse")" "data: [DONE]"
check "stream: Content-Type text/event-stream" grep -qi '^Content-Type: text/event-stream' "$TMP/sse.h"
check "stream: sent chunked (not buffered into one length)" grep -qi '^Transfer-Encoding: chunked' "$TMP/sse.h"
jqc "stream: each chunk is a chat.completion.chunk" 'select(.object) | .object == "chat.completion.chunk"' \
    "$(grep '^data: {' "$TMP/sse" | head -1 | sed 's/^data: //')"
api POST /openai/v1/chat/completions -d '{"model":"web","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}'
status "chat completion (not streamed)" 200
jqc "chat completion: one choice with 3 words" '.object == "chat.completion" and (.choices[0].message.content | split(" ") | length) == 3'
curl -s -N -o "$TMP/sse2" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"model":"web","stream":true,"stream_options":{"include_usage":true},"max_tokens":4,"messages":[{"role":"user","content":"usage please"}]}' \
    "$URL/openai/v1/chat/completions"
contains "stream with include_usage: a usage chunk" "$(<"$TMP/sse2")" '"completion_tokens":4'
# the stream without a usage: its 7 chunks; the others: their usage (3, 4)
GEN1=$(gen_tokens)
eq "metrics: generated tokens counted ($GEN0 -> $GEN1)" "$((${GEN1:-0} - ${GEN0:-0}))" 14
api POST /openai/v1/chat/completions -d '{"max_tokens":3,"messages":[]}'
status "chat completion without model" 400
jqc "no model: the error names the field (OpenAI's shape: param)" '.error.param == "model" and .error.type == "invalid_request_error"'
api POST /openai/v1/chat/completions -d '{"model":"nope","messages":[]}'
status "chat completion for an unknown deployment" 404
api GET /openai/v1/models
status "GET /openai/v1/models" 200
jqc "models lists web" '.object == "list" and ([.data[].id] | index("web") != null)'

# ---- errors, scopes, users ------------------------------------------------------------------
predict nope '{"inputs":"x"}'
status "unknown deployment" 404
error_shape "unknown deployment"
head -c $((1024 * 1024 + 10)) /dev/zero | tr '\0' 'a' >"$TMP/big"
predict web "" --data-binary @"$TMP/big"
status "body over 1 MiB" 413
predict web '{"inputs":"x"}' -H 'X-Drover-Timeout: soon'
status "malformed X-Drover-Timeout" 400
predict web '{"inputs":"x"}' -H 'X-Drover-Timeout: 5'
status "X-Drover-Timeout: 5" 200

api POST /v1/tokens -d '{"id":"rd","scopes":["read"]}'
RD=$(jq -r .secret <<<"$BODY")
api POST /v1/tokens -d '{"id":"pr","scopes":["predict"]}'
PR=$(jq -r .secret <<<"$BODY")
as "$RD" predict web '{"inputs":"x"}'
status "read token: predict" 403
as "$PR" predict web '{"inputs":"x"}'
status "predict token: predict" 200
as "$PR" api POST /openai/v1/chat/completions -d '{"model":"web","messages":[{"role":"user","content":"x"}]}'
status "predict token: chat completion" 200
api POST /v1/users -d '{"id":"bob","role":"member"}'
BOB=$(jq -r .token.secret <<<"$BODY")
as "$BOB" predict web '{"inputs":"x"}'
status "another user's deployment" 404

# ---- the CLI -------------------------------------------------------------------------------
cli predict web --json '{"inputs":"from the cli"}'
rc "drover predict --json" 0
jqc "drover predict prints the answer" '(.outputs | length) == 1' "$OUT"
printf '{"inputs":["a","b"]}' >"$TMP/in.json"
cli predict web --file "$TMP/in.json"
rc "drover predict --file" 0
jqc "drover predict --file: 2 outputs" '(.outputs | length) == 2' "$OUT"
cli predict nope --json '{"inputs":"x"}'
rc "drover predict on an unknown deployment" 1
contains "drover predict: the error is printed" "$ERR" "not found"
cli predict web --json '{not json'
rc "drover predict with malformed --json" 2
cli predict deployment/web --json '{"inputs":"kind/id"}'
rc "drover predict deployment/web (KIND/ID)" 0
jqc "drover predict deployment/web: the answer" '(.outputs | length) == 1' "$OUT"
cli predict deployment web --json '{"inputs":"kind id"}'
rc "drover predict deployment web (KIND ID)" 0
cli predict model/web --json '{"inputs":"x"}'
rc "drover predict model/web: not a deployment" 2
# piped, the answer is byte for byte (the demo's JSON has no final newline);
# on a terminal a newline follows it, so the prompt does not run into it
DROVER_SERVER=$URL DROVER_TOKEN=$TOKEN "$DROVER" predict web --json '{"inputs":"pipe"}' >"$TMP/pipe.out"
eq "drover predict into a pipe: the answer's last byte as sent (no newline added)" \
    "$(tail -c 1 "$TMP/pipe.out" | od -An -c | tr -d ' ')" "}"
curl -s -H "Authorization: Bearer $TOKEN" -d '{"inputs":"pipe"}' "$URL/v1/deployments/web/predict" >"$TMP/curl.out"
eq "drover predict into a pipe: as many bytes as the API's answer" "$(wc -c <"$TMP/pipe.out")" "$(wc -c <"$TMP/curl.out")"
DROVER_SERVER=$URL DROVER_TOKEN=$TOKEN script -qec "$DROVER predict web --json '{\"inputs\":\"tty\"}'" /dev/null \
    </dev/null >"$TMP/tty.out" 2>&1
eq "drover predict on a terminal: the answer then a newline" "$(tail -c 3 "$TMP/tty.out" | od -An -c | tr -d ' ')" '}\r\n'

# ---- metrics -------------------------------------------------------------------------------
TOKEN="" api GET /metrics
status "GET /metrics without a token" 401
as "$RD" api GET /metrics
status "GET /metrics with a read token" 200
contains "metrics: requests by deployment and class" "$BODY" 'drover_gateway_requests_total{owner="admin",deployment="web",code="2xx"}'
contains "metrics: latency histogram" "$BODY" 'drover_gateway_request_duration_seconds_bucket{owner="admin",deployment="web",le="+Inf"}'
contains "metrics: time to first byte of streams" "$BODY" 'drover_gateway_time_to_first_byte_seconds_count{owner="admin",deployment="web"} '
contains "metrics: per replica" "$BODY" 'drover_gateway_replica_requests_total{owner="admin",deployment="web",replica="web-'
contains "metrics: node gauges" "$BODY" 'drover_nodes{state="ready"} 1'
# the replica autoscaler's service totals (autoscale.ttft_slo_ms): every 2xx came from a
# replica, each was routed, their service time adds up to more than nothing
OK2=$(awk -F'} ' '/^drover_gateway_requests_total\{owner="admin",deployment="web",code="2xx"\}/ { print $2 }' <<<"$BODY")
SERVED=$(awk -F'} ' '/^drover_gateway_service_seconds_count\{owner="admin",deployment="web"\}/ { print $2 }' <<<"$BODY")
SVC_SUM=$(awk -F'} ' '/^drover_gateway_service_seconds_sum\{owner="admin",deployment="web"\}/ { print $2 }' <<<"$BODY")
ROUTED=$(awk -F'} ' '/^drover_gateway_routed_total\{owner="admin",deployment="web"\}/ { print $2 }' <<<"$BODY")
check "metrics: served by a replica ($SERVED) >= 2xx answers ($OK2) > 0" test "${SERVED:-0}" -ge "${OK2:-1}" -a "${OK2:-0}" -gt 0
check "metrics: routed ($ROUTED) >= served ($SERVED)" test "${ROUTED:-0}" -ge "${SERVED:-1}"
check "metrics: service seconds sum ($SVC_SUM) > 0" awk -v v="${SVC_SUM:-0}" 'BEGIN { exit !(v > 0) }'
contains "metrics: service_seconds is a summary" "$BODY" "# TYPE drover_gateway_service_seconds summary"
# the prompt-size estimate (body bytes / 4): every predict above had a body
PROMPT=$(awk -F'} ' '/^drover_gateway_prompt_tokens_estimate_total\{owner="admin",deployment="web"\}/ { print $2 }' <<<"$BODY")
check "metrics: prompt tokens estimated from the bodies ($PROMPT) > 0" test "${PROMPT:-0}" -gt 0
contains "metrics: prompt_tokens_estimate_total is a counter" "$BODY" "# TYPE drover_gateway_prompt_tokens_estimate_total counter"
as "$BOB" api GET /metrics
check "metrics: a member sees only their own deployments" test "$(grep -c 'deployment="web"' <<<"$BODY")" == 0
# droverd's process series (from /proc/self) and its build
as "$RD" api GET /metrics
for m in process_cpu_seconds_total process_resident_memory_bytes process_virtual_memory_bytes \
         process_open_fds process_max_fds process_start_time_seconds; do
    v=$(awk -v m="$m" '$1 == m { print $2 }' <<<"$BODY")
    check "metrics: $m is there with a number ($v)" grep -qE '^[0-9]+(\.[0-9]+)?$' <<<"$v"
    contains "metrics: $m has its TYPE line" "$BODY" "# TYPE $m "
done
# droverd's connections come and go: the count is near /proc's a moment later
FDS=$(awk '$1 == "process_open_fds" { print $2 }' <<<"$BODY")
NOW_FDS=$(ls "/proc/$DPID/fd" | wc -l)
check "metrics: process_open_fds ($FDS) counts droverd's descriptors ($NOW_FDS in /proc)" \
    test "$FDS" -gt 3 -a "$FDS" -le $((NOW_FDS + 20)) -a "$FDS" -ge $((NOW_FDS - 20))
check "metrics: resident memory below virtual, above 1 MiB" awk '$1 == "process_resident_memory_bytes" { r = $2 }
    $1 == "process_virtual_memory_bytes" { v = $2 } END { exit !(r > 1048576 && r < v) }' <<<"$BODY"
check "metrics: process_start_time_seconds is droverd's start (before now, this year)" awk -v now="$(date +%s)" \
    '$1 == "process_start_time_seconds" { exit !($2 <= now + 1 && $2 > now - 366 * 86400) } ' <<<"$BODY"
eq "metrics: process_max_fds is droverd's limit" "$(awk '$1 == "process_max_fds" { print $2 }' <<<"$BODY")" \
    "$(awk '/^Max open files/ { print $4 }' "/proc/$DPID/limits")"
VERSION_LINE=$("$DROVER" --version)
BUILD_COMMIT=$(sed -n 's/.*(commit \(.*\))$/\1/p' <<<"$VERSION_LINE")
BUILD_VERSION=$(awk '{ print $2 }' <<<"$VERSION_LINE")
contains "metrics: drover_build_info names the build's version and commit" "$BODY" \
    "drover_build_info{version=\"$BUILD_VERSION\",commit=\"$BUILD_COMMIT\"} 1"
eq "the version is CMake's project version" "$BUILD_VERSION" \
    "$(sed -n 's/^project(drover VERSION \([0-9.]*\) .*/\1/p' "$DROVER_SRC/CMakeLists.txt")"
if [ -e "$DROVER_SRC/.git" ]; then
    check "the commit is the checkout's ($BUILD_COMMIT)" grep -qE '^[0-9a-f]{12}$' <<<"$BUILD_COMMIT"
fi
mkdir -p "$TMP/tarball"
cmake -DSRC="$TMP/tarball" -DOUT="$TMP/buildinfo.c" -DVERSION=9.9 -P "$DROVER_SRC/scripts/buildinfo.cmake"
contains "a build outside git says commit \"unknown\"" "$(cat "$TMP/buildinfo.c")" 'drv_build_commit[] = "unknown";'
bad=$(grep -vE '^#|^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9.e+Inf-]+$' <<<"$BODY" | head -3)
eq "metrics: every line is a comment or NAME{LABELS} VALUE" "$bad" ""

# ---- per-deployment metrics: GET /v1/deployments/D/metrics and drover describe ------------------
for ((i = 0; i < 20; i++)); do predict web '{"inputs":"count me"}' >/dev/null; done
as "$RD" api GET /v1/deployments/web/metrics
status "GET /v1/deployments/web/metrics with a read token" 200
jqc "deployment metrics: the documented keys" 'has("deployment") and .window_seconds == 60 and
    (.requests.by_status | has("2xx") and has("4xx") and has("5xx") and has("429") and has("503")) and
    has("requests_per_second") and has("in_flight") and has("queued") and
    (.latency_ms | has("p50") and has("p90") and has("p99")) and (.ttfb_ms | has("p50") and has("p99")) and
    (.cold_starts | has("count") and has("mean_duration_ms") and has("last_duration_ms")) and
    (.replicas | type == "array") and (.history | type == "array")'
jqc "deployment metrics: the last minute's requests counted (>= 20, all 2xx so far)" \
    '.deployment == "web" and .requests.total >= 20 and .requests.by_status["2xx"] >= 20 and .requests.by_status["5xx"] == 0 and .requests_per_second > 0'
jqc "deployment metrics: latency percentiles in order" '.latency_ms.p50 > 0 and .latency_ms.p50 <= .latency_ms.p90 and .latency_ms.p90 <= .latency_ms.p99'
jqc "deployment metrics: streamed answers have a time to first byte" '.ttfb_ms.p50 > 0'
jqc "deployment metrics: both replicas listed with their requests" \
    '(.replicas | length) == 2 and ([.replicas[].requests] | add) >= 20 and all(.replicas[]; (.id | startswith("web-")) and .errors == 0)'
as "$BOB" api GET /v1/deployments/web/metrics
status "deployment metrics of another user's deployment" 404
api GET /v1/deployments/nope/metrics
status "deployment metrics of an unknown deployment" 404
history_has_point() { api GET /v1/deployments/web/metrics; jqq '(.history | length) >= 1 and .history[-1].desired_replicas == 2 and .history[-1].ready_replicas == 2 and .history[-1].t > 1700000000 and (.history[-1] | has("rps") and has("p50_ms") and has("p99_ms"))' <<<"$BODY"; }
wait_check 60 "deployment metrics: history gets a point every 10 s (with desired/ready replicas)" history_has_point
cli describe deployment web
rc "drover describe deployment web" 0
contains "drover describe deployment: a Metrics block" "$OUT" "Metrics (last 60s"
contains "drover describe deployment: latency percentiles" "$OUT" "latency:      p50 "
check "drover describe deployment: a line per replica" test "$(sed -n '/^Metrics/,/^$/p' <<<"$OUT" | grep -c '^  web-')" == 2

# ---- cold start: 50 requests before any replica is ready ----------------------------------------
api POST /v1/models -d '{"id":"slowload","runtime":{"command":["drover-demo-model","--weights-mib","1","--load-delay-ms","3000"]},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model slowload (ready after 3 s)" 201
api POST /v1/deployments -d '{"id":"cold","model":"slowload","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment cold" 201
parallel 50 "$URL/v1/deployments/cold/predict" '{"inputs":"wake up"}' "$TMP/cold"
eq "cold start: 50 concurrent requests sent before the replica was ready all answered 200" \
    "$(grep -c '^200$' "$TMP/cold")" 50
api GET /metrics
check "cold start counted in the metrics" grep -q 'drover_gateway_cold_starts_total{owner="admin",deployment="cold"} 1' <<<"$BODY"
check "cold start duration observed" grep -q 'drover_gateway_cold_start_duration_seconds_count{owner="admin",deployment="cold"} 1' <<<"$BODY"
api GET /v1/deployments/cold/metrics
jqc "deployment metrics: the cold start, its duration and the 50 answers" \
    '.cold_starts.count == 1 and .cold_starts.mean_duration_ms > 0 and .cold_starts.last_duration_ms > 0 and .requests.by_status["2xx"] == 50'

# ---- a replica killed under load -------------------------------------------------------------------
REPS=$(replicas_json "deployment=web")
VICTIM=$(jq -r '.[0].id' <<<"$REPS")
VPID=$(jq -r '.[0].status.pid' <<<"$REPS")
PAR_MAX=8 parallel 400 "$URL/v1/deployments/web/predict" '{"inputs":"under load"}' "$TMP/kill" &
LOAD=$!
sleep 0.15
kill -KILL "$VPID" 2>/dev/null
wait "$LOAD"
total=$(wc -l <"$TMP/kill")
okc=$(grep -c '^200$' "$TMP/kill")
bad=$(grep -vc '^200$' "$TMP/kill")
eq "killed replica: every request answered" "$total" 400
if [ "$bad" -le 8 ] && ! grep -vqE '^(200|502|503)$' "$TMP/kill"; then
    ok "killed replica: $okc answered 200, $bad got 502/503 (at most the ones it held)"
else
    fail "killed replica: only requests held by the killed replica fail, with 502/503"
    why "$(sort "$TMP/kill" | uniq -c)"
fi
for f in "$TMP"/kill.[0-9]*; do
    [ "$(head -c 9 "$f")" == '{"error":' ] || continue
    jqc "killed replica: the failure says what happened" '.error.message | test("replica|capacity|starting")' "$(cat "$f")"
    break
done
wait_check "$W" "the killed replica comes back and web has 2 ready replicas" deployment_ready web 2
parallel 50 "$URL/v1/deployments/web/predict" '{"inputs":"after"}' "$TMP/after"
eq "after the restart: all answered" "$(grep -c '^200$' "$TMP/after")" 50

# ---- a second droverd with queues of 2 (DROVER_GATEWAY_QUEUE_MAX), so overflow is cheap ----
droverd_finish "gateway (first droverd)"
DROVER_GATEWAY_QUEUE_MAX=2 droverd_start "$TMP/d2" --listen "127.0.0.1:$(free_port)" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-cpu"],"min_nodes":1,"max_nodes":1}'
status "second droverd: a nodepool" 201

# ---- capacity: max_concurrency 1, queue of 2 ----------------------------------------------------
# a whole core: the agent enforces cpu_millis as a CFS quota (agent/isolate.c), and
# the heavy request below is 3 to 8 s of CPU (sized by a measured one-input prediction)
api POST /v1/models -d '{"id":"slow","runtime":{"command":["drover-demo-model","--weights-mib","1","--layers","100000"],"max_concurrency":1},"resources":{"cpu_millis":1000,"memory_mib":64}}'
status "create model slow (max_concurrency 1)" 201
api POST /v1/deployments -d '{"id":"slow","model":"slow","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment slow" 201
wait_check "$W" "the replica of slow is ready" deployment_ready slow 1
# each input costs ~0.1 s, a few times that under ASan (the demo model is
# optimised there too, CMakeLists.txt): the heavy request has as many inputs
# as take 8 s at the fastest of two one-input predictions, 3 to 30 (here the
# cap: ~3 s of the one slot).
# A round counts only if the heavy request still held the slot once its last
# request was answered (on a loaded machine the timing may have been off):
# else the round is run again with a heavy request twice the size (4 rounds)
one() { curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d '{"inputs":["a"]}' "$URL/v1/deployments/slow/predict"; }
n=$({ one; one; } | sort -g | awk 'NR == 1 { n = int(8 / ($1 > 0 ? $1 : 0.001)) + 1
    print (n < 3 ? 3 : n > 30 ? 30 : n) }')
in_flight_is() { curl -s -H "Authorization: Bearer $TOKEN" "$URL/metrics" | grep -qF "drover_gateway_in_flight{owner=\"admin\",deployment=\"$1\"} $2"; }
capacity_round() # N: a heavy request of N inputs, the requests that find its slot busy; 0 if it outlasted them
{
    HEAVY=$(jq -cn --argjson n "$1" '{inputs: [range($n) | "abcdefghij"[. % 10:. % 10 + 1]]}')
    curl -s -o "$TMP/heavy" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        -d "$HEAVY" "$URL/v1/deployments/slow/predict" >"$TMP/heavy.code" &
    HEAVY_PID=$!
    wait_until 10 "the heavy request runs" in_flight_is slow 1
    parallel 5 "$URL/v1/deployments/slow/predict" '{"inputs":"light"}' "$TMP/cap" "X-Drover-Timeout: 1"
    api POST /v1/deployments/slow/predict -d '{"inputs":"x"}' -H 'X-Drover-Timeout: 0.3'
    # (every other request is answered: only the heavy one can hold the slot)
    in_flight_is slow 1 && kill -0 "$HEAVY_PID" 2>/dev/null
}
held=no
for round in 1 2 3 4; do
    capacity_round "$n" && { held=yes; break; }
    echo "# capacity round $round: the heavy request ($n inputs) ended before the others"
    wait "$HEAVY_PID"
    wait_until 30 "slow is idle" in_flight_is slow 0
    [ "$round" -lt 4 ] && n=$((n * 2))
done
eq "capacity: the heavy request held the slot through a round (round $round of at most 4, $n inputs)" "$held" yes
codes=$(sort "$TMP/cap" | uniq -c | tr '\n' ' ')
eq "capacity: with the slot busy and 2 waiting, 3 are refused at once (429) ($codes)" "$(grep -c '^429$' "$TMP/cap")" 3
eq "capacity: the 2 waiting get 503 at their deadline ($codes)" "$(grep -c '^503$' "$TMP/cap")" 2
f429=$(grep -l 'resource_exhausted' "$TMP"/cap.[0-9]* | head -1)
f503=$(grep -l '"unavailable"' "$TMP"/cap.[0-9]* | head -1)
jqc "429 body: the error shape, the queue named" '.error.code == "resource_exhausted" and (.error.message | test("waiting"))' "$(cat "$f429" 2>/dev/null)"
jqc "503 body: no capacity in time" '.error.code == "unavailable" and (.error.message | test("capacity"))' "$(cat "$f503" 2>/dev/null)"
status "one more that cannot get capacity in time" 503
check "503 carries Retry-After" test -n "$(header Retry-After)"
wait "$HEAVY_PID"
eq "the heavy request itself is answered" "$(cat "$TMP/heavy.code")" 200
wait_check 10 "slow is idle again" in_flight_is slow 0

# ---- a client that disconnects frees its slot ------------------------------------------------------
metric() { curl -s -H "Authorization: Bearer $TOKEN" "$URL/metrics" | grep -F "$1" | awk '{print $2}' | head -1; }
before=$(metric 'drover_gateway_rejected_total{owner="admin",deployment="slow",reason="client_closed"}')
curl -s -o /dev/null -m 0.3 -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"inputs":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t"]}' \
    "$URL/v1/deployments/slow/predict"
client_gone_counted() { [ "$(metric 'drover_gateway_rejected_total{owner="admin",deployment="slow",reason="client_closed"}')" == $(( ${before:-0} + 1 )) ]; }
wait_check 10 "a client that left is noticed (client_closed counted)" client_gone_counted
wait_check 10 "its slot is free again (in flight 0)" bash -c "curl -s -H 'Authorization: Bearer $TOKEN' $URL/metrics | grep -q 'drover_gateway_in_flight{owner=\"admin\",deployment=\"slow\"} 0'"
# the replica stops too: else the abandoned request keeps one of its two threads, the next
# request takes the other, /health waits behind both and the agent restarts the replica
# mid-request (seen under load as a 502 "Server returned nothing" here)
replica_stopped() { cat "$TMP"/d2/nodes/*/*/replicas/slow-*/stdout.log 2>/dev/null | grep -qF 'the client left; prediction stopped'; }
wait_check 10 "the replica stops computing for the client that left" replica_stopped
predict slow '{"inputs":"x"}' -H 'X-Drover-Timeout: 30'
status "the next request gets the freed slot" 200

droverd_finish "gateway (second droverd)"
logs_sanitizer_clean "gateway" "$TMP"/d/nodes/*/*/agent.log "$TMP"/d2/nodes/*/*/agent.log
t_done
