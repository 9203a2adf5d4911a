#!/usr/bin/env bash
# tools/netns-cluster.sh: a small cluster on one machine: K "nodes", each a network namespace with
# its own address on a private bridge, its link shaped to a bandwidth, so ranks on different nodes
# talk over real TCP through a limited link (issue 30). Needs root (ip netns, tc).
#
#   tools/netns-cluster.sh up K [--rate 1gbit] [--burst 256kb]   make nodes 0 .. K-1
#   tools/netns-cluster.sh run NODE CMD [ARGS...]                 run CMD inside node NODE (its
#                                                                 network, and host name <p>-n<i>)
#   tools/netns-cluster.sh addr NODE                              print node NODE's address
#   tools/netns-cluster.sh bytes NODE                             bytes sent and received on its link
#   tools/netns-cluster.sh link NODE up|down                      bring its link up or down
#   tools/netns-cluster.sh down                                   remove everything
#   tools/netns-cluster.sh check                                  exit 0 when a cluster can be made
#
# Names: every object starts with $DDPL_NETNS_PREFIX (default "ddpl", at most 6 characters so
# that interface names fit Linux's 15): namespaces <p>-n<i>, the bridge <p>-br, veth pairs <p>-v<i>
# (the bridge's end) and eth0 (the node's end). Two clusters with different prefixes live side by
# side (specs run in parallel). Node i has 10.77.0.<i+1>/24 on its eth0 and loopback up.
#
# Shaping: a token bucket (tc tbf) on both ends of each node's veth, so what the node sends and
# what it receives are each capped at the rate (netem is not available here: no added latency).
# `bytes` reads the node's own counters (/sys/class/net/eth0/statistics inside the namespace):
# what crossed its link.
#
# down removes every object with the prefix, whatever made it: `up` calls it first, so a harness
# that was killed leaves nothing behind once anything runs again; specs also call it on exit.
set -euo pipefail
prefix=${DDPL_NETNS_PREFIX:-ddpl}
if [ ${#prefix} -gt 6 ] || ! [[ $prefix =~ ^[a-z][a-z0-9]*$ ]]; then
    echo "netns-cluster: DDPL_NETNS_PREFIX must be 1 to 6 lower-case letters and digits, starting with a letter (got '$prefix')" >&2
    exit 2
fi
bridge=$prefix-br

die() {
    echo "netns-cluster: $*" >&2
    exit 1
}

node_ns() { echo "$prefix-n$1"; }

need_node() { # NODE: a node of the cluster that is up
    [[ ${1:-} =~ ^[0-9]+$ ]] || die "expected a node number, got '${1:-}'"
    ip netns list | awk '{print $1}' | grep -qx "$(node_ns "$1")" ||
        die "node $1 does not exist (tools/netns-cluster.sh up K first; prefix $prefix)"
}

cmd_check() {
    [ "$(id -u)" = 0 ] || { echo "netns-cluster: not root: network namespaces cannot be made" >&2; return 1; }
    command -v ip >/dev/null && command -v tc >/dev/null ||
        { echo "netns-cluster: ip or tc (iproute2) is missing" >&2; return 1; }
    local probe=$prefix-probe
    ip netns add "$probe" 2>/dev/null || { echo "netns-cluster: ip netns add fails here" >&2; return 1; }
    ip netns del "$probe"
}

cmd_down() {
    local ns link
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-n[0-9]+$" || true); do
        # processes still inside would keep the namespace's devices alive: end them first
        for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
        grep -E "^$prefix-(v[0-9]+|br)$" || true); do
        ip link del "$link" 2>/dev/null || true
    done
}

shape() { # NS-or-empty DEV RATE BURST
    local run=()
    [ -n "$1" ] && run=(ip netns exec "$1")
    "${run[@]}" tc qdisc replace dev "$2" root tbf rate "$3" burst "$4" latency 100ms
}

cmd_up() {
    local k=${1:-}
    [[ $k =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] && [ "$k" -le 250 ] || die "up: expected 1 to 250 nodes, got '$k'"
    shift
    local rate=1gbit burst=256kb
    while [ $# -gt 0 ]; do
        case $1 in
        --rate) rate=${2:?--rate needs a value (1gbit, 100mbit)}; shift 2 ;;
        --burst) burst=${2:?--burst needs a value (256kb)}; shift 2 ;;
        *) die "up: unknown option '$1'" ;;
        esac
    done
    cmd_check || exit 1
    cmd_down
    ip link add "$bridge" type bridge
    ip link set "$bridge" up
    local i
    for ((i = 0; i < k; i++)); do
        local ns veth=$prefix-v$i
        ns=$(node_ns "$i")
        ip netns add "$ns"
        ip link add "$veth" type veth peer name eth0 netns "$ns"
        ip link set "$veth" master "$bridge" up
        ip netns exec "$ns" ip link set lo up
        ip netns exec "$ns" ip addr add "10.77.0.$((i + 1))/24" dev eth0
        ip netns exec "$ns" ip link set eth0 up
        shape "$ns" eth0 "$rate" "$burst"
        shape "" "$veth" "$rate" "$burst"
    done
    echo "netns-cluster: $k node(s) up, prefix $prefix, links $rate"
}

cmd_run() {
    need_node "${1:-}"
    local ns
    ns=$(node_ns "$1")
    shift
    [ $# -gt 0 ] || die "run: expected a command"
    # a host name of its own too (a UTS namespace), as a machine has: fault messages name the
    # node by it, and only processes of the same host are looked up in /proc
    exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}

cmd_addr() {
    need_node "${1:-}"
    echo "10.77.0.$(($1 + 1))"
}

cmd_bytes() {
    need_node "${1:-}"
    local ns
    ns=$(node_ns "$1")
    echo "tx $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)" \
        "rx $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)"
}

cmd_link() {
    need_node "${1:-}"
    case ${2:-} in
    up | down) ip link set "$prefix-v$1" "$2" ;;
    *) die "link: expected up or down, got '${2:-}'" ;;
    esac
}

case ${1:-} in
up) shift; cmd_up "$@" ;;
down) cmd_down ;;
run) shift; cmd_run "$@" ;;
addr) shift; cmd_addr "$@" ;;
bytes) shift; cmd_bytes "$@" ;;
link) shift; cmd_link "$@" ;;
check) cmd_check ;;
*) die "usage: tools/netns-cluster.sh up K [--rate R] | run NODE CMD... | addr NODE | bytes NODE | link NODE up|down | down | check" ;;
esac
