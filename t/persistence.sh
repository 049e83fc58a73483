#!/usr/bin/env bash
# persistence.sh — durability and process life: a burst of concurrent
# creates cut by SIGKILL (every 201 must survive, nothing half-written),
# clean SIGTERM shutdown, restart keeping users and tokens, the data dir
# lock, and droverd's command-line handling.
. "$(dirname "$0")/lib/common.bash"

# store_intact DIR: SQLite's integrity_check passes (on PostgreSQL, whose
# own recovery is not under test here: the database answers)
store_intact()
{
    if store_is_pg; then
        [ -n "$(store_sql "$1" 'select count(*) from objects')" ]
    else
        [ "$(sqlite3 "$1/drover.db" 'pragma integrity_check')" == ok ]
    fi
}
# the live records of DIR's store (PostgreSQL keeps deletes as tombstones)
LIVE="1 = 1"
store_is_pg && LIVE="body is not null"

# ---- command line ---------------------------------------------------------------------
"$DROVERD" --help >"$TMP/help.out" 2>&1
eq "droverd --help exits 0" "$?" 0
check "droverd --help prints usage" grep -q -- '--data-dir' "$TMP/help.out"
"$DROVERD" -h >/dev/null 2>&1
eq "droverd -h exits 0" "$?" 0
bad_args=(
    "--bogus"
    "--threads 0"
    "--threads 257"
    "--threads lots"
    "--log-level loud"
    "--data-dir"
    "extra-argument"
    "--config $TMP/no-such-config.json"
)
for a in "${bad_args[@]}"; do
    # shellcheck disable=SC2086
    "$DROVERD" --data-dir "$TMP/never" --listen 127.0.0.1:0 $a >"$TMP/bad.out" 2>&1 </dev/null &
    p=$!
    _BG_PIDS+=("$p")
    wait_for "droverd $a to exit" eval "! kill -0 $p 2>/dev/null"
    wait "$p"
    eq "droverd $a exits 2" "$?" 2
    check "droverd $a says something on stderr" test -s "$TMP/bad.out"
done
echo '{"listen": 5}' >"$TMP/bad-config.json"
"$DROVERD" --config "$TMP/bad-config.json" >/dev/null 2>&1 </dev/null
eq "droverd with a malformed --config exits 2" "$?" 2
check "no bad invocation created a data dir" test ! -e "$TMP/never"
"$DROVERD" --listen nonsense --data-dir "$TMP/never2" >"$TMP/bad.out" 2>&1 </dev/null &
p=$!
_BG_PIDS+=("$p")
wait_for "droverd --listen nonsense to exit" eval "! kill -0 $p 2>/dev/null"
wait "$p"
lrc=$?
check "droverd --listen nonsense exits non-zero" [ "$lrc" -ne 0 ]
check "droverd --listen nonsense is a usage error: exits 2 (got $lrc)" [ "$lrc" == 2 ]

# ---- first start: users and tokens ------------------------------------------------------
droverd_start "$TMP/d" || exit 1
cp "$DDIR/admin.token" "$TMP/admin.token.orig"
ADMIN_ORIG=$ADMIN
check "admin.token is mode 0600" [ "$(stat -c %a "$DDIR/admin.token")" == 600 ]
api POST /v1/users -d '{"id":"alice"}'
status "create alice" 201
ALICE=$(jq -r .token.secret <<<"$BODY")
as "$ALICE" api POST /v1/tokens -d '{"id":"ro","scopes":["read"],"expires_in_seconds":86400}'
status "alice: create a read token" 201
ALICE_RO=$(jq -r .secret <<<"$BODY")
RO_EXPIRES=$(jq -r .expires_at <<<"$BODY")
as "$ALICE" api POST /v1/tokens -d '{"id":"gone"}'
GONE=$(jq -r .secret <<<"$BODY")
as "$ALICE" api DELETE /v1/tokens/gone
status "alice: revoke token gone" 200

# a few ordinary writes that must survive too
api POST /v1/clusters -d '{"id":"keep","provider":"local","region":"local"}'
status "create cluster keep" 201
api PATCH /v1/clusters/keep -d '{"description":"patched before the crash"}'
status "patch cluster keep" 200
jqc "keep is at resource_version 2" '.resource_version == 2'
api POST /v1/clusters -d '{"id":"drop","provider":"local","region":"local"}'
api DELETE /v1/clusters/drop
status "delete cluster drop" 200
as "$ALICE" api POST /v1/models -d '{"id":"m1","runtime":{"command":["serve"],"env":{"A":"1"}},"resources":{"gpu":{"count":1,"memory_mib":2048}}}'
status "alice: create model m1" 201

# ---- burst of concurrent creates, cut by SIGKILL ------------------------------------------
LOOPS=8
PER_LOOP=400
burst_loop()   # burst_loop N: create b<N>-<i>, log "id status" per request
{
    local n=$1 i id code
    for ((i = 0; i < PER_LOOP; i++)); do
        id="b$n-$i"
        code=$(http -s -o /dev/null -w '%{http_code}' -X POST \
            -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
            --data-binary "{\"id\":\"$id\",\"provider\":\"local\",\"region\":\"local\",\"description\":\"burst $id\"}" \
            "$URL/v1/clusters")
        echo "$id ${code:-000}" >>"$TMP/burst.$n"
        # droverd is gone: one more try shows the refusal, then stop
        [ "${code:-000}" == 000 ] && [ "$i" -gt 0 ] && [ -n "${seen_000:-}" ] && break
        [ "${code:-000}" == 000 ] && seen_000=1
    done
}
answered() { cat "$TMP"/burst.* 2>/dev/null | awk '$2 != "000"' | wc -l; }
for ((n = 0; n < LOOPS; n++)); do
    : >"$TMP/burst.$n"
    burst_loop "$n" &
    _BG_PIDS+=($!)
done
wait_for "200 creates to be answered" eval '[ "$(answered)" -ge 200 ]'
KILLED_AT=$(answered)
droverd_kill9
eq "SIGKILL ends droverd (status 137)" "$DEXIT" 137
for p in "${_BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
_BG_PIDS=()
cat "$TMP"/burst.* >"$TMP/burst.all"
N_REQ=$(wc -l <"$TMP/burst.all")
N_201=$(awk '$2 == 201' "$TMP/burst.all" | wc -l)
N_000=$(awk '$2 == "000"' "$TMP/burst.all" | wc -l)
echo "# burst: $N_REQ requests, $N_201 created (201), $N_000 unanswered; killed after $KILLED_AT answers"
check "killed mid-burst: at least 200 creates answered" [ "$N_201" -ge 200 ]
check "killed mid-burst: some requests got no answer" [ "$N_000" -ge 1 ]
check "killed mid-burst: not every request was sent" [ "$N_REQ" -lt $((LOOPS * PER_LOOP)) ]
check "every answered create was a 201" [ $((N_201 + N_000)) -eq "$N_REQ" ]
awk '$2 == 201 {print $1}' "$TMP/burst.all" | sort >"$TMP/created.ids"
awk '{print $1}' "$TMP/burst.all" | sort >"$TMP/requested.ids"

# ---- restart on the same data dir ------------------------------------------------------
check "store intact after SIGKILL" store_intact "$DDIR"
droverd_start "$DDIR" || exit 1
check "restart: admin.token unchanged" cmp -s "$DDIR/admin.token" "$TMP/admin.token.orig"
ALL=$(list_all /v1/clusters)
check "restart: cluster list readable" [ -n "$ALL" ]
jq -r '.[].id' <<<"$ALL" | grep '^b[0-9]' | sort >"$TMP/present.ids"
missing=$(comm -23 "$TMP/created.ids" "$TMP/present.ids")
eq "every create that got a 201 is present after the crash ($N_201)" "$missing" ""
phantom=$(comm -13 "$TMP/requested.ids" "$TMP/present.ids")
eq "no cluster appeared that was never requested" "$phantom" ""
N_EXTRA=$(comm -13 "$TMP/created.ids" "$TMP/present.ids" | wc -l)
echo "# unanswered creates that were committed anyway: $N_EXTRA (either way is fine)"
jqc "every listed burst cluster is whole (all fields, right values)" '
    [.[] | select(.id | startswith("b"))] | all(
        (.id | test("^b[0-9]+-[0-9]+$")) and .provider == "local" and .region == "local"
        and .description == "burst \(.id)" and .owner == "admin" and .resource_version == 1
        and (.created_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$"))
        and .updated_at == .created_at and (keys | length == 8))' "$ALL"
eq "list has no duplicate ids" "$(jq '[.[].id] | length == (unique | length)' <<<"$ALL")" true
if store_is_pg; then   # a body that is not JSON fails the cast: no count
    bad_rows=$(store_sql "$DDIR" "select count(*) from objects where $LIVE and (body::jsonb #> '{spec,id}') is null")
else
    bad_rows=$(sqlite3 "$DDIR/drover.db" "select count(*) from objects where json_valid(body) = 0 or json_extract(body, '\$.spec.id') is null")
fi
eq "every stored row is valid JSON with a spec" "$bad_rows" 0
rows=$(store_sql "$DDIR" "select count(*) from objects where kind = 'cluster' and $LIVE")
eq "store rows and the list agree on the cluster count" "$rows" "$(jq length <<<"$ALL")"
# GET every acknowledged create (one curl, one connection)
while read -r id; do
    printf 'url = "%s/v1/clusters/%s"\noutput = "/dev/null"\n' "$URL" "$id"
done <"$TMP/created.ids" >"$TMP/get.cfg"
curl -s -H "Authorization: Bearer $ADMIN" -w '%{http_code} %{url_effective}\n' -K "$TMP/get.cfg" >"$TMP/get.out"
eq "GET of all $N_201 acknowledged creates: 200 each" \
    "$(awk '$1 == 200' "$TMP/get.out" | wc -l)/$(wc -l <"$TMP/get.out")" "$N_201/$N_201"
# and a sample of them with their bodies
sample=$(awk 'NR % 25 == 1' "$TMP/created.ids"; tail -n 3 "$TMP/created.ids")
bad=0
for id in $sample; do
    api GET "/v1/clusters/$id"
    if [ "$ST" != 200 ] || ! jq -e --arg id "$id" '.id == $id and .description == "burst \($id)"' \
        >/dev/null <<<"$BODY"; then
        bad=$((bad + 1))
        why "GET $id: $ST $BODY"
    fi
done
eq "GET of $(wc -w <<<"$sample") acknowledged creates: all 200 and whole" "$bad" 0
api GET /v1/clusters/keep
jqc "the patch before the crash survived" '.resource_version == 2 and .description == "patched before the crash"'
api GET /v1/clusters/drop
status "the delete before the crash survived" 404
api POST /v1/clusters -d '{"id":"after-crash","provider":"local","region":"local"}'
status "creates work after the crash restart" 201
api POST "/v1/clusters" -d "{\"id\":\"$(head -1 "$TMP/created.ids")\",\"provider\":\"local\",\"region\":\"local\"}"
status "re-creating an acknowledged id conflicts" 409

# users and tokens kept
api GET /v1/users/me
status "old admin token still works" 200
jqc "it is still the admin" '.id == "admin" and .role == "admin"'
as "$ALICE" api GET /v1/models/m1
status "alice's token works after the restart" 200
jqc "alice's model kept its fields" '.runtime.env.A == "1" and .resources.gpu.memory_mib == 2048 and .owner == "alice"'
as "$ALICE_RO" api GET /v1/users/me
status "alice's read token works after the restart" 200
jqc "read token kept scopes and expiry" ".token.scopes == [\"read\"] and .token.expires_at == \"$RO_EXPIRES\""
as "$ALICE_RO" api DELETE /v1/models/m1
status "read token still cannot write" 403
as "$GONE" api GET /v1/clusters
status "revoked token stays revoked after the restart" 401

# ---- the data dir is locked ------------------------------------------------------------
URL_BEFORE=$(cat "$DDIR/droverd.url")
"$DROVERD" --listen 127.0.0.1:0 --data-dir "$DDIR" >"$TMP/second.out" 2>&1 </dev/null &
p=$!
_BG_PIDS+=("$p")
wait_for "the second droverd to exit" eval "! kill -0 $p 2>/dev/null"
if kill -0 "$p" 2>/dev/null; then
    kill -KILL "$p"
fi
wait "$p"
src=$?
check "a second droverd on the same data dir exits non-zero ($src)" [ "$src" -ne 0 ]
check "it says the data dir is in use" grep -q "in use" "$TMP/second.out"
eq "droverd.url still names the first droverd" "$(cat "$DDIR/droverd.url")" "$URL_BEFORE"
check "admin.token untouched by the second droverd" cmp -s "$DDIR/admin.token" "$TMP/admin.token.orig"
api GET /v1/clusters/keep
status "the first droverd still serves" 200

# ---- clean shutdown and restart ---------------------------------------------------------
api PATCH /v1/clusters/keep -d '{"description":"patched before SIGTERM"}'
status "a write just before SIGTERM" 200
droverd_finish "after the crash restart"
check "droverd logs 'stopped' on SIGTERM" grep -q "stopped" "$DDIR/droverd.log"
check "store intact after a clean stop" store_intact "$DDIR"
droverd_start "$DDIR" || exit 1
check "second restart: admin.token unchanged" cmp -s "$DDIR/admin.token" "$TMP/admin.token.orig"
eq "second restart: same admin token" "$ADMIN" "$ADMIN_ORIG"
api GET /v1/clusters/keep
jqc "the write before SIGTERM survived" '.resource_version == 3 and .description == "patched before SIGTERM"'
api GET /v1/users
jqc "users kept: admin and alice" '[.items[].id] == ["admin", "alice"]'
n=$(jq length <<<"$(list_all /v1/clusters)")
eq "cluster count unchanged across a clean restart" "$n" "$((rows + 1))"
check "only one 'first start' in the log (bootstrap ran once)" \
    [ "$(grep -c 'first start' "$DDIR/droverd.log")" == 1 ]
droverd_stop INT
eq "SIGINT also stops droverd cleanly (exit 0)" "$DEXIT" 0
sanitizer_clean "after SIGINT"
check "stopped is logged for each clean stop" [ "$(grep -c 'stopped' "$DDIR/droverd.log")" == 2 ]
t_done
