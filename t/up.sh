#!/usr/bin/env bash
# up.sh — `make up`'s script (scripts/up): droverd starts on the given data
# dir and address, and on its first start the quick start's local cluster
# and nodepool are there (a usable single-machine cluster, no node running);
# a later start leaves the clusters as the user left them. What it prints
# next is the README's quick start, line for line. The data dir is relative
# (./up under $TMP, as make up's ./.drover): the quick start's model answers
# (droverd's local agents and their replicas run elsewhere; a relative data
# dir once reached them as is, and the model could not write its weights).
source "$(dirname "$0")/lib/common.bash"

BUILD=$(dirname "$DROVERD")
PORT=$(free_port)
export DROVER_HOME=./up DROVER_LISTEN=127.0.0.1:$PORT DROVER_GATEWAY_LISTEN=127.0.0.1:0
URL=http://127.0.0.1:$PORT

up_pid=
start_up() {
    (cd "$TMP" && exec "$DROVER_SRC/scripts/up" "$BUILD") >"$TMP/up.$1.log" 2>&1 &
    up_pid=$!
    wait_until 30 "scripts/up prints where droverd runs" grep -q "droverd is running at $URL" "$TMP/up.$1.log"
}
stop_up() {
    kill -TERM "$up_pid" 2>/dev/null
    wait "$up_pid"
    eq "scripts/up stops droverd cleanly on SIGTERM ($1)" "$?" 0
}
cli() { DROVER_SERVER=$URL DROVER_TOKEN=$(cat "$TMP/up/admin.token") "$DROVER" "$@"; }

start_up 1
check "the admin token is written (mode 0600)" test "$(stat -c %a "$TMP/up/admin.token")" == 600
contains "it names the local cluster it made" "$(cat "$TMP/up.1.log")" "cluster: 'demo' (provider local)"
contains "it names the web console" "$(cat "$TMP/up.1.log")" "web console: $URL/"
GWURL=$(cat "$TMP/up/gateway.url" 2>/dev/null)
contains "it names the inference listener" "$(cat "$TMP/up.1.log")" "inference, fast path: $GWURL/v1/deployments/NAME/predict"
# the "next" list is the README's quick start, line for line
README_NEXT=$(sed -n '/^<!-- make up.s "next" list/,$p' "$DROVER_SRC/README.md" |
    awk '/^```/ { if (++f == 2) exit; next } f == 1' | sed "s|\$PWD/build:|$BUILD:|; s/^/    /")
UP_NEXT=$(sed -n '/next, in another terminal:/,/^$/p' "$TMP/up.1.log" | sed '1d; /^$/d')
check "the README's quick start has a list for make up ($(grep -c . <<<"$README_NEXT") lines)" \
    test "$(grep -c . <<<"$README_NEXT")" -ge 5
contains "... which applies the quick start" "$README_NEXT" "drover apply -f examples/quickstart.yaml"
eq "scripts/up prints the README's quick start as its next steps" "$UP_NEXT" "$README_NEXT"
contains "... with this build directory in PATH" "$UP_NEXT" "export PATH=$BUILD:\$PATH"
ST=$(curl -s -o /dev/null -w '%{http_code}' "$GWURL/healthz")
eq "the inference listener answers /healthz" "$ST" 200
eq "cluster demo is there, provider local" "$(cli get cluster demo -o json | jq -r .provider)" local
eq "nodepool demo/gpu is there, min_nodes 0" "$(cli get nodepool demo/gpu -o json | jq -r .min_nodes)" 0
eq "no node runs yet (min 0, nothing deployed)" "$(cli get nodes -o json | jq length)" 0
out=$(cli apply -f "$DROVER_SRC/examples/quickstart.yaml")
contains "the quick start applies on top: cluster unchanged" "$out" "cluster/demo unchanged"
contains "... nodepool unchanged" "$out" "nodepool/demo/gpu unchanged"
contains "... deployment created" "$out" "deployment/demo created"
ans=$(cli predict demo --json '{"inputs":"hello"}' --timeout "${T_WAIT:-90}" 2>&1)
check "the quick start's model answers (droverd on a relative data dir)" \
    jq -e '.outputs | length > 0' <<<"$ans"
cli delete deployment demo >/dev/null
cli delete nodepool demo/gpu >/dev/null
eq "the user deletes the nodepool" "$(cli get nodepools -o json | jq length)" 0
stop_up 1

start_up 2
check "a later start does not name a new cluster" bash -c "! grep -q \"cluster: 'demo'\" '$TMP/up.2.log'"
eq "... nor re-create the deleted nodepool" "$(cli get nodepools -o json | jq length)" 0
stop_up 2

t_done
