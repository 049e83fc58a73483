#!/usr/bin/env bash
# http_tool.sh — t/http_tool (the small client api() uses instead of curl)
# against curl itself: the same requests to t/lib/http_echo.py through both,
# and the same status line for -w, the same body, the same header block and
# the same exit status from each; the echo shows they sent the same request
# (User-Agent aside). What the tool leaves to curl (https, an option it
# lacks, -d @FILE, a body over 1 MiB, a dot segment) exits 99 before any I/O.
. "$(dirname "$0")/lib/common.bash"
TOOL=$(dirname "$DROVERD")/t/http_tool
[ -x "$TOOL" ] || { fail "http_tool is built next to droverd ($TOOL)"; t_done; }

python3 -S "$DROVER_SRC/t/lib/http_echo.py" "$TMP/port" >"$TMP/echo.log" 2>&1 &
_BG_PIDS+=("$!")
wait_for "the echo server's port" test -s "$TMP/port"
E=http://127.0.0.1:$(<"$TMP/port")

# same NAME ARGS...: both clients, ARGS then the usual -s -o -D -w; compare
same()
{
    local name=$1 who out rc
    shift
    for who in tool curl; do
        rm -f "$TMP/$who.body" "$TMP/$who.hdrs"
        if [ "$who" == tool ]; then
            out=$("$TOOL" -s -g -o "$TMP/$who.body" -D "$TMP/$who.hdrs" -w '%{http_code}' "$@")
        else
            out=$(curl -s -g -o "$TMP/$who.body" -D "$TMP/$who.hdrs" -w '%{http_code}' "$@")
        fi
        rc=$?
        printf '%s %s\n' "$out" "$rc" >"$TMP/$who.out"
        touch "$TMP/$who.body" "$TMP/$who.hdrs"
    done
    if cmp -s "$TMP/tool.out" "$TMP/curl.out" && cmp -s "$TMP/tool.body" "$TMP/curl.body" &&
        cmp -s "$TMP/tool.hdrs" "$TMP/curl.hdrs"; then
        ok "$name: $(<"$TMP/tool.out") from both"
    else
        fail "$name"
        why "tool: $(<"$TMP/tool.out") $(head -c 600 "$TMP/tool.body") | curl: $(<"$TMP/curl.out") $(head -c 600 "$TMP/curl.body")"
        diff "$TMP/tool.hdrs" "$TMP/curl.hdrs" | head -10 | sed 's/^/    # /'
    fi
}

same "GET" -X GET "$E/echo?a=1&b=%20x"
same "GET with JSON Content-Type and a bearer" -X GET -H 'Content-Type: application/json' \
    -H 'Authorization: Bearer abc' "$E/echo/x"
same "POST -d" -X POST -H 'Content-Type: application/json' -d '{"name":"c1","n":[1,2]}' "$E/echo"
same "-d without -X is a POST, form type" -d 'a=b&c=d' "$E/echo"
same "PATCH with If-Match" -X PATCH -H 'If-Match: "3"' -d '{"x":1}' "$E/echo"
same "DELETE" -X DELETE "$E/echo/thing"
same "an empty -d" -X POST -d '' "$E/echo"
printf 'line one\nline "two"\r\n\0binary' >"$TMP/payload"
same "--data-binary @FILE, bytes as they are" -X PUT --data-binary @"$TMP/payload" "$E/echo"
same "'Accept:' drops a header, 'X-Empty;' sends one empty" -X GET -H 'Accept:' -H 'X-Empty;' "$E/echo"
same "a header given twice goes twice" -X GET -H 'X-Two: 1' -H 'X-Two: 2' "$E/echo"
same "--path-as-is" --path-as-is -X GET "$E/echo/../x"
same "a chunked answer" -X GET "$E/chunked"
same "204, no body" -X GET "$E/nocontent"
same "100 Continue, then the answer" -X POST -d 'x' "$E/continue"
same "a body that ends at the close" -X GET "$E/eof"
same "404" -X GET "$E/nope"
same "no answer: 000, exit 52" -X GET "$E/close"
same "past -m: 000, exit 28" -m 0.5 -X GET "$E/slow"
CLOSED=$(free_port)
same "nothing listens: 000, exit 7" -X GET "http://127.0.0.1:$CLOSED/"

# left to curl: exit 99, and no request reached the server
for args in "-X GET https://127.0.0.1:1/" "-X GET http://localhost.localdomain:1/" \
    "-F a=b $E/echo" "-d @$TMP/payload $E/echo" "-w %{size_download} $E/echo" \
    "-X GET $E/echo/../x" "-X GET $E/echo/./x" "-X POST -H Transfer-Encoding:chunked -d x $E/echo"; do
    # shellcheck disable=SC2086
    "$TOOL" -s $args >/dev/null 2>&1
    rc=$?
    if [ "$rc" == 99 ]; then ok "left to curl (99): $args"; else fail "left to curl (99): $args"; why "exit $rc"; fi
done
head -c $((1024 * 1024 + 1)) /dev/zero >"$TMP/big"
"$TOOL" -s -X POST --data-binary @"$TMP/big" "$E/echo" >/dev/null 2>&1
[ "$?" == 99 ] && ok "a body over 1 MiB is left to curl (99)" || fail "a body over 1 MiB is left to curl (99)"
t_done
