#!/usr/bin/env bash
# llm_load.sh — LLM-aware load (issue 16 item 5): the agent scrapes a ready
# replica's runtime.metrics_path (drover-demo-model's /metrics has vLLM's
# gauge names) and reports its load {running, waiting, kv_cache}; a
# deployment with autoscale.metric kv_cache (target_kv_cache 0.5) whose one
# replica reports 0.9 of its KV cache grows to 2 replicas without a single
# request, and one on the gateway's in-flight count (the default) beside it
# stays at 1; bad input: a metric on a model without metrics_path is a 422,
# target_kv_cache without metric kv_cache a 400, an unknown metric a 400.
# runtime.metrics_port: the replica gets a second port, METRICS_PORT (the
# demo serves /metrics only there, as Triton's --metrics-port), and is
# scraped from it; metrics_port without metrics_path is a 400; preset
# triton fills metrics_path /metrics and metrics_port true (false: a 400).
# Replicas are processes here (the scrape is the same for a container).
. "$(dirname "$0")/lib/common.bash"
workers_init
W=${T_WAIT:-90}   # bound of each wait (s): only ends a hung test

PORT=$(free_port)
droverd_start "$TMP/d" --listen "127.0.0.1:$PORT" --config "$CFG" || exit 1
api POST /v1/clusters -d '{"id":"sm","provider":"self-managed","region":"default"}'
status "create self-managed cluster sm" 201
api POST /v1/clusters/sm/nodepools -d '{"id":"np","instance_types":["self-l4"],"min_nodes":0,"max_nodes":2}'
status "create nodepool np" 201
api POST /v1/clusters/sm/nodepools/np/join-tokens -d '{"id":"t","ttl_seconds":3600}'
status "join token" 201
start_agent a1 --join-token "$(jq -r .secret <<<"$BODY")" --gpus none --container-engine none

model() # ID EXTRA-RUNTIME-JSON
{
    api POST /v1/models -d "{\"id\":\"$1\",\"runtime\":{\"command\":[\"drover-demo-model\",\"--weights-mib\",\"1\",\"--kv-cache-usage\",\"0.9\"]$2},\"resources\":{\"gpu\":{\"count\":0},\"cpu_millis\":100,\"memory_mib\":64}}"
}
model plain ''
status "create model plain (no metrics_path)" 201
model m ',"metrics_path":"/metrics"'
status "create model m (metrics_path /metrics)" 201
model mp ',"metrics_port":true'
status "metrics_port without metrics_path: 400" 400
jqc "it names runtime.metrics_port" '.error.field == "runtime.metrics_port"' "$BODY"
model mp ',"metrics_path":"/metrics","metrics_port":"yes"'
status "metrics_port not a boolean: 400" 400
api POST /v1/models -d '{"id":"tri","runtime":{"preset":"triton","metrics_port":false}}'
status "preset triton with metrics_port false: 400" 400
jqc "it names runtime.metrics_port" '.error.field == "runtime.metrics_port"' "$BODY"
api POST /v1/models -d '{"id":"tri","runtime":{"preset":"triton"}}'
status "create model tri (preset triton)" 201
jqc "the preset gives metrics_path /metrics on a port of its own" \
    '.runtime.metrics_path == "/metrics" and .runtime.metrics_port == true' "$BODY"
model mp ',"metrics_path":"/metrics","metrics_port":true'
status "create model mp (metrics on METRICS_PORT)" 201
dep() # ID MODEL AUTOSCALE-EXTRA
{
    api POST /v1/deployments -d "{\"id\":\"$1\",\"model\":\"$2\",\"nodepools\":[{\"cluster\":\"sm\",\"nodepool\":\"np\"}],\"autoscale\":{\"min_replicas\":1,\"max_replicas\":2,\"traffic_history_seconds\":4,\"scale_up_delay_seconds\":0$3}}"
}

# ---- bad input ----------------------------------------------------------------------
dep bad plain ',"metric":"kv_cache"'
status "metric kv_cache on a model without metrics_path: 422" 422
jqc "it names autoscale.metric" '.error.field == "autoscale.metric"' "$BODY"
dep bad m ',"target_kv_cache":0.5'
status "target_kv_cache without metric kv_cache: 400" 400
jqc "it names autoscale.target_kv_cache" '.error.field == "autoscale.target_kv_cache"' "$BODY"
dep bad m ',"metric":"tokens"'
status "an unknown metric: 400" 400
dep bad m ',"metric":"kv_cache","target_kv_cache":2'
status "target_kv_cache above 1: 400" 400
api GET /v1/deployments/bad
status "nothing was stored" 404

# ---- kv_cache: 0.9 of the cache on one replica, target 0.5 -> 2 replicas -------------------
dep kv m ',"metric":"kv_cache","target_kv_cache":0.5'
status "create deployment kv (metric kv_cache, target 0.5)" 201
dep flat m ''
status "create deployment flat (the default: the gateway's in-flight count)" 201
dep mport mp ''
status "create deployment mport (model mp)" 201
reports_load() { replicas_json deployment=kv | jq -e 'any(.[]; .status.state == "ready" and .status.load.kv_cache == 0.9 and .status.load.running == 0 and .status.load.waiting == 0)' >/dev/null; }
wait_check "$W" "kv's replica reports its load from /metrics (kv_cache 0.9, nothing running)" reports_load
wait_check "$W" "kv grows to 2 replicas on its KV cache, without a request" replicas_ready kv 2
api GET "/v1/events?kind=deployment&object=kv&limit=100"
jqc "an event says it scaled up on the KV cache" 'any(.items[]; .type == "scale_up" and (.reason | test("1 -> 2 .*autoscale.metric kv_cache")))' "$BODY"
eq "flat (the same model, metric concurrency) stays at 1" "$(replicas_json deployment=flat | jq length)" 1
jqc "flat's replica reports the load too (the agent scrapes every metrics_path)" \
    'any(.[]; .status.load.kv_cache == 0.9)' "$(replicas_json deployment=flat)"

mport_load() { replicas_json deployment=mport | jq -e 'any(.[]; .status.state == "ready" and .status.load.kv_cache == 0.9)' >/dev/null; }
wait_check "$W" "mport's replica reports its load, scraped from METRICS_PORT (PORT answers /metrics 404)" mport_load
eq "the replica log names its metrics port" \
    "$(grep -rhos 'metrics on port [0-9]* (METRICS_PORT)' "$TMP" | head -1 | grep -c METRICS_PORT)" 1

logs_sanitizer_clean "llm_load" "$TMP"/agents/*.log
t_done
