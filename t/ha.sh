#!/usr/bin/env bash
# ha.sh — several heads on one PostgreSQL (issue 17): one leads, the others
# stand by (503 and the leader's URL, /healthz with the role, /v1/status),
# follow the record log, and take over. SIGKILL of the leader during a burst
# of creates: a standby leads (read from its events and lease_history; the
# measured takeover goes to the log, nothing asserts on time), every create
# that got a 201 is there. SIGSTOP of the leader past its lease: after
# SIGCONT it has stepped down, and the log holds no write of its epoch after
# the next epoch began. The CLI, an agent and drover-gateway with several
# URLs find the leader; the agent's replica and a predict loop through the
# gateway see no failover. A local-provider agent is given every head's
# URL and outlives its head: the new leader adopts it. PostgreSQL restarted under the heads: one leads,
# nothing acknowledged is lost.
. "$(dirname "$0")/lib/common.bash"
# shellcheck source=lib/pg.bash
. "$DROVER_SRC/t/lib/pg.bash"
# node_lost far off: a takeover under load may leave a node unheard longer than
# the suites' 4 s, and this test checks that its replica is not restarted
WORKERS_CFG='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 600000}'
workers_init

# ---- one head on SQLite: always the leader, no lease ----------------------------------------
DROVER_TEST_STORE=sqlite droverd_start "$TMP/lone" || exit 1
api GET /v1/status
status "GET /v1/status on SQLite" 200
jqc "SQLite: one head, the leader, no lease" '.store == "sqlite" and .role == "leader" and .lease == null and (.heads | length) == 1'
api GET /healthz
jqc "SQLite: /healthz says leader" '.role == "leader"'
cli status
rc "drover status on SQLite" 0
contains "... says there is no lease" "$OUT" "none (one head)"
droverd_stop
eq "the SQLite head stops cleanly" "$DEXIT" 0
"$DROVERD" --data-dir "$TMP/never" --lease-ttl 0.5 >/dev/null 2>&1
eq "--lease-ttl under 1 s: usage (exit 2)" "$?" 2
"$DROVERD" --data-dir "$TMP/never" --advertise-url ftp://x >/dev/null 2>&1
eq "--advertise-url not http(s): usage (exit 2)" "$?" 2

TTL=2
pg_start || exit 1
pg_createdb ha || exit 1
DB=$(pg_url ha)
sqlq() { pg_sql ha "$1"; }

# shellcheck source=lib/heads.bash
. "$DROVER_SRC/t/lib/heads.bash"
leader_name()
{
    local n
    for n in a b c; do
        [ "$(role_of $n)" == leader ] && { echo "$n"; return 0; }
    done
    return 1
}

head_start a
wait_for "a to lead" is_role a leader
head_start b
head_start c
eq "a leads" "$(role_of a)" leader
eq "b stands by" "$(role_of b)" standby
eq "c stands by" "$(role_of c)" standby
TOKEN=$(tr -d '\n' <"$TMP/a/admin.token")
check "standbys write no admin.token of their own" test ! -e "$TMP/b/admin.token"

URL=${HURL[a]}
api POST /v1/users -d '{"id":"alice"}'
status "create alice on the leader" 201
ALICE=$(jq -r .token.secret <<<"$BODY")

# ---- a standby answers 503 with the leader's URL ----------------------------------------
URL=${HURL[b]}
api GET /v1/clusters
status "a standby answers API calls with 503" 503
eq "... code not_leader" "$(jq -r .error.code <<<"$BODY")" not_leader
eq "... the leader's URL in the body" "$(jq -r .leader <<<"$BODY")" "${HURL[a]}"
eq "... and in X-Drover-Leader" "$(header X-Drover-Leader)" "${HURL[a]}"
api POST /v1/agent/sync -d '{}'
status "a standby refuses agent syncs too" 503
# the standby follows the log: alice's token (made on a) authenticates on b
synced() { URL=${HURL[$1]} as "$ALICE" api GET /v1/status; [ "$ST" == 200 ] && jqq '.role == "standby"' <<<"$BODY"; }
wait_for "b to apply alice's token from the log" synced b
check "a standby knows alice's token (it followed the log)" synced b
lag0() { URL=${HURL[a]} api GET /v1/status; jqq '[.heads[] | select(.role != "gone")] | length == 3 and all(.lag == 0)' <<<"$BODY"; }
# (lag is the leader's log against what each head last reported applying:
# any write of the leader's own between two reads shows as lag for a
# heartbeat, so the check is that it gets there, not that it stays)
wait_check 120 "status: three heads, lag 0" lag0
jqc "status: a leads, epoch >= 1, lease unexpired" \
    ".role == \"leader\" and .epoch >= 1 and .lease.expires_in_ms > 0 and .lease.url == \"${HURL[a]}\" and ([.heads[] | select(.role == \"leader\")] | length == 1)"
E1=$(jq -r .epoch <<<"$BODY")
URL=${HURL[a]} api GET /metrics
contains "metrics: drover_head_leader 1 on the leader" "$BODY" "drover_head_leader 1"
URL=${HURL[b]} api GET /metrics
contains "metrics: drover_head_leader 0 on a standby" "$BODY" "drover_head_leader 0"

# ---- the CLI with several servers ------------------------------------------------------------
URL="${HURL[b]},${HURL[a]}" cli get users -o json
rc "drover --server STANDBY,LEADER get users" 0
contains "... lists alice" "$OUT" alice

# ---- an agent given every head, and its replica --------------------------------------------
URL=${HURL[a]}
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":2}'
status "create nodepool np" 201
api POST /v1/clusters/sm/nodepools/np/join-tokens -d '{"uses":10}'
status "create a join token" 201
JOIN=$(jq -r .secret <<<"$BODY")
start_agent n1 --server "${HURL[b]},${HURL[a]},${HURL[c]}" --join-token "$JOIN"
api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","2"],"startup_timeout_seconds":60},"resources":{"gpu":{"count":1,"memory_mib":6000,"compute_percent":25},"cpu_millis":500,"memory_mib":512}}'
status "create model demo" 201
api POST /v1/deployments -d '{"id":"dep","model":"demo","nodepools":[{"cluster":"sm","nodepool":"np"}],"autoscale":{"min_replicas":1}}'
status "create deployment dep" 201
rep_ready() { replicas_json "deployment=dep" | jq -e 'length == 1 and .[0].status.state == "ready"' >/dev/null; }
wait_for "the replica to be ready" rep_ready
check "the agent, given a standby first, reached the leader: the replica is ready" rep_ready
check "the agent moved on from the standby" grep -q "moving from head ${HURL[b]}" "$TMP/agents/n1.log"
AGP=${AG_PID[n1]}
RPIDS=$(tmp_replica_pids | sort | tr '\n' ' ')
check "one replica process runs ($RPIDS)" [ -n "$RPIDS" ]

# ---- drover-gateway given every head, a predict loop through it -----------------------------
api POST /v1/tokens -d '{"id":"gw","scopes":["gateway"]}'
GWT=$(jq -r .secret <<<"$BODY")
api POST /v1/tokens -d '{"id":"pr","scopes":["predict"]}'
PR=$(jq -r .secret <<<"$BODY")
GURL=http://127.0.0.1:$(free_port)
(exec -a "$TMP/drover-gateway" "$BIN_DIR/drover-gateway" --server "${HURL[c]},${HURL[a]},${HURL[b]}" \
    --token "$GWT" --listen "${GURL#http://}" --name gw-ha --threads 2 --poll-seconds 1 \
    >>"$TMP/gw.log" 2>&1) &
_BG_PIDS+=("$!")
gw_ok() { curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $PR" \
    -d '{"inputs":"ha"}' "$GURL/v1/deployments/dep/predict" | grep -q 200; }
wait_for "drover-gateway to route dep" gw_ok
check "drover-gateway, given a standby first, predicts" gw_ok
check "... it moved on from the standby" grep -q "moving from head ${HURL[c]}" "$TMP/gw.log"
predict_loop()
{
    while :; do
        curl -s -m 10 -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $PR" \
            -d '{"inputs":"ha"}' "$GURL/v1/deployments/dep/predict"
        sleep 0.05
    done
}
predict_loop >"$TMP/predict.codes" 2>/dev/null &
PLP=$!
_BG_PIDS+=("$PLP")

# ---- a local-provider agent: given every head's URL -------------------------------------------
api POST /v1/clusters -d '{"id":"lc","provider":"local","region":"local"}'
status "create local cluster lc" 201
api POST /v1/clusters/lc/nodepools -d '{"id":"lp","instance_types":["local-l4"],"min_nodes":1,"max_nodes":1}'
status "create local nodepool lp (min_nodes 1)" 201
local_node() { nodes_json | jq -r '[.[] | select(.cluster == "lc")][0].id // empty'; }
wait_for "lp's node to exist" eval '[ -n "$(local_node)" ]'
LN=$(local_node)
ln_ready() { [ "$(node_state "$LN")" == ready ]; }
wait_for "the local node $LN to be ready" ln_ready
check "the local node is ready" ln_ready
LPID=$(tr -d '\n' <"$TMP/a/nodes/admin/$LN/agent.pid")
LCMD=$(tr '\0' ' ' <"/proc/$LPID/cmdline")
contains "the local agent was given every head's URL (b)" "$LCMD" "${HURL[b]}"
contains "... and c's" "$LCMD" "${HURL[c]}"

# ---- SIGKILL of the leader during a burst of creates ---------------------------------------
burst()   # burst PREFIX: creates until killed, one "name code" line each
{
    local i=0 code
    while :; do
        code=$(http -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
            -H 'Content-Type: application/json' -d "{\"id\":\"$1-$i\",\"provider\":\"local\",\"region\":\"local\"}" \
            "${HURL[a]}/v1/clusters")
        echo "$1-$i $code"
        i=$((i + 1))
        [ "$code" == 000 ] && break
    done
}
: >"$TMP/burst.out"
burst k >"$TMP/burst.out" 2>/dev/null &
BP=$!
_BG_PIDS+=("$BP")
wait_for "some creates to land" eval "[ \$(grep -c ' 201' $TMP/burst.out) -ge 20 ]"
KILLED_AT=$(date +%s.%N)
kill -KILL "${HPID[a]}"
wait "${HPID[a]}" 2>/dev/null
wait "$BP" 2>/dev/null
newleader() { L=$(leader_name) && [ "$L" != a ]; }
wait_for "a standby to lead" newleader
L=$(leader_name)
N201=$(grep -c ' 201' "$TMP/burst.out")
echo "# burst: $N201 creates got 201 before the SIGKILL; new leader: $L"
E2=$(sqlq "select max(epoch) from lease_history")
TAKEN=$(sqlq "select extract(epoch from taken_at) from lease_history where epoch = $E2")
AFTER=$(sqlq "select after_expiry_ms from lease_history where epoch = $E2")
echo "# takeover: $(echo "$TAKEN - $KILLED_AT" | bc) s after the SIGKILL (TTL ${TTL} s; $AFTER ms after the lease expired)"
check "the epoch went up ($E1 -> $E2)" [ "$E2" -gt "$E1" ]
URL=${HURL[$L]}
api GET "/v1/events?kind=head"
jqc "the new leader logged leader_elected (epoch $E2)" "any(.items[]?; .type == \"leader_elected\" and (.reason | contains(\"epoch $E2\")))"
missing=0
while read -r name code; do
    [ "$code" == 201 ] || continue
    api GET "/v1/clusters/$name"
    [ "$ST" == 200 ] || { missing=$((missing + 1)); echo "# lost: $name ($ST)"; }
done <"$TMP/burst.out"
eq "every create that got a 201 is on the new leader" "$missing" 0
eq "nothing half-written: every cluster record parses" \
    "$(sqlq "select count(*) from objects where kind = 'cluster' and body is not null and (body::json->>'id') is null")" 0
api POST /v1/clusters -d '{"id":"after","provider":"local","region":"local"}'
status "the new leader takes writes" 201
URL="${HURL[a]},${HURL[b]},${HURL[c]}" cli get clusters after -o json
rc "drover --server DEAD,... get clusters: moves on to the leader" 0
cli_st() { URL=${HURL[b]} cli status -o json; [ "$RC" == 0 ] && jqq ".epoch == $E2 and any(.heads[]; .role == \"leader\" and .url == \"${HURL[$L]}\")" <<<"$OUT"; }
wait_for "b's status to show the new leader" cli_st
check "drover status on b: epoch $E2, led by $L" cli_st
URL=${HURL[b]} cli status
contains "drover status prints a table of heads" "$OUT" "ROLE"
URL=${HURL[$L]}
wait_for "the replica to be ready under the new leader" rep_ready
check "the new leader re-adopted the node: the replica is ready" rep_ready
check "the agent was not restarted (pid $AGP)" pid_alive "$AGP"
wait_for "the local node to be ready under the new leader" ln_ready
check "the local node is ready under the new leader" ln_ready
check "its agent outlived the head that started it (pid $LPID)" pid_alive "$LPID"
eq "the new leader adopted it, started no other" "$(tr -d '\n' <"$TMP/$L/nodes/admin/$LN/agent.pid" 2>/dev/null)" "$LPID"
check "... and logged so" grep -q "node admin/$LN's drover-agent (pid $LPID) was started by another head; adopted" "$TMP/$L/droverd.log"
eq "the replica was not restarted" "$(tmp_replica_pids | sort | tr '\n' ' ')" "$RPIDS"
gw_head() { curl -s -m 5 "$GURL/healthz" | jq -e '.head_reachable == true' >/dev/null 2>&1; }
wait_for "drover-gateway to reach the new leader" gw_head
kill "$PLP" 2>/dev/null
wait "$PLP" 2>/dev/null
NP=$(grep -c . "$TMP/predict.codes")
eq "the predict loop through drover-gateway saw no error across the failover ($NP predicts)" \
    "$(grep -vc '^200$' "$TMP/predict.codes")" 0

# ---- SIGSTOP of the leader for twice the TTL ----------------------------------------------
# kill -STOP returns before the process stops: one thread takes the signal
# and stops the others, which run on meanwhile (under load for a while). A
# write sent before every thread stopped may be handled and committed by
# the leader still holding its lease: a legitimate 201, once seen here.
# So the write goes only once every thread is stopped.
all_stopped()
{
    local t
    for t in /proc/"$1"/task/*/stat; do
        [ "$(sed 's/^.*) //' "$t" 2>/dev/null | cut -c1)" == T ] || return 1
    done
}
EL=$(URL=${HURL[$L]} api GET /v1/status; jq -r .epoch <<<"$BODY")
kill -STOP "${HPID[$L]}"
wait_for "every thread of $L to stop" all_stopped "${HPID[$L]}"
curl -s -o "$TMP/late.body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d '{"id":"late","provider":"local","region":"local"}' \
    --max-time 60 "${HURL[$L]}/v1/clusters" >"$TMP/late.code" 2>/dev/null &
LP=$!
_BG_PIDS+=("$LP")
other() { O=$(leader_name) && [ "$O" != "$L" ]; }
wait_for "the third head to lead while $L is stopped" other
sleep $((2 * TTL))
O=$(leader_name)
E3=$(sqlq "select max(epoch) from lease_history")
kill -CONT "${HPID[$L]}"
# it re-executes itself: between "standby" and the new process's listener
# it is down for a moment, so wait for the re-execution first
wait_for "$L to step down and re-execute" grep -q "re-executing as a standby" "$TMP/$L/droverd.log"
wait_for "$L to stand by" is_role "$L" standby
eq "the resumed head stands by" "$(role_of "$L")" standby
wait "$LP" 2>/dev/null
check "the write sent to it while stopped did not get a 2xx ($(cat "$TMP/late.code"))" \
    eval "! grep -q '^2' $TMP/late.code"
eq "... and is not in the log" "$(sqlq "select count(*) from objects where key = 'admin/late' and body is not null")" 0
echo "# late: $(cat "$TMP/late.code"), $L's epoch $EL; its record (epoch, seq): $(sqlq "select epoch, seq from objects where key = 'admin/late'"); lease_history (epoch, holder, first_seq): $(sqlq "select string_agg(epoch || ' ' || holder || ' ' || first_seq, '; ' order by epoch) from lease_history")"
FIRST3=$(sqlq "select first_seq from lease_history where epoch = $E3")
eq "no write of epoch $EL after epoch $E3 began (seq > $FIRST3)" \
    "$(sqlq "select count(*) from objects where epoch = $EL and seq > $FIRST3")" 0
# every record was written under a held epoch, inside its window: after the
# epoch began and before the next one did (no write of a deposed head, none
# of a standby or of a head that did not know its role: those carry -1)
eq "every record's epoch is one that was held, and its seq lies inside that epoch's window" \
    "$(sqlq "select count(*) from objects o left join lease_history h on h.epoch = o.epoch
             where h.epoch is null or o.seq <= h.first_seq or o.seq > coalesce((select min(first_seq)
             from lease_history n where n.epoch > o.epoch), o.seq)")" 0
check "its log says it stepped down" grep -q "stepping down" "$TMP/$L/droverd.log"
URL=${HURL[$O]}
api GET /v1/clusters/after
status "what the deposed leader committed in time is there" 200
st_back() { api GET /v1/status; jqq ".epoch == $E3 and .role == \"leader\" and any(.heads[]; .url == \"${HURL[$L]}\" and .role == \"standby\")" <<<"$BODY"; }
wait_for "the leader's status to list $L as a standby" st_back
check "status on the leader: epoch $E3, the deposed head a standby" st_back

# ---- PostgreSQL restarted under the heads -------------------------------------------------------
# A head whose commit meets the stopped server exits 70 (a failed commit's
# rule); one with a dropped idle connection resets it and goes on. Either
# way a head leads again and nothing acknowledged is lost.
pg_stop fast
pg_restart || exit 1
try=0
write_lands()   # a create on whichever head leads now gets its 201
{
    local n
    try=$((try + 1))
    n=$(leader_name) || return 1
    URL=${HURL[$n]} api POST /v1/clusters -d "{\"id\":\"pg-back-$try\",\"provider\":\"local\",\"region\":\"local\"}"
    [ "$ST" == 201 ]
}
wait_for "a head to lead and take writes after PostgreSQL restarted" write_lands
check "after PostgreSQL restarted, a head leads and takes writes" [ "$ST" == 201 ]
eq "... that write is in the log" "$(sqlq "select count(*) from objects where key = 'admin/pg-back-$try' and body is not null")" 1
KEYS=$(awk '$2 == 201 { printf "%s'"'"'admin/%s'"'"'", (n++ ? "," : ""), $1 }' "$TMP/burst.out")
eq "every create that got a 201 in the burst is still there" \
    "$(sqlq "select count(*) from objects where key in ($KEYS) and body is not null")" "$N201"
for n in b c; do
    if kill -0 "${HPID[$n]}" 2>/dev/null; then
        kill -TERM "${HPID[$n]}" 2>/dev/null
        wait "${HPID[$n]}" 2>/dev/null
        eq "head $n stops cleanly" "$?" 0
    else
        wait "${HPID[$n]}" 2>/dev/null
        eq "head $n, gone with PostgreSQL's restart, exited 70" "$?" 70
    fi
done
logs_sanitizer_clean "heads, agent and gateway" "$TMP"/{a,b,c}/droverd.log "$TMP/agents/n1.log" "$TMP/gw.log"
t_done
