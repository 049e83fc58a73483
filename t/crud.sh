#!/usr/bin/env bash
# crud.sh — create, read, update and delete every kind through the CLI
# (`drover apply -f` with the repo's examples and with files written here,
# `get`, `describe`, `delete`), the delete rules (409 / --cascade),
# conditional PATCH (If-Match) and list pagination through the API, the
# catalog commands, and the CLI's exit codes (0 done, 1 refused, 2 usage).
#
# The examples part reads what each example file sets (a small reader for
# their plain YAML, below) and checks exactly that, so it follows edits to
# the examples; the update/delete-rule parts use files written here.
. "$(dirname "$0")/lib/common.bash"

if [ ! -x "$DROVER" ]; then
    echo "DROVER=$DROVER is not an executable (build first)" >&2
    exit 1
fi
EX=$DROVER_SRC/examples
M=$TMP/yaml
mkdir -p "$M"
droverd_start "$TMP/d" || exit 1

# ---- helpers ------------------------------------------------------------------------

# one_line NAME: the last cli call printed exactly one line on stderr
one_line()
{
    local n
    n=$(printf '%s' "$ERR" | grep -c '')
    if [ "$n" == 1 ]; then ok "$1: one line on stderr"; else fail "$1: one line on stderr"; why "stderr ($n lines): $ERR"; fi
}
# rv PATH: resource_version of an object (via the API)
rv() { api GET "$1"; jq -r .resource_version <<<"$BODY"; }
# all_rvs: every object's key, resource_version and updated_at
all_rvs()
{
    local p
    for p in /v1/clusters /v1/nodepools /v1/models /v1/deployments; do
        list_all "$p" | jq -r '.[] | "\(.owner)/\(.cluster // "-")/\(.id) \(.resource_version) \(.updated_at)"'
    done
}

# yaml_leaves FILE: the scalar leaves of a plain drover YAML file (block
# mappings indented by 2, flow lists, comments) as "doc<TAB>kind<TAB>path<TAB>value".
# Block sequences (a deployment's nodepools) are skipped.
yaml_leaves()
{
    awk '
    function strip(v) {
        sub(/[ \t]+#.*$/, "", v); sub(/[ \t]+$/, "", v); sub(/^[ \t]+/, "", v)
        if (v ~ /^".*"$/ || v ~ /^\047.*\047$/) v = substr(v, 2, length(v) - 2)
        return v
    }
    BEGIN { doc = 1; kind = ""; skipind = "" }
    /^---/ { doc++; kind = ""; delete key; next }
    /^[ \t]*#/ || /^[ \t]*$/ { next }
    {
        match($0, /^ */); ind = RLENGTH; line = substr($0, ind + 1)
        if (line ~ /^- /) { skipind = ind; next }
        if (skipind != "" && ind > skipind) next
        skipind = ""
        if (ind == 0 && match(line, /^[a-z_]+:/)) { kind = substr(line, 1, RLENGTH - 1); next }
        if (!match(line, /^[A-Za-z_][A-Za-z0-9_]*:/)) next
        lvl = ind / 2; k = substr(line, 1, RLENGTH - 1); v = strip(substr(line, RLENGTH + 1))
        key[lvl] = k
        for (j = lvl + 1; j <= 10; j++) delete key[j]
        if (v == "|" || v == ">") { skipind = ind; next }
        if (v == "") next
        p = key[1]
        for (j = 2; j <= lvl; j++) p = p "." key[j]
        printf "%d\t%s\t%s\t%s\n", doc, kind, p, v
    }' "$1"
}
# yaml_objects FILE: one line per document: "doc label api-path"
yaml_objects()
{
    yaml_leaves "$1" | awk -F'\t' '
    { kind[$1] = $2; if ($3 == "id") id[$1] = $4; if ($3 == "cluster") cl[$1] = $4; if ($1 > n) n = $1 }
    END {
        for (d = 1; d <= n; d++) {
            if (!(d in kind)) continue
            if (kind[d] == "nodepool")
                printf "%d nodepool/%s/%s /v1/clusters/%s/nodepools/%s\n", d, cl[d], id[d], cl[d], id[d]
            else
                printf "%d %s/%s /v1/%ss/%s\n", d, kind[d], id[d], kind[d], id[d]
        }
    }'
}
# expect_actions ACTION FILE...: the lines `drover apply` prints for FILEs
expect_actions()
{
    local action=$1 f
    shift
    for f in "$@"; do yaml_objects "$f" | awk -v a="$action" '{print $2 " " a}'; done
}
# check_fields FILE: every leaf the file sets has that value on the server
check_fields()
{
    local f=$1 d label path leaves bad
    while read -r d label path; do
        api GET "$path"
        if [ "$ST" != 200 ]; then
            fail "$(basename "$f"): $label exists"
            why "GET $path: $ST $BODY"
            continue
        fi
        leaves=$(yaml_leaves "$f" | jq -R -s -c --arg d "$d" \
            'split("\n") | map(select(length > 0) | split("\t")) | map(select(.[0] == $d) | [.[2], .[3]])')
        bad=$(jq -r --argjson leaves "$leaves" '
            . as $o | $leaves[] | . as [$p, $v] | ($o | getpath($p | split("."))) as $s
            | (if ($v | startswith("[")) then
                   ($v | ltrimstr("[") | rtrimstr("]") | split(",") | map(sub("^ +"; "") | sub(" +$"; "")) | map(select(length > 0))
                   | map(if test("^[\"\u0027]") then .[1:-1] else . end))
               else $v end) as $want
            | select(if ($want | type) == "array" then (($s // []) | map(tostring)) != $want
                     else ($s | tostring) != $want end)
            | "\($p): server has \($s | tojson), the file says \($v)"' <<<"$BODY")
        if [ -z "$bad" ] && [ "$leaves" != "[]" ]; then
            ok "$(basename "$f"): $label has every field the file sets ($(jq length <<<"$leaves") fields)"
        else
            fail "$(basename "$f"): $label has every field the file sets"
            why "$bad"
        fi
    done < <(yaml_objects "$f")
}

# ---- the examples: apply, check, re-apply, read, delete -------------------------------
FILES=()
for f in local-cluster.yaml nodepools.yaml model.yaml deployment.yaml quickstart.yaml aws-cluster.yaml; do
    [ -f "$EX/$f" ] && FILES+=("$EX/$f")
done
for f in "$EX"/*.yaml; do
    [[ " ${FILES[*]} " == *" $f "* ]] || FILES+=("$f")
done
check "examples/ has YAML files (${#FILES[@]})" [ ${#FILES[@]} -ge 6 ]
N_OBJ=0
for f in "${FILES[@]}"; do
    cli apply -f "$f"
    rc "apply $(basename "$f")" 0
    eq "apply $(basename "$f"): one 'created' line per document, in file order" "$OUT" "$(expect_actions created "$f")"
    N_OBJ=$((N_OBJ + $(yaml_objects "$f" | grep -c '')))
done
for f in "${FILES[@]}"; do check_fields "$f"; done
api GET /v1/clusters/dev/nodepools/cpu
jqc "defaults filled where the file says nothing (nodepools.yaml cpu)" '.capacity_type == "on_demand" and .node_scale_down_delay_seconds == 300 and .description == ""'
api GET /v1/deployments/tiny-llm
jqc "deployment.yaml: placement list as written" '.nodepools == [{"cluster":"dev","nodepool":"l4","priority":10},{"cluster":"dev","nodepool":"a100","priority":0}]'

all_rvs >"$TMP/rv.before"
cli apply "${FILES[@]/#/-f}"
rc "re-apply every example in one run" 0
eq "re-apply: all $N_OBJ objects unchanged" "$OUT" "$(expect_actions unchanged "${FILES[@]}")"
all_rvs >"$TMP/rv.after"
check "re-apply: no resource_version or updated_at moved" cmp -s "$TMP/rv.before" "$TMP/rv.after"
check "re-apply: every object still at resource_version 1" \
    [ "$(awk '{print $2}' "$TMP/rv.after" | sort -u)" == 1 ]
cli -o json apply -f "$EX/quickstart.yaml"
rc "apply -o json" 0
jqc "apply -o json: kind, name, action, object for each document" \
    "length == $(yaml_objects "$EX/quickstart.yaml" | grep -c '') and all(.[]; .action == \"unchanged\" and .object.resource_version == 1 and (.kind | type == \"string\") and (.name | type == \"string\"))" "$OUT"
DROVER_SERVER=$URL DROVER_TOKEN=$TOKEN "$DROVER" apply -f - <"$EX/local-cluster.yaml" >"$TMP/o" 2>&1
eq "apply -f - (stdin)" "$?/$(cat "$TMP/o")" "0/$(expect_actions unchanged "$EX/local-cluster.yaml")"

# every example object: get (table/json/yaml) and describe
while read -r d label path; do
    kind=${label%%/*}
    id=${label#*/}
    cli get "$kind" "$id" -o json
    api GET "$path"
    if [ "$RC" == 0 ] && jqq --argjson a "$BODY" '. == $a' <<<"$OUT"; then
        ok "get $kind $id -o json equals GET $path"
    else
        fail "get $kind $id -o json equals GET $path"
        why "exit $RC" "cli: ${OUT:0:300}" "api: ${BODY:0:300}"
    fi
    cli get "$kind" "$id"
    check "get $kind $id (table) names it" grep -qw -- "${id##*/}" <<<"$OUT"
    cli describe "$kind" "$id"
    check "describe $kind $id" grep -qE "^id: +${id##*/}\$" <<<"$OUT"
done < <(for f in "${FILES[@]}"; do yaml_objects "$f"; done)

# delete them all, last file first (dependents before what they depend on)
for ((i = ${#FILES[@]} - 1; i >= 0; i--)); do
    while read -r d label path; do
        api GET "$path"
        [ "$ST" == 200 ] || continue   # already gone (a file repeated it)
        cli delete "${label%%/*}" "${label#*/}"
        rc "delete $label" 0
        # a job's first delete cancels it (it stays, cancelled); the second removes it
        [ "${label%%/*}" == job ] && cli delete "${label%%/*}" "${label#*/}"
        api GET "$path"
        status "$label is gone" 404
    done < <(yaml_objects "${FILES[$i]}" | tac)
done
for p in /v1/clusters /v1/nodepools /v1/models /v1/deployments; do
    api GET "$p"
    jqc "nothing left in $p" '.items == []'
done

# ---- files of our own: update and re-apply -------------------------------------------------
cat >"$M/app.yaml" <<'EOF'
# an application: a cluster, two nodepools, a model, a deployment
cluster:
  id: app
  provider: local
  region: local
  description: app cluster
---
nodepool:
  id: gpu
  cluster: app
  instance_types: [local-t4, local-l4]
  min_nodes: 0
  max_nodes: 3
  description: T4 or L4
---
nodepool:
  id: cpu
  cluster: app
  instance_types: [local-cpu]
  max_nodes: 2
---
model:
  id: chat
  description: chat model
  runtime:
    command: [serve, --port, "$PORT"]
    env:
      MODEL_NAME: chat
    startup_timeout_seconds: 120
  resources:
    gpu:
      count: 1
      memory_mib: 4096
      compute_percent: 50
  params_b: 1.5
  dtype: fp16
---
deployment:
  id: chat
  model: chat
  description: chat deployment
  nodepools:
    - cluster: app
      nodepool: gpu
      priority: 10
  autoscale:
    min_replicas: 0
    max_replicas: 4
    scale_down_delay_seconds: 600
    ttft_slo_ms: 1500
    e2e_slo_ms: 30000
EOF
# the same with five changes; nodepool cpu as it was
sed -e 's/^  description: app cluster/  description: app cluster, renamed/' \
    -e 's/^  max_nodes: 3/  max_nodes: 5/' \
    -e 's/^      MODEL_NAME: chat/      MODEL_NAME: chat-v2/' \
    -e 's/^    startup_timeout_seconds: 120/    startup_timeout_seconds: 200/' \
    -e 's/^    max_replicas: 4/    max_replicas: 6/' \
    -e 's/^      priority: 10/      priority: 20/' "$M/app.yaml" >"$M/app2.yaml"
eq "app2.yaml differs from app.yaml in six lines" "$(diff "$M/app.yaml" "$M/app2.yaml" | grep -c '^>')" 6

cli apply -f "$M/app.yaml"
rc "apply app.yaml" 0
eq "app.yaml: five objects created" "$OUT" "$(expect_actions created "$M/app.yaml")"
check_fields "$M/app.yaml"
api GET /v1/deployments/chat
jqc "deployment chat: placement, derived scale_to_zero (900), max_scale_up_rate default, ttft_slo_ms, e2e_slo_ms, status" '.nodepools == [{"cluster":"app","nodepool":"gpu","priority":10}] and .autoscale.scale_to_zero_delay_seconds == 900 and .autoscale.max_scale_up_rate == 20 and .autoscale.ttft_slo_ms == 1500 and .autoscale.e2e_slo_ms == 30000 and (.status | type == "object")'
api GET /v1/clusters/app
CREATED_APP=$(jq -r .created_at <<<"$BODY")
cli apply -f "$M/app.yaml"
eq "re-apply app.yaml: unchanged" "$RC/$OUT" "0/$(expect_actions unchanged "$M/app.yaml")"

cli apply -f "$M/app2.yaml"
rc "apply the modified file" 0
eq "only the changed objects are configured" "$OUT" "$(printf '%s\n' 'cluster/app configured' \
    'nodepool/app/gpu configured' 'nodepool/app/cpu unchanged' 'model/chat configured' \
    'deployment/chat configured')"
check_fields "$M/app2.yaml"
api GET /v1/clusters/app
jqc "cluster app: resource_version 2, created_at kept, updated_at not before it" ".resource_version == 2 and .created_at == \"$CREATED_APP\" and .updated_at >= .created_at"
eq "nodepool app/gpu: resource_version 2" "$(rv /v1/clusters/app/nodepools/gpu)" 2
eq "nodepool app/cpu untouched: resource_version 1" "$(rv /v1/clusters/app/nodepools/cpu)" 1
api GET /v1/models/chat
jqc "model chat: nested changes merged, siblings kept, resource_version 2" '.runtime.env == {"MODEL_NAME":"chat-v2"} and .runtime.startup_timeout_seconds == 200 and .runtime.command == ["serve","--port","$PORT"] and .resources.gpu.memory_mib == 4096 and .resource_version == 2'
api GET /v1/deployments/chat
jqc "deployment chat: max_replicas 6, priority 20, resource_version 2" '.autoscale.max_replicas == 6 and .autoscale.scale_down_delay_seconds == 600 and .nodepools[0].priority == 20 and .resource_version == 2'
cli apply -f "$M/app2.yaml"
eq "re-applying the modified file: all unchanged" "$RC/$OUT" "0/$(expect_actions unchanged "$M/app2.yaml")"
eq "re-apply left resource_version at 2" "$(rv /v1/deployments/chat)" 2
# a file that leaves a field out keeps the server's value
printf 'cluster:\n  id: app\n  provider: local\n  region: local\n' >"$M/sparse.yaml"
cli apply -f "$M/sparse.yaml"
eq "a file without description: unchanged" "$RC/$OUT" "0/cluster/app unchanged"
api GET /v1/clusters/app
jqc "description kept" '.description == "app cluster, renamed" and .resource_version == 2'
cli apply -f "$M/app.yaml"
eq "back to app.yaml: the four changed objects configured again" "$(grep -c ' configured$' <<<"$OUT")" 4
eq "resource_version 3" "$(rv /v1/clusters/app)" 3
check_fields "$M/app.yaml"
# an immutable field in a file is refused by the server
sed 's/^  region: local/  region: elsewhere/' "$M/app.yaml" >"$M/region.yaml"
cli apply -f "$M/region.yaml"
rc "apply that changes an immutable field" 1
one_line "immutable field"
contains "immutable field: the message names the file" "$ERR" "region.yaml"
eq "refused apply changed nothing" "$(rv /v1/clusters/app)" 3

# Defaults derived from another field (max_nodes from min_nodes,
# scale_to_zero_delay_seconds from scale_down_delay_seconds) should follow
# that field when the file never set them; today they are frozen at create.
printf 'nodepool:\n  id: derived\n  cluster: app\n  instance_types: [local-cpu]\n  min_nodes: 0\n' >"$M/derived.yaml"
cli apply -f "$M/derived.yaml"
rc "nodepool with min_nodes 0 and no max_nodes" 0
eq "max_nodes defaults to 1" "$(api GET /v1/clusters/app/nodepools/derived; jq .max_nodes <<<"$BODY")" 1
sed -i 's/min_nodes: 0/min_nodes: 2/' "$M/derived.yaml"
cli apply -f "$M/derived.yaml"
check "raising min_nodes in a file that never set max_nodes applies (got exit $RC: $ERR)" [ "$RC" == 0 ]
api DELETE /v1/clusters/app/nodepools/derived
status "remove nodepool app/derived" 200

# ---- get and describe: table, wide, json, yaml, every kind ---------------------------------
declare -A ONE=([clusters]=app [nodepools]=app/gpu [models]=chat [deployments]=chat
    [tokens]=admin [users]=admin [instance-types]=local-t4 [providers]=local)
declare -A APIP=([clusters]=/v1/clusters/app [nodepools]=/v1/clusters/app/nodepools/gpu
    [models]=/v1/models/chat [deployments]=/v1/deployments/chat
    [tokens]=/v1/tokens/admin [users]=/v1/users/admin
    [instance-types]=/v1/instance-types/local-t4 [providers]=/v1/providers/local)
declare -A APIL=([clusters]=/v1/clusters [nodepools]=/v1/nodepools [models]=/v1/models
    [deployments]=/v1/deployments [tokens]=/v1/tokens [users]=/v1/users
    [instance-types]=/v1/instance-types [providers]=/v1/providers)
for k in clusters nodepools models deployments tokens users instance-types providers; do
    id=${ONE[$k]}
    cli get "$k"
    rc "get $k" 0
    check "get $k: a header line then rows" [ "$(grep -c '' <<<"$OUT")" -ge 2 ]
    check "get $k: the header is upper case" grep -qE '^[A-Z][A-Z/ -]+' <<<"$(head -1 <<<"$OUT")"
    check "get $k: lists ${id#*/}" grep -qw -- "${id#*/}" <<<"$OUT"
    cli get "$k" -o wide
    rc "get $k -o wide" 0
    # a status the head keeps current (a cluster's node count, while a
    # nodepool's node comes or goes) may change between the two reads: the
    # pair is read again, up to 3 times, before they must agree
    for try in 1 2 3; do
        cli get "$k" -o json
        list_all "${APIL[$k]}" >"$TMP/api.json"
        jqq --slurpfile a "$TMP/api.json" '. == $a[0]' <<<"$OUT" && break
    done
    rc "get $k -o json" 0
    if jqq --slurpfile a "$TMP/api.json" '. == $a[0]' <<<"$OUT"; then
        ok "get $k -o json equals the API's list"
    else
        fail "get $k -o json equals the API's list"
        why "cli: ${OUT:0:300}" "api: $(head -c 300 "$TMP/api.json")"
    fi
    n_json=$(jq length <<<"$OUT")
    cli get "$k" -o yaml
    rc "get $k -o yaml" 0
    eq "get $k -o yaml: one '- ' item per object" "$(grep -c '^- ' <<<"$OUT")" "$n_json"
    # the controller may update an object's status between the two reads
    # (a cluster's, say): read the pair again, a few times, before failing
    for try in 1 2 3; do
        cli get "$k" "$id" -o json
        api GET "${APIP[$k]}"
        jqq --argjson a "$BODY" '. == $a' <<<"$OUT" && break
        sleep 0.2
    done
    rc "get $k $id -o json" 0
    if jqq --argjson a "$BODY" '. == $a' <<<"$OUT"; then
        ok "get $k $id -o json equals GET ${APIP[$k]}"
    else
        fail "get $k $id -o json equals GET ${APIP[$k]}"
        why "cli: ${OUT:0:300}" "api: ${BODY:0:300}"
    fi
    keys_json=$(jq -r 'keys_unsorted[]' <<<"$OUT" | sort | tr '\n' ' ')
    cli get "$k" "$id" -o yaml
    rc "get $k $id -o yaml" 0
    keys_yaml=$(grep -oE '^[a-z_]+:' <<<"$OUT" | tr -d : | sort | tr '\n' ' ')
    eq "get $k $id -o yaml: same top-level keys as JSON" "$keys_yaml" "$keys_json"
    cli get "$k" "$id"
    rc "get $k $id (table)" 0
    check "get $k $id (table) names it" grep -qw -- "${id#*/}" <<<"$OUT"
    cli describe "${k%s}" "$id"
    rc "describe ${k%s} $id" 0
    check "describe ${k%s} $id: key/value lines with its id" grep -qE "^id: +${id#*/}\$" <<<"$OUT"
    described=$OUT
    # KIND/ID is the same as KIND ID, everywhere
    for try in 1 2 3; do
        cli get "${k%s}/$id" -o json
        api GET "${APIP[$k]}"
        jqq --argjson a "$BODY" '. == $a' <<<"$OUT" && break
        sleep 0.2
    done
    rc "get ${k%s}/$id -o json" 0
    if jqq --argjson a "$BODY" '. == $a' <<<"$OUT"; then
        ok "get ${k%s}/$id -o json equals GET ${APIP[$k]}"
    else
        fail "get ${k%s}/$id -o json equals GET ${APIP[$k]}"; why "cli: ${OUT:0:300}"
    fi
    # both forms once more, in turn, when the controller updated the
    # object's status (a cluster's node count, say) between the two reads
    shown() { grep -v '^  [a-z]' <<<"$1" | grep -vE 'AGE|ago|^Events' | head -20; }
    for try in 1 2 3; do
        cli describe "${k%s}/$id"
        [ "$(shown "$OUT")" == "$(shown "$described")" ] && break
        sleep 0.2
        cli describe "${k%s}" "$id"
        described=$OUT
    done
    rc "describe ${k%s}/$id" 0
    eq "describe ${k%s}/$id: the same as describe ${k%s} $id" "$(shown "$OUT")" "$(shown "$described")"
done
cli get clusters/app deployments/chat
rc "get KIND/ID of two kinds" 2
cli get cluster/app cluster/app -o json
jqc "get cluster/app cluster/app: two objects" 'length == 2 and .[0].id == "app"' "$OUT"
cli events deployment chat -o json
rc "events deployment chat (KIND ID)" 0
EV1=$OUT
cli events deployment/chat -o json
eq "events deployment chat = events deployment/chat" "$OUT" "$EV1"
cli events nodepool app/gpu -o json
rc "events nodepool app/gpu" 0
cli describe deployment chat
contains "describe deployment shows nested autoscale" "$OUT" "scale_to_zero_delay_seconds"
check "describe deployment shows autoscale.ttft_slo_ms" grep -qE '^ +ttft_slo_ms: +1500$' <<<"$OUT"
contains "describe deployment shows status" "$OUT" "ready_replicas"
# ttft_slo_ms: status.autoscaler, the SLO model of the last decision (no traffic: not ready)
check "describe deployment shows status.autoscaler" grep -qE '^ +autoscaler:$' <<<"$OUT"
check "status.autoscaler: not ready, lambda 0 (no request yet)" grep -qE '^ +lambda: +0(\.0)?$' <<<"$OUT"
check "status.autoscaler: dispersion 1 (Poisson's until arrivals are seen)" grep -qE '^ +dispersion: +1(\.0)?$' <<<"$OUT"
cli get nodepools --cluster app
rc "get nodepools --cluster app" 0
check "get nodepools --cluster app: only app's (2 rows)" [ "$(tail -n +2 <<<"$OUT" | grep -c .)" == 2 ]
cli get nodepool gpu --cluster app -o json
jqc "get nodepool gpu --cluster app" '.id == "gpu" and .cluster == "app"' "$OUT"
cli get cluster nope
rc "get a missing cluster" 1
one_line "get a missing cluster"
contains "get a missing cluster: says not found" "$ERR" "not found"

# ---- delete and its 409 rules -------------------------------------------------------------
printf 'cluster:\n  id: tmp\n  provider: local\n  region: local\n---\nnodepool:\n  id: a\n  cluster: tmp\n  instance_types: [local-t4]\n---\nnodepool:\n  id: b\n  cluster: tmp\n  instance_types: [local-cpu]\n' >"$M/tmp.yaml"
cli apply -f "$M/tmp.yaml"
rc "apply a cluster with two nodepools" 0
cli delete cluster tmp
rc "delete a cluster that has nodepools" 1
one_line "delete cluster with nodepools"
contains "the refusal mentions the nodepools" "$ERR" "nodepool"
contains "the CLI's refusal says --cascade" "$ERR" "delete them first or use --cascade"
check "... not the API's ?cascade=true" bash -c "! grep -qF '?cascade' <<<\"\$1\"" - "$ERR"
cli delete cluster/tmp
rc "delete cluster/tmp (KIND/ID) is refused the same way" 1
contains "delete cluster/tmp: says --cascade" "$ERR" "--cascade"
api DELETE /v1/clusters/tmp
status "API: DELETE a cluster with nodepools" 409
error_shape "API: cluster with nodepools"
contains "the API's refusal says ?cascade=true" "$(jq -r .error.message <<<"$BODY")" "use ?cascade=true"
api GET /v1/clusters/tmp/nodepools
jqc "refused delete kept both nodepools" '[.items[].id] == ["a","b"]'
cli delete cluster/tmp --cascade
rc "delete cluster/tmp --cascade" 0
eq "delete cluster/tmp --cascade: says what it deleted" "$OUT" "cluster/tmp deleted"
api GET /v1/clusters/tmp
status "cascaded cluster is gone" 404
api GET /v1/nodepools
jqc "its nodepools are gone too" '[.items[] | select(.cluster == "tmp")] | length == 0'

cli delete model chat
rc "delete a model that has a deployment" 1
one_line "delete model with deployment"
eq "the CLI's refusal says --cascade" "$ERR" "error: model 'chat' is used by deployment 'chat'; delete it first or use --cascade"
api DELETE /v1/models/chat
status "API: DELETE a model with a deployment" 409
contains "the API's refusal says ?cascade=true" "$(jq -r .error.message <<<"$BODY")" "use ?cascade=true"
error_shape "API: model with deployment"
cli delete cluster app --cascade
rc "delete --cascade a cluster whose nodepool a deployment uses" 1
contains "the refusal names the deployment" "$ERR" "chat"
api GET /v1/clusters/app/nodepools
jqc "nothing of app was deleted by the refused cascade" '(.items | length) == 2'
cli delete nodepool app/gpu
rc "delete a nodepool a deployment uses" 1
cli delete model chat --cascade
rc "delete model --cascade" 0
api GET /v1/deployments/chat
status "the model's deployment went with it" 404
api GET /v1/models/chat
status "the model is gone" 404
cli delete nodepool/app/cpu
rc "delete nodepool/app/cpu" 0
eq "delete nodepool/app/cpu: says what it deleted" "$OUT" "nodepool/app/cpu deleted"
cli delete nodepool gpu --cluster app
rc "delete nodepool gpu --cluster app" 0
api GET /v1/clusters/app/nodepools
jqc "app has no nodepools left" '.items == []'
cli delete cluster app
rc "delete cluster app (no nodepools now)" 0
cli delete cluster app
rc "delete it again" 1
one_line "delete a missing cluster"
cli apply -f "$M/app.yaml"
eq "apply after delete: created again" "$OUT" "$(expect_actions created "$M/app.yaml")"
eq "recreated cluster starts at resource_version 1" "$(rv /v1/clusters/app)" 1

# ---- conditional PATCH (If-Match) ------------------------------------------------------------
api GET /v1/clusters/app
eq "GET sends the resource_version as ETag" "$(header ETag)" '"1"'
api PATCH /v1/clusters/app -H "If-Match: 1" -d '{"description":"v2"}'
status "PATCH with a matching If-Match" 200
jqc "PATCH bumped resource_version to 2" '.resource_version == 2 and .description == "v2"'
eq "PATCH answer's ETag" "$(header ETag)" '"2"'
api PATCH /v1/clusters/app -H "If-Match: 1" -d '{"description":"stale"}'
status "PATCH with a stale If-Match" 409
error_shape "stale If-Match"
api GET /v1/clusters/app
jqc "stale PATCH changed nothing" '.resource_version == 2 and .description == "v2"'
api PATCH /v1/clusters/app -H 'If-Match: "2"' -d '{"description":"v3"}'
status "PATCH with the quoted ETag as If-Match" 200
api PATCH /v1/clusters/app -H 'If-Match: W/"3"' -d '{"description":"v4"}'
status "PATCH with a weak ETag as If-Match" 200
api PATCH /v1/clusters/app -d '{"description":"v4"}'
status "PATCH that changes nothing" 200
jqc "no-op PATCH keeps resource_version 4" '.resource_version == 4'
api PATCH /v1/clusters/app -H 'If-Match: 4' -d '{"description":"v4"}'
status "no-op PATCH with a matching If-Match" 200
api PATCH /v1/clusters/app -d '{"description":null}'
status "PATCH null restores the default" 200
jqc "description back to \"\", resource_version 5" '.description == "" and .resource_version == 5'
api PATCH /v1/clusters/app/nodepools/gpu -H 'If-Match: 1' -d '{"max_nodes":4,"min_nodes":0}'
status "nodepool PATCH with If-Match" 200
jqc "nodepool patched" '.max_nodes == 4 and .resource_version == 2'
api PATCH /v1/clusters/app/nodepools/gpu -H 'If-Match: 1' -d '{"max_nodes":9}'
status "nodepool PATCH with a stale If-Match" 409
api PATCH /v1/models/chat -H 'If-Match: 1' -d '{"resources":{"gpu":{"compute_percent":30}}}'
status "model PATCH with If-Match" 200
jqc "model merge patch keeps sibling fields" '.resources.gpu.compute_percent == 30 and .resources.gpu.memory_mib == 4096 and .resources.gpu.count == 1'
api PATCH /v1/models/chat -H 'If-Match: 1' -d '{"description":"x"}'
status "model PATCH with a stale If-Match" 409
api PATCH /v1/deployments/chat -H 'If-Match: 1' -d '{"autoscale":{"max_replicas":2}}'
status "deployment PATCH with If-Match" 200
jqc "deployment max_replicas 2, min kept" '.autoscale.min_replicas == 0 and .autoscale.max_replicas == 2'
api DELETE /v1/deployments/chat -H 'If-Match: 1'
status "DELETE with a stale If-Match" 409
api DELETE /v1/deployments/chat -H 'If-Match: 2'
status "DELETE with a matching If-Match" 200
jqc "DELETE answers the deleted object" '.id == "chat" and .resource_version == 2'

# ---- pagination -------------------------------------------------------------------------------
for i in $(seq -w 0 24); do
    api POST /v1/clusters -d "{\"id\":\"page-$i\",\"provider\":\"local\",\"region\":\"local\"}"
    [ "$ST" == 201 ] || fail "create page-$i: $ST $BODY"
done
api GET /v1/clusters
TOTAL=$(jq '.items | length' <<<"$BODY")
eq "25 clusters made (plus app)" "$TOTAL" 26
walk()   # walk PATH LIMIT: ids into $TMP/walk, page count into $TMP/walk.pages
{
    local path=$1 limit=$2 tok="" pages=0 n
    : >"$TMP/walk"
    while :; do
        if [ -n "$tok" ]; then
            api GET "$path?limit=$limit&page_token=$(_uri "$tok"; echo "$_URI")"
        else
            api GET "$path?limit=$limit"
        fi
        [ "$ST" == 200 ] || { echo "page: $ST $BODY" >&2; return 1; }
        n=$(jq '.items | length' <<<"$BODY")
        [ "$n" -le "$limit" ] || { echo "page of $n > $limit" >&2; return 1; }
        jq -r '.items[].id' <<<"$BODY" >>"$TMP/walk"
        pages=$((pages + 1))
        tok=$(jq -r '.next_page_token // empty' <<<"$BODY")
        [ -n "$tok" ] || break
        [ "$n" == "$limit" ] || { echo "short page with a next_page_token" >&2; return 1; }
    done
    echo "$pages" >"$TMP/walk.pages"
}
for limit in 1 7 13 26 1000; do
    check "walk /v1/clusters with limit=$limit" walk /v1/clusters "$limit"
    eq "limit=$limit: every cluster seen exactly once" \
        "$(sort "$TMP/walk" | uniq -d | wc -l)/$(wc -l <"$TMP/walk")" "0/$TOTAL"
    eq "limit=$limit: ids in order" "$(cat "$TMP/walk")" "$(sort "$TMP/walk")"
    eq "limit=$limit: $(((TOTAL + limit - 1) / limit)) page(s)" "$(cat "$TMP/walk.pages")" "$(((TOTAL + limit - 1) / limit))"
done
check "the 25 page-NN clusters are all in the walk" [ "$(grep -c '^page-' "$TMP/walk")" == 25 ]
api GET "/v1/clusters?limit=$TOTAL"
jqc "a page holding exactly the rest has no next_page_token" 'has("next_page_token") | not'
api GET "/v1/clusters?limit=10"
tok=$(jq -r .next_page_token <<<"$BODY")
api GET "/v1/clusters?limit=3&page_token=$(_uri "$tok"; echo "$_URI")"
jqc "a page token works with another limit" '(.items | length) == 3 and .items[0].id == "page-09"'
for i in $(seq -w 0 24); do
    api POST /v1/tokens -d "{\"id\":\"pt-$i\",\"scopes\":[\"read\"]}"
done
api GET /v1/tokens
NT=$(jq '.items | length' <<<"$BODY")
check "walk /v1/tokens with limit=4" walk /v1/tokens 4
eq "tokens: all $NT seen exactly once" "$(sort -u "$TMP/walk" | wc -l)/$(wc -l <"$TMP/walk")" "$NT/$NT"
for i in $(seq -w 0 11); do
    api POST /v1/clusters/page-00/nodepools -d "{\"id\":\"np-$i\",\"instance_types\":[\"local-cpu\"]}"
done
check "walk /v1/clusters/page-00/nodepools with limit=5" walk /v1/clusters/page-00/nodepools 5
eq "nested nodepools: 12 seen once each, 3 pages" "$(sort -u "$TMP/walk" | wc -l)/$(cat "$TMP/walk.pages")" "12/3"
cli get clusters -o json
eq "drover get clusters -o json has them all" "$(jq length <<<"$OUT")" "$TOTAL"

# ---- catalog commands ---------------------------------------------------------------------------
cli instance-types
rc "drover instance-types" 0
check "instance-types lists local-t4" grep -qw 'local-t4' <<<"$OUT"
check "instance-types lists g5.xlarge" grep -qw 'g5.xlarge' <<<"$OUT"
cli instance-types --provider local -o json
rc "instance-types --provider local -o json" 0
api GET "/v1/instance-types?provider=local"
eq "instance-types --provider local: same set as the API" "$(jq -c '[.[].id] | sort' <<<"$OUT")" "$(jq -c '[.items[].id] | sort' <<<"$BODY")"
jqc "instance-types --provider local: all local" 'length > 0 and all(.[]; .provider == "local")' "$OUT"
cli instance-types --gpu-type h100 -o json
jqc "instance-types --gpu-type h100 (any case): all H100" 'length > 0 and all(.[]; .gpu_type == "H100")' "$OUT"
cli instance-types --max-price 1 --min-gpu-memory 20000 -o json
jqc "instance-types --max-price 1 --min-gpu-memory 20000" 'length > 0 and all(.[]; .price_per_hour <= 1 and .gpu_memory_mib >= 20000)' "$OUT"
cli instance-types --max-price abc
rc "instance-types --max-price abc" 2

cli recommend --params-b 0.6
rc "recommend --params-b 0.6" 0
check "recommend 0.6: names a T4, L4 or A10G instance type" grep -qE '[[:space:]](T4|L4|A10G)[[:space:]]' <<<"$OUT"
cli recommend --params-b 0.6 -o json
jqc "recommend 0.6 -o json: options include a T4, L4 or A10G type" '[.options[].gpu_type] | any(. == "T4" or . == "L4" or . == "A10G")' "$OUT"
cli recommend --params-b 70
rc "recommend --params-b 70" 0
contains "recommend 70: tensor_parallel" "$OUT" "tensor_parallel"
cli recommend --params-b 70 -o json
jqc "recommend 70 -o json: every option spans several GPUs, tensor_parallel" '(.options | length > 0) and all(.options[]; .gpus_used >= 2 and .fit == "tensor_parallel")' "$OUT"
cli recommend
rc "recommend without --params-b" 2
cli recommend --params-b -3
rc "recommend --params-b -3" 2

# ---- exit codes and messages ---------------------------------------------------------------------
printf 'cluster:\n  id: x\n  provider: local\n   region: [local\n' >"$M/bad.yaml"
cli apply -f "$M/bad.yaml"
rc "malformed YAML" 1
one_line "malformed YAML"
check "malformed YAML: the message names file:line:col" grep -qE 'bad\.yaml:[0-9]+:[0-9]+' <<<"$ERR"
printf 'cluster:\n  id: good1\n  provider: local\n  region: local\n' >"$M/good.yaml"
cli apply -f "$M/good.yaml" -f "$M/bad.yaml"
rc "a good file then a malformed one" 1
api GET /v1/clusters/good1
status "nothing applied when a later file is malformed" 404
printf 'cluster:\n  id: x\n  provider: local\n  region: local\n  colour: red\n' >"$M/unknown.yaml"
cli apply -f "$M/unknown.yaml"
rc "unknown field in YAML (server refuses)" 1
one_line "unknown field"
contains "unknown field: named" "$ERR" "colour"
check "unknown field far from any: no guess" bash -c "! grep -q 'did you mean' <<<\"\$1\"" - "$ERR"
printf 'cluster:\n  id: x\n  provider: local\n  regon: local\n' >"$M/near.yaml"
cli apply -f "$M/near.yaml"
rc "a misspelt field in YAML" 1
contains "misspelt field: did you mean" "$ERR" "unknown field 'regon' (did you mean 'region'?)"
printf 'widget:\n  id: x\n' >"$M/kind.yaml"
cli apply -f "$M/kind.yaml"
rc "unknown kind in YAML" 1
one_line "unknown kind"
printf 'deploymnt:\n  id: x\n' >"$M/kind2.yaml"
cli apply -f "$M/kind2.yaml"
rc "misspelt kind in YAML" 1
contains "misspelt kind: did you mean" "$ERR" 'unknown kind "deploymnt" (did you mean deployment?'
cli apply -f "$M/no-such-file.yaml"
rc "apply a missing file" 1
one_line "missing file"
printf 'nodepool:\n  id: x\n  cluster: page-01\n  instance_types: [local-t4]\n  min_nodes: 5\n  max_nodes: 2\n' >"$M/minmax.yaml"
cli apply -f "$M/minmax.yaml"
rc "min_nodes > max_nodes" 1
one_line "min > max"
contains "min > max: names max_nodes" "$ERR" "max_nodes"
cli apply
rc "apply without -f" 2
cli get
rc "get without a kind" 2
cli get widgets
rc "get an unknown kind" 2
cli get deploymnets
rc "get a misspelt kind" 2
contains "misspelt kind: did you mean" "$ERR" 'unknown kind "deploymnets" (did you mean deployments?'
cli frobnicate
rc "unknown command" 2
cli gte clusters
contains "misspelt command: did you mean" "$ERR" 'unknown command "gte" (did you mean get?)'
cli get clusters --frob
rc "unknown flag" 2
cli get nodes --clustr x
contains "misspelt flag: did you mean" "$ERR" 'unknown flag --clustr (did you mean --cluster?)'
cli -o xml get clusters
rc "unknown output format" 2
cli delete cluster
rc "delete without an id" 2
contains "delete without an id: says so" "$ERR" "missing ID"
cli delete
rc "delete without a kind" 2
cli get cluster/x model/y
rc "KIND/ID of two kinds at once" 2
contains "two kinds: says one at a time" "$ERR" "one kind at a time"
cli get cluster/x y
rc "KIND/ID then a bare ID" 2
cli get widget/x
rc "KIND/ID of an unknown kind" 2
cli get cluster/
rc "KIND/ with no ID" 2
cli logs model/x
rc "logs of a model" 2
cli events token/admin
rc "events of a token" 2
for form in "nope" "node/nope" "node nope"; do
    cli cordon $form
    rc "cordon $form: reaches the API (no such node)" 1
    contains "cordon $form: the API's not found, of node nope" "$ERR" "node 'nope' not found"
done
cli drain cluster/nope
rc "drain cluster/nope: not a node" 2
cli --help
rc "drover --help" 0
cli get --help
rc "drover get --help" 0
TOKEN="drv_$(printf '0%.0s' {1..64})" cli get clusters
rc "an unknown token" 1
one_line "unknown token"
URL_SAVED=$URL
URL=http://127.0.0.1:1
cli get clusters
rc "no droverd at the URL" 1
one_line "no droverd"
URL=$URL_SAVED

droverd_finish "crud"
t_done
