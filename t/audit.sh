#!/usr/bin/env bash
# audit.sh — GET /v1/audit (issue 18, item 3): every write made with a
# user's token is logged with who (user, token), what (method, path,
# status, failures included), when and from where; reads are not; only
# admins read it, filtered (user, kind, since) and paged; no secret is in
# it; it is kept in the store (survives a restart, here and as pg/audit on
# PostgreSQL) and bounded (--audit-max-entries); `drover audit -o json`.
. "$(dirname "$0")/lib/common.bash"

droverd_start "$TMP/d" || exit 1
api POST /v1/users -d '{"id":"bob","role":"member"}'
status "create user bob" 201
BOB=$(jq -r .token.secret <<<"$BODY")
BOBTOK=$(jq -r .token.id <<<"$BODY")
as "$BOB" api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "bob creates a cluster" 201
as "$BOB" api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "bob creates it again" 409
as "$BOB" api GET /v1/clusters
status "bob lists clusters (a read)" 200
as "$BOB" api DELETE /v1/clusters/c1
status "bob deletes it" 200

api GET /v1/audit
status "an admin reads the audit log" 200
jqc "newest first: bob's DELETE, 409 POST, 201 POST, then the admin's POST /v1/users" \
    '[.items[] | [.user, .method, .path, .status]] == [["bob","DELETE","/v1/clusters/c1",200],
      ["bob","POST","/v1/clusters",409], ["bob","POST","/v1/clusters",201], ["admin","POST","/v1/users",201]]'
jqc "each entry says when, with which token, from where" \
    ".items[0] | .token == \"$BOBTOK\" and .remote == \"127.0.0.1\" and (.at | test(\"^20[0-9][0-9]-\")) and .at_ms > 0"
jqc "reads are not in it" 'all(.items[]; .method != "GET")'
api GET "/v1/audit?user=admin"
jqc "?user=admin: the admin's writes only" '[.items[].user] == ["admin"]'
api GET "/v1/audit?limit=1"
jqc "?limit=1: the newest" '(.items | length) == 1 and .items[0].method == "DELETE"'
api GET "/v1/audit?limit=0"
status "limit 0" 400
api GET "/v1/audit?bogus=1"
status "an unknown query argument" 400
api GET "/v1/audit?kind=clusters"
jqc "?kind=clusters: bob's three cluster writes" '[.items[].kind] == ["clusters","clusters","clusters"]'
api GET "/v1/audit?since=2999-01-01T00:00:00Z"
jqc "?since= in the future: none" '.items == []'
api GET "/v1/audit?since=1"
jqc "?since=1 (unix seconds): all four" '(.items | length) == 4'
api GET "/v1/audit?since=yesterday"
status "?since=yesterday" 400
api GET "/v1/audit?limit=3"
jqc "?limit=3: three and a next_page_token" '(.items | length) == 3 and (.next_page_token | type == "string")'
NEXT=$(jq -r .next_page_token <<<"$BODY")
api GET "/v1/audit?limit=3&page_token=$NEXT"
jqc "... the next page: the admin's POST /v1/users, the last one" \
    '[.items[] | [.user, .path]] == [["admin","/v1/users"]] and (has("next_page_token") | not)'
api GET "/v1/audit?page_token=nope"
status "a page_token it did not hand out" 400

# no secret in it: a cloud credential's, a new token's
SECRET=wJalrXUtnFEMI-audit-$RANDOM$RANDOM
api POST /v1/credentials -d "{\"id\":\"aws1\",\"access_key_id\":\"AKIDAUDIT\",\"secret_access_key\":\"$SECRET\"}"
status "create a credential with a secret" 201
api POST /v1/tokens -d '{"id":"t2","scopes":["read"]}'
status "create a token" 201
TSECRET=$(jq -r .secret <<<"$BODY")
api GET "/v1/audit?limit=2"
jqc "both writes are logged" '[.items[].path] == ["/v1/tokens","/v1/credentials"]'
check "... and neither secret is in the log" eval '! grep -q -e "$SECRET" -e "$TSECRET" <<<"$BODY"'
in_store() { [ "$(store_sql "$DDIR" "SELECT count(*) FROM objects WHERE kind = 'audit' AND body IS NOT NULL")" == "$1" ]; }
check "the store holds the six entries (kind audit; they commit with the next batch)" \
    wait_until 30 "six audit records in the store" in_store 6
ROWS=$(store_sql "$DDIR" "SELECT body FROM objects WHERE kind = 'audit'")
check "... and no secret is in those rows" eval '[[ "$ROWS" != *"$SECRET"* && "$ROWS" != *"$TSECRET"* && "$ROWS" != *"$ADMIN"* ]]'

# durable: the log survives a restart; bounded: a smaller bound trims it
droverd_stop TERM
droverd_start "$DDIR" || { fail "droverd restarts"; t_done; }
api GET /v1/audit
jqc "after a restart the six entries are there, newest first" \
    '(.items | length) == 6 and .items[0].path == "/v1/tokens" and .items[5].path == "/v1/users"'
"$DROVER" --server "$URL" --token "$ADMIN" audit --user bob -o json >"$TMP/audit.json" 2>"$TMP/audit.err"
eq "drover audit --user bob -o json exits 0" "$?" 0
check "... prints bob's three writes as a JSON array" \
    jq -e 'length == 3 and all(.[]; .user == "bob")' "$TMP/audit.json"
"$DROVER" --server "$URL" --token "$ADMIN" audit --limit 2 >"$TMP/audit.txt" 2>&1
check "drover audit --limit 2 prints a table of two" \
    eval '[ "$(wc -l <"$TMP/audit.txt")" == 3 ] && grep -q "^TIME" "$TMP/audit.txt"'
droverd_stop TERM
droverd_start "$DDIR" --audit-max-entries 3 || { fail "droverd restarts"; t_done; }
as "$BOB" api POST /v1/clusters -d '{"id":"c2","provider":"local","region":"local"}'
status "bob writes once more" 201
api GET /v1/audit
jqc "--audit-max-entries 3: the newest three are kept" \
    '[.items[].path] == ["/v1/clusters","/v1/tokens","/v1/credentials"]'
check "... and the store holds three" wait_until 30 "three audit records in the store" in_store 3
as "$BOB" api GET /v1/audit
status "a member may not read the audit log" 403
TOKEN="" api GET /v1/audit
status "without a token" 401
droverd_finish audit
t_done
