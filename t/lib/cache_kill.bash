# cache_kill.bash — what t/cache.sh (an http origin) and t/cache_https.sh
# (https) share: mk and the node cache's SIGKILL-mid-download scenario.
# Sourced after common.bash. Needs $TOOL (build/t/cache_tool), $O (the
# range_server.py origin, token "sekrit"), $MiB and the caller's sent_all
# (bytes the origin sent since its last /_reset).

# mk NAME SIZE_MIB...: origin/NAME/fN.bin of random bytes; NAME.json its manifest (1 MiB chunks)
mk()
{
    local name=$1 i=0
    shift
    mkdir -p "origin/$name"
    for s in "$@"; do
        head -c $((s * MiB)) /dev/urandom >"origin/$name/f$i.bin"
        i=$((i + 1))
    done
    "$TOOL" manifest "origin/$name" $MiB >"$name.json"
}
#
# cache_kill_resume LABEL CACHE_DIR: two 8 MiB files fetched at 2 MiB/s by
# two fetcher threads; the process is SIGKILLed once 5 chunks are verified;
# a restart completes the download, re-fetching exactly what was not
# verified, and both runs together send at most the size plus one chunk
# per file (the chunks in flight); the bytes are right.
cache_kill_resume()
{
    local label=$1 c=$2 kpid first again verified out snap
    mk "$label" 8 8
    curl -s "$O/_reset" >/dev/null
    curl -s "$O/_slow?bps=$((2 * MiB))" >/dev/null
    rm -f "$label.in"
    mkfifo "$label.in"
    "$TOOL" run "$c" $((100 * MiB)) 2 "$O/$label" sekrit <"$label.in" >"$label.out" 2>&1 &
    kpid=$!
    _BG_PIDS+=($kpid)
    exec 7>"$label.in"
    printf 'ensure %s.json\nwait %s.json\n' "$label" "$label" >&7
    _kill_lines() { cat "$c"/tmp/*.chunks 2>/dev/null | grep -cv '^drover'; }
    local i
    for ((i = 0; i < 600; i++)); do [ "$(_kill_lines)" -ge 5 ] && break; sleep 0.1; done
    kill -KILL "$kpid"
    wait "$kpid" 2>/dev/null
    exec 7>&-
    verified=$(( $(_kill_lines) * MiB + $(cat "$c"/blobs/sha256/* 2>/dev/null | wc -c) ))
    check "$label: some chunks were verified before the kill" test "$verified" -gt 0
    check "$label: the download was not complete" test "$verified" -lt $((16 * MiB))
    first=$(sent_all)
    curl -s "$O/_slow?bps=0" >/dev/null
    curl -s "$O/_reset" >/dev/null
    out=$(printf 'ensure %s.json\nwait %s.json\n' "$label" "$label" |
          "$TOOL" run "$c" $((100 * MiB)) 2 "$O/$label" sekrit)
    contains "$label: the restarted download completes" "$out" "ready "
    again=$(sent_all)
    eq "$label: the restart fetched exactly what was not verified" "$again" $((16 * MiB - verified))
    # 2 fetcher threads for 2 files: at most one chunk per file was in flight
    check "$label: both runs together sent $((first + again)) <= size + one chunk per file" \
        test $((first + again)) -le $((16 * MiB + 2 * MiB))
    snap=$(sed -n 's/^ready \([^ ]*\).*/\1/p' <<<"$out")
    eq "$label: the bytes are right" "$(cat "$snap"/f0.bin "$snap"/f1.bin 2>&1 | sha256sum)" \
        "$(cat "origin/$label/f0.bin" "origin/$label/f1.bin" | sha256sum)"
}
