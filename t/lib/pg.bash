# pg.bash — a throwaway PostgreSQL 15 for the tests (sourced after
# common.bash; not named *.sh, so ctest does not run it).
#
# pg_start initdb's a cluster into $TMP/pg/data (a copy of one initdb'd once per
# build tree, _pg_from_template, where it can) and starts it with pg_ctl:
# on a Unix socket in $TMP/pg/sock (listen_addresses='' — never a port
# another test or a system service could hold), plus 127.0.0.1:$PG_PORT when
# PG_TCP=1. Never the system service: only Debian's binaries in
# /usr/lib/postgresql/15/bin (PG_BIN overrides). PostgreSQL refuses to run
# as root, so as root the server runs as `nobody` (runuser, or setpriv);
# clients (psql, droverd) connect as the cluster's superuser "drover" with
# trust authentication. The server stops at exit, before $TMP goes (an
# exit hook of common.bash). fsync=off: what is under test is that droverd
# answers only after PostgreSQL's COMMIT returned, not the server's own disk.
# PG_NETNS=NS runs the server in network namespace NS; PG_LISTEN=ADDR puts
# its TCP port (PG_TCP=1; PG_PORT_WANT, else a free one) on ADDR instead of
# 127.0.0.1, and PG_HBA_NET=CIDR is trusted too (t/ha_netns.sh); the Unix
# socket, a path, still serves psql from any namespace.
#
#   pg_start            start the instance (once per test; idempotent)
#   pg_createdb NAME    create database NAME (no-op when it exists)
#   pg_url NAME         the URL of database NAME over the socket
#   pg_tcp_url NAME     ... over 127.0.0.1:$PG_PORT (needs PG_TCP=1)
#   pg_sql NAME SQL     run SQL in NAME, print the rows unaligned (a|b)
#   pg_stop [MODE]      pg_ctl stop -m MODE (default fast)
#   pg_restart          start the stopped instance again (same data)

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_DIR=$TMP/pg
PG_SOCK=$PG_DIR/sock
PG_PORT=""
PG_USER=""        # the OS user the server runs as ("" = this one)
_PG_UP=""

if [ ! -x "$PG_BIN/initdb" ] || [ ! -x "$PG_BIN/pg_ctl" ]; then
    echo "no PostgreSQL 15 server binaries in $PG_BIN (run scripts/install-deps)" >&2
    exit 1
fi

# _pg_as CMD...: run CMD as the server's OS user.
_pg_as()
{
    local ns=()
    [ -n "${PG_NETNS:-}" ] && ns=(ip netns exec "$PG_NETNS")
    if [ -z "$PG_USER" ]; then
        "${ns[@]}" "$@"
    elif command -v runuser >/dev/null 2>&1; then
        "${ns[@]}" runuser -u "$PG_USER" -- "$@"
    else
        "${ns[@]}" setpriv --reuid="$PG_USER" --regid="$(id -g "$PG_USER")" --clear-groups -- "$@"
    fi
}

_pg_ctl() { (cd "$PG_DIR" && _pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" "$@"); }

_pg_server_start()
{
    local opts="-k $PG_SOCK -c listen_addresses='' -c fsync=off -c max_connections=50"
    [ -n "$PG_PORT" ] && opts="-k $PG_SOCK -c listen_addresses=${PG_LISTEN:-127.0.0.1} -c fsync=off -c max_connections=50"
    [ -n "$PG_PORT" ] || PG_PORT=5432   # names the socket file only
    if ! _pg_ctl -l "$PG_DIR/server.log" -w -t 120 -o "$opts -p $PG_PORT" start >"$PG_DIR/pg_ctl.out" 2>&1; then
        echo "pg_ctl start failed:" >&2
        sed 's/^/    /' "$PG_DIR/pg_ctl.out" "$PG_DIR/server.log" >&2
        return 1
    fi
    _PG_UP=1
}

pg_start()
{
    [ -n "$_PG_UP" ] && return 0
    if [ "$(id -u)" == 0 ]; then
        PG_USER=nobody
        chmod 711 "$TMP"   # the server's user must reach $TMP/pg
    fi
    mkdir -p "$PG_SOCK"
    [ -n "$PG_USER" ] && chown -R "$PG_USER" "$PG_DIR"
    if [ ${#PG_SOCK} -gt 90 ]; then
        echo "socket dir $PG_SOCK is too long for a Unix socket (set TMPDIR shorter)" >&2
        return 1
    fi
    if ! _pg_from_template; then
        if ! (cd "$PG_DIR" && _pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -U drover --auth=trust \
            --no-sync -E UTF8 --no-locale) >"$PG_DIR/initdb.out" 2>&1; then
            echo "initdb failed:" >&2
            sed 's/^/    /' "$PG_DIR/initdb.out" >&2
            return 1
        fi
    fi
    [ -n "${PG_HBA_NET:-}" ] && echo "host all all $PG_HBA_NET trust" >>"$PG_DIR/data/pg_hba.conf"
    [ "${PG_TCP:-}" == 1 ] && PG_PORT=${PG_PORT_WANT:-$(free_port)}
    _pg_server_start || return 1
    _EXIT_HOOKS+=(_pg_exit)
}

# _pg_from_template: $PG_DIR/data as a copy of a cluster initdb'd once per
# build tree and server user (BIN_DIR/pg-template-USER, made under a lock
# by the first test that needs it): initdb costs ~0.9 s of CPU, the copy
# ~0.1, and a suite starts some 20 clusters. Fails (the caller runs
# initdb) where the build tree is not writable or anything goes wrong.
_pg_from_template()
{
    local t="$BIN_DIR/pg-template-${PG_USER:-$(id -un)}"
    [ -n "${BIN_DIR:-}" ] && [ -w "$BIN_DIR" ] || return 1
    (
        flock 9 || exit 1
        [ -f "$t.failed" ] && exit 1   # tried once (the server user cannot reach it)
        if [ ! -f "$t/ok" ]; then
            rm -rf "$t" && mkdir -p "$t" && { [ -z "$PG_USER" ] || chown "$PG_USER" "$t"; } || exit 1
            if ! (cd "$t" && _pg_as "$PG_BIN/initdb" -D "$t/data" -U drover --auth=trust \
                --no-sync -E UTF8 --no-locale) >"$t/initdb.out" 2>&1; then
                mv "$t/initdb.out" "$t.failed"
                exit 1
            fi
            touch "$t/ok"
        fi
    ) 9>"$BIN_DIR/pg-template.lock" || return 1
    cp -a "$t/data" "$PG_DIR/data" || { rm -rf "$PG_DIR/data"; return 1; }   # (initdb then)
}

pg_stop()
{
    [ -n "$_PG_UP" ] || return 0
    _pg_ctl -m "${1:-fast}" -w stop >>"$PG_DIR/pg_ctl.out" 2>&1
    _PG_UP=""
}

pg_restart() { [ -n "$_PG_UP" ] || _pg_server_start; }

_pg_exit() { pg_stop immediate; }

pg_psql() { "$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$PG_SOCK" -p "$PG_PORT" -U drover "$@"; }

pg_createdb()
{
    local have
    have=$(pg_psql -d postgres -c "select 1 from pg_database where datname = '$1'") || return 1
    [ "$have" == 1 ] || pg_psql -d postgres -c "create database \"$1\"" || return 1
}

pg_url() { echo "postgres://drover@/$1?host=$PG_SOCK&port=$PG_PORT"; }
pg_tcp_url() { echo "postgres://drover@127.0.0.1:$PG_PORT/$1"; }
pg_sql() { pg_psql -d "$1" -c "$2"; }
