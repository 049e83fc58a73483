#!/usr/bin/env bash
# pgstore.sh — the PostgreSQL store backend (src/store/pg.c) on the test's
# own PostgreSQL 15 (t/lib/pg.bash, over 127.0.0.1): --store's checks (a
# malformed URL exits 2 and shows no password), an unreachable server
# named without its password, the record log (schema_migrations, seq
# growing with every write, deletes as tombstones), persistence across a
# clean restart and a SIGKILL, a database of a newer schema refused, and
# PostgreSQL stopped under a running droverd mid-burst: droverd exits 70
# and every create that got a 201 is there after the restart. Two --tls
# heads started at once share one CA (head_ca); one with a CA of its own is
# refused.
. "$(dirname "$0")/lib/common.bash"
PG_TCP=1
. "$DROVER_SRC/t/lib/pg.bash"

# droverd_exits ARGS...: run droverd in the foreground-ish (bounded wait);
# $RC its status, $TMP/run.out its output.
droverd_exits()
{
    "$DROVERD" --listen 127.0.0.1:0 "$@" >"$TMP/run.out" 2>&1 </dev/null &
    local p=$!
    _BG_PIDS+=("$p")
    wait_for "droverd $* to exit" eval "! kill -0 $p 2>/dev/null"
    wait "$p"
    RC=$?
}

# ---- --store is checked before anything starts ---------------------------------------
bad_stores=(
    "mysql://drover@127.0.0.1/x"
    "postgres://drover:sekret@127.0.0.1/db?no_such_param=1"
    "postgres://drover:sekret@[::1/db"
    "/var/lib/drover"
)
for s in "${bad_stores[@]}"; do
    droverd_exits --data-dir "$TMP/never" --store "$s"
    eq "--store $s: exits 2" "$RC" 2
    check "--store $s: says what --store takes" grep -qiE 'store|PostgreSQL URL' "$TMP/run.out"
    check "--store $s: no password in the message" eval '! grep -q sekret "$TMP/run.out"'
done
sed "s/^/# /" "$TMP/run.out"
echo '{"store": 5}' >"$TMP/bad-store.json"
droverd_exits --data-dir "$TMP/never" --config "$TMP/bad-store.json"
eq "config store: 5 exits 2" "$RC" 2
echo '{"store": "redis://x"}' >"$TMP/bad-store2.json"
droverd_exits --data-dir "$TMP/never" --config "$TMP/bad-store2.json"
eq "config store: redis://x exits 2" "$RC" 2
check "no refused --store created a data dir" test ! -e "$TMP/never"

# ---- an unreachable server: named, without its password --------------------------------
DEAD=$(free_port)
droverd_exits --data-dir "$TMP/unreach" --store "postgres://drover:sekret@127.0.0.1:$DEAD/x"
check "unreachable PostgreSQL: droverd exits non-zero ($RC)" [ "$RC" -ne 0 ]
check "it names the URL, password masked" \
    grep -qF "cannot connect to PostgreSQL at postgres://drover:***@127.0.0.1:$DEAD/x" "$TMP/run.out"
check "no password in its output" eval '! grep -q sekret "$TMP/run.out"'
sed "s/^/# /" "$TMP/run.out"

# ---- --store sqlite is the default, spelled out -------------------------------------------
droverd_start "$TMP/sq" --store sqlite || exit 1
check "--store sqlite: the store is DIR/drover.db" test -s "$TMP/sq/drover.db"
droverd_finish "--store sqlite"

# ---- a database of a newer schema is refused ---------------------------------------------
pg_start || exit 1
pg_createdb newer || exit 1
droverd_start "$TMP/newer" --store "$(pg_tcp_url newer)" || exit 1
droverd_finish "a database to make newer"
pg_sql newer "insert into schema_migrations(version) values (99)" >/dev/null
N_OBJ=$(pg_sql newer 'select count(*) from objects')
droverd_exits --data-dir "$TMP/newer" --store "$(pg_tcp_url newer)"
check "schema v99: droverd refuses to start ($RC)" [ "$RC" -ne 0 ]
check "it says the database is newer" grep -q "schema version 99 .* is newer than this droverd" "$TMP/run.out"
sed "s/^/# /" "$TMP/run.out"
eq "the newer database is untouched" "$(pg_sql newer 'select max(version) from schema_migrations')/$(pg_sql newer 'select count(*) from objects')" "99/$N_OBJ"

# ---- a database of its own, over TCP --------------------------------------------------------
pg_createdb p || exit 1
PURL=$(pg_tcp_url p)
droverd_start "$TMP/d" --store "$PURL" || exit 1
check "on PostgreSQL: no drover.db in the data dir" test ! -e "$DDIR/drover.db"
check "the log names the store" grep -qF "store $PURL schema v5" "$DDIR/droverd.log"
eq "schema_migrations holds version 5" "$(pg_sql p 'select max(version) from schema_migrations')" 5
api POST /v1/users -d '{"id":"alice"}'
status "create alice" 201
ALICE=$(jq -r .token.secret <<<"$BODY")
api POST /v1/clusters -d '{"id":"keep","provider":"local","region":"local"}'
status "create cluster keep" 201
S1=$(pg_sql p "select seq from objects where kind = 'cluster' and key = 'admin/keep'")
api PATCH /v1/clusters/keep -d '{"description":"patched"}'
status "patch keep" 200
S2=$(pg_sql p "select seq from objects where kind = 'cluster' and key = 'admin/keep'")
check "a write takes a higher seq ($S1 -> $S2)" [ "$S2" -gt "$S1" ]
api POST /v1/clusters -d '{"id":"drop","provider":"local","region":"local"}'
status "create drop" 201
api DELETE /v1/clusters/drop
status "delete drop" 200
# (the newest but the audit log's: the DELETE's own audit entry comes after it)
eq "a delete leaves a tombstone with the newest seq" \
    "$(pg_sql p "select body is null and seq = (select max(seq) from objects where kind <> 'audit') from objects where kind = 'cluster' and key = 'admin/drop'")" t
eq "seqs are unique" "$(pg_sql p 'select count(*) = count(distinct seq) from objects')" t
jqc "the stored body is the record" '.spec.description == "patched"' \
    "$(pg_sql p "select body from objects where key = 'admin/keep'")"
# a burst of writes from several clients: all land, in one log
for n in 1 2 3 4; do
    (for i in $(seq 1 25); do
        http -s -o /dev/null -X POST -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
            -d "{\"id\":\"g$n-$i\",\"provider\":\"local\",\"region\":\"local\"}" "$URL/v1/clusters"
    done) &
    _BG_PIDS+=($!)
done
for p in "${_BG_PIDS[@]}"; do wait "$p"; done
_BG_PIDS=()
eq "100 concurrent creates, 100 rows" "$(pg_sql p "select count(*) from objects where key like 'admin/g%'")" 100

# ---- group commit: one transaction for a batch of many round trips ------------------------
TOOL=$(dirname "$DROVERD")/t/pgstore_tool
pg_createdb batch || exit 1
BURL=$(pg_tcp_url batch)
if [ ! -x "$TOOL" ]; then
    fail "pgstore_tool is built ($TOOL)"
else
    "$TOOL" "$BURL" batch 1000 >"$TMP/batch.out" 2>&1
    eq "1,000 upserts + 100 deletes + 1 rewrite queued at once: one commit" "$(cat "$TMP/batch.out")" "commits 1"
    eq "900 live records, 100 tombstones" \
        "$(pg_sql batch "select count(*) filter (where body is not null), count(*) filter (where body is null) from objects")" "900|100"
    eq "seq follows the queue's order (k0..k999, then the deletes, then the rewrite)" \
        "$(pg_sql batch "select bool_and(ok) from (select seq > lag(seq) over (order by
            case when key = 'k1' then 3 when body is null then 2 else 1 end,
            substr(key, 2)::int) is not false as ok from objects) s")" t
    "$TOOL" "$BURL" load >"$TMP/load.out" 2>&1
    eq "load: the 900 live records" "$(wc -l <"$TMP/load.out")" 900
    check "load: the rewrite of k1 won" grep -qx 't k1 {"v":"rewritten"}' "$TMP/load.out"
    check "load: no deleted key" eval '! grep -q "^t k[0-9]*0 " "$TMP/load.out"'
    "$TOOL" "$BURL" bad 600 >"$TMP/bad.out" 2>&1
    eq "a batch whose op 300 fails: the store exits 70" "$?" 70
    check "it names the write that failed" grep -q "write t/x300" "$TMP/bad.out"
    eq "nothing of the failed batch is stored (one transaction)" \
        "$(pg_sql batch "select count(*) from objects where key like 'x%'")" 0
    sed 's/^/# /' "$TMP/bad.out"
fi

# ---- persistence across a clean restart and a SIGKILL ------------------------------------
droverd_finish "first run"
droverd_start "$DDIR" --store "$PURL" || exit 1
api GET /v1/clusters/keep
jqc "clean restart: keep is back, patched" '.description == "patched" and .resource_version == 2'
api GET /v1/clusters/drop
status "clean restart: drop stays deleted" 404
as "$ALICE" api GET /v1/users/me
status "clean restart: alice's token works" 200
eq "clean restart: all 100 burst clusters" "$(list_all /v1/clusters | jq '[.[] | select(.id | startswith("g"))] | length')" 100
api POST /v1/clusters -d '{"id":"drop","provider":"local","region":"local"}'
status "re-create the deleted drop" 201
eq "the tombstone turned back into a record" \
    "$(pg_sql p "select body is not null from objects where kind = 'cluster' and key = 'admin/drop'")" t
droverd_kill9
droverd_start "$DDIR" --store "$PURL" || exit 1
api GET /v1/clusters/drop
status "after SIGKILL: drop (re-created) is there" 200
check "only one 'first start' in the log (bootstrap ran once)" \
    [ "$(grep -c 'first start' "$DDIR/droverd.log")" == 1 ]

# ---- PostgreSQL stopped under a running droverd, mid-burst --------------------------------
burst_loop()   # burst_loop N: create b<N>-<i>, log "id status" per request
{
    local n=$1 i code
    for ((i = 0; i < 2000; i++)); do
        code=$(http -s -o /dev/null -w '%{http_code}' -X POST \
            -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
            --data-binary "{\"id\":\"b$n-$i\",\"provider\":\"local\",\"region\":\"local\"}" \
            "$URL/v1/clusters")
        echo "b$n-$i ${code:-000}" >>"$TMP/burst.$n"
        [ "${code:-000}" == 000 ] && break
    done
}
answered() { cat "$TMP"/burst.* 2>/dev/null | awk '$2 != "000"' | wc -l; }
for n in 0 1 2 3; do
    : >"$TMP/burst.$n"
    burst_loop "$n" &
    _BG_PIDS+=($!)
done
wait_for "100 creates to be answered" eval '[ "$(answered)" -ge 100 ]'
pg_stop fast
for p in "${_BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
_BG_PIDS=()
wait_for "droverd to exit after PostgreSQL went away" eval "! kill -0 $DPID 2>/dev/null"
droverd_stop
eq "PostgreSQL gone: droverd exits 70 on its next commit" "$DEXIT" 70
check "its log says the commit failed and names the store" \
    grep -qF "lost the connection to PostgreSQL at $PURL" "$DDIR/droverd.log"
cat "$TMP"/burst.* >"$TMP/burst.all"
N_201=$(awk '$2 == 201' "$TMP/burst.all" | wc -l)
echo "# burst: $(wc -l <"$TMP/burst.all") requests, $N_201 created before PostgreSQL stopped"
check "only 201s and unanswered requests" eval '[ "$(awk '"'"'$2 != 201 && $2 != "000"'"'"' "$TMP/burst.all" | wc -l)" == 0 ]'
pg_restart || exit 1
droverd_start "$DDIR" --store "$PURL" || exit 1
list_all /v1/clusters | jq -r '.[].id' | grep '^b' | sort >"$TMP/present.ids"
awk '$2 == 201 {print $1}' "$TMP/burst.all" | sort >"$TMP/created.ids"
eq "every create that got a 201 is there after the restart ($N_201)" \
    "$(comm -23 "$TMP/created.ids" "$TMP/present.ids")" ""
eq "nothing that was never requested" \
    "$(comm -13 <(awk '{print $1}' "$TMP/burst.all" | sort) "$TMP/present.ids")" ""
api POST /v1/clusters -d '{"id":"after","provider":"local","region":"local"}'
status "writes work again" 201
droverd_finish "after PostgreSQL came back"

# ---- several --tls heads share one CA (the database's head_ca row, migration 4) -------------
pg_createdb tlsha || exit 1
TURL=$(pg_tcp_url tlsha)
declare -A TPID
for n in ta tb; do   # started at once: they race to put their CA in the database
    mkdir -p "$TMP/$n"
    "$DROVERD" --listen 127.0.0.1:0 --data-dir "$TMP/$n" --threads 2 --store "$TURL" --tls \
        --lease-ttl 2 >"$TMP/$n/droverd.log" 2>&1 </dev/null &
    TPID[$n]=$!
    _PIDS+=("${TPID[$n]}")
done
wait_for "both --tls heads to listen" eval 'test -s "$TMP/ta/droverd.url" -a -s "$TMP/tb/droverd.url"'
eq "two --tls heads started at once: one CA pin" "$(cat "$TMP/tb/tls/ca.hash" 2>/dev/null)" \
    "$(cat "$TMP/ta/tls/ca.hash" 2>/dev/null)"
check "... the pin is a CA's" grep -q '^sha256:' "$TMP/ta/tls/ca.hash"
eq "... the one in the database" "$(pg_sql tlsha 'select count(*) from head_ca')" 1
TB=$(cat "$TMP/tb/droverd.url")
check "a client trusting head ta's CA reaches head tb over https" \
    curl -sf --cacert "$TMP/ta/tls/ca.crt" -o /dev/null "$TB/healthz"
check "... tb serves a server certificate of its own" \
    eval '! cmp -s "$TMP/ta/tls/server.crt" "$TMP/tb/tls/server.crt"'
for n in ta tb; do kill -TERM "${TPID[$n]}"; done
for n in ta tb; do wait "${TPID[$n]}" 2>/dev/null; done
# a head whose own CA is another is refused (its agents pin that one)
mkdir -p "$TMP/tc/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/tc/tls/ca.key" \
    -out "$TMP/tc/tls/ca.crt" -subj /CN=other -days 2 2>/dev/null
droverd_exits --data-dir "$TMP/tc" --store "$TURL" --tls
check "a --tls head with a CA other than the database's is refused" [ "$RC" != 0 ]
check "... saying how to take the shared one" grep -q "other than the heads' CA in the database" "$TMP/run.out"
# ---- the log's trim: tombstones every head has applied are removed (store/lease.c) ----------
# Two heads trimming every 2 rounds (DROVER_LOG_TRIM_ROUNDS); deletes leave
# tombstones; once the standby has applied them they go, log_trim says
# where to; the standby that then takes over, and a load (a restart's),
# see the state.
# shellcheck source=lib/heads.bash
. "$DROVER_SRC/t/lib/heads.bash"
[ -s "$CFG" ] || echo '{}' >"$CFG"
pg_createdb trim || exit 1
DB=$(pg_url trim) TTL=2
export DROVER_LOG_TRIM_ROUNDS=2
head_start ra
wait_for "ra to lead" is_role ra leader
head_start rb
URL=${HURL[ra]} TOKEN=$(tr -d '\n' <"$TMP/ra/admin.token")
for c in t1 t2 t3; do
    api POST /v1/clusters -d "{\"id\":\"$c\",\"provider\":\"local\",\"region\":\"local\"}"
    status "trim: create $c" 201
done
api DELETE /v1/clusters/t1
status "trim: delete t1" 200
api DELETE /v1/clusters/t2
status "trim: delete t2" 200
tombs() { pg_sql trim "select count(*) from objects where body is null"; }
gone() { [ "$(tombs)" == 0 ]; }
wait_for "the tombstones to be trimmed" gone
eq "trim: no tombstone left" "$(tombs)" 0
check "trim: log_trim holds the bound (the deletes' seqs or past)" \
    [ "$(pg_sql trim 'select seq from log_trim')" -gt 0 ]
check "trim: ra's log says so" grep -qE "trimmed the record log: [0-9]+ tombstones" "$TMP/ra/droverd.log"
kill -9 "${HPID[ra]}"
wait_for "rb to lead after ra's SIGKILL" is_role rb leader
URL=${HURL[rb]}
api GET /v1/clusters/t1
status "trim: the standby that took over followed the delete of t1" 404
api GET /v1/clusters/t3
status "... and has t3" 200
"$TOOL" "$DB" load >"$TMP/trim.load" 2>&1
check "trim: a load past the trim (a restart's) has t3" grep -q "^cluster admin/t3 " "$TMP/trim.load"
check "... and neither t1 nor t2" eval '! grep -qE "^cluster admin/t[12] " "$TMP/trim.load"'
check "trim: no head restarted for being behind the trim" \
    eval "! grep -q 'record log was trimmed' $TMP/ra/droverd.log $TMP/rb/droverd.log"
unset DROVER_LOG_TRIM_ROUNDS

# ---- a head that does not know its role yet is no leader (issue 17, fencing) -----------------
# A head listens before its first lease round (the round needs its URL);
# one re-executed after a step-down is in that window too. Held there 3 s
# (DROVER_TEST_LEASE_DELAY_MS) while rb leads, it answers API calls 503
# and /healthz "standby": a write is neither handled nor queued (it used to
# be, as by a lone head's; its commit was then refused and the head
# re-executed).
port=$(free_port)
mkdir -p "$TMP/rc"
DROVER_TEST_LEASE_DELAY_MS=3000 "$DROVERD" --listen "127.0.0.1:$port" --data-dir "$TMP/rc" \
    --threads 2 --store "$DB" --config "$CFG" --lease-ttl "$TTL" >>"$TMP/rc/droverd.log" 2>&1 &
HPID["rc"]=$!
_PIDS+=("${HPID[rc]}")
HURL["rc"]="http://127.0.0.1:$port"
wait_for "rc to listen (before its lease round)" test -s "$TMP/rc/droverd.url.next"
URL=${HURL[rc]}
api POST /v1/clusters -d '{"id":"early","provider":"local","region":"local"}'
status "a head before its first lease round answers a write 503" 503
eq "... code not_leader" "$(jq -r .error.code <<<"$BODY")" not_leader
contains "... saying it does not know its role yet" "$BODY" "starting"
check "... and it is still waiting for its lease round (the window was hit)" test ! -e "$TMP/rc/droverd.url"
eq "... /healthz says standby, not leader" "$(role_of rc)" standby
wait_for "rc to finish starting" test -s "$TMP/rc/droverd.url"
wait_for "rc to stand by" is_role rc standby
eq "rc stands by" "$(role_of rc)" standby
eq "the write sent in the window is not in the log" \
    "$(pg_sql trim "select count(*) from objects where key = 'admin/early'")" 0
check "rc did not step down (nothing of its was fenced)" eval "! grep -q 'stepping down' $TMP/rc/droverd.log"
kill -TERM "${HPID[rb]}" "${HPID[rc]}"

# ---- the store commits a write only under the epoch it was queued with --------------------------
# Defence in depth below the API's gate: a write queued while the head did
# not lead (epoch -1) is refused even once the head holds a lease epoch,
# never committed under it.
pg_createdb fence || exit 1
FURL=$(pg_url fence)
"$TOOL" "$FURL" load >/dev/null 2>&1   # migrates
pg_sql fence "update lease set holder = 'tool', epoch = 7, expires = now() + interval '1 hour'" >/dev/null
"$TOOL" "$FURL" held 7 >"$TMP/held.out" 2>&1
RC=$?
rc "a write queued under the held epoch 7 commits" 0
eq "... recorded with epoch 7" "$(pg_sql fence "select epoch from objects where key = 'held'")" 7
"$TOOL" "$FURL" held 6 >"$TMP/held6.out" 2>&1
RC=$?
rc "a write under epoch 6 (another head holds 7) is fenced: exit 75" 75
"$TOOL" "$FURL" stale 7 >"$TMP/stale.out" 2>&1
RC=$?
rc "a write queued before the head led (epoch -1), the epoch then 7: refused, exit 75" 75
contains "... saying it was queued under epoch -1" "$(cat "$TMP/stale.out")" "queued under lease epoch -1"
eq "... and it is not in the log" "$(pg_sql fence "select count(*) from objects where key = 'stale'")" 0
t_done
