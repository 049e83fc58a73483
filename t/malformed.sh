#!/usr/bin/env bash
# malformed.sh — a corpus of malformed, invalid and impossible requests.
# Every one must answer its 4xx with {"error":{"code","message"[,"field"]}}
# (the field checked where the case names one), and the store must be
# exactly as before the corpus: every list endpoint and every row of the
# objects table are compared before and after.
. "$(dirname "$0")/lib/common.bash"

droverd_start "$TMP/d" || exit 1

# ---- fixtures (made before the snapshot) ------------------------------------------
fixture()
{
    api POST "$1" -d "$2"
    if [ "$ST" != 201 ]; then
        echo "fixture $1 $2: $ST $BODY" >&2
        exit 1
    fi
}
fixture /v1/clusters '{"id":"c1","provider":"local","region":"local"}'
fixture /v1/clusters '{"id":"aws1","provider":"aws","region":"eu-west-1"}'
fixture /v1/clusters/c1/nodepools '{"id":"np1","instance_types":["local-t4"],"max_nodes":2}'
fixture /v1/clusters/c1/nodepools '{"id":"npcpu","instance_types":["local-cpu"]}'
fixture /v1/models '{"id":"m1","runtime":{"command":["demo-model","--port","$PORT"]},"resources":{"gpu":{"count":1,"memory_mib":8000,"compute_percent":50}}}'
fixture /v1/models '{"id":"mbig","runtime":{"command":["big"]},"resources":{"gpu":{"count":1,"memory_mib":80000}}}'
fixture /v1/models '{"id":"mcpu","runtime":{"command":["cpu"]}}'
# min_replicas 0 and min_nodes 0: the controller has nothing to start, so
# the store stays still while the corpus runs
fixture /v1/deployments '{"id":"d1","model":"m1","nodepools":[{"cluster":"c1","nodepool":"np1"}],"autoscale":{"min_replicas":0,"max_replicas":2}}'
api POST /v1/users -d '{"id":"alice"}'
[ "$ST" == 201 ] || exit 1
api POST /v1/tokens -d '{"id":"ci","scopes":["read"]}'
[ "$ST" == 201 ] || exit 1

# ---- snapshot ------------------------------------------------------------------------
LISTS="/v1/clusters?all_users=true /v1/nodepools?all_users=true /v1/models?all_users=true
/v1/deployments?all_users=true /v1/tokens?all_users=true /v1/users
/v1/clusters/c1/nodepools /v1/clusters/aws1/nodepools"
# one document per call into snap.json (a line naming the call and its
# status, then the body), pretty-printed and key-sorted by one jq at the end
# (jq costs ~25 ms of CPU a start: one per call made this test CPU-bound)
snapshot()
{
    local p sep etag
    : >"$TMP/snap.json"
    for p in $LISTS; do
        [[ "$p" == *\?* ]] && sep="&" || sep="?"
        api GET "$p${sep}limit=1000"
        printf '{"list":"%s","status":"%s"}\n%s\n' "$p" "$ST" "$BODY" >>"$TMP/snap.json"
    done
    for p in /v1/clusters/c1 /v1/clusters/c1/nodepools/np1 /v1/models/m1 /v1/deployments/d1 \
        /v1/tokens/ci /v1/users/alice; do
        api GET "$p"
        etag=$(header ETag)
        etag=${etag//\\/\\\\}
        printf '{"get":"%s","status":"%s","etag":"%s"}\n%s\n' "$p" "$ST" "${etag//\"/\\\"}" "$BODY" >>"$TMP/snap.json"
    done
    jq -S . "$TMP/snap.json" || echo "(snapshot: not JSON)"
    echo "== store (but the audit log, which records refused writes too: t/audit.sh)"
    if store_is_pg; then
        store_sql "$DDIR" "select kind, key, body from objects where body is not null and kind <> 'audit' order by 1, 2"
    else
        store_sql "$DDIR" "select kind, key, body from objects where kind <> 'audit' order by 1, 2"
    fi
}
# settled: two snapshots in a row agree
for ((i = 0; i < 50; i++)); do
    snapshot >"$TMP/before"
    snapshot >"$TMP/before2"
    cmp -s "$TMP/before" "$TMP/before2" && break
    sleep 0.2
done
check "the store is settled before the corpus" cmp -s "$TMP/before" "$TMP/before2"
check "snapshot before the corpus has the fixtures" grep -q '"id": "d1"' "$TMP/before"

# ---- generated bodies ------------------------------------------------------------------
F=$TMP/bodies
mkdir -p "$F"
big=$(head -c 1100000 /dev/zero | tr '\0' a)
printf '{"id":"big","provider":"local","region":"local","description":"%s"}' "$big" >"$F/big"
printf '{"id":"big2","provider":"local","region":"local","description":"%s"}' \
    "$(head -c 1048600 /dev/zero | tr '\0' b)" >"$F/just-over"
printf '{"id":"nul","provider":"local",\0"region":"local"}' >"$F/nul"
printf '{"id":"nul2","provider":"local","region":"local","description":"a\0b"}' >"$F/nul-in-string"
printf '\0' >"$F/only-nul"
printf '{"id":"utf","provider":"local","region":"local","description":"a\xff\xfeb"}' >"$F/bad-utf8"
printf '{"id":"bom","provider":"local","region":"local"}' | sed 's/^/\xef\xbb\xbf/' >"$F/bom"
printf '%.0s[' {1..5000} >"$F/deep"
printf '{"id":"deep","provider":"local","region":"local","description":%s}' \
    "$(printf '%.0s{"a":' {1..3000})1$(printf '%.0s}' {1..3000})" >"$F/deep-obj"
long=$(printf 'a%.0s' {1..64})

# ---- the corpus ---------------------------------------------------------------------------
# mc STATUS FIELD METHOD PATH BODY [curl args...]
#   FIELD: the error's expected "field" ("-": not checked)
#   BODY:  "-" none, "@name" a file from $F, else the literal text
N_CASES=0
N_FIELD=0
mc()
{
    local want=$1 field=$2 method=$3 path=$4 body=$5
    shift 5
    local data=()
    case $body in
    -) ;;
    @*) data=(--data-binary "@$F/${body#@}") ;;
    *) data=(--data-binary "$body") ;;
    esac
    N_CASES=$((N_CASES + 1))
    local label="#$N_CASES $method $path ${body:0:60}"
    api "$method" "$path" "${data[@]}" "$@"
    if [ "$ST" != "$want" ]; then
        fail "$label -> $want"
        why "got $ST: $BODY"
        return
    fi
    # the error shape for this status (one jq coprocess for the corpus: common.bash)
    if ! error_body_field; then
        fail "$label -> $want with an error body"
        why "$BODY"
        return
    fi
    if [ "$field" != "-" ]; then
        N_FIELD=$((N_FIELD + 1))
        local got=$ERR_FIELD
        if [ "$got" != "$field" ]; then
            fail "$label -> $want, field $field"
            why "got field '$got': $BODY"
            return
        fi
        ok "$label -> $want ($field)"
    else
        ok "$label -> $want"
    fi
}

CL='"provider":"local","region":"local"'
RT='"runtime":{"command":["x"]}'
NPS='"nodepools":[{"cluster":"c1","nodepool":"np1"}]'

echo "# malformed and truncated JSON, non-objects"
mc 400 - POST /v1/clusters '{'
mc 400 - POST /v1/clusters '{"id":"x",'
mc 400 - POST /v1/clusters '{"id":"x","provider":"local","region":"loc'
mc 400 - POST /v1/clusters '{"id":"x" "provider":"local"}'
mc 400 - POST /v1/clusters "{'id':'x'}"
mc 400 - POST /v1/clusters '{"id":"x",'"$CL"',}'
mc 400 - POST /v1/clusters '{id:"x"}'
mc 400 - POST /v1/clusters '{"id":"x",'"$CL"'}{"id":"y"}'
mc 400 - POST /v1/clusters '{"id":"x",'"$CL"'} trailing'
mc 400 - POST /v1/clusters '{"id":"x","provider":"local","region":NaN}'
mc 400 - POST /v1/clusters '{"id":"x","provider":"local","region":"local","description":"\q"}'
mc 400 - POST /v1/clusters -
mc 400 - POST /v1/clusters ' '
mc 400 - POST /v1/clusters 'null'
mc 400 - POST /v1/clusters '[]'
mc 400 - POST /v1/clusters '[{"id":"x",'"$CL"'}]'
mc 400 - POST /v1/clusters '"c1"'
mc 400 - POST /v1/clusters '42'
mc 400 - POST /v1/clusters 'true'
mc 400 - PATCH /v1/clusters/c1 '[]'
mc 400 - PATCH /v1/clusters/c1 'null'
mc 400 - PATCH /v1/clusters/c1 -
mc 400 - POST /v1/models @deep
mc 400 - POST /v1/clusters @deep-obj
mc 400 - POST /v1/clusters @bad-utf8
mc 400 - POST /v1/clusters @bom
mc 400 - POST /v1/clusters '{"id":"x",'"$CL"',"description":"\u0000"}'

echo "# duplicate keys, NUL bytes"
mc 400 - POST /v1/clusters '{"id":"c9","id":"c10",'"$CL"'}'
mc 400 - POST /v1/clusters '{"id":"c9",'"$CL"',"region":"local"}'
mc 400 - PATCH /v1/clusters/c1 '{"description":"a","description":"b"}'
mc 400 - POST /v1/models '{"id":"m9","runtime":{"command":["x"],"command":["y"]}}'
mc 400 - POST /v1/clusters @nul
mc 400 - POST /v1/clusters @nul-in-string
mc 400 - PATCH /v1/clusters/c1 @only-nul

echo "# wrong types"
mc 400 id POST /v1/clusters '{"id":5,'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":null,'"$CL"'}'
mc 400 provider POST /v1/clusters '{"id":"x","provider":123,"region":"local"}'
mc 400 region POST /v1/clusters '{"id":"x","provider":"local","region":true}'
mc 400 description POST /v1/clusters '{"id":"x",'"$CL"',"description":["a"]}'
mc 400 description POST /v1/clusters '{"id":"x",'"$CL"',"description":{"a":1}}'
mc 400 description PATCH /v1/clusters/c1 '{"description":5}'
mc 400 instance_types POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":"local-t4"}'
mc 400 'instance_types[0]' POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":[1]}'
mc 400 'instance_types[1]' POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4",""]}'
mc 400 min_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"min_nodes":"1"}'
mc 400 max_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"max_nodes":true}'
mc 400 max_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"max_nodes":[2]}'
mc 400 capacity_type POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"capacity_type":"reserved"}'
mc 400 capacity_type POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"capacity_type":1}'
mc 400 runtime POST /v1/models '{"id":"x","runtime":"python serve.py"}'
mc 400 runtime.command POST /v1/models '{"id":"x","runtime":{"command":"python serve.py"}}'
mc 400 'runtime.command[1]' POST /v1/models '{"id":"x","runtime":{"command":["python",7]}}'
mc 400 runtime.env POST /v1/models '{"id":"x","runtime":{"command":["x"],"env":["A=1"]}}'
mc 400 runtime.env.A POST /v1/models '{"id":"x","runtime":{"command":["x"],"env":{"A":1}}}'
mc 400 runtime.health_path POST /v1/models '{"id":"x","runtime":{"command":["x"],"health_path":false}}'
mc 400 resources POST /v1/models '{"id":"x",'"$RT"',"resources":[]}'
mc 400 resources.gpu.count POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"count":"1"}}}'
mc 400 resources.gpu.types POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"count":1,"types":"T4"}}}'
mc 400 params_b POST /v1/models '{"id":"x",'"$RT"',"params_b":"7"}'
mc 400 dtype POST /v1/models '{"id":"x",'"$RT"',"dtype":"fp64"}'
mc 400 artifact POST /v1/models '{"id":"x",'"$RT"',"artifact":"s3://w"}'
mc 400 model POST /v1/deployments '{"id":"x","model":["m1"],'"$NPS"'}'
mc 400 nodepools POST /v1/deployments '{"id":"x","model":"m1","nodepools":{"cluster":"c1","nodepool":"np1"}}'
mc 400 'nodepools[0]' POST /v1/deployments '{"id":"x","model":"m1","nodepools":["c1/np1"]}'
mc 400 'nodepools[0].priority' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"c1","nodepool":"np1","priority":"high"}]}'
mc 400 disable_packing POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"disable_packing":"yes"}'
mc 400 enabled POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"enabled":1}'
mc 400 enabled PATCH /v1/deployments/d1 '{"enabled":"false"}'
mc 400 autoscale PATCH /v1/deployments/d1 '{"autoscale":5}'
mc 400 role POST /v1/users '{"id":"x","role":"root"}'
mc 400 role POST /v1/users '{"id":"x","role":["admin"]}'
mc 400 scopes POST /v1/tokens '{"scopes":"all"}'
mc 400 'scopes[0]' POST /v1/tokens '{"scopes":["write"]}'
mc 400 description POST /v1/tokens '{"description":{}}'

echo "# unknown fields"
mc 400 colour POST /v1/clusters '{"id":"x",'"$CL"',"colour":"red"}'
mc 400 Provider POST /v1/clusters '{"id":"x","Provider":"local","provider":"local","region":"local"}'
mc 400 runtime.entrypoint POST /v1/models '{"id":"x","runtime":{"command":["x"],"entrypoint":"y"}}'
mc 400 resources.gpu.vram POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"count":1,"vram":1}}}'
mc 400 autoscale.min POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"min":1}}'
mc 400 'nodepools[0].weight' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"c1","nodepool":"np1","weight":2}]}'
mc 400 replicas PATCH /v1/deployments/d1 '{"replicas":3}'
mc 400 autoscale.max PATCH /v1/deployments/d1 '{"autoscale":{"max":3}}'
mc 400 admin POST /v1/users '{"id":"x","admin":true}'
mc 400 secret POST /v1/tokens '{"secret":"drv_00"}'

echo "# unknown fields: a near miss gets a did-you-mean, a far one does not"
# dym EXPECTED_MESSAGE METHOD PATH BODY: a 400 whose message is exactly that
dym()
{
    api "$2" "$3" --data-binary "$4"
    eq "$2 $3 ${4:0:50}: message" "$ST $(jq -r .error.message <<<"$BODY")" "400 $1"
}
dym "unknown field 'autoscale.min_replica' (did you mean 'autoscale.min_replicas'?)" \
    POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"min_replica":1}}'
dym "unknown field 'runtime.comand' (did you mean 'runtime.command'?)" \
    POST /v1/models '{"id":"x","runtime":{"comand":["x"]}}'
dym "unknown field 'Provider' (did you mean 'provider'?)" \
    POST /v1/clusters '{"id":"x","Provider":"local","region":"local"}'
dym "unknown field 'colour'" POST /v1/clusters '{"id":"x",'"$CL"',"colour":"red"}'
api GET '/v1/clusters?limt=5'
eq "GET ?limt=5: message" "$ST $(jq -r .error.message <<<"$BODY")" \
    "400 unknown query argument 'limt' (did you mean 'limit'?)"

echo "# missing required fields"
mc 400 id POST /v1/clusters '{'"$CL"'}'
mc 400 provider POST /v1/clusters '{"id":"x","region":"local"}'
mc 400 region POST /v1/clusters '{"id":"x","provider":"local"}'
mc 400 id POST /v1/clusters '{}'
mc 400 instance_types POST /v1/clusters/c1/nodepools '{"id":"x"}'
mc 400 runtime POST /v1/models '{"id":"x"}'
mc 400 runtime.command POST /v1/models '{"id":"x","runtime":{}}'
mc 400 artifact.path POST /v1/models '{"id":"x",'"$RT"',"artifact":{"sha256":"'"$(printf '0%.0s' {1..64})"'"}}'
mc 400 model POST /v1/deployments '{"id":"x",'"$NPS"'}'
mc 400 nodepools POST /v1/deployments '{"id":"x","model":"m1"}'
mc 400 'nodepools[0].nodepool' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"c1"}]}'
mc 400 id POST /v1/users '{"role":"member"}'
mc 400 provider PATCH /v1/clusters/c1 '{"provider":null}'
mc 400 runtime.command PATCH /v1/models/m1 '{"runtime":{"command":null}}'

echo "# invalid ids"
mc 400 id POST /v1/clusters '{"id":"UPPER",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"'"$long"'",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"-lead",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"trail-",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"naïve",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"\u00e9t\u00e9",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"a_b",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"a.b",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"a b",'"$CL"'}'
mc 400 id POST /v1/clusters '{"id":"../c1",'"$CL"'}'
mc 400 id POST /v1/clusters/c1/nodepools '{"id":"NP","instance_types":["local-t4"]}'
mc 400 id POST /v1/models '{"id":"m/1",'"$RT"'}'
mc 400 model POST /v1/deployments '{"id":"x","model":"M1",'"$NPS"'}'
mc 400 'nodepools[0].cluster' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"C1","nodepool":"np1"}]}'
mc 400 id POST /v1/users '{"id":"Alice"}'
mc 400 id POST /v1/tokens '{"id":"-t"}'
mc 400 cluster POST /v1/clusters/c1/nodepools '{"id":"x","cluster":"aws1","instance_types":["local-t4"]}'
mc 400 cluster POST /v1/clusters/c1/nodepools '{"id":"x","cluster":7,"instance_types":["local-t4"]}'

echo "# numbers: negative, absurd, beyond int64, floats for integers"
mc 400 min_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"min_nodes":-1}'
mc 400 max_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"max_nodes":10001}'
mc 400 min_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"min_nodes":1.5}'
mc 400 min_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"min_nodes":1.0}'
mc 400 node_scale_down_delay_seconds POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"node_scale_down_delay_seconds":-5}'
mc 400 - POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"max_nodes":99999999999999999999}'
mc 400 max_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"max_nodes":9223372036854775807}'
mc 400 min_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"min_nodes":-9223372036854775808}'
mc 400 autoscale.max_replicas POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"max_replicas":1e9}}'
mc 400 autoscale.max_replicas POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"max_replicas":1000000000}}'
mc 400 autoscale.min_replicas PATCH /v1/deployments/d1 '{"autoscale":{"min_replicas":-1}}'
mc 400 autoscale.target_concurrency PATCH /v1/deployments/d1 '{"autoscale":{"target_concurrency":0}}'
mc 400 autoscale.traffic_history_seconds PATCH /v1/deployments/d1 '{"autoscale":{"traffic_history_seconds":2.5}}'
mc 400 'nodepools[0].priority' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"c1","nodepool":"np1","priority":1e300}]}'
mc 400 resources.gpu.count POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"count":17}}}'
mc 400 resources.gpu.compute_percent POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"count":1,"compute_percent":0}}}'
mc 400 resources.gpu.compute_percent POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"count":1,"compute_percent":101}}}'
mc 400 resources.cpu_millis POST /v1/models '{"id":"x",'"$RT"',"resources":{"cpu_millis":0}}'
mc 400 resources.memory_mib POST /v1/models '{"id":"x",'"$RT"',"resources":{"memory_mib":-1024}}'
mc 400 runtime.startup_timeout_seconds POST /v1/models '{"id":"x","runtime":{"command":["x"],"startup_timeout_seconds":0}}'
mc 400 params_b POST /v1/models '{"id":"x",'"$RT"',"params_b":-7}'
mc 400 params_b POST /v1/models '{"id":"x",'"$RT"',"params_b":0}'
mc 400 params_b POST /v1/models '{"id":"x",'"$RT"',"params_b":1e308}'
mc 400 expires_in_seconds POST /v1/tokens '{"expires_in_seconds":0}'
mc 400 expires_in_seconds POST /v1/tokens '{"expires_in_seconds":-60}'
mc 400 expires_in_seconds POST /v1/tokens '{"expires_in_seconds":3600.5}'
mc 400 expires_in_seconds POST /v1/tokens '{"expires_in_seconds":1e20}'

echo "# lists: too short, too long"
mc 400 instance_types POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":[]}'
mc 400 instance_types POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":['"$(printf '"local-t4",%.0s' {1..16})"'"local-l4"]}'
mc 400 'instance_types[1]' POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4","local-t4"]}'
mc 400 runtime.command POST /v1/models '{"id":"x","runtime":{"command":[]}}'
mc 400 nodepools POST /v1/deployments '{"id":"x","model":"m1","nodepools":[]}'
mc 400 'nodepools[1]' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"c1","nodepool":"np1"},{"cluster":"c1","nodepool":"np1","priority":2}]}'
mc 400 scopes POST /v1/tokens '{"scopes":[]}'
mc 400 description POST /v1/clusters '{"id":"x",'"$CL"',"description":"'"$(head -c 1025 /dev/zero | tr '\0' d)"'"}'

echo "# cross-field rules"
mc 400 max_nodes POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"min_nodes":3,"max_nodes":2}'
mc 400 max_nodes PATCH /v1/clusters/c1/nodepools/np1 '{"min_nodes":5}'
mc 400 autoscale.max_replicas POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"min_replicas":5,"max_replicas":2}}'
mc 400 autoscale.max_replicas POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"min_replicas":0,"max_replicas":0}}'
mc 400 autoscale.scale_to_zero_delay_seconds POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"scale_down_delay_seconds":300,"scale_to_zero_delay_seconds":100}}'
mc 400 autoscale.scale_to_zero_delay_seconds PATCH /v1/deployments/d1 '{"autoscale":{"scale_to_zero_delay_seconds":10}}'
mc 400 autoscale.max_scale_up_rate POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"max_scale_up_rate":1}}'
mc 400 autoscale.ttft_slo_ms POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"ttft_slo_ms":"2s"}}'
mc 400 autoscale.ttft_slo_ms POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"ttft_slo_ms":1.5}}'
mc 400 autoscale.ttft_slo_ms POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"ttft_slo_ms":0}}'
mc 400 autoscale.ttft_slo_ms POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"ttft_slo_ms":-5}}'
mc 400 autoscale.ttft_slo_ms PATCH /v1/deployments/d1 '{"autoscale":{"ttft_slo_ms":600001}}'
mc 400 autoscale.e2e_slo_ms POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"e2e_slo_ms":"60s"}}'
mc 400 autoscale.e2e_slo_ms POST /v1/deployments '{"id":"x","model":"m1",'"$NPS"',"autoscale":{"e2e_slo_ms":0}}'
mc 400 autoscale.e2e_slo_ms PATCH /v1/deployments/d1 '{"autoscale":{"e2e_slo_ms":3600001}}'
mc 400 resources.gpu.memory_mib POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"count":0,"memory_mib":1024}}}'
mc 400 resources.gpu.types POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"types":["T4"]}}}'
mc 400 resources.gpu.compute_percent POST /v1/models '{"id":"x",'"$RT"',"resources":{"gpu":{"count":2,"compute_percent":50}}}'
mc 400 runtime.health_path POST /v1/models '{"id":"x","runtime":{"command":["x"],"health_path":"health"}}'
mc 400 runtime.predict_path POST /v1/models '{"id":"x","runtime":{"command":["x"],"predict_path":"predict"}}'
mc 400 artifact.sha256 POST /v1/models '{"id":"x",'"$RT"',"artifact":{"path":"/w","sha256":"xyz"}}'
mc 400 artifact.sha256 POST /v1/models '{"id":"x",'"$RT"',"artifact":{"path":"/w","sha256":"'"$(printf 'G%.0s' {1..64})"'"}}'

echo "# impossible (422): catalog, references, fit, immutables"
mc 422 provider POST /v1/clusters '{"id":"x","provider":"azure","region":"eastus"}'
mc 422 region POST /v1/clusters '{"id":"x","provider":"aws","region":"mars-1"}'
mc 422 region POST /v1/clusters '{"id":"x","provider":"local","region":"us-east-1"}'
mc 422 'instance_types[0]' POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-tpu"]}'
mc 422 'instance_types[1]' POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4","g5.xlarge"]}'
mc 422 'instance_types[0]' POST /v1/clusters/aws1/nodepools '{"id":"x","instance_types":["p4de.24xlarge"]}'
mc 422 capacity_type POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"capacity_type":"spot"}'
mc 422 'nodepools[0]' POST /v1/deployments '{"id":"x","model":"mbig",'"$NPS"'}'
mc 422 'nodepools[1]' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"c1","nodepool":"np1"},{"cluster":"c1","nodepool":"npcpu"}]}'
mc 422 'nodepools[0]' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"c1","nodepool":"nope"}]}'
mc 422 'nodepools[0]' POST /v1/deployments '{"id":"x","model":"m1","nodepools":[{"cluster":"nope","nodepool":"np1"}]}'
mc 422 model POST /v1/deployments '{"id":"x","model":"nope",'"$NPS"'}'
mc 422 model PATCH /v1/deployments/d1 '{"model":"nope"}'
mc 422 'nodepools[0]' PATCH /v1/deployments/d1 '{"model":"mbig"}'
mc 422 resources PATCH /v1/models/m1 '{"resources":{"gpu":{"memory_mib":65536}}}'
mc 422 instance_types PATCH /v1/clusters/c1/nodepools/np1 '{"instance_types":["local-cpu"]}'
mc 422 provider PATCH /v1/clusters/c1 '{"provider":"aws"}'
mc 422 region PATCH /v1/clusters/aws1 '{"region":"us-east-1"}'
mc 422 id PATCH /v1/clusters/c1 '{"id":"c2"}'
mc 422 id PATCH /v1/models/m1 '{"id":"m2"}'
mc 422 cluster PATCH /v1/clusters/c1/nodepools/np1 '{"cluster":"aws1"}'
mc 422 'instance_types[0]' PATCH /v1/clusters/c1/nodepools/np1 '{"instance_types":["g5.xlarge"]}'

echo "# conflicts (409)"
mc 409 - POST /v1/clusters '{"id":"c1",'"$CL"'}'
mc 409 - POST /v1/clusters/c1/nodepools '{"id":"np1","instance_types":["local-t4"]}'
mc 409 - POST /v1/models '{"id":"m1",'"$RT"'}'
mc 409 - POST /v1/deployments '{"id":"d1","model":"m1",'"$NPS"'}'
mc 409 - POST /v1/users '{"id":"alice"}'
mc 409 - POST /v1/tokens '{"id":"ci"}'
mc 409 - DELETE /v1/clusters/c1 -
mc 409 - DELETE /v1/clusters/c1?cascade=true -
mc 409 - DELETE /v1/clusters/c1/nodepools/np1 -
mc 409 - DELETE /v1/models/m1 -
mc 409 - DELETE /v1/users/admin -
mc 409 - PATCH /v1/clusters/c1 '{"description":"x"}' -H 'If-Match: 2'
mc 409 - PATCH /v1/clusters/c1 '{"description":"x"}' -H 'If-Match: "7"'
mc 409 - DELETE /v1/deployments/d1 - -H 'If-Match: 99'

echo "# bodies over 1 MiB"
mc 413 - POST /v1/clusters @big
mc 413 - POST /v1/clusters @just-over
mc 413 - PATCH /v1/clusters/c1 @big
mc 413 - POST /v1/clusters @big -H 'Transfer-Encoding: chunked'
mc 413 - POST /v1/models @big -H 'Expect:'

echo "# unknown paths, wrong methods"
mc 404 - GET /v1/nope -
mc 404 - GET /v2/clusters -
mc 404 - GET /v1/clusters/ -
mc 404 - GET /v1/clusters//nodepools -
mc 404 - GET /v1/clusters/c1/extra -
mc 404 - GET /v1/clusters/c1/nodepools/np1/nodes -
mc 404 - POST /v1/cluster '{"id":"x",'"$CL"'}'
mc 404 - GET /V1/CLUSTERS -
mc 404 - GET /v1/clusters/nope -
mc 404 - GET /v1/clusters/UPPER -
mc 404 - GET "/v1/clusters/$long" -
mc 404 - GET /v1/clusters/na%C3%AFve -
mc 404 - GET /v1/clusters/nope/nodepools -
mc 404 - POST /v1/clusters/nope/nodepools '{"id":"x","instance_types":["local-t4"]}'
mc 404 - PATCH /v1/models/nope '{"description":"x"}'
mc 404 - DELETE /v1/deployments/nope -
mc 404 - DELETE /v1/tokens/nope -
mc 404 - GET /v1/instance-types/nope -
mc 404 - GET /v1/providers/nope -
mc 404 - GET /v1/providers/nope/regions -
mc 405 - PUT /v1/clusters/c1 '{"id":"c1",'"$CL"'}'
mc 405 - DELETE /v1/clusters -
mc 405 - POST /v1/clusters/c1 '{}'
mc 405 - PATCH /v1/clusters '{}'
mc 405 - PATCH /v1/tokens/ci '{"description":"x"}'
mc 400 role PATCH /v1/users/alice '{"role":"admin"}'
mc 405 - GET /v1/deployments/d1/predict -
mc 405 - POST /v1/nodepools '{}'
mc 405 - DELETE /v1/instance-types/local-t4 -
mc 405 - POST /healthz -

echo "# query arguments"
mc 400 bogus GET '/v1/clusters?bogus=1' -
mc 400 limit GET '/v1/clusters?limit=0' -
mc 400 limit GET '/v1/clusters?limit=abc' -
mc 400 limit GET '/v1/clusters?limit=-1' -
mc 400 limit GET '/v1/clusters?limit=1001' -
mc 400 limit GET '/v1/clusters?limit=' -
mc 400 limit GET '/v1/clusters?limit=99999999999999999999' -
mc 400 limit GET '/v1/clusters?limit=1.5' -
mc 400 limit GET '/v1/tokens?limit=0' -
mc 400 limit GET '/v1/users?limit=x' -
mc 400 page_token GET '/v1/clusters?page_token=zzz' -
mc 400 page_token GET '/v1/clusters?page_token=alice/c1' -
mc 400 all_users GET '/v1/clusters?all_users=maybe' -
mc 400 pretty GET '/v1/clusters/c1?pretty=1' -
mc 400 cascade DELETE '/v1/clusters/c1?cascade=maybe' -
mc 400 force DELETE '/v1/clusters/c1?force=true' -
mc 400 cascade DELETE '/v1/models/m1?cascade=yes' -
mc 400 - GET '/v1/clusters?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&j=10&k=11&l=12&m=13&n=14&o=15&p=16&q=17' -
mc 400 params_b GET '/v1/recommendations' -
mc 400 params_b GET '/v1/recommendations?params_b=abc' -

echo "# bad If-Match"
mc 400 If-Match PATCH /v1/clusters/c1 '{"description":"x"}' -H 'If-Match: abc'
mc 400 If-Match PATCH /v1/clusters/c1 '{"description":"x"}' -H 'If-Match: -1'
mc 400 If-Match PATCH /v1/clusters/c1 '{"description":"x"}' -H 'If-Match: ""'
mc 400 If-Match PATCH /v1/clusters/c1 '{"description":"x"}' -H 'If-Match: 1x'
mc 400 If-Match PATCH /v1/clusters/c1 '{"description":"x"}' -H 'If-Match: 99999999999999999999999999999999'
mc 400 If-Match DELETE /v1/clusters/c1 - -H 'If-Match: one'

echo "# read-only fields in bodies"
mc 400 status POST /v1/clusters '{"id":"x",'"$CL"',"status":{}}'
mc 400 owner POST /v1/clusters '{"id":"x",'"$CL"',"owner":"alice"}'
mc 400 resource_version POST /v1/clusters '{"id":"x",'"$CL"',"resource_version":1}'
mc 400 created_at POST /v1/models '{"id":"x",'"$RT"',"created_at":"2020-01-01T00:00:00Z"}'
mc 400 updated_at PATCH /v1/models/m1 '{"updated_at":"2020-01-01T00:00:00Z"}'
mc 400 resource_version PATCH /v1/clusters/c1 '{"resource_version":5}'
mc 400 owner PATCH /v1/deployments/d1 '{"owner":"alice"}'
mc 400 status PATCH /v1/deployments/d1 '{"status":{"desired_replicas":5}}'
mc 400 status POST /v1/clusters/c1/nodepools '{"id":"x","instance_types":["local-t4"],"status":{"node_count":3}}'
mc 400 revoked POST /v1/tokens '{"revoked":true}'

# ---- nothing changed ---------------------------------------------------------------------
snapshot >"$TMP/after"
if cmp -s "$TMP/before" "$TMP/after"; then
    ok "store unchanged after $N_CASES malformed requests (lists, objects, store rows)"
else
    fail "store unchanged after $N_CASES malformed requests"
    why "$(diff "$TMP/before" "$TMP/after" | head -40)"
fi
check "corpus has at least 50 cases ($N_CASES)" [ "$N_CASES" -ge 50 ]
check "field checked in a good share of cases ($N_FIELD of $N_CASES)" [ $((N_FIELD * 2)) -ge "$N_CASES" ]

# the 405s name the methods that are allowed
api PUT /v1/clusters/c1 -d '{}'
contains "405 message lists the allowed methods" "$BODY" "GET, PATCH, DELETE"
check "405 carries an Allow header (docs/api.md: 'Allow header lists the ones that do')" \
    [ -n "$(header Allow)" ]

# A percent-encoded NUL must not cut the path short: /v1/clusters/c1%00x
# names no cluster. (Checked after the snapshot: the bug deletes aws1.)
api GET '/v1/clusters/c1%00xyz'
check "GET /v1/clusters/c1%00xyz is not cluster c1 (got $ST)" [ "$ST" == 404 -o "$ST" == 400 ]
api DELETE '/v1/clusters/aws1%00.bak'
check "DELETE /v1/clusters/aws1%00.bak does not delete aws1 (got $ST)" [ "$ST" == 404 -o "$ST" == 400 ]

# droverd is still healthy and serving
api GET /healthz
status "droverd still healthy after the corpus" 200
api POST /v1/clusters -d '{"id":"after",'"$CL"'}'
status "a valid create still works after the corpus" 201

droverd_finish "malformed"
t_done
