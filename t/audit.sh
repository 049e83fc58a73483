#!/usr/bin/env bash
# audit.sh — GET /v1/audit (issue 18, item 3): every write made with a
# user's token is logged with who (user, token), what (method, path,
# status, failures included), when and from where; reads are not; only
# admins read it, filtered by user and bounded by limit.
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
api GET "/v1/audit?since=1"
status "an unknown query argument" 400
as "$BOB" api GET /v1/audit
status "a member may not read the audit log" 403
TOKEN="" api GET /v1/audit
status "without a token" 401
droverd_finish audit
t_done
