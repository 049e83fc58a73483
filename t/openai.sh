#!/usr/bin/env bash
# openai.sh — OpenAI compatibility, checked with the official openai npm
# client (v6, t/openai/node_modules from its lock file, installed by
# scripts/install-deps) against every inference address: droverd's API
# address, its inference listener (--gateway-listen) and drover-gateway,
# with a real local agent and a drover-demo-model replica.
#
#   - t/openai/compat.mjs on each address: models list and retrieve (the
#     deployment's created time, the same everywhere), chat completions
#     plain and streamed (model and created on every chunk, one final chunk
#     with finish_reason, the usage last), completions plain and streamed,
#     an unknown model -> the SDK's NotFoundError, a refused request ->
#     BadRequestError, a bad token -> AuthenticationError, each with
#     OpenAI's error shape;
#   - with curl on each address: errors on /openai/ paths (no such path,
#     method, missing model, unknown model) are OpenAI-shaped
#     {"error":{"message","type","param","code"}}; other paths keep
#     drover's {"error":{"code","message","field"?}}.
# No node or no openai package: the test FAILS.
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}
COMPAT=$DROVER_SRC/t/openai
droverd_start "$TMP/d" --listen "127.0.0.1:$(free_port)" --gateway-listen 127.0.0.1:0 \
    --config "$CFG" || exit 1
LURL=$(head -n1 "$TMP/d/gateway.url")

# ---- a cluster, a CPU nodepool, the demo model with 1 replica ------------------------------
api POST /v1/clusters -d '{"id":"c1","provider":"local","region":"local"}'
status "create local cluster" 201
api POST /v1/clusters/c1/nodepools -d '{"id":"np1","instance_types":["local-cpu"],"min_nodes":1,"max_nodes":1}'
status "create nodepool" 201
api POST /v1/models -d '{"id":"demo","runtime":{"command":["drover-demo-model","--weights-mib","1"]},"resources":{"cpu_millis":100,"memory_mib":64}}'
status "create model demo" 201
api POST /v1/deployments -d '{"id":"web","model":"demo","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":1,"max_replicas":1}}'
status "create deployment web" 201
CREATED=$(jq -r '.created_at | fromdateiso8601' <<<"$BODY")
wait_check "$W" "web has a ready replica" deployment_ready web 1

api POST /v1/tokens -d '{"id":"pr","scopes":["predict"]}'
status "a predict-scoped token" 201
PR=$(jq -r .secret <<<"$BODY")
api POST /v1/tokens -d '{"id":"gw","scopes":["gateway"]}'
status "a gateway-scoped token for drover-gateway" 201
GWT=$(jq -r .secret <<<"$BODY")

# ---- drover-gateway following the head ------------------------------------------------------
GPORT=$(free_port)
GURL=http://127.0.0.1:$GPORT
(exec -a "$TMP/drover-gateway" "$BIN_DIR/drover-gateway" --server "$URL" --token "$GWT" \
    --listen "127.0.0.1:$GPORT" --poll-seconds 1 >>"$TMP/gw.log" 2>&1) &
GWPID=$!
_BG_PIDS+=("$GWPID")
# an address knows web (and the predict token) once its models list shows it
lists_web() {
    curl -s -m 5 -H "Authorization: Bearer $PR" "$1/openai/v1/models" |
        jq -e '[.data[]?.id] | index("web") != null' >/dev/null 2>&1
}
wait_check 60 "the inference listener lists web" lists_web "$LURL"
wait_check 60 "drover-gateway lists web" lists_web "$GURL"

# ---- the error shapes, with curl ------------------------------------------------------------
# openai_error STATUS TYPE PARAM CODE: $BODY is OpenAI's error with these
# (PARAM, CODE "null" for none)
openai_error() {
    [ "$ST" == "$1" ] && jq -e --arg t "$2" --arg p "$3" --arg c "$4" '
        (.error | keys | sort) == ["code", "message", "param", "type"] and
        (.error.message | type == "string" and length > 0) and .error.type == $t and
        (if $p == "null" then .error.param == null else .error.param == $p end) and
        (if $c == "null" then .error.code == null else .error.code == $c end)' >/dev/null 2>&1 <<<"$BODY"
}
shape() {
    local name=$1
    shift
    if openai_error "$@"; then ok "$name: $1, OpenAI's error shape"; else fail "$name: $1, OpenAI's error shape"; why "$ST $BODY"; fi
}
for addr in "API address:$URL" "inference listener:$LURL" "drover-gateway:$GURL"; do
    name=${addr%%:http*}
    u=${addr#"$name:"}
    saved=$URL
    URL=$u
    TOKEN=$PR
    api GET /openai/v1/embeddings
    shape "$name: GET /openai/v1/embeddings" 404 invalid_request_error null not_found
    api DELETE /openai/v1/models
    shape "$name: DELETE /openai/v1/models" 405 invalid_request_error null method_not_allowed
    api POST /openai/v1/chat/completions -d '{"messages":[]}'
    shape "$name: chat without a model" 400 invalid_request_error model invalid_argument
    api POST /openai/v1/chat/completions -d '{"model":"nope","messages":[{"role":"user","content":"x"}]}'
    shape "$name: chat with an unknown model" 404 invalid_request_error null not_found
    api GET /openai/v1/models/nope
    shape "$name: GET /openai/v1/models/nope" 404 invalid_request_error null not_found
    api POST /openai/v1/completions -d '{"model":"web"}'
    shape "$name: the replica's own refusal (no prompt)" 400 invalid_request_error null null
    TOKEN=""
    api GET /openai/v1/models
    shape "$name: no token" 401 authentication_error null unauthenticated
    TOKEN=$PR
    api GET /openai/v1/models/web
    if [ "$ST" == 200 ] && jq -e --argjson c "$CREATED" '.id == "web" and .object == "model" and .created == $c' >/dev/null <<<"$BODY"; then
        ok "$name: GET /openai/v1/models/web has the deployment's created time"
    else
        fail "$name: GET /openai/v1/models/web has the deployment's created time"
        why "$ST $BODY (want created $CREATED)"
    fi
    api POST /v1/deployments/nope/predict -d '{"inputs":"x"}'
    status "$name: predict for an unknown deployment" 404
    error_shape "$name: predict (not an /openai/ path) keeps drover's error shape"
    URL=$saved
done
TOKEN=$ADMIN

# ---- the openai client -----------------------------------------------------------------------
if ! command -v node >/dev/null 2>&1; then
    fail "node is installed (run scripts/install-deps)"
    t_done
fi
if [ "$(jq -r .version "$COMPAT/node_modules/openai/package.json" 2>/dev/null)" != \
     "$(jq -r '.packages["node_modules/openai"].version' "$COMPAT/package-lock.json")" ]; then
    fail "the locked openai package is installed in t/openai (run scripts/install-deps)"
    t_done
fi
for addr in "API address:$URL" "inference listener:$LURL" "drover-gateway:$GURL"; do
    name=${addr%%:http*}
    # each "ok - " / "FAIL - " line of the client's run counts as one check here
    while IFS= read -r line; do
        case $line in
            "ok - "*) ok "${line#ok - }" ;;
            "FAIL - "*) fail "${line#FAIL - }" ;;
            *) echo "$line" ;;
        esac
    done < <(BASE=${addr#"$name:"} TOKEN=$PR MODEL=web CREATED=$CREATED LABEL=$name \
                 node "$COMPAT/compat.mjs" 2>&1; echo $? >"$TMP/compat.rc")
    RC=$(cat "$TMP/compat.rc" 2>/dev/null || echo none)
    check "$name: the client's run ended cleanly (exit $RC)" test "$RC" == 0
done

kill -TERM "$GWPID"
wait "$GWPID"
eq "drover-gateway exits 0 on SIGTERM" "$?" 0
logs_sanitizer_clean "drover-gateway" "$TMP/gw.log"
droverd_finish "openai"
t_done
