#!/usr/bin/env bash
# ha_netns.sh — a leader cut off from PostgreSQL while its clients still
# reach it (issue 17: "a deposed leader — paused, cut off, slow — cannot
# write"). PostgreSQL, two heads and a client each in a network namespace of
# its own on one bridge (in a namespace too: the host's network is left
# alone); PostgreSQL listens on its bridge address. The leader's route to the
# database is blackholed (ip route add blackhole PG/32: its TCP connections
# hang, they are not refused), the client still reaches it. Then: it knows
# by its own clock that it no longer leads (/healthz no longer says leader,
# its log says it stepped down: store/lease.c bounds every query by the
# lease) although its connections hang; the other head leads; a write sent
# to it during the cut never gets a 2xx and is not stored. Healed: it comes
# back as a standby (503 and the leader's URL), the log holds no write of
# its epoch after the next epoch began, a create through either head lands
# on the leader. Nothing asserts on time: every wait is bounded, to end a
# hung test only. Needs root (ip netns), iproute2 and PostgreSQL 15; SKIPs
# without them. Namespaces are named drvhPID-*, removed at exit (a previous
# run's, whose pid is gone, at start).
. "$(dirname "$0")/lib/common.bash"
skip() { echo "1..0 # SKIP ha_netns.sh: $*"; exit 0; }
[ "$(id -u)" == 0 ] || skip "needs root (it creates network namespaces and veth pairs)"
command -v ip >/dev/null 2>&1 || skip "no 'ip' (iproute2): run scripts/install-deps"
[ -x "${PG_BIN:-/usr/lib/postgresql/15/bin}/initdb" ] || skip "no PostgreSQL 15 (run scripts/install-deps)"

# ---- the network: a bridge in namespace sw, one veth pair per host -----------------------
NSP=drvh$$
NET=10.78.$(($$ % 200 + 20))
HOSTS=(pg h1 h2 cl)
declare -A IP=([pg]=$NET.5 [h1]=$NET.1 [h2]=$NET.2 [cl]=$NET.9)
# shellcheck source=lib/netns.bash
. "$(dirname "$0")/lib/netns.bash"
_hn_cleanup() { _cleanup; ns_remove "$NSP"; }   # PostgreSQL stops first (an exit hook)
trap _hn_cleanup EXIT
ns_remove_stale drvh
ip netns add "$NSP-sw" 2>"$TMP/.err" || skip "ip netns add fails here: $(<"$TMP/.err")"
check "four namespaces on one bridge ($NET.0/24)" net_setup

# ---- PostgreSQL on its bridge address ----------------------------------------------------
# shellcheck source=lib/pg.bash
PG_NETNS=$NSP-pg PG_LISTEN=${IP[pg]} PG_HBA_NET=$NET.0/24 PG_TCP=1 PG_PORT_WANT=5432
. "$DROVER_SRC/t/lib/pg.bash"
pg_start || exit 1
pg_createdb ha || exit 1
sqlq() { pg_sql ha "$1"; }   # over the Unix socket (a path: any namespace)
DB=postgres://drover@${IP[pg]}:5432/ha
check "h1 reaches PostgreSQL on ${IP[pg]}:5432" reach h1 "${IP[pg]}" 5432

# ---- two heads, each on its own address ---------------------------------------------------
TTL=2
curl() { ip netns exec "$NSP-cl" curl "$@"; }   # every client call from the client's namespace
declare -A HPID HURL
head_start()   # NAME: droverd in NAME's namespace (ip netns exec execs it: $! is droverd)
{
    local n=$1
    mkdir -p "$TMP/$n"
    HURL[$n]=http://${IP[$n]}:7480
    ip netns exec "$NSP-$n" "$DROVERD" --listen "${IP[$n]}:7480" --advertise-url "${HURL[$n]}" \
        --data-dir "$TMP/$n" --threads 2 --store "$DB" --lease-ttl "$TTL" \
        >>"$TMP/$n/droverd.log" 2>&1 &
    HPID[$n]=$!
    _PIDS+=("${HPID[$n]}")
    wait_for "head $n to listen" test -s "$TMP/$n/droverd.url" || { cat "$TMP/$n/droverd.log"; exit 1; }
}
role_of() { curl -s --max-time 1 "${HURL[$1]}/healthz" | jq -r '.role // "down"' 2>/dev/null || echo down; }
is_role() { [ "$(role_of "$1")" == "$2" ]; }
not_role() { [ "$(role_of "$1")" != "$2" ]; }
head_start h1
wait_for "h1 to lead" is_role h1 leader
head_start h2
eq "h1 leads" "$(role_of h1)" leader
eq "h2 stands by" "$(role_of h2)" standby
TOKEN=$(tr -d '\n' <"$TMP/h1/admin.token")
URL=${HURL[h1]}
api POST /v1/clusters -d '{"id":"before","provider":"local","region":"local"}'
status "a create on the leader h1 before the cut" 201
E1=$(sqlq "select max(epoch) from lease_history")

# ---- cut h1 off from the database only ---------------------------------------------------
in_ns h1 ip route add blackhole "${IP[pg]}/32"
CUT_AT=$(date +%s.%N)
curl -s -o "$TMP/cut.body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d '{"id":"cut","provider":"local","region":"local"}' \
    --max-time 60 "${HURL[h1]}/v1/clusters" >"$TMP/cut.code" 2>/dev/null &
WP=$!
_BG_PIDS+=("$WP")
check "the cut: h1 no longer reaches PostgreSQL" eval "! reach h1 ${IP[pg]} 5432"
check "... the client still reaches h1" reach cl "${IP[h1]}" 7480
# (c) by its own clock, though its connections to the database hang
wait_for "h1 to stop saying it leads" not_role h1 leader
check "the cut-off h1 no longer says it leads (/healthz: $(role_of h1))" not_role h1 leader
wait_for "h1's log to say it stepped down" grep -q "stepping down" "$TMP/h1/droverd.log"
check "its log says it stepped down" grep -q "stepping down" "$TMP/h1/droverd.log"
echo "# h1: $(grep -m1 'lease: not renewed' "$TMP/h1/droverd.log" | sed 's/^.*lease: //')"
# (a) the other head leads
wait_for "h2 to lead" is_role h2 leader
check "h2 leads while h1 is cut off" is_role h2 leader
E2=$(sqlq "select max(epoch) from lease_history")
TAKEN=$(sqlq "select extract(epoch from taken_at) from lease_history where epoch = $E2")
echo "# takeover: $(echo "$TAKEN - $CUT_AT" | bc) s after the cut (TTL $TTL s)"
check "the epoch went up ($E1 -> $E2)" [ "$E2" -gt "$E1" ]
# one clock here (namespaces share it): how long before the takeover h1 gave up
DOWN_AT=$(date -d "$(grep -m1 'stepping down' "$TMP/h1/droverd.log" | cut -d' ' -f1)" +%s.%N 2>/dev/null)
[ -n "$DOWN_AT" ] && echo "# h1 stepped down $(echo "($TAKEN - $DOWN_AT) * 1000 / 1" | bc) ms before h2 took the lease"
eq "h2 took epoch $E2" "$(sqlq "select holder = (select holder from heads where url = '${HURL[h2]}') from lease_history where epoch = $E2")" t
# (b) the write sent to h1 during the cut
wait "$WP" 2>/dev/null
check "the write sent to the cut-off leader got no 2xx ($(cat "$TMP/cut.code"))" \
    eval "! grep -q '^2' $TMP/cut.code"
URL=${HURL[h2]}
api POST /v1/clusters -d '{"id":"during","provider":"local","region":"local"}'
status "the new leader h2 takes writes during the cut" 201

# ---- heal: h1 comes back as a standby ----------------------------------------------------
in_ns h1 ip route del blackhole "${IP[pg]}/32"
wait_for "h1 to stand by" is_role h1 standby
eq "healed, h1 stands by" "$(role_of h1)" standby
eq "... the write sent to it during the cut is not in the log" \
    "$(sqlq "select count(*) from objects where key = 'admin/cut' and body is not null")" 0
FIRST2=$(sqlq "select first_seq from lease_history where epoch = $E2")
eq "no write of epoch $E1 after epoch $E2 began (seq > $FIRST2)" \
    "$(sqlq "select count(*) from objects where epoch = $E1 and seq > $FIRST2")" 0
URL=${HURL[h1]}
api POST /v1/clusters -d '{"id":"healed","provider":"local","region":"local"}'
status "a create through the standby h1: 503" 503
eq "... naming the leader h2" "$(jq -r .leader <<<"$BODY")" "${HURL[h2]}"
URL=$(jq -r .leader <<<"$BODY")
api POST /v1/clusters -d '{"id":"healed","provider":"local","region":"local"}'
status "... sent on to the leader: 201" 201
URL="${HURL[h1]},${HURL[h2]}"
ip netns exec "$NSP-cl" env DROVER_SERVER="$URL" DROVER_TOKEN="$TOKEN" "$DROVER" --insecure get clusters -o json \
    >"$TMP/.out" 2>"$TMP/.err"
RC=$?
OUT=$(<"$TMP/.out") ERR=$(<"$TMP/.err")
rc "drover --server STANDBY,LEADER get clusters" 0
check "... lists what was created before, during and after the cut" \
    eval 'grep -q "\"before\"" <<<"$OUT" && grep -q "\"during\"" <<<"$OUT" && grep -q "\"healed\"" <<<"$OUT"'
eq "every create that got a 201 is in the log, once" \
    "$(sqlq "select count(*) from objects where key in ('admin/before', 'admin/during', 'admin/healed') and body is not null")" 3
for n in h1 h2; do
    kill -TERM "${HPID[$n]}" 2>/dev/null
    wait "${HPID[$n]}" 2>/dev/null
    eq "head $n stops cleanly" "$?" 0
done
logs_sanitizer_clean "the heads" "$TMP"/h{1,2}/droverd.log
t_done
