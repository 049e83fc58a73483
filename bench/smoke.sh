# shellcheck shell=bash
# bench/smoke.sh — the smoke mode every bench/*/run shares (sourced, not run).
#
# With BENCH_SMOKE=1 (what `make bench-smoke` and so `make test` set) a
# benchmark runs with tiny durations, sizes and counts — seconds, not
# minutes — so that its whole path is exercised between releases, and
# prints its table without writing docs/benchmarks.md. Its numbers mean
# nothing. A run script calls, before it reads its knobs:
#
#   bench_smoke NAME KNOB=VALUE...
#
# which, in smoke mode, gives each knob that is unset (or empty) its smoke
# value, clears BENCH_DOCS (a smoke table never lands in the docs) and makes
# sleep and jq cheaper to call (below); otherwise it changes nothing. A knob
# set in the environment wins over its smoke value. Each run script also
# declares the header of every table it prints, one comment line each, for
# scripts/bench-smoke to look for in its output (a prefix of the header line
# is enough):
#
#   # smoke-table: | first column | second column |

bench_smoke() {
  local name=$1 kv var
  shift
  case "${BENCH_SMOKE:-0}" in
    0) return 0 ;;
    1) ;;
    *) echo "bench/$name: BENCH_SMOKE must be 0 or 1, not '$BENCH_SMOKE'" >&2; exit 2 ;;
  esac
  for kv in "$@"; do
    var=${kv%%=*}
    [ -n "${!var:-}" ] || export "${kv?}"
  done
  export BENCH_DOCS=""
  # cheaper helpers, the same answers: bash's loadable sleep (a poll's nap
  # starts no process) and, where scripts/bench-smoke found it in the build,
  # t/jq_fast for the script's own jq calls (jq 1.6's output byte for byte,
  # jq itself for what it does not take; t/lib/common.bash does the same)
  if [ -f /usr/lib/bash/sleep ]; then enable -f /usr/lib/bash/sleep sleep 2>/dev/null || true; fi
  # shellcheck disable=SC2317  # jq() is called by the run script, not here
  if [ -x "${BENCH_JQ_FAST:-}" ]; then jq() { "$BENCH_JQ_FAST" "$@"; }; fi
  echo "bench/$name: smoke mode (tiny sizes, numbers meaningless; docs/benchmarks.md not written)" >&2
}

# bench_no_data NAME MESSAGE: the data a benchmark reads is not there (the
# shared traces beside the repository, ../shared). A full run fails; a smoke
# run exits 77, which scripts/bench-smoke reports as skipped with MESSAGE
# (a fresh clone without ../shared still passes make test; CI has it).
bench_no_data() {
  local name=$1
  shift
  if [ "${BENCH_SMOKE:-0}" = 1 ]; then
    echo "bench/$name: skipped: $*" >&2
    exit 77
  fi
  echo "bench/$name: $*" >&2
  exit 1
}
