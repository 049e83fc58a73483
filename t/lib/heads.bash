# heads.bash — several droverd heads on one PostgreSQL for the tests
# (sourced after pg.bash; DB: the database's URL, TTL: the lease TTL in
# seconds, CFG: droverd's config, all set before head_start runs).
#
#   head_start NAME   droverd NAME on $TMP/NAME, a fresh port at each start
#                     (HPID[NAME], HURL[NAME]); returns once it listens
#   role_of NAME      its /healthz role: leader, standby, or down
#   is_role NAME R    is its role R?
#   two_heads DBNAME  PostgreSQL (pg_start), database DBNAME (DB), TTL 2 s
#                     unless set; head a leading, head b standing by (two
#                     checks); TOKEN: a's admin token, URL: a's

declare -A HPID HURL
head_start()
{
    local n=$1 port
    port=$(free_port)
    mkdir -p "$TMP/$n"
    rm -f "$TMP/$n/droverd.url"
    "$DROVERD" --listen "127.0.0.1:$port" --data-dir "$TMP/$n" --threads 2 --store "$DB" \
        --config "$CFG" --lease-ttl "$TTL" >>"$TMP/$n/droverd.log" 2>&1 &
    HPID[$n]=$!
    _PIDS+=("${HPID[$n]}")
    HURL[$n]="http://127.0.0.1:$port"
    wait_for "head $n to listen" test -s "$TMP/$n/droverd.url" || { cat "$TMP/$n/droverd.log"; exit 1; }
}
role_of() { curl -s --max-time 1 "${HURL[$1]}/healthz" | jq -r '.role // "down"' 2>/dev/null || echo down; }
is_role() { [ "$(role_of "$1")" == "$2" ]; }

two_heads()
{
    TTL=${TTL:-2}
    pg_start || exit 1
    pg_createdb "$1" || exit 1
    DB=$(pg_url "$1")
    head_start a
    wait_for "a to lead" is_role a leader
    eq "a leads" "$(role_of a)" leader
    head_start b
    eq "b stands by" "$(role_of b)" standby
    TOKEN=$(tr -d '\n' <"$TMP/a/admin.token")
    URL=${HURL[a]}
}
