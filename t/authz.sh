#!/usr/bin/env bash
# authz.sh — the authorization matrix: per-user namespaces for every kind,
# admin-only paths, ?all_users, token scopes (all/read/predict), expired,
# revoked, malformed and missing tokens, and user deletion taking its tokens.
. "$(dirname "$0")/lib/common.bash"

droverd_start "$TMP/d" || exit 1

# ---- users --------------------------------------------------------------------
api POST /v1/users -d '{"id":"alice"}'
status "admin creates member alice" 201
jqc "alice is a member with a first token" '.role == "member" and .owner == "alice" and (.token.secret | test("^drv_[0-9a-f]{64}$"))'
ALICE=$(jq -r .token.secret <<<"$BODY")
api POST /v1/users -d '{"id":"bob","role":"member"}'
status "admin creates member bob" 201
BOB=$(jq -r .token.secret <<<"$BODY")
api POST /v1/users -d '{"id":"bob"}'
status "creating bob again" 409

as "$ALICE" api GET /v1/users/me
status "alice: GET /v1/users/me" 200
jqc "alice is alice, member, token 'initial' scope all" '.id == "alice" and .role == "member" and .token.id == "initial" and .token.scopes == ["all"]'
as "$ALICE" api GET /v1/users/alice
status "alice: GET her own user" 200
as "$ALICE" api GET /v1/users/bob
status "alice: GET /v1/users/bob" 404
for who in ALICE BOB; do
    tok=${!who}
    as "$tok" api GET /v1/users
    status "${who,,}: list users" 403
    error_shape "${who,,}: list users"
    as "$tok" api POST /v1/users -d '{"id":"mallory","role":"admin"}'
    status "${who,,}: create a user" 403
    as "$tok" api DELETE /v1/users/admin
    status "${who,,}: delete user admin" 403
    as "$tok" api DELETE /v1/users/alice
    status "${who,,}: delete user alice" 403
done
api GET /v1/users/mallory
status "no user mallory was made" 404

# ---- alice's objects, one of each kind -------------------------------------------
CL='{"id":"c1","provider":"local","region":"local","description":"alice"}'
NP='{"id":"np1","instance_types":["local-t4"],"max_nodes":2}'
MO='{"id":"m1","runtime":{"command":["demo-model"]},"resources":{"gpu":{"count":1,"memory_mib":4096,"compute_percent":50}}}'
DE='{"id":"d1","model":"m1","nodepools":[{"cluster":"c1","nodepool":"np1"}]}'
as "$ALICE" api POST /v1/clusters -d "$CL"
status "alice creates cluster c1" 201
as "$ALICE" api POST /v1/clusters/c1/nodepools -d "$NP"
status "alice creates nodepool c1/np1" 201
as "$ALICE" api POST /v1/models -d "$MO"
status "alice creates model m1" 201
as "$ALICE" api POST /v1/deployments -d "$DE"
status "alice creates deployment d1" 201
as "$ALICE" api POST /v1/tokens -d '{"id":"t1","description":"alice ci"}'
status "alice creates token t1" 201
jqc "token create shows the secret once" '.id == "t1" and (.secret | test("^drv_[0-9a-f]{64}$")) and .owner == "alice"'
as "$ALICE" api GET /v1/tokens/t1
jqc "token GET does not show the secret" 'has("secret") | not'

# one path per kind: object path, list path, a harmless patch
declare -A OBJ=([clusters]=/v1/clusters/c1 [nodepools]=/v1/clusters/c1/nodepools/np1
    [models]=/v1/models/m1 [deployments]=/v1/deployments/d1 [tokens]=/v1/tokens/t1)
declare -A LIST=([clusters]=/v1/clusters [nodepools]=/v1/nodepools [models]=/v1/models
    [deployments]=/v1/deployments [tokens]=/v1/tokens)
declare -A PATCHB=([clusters]='{"description":"bob was here"}'
    [nodepools]='{"description":"bob was here"}' [models]='{"description":"bob was here"}'
    [deployments]='{"description":"bob was here"}' [tokens]='{"description":"bob was here"}')
KINDS="clusters nodepools models deployments tokens"

for k in $KINDS; do
    as "$BOB" api GET "${OBJ[$k]}"
    status "bob: GET alice's $k ${OBJ[$k]}" 404
    error_shape "bob: GET alice's $k"
    if [ "$k" == tokens ]; then
        # tokens have no PATCH at all: the path exists, the method does not
        as "$BOB" api PATCH "${OBJ[$k]}" -d "${PATCHB[$k]}"
        status "bob: PATCH alice's token (no PATCH on tokens)" 405
    else
        as "$BOB" api PATCH "${OBJ[$k]}" -d "${PATCHB[$k]}"
        status "bob: PATCH alice's $k" 404
        as "$BOB" api PATCH "${OBJ[$k]}" -H 'If-Match: 1' -d "${PATCHB[$k]}"
        status "bob: PATCH alice's $k with a matching If-Match" 404
    fi
    as "$BOB" api DELETE "${OBJ[$k]}"
    status "bob: DELETE alice's $k" 404
    as "$BOB" api DELETE "${OBJ[$k]}?cascade=true"
    status "bob: DELETE alice's $k ?cascade=true" 404
    as "$BOB" api GET "${LIST[$k]}"
    status "bob: list $k" 200
    jqc "bob: alice's $k absent from bob's list" '[.items[] | select(.owner == "alice")] | length == 0'
    # nothing of alice's changed
    as "$ALICE" api GET "${OBJ[$k]}"
    status "alice: her $k is still there" 200
    jqc "alice: her $k is unchanged (resource_version 1, no bob edits)" '.resource_version == 1 and .owner == "alice" and (.description != "bob was here")'
done
as "$BOB" api GET /v1/clusters/c1/nodepools
status "bob: list nodepools of alice's cluster c1" 404
as "$BOB" api POST /v1/clusters/c1/nodepools -d '{"id":"np9","instance_types":["local-t4"]}'
status "bob: create a nodepool in alice's cluster c1" 404
as "$BOB" api POST /v1/deployments -d '{"id":"d9","model":"m1","nodepools":[{"cluster":"c1","nodepool":"np1"}]}'
status "bob: deployment on alice's model/nodepool" 422
as "$ALICE" api GET /v1/tokens/t1
TOKEN_T1_RV=$(jq -r .resource_version <<<"$BODY")
eq "alice: her token t1 not revoked by bob" "$(jq -r .revoked <<<"$BODY")/$TOKEN_T1_RV" "false/1"

# bob can use the same ids in his own namespace
as "$BOB" api POST /v1/clusters -d "${CL/alice/bob}"
status "bob creates his own cluster c1" 201
jqc "bob's c1 is bob's" '.owner == "bob" and .description == "bob"'
as "$BOB" api POST /v1/clusters/c1/nodepools -d "$NP"
status "bob creates his own nodepool c1/np1" 201
as "$BOB" api POST /v1/models -d "$MO"
status "bob creates his own model m1" 201
as "$BOB" api POST /v1/deployments -d "$DE"
status "bob creates his own deployment d1" 201
as "$BOB" api POST /v1/tokens -d '{"id":"t1"}'
status "bob creates his own token t1" 201
for k in $KINDS; do
    as "$ALICE" api GET "${OBJ[$k]}"
    jqc "alice still sees her own $k" '.owner == "alice"'
    as "$BOB" api GET "${OBJ[$k]}"
    jqc "bob sees his own $k" '.owner == "bob"'
    as "$ALICE" api GET "${LIST[$k]}"
    jqc "alice's $k list has only alice's" '(.items | length > 0) and all(.items[]; .owner == "alice")'
done

# ---- ?all_users -----------------------------------------------------------------
for k in $KINDS; do
    api GET "${LIST[$k]}?all_users=true"
    status "admin: list $k ?all_users=true" 200
    jqc "admin: all_users $k has alice's and bob's" '[.items[].owner] | (index("alice") != null) and (index("bob") != null)'
    api GET "${LIST[$k]}"
    jqc "admin: plain $k list is only admin's" 'all(.items[]; .owner == "admin")'
    for who in ALICE BOB; do
        as "${!who}" api GET "${LIST[$k]}?all_users=true"
        status "${who,,}: list $k ?all_users=true" 403
        error_shape "${who,,}: all_users $k"
    done
    as "$ALICE" api GET "${LIST[$k]}?all_users=false"
    status "alice: list $k ?all_users=false" 200
done
as "$ALICE" api GET "/v1/clusters/c1/nodepools?all_users=true"
status "alice: nested nodepool list ?all_users=true" 403
# admin, nested list with all_users: only nodepools of clusters with that id
api POST /v1/clusters -d '{"id":"adm","provider":"local","region":"local"}'
api POST /v1/clusters/adm/nodepools -d '{"id":"anp","instance_types":["local-cpu"]}'
api GET "/v1/clusters/adm/nodepools?all_users=true"
status "admin: GET /v1/clusters/adm/nodepools?all_users=true" 200
check "admin: /v1/clusters/adm/nodepools?all_users=true lists only clusters 'adm' (got: $(jq -c '[.items[]? | "\(.owner)/\(.cluster)/\(.id)"]' <<<"$BODY"))" \
    jqq 'all(.items[]; .cluster == "adm")' <<<"$BODY"
api GET "/v1/clusters/c1/nodepools?all_users=true"
check "admin: /v1/clusters/c1/nodepools?all_users=true answers 200 with alice's and bob's c1 nodepools (got $ST)" \
    [ "$ST" == 200 ]
api DELETE "/v1/clusters/adm?cascade=true"
status "admin: remove cluster adm" 200
api GET "/v1/users?limit=1"
status "admin: list users with limit=1" 200
jqc "admin: user pages (limit=1) carry next_page_token" '(.items | length == 1) and (.next_page_token | type == "string")'
api GET /v1/users/alice
status "admin: GET any user" 200

# ---- token scopes -----------------------------------------------------------------
mk_token()   # mk_token OWNER_TOKEN ID JSON-BODY -> prints the secret
{
    as "$1" api POST /v1/tokens -d "$3"
    [ "$ST" == 201 ] || { echo "token $2: $ST $BODY" >&2; return 1; }
    jq -r .secret <<<"$BODY"
}
RD=$(mk_token "$ALICE" rd '{"id":"rd","scopes":["read"]}')
PR=$(mk_token "$ALICE" pr '{"id":"pr","scopes":["predict"]}')
AL=$(mk_token "$ALICE" al '{"id":"al","scopes":["all"]}')
RP=$(mk_token "$ALICE" rp '{"id":"rp","scopes":["read","predict"]}')

READS="/v1/clusters /v1/clusters/c1 /v1/clusters/c1/nodepools /v1/clusters/c1/nodepools/np1
/v1/nodepools /v1/models /v1/models/m1 /v1/deployments /v1/deployments/d1 /v1/tokens
/v1/tokens/rd /v1/users/me /v1/providers /v1/providers/local /v1/providers/local/regions
/v1/instance-types /v1/instance-types/local-t4 /v1/recommendations?params_b=7"
# method path body: every management write
WRITES=(
    "POST /v1/clusters {\"id\":\"c2\",\"provider\":\"local\",\"region\":\"local\"}"
    "PATCH /v1/clusters/c1 {\"description\":\"x\"}"
    "DELETE /v1/clusters/c1?cascade=true -"
    "POST /v1/clusters/c1/nodepools {\"id\":\"np2\",\"instance_types\":[\"local-t4\"]}"
    "PATCH /v1/clusters/c1/nodepools/np1 {\"max_nodes\":3}"
    "DELETE /v1/clusters/c1/nodepools/np1 -"
    "POST /v1/models {\"id\":\"m2\",\"runtime\":{\"command\":[\"x\"]}}"
    "PATCH /v1/models/m1 {\"description\":\"x\"}"
    "DELETE /v1/models/m1?cascade=true -"
    "POST /v1/deployments {\"id\":\"d2\",\"model\":\"m1\",\"nodepools\":[{\"cluster\":\"c1\",\"nodepool\":\"np1\"}]}"
    "PATCH /v1/deployments/d1 {\"enabled\":false}"
    "DELETE /v1/deployments/d1 -"
    "POST /v1/tokens {\"id\":\"t9\"}"
    "DELETE /v1/tokens/t1 -"
    "DELETE /v1/tokens/rd -"
)
write_call()   # write_call "METHOD PATH BODY"
{
    local m p b
    read -r m p b <<<"$1"
    if [ "$b" == "-" ]; then api "$m" "$p"; else api "$m" "$p" -d "$b"; fi
}

for p in $READS; do
    as "$RD" api GET "$p"
    status "read token: GET $p" 200
    as "$PR" api GET "$p"
    status "predict token: GET $p" 403
    as "$AL" api GET "$p"
    status "all token: GET $p" 200
done
as "$PR" api GET /v1/clusters
error_shape "predict token: management GET"
for w in "${WRITES[@]}"; do
    as "$RD" write_call "$w"
    label=${w%% \{*}
    label=${label% -}
    status "read token: $label" 403
    as "$PR" write_call "$w"
    status "predict token: $label" 403
done
as "$RD" api POST /v1/clusters -d '{"id":"c2","provider":"local","region":"local"}'
error_shape "read token: write refused"
# nothing the refused writes named changed
as "$ALICE" api GET /v1/clusters/c2
status "refused writes made no cluster c2" 404
as "$ALICE" api GET /v1/deployments/d1
jqc "refused writes left d1 as it was" '.resource_version == 1 and .enabled == true'
as "$ALICE" api GET /v1/tokens/rd
jqc "refused writes did not revoke token rd" '.revoked == false'

# inference: predict and all pass auth; read does not. d1 has no ready
# replica, so the gateway holds the request (cold start) until its
# X-Drover-Timeout, then answers 503.
declare -A TNAME=([PR]="predict" [AL]="all" [RP]="read+predict")
for t in PR AL RP; do
    as "${!t}" api POST /v1/deployments/d1/predict -d '{"inputs":"hello"}' -H 'X-Drover-Timeout: 0.2'
    status "${TNAME[$t]} token: POST /v1/deployments/d1/predict passes auth" 503
    error_shape "${TNAME[$t]} token: predict"
    as "${!t}" api POST /openai/v1/chat/completions -d '{"model":"d1","messages":[]}' -H 'X-Drover-Timeout: 0.2'
    status "${TNAME[$t]} token: POST /openai/v1/chat/completions passes auth" 503
    as "${!t}" api GET /openai/v1/models
    status "${TNAME[$t]} token: GET /openai/v1/models passes auth" 200
done
as "$RD" api POST /v1/deployments/d1/predict -d '{"inputs":"hello"}'
status "read token: predict" 403
as "$RD" api GET /openai/v1/models
status "read token: GET /openai/v1/models" 403
as "$RP" api GET /v1/clusters
status "read+predict token: GET /v1/clusters" 200
as "$RP" api DELETE /v1/deployments/d1
status "read+predict token: DELETE a deployment" 403
as "$PR" api GET /v1/users/me
status "predict token: GET /v1/users/me" 403
as "$RD" api GET /v1/users/me
jqc "read token: /v1/users/me names the token and its scopes" '.token.id == "rd" and .token.scopes == ["read"]'
as "$RD" api GET /v1/users
status "alice's read token: list users (admin only)" 403

# an admin's read token still cannot write users
ADM_RD=$(mk_token "$ADMIN" adm-rd '{"id":"adm-rd","scopes":["read"]}')
as "$ADM_RD" api GET /v1/users
status "admin read token: list users" 200
as "$ADM_RD" api POST /v1/users -d '{"id":"zed"}'
status "admin read token: create a user" 403
as "$ADM_RD" api GET "/v1/clusters?all_users=true"
status "admin read token: all_users list" 200

# ---- expiry ------------------------------------------------------------------------
as "$ALICE" api POST /v1/tokens -d '{"id":"short","expires_in_seconds":59}'
status "expires_in_seconds 59 (below the minimum)" 400
jqc "expires_in_seconds 59: field named" '.error.field == "expires_in_seconds"'
as "$ALICE" api POST /v1/tokens -d '{"id":"exp1","expires_in_seconds":60}'
status "token with expires_in_seconds 60" 201
EXP1=$(jq -r .secret <<<"$BODY")
jqc "exp1: expires_at is created_at + 60 s" '(.expires_at | fromdateiso8601) - (.created_at | fromdateiso8601) == 60'
as "$ALICE" api POST /v1/tokens -d '{"id":"exp2","expires_in_seconds":86400}'
EXP2=$(jq -r .secret <<<"$BODY")
jqc "exp2: expires_at is created_at + 86400 s" '(.expires_at | fromdateiso8601) - (.created_at | fromdateiso8601) == 86400'
NOW=$(date -u +%s)
jqc "exp2: expires_at is about a day from now (clock sanity, ±1 h)" "((.expires_at | fromdateiso8601) - $NOW | fabs) < 90000 and ((.expires_at | fromdateiso8601) - $NOW) > 82800"
as "$EXP1" api GET /v1/users/me
status "unexpired token works" 200
jqc "/v1/users/me shows the token's expires_at" '.token.id == "exp1" and (.token.expires_at | type == "string")'
as "$ALICE" api GET /v1/tokens/al
jqc "a token without expiry has expires_at null" '.expires_at == null'

# ---- revocation -------------------------------------------------------------------
as "$AL" api GET /v1/clusters
status "token al works before revocation" 200
as "$ALICE" api DELETE /v1/tokens/al
status "alice revokes token al" 200
jqc "revoked token answers revoked: true" '.revoked == true and .resource_version == 2'
as "$AL" api GET /v1/clusters
status "revoked token" 401
error_shape "revoked token"
jqc "revoked token: message says revoked" '.error.message | test("revoked")'
as "$ALICE" api GET /v1/tokens
jqc "revoked token stays listed with revoked: true" '[.items[] | select(.id == "al")][0].revoked == true'
as "$ALICE" api DELETE /v1/tokens/al
status "revoking again is harmless" 200
as "$BOB" api DELETE /v1/tokens/rd
status "bob cannot revoke alice's token rd" 404
as "$RD" api GET /v1/clusters
status "alice's token rd still works" 200

# ---- bad and missing tokens -------------------------------------------------------
bad_tokens=(
    "Bearer garbage"
    "Bearer drv_"
    "Bearer drv_$(printf 'z%.0s' {1..64})"
    "Bearer drv_$(printf '0%.0s' {1..64})"
    "Bearer drv_$(printf 'A%.0s' {1..64})"
    "Bearer ${ALICE}x"
    "Bearer ${ALICE:0:60}"
    "Bearer  "
    "Basic YWxpY2U6c2VjcmV0"
    "Token $ALICE"
    "$ALICE"
)
i=0
for h in "${bad_tokens[@]}"; do
    i=$((i + 1))
    as "" api GET /v1/clusters -H "Authorization: $h"
    status "bad Authorization #$i (${h:0:24}…)" 401
    error_shape "bad Authorization #$i"
done
as "" api GET /v1/clusters
status "no Authorization header" 401
error_shape "no Authorization header"
as "" api POST /v1/deployments/d1/predict -d '{}'
status "no token: predict" 401
as "" api GET /healthz
status "no token: /healthz" 200
as "" api GET /v1/clusters -H "Authorization: Key $ALICE"
status "'Key <token>' scheme works too" 200
as "" api GET /v1/clusters -H "Authorization: bearer $ALICE"
status "scheme name is case-insensitive" 200

# ---- user deletion takes its tokens -------------------------------------------------
api POST /v1/users -d '{"id":"carol"}'
CAROL=$(jq -r .token.secret <<<"$BODY")
CAROL2=$(mk_token "$CAROL" extra '{"id":"extra","scopes":["read"]}')
as "$CAROL2" api GET /v1/clusters
status "carol's second token works" 200
api DELETE /v1/users/carol
status "admin deletes carol" 200
as "$CAROL" api GET /v1/clusters
status "deleted user's first token" 401
as "$CAROL2" api GET /v1/clusters
status "deleted user's second token" 401
api GET "/v1/tokens?all_users=true"
jqc "carol's tokens are gone from the store" '[.items[] | select(.owner == "carol")] | length == 0'
api POST /v1/users -d '{"id":"carol"}'
status "re-creating user carol" 201
as "$CAROL" api GET /v1/clusters
status "old carol token does not revive with a new carol" 401

api DELETE /v1/users/bob
status "deleting bob, who owns resources" 409
error_shape "user delete conflict"
contains "the API's refusal says ?cascade=true" "$(jq -r .error.message <<<"$BODY")" "use ?cascade=true"
cli user delete bob
rc "drover user delete bob, who owns resources" 1
contains "the CLI's refusal says --cascade" "$ERR" "delete them first or use --cascade"
as "$BOB" api GET /v1/clusters
status "bob still works after the refused delete" 200
api DELETE /v1/users/bob?cascade=true
status "deleting bob with cascade" 200
as "$BOB" api GET /v1/clusters
status "bob's token after his deletion" 401
for k in $KINDS; do
    api GET "${LIST[$k]}?all_users=true"
    jqc "cascade removed bob's $k" '[.items[] | select(.owner == "bob")] | length == 0'
    as "$ALICE" api GET "${OBJ[$k]}"
    status "alice's $k untouched by bob's deletion" 200
done
api DELETE /v1/users/admin
status "admin cannot delete itself" 409
api DELETE /v1/users/nobody
status "deleting a missing user" 404

# ---- expired token: rewrite expires_at in the store while droverd is down ----------
as "$ALICE" api POST /v1/tokens -d '{"id":"old","expires_in_seconds":3600}'
OLD=$(jq -r .secret <<<"$BODY")
as "$OLD" api GET /v1/clusters
status "token 'old' works before it expires" 200
droverd_finish "first run"
n=$(store_sql "$DDIR" "select count(*) from objects where kind='token' and key='alice/old'")
eq "token alice/old is in the store" "$n" 1
if store_is_pg; then
    store_sql "$DDIR" "update objects set body = jsonb_set(body::jsonb, '{spec,expires_at}', '\"2001-02-03T04:05:06Z\"')::text where kind='token' and key='alice/old'"
    got=$(store_sql "$DDIR" "select body::jsonb #>> '{spec,expires_at}' from objects where kind='token' and key='alice/old'")
else
    sqlite3 "$DDIR/drover.db" "update objects set body = json_set(body, '\$.spec.expires_at', '2001-02-03T04:05:06Z') where kind='token' and key='alice/old'"
    got=$(sqlite3 "$DDIR/drover.db" "select json_extract(body,'\$.spec.expires_at') from objects where kind='token' and key='alice/old'")
fi
eq "expires_at rewritten to the past" "$got" "2001-02-03T04:05:06Z"
droverd_start "$DDIR" || exit 1
as "$OLD" api GET /v1/clusters
status "expired token" 401
error_shape "expired token"
jqc "expired token: message says expired" '.error.message | test("expired")'
as "$OLD" api POST /v1/deployments/d1/predict -d '{}'
status "expired token: predict" 401
as "$ALICE" api GET /v1/tokens/old
jqc "the expired token is still listed with its expires_at" '.expires_at == "2001-02-03T04:05:06Z"'
as "$EXP2" api GET /v1/users/me
status "exp2 (a day, not yet due) still works after restart" 200
as "$ALICE" api GET /v1/clusters
status "alice's first token survives the restart" 200
as "$AL" api GET /v1/clusters
status "revoked token stays revoked after restart" 401

droverd_finish "second run"
t_done
