# common.bash — helpers the integration tests in t/*.sh source (this file is
# deliberately not named *.sh, so ctest does not run it as a test).
#
# What it gives a test:
#   - a private temp dir $TMP, removed at exit together with any droverd the
#     test started (trap EXIT);
#   - droverd_start / droverd_stop / droverd_kill9 on a data dir, with the
#     URL read from DIR/droverd.url (droverd listens on 127.0.0.1:0);
#   - api METHOD PATH [curl args...]: one HTTP call; sets $ST (status code),
#     $BODY (response body) and $HDRS (path of the response headers);
#   - checks that print one line each ("ok - ..." / "FAIL - ..."), counted
#     by t_done, which prints "N passed, M failed" and sets the exit code.
# No check depends on how long anything takes: waits only poll for a
# condition, with a generous upper bound that exists to end a hung test.
#
# Environment (set by ctest, see CMakeLists.txt): DROVERD, DROVER (binary
# paths), DROVER_SRC (repo root). Defaults fit a build in ./build.
# DROVER_TEST_STORE=postgres (the pg/* ctest entries) runs every droverd of
# droverd_start on PostgreSQL: the test's own instance (t/lib/pg.bash),
# one database per data dir (so a restart on DIR finds DIR's records, and
# two data dirs are two stores, as with SQLite); store_sql reads it.
# T_KEEP=1 keeps $TMP (data dirs, logs) after the test, for debugging.

set -u
set -o pipefail

DROVER_SRC=${DROVER_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
DROVERD=${DROVERD:-$DROVER_SRC/build/droverd}
DROVER=${DROVER:-$DROVER_SRC/build/drover}
export DROVER_SRC DROVERD DROVER

for _tool in curl jq sqlite3; do
    if ! command -v "$_tool" >/dev/null 2>&1; then
        echo "missing tool '$_tool' (run scripts/install-deps)" >&2
        exit 1
    fi
done
# sleep is bash's loadable builtin where bash-builtins is installed
# (scripts/install-deps installs it): a poll's nap starts no process.
[ -f /usr/lib/bash/sleep ] && enable -f /usr/lib/bash/sleep sleep 2>/dev/null

# jq is t/jq_fast (t/jq_fast.c) where the build has it: jq 1.6's answers,
# byte for byte, for a subset of jq's language that covers nearly all the
# tests' filters (t/jq_fast_eval.c lists it), in ~5 ms of CPU where jq
# takes ~30 (it compiles its builtins at each start); any other call, or
# one where jq would stop with an error, it hands to jq itself, input and
# all (what still goes to jq: docs/benchmarks.md). t/jq_fast.sh checks that
# the two agree. Real jq: `command jq`.
_JQ_FAST=$(dirname "$DROVERD")/t/jq_fast
if [ -x "$_JQ_FAST" ]; then
    jq() { "$_JQ_FAST" "$@"; }
fi
if [ ! -x "$DROVERD" ]; then
    echo "DROVERD=$DROVERD is not an executable (build first)" >&2
    exit 1
fi

# python3 on PATH may be a pyenv shim (a bash script: ~0.4 s of CPU per start
# where the interpreter takes 0.04 s). ctest passes the interpreter's own
# directory (DROVER_PYTHON_BIN, found once by cmake); it goes first on PATH,
# so python3, moto_server and the doubles' "#!/usr/bin/env python3" start
# directly. Run by hand, a shim is asked once.
if [ -z "${DROVER_PYTHON_BIN:-}" ]; then
    case $(command -v python3) in
    */shims/python3)
        DROVER_PYTHON_BIN=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null) ;;
    esac
fi
if [ -n "${DROVER_PYTHON_BIN:-}" ] && [ -x "$DROVER_PYTHON_BIN/python3" ]; then
    export PATH="$DROVER_PYTHON_BIN:$PATH"
fi

# Agents look for no container engine unless a test asks for one
# (t/containers.sh sets its own): probing starts `podman --version` and a
# sweep `podman ps -a` at every agent start, ~0.18 s of CPU, ~100 agents a
# suite. --container-engine on an agent's command line still wins.
export DROVER_CONTAINER_ENGINE=none

TMP=$(mktemp -d "${TMPDIR:-/tmp}/drover-t.XXXXXX")
# Keep the CLI away from the invoking user's config and ./.drover.
export HOME=$TMP/home XDG_CONFIG_HOME=$TMP/home/.config
mkdir -p "$HOME"
unset DROVER_SERVER DROVER_TOKEN DROVER_HOME
cd "$TMP" || exit 1

T_PASS=0
T_FAIL=0
T_KNOWN=0
T_NAME=$(basename "$0" .sh)
_PIDS=()          # every droverd this test started (pid), for the EXIT trap

# _alive PID: PID runs and its command line mentions $TMP (so a recycled
# pid of someone else's process is never signalled).
_alive()
{
    kill -0 "$1" 2>/dev/null && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$TMP"
}

# _reap PID...: SIGTERM, a bounded wait, then SIGKILL for what remains.
_reap()
{
    local p i left
    for p in "$@"; do kill -TERM "$p" 2>/dev/null; done
    for ((i = 0; i < 100; i++)); do
        left=0
        for p in "$@"; do _alive "$p" && left=1; done
        [ "$left" == 0 ] && return 0
        sleep 0.1
    done
    for p in "$@"; do _alive "$p" && kill -KILL "$p" 2>/dev/null; done
}

_cleanup()
{
    local p live=() agents=()
    for p in "${_BG_PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    # droverd first, with SIGTERM: it stops the local provider's agents
    for p in "${_PIDS[@]}"; do _alive "$p" && live+=("$p"); done
    [ ${#live[@]} -gt 0 ] && _reap "${live[@]}"
    for p in "${live[@]}"; do wait "$p" 2>/dev/null; done
    # then what the test's helpers started for them (a PostgreSQL)
    for p in "${_EXIT_HOOKS[@]}"; do "$p"; done
    # agents left behind (a droverd that was SIGKILLed leaves them running:
    # they have their own session): every process whose command line names
    # a path in $TMP (found even when $TMP itself is already gone)
    while IFS= read -r f; do
        p=${f#/proc/}
        p=${p%/cmdline}
        [ "$p" != $$ ] && [ "$p" != "$BASHPID" ] && _alive "$p" && agents+=("$p")
    done < <(grep -alsF "$TMP/" /proc/[0-9]*/cmdline 2>/dev/null)
    [ ${#agents[@]} -gt 0 ] && _reap "${agents[@]}"
    if [ -n "${T_KEEP:-}" ]; then
        echo "(kept $TMP)" >&2
    else
        rm -rf "$TMP"
    fi
}
_BG_PIDS=()
_EXIT_HOOKS=()    # functions _cleanup runs after droverd is gone
trap _cleanup EXIT

# ---- reporting ---------------------------------------------------------------

ok()   { T_PASS=$((T_PASS + 1)); echo "ok - $*"; }
fail() { T_FAIL=$((T_FAIL + 1)); echo "FAIL - $*"; }
# Print context for the last failure (indented, truncated).
why()  { printf '%s\n' "$*" | head -c 1500 | sed 's/^/    # /'; echo; }

# check NAME COMMAND...: passes when COMMAND exits 0.
check()
{
    local name=$1
    shift
    if "$@"; then ok "$name"; else fail "$name"; why "command: $*"; fi
}

# eq NAME GOT WANT
eq()
{
    if [ "$2" == "$3" ]; then
        ok "$1"
    else
        fail "$1"
        why "got:  $2" "want: $3"
    fi
}

# contains NAME HAYSTACK NEEDLE
contains()
{
    if [[ "$2" == *"$3"* ]]; then
        ok "$1"
    else
        fail "$1"
        why "no '$3' in: $2"
    fi
}

# status NAME WANT: the last api call answered WANT.
status()
{
    if [ "$ST" == "$2" ]; then
        ok "$1 -> $2"
    else
        fail "$1 -> $2"
        why "got $ST: $BODY"
    fi
}

# jqc NAME FILTER [JSON]: jq -e FILTER on JSON (default $BODY) is truthy
# (an empty JSON fails).
jqc()
{
    local name=$1 filter=$2 doc=${3-$BODY}
    # jq -e on empty input exits 0 here: an empty answer must fail, not pass
    if [ -n "${doc//[[:space:]]/}" ] && jq -e "$filter" >/dev/null 2>&1 <<<"$doc"; then
        ok "$name"
    else
        fail "$name"
        why "jq '$filter' is false on: $doc"
    fi
}

# jqq ARGS...: jq -e, quiet (for use as a check's command).
jqq() { jq -e "$@" >/dev/null 2>&1; }

# known_bug NAME COMMAND...: a check that documents a known defect. A pass
# counts as a pass; a failure prints "KNOWN BUG" and is not counted, so the
# suite stays green until the fix lands (then the line turns to "ok").
known_bug()
{
    local name=$1
    shift
    if "$@"; then
        ok "$name"
    else
        T_KNOWN=$((T_KNOWN + 1))
        echo "KNOWN BUG - $name (not counted)"
    fi
}

# error_shape NAME: $BODY is {"error":{"code":string,"message":string,...}}
# and the code agrees with $ST.
code_for_status()
{
    case $1 in
    400) echo invalid_argument ;;
    401) echo unauthenticated ;;
    403) echo permission_denied ;;
    404) echo not_found ;;
    405) echo method_not_allowed ;;
    409) echo conflict ;;
    413) echo payload_too_large ;;
    422) echo unprocessable ;;
    429) echo resource_exhausted ;;
    503) echo unavailable ;;
    *) echo "?" ;;
    esac
}

# error_body_field: $BODY is the error shape for $ST (is_error_body); sets
# ERR_FIELD to its .error.field ("" when none). One jq coprocess per test
# answers (started at the first call): a jq start costs ~25 ms of CPU, and
# t/authwalk.sh, t/authz.sh and t/malformed.sh check hundreds of bodies. It
# reads "CODE<TAB>BODY" (BODY's newlines made spaces, which JSON allows
# between tokens and not inside strings) and answers "OK <field>" or "BAD".
# In a subshell (where the coprocess's pipes are not ours) a plain jq does it.
ERR_FIELD=""
_SHAPE_JQ='index("\t") as $t | .[:$t] as $c | (.[$t + 1:] | try fromjson catch null) as $b
    | if ($b | type) == "object" and ($b.error | type) == "object" and $b.error.code == $c
        and ($b.error.message | type == "string" and length > 0)
        and (($b.error.field // "") | type == "string")
      then "OK \($b.error.field // "")" else "BAD" end'
_SHAPE_PID=""
error_body_field()
{
    local line res=""
    line="$(code_for_status "$ST")"$'\t'"${BODY//$'\n'/ }"
    if [ "$BASHPID" != "$$" ]; then
        res=$(jq -R -r "$_SHAPE_JQ" <<<"$line" 2>/dev/null)
    else
        if [ -z "$_SHAPE_PID" ]; then
            # (stderr not the test's: daemons started later inherit its stdin
            # pipe and may keep it a while; it must not hold ctest's output)
            coproc _SHAPE { exec jq --unbuffered -R -r "$_SHAPE_JQ" 2>/dev/null; }   # sets _SHAPE_PID
        fi
        printf '%s\n' "$line" >&"${_SHAPE[1]}"
        read -r res <&"${_SHAPE[0]}"
    fi
    ERR_FIELD=${res:3}
    [ "${res:0:2}" == OK ]
}

is_error_body() { error_body_field; }

error_shape()
{
    if is_error_body; then ok "$1: error body"; else fail "$1: error body"; why "$ST $BODY"; fi
}

# t_done: summary line and exit status.
t_done()
{
    if [ "$T_KNOWN" -gt 0 ]; then
        echo "($T_KNOWN known bug(s) not counted, see KNOWN BUG lines)"
    fi
    echo "$T_PASS passed, $T_FAIL failed"
    [ "$T_FAIL" -eq 0 ] && exit 0
    exit 1
}

# ---- droverd -------------------------------------------------------------------

DPID=""          # pid of the droverd started last
DDIR=""          # its data dir
URL=""           # its base URL
ADMIN=""         # the admin token of DDIR
DEXIT=""         # exit status of the last droverd_stop / droverd_kill9

# Polls back off: 0.1 s after the first try, then longer up to 0.5 s. A poll
# starts curl and jq (~50 ms of CPU); at a fixed 0.1-0.2 s the waiting tests
# of a -j4 run kept the 2 CPUs busy and slowed the ones with work to do.
_POLL_NAPS=(0.1 0.15 0.2 0.3 0.4 0.5)

# wait_for DESCRIPTION COMMAND...: poll COMMAND until it succeeds. The bound
# (120 s of polling) only ends a hung test; nothing asserts on the time.
wait_for()
{
    wait_until 120 "$@"
}

_droverd_up()
{
    [ -s "$DDIR/droverd.url" ] && return 0
    kill -0 "$DPID" 2>/dev/null || return 0   # died: stop waiting
    return 1
}

# droverd_start DIR [extra droverd args]: start droverd on DIR, wait until it
# listens. Returns 1 (and prints its log) when it does not come up.
droverd_start()
{
    DDIR=$1
    shift
    mkdir -p "$DDIR"
    if [ -n "${T_REPLICA_REACH-}" ]; then
        # replicas run as an unprivileged user (agent/isolate.h) only when it
        # can reach its agent's data dir: open $TMP, droverd's dir and the
        # local provider's node dirs for search (mktemp -d and droverd: 0700)
        mkdir -p "$DDIR/nodes/${T_OWNER:-admin}"
        chmod o+x "$TMP" "$DDIR" "$DDIR/nodes" "$DDIR/nodes/${T_OWNER:-admin}"
    fi
    rm -f "$DDIR/droverd.url"
    local store=()
    if store_is_pg; then
        pg_start && pg_createdb "$(store_db "$DDIR")" || return 1
        store=(--store "$(pg_url "$(store_db "$DDIR")")")
    fi
    # tests make many failed authentications from loopback on purpose: the
    # limit (default 10/20 a second) is raised here; t/tokens.sh tests it
    "$DROVERD" --listen 127.0.0.1:0 --data-dir "$DDIR" --threads 4 "${store[@]}" \
        --auth-fail-limit "${DROVER_TEST_AUTH_FAIL_LIMIT:-10000/100000}" "$@" \
        >>"$DDIR/droverd.log" 2>&1 &
    DPID=$!
    _PIDS+=("$DPID")
    wait_for "droverd to listen" _droverd_up
    if [ ! -s "$DDIR/droverd.url" ]; then
        echo "droverd did not start; its log:" >&2
        sed 's/^/    /' "$DDIR/droverd.log" >&2
        return 1
    fi
    if store_is_pg && [ -e "$DDIR/drover.db" ]; then
        echo "droverd_start: DROVER_TEST_STORE=postgres, yet $DDIR/drover.db exists" >&2
        return 1
    fi
    URL=$(tr -d '\n' <"$DDIR/droverd.url")
    ADMIN=$(tr -d '\n' <"$DDIR/admin.token")
    TOKEN=$ADMIN
    return 0
}

# store_is_pg: droverd_start puts the store on PostgreSQL.
store_is_pg() { [ "${DROVER_TEST_STORE:-sqlite}" == postgres ]; }

# store_db DIR: the PostgreSQL database of data dir DIR.
store_db() { echo "d_$(printf '%s' "$(cd "$1" && pwd)" | md5sum | cut -c1-16)"; }

# store_sql DIR SQL: run SQL on DIR's store (SQLite's drover.db, or its
# PostgreSQL database); rows on stdout, columns joined by '|'. The SQL is
# the backend's own dialect: tests branch on store_is_pg where they differ.
store_sql()
{
    if store_is_pg; then
        pg_sql "$(store_db "$1")" "$2"
    else
        sqlite3 "$1/drover.db" "$2"
    fi
}

# droverd_stop [SIGNAL]: signal droverd (default TERM) and reap it; $DEXIT
# gets its exit status.
droverd_stop()
{
    local sig=${1:-TERM}
    [ -n "$DPID" ] || return 0
    kill -"$sig" "$DPID" 2>/dev/null
    wait "$DPID" 2>/dev/null
    DEXIT=$?
    DPID=""
}

droverd_kill9() { droverd_stop KILL; }

# A sanitizer's report in a log: ASan/LSan/UBSan (the ASan tree) or
# ThreadSanitizer (the TSan tree, make test-tsan: a race, a lock-order
# inversion, a signal-unsafe call in a handler, or its own fatal error).
SAN_REPORT='ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|Undefined)|(WARNING|FATAL|ERROR): ThreadSanitizer'
_TSAN_REPORT='(WARNING|FATAL|ERROR): ThreadSanitizer'

# tsan_why FILE...: as why(), the first two ThreadSanitizer reports of each
# log that has one, whole (from the WARNING line to its SUMMARY: both
# threads' stacks; why() would cut them at 1,500 bytes).
tsan_why()
{
    grep -lE "$_TSAN_REPORT" "$@" 2>/dev/null | while IFS= read -r f; do
        echo "== $f"
        awk '/(WARNING|FATAL|ERROR): ThreadSanitizer/ { on = 1; n++ } n > 2 { exit }
             on { print } /^SUMMARY: ThreadSanitizer/ { on = 0 }' "$f" | head -150
    done | sed 's/^/    # /'
    echo
}

# sanitizer_clean NAME: no sanitizer report (SAN_REPORT) in droverd's log,
# nor in the logs of the local provider's agents under its data dir.
sanitizer_clean()
{
    local logs=("$DDIR/droverd.log") f pat=$SAN_REPORT
    while IFS= read -r f; do logs+=("$f"); done < <(find "$DDIR" -mindepth 2 -name agent.log 2>/dev/null)
    if grep -qE "$pat" "${logs[@]}"; then
        fail "$1: no sanitizer report in droverd's or the agents' logs"
        if grep -qE "$_TSAN_REPORT" "${logs[@]}"; then
            tsan_why "${logs[@]}"
        else
            why "$(grep -A30 -E "$pat" "${logs[@]}" | head -60)"
        fi
    else
        ok "$1: no sanitizer report in droverd's or the agents' logs (${#logs[@]} log(s))"
    fi
}

# droverd_finish NAME: clean SIGTERM stop must exit 0 (under ASan this also
# means no leak) and leave no sanitizer report.
droverd_finish()
{
    droverd_stop TERM
    eq "$1: droverd exits 0 on SIGTERM" "$DEXIT" 0
    sanitizer_clean "$1"
}

# ---- HTTP ------------------------------------------------------------------------

ST=""
BODY=""
HDRS=$TMP/.hdrs
TOKEN=""         # bearer token api() sends; empty: no Authorization header

# api METHOD PATH [curl args...]: one request to $URL with $TOKEN. A JSON
# body goes as -d '...' or --data-binary @file (Content-Type is set). The
# request goes through $HTTP_TOOL (t/http_tool.c: curl's options that api()
# uses, plain http, ~4x cheaper to start than curl) when it takes it, else
# through curl; without the tool (a build that lacks it), through curl.
HTTP_TOOL=$(dirname "$DROVERD")/t/http_tool
_no_http_tool() { return 99; }
[ -x "$HTTP_TOOL" ] || HTTP_TOOL=_no_http_tool
# http CURL-ARGS...: curl's call, through $HTTP_TOOL where it takes the
# arguments (exit 99 before any I/O: https, an option it lacks; curl then);
# a test that wraps curl in a function (a network namespace) keeps curl.
# The tests' request loops use it: each curl start costs ~25 ms of CPU more.
http()
{
    if ! declare -F curl >/dev/null; then
        "$HTTP_TOOL" "$@" 2>/dev/null
        local rc=$?
        [ "$rc" == 99 ] || return "$rc"
    fi
    curl "$@"
}

api()
{
    local method=$1 path=$2
    shift 2
    local auth=()
    [ -n "$TOKEN" ] && auth=(-H "Authorization: Bearer $TOKEN")
    local args=(-s -g -o "$TMP/.body" -D "$HDRS" -w '%{http_code}' -X "$method"
                -H 'Content-Type: application/json' "${auth[@]}" "$@" "$URL$path")
    # the status through a file, not $(http ...): a command substitution of
    # a function forks a subshell (~2.5 ms of CPU here), and api() runs
    # thousands of times a suite; $(<FILE) forks nothing
    http "${args[@]}" >"$TMP/.st.$BASHPID"
    ST=$(<"$TMP/.st.$BASHPID")
    [ -n "$ST" ] || ST=000
    BODY=""
    [ -f "$TMP/.body" ] && BODY=$(<"$TMP/.body")
}

# as TOKEN api ...: one call with another token.
as()
{
    local saved=$TOKEN
    TOKEN=$1
    shift
    "$@"
    local rc=$?
    TOKEN=$saved
    return $rc
}

# header NAME: value of a response header of the last call ("" if absent).
header()
{
    grep -i "^$1:" "$HDRS" | head -1 | sed -e 's/^[^:]*:[[:space:]]*//' -e 's/\r$//'
}

# deployment_ready ID N: deployment ID reports at least N ready replicas.
deployment_ready()
{
    api GET "/v1/deployments/$1"
    [ "$ST" == 200 ] && [ "$(jq -r '.status.ready_replicas // 0' <<<"$BODY")" -ge "$2" ]
}

# _uri STRING: STRING percent-encoded into _URI as jq 1.6's @uri does
# (all but letters, digits and -_.!~*'(), byte by byte)
_uri()
{
    local LC_ALL=C s=$1 c i
    _URI=""
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
        [A-Za-z0-9_.~*\'\(\)!-]) _URI+=$c ;;
        *) printf -v c '%%%02X' "'$c"; _URI+=$c ;;
        esac
    done
}

# list_all PATH: every item of a paginated list (following next_page_token),
# as one JSON array on stdout. PATH may carry a query already. Lists that
# take no limit (the catalog's /v1/providers) are read in one call.
# One jq per page reads both its items and its next_page_token (a jq start
# costs ~25 ms of CPU, and waits poll nodes_json / replicas_json).
list_all()
{
    local _la_list
    list_into _la_list "$1" || return 1
    echo "$_la_list"
}

# list_into VAR PATH: list_all's array into VAR, in this shell (no command
# substitution: the polls that read lists start fewer processes).
list_into()
{
    local -n _li_into=$1
    local _li_path=$2 _li_tok="" _li_sep _li_res _li_pages=() _li_st=$ST _li_body=$BODY
    # ST and BODY are the caller's again on return (a poll in this shell
    # must not change what the test's last api call answered)
    trap 'ST=$_li_st BODY=$_li_body; trap - RETURN' RETURN
    [[ "$_li_path" == *\?* ]] && _li_sep="&" || _li_sep="?"
    while :; do
        if [ -n "$_li_tok" ]; then
            _uri "$_li_tok"
            api GET "$_li_path${_li_sep}limit=1000&page_token=$_URI"
        else
            api GET "$_li_path${_li_sep}limit=1000"
            if [ "$ST" == 400 ] && [ "$(jq -r .error.field <<<"$BODY")" == limit ]; then
                api GET "$_li_path"
            fi
        fi
        [ "$ST" == 200 ] || { echo "list $_li_path: $ST $BODY" >&2; return 1; }
        # line 1: the next page's token ("" on the last), line 2: the items
        # (through a file: $(jq ... <<<X) forks twice, this once)
        jq -r '(.next_page_token // ""), ((.items // []) | tojson)' <<<"$BODY" \
            >"$TMP/.page.$BASHPID" && _li_res=$(<"$TMP/.page.$BASHPID") &&
            [ "${_li_res#*$'\n'}" != "$_li_res" ] || { echo "list $_li_path: not a list: $BODY" >&2; return 1; }
        _li_tok=${_li_res%%$'\n'*}
        _li_pages+=("${_li_res#*$'\n'}")
        [ -n "$_li_tok" ] || break
    done
    if [ ${#_li_pages[@]} == 1 ]; then
        _li_into=${_li_pages[0]}
    else
        _li_into=$(printf '%s\n' "${_li_pages[@]}" | jq -c -s 'add')
    fi
}

# ---- CLI -------------------------------------------------------------------------

OUT=""          # stdout of the last cli call
ERR=""          # stderr
RC=""           # exit status

# cli ARGS...: run drover against $URL with $TOKEN.
cli()
{
    DROVER_SERVER=$URL DROVER_TOKEN=$TOKEN "$DROVER" "$@" >"$TMP/.out" 2>"$TMP/.err"
    RC=$?
    OUT=$(<"$TMP/.out")
    ERR=$(<"$TMP/.err")
}

# rc NAME WANT: the last cli call exited WANT.
rc()
{
    if [ "$RC" == "$2" ]; then
        ok "$1 (exit $2)"
    else
        fail "$1 (exit $2)"
        why "exit $RC" "stdout: $OUT" "stderr: $ERR"
    fi
}

# ---- worker nodes: agents, replicas (used by nodes.sh, head_restart.sh,
# selfmanaged.sh, replica_failures.sh) ------------------------------------------
#
# workers_init: for tests that start drover-agent / replicas. Puts the build
# dir first in PATH (droverd finds drover-agent next to itself; replicas run
# drover-demo-model through PATH), writes $TMP/cfg.json with short node
# timeouts (override with WORKERS_CFG='{...}' before calling), and replaces
# the EXIT trap with one that SIGTERMs droverd, kills every process whose
# command line mentions $TMP and every replica process of this test, then
# runs the usual cleanup.
BIN_DIR=$(cd "$(dirname "$DROVERD")" && pwd)
CFG=$TMP/cfg.json

workers_init()
{
    export PATH="$BIN_DIR:$PATH"
    local cfg='{"heartbeat_ms": 500, "node_timeout_ms": 2000, "node_lost_ms": 4000}'
    printf '%s\n' "${WORKERS_CFG:-$cfg}" >"$CFG"
    trap _workers_cleanup EXIT
}

_workers_cleanup()
{
    local p i
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        kill -TERM "$DPID" 2>/dev/null
        for ((i = 0; i < 150; i++)); do
            kill -0 "$DPID" 2>/dev/null || break
            sleep 0.1
        done
    fi
    pkill -KILL -f "$TMP" 2>/dev/null
    for p in $(tmp_replica_pids); do
        kill -KILL "$p" 2>/dev/null
    done
    _cleanup
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port()
{
    python3 -S -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null && return 0
    local p
    for ((;;)); do
        p=$((20000 + RANDOM % 30000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
    done
}

# tmp_replica_pids: pids of the replica processes of this test (their
# DROVER_MODEL_DIR lies under $TMP; their command line does not mention it).
tmp_replica_pids()
{
    local f p
    for f in $(grep -lzs "^DROVER_MODEL_DIR=$TMP/" /proc/[0-9]*/environ 2>/dev/null); do
        p=${f#/proc/}
        p=${p%/environ}
        kill -0 "$p" 2>/dev/null && echo "$p"
    done
}

# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND (backing off, see
# _POLL_NAPS) until it succeeds; 1 (with a note on stderr) after SECONDS. The
# bound only ends a hung test; nothing asserts on how long it took.
wait_until()
{
    local secs=$1 what=$2 end n=0
    shift 2
    end=$((SECONDS + secs))
    while :; do
        "$@" && return 0
        [ "$SECONDS" -ge "$end" ] && break
        sleep "${_POLL_NAPS[n]}"
        [ "$n" -lt $((${#_POLL_NAPS[@]} - 1)) ] && n=$((n + 1))
    done
    echo "gave up after ${secs}s waiting for: $what" >&2
    return 1
}

# nodes_json / replicas_json [QUERY]: every node / replica as one JSON array
# ("[]" when the call fails).
nodes_json()    { list_all "/v1/nodes${1:+?$1}" 2>/dev/null || echo '[]'; }
replicas_json() { list_all "/v1/replicas${1:+?$1}" 2>/dev/null || echo '[]'; }
# nodes_into / replicas_into VAR [QUERY]: the same array into VAR, in this
# shell ("[]" when the call fails): for polls, no subshell and no pipe.
nodes_into()    { list_into "$1" "/v1/nodes${2:+?$2}" 2>/dev/null || printf -v "$1" '[]'; }
replicas_into() { list_into "$1" "/v1/replicas${2:+?$2}" 2>/dev/null || printf -v "$1" '[]'; }
# replicas_ready DEPLOYMENT N: it has exactly N replicas, all ready.
replicas_ready() {
    local l
    replicas_into l "deployment=$1"
    jq -e --argjson n "$2" 'length == $n and all(.[]; .status.state == "ready")' >/dev/null <<<"$l"
}

# dump_workers: nodes, replicas and the tails of droverd's and the agents'
# logs, indented, for a failure's context.
dump_workers()
{
    {
        echo "--- nodes:"
        nodes_json | jq -c '.[] | {id, state: .status.state, cordoned, draining, terminating, gpus: [.status.gpus[]? | .uuid]}' 2>/dev/null
        echo "--- replicas:"
        replicas_json | jq -c '.[] | {id, node, gpus: [.gpus[]? | "\(.uuid)/\(.memory_mib)/\(.compute_percent)"], state: .status.state, pid: .status.pid, restarts: .status.restarts, reason: .status.reason, last_exit: .status.last_exit}' 2>/dev/null
        echo "--- droverd log (tail):"
        [ -n "$DDIR" ] && tail -n 25 "$DDIR/droverd.log" 2>/dev/null
        local f
        for f in "$DDIR"/nodes/*/*/agent.log "${EXTRA_AGENT_LOGS[@]}"; do
            [ -f "$f" ] || continue
            echo "--- $f (tail):"
            tail -n 8 "$f"
        done
    } 2>&1 | head -c 8000 | sed 's/^/    # /'
}
EXTRA_AGENT_LOGS=()

# start_agent NAME [drover-agent args...]: a self-managed agent of $URL on
# data dir $TMP/agents/NAME, logging to $TMP/agents/NAME.log (a --server
# among the args overrides $URL); AG_PID[NAME] gets its pid.
declare -A AG_PID
start_agent()
{
    local name=$1
    shift
    mkdir -p "$TMP/agents"
    "$BIN_DIR/drover-agent" --server "$URL" --data-dir "$TMP/agents/$name" \
        --gpus 1xL4:24576 --cpus 4 --memory-mib 8192 "$@" \
        >>"$TMP/agents/$name.log" 2>&1 </dev/null &
    AG_PID[$name]=$!
    _BG_PIDS+=("$!")
    EXTRA_AGENT_LOGS+=("$TMP/agents/$name.log")
}

# wait_check SECONDS NAME COMMAND...: one check line: ok when COMMAND
# succeeds within SECONDS; otherwise FAIL with dump_workers.
wait_check()
{
    local secs=$1 name=$2
    shift 2
    if wait_until "$secs" "$name" "$@"; then
        ok "$name"
    else
        fail "$name"
        dump_workers
        return 1
    fi
}

# node_field ID JQ: one field of node ID (from GET /v1/nodes/ID), "" if none.
node_field()
{
    api GET "/v1/nodes/$1"
    [ "$ST" == 200 ] || { echo ""; return 0; }
    jq -r "$2 // empty" <<<"$BODY"
}

node_state() { node_field "$1" .status.state; }

# agent_pid NODE: pid of the local provider's agent of NODE (owner $T_OWNER,
# default admin).
T_OWNER=${T_OWNER:-admin}
agent_pid() { tr -d '\n' <"$DDIR/nodes/$T_OWNER/$1/agent.pid" 2>/dev/null; }

# predict_ok ENDPOINT [REPLICA]: POST /predict to a replica's endpoint
# answers 200 with outputs (and, given REPLICA, names it).
predict_ok()
{
    local out
    out=$(curl -s -m 10 -X POST -H 'Content-Type: application/json' \
        -d '{"inputs":"hello"}' "$1/predict") || return 1
    jq -e --arg r "${2-}" '(.outputs | length == 1) and ($r == "" or .replica == $r)' \
        >/dev/null 2>&1 <<<"$out"
}

# logs_sanitizer_clean NAME FILE...: none of the logs has a sanitizer report (SAN_REPORT).
logs_sanitizer_clean()
{
    local name=$1 f bad=""
    shift
    for f in "$@"; do
        [ -f "$f" ] || continue
        if grep -qE "$SAN_REPORT" "$f"; then
            bad="$bad $f"
        fi
    done
    if [ -z "$bad" ]; then
        ok "$name: no sanitizer report in the agents' logs"
    else
        fail "$name: no sanitizer report in the agents' logs"
        # shellcheck disable=SC2086 # $bad: the paths, one word each
        if grep -qE "$_TSAN_REPORT" $bad; then
            tsan_why $bad
        else
            why "$(for f in $bad; do echo "== $f"; grep -A20 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f" | head -40; done)"
        fi
    fi
}

# pid_alive PID: the process exists and is not a zombie (agents outlive the
# droverd that forked them; who reaps them then is up to the system).
pid_alive()
{
    local st
    [ -n "${1-}" ] && [ -r "/proc/$1/stat" ] || return 1
    st=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# pids_gone PID...: none of them is alive.
pids_gone()
{
    local p
    for p in "$@"; do pid_alive "$p" && return 1; done
    return 0
}

# pids_alive PID...: all of them are alive (and there is at least one).
pids_alive()
{
    local p
    [ $# -gt 0 ] || return 1
    for p in "$@"; do pid_alive "$p" || return 1; done
    return 0
}

if store_is_pg; then
    . "$DROVER_SRC/t/lib/pg.bash"
fi
