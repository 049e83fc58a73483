#!/usr/bin/env bash
# authwalk.sh — every route of the API's route table (src/api/routes.c, read
# here as data), called without credentials and with a malformed one,
# answers 401, except the open ones: /healthz, the web console's files and
# the TLS CA (issue 18, item 3). A route added to the table is walked too;
# the walk fails if the table cannot be read.
. "$(dirname "$0")/lib/common.bash"

ROUTES=$DROVER_SRC/src/api/routes.c
mapfile -t TABLE < <(grep -oE '^ *\{"[A-Z]+", "/[^"]*"' "$ROUTES" | sed -E 's/^ *\{"([A-Z]+)", "([^"]*)"/\1 \2/')
n=${#TABLE[@]}
check "the route table has its routes ($n read from src/api/routes.c)" test "$n" -ge 50

droverd_start "$TMP/d" || exit 1
open_route() { case "$1" in "GET /healthz" | "GET /" | "GET /ui/{}" | "GET /v1/tls/ca") return 0 ;; esac; return 1; }
bad_none=() bad_forged=() walked=0
for r in "${TABLE[@]}"; do
    m=${r%% *} p=${r#* }
    open_route "$r" && continue
    q=${p//\{\}/x}
    walked=$((walked + 1))
    TOKEN="" api "$m" "$q" -d '{}'
    [ "$ST" == 401 ] && is_error_body || bad_none+=("$ST $r")
    TOKEN="drv_$(printf '0%.0s' {1..64})" api "$m" "$q" -d '{}'
    [ "$ST" == 401 ] || bad_forged+=("$ST $r")
done
eq "every route but the open ones ($walked) answers 401 (an error body) without a token" "${#bad_none[@]}" 0
[ "${#bad_none[@]}" == 0 ] || why "${bad_none[@]}"
eq "... and 401 with a token that does not exist" "${#bad_forged[@]}" 0
[ "${#bad_forged[@]}" == 0 ] || why "${bad_forged[@]}"
TOKEN="" api GET /healthz
status "/healthz is open" 200
TOKEN="" api GET /
status "the console's page is open" 200
TOKEN="" api GET /v1/tls/ca
status "/v1/tls/ca is open (404: this head serves no TLS)" 404
droverd_finish authwalk
t_done
