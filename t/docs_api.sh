#!/usr/bin/env bash
# docs_api.sh — docs/api.md against the route table (src/api/routes.c), in
# one awk pass: every route (method and path) is documented, either as a
# row of the "Paths" table (path cells like `/v1/nodes/{id}`, methods like
# "GET, DELETE"; `/v1/nodes/{id}/cordon`, `/uncordon` shares the first
# one's parent) or as a "`METHOD /path`" span elsewhere in api.md; and
# every method and path of a Paths row is a route (rows whose path ends in
# "..." summarise routes documented in their own section and are skipped).
# Path parameters compare as one: {id}, {d} and the table's {} are alike.
# Fails on a route missing from the docs or a documented one the head does
# not have; a floor on the counts keeps a format change from passing.
. "$(dirname "$0")/lib/common.bash"

awk -v routes="$DROVER_SRC/src/api/routes.c" '
function fail(msg) { nfail++; print "FAIL\t" msg }
function norm(p) { gsub(/\{[^}]*\}/, "{}", p); return p }
FILENAME == routes {
    if (match($0, /\{"(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)", "[^"]*"/)) {
        r = substr($0, RSTART + 2, RLENGTH - 3)
        sub(/", "/, " ", r)
        nroute++
        route[nroute] = r
        isroute[r] = 1
    }
    next
}
/^## / { paths = ($0 == "## Paths") }
paths && /^\| `\// {
    n = split($0, cell, " \\| ")
    pc = substr(cell[1], 3)
    m = split(cell[2], meth, ", ")
    parent = ""
    while (match(pc, /`[^`]+`/)) {
        p = substr(pc, RSTART + 1, RLENGTH - 2)
        pc = substr(pc, RSTART + RLENGTH)
        if (p !~ /^\/(v1|openai|ui|healthz|metrics)/ && p != "/" && parent != "") {
            # "/uncordon" after "/v1/nodes/{id}/cordon": a sibling
            q = parent
            sub(/\/[^\/]*$/, "", q)
            p = q p
        }
        parent = p
        if (p ~ /\.\.\.$/)
            continue
        for (i = 1; i <= m; i++) {
            d = meth[i] " " norm(p)
            ndoc++
            documented[d] = 1
            if (!(d in isroute))
                fail("docs/api.md:" FNR ": " d " is in the Paths table but not in src/api/routes.c")
        }
    }
    next
}
{
    s = $0
    while (match(s, /`(GET|POST|PUT|PATCH|DELETE|HEAD) \/[^` ?]*/)) {
        documented[norm(substr(s, RSTART + 1, RLENGTH - 1))] = 1
        s = substr(s, RSTART + RLENGTH)
    }
}
END {
    for (i = 1; i <= nroute; i++)
        if (!(norm(route[i]) in documented))
            fail("route " route[i] " (src/api/routes.c) is not in docs/api.md")
    printf "SUM\t%d\t%d\t%d\n", nroute, ndoc, nfail
}
' "$DROVER_SRC/src/api/routes.c" "$DROVER_SRC/docs/api.md" >"$TMP/result"

while IFS=$'\t' read -r kind a b c; do
    if [ "$kind" == FAIL ]; then
        fail "$a"
    elif [ "$kind" == SUM ]; then
        # floors: 109 routes and 100 documented methods and paths today
        if [ "$a" -lt 80 ] || [ "$b" -lt 80 ]; then
            fail "read the routes and the Paths table ($a routes, $b documented: the format changed?)"
        elif [ "$c" -eq 0 ]; then
            ok "every route of src/api/routes.c ($a) is in docs/api.md, and the Paths table's $b methods and paths are routes"
        fi
    fi
done <"$TMP/result"

t_done
