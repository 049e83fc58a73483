#!/usr/bin/env bash
# cli_links.sh — the drover CLI links no libcurl and no TLS stack (it
# starts ~650 times a suite, and most of a libcurl-linked start was the
# loader mapping libcurl's ~35 libraries): its HTTP is common/http_client.c,
# which speaks plain http itself and loads libcurl with dlopen only for
# https. Checked on the binary (readelf: no NEEDED entry for libcurl,
# libssl, libcrypto or GnuTLS) and at run time (LD_DEBUG=libs): a request
# to a plain http:// server maps no libcurl, one to an https:// server
# does, and both fail with the CLI's "cannot reach droverd at URL" when
# nothing listens. drover-agent is held to the same.
. "$(dirname "$0")/lib/common.bash"

AGENT=$(dirname "$DROVERD")/drover-agent

for bin in "$DROVER" "$AGENT"; do
    needed=$(readelf -d "$bin" | grep NEEDED)
    if [ -z "$needed" ]; then
        fail "readelf lists what $(basename "$bin") needs"
    elif grep -Eq 'libcurl|libssl|libcrypto|libgnutls' <<<"$needed"; then
        fail "$(basename "$bin") has no NEEDED libcurl, libssl, libcrypto or GnuTLS"
        why "$needed"
    else
        ok "$(basename "$bin") has no NEEDED libcurl, libssl, libcrypto or GnuTLS"
    fi
done

# a port nothing listens on
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# loaded NAME: the libraries the last run mapped ($TMP/ld.*) include NAME
loaded() { cat "$TMP"/ld.* 2>/dev/null | grep -q "calling init: .*$1"; }

# get_nodes SCHEME: `drover get nodes` at SCHEME://127.0.0.1:PORT under
# LD_DEBUG=libs; checks its exit status and message
get_nodes()
{
    rm -f "$TMP"/ld.*
    LD_DEBUG=libs LD_DEBUG_OUTPUT=$TMP/ld DROVER_SERVER=$1://127.0.0.1:$PORT "$DROVER" get nodes \
        >"$TMP/out" 2>"$TMP/err"
    eq "$1, nothing listening: exit 1" "$?" 1
    contains "... cannot reach droverd at the URL" "$(cat "$TMP/err")" \
        "cannot reach droverd at $1://127.0.0.1:$PORT"
}

get_nodes http
check "... jansson was mapped (LD_DEBUG sees the libraries)" loaded libjansson
check "... libcurl was not" eval '! loaded libcurl'
get_nodes https
check "... libcurl was loaded for it" loaded libcurl

t_done
