# netns.bash — hosts in network namespaces on one bridge, for the tests that
# run drover across hosts (t/netns.sh, t/ha_netns.sh). The caller sets NSP
# (the run's namespace prefix, e.g. drvtPID), HOSTS (names) and IP (an
# associative array name -> address on a /24), and sources this file.
# Namespaces are NSP-NAME; the bridge lives in NSP-sw (nothing changes in
# the host's network).

# in_ns HOST CMD...: run CMD in HOST's namespace
in_ns() { local h=$1; shift; ip netns exec "$NSP-$h" "$@"; }

# ns_remove PREFIX: kill what still runs in PREFIX-* (this test's processes)
# and delete the namespaces (their veth ends and the bridge go with them)
ns_remove()
{
    local ns p
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1-"); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
}

# ns_remove_stale TAG: remove the namespaces TAGPID-* of runs whose PID is gone
# (left by a run that was killed)
ns_remove_stale()
{
    local old
    for old in $(ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^$1\([0-9]*\)-.*/\1/p" | sort -u); do
        kill -0 "$old" 2>/dev/null || ns_remove "$1$old"
    done
}

# net_setup: the bridge br0 in NSP-sw (which must exist), and for each of
# HOSTS a namespace whose eth0 (its IP/24) is cabled to the bridge
net_setup()
{
    local h sw=$NSP-sw
    ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || return 1
    for h in "${HOSTS[@]}"; do
        ip netns add "$NSP-$h" &&
            ip -n "$sw" link add "$h" type veth peer name eth0 netns "$NSP-$h" &&
            ip -n "$sw" link set "$h" master br0 up &&
            ip -n "$NSP-$h" link set lo up &&
            ip -n "$NSP-$h" addr add "${IP[$h]}/24" dev eth0 &&
            ip -n "$NSP-$h" link set eth0 up || return 1
    done
}

# reach HOST ADDR PORT: a TCP connect from HOST's namespace succeeds within 5 s
# (a connect into a cut link would retry for minutes)
reach() { in_ns "$1" timeout 5 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; }
