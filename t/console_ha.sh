#!/usr/bin/env bash
# console_ha.sh — the web console across several heads (issue 17): two heads
# on one PostgreSQL. A standby serves the console's files; every head
# allows the other heads' origins (CORS: the preflight and the answers name
# the origin only when it is a head's; the console's CSP connect-src lists
# the live ones) and no other; a dead head's origin stays allowed while its
# row is in the heads table (a day), long after it left the roster (60 s).
# Then t/console/ha.mjs in headless Chromium: consoles loaded from the
# leader and from the standby sign in and list clusters; after a SIGKILL of
# the leader both keep working without a reload (the dead head's page moves
# on to the new leader), reads and a write through the form. Then a head c
# joins (after the pages loaded: their CSP does not list it) and the last
# leader b is SIGKILLed: the consoles, which learned c from the roster they
# read every 5 s, load themselves from c and go on there. No Chromium or no
# node: the test FAILS.
. "$(dirname "$0")/lib/common.bash"
# shellcheck source=lib/pg.bash
. "$DROVER_SRC/t/lib/pg.bash"
# shellcheck source=lib/browser.bash
. "$DROVER_SRC/t/lib/browser.bash"
workers_init
ARTIFACTS=$BIN_DIR/t-artifacts/console_ha

# shellcheck source=lib/heads.bash
. "$DROVER_SRC/t/lib/heads.bash"
two_heads cha
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create cluster c1 on the leader" 201
both() { URL=${HURL[a]} api GET /v1/status; jqq '[.heads[] | select(.role != "gone")] | length == 2' <<<"$BODY"; }
wait_for "the roster to list both heads" both

# ---- HTTP: the standby serves the console; CORS for heads' origins only ----------------------
URL=${HURL[b]} TOKEN="" api GET /
status "the standby serves the console's page" 200
contains "... its CSP lets it call the leader's origin" "$(header Content-Security-Policy)" "connect-src 'self' ${HURL[b]} ${HURL[a]}"
pre() { curl -s -o /dev/null -D - -X OPTIONS -H "Origin: $2" -H 'Access-Control-Request-Method: POST' \
        -H 'Access-Control-Request-Headers: authorization, content-type' "$1/v1/clusters" | tr -d '\r'; }
H=$(pre "${HURL[a]}" "${HURL[b]}")
contains "a preflight from the other head's origin: 204" "$H" "HTTP/1.1 204"
contains "... allows that origin" "$H" "Access-Control-Allow-Origin: ${HURL[b]}"
contains "... and the Authorization header" "$H" "Authorization"
H=$(pre "${HURL[a]}" "http://evil.example")
check "a preflight from another origin is allowed nothing" eval "! grep -qi '^Access-Control-Allow' <<<\"\$H\""
H=$(curl -s -o /dev/null -D - -H "Origin: ${HURL[b]}" -H "Authorization: Bearer $TOKEN" "${HURL[b]}/v1/clusters" | tr -d '\r')
contains "the standby's 503 names the leader to the other origin's page too" "$H" "X-Drover-Leader: ${HURL[a]}"
contains "... and exposes that header" "$H" "Access-Control-Expose-Headers: X-Drover-Leader"
H=$(curl -s -o /dev/null -D - -H "Origin: http://evil.example" -H "Authorization: Bearer $TOKEN" "${HURL[a]}/v1/clusters" | tr -d '\r')
check "an answer to another origin carries no Access-Control-Allow-Origin" eval "! grep -qi '^Access-Control-Allow-Origin' <<<\"\$H\""
# a head gone longer than the roster keeps it (60 s; its row stays in heads for a day): the pages
# loaded from it still call the live heads with its origin. Its row, seen 2 minutes ago, stands in.
DEAD="http://127.0.0.1:$(free_port)"
pg_sql cha "INSERT INTO heads VALUES ('dead', '$DEAD', 'standby', 0, clock_timestamp() - interval '2 minutes')" >/dev/null
allowed() { pre "$1" "$DEAD" | grep -q "^Access-Control-Allow-Origin: $DEAD\$"; }
wait_for "both heads to allow the dead head's origin" eval 'allowed "${HURL[a]}" && allowed "${HURL[b]}"'
check "a preflight from a head dead for 2 minutes is allowed (the leader, the standby)" \
    eval 'allowed "${HURL[a]}" && allowed "${HURL[b]}"'
H=$(curl -s -o /dev/null -D - -H "Origin: $DEAD" -H "Authorization: Bearer $TOKEN" "${HURL[b]}/v1/clusters" | tr -d '\r')
contains "... and the standby's 503 names the leader to its page" "$H" "Access-Control-Allow-Origin: $DEAD"
URL=${HURL[a]} api GET /v1/status
check "... though it is not in the roster" eval "! grep -qF '$DEAD' <<<\"\$BODY\""
URL=${HURL[a]} TOKEN="" api GET /
check "... nor in the CSP of a page served now" eval "! grep -qF '$DEAD' <<<\"\$(header Content-Security-Policy)\""
pg_sql cha "DELETE FROM heads WHERE holder = 'dead'" >/dev/null
wait_for "its origin to be refused once its row is gone" eval '! allowed "${HURL[a]}"'
check "its origin is refused once its row is gone (a day after it was last seen)" eval '! allowed "${HURL[a]}"'

# ---- the browser --------------------------------------------------------------------------------
rm -rf "$ARTIFACTS"
mkdir -p "$ARTIFACTS"
# head c, which the browser starts once the pages are loaded (their CSP does not list it)
CPORT=$(free_port)
mkdir -p "$TMP/c"
C_CMD=$(jq -nc --arg d "$DROVERD" --arg l "127.0.0.1:$CPORT" --arg dir "$TMP/c" --arg s "$DB" \
        --arg c "$CFG" --arg t "$TTL" \
        '[$d, "--listen", $l, "--data-dir", $dir, "--threads", "2", "--store", $s, "--config", $c, "--lease-ttl", $t]')
A_URL=${HURL[a]} B_URL=${HURL[b]} C_URL="http://127.0.0.1:$CPORT" A_PID=${HPID[a]} B_PID=${HPID[b]} \
    C_CMD=$C_CMD C_LOG=$TMP/c/droverd.log C_PIDFILE=$TMP/c/pid ADMIN=$TOKEN ARTIFACTS=$ARTIFACTS \
    browser_run ha.mjs
check "the browser run ended cleanly (exit $E2E_RC)" test "$E2E_RC" == 0
wait "${HPID[a]}" 2>/dev/null
wait "${HPID[b]}" 2>/dev/null
CPID=$(cat "$TMP/c/pid" 2>/dev/null)
[ -n "$CPID" ] && _PIDS+=("$CPID")
URL="http://127.0.0.1:$CPORT"
api GET /v1/clusters/c3
status "c3, made through the dead head's console, is on the last leader" 200
api GET /v1/clusters/c4
status "c4, made through the console that moved to head c, is there" 200
kill -TERM "$CPID" 2>/dev/null
wait_for "head c to stop on SIGTERM" eval "! kill -0 $CPID 2>/dev/null"
check "head c stopped" eval "! kill -0 $CPID 2>/dev/null"
eq "... its row stays (its pages' origin: CORS), out of the roster" \
   "$(pg_sql cha "SELECT role, seen < clock_timestamp() - interval '60 seconds' FROM heads WHERE url = '$URL'")" "stopped|t"
logs_sanitizer_clean "heads" "$TMP"/{a,b,c}/droverd.log
t_done
