#!/usr/bin/env bash
# tokens.sh — tokens and node identities (issue 18, item 3): join tokens of
# 256 bits, 1 h by default, stored hashed, with a uses count consumed
# atomically (agents racing for a one-use token: exactly one joins; a used-up
# token is refused with the reason; `drover nodepool join-token --uses`); an
# agent restarted after its token is spent keeps its node credential; a node
# credential speaks for its own node only (403 for another's id); revoking
# a node (`drover node revoke`) or deleting it refuses its credential at the
# next call on every agent route (sync, checkpoints, blobs) and the node goes
# not_ready then lost; an admin revokes any user's node (a member only
# their own); failed authentications are rate-limited per address
# (429 with Retry-After) while good credentials from that address still
# work, and the limit recovers; the same on the inference listener and on
# drover-gateway (--auth-fail-limit).
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-60}   # bound of each wait (s): only ends a hung test
JT=/v1/clusters/sm/nodepools/np/join-tokens

# register SECRET OUT: POST /v1/agent/register with a join token; OUT gets
# the status, OUT.body the answer
register()
{
    curl -s -o "$2.body" -w '%{http_code}\n' -X POST -H 'Content-Type: application/json' \
        -H "Authorization: Bearer $1" -d '{"hostname":"h"}' "$URL/v1/agent/register" >"$2"
}
# sync CRED BODY: POST /v1/agent/sync with a node credential (ST, BODY)
sync() { as "$1" api POST /v1/agent/sync -d "$2"; }
# race SECRET N DIR: N registrations at once; "201 x K, 401 x M" counted in
# N201 and N401, the credentials in DIR/*.body
race()
{
    local i pids=()
    rm -rf "$3"
    mkdir -p "$3"
    for i in $(seq 1 "$2"); do
        register "$1" "$3/$i.code" &
        pids+=($!)
    done
    wait "${pids[@]}"
    N201=$(cat "$3"/*.code | grep -c '^201$')
    N401=$(cat "$3"/*.code | grep -c '^401$')
}
node_ready() { [ "$(node_state "$1")" == ready ]; }
node_lost() { [ "$(node_state "$1")" == lost ]; }

for bad in "--auth-fail-limit 5" "--auth-fail-limit 0/5" "--auth-fail-limit 5/0" \
    "--audit-max-entries 0" "--audit-max-age x"; do
    # shellcheck disable=SC2086
    "$DROVERD" $bad --data-dir "$TMP/bad" --listen 127.0.0.1:0 >/dev/null 2>"$TMP/bad.err"
    eq "droverd $bad: a usage error naming the flag" "$?/$(grep -c -- "${bad%% *}" "$TMP/bad.err")" 2/1
done
droverd_start "$TMP/d" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":50}'
status "create nodepool np" 201

# ---- join tokens: 256 bits, 1 h, hashed, one use by default ---------------------------------
api POST "$JT" -d '{"id":"one"}'
status "create join token one (defaults)" 201
ONE=$(jq -r .secret <<<"$BODY")
jqc "a drvj_ secret of 64 hex digits (256 bits), uses 1, used 0" \
    '(.secret | test("^drvj_[0-9a-f]{64}$")) and .uses == 1 and .used == 0'
jqc "it expires an hour after it was made" \
    '((.expires_at | fromdateiso8601) - (.created_at | fromdateiso8601)) == 3600'
HASH=$(printf '%s' "$ONE" | sha256sum | cut -d' ' -f1)
REC=$(store_sql "$DDIR" "SELECT body FROM objects WHERE kind = 'jointoken'")
check "the store keeps its SHA-256, not the secret" eval '[[ "$REC" == *"$HASH"* && "$REC" != *"$ONE"* ]]'
api POST "$JT" -d '{"uses":0}'
status "uses 0" 400
api POST "$JT" -d '{"uses":10001}'
status "uses 10001 (the bound is 10000)" 400

race "$ONE" 8 "$TMP/race1"
eq "8 agents race for a one-use token: exactly one joins" "$N201" 1
eq "... the 7 others get 401" "$N401" 7
check "... each told the token is used up" \
    eval '[ "$(grep -l "is used up" "$TMP"/race1/*.body | wc -l)" == 7 ]'
CA=$(jq -r .credential "$(grep -l "\"credential\"" "$TMP"/race1/*.body)")
A=$(jq -r .node_id "$(grep -l "\"credential\"" "$TMP"/race1/*.body)")
register "$ONE" "$TMP/replay"
eq "a replay of the spent token later: 401" "$(<"$TMP/replay")" 401
api GET "$JT"
jqc "the list shows one used 1 of 1" 'any(.items[]; .id == "one" and .used == 1 and .uses == 1)'

"$DROVER" --server "$URL" --token "$ADMIN" nodepool join-token sm/np --id three --uses 3 -o json \
    >"$TMP/three.json" 2>"$TMP/three.err"
eq "drover nodepool join-token --uses 3 -o json exits 0" "$?" 0
check "... the token allows 3 joins" jq -e '.uses == 3 and .used == 0' "$TMP/three.json"
THREE=$(jq -r .secret "$TMP/three.json")
race "$THREE" 10 "$TMP/race3"
eq "10 agents race for a three-use token: exactly three join" "$N201" 3
eq "... the 7 others get 401" "$N401" 7
B=$(jq -r .node_id "$(grep -l "\"credential\"" "$TMP"/race3/*.body | head -1)")
CB=$(jq -r .credential "$(grep -l "\"credential\"" "$TMP"/race3/*.body | head -1)")
"$DROVER" --server "$URL" --token "$ADMIN" nodepool join-tokens sm/np >"$TMP/jts.txt" 2>&1
check "drover nodepool join-tokens shows USED 3/3 and used-up" \
    eval 'grep -q "^three .*3/3 *used-up" "$TMP/jts.txt"'
cli nodepool join-token sm/np --uses 0
rc "drover nodepool join-token --uses 0: a usage error" 2
contains "... naming the bound" "$ERR" "1 to 10000"
cli nodepool join-token sm/np --uses 10001
rc "... --uses 10001 too" 2

# ---- a node credential speaks for its own node only ---------------------------------------------
sync "$CA" "{\"node\":\"$A\"}"
status "node $A's credential, naming $A: sync" 200
sync "$CA" "{\"node\":\"$B\"}"
status "node $A's credential naming node $B: sync" 403
contains "... the refusal names both nodes" "$BODY" "$A"
sync "$CB" '{}'
status "node $B's credential: sync" 200
as "$CA" api GET "/v1/blobs/sha256/$(printf '0%.0s' {1..64})"
status "node $A's credential on the blob route: authenticated, its owner's blobs only (none)" 404
as "$CA" api GET /v1/agent/checkpoints/dep
status "node $A's credential: its owner's checkpoints" 200
as "$CA" api GET "/v1/nodes/$B"
status "node $A's credential is no user token: GET /v1/nodes/$B" 401

# ---- revoke: refused at the next call, not_ready then lost --------------------------------------
synced_ready() { sync "$CA" '{}'; node_ready "$A"; }
wait_check "$W" "node $A is ready (it syncs)" synced_ready
api POST "/v1/nodes/$A/revoke"
status "revoke node $A" 200
jqc "... it is revoked (with when) and cordoned" '.revoked == true and (.revoked_at | type == "string") and .cordoned == true'
api POST "/v1/nodes/$A/revoke"
status "revoke it again (no change)" 200
api POST /v1/nodes/nope/revoke
status "revoke a node that does not exist" 404
sync "$CA" '{}'
status "the revoked credential: sync" 401
contains "... says it was revoked" "$BODY" "was revoked"
as "$CA" api GET /v1/agent/checkpoints/dep
status "... checkpoints" 401
as "$CA" api GET "/v1/blobs/sha256/$(printf '0%.0s' {1..64})"
status "... blobs" 401
sync "$CB" '{}'
status "node $B is untouched" 200
wait_check "$W" "revoked node $A goes lost (no more syncs)" node_lost "$A"
api GET "/v1/events?kind=node&object=$A"
jqc "... through not_ready, like a dead node (its events)" \
    '[.items[].type] as $t | ($t | index("revoked")) and ($t | index("not_ready")) and ($t | index("lost"))'
api GET "/v1/audit?kind=nodes"
jqc "the revoke is in the audit log" "any(.items[]; .path == \"/v1/nodes/$A/revoke\" and .status == 200)"

# ---- an agent: restarted after its one-use token is spent, then revoked ---------------------------
api POST "$JT" -d '{"id":"ag"}'
AGTOK=$(jq -r .secret <<<"$BODY")
start_agent a1 --join-token "$AGTOK"
agent_node() { nodes_json | jq -r '[.[] | select(.join_token == "ag")] | .[0].id // empty'; }
has_agent_node() { [ -n "$(agent_node)" ] && node_ready "$(agent_node)"; }
wait_check "$W" "agent a1 joins with one-use token ag" has_agent_node
N=$(agent_node)
kill -TERM "${AG_PID[a1]}"
wait "${AG_PID[a1]}"
start_agent a1 --join-token "$AGTOK"
wait_check "$W" "a1 restarted (the token spent) syncs as $N with its saved credential" \
    eval 'grep -q "node $N: synced" "$TMP/agents/a1.log" && node_ready "$N"'
eq "... no second node joined" "$(nodes_json | jq '[.[] | select(.join_token == "ag")] | length')" 1
cli node revoke "$N" -o json
rc "drover node revoke $N -o json" 0
check "... prints the node, revoked" eval 'jq -e ".revoked == true" <<<"$OUT" >/dev/null'
agent_gone() { ! pid_alive "${AG_PID[a1]}"; }
wait_check "$W" "the revoked agent is refused at its next sync and stops" agent_gone
check "... its log says the credential was revoked" grep -q "was revoked" "$TMP/agents/a1.log"
wait_check "$W" "... and $N goes lost" node_lost "$N"

# ---- delete: refused at the next call -------------------------------------------------------------
api DELETE "/v1/nodes/$B"
status "delete node $B" 200
refused() { sync "$CB" '{}'; [ "$ST" == 401 ]; }
wait_check "$W" "the deleted node's credential is refused" refused
contains "... as unknown (deleted)" "$BODY" "deleted"

# ---- an admin revokes another user's node; a member cannot ---------------------------------------
api POST /v1/users -d '{"id":"carol"}'
status "admin creates member carol" 201
CAROL=$(jq -r .token.secret <<<"$BODY")
api POST /v1/users -d '{"id":"dave"}'
status "admin creates member dave" 201
DAVE=$(jq -r .token.secret <<<"$BODY")
as "$CAROL" api POST /v1/clusters -d '{"id":"cs","provider":"self-managed","region":"default"}'
status "carol creates cluster cs" 201
as "$CAROL" api POST /v1/clusters/cs/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":5}'
status "carol creates nodepool cs/np" 201
as "$CAROL" api POST /v1/clusters/cs/nodepools/np/join-tokens -d '{"id":"cj"}'
status "carol makes a join token" 201
register "$(jq -r .secret <<<"$BODY")" "$TMP/carol"
eq "carol's node joins" "$(<"$TMP/carol")" 201
C=$(jq -r .node_id "$TMP/carol.body")
CC=$(jq -r .credential "$TMP/carol.body")
as "$DAVE" api POST "/v1/nodes/$C/revoke"
status "member dave revoking carol's node: not his (404)" 404
as "$DAVE" api POST "/v1/nodes/$C/revoke?user=carol"
status "... naming carol with ?user=: 403" 403
sync "$CC" '{}'
status "carol's node still syncs" 200
cli node revoke "$C" -o json
rc "the admin: drover node revoke (carol's node) exits 0" 0
check "... prints carol's node, revoked" eval 'jq -e ".revoked == true and .owner == \"carol\"" <<<"$OUT" >/dev/null'
sync "$CC" '{}'
status "carol's revoked node: sync refused" 401
api POST "/v1/nodes/$C/revoke?user=carol"
status "the admin again, with ?user=carol (idempotent)" 200
api POST "/v1/nodes/$C/revoke?user=dave"
status "... ?user=dave (dave has no such node)" 404

# ---- failed authentications, rate-limited per address -------------------------------------------------
droverd_stop TERM
# (one failure a 5 s: the recovery at the end waits that long, while each
# call here takes ~20 ms, or ~100 ms on a loaded machine)
droverd_start "$DDIR" --config "$CFG" --auth-fail-limit 0.2/10 --gateway-listen 127.0.0.1:0 ||
    { fail "droverd restarts"; t_done; }
BAD="drv_$(printf '0%.0s' {1..64})"
codes=""
t0=$(date +%s.%N)
for i in $(seq 1 30); do
    as "$BAD" api GET /v1/clusters
    codes+="$ST "
done
t1=$(date +%s.%N)
first=$(cut -d' ' -f1-10 <<<"$codes")
eq "30 bad tokens at once: the first 10 (the burst) are 401" "$first" "$(printf '401 %.0s' {1..10} | sed 's/ $//')"
n429=$(grep -o 429 <<<"$codes" | wc -l)
# (one more each 5 s: as many as the time the 30 took allows, 0 when idle)
extra=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print int((b - a) * 0.2) }')
check "... then 429s ($n429 of 30: burst 10, one more each 5 s, $extra in the $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s taken)" \
    test "$n429" -ge $((20 - extra))
# (a loaded machine may take long enough between two requests for one more
# failure to be allowed: once; a second refill takes another 5 s)
again() { "$@"; [ "$ST" == 429 ] || "$@"; }
again as "$BAD" api GET /v1/clusters
status "a bad token while limited" 429
error_shape "rate limited"
RA=$(header Retry-After)
check "... with Retry-After ($RA s)" eval '[[ "$RA" =~ ^[0-9]+$ ]] && [ "$RA" -ge 1 ]'
api GET /v1/clusters
status "the admin's good token from the same address still works" 200
again sync "$CB" '{}'
status "a bad node credential is limited too" 429
reg_limited() { register "drvj_$(printf '0%.0s' {1..64})" "$TMP/limited"; ST=$(<"$TMP/limited"); }
again reg_limited
eq "... and a bad join token" "$(<"$TMP/limited")" 429
# the same limit on the inference listener (its own buckets) and drover-gateway (its flag)
api POST /v1/tokens -d '{"id":"gwt","scopes":["gateway"]}'
status "a gateway-scoped token" 201
GWT=$(jq -r .secret <<<"$BODY")
GPORT=$(free_port)
(exec -a "$TMP/drover-gateway" "$BIN_DIR/drover-gateway" --server "$URL" --token "$GWT" \
    --listen "127.0.0.1:$GPORT" --auth-fail-limit 0.01/5 --poll-seconds 1 >>"$TMP/gw.log" 2>&1) &
GWPID=$!
_BG_PIDS+=("$GWPID")
"$BIN_DIR/drover-gateway" --server "$URL" --token x --auth-fail-limit 5 >/dev/null 2>"$TMP/gwbad.err"
eq "drover-gateway --auth-fail-limit 5: a usage error naming the flag" \
    "$?/$(grep -c -- --auth-fail-limit "$TMP/gwbad.err")" 2/1
# limited_after URL N RATE NAME: N bad-token predicts answered 401, then 429
# with Retry-After. The bucket gains RATE tokens a second: on a loaded
# machine the requests may take long enough for one more to be allowed, so
# the requests go on until 3 429s have come (at most N + 30), and the 401s
# may pass N only by the refills the time they took allows (none in the
# ~1 s this takes on an idle machine)
limited_after()
{
    local u=$URL i codes="" t0 t1 n401 n429=0 extra most
    URL=$1
    t0=$(date +%s.%N)
    for ((i = 0; i < $2 + 30 && n429 < 3; i++)); do
        as "$BAD" api POST /v1/deployments/x/predict -d '{}'
        codes+="$ST "
        [ "$ST" == 429 ] && n429=$((n429 + 1))
    done
    t1=$(date +%s.%N)
    URL=$u
    n401=$(grep -o 401 <<<"$codes" | wc -l)
    extra=$(awk -v a="$t0" -v b="$t1" -v r="$3" 'BEGIN { print int((b - a) * r) }')
    most=$(($2 + extra))
    eq "$4: the first $2 bad tokens (the burst) get 401" "$(cut -d' ' -f1-"$2" <<<"$codes")" \
        "$(printf '401 %.0s' $(seq 1 "$2") | sed 's/ $//')"
    check "... then 429s: $n401 401s in all, at most $2 + $extra (refills at $3/s in the $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s taken): $codes" \
        eval '[ "$n429" -ge 3 ] && [ "$n401" -le "$most" ]'
    RA=$(header Retry-After)
    check "... with Retry-After ($RA s)" eval '[[ "$RA" =~ ^[0-9]+$ ]] && [ "$RA" -ge 1 ]'
}
GURL=$(tr -d '\n' <"$DDIR/gateway.url")
limited_after "$GURL" 10 0.2 "droverd's inference listener"
gw_up() { curl -s -m 5 "http://127.0.0.1:$GPORT/healthz" | jq -e '.head_reachable == true' >/dev/null 2>&1; }
wait_check "$W" "drover-gateway follows the head" gw_up
limited_after "http://127.0.0.1:$GPORT" 5 0.01 "drover-gateway --auth-fail-limit 0.01/5"
kill -TERM "$GWPID"
wait "$GWPID"
eq "drover-gateway exits 0 on SIGTERM" "$?" 0
recovered() { as "$BAD" api GET /v1/clusters; [ "$ST" == 401 ]; }
wait_check "$W" "the limit recovers: a bad token gets 401 again" recovered
droverd_finish tokens
logs_sanitizer_clean tokens "${EXTRA_AGENT_LOGS[@]}"
t_done
