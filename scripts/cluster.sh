#!/usr/bin/env bash
# scripts/cluster.sh - an emulated cluster of H hosts on this machine.
#
#   cluster.sh up H [--rate RATE] [--cc CC]
#                                       build hosts baton-h0 .. baton-h(H-1)
#   cluster.sh down                     remove everything `up` made (idempotent)
#   cluster.sh status                   list the hosts that are up
#   cluster.sh exec I -- CMD...         run CMD on host I
#   cluster.sh launch -n N --ppn P [--tag-output] [--timeout S] -- PROG ARGS...
#                                       N baton ranks, rank r on host r/P
#   cluster.sh with H [--rate RATE] [--cc CC] -- CMD...
#                                       up, CMD in this namespace with
#                                       CLUSTER_HOSTS=H exported, then down
#
# Each host is a network namespace with loopback and one veth, eth0, whose
# other end is a port of the bridge br0 inside the namespace baton-sw, the
# "switch". Host i has 198.18.0.(i+1)/24, from 198.18.0.0/15, the range set
# aside for benchmarking. No namespace has a default route or any other
# address (IPv6 is off in them), so nothing can be sent anywhere but to the
# other emulated hosts. Each link is shaped to RATE (tc rates: 1gbit,
# 100mbit, 10gbit ...; default 1gbit; 0 = unshaped) in both directions with
# a token bucket: tbf on eth0 in the host for what the host sends, tbf on the
# bridge port in the switch for what it receives. This kernel has tbf but no
# netem, so there is no added delay: latency is whatever veth costs.
#
# TCP in the hosts uses the congestion control CC (default reno; "system"
# keeps the kernel's default). This kernel defaults to bbr, and bbr over
# tbf's queue never sees its minimum RTT again, so every 10 s each flow
# drops to 4 packets in flight for 200 ms (ProbeRTT): four iperf3 flows
# around the ring fall to 330-510 Mbit/s for 0.2 s every 10 s, and a 32 MiB
# allreduce on 4 hosts takes 550 ms instead of 422 once in ~24 calls.
# With reno (or cubic, which a non-root namespace may not pick here:
# net.ipv4.tcp_allowed_congestion_control is "reno bbr") neither happens.
# It is a per-namespace default, so Open MPI, Gloo and iperf3 in the hosts
# get it too.
#
# The root namespace is not touched: links are created inside the
# namespaces, and the namespaces' names (baton-h*, baton-sw) are the only
# thing that appears outside them, under /run/netns. `with` holds a lock
# (/run/baton-cluster.lock) for its whole run, so two jobs that both use
# `with` take turns instead of tearing down each other's cluster; `up` and
# `down` outside a `with` refuse while a `with` job holds it.
#
# launch starts the ranks with baton-run (BATON_RUN, else build/bin/baton-run
# of this checkout, else baton-run on PATH) and its multi-host options;
# rank 0 serves the rendezvous at 198.18.0.1 on host 0. Needs root and
# iproute2 (ip, tc).
set -u

PREFIX=baton-h
SWITCH=baton-sw
BRIDGE=br0
SUBNET=198.18.0
MAX_HOSTS=250
LOCK=/run/baton-cluster.lock
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '3,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

need_tools() {
  [ "$(id -u)" = 0 ] || die "must run as root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN); try sudo"
  local t
  for t in ip tc; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found: install iproute2 (apt-get install -y iproute2)"
  done
}

# The hosts that are up, as indices, in order.
hosts_up() {
  ip netns list 2>/dev/null | sed -n "s/^$PREFIX\([0-9][0-9]*\)\( .*\)\{0,1\}\$/\1/p" | sort -n
}

count_up() { hosts_up | wc -l; }

# in_range V MIN MAX: V is a decimal integer in MIN..MAX.
in_range() {
  [[ $1 =~ ^[0-9]{1,15}$ ]] || return 1
  [ "$((10#$1))" -ge "$2" ] && [ "$((10#$1))" -le "$3" ]
}

ns_exists() { ip netns list 2>/dev/null | grep -q "^$1\( \|\$\)"; }

# RATE as tc understands it -> bits per second (integer); empty when bad.
rate_bits() {
  local r=${1,,} num unit mult
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)([a-z]*)$ ]] || return 0
  num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
  case $unit in
  "" | bit) mult=1 ;;
  kbit) mult=1000 ;;
  mbit) mult=1000000 ;;
  gbit) mult=1000000000 ;;
  tbit) mult=1000000000000 ;;
  bps) mult=8 ;;
  kbps) mult=8000 ;;
  mbps) mult=8000000 ;;
  gbps) mult=8000000000 ;;
  *) return 0 ;;
  esac
  awk -v n="$num" -v m="$mult" 'BEGIN { printf "%.0f\n", n * m }'
}

# shape NS DEV RATE_BITS: a token bucket on DEV's egress. The bucket holds
# 1 ms at the rate (at least 32 KiB, so that full-sized TSO packets need not
# be split often) and the queue holds about 2 ms: enough for TCP to fill the
# link, short enough that the queue adds little latency.
shape() {
  local ns=$1 dev=$2 bits=$3 burst limit
  burst=$((bits / 8 / 1000))
  [ $burst -lt 32768 ] && burst=32768
  limit=$((bits / 8 / 500))
  [ $limit -lt $((2 * burst)) ] && limit=$((2 * burst))
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "${bits}bit" burst "$burst" limit "$limit" ||
    die "tc tbf on $dev in $ns failed (does this kernel have sch_tbf?)"
}

# Runs in the namespace NS: loopback up, IPv6 off.
ns_init() {
  ip netns add "$1" || die "cannot create network namespace $1"
  # shellcheck disable=SC2016 # the inner shell expands $f
  ip netns exec "$1" sh -c 'for f in /proc/sys/net/ipv6/conf/default/disable_ipv6 /proc/sys/net/ipv6/conf/all/disable_ipv6; do [ -w "$f" ] && echo 1 >"$f"; done; true'
  ip -n "$1" link set lo up || die "cannot bring up loopback in $1"
}

# take_lock [wait]: the lock that `with` holds for its whole run. `up` and
# `down` take it only for their own run and only when not inside a `with`
# (BATON_CLUSTER_WITH is set there), so that they never change a cluster
# that a `with` job is using.
take_lock() {
  [ -n "${BATON_CLUSTER_WITH:-}" ] && return 0
  exec 9>"$LOCK" || die "cannot open the lock $LOCK"
  flock -n 9 && return 0
  [ "${1:-}" = wait ] ||
    die "a 'cluster.sh with' job holds $LOCK and uses the cluster that is up; wait for it to end"
  echo "cluster.sh: another job holds $LOCK; waiting for it" >&2
  flock 9 || die "cannot take the lock $LOCK"
}

cmd_up() {
  local h="" rate=1gbit bits=0 i cc=reno
  while [ $# -gt 0 ]; do
    case $1 in
    --rate) [ $# -ge 2 ] || die "--rate wants a value"; rate=$2; shift 2 ;;
    --rate=*) rate=${1#--rate=}; shift ;;
    --cc) [ $# -ge 2 ] || die "--cc wants a value"; cc=$2; shift 2 ;;
    --cc=*) cc=${1#--cc=}; shift ;;
    -*) die "up: unknown option '$1'" ;;
    *) [ -z "$h" ] || die "up: one host count, not '$h' and '$1'"; h=$1; shift ;;
    esac
  done
  in_range "$h" 1 $MAX_HOSTS || die "up wants a number of hosts in 1..$MAX_HOSTS, not '${h}'"
  if [ "$rate" != 0 ]; then
    bits=$(rate_bits "$rate")
    in_range "$bits" 1 999999999999999 ||
      die "--rate '$rate' is not a tc rate (like 1gbit, 100mbit, 10gbit, 125mbps) or 0 for unshaped"
  fi
  need_tools
  take_lock
  if ns_exists $SWITCH || [ "$(count_up)" -gt 0 ]; then
    die "a cluster is already up ($(count_up) hosts); run '$0 down' first"
  fi
  # Whatever fails from here leaves a partial cluster: take it down.
  trap 'cmd_down >/dev/null 2>&1' EXIT
  ns_init $SWITCH
  ip -n $SWITCH link add $BRIDGE type bridge forward_delay 0 stp_state 0 ||
    die "cannot create a bridge (is the bridge module there?)"
  ip -n $SWITCH link set $BRIDGE up
  for ((i = 0; i < h; i++)); do
    local ns=$PREFIX$i port=h$i
    ns_init "$ns"
    ip -n "$ns" link add eth0 type veth peer name "$port" netns $SWITCH ||
      die "cannot create the veth pair of host $i"
    ip -n $SWITCH link set "$port" master $BRIDGE
    ip -n $SWITCH link set "$port" up
    if [ "$cc" != system ]; then
      ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$cc" ||
        die "cannot set TCP congestion control '$cc' in $ns (available: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control); a namespace may pick only $(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)); try --cc system"
    fi
    ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [ "$bits" -gt 0 ]; then
      shape "$ns" eth0 "$bits"
      shape $SWITCH "$port" "$bits"
    fi
  done
  trap - EXIT
  echo "cluster up: $h hosts ${PREFIX}0..$PREFIX$((h - 1)), $SUBNET.1..$SUBNET.$h/24, links $([ "$bits" -gt 0 ] && echo "shaped to $rate each way" || echo unshaped), TCP $([ "$cc" = system ] && echo "$(cat /proc/sys/net/ipv4/tcp_congestion_control) (the system's)" || echo "$cc")"
}

# Stops what still runs in NS (only processes started inside it, by
# exec/launch), then removes NS; its veth ends go with it.
ns_remove() {
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null | tr '\n' ' ')
  if [ -n "${pids// /}" ]; then
    echo "cluster.sh: stopping processes still in $1: $pids" >&2
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    sleep 0.5
    pids=$(ip netns pids "$1" 2>/dev/null | tr '\n' ' ')
    # shellcheck disable=SC2086
    [ -n "${pids// /}" ] && kill -KILL $pids 2>/dev/null
  fi
  ip netns del "$1" 2>/dev/null
}

cmd_down() {
  need_tools
  take_lock
  local i n=0
  for i in $(hosts_up); do
    ns_remove "$PREFIX$i"
    n=$((n + 1))
  done
  ns_exists $SWITCH && ns_remove $SWITCH
  echo "cluster down ($n hosts removed)"
  return 0
}

cmd_status() {
  need_tools
  local i
  if ! ns_exists $SWITCH && [ "$(count_up)" = 0 ]; then
    echo "no cluster is up"
    return 0
  fi
  for i in $(hosts_up); do
    printf '%s%s  %s  %s\n' "$PREFIX" "$i" \
      "$(ip -n "$PREFIX$i" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')" \
      "$(ip netns exec "$PREFIX$i" tc qdisc show dev eth0 2>/dev/null | head -1)"
  done
}

cmd_exec() {
  local i=${1:-}
  [[ $i =~ ^[0-9]+$ ]] || die "exec wants a host index, not '$i'"
  shift
  [ "${1:-}" = -- ] && shift
  [ $# -gt 0 ] || die "exec $i: no command"
  need_tools
  ns_exists "$PREFIX$i" || die "host $i is not up (hosts up: $(hosts_up | tr '\n' ' '))"
  exec ip netns exec "$PREFIX$i" "$@"
}

find_baton_run() {
  if [ -n "${BATON_RUN:-}" ]; then
    echo "$BATON_RUN"
  elif [ -x "$HERE/../build/bin/baton-run" ]; then
    echo "$HERE/../build/bin/baton-run"
  else
    command -v baton-run || die "baton-run not found: build it (make) or set BATON_RUN"
  fi
}

cmd_launch() {
  local n="" ppn=1 opts=() hosts runner
  while [ $# -gt 0 ]; do
    case $1 in
    -n) [ $# -ge 2 ] || die "-n wants a value"; n=$2; shift 2 ;;
    --ppn) [ $# -ge 2 ] || die "--ppn wants a value"; ppn=$2; shift 2 ;;
    --tag-output) opts+=(--tag-output); shift ;;
    --timeout) [ $# -ge 2 ] || die "--timeout wants a value"; opts+=(--timeout "$2"); shift 2 ;;
    --) shift; break ;;
    -*) die "launch: unknown option '$1'" ;;
    *) break ;;
    esac
  done
  [ $# -gt 0 ] || die "launch: no program to run"
  in_range "$n" 1 1024 || die "launch wants -n N with N in 1..1024, not '$n'"
  in_range "$ppn" 1 1024 || die "launch wants --ppn P with P in 1..1024, not '$ppn'"
  need_tools
  hosts=$(count_up)
  [ "$hosts" -gt 0 ] || die "no cluster is up: run '$0 up H' first"
  # Ranks go to hosts 0, 1, ... in order: every host up to the last used one must be there.
  local need=$(((n + ppn - 1) / ppn)) i
  for ((i = 0; i < need; i++)); do
    ns_exists "$PREFIX$i" || die "launch -n $n --ppn $ppn needs hosts 0..$((need - 1)), but host $i is not up ($hosts hosts up)"
  done
  runner=$(find_baton_run)
  exec "$runner" -n "$n" --ppn "$ppn" --host-cmd "ip netns exec $PREFIX%h" \
    --addr "$SUBNET.1" "${opts[@]+"${opts[@]}"}" -- "$@"
}

cmd_with() {
  local h="" up_args=()
  while [ $# -gt 0 ]; do
    case $1 in
    --rate) [ $# -ge 2 ] || die "--rate wants a value"; up_args+=(--rate "$2"); shift 2 ;;
    --rate=*) up_args+=("$1"); shift ;;
    --cc) [ $# -ge 2 ] || die "--cc wants a value"; up_args+=(--cc "$2"); shift 2 ;;
    --cc=*) up_args+=("$1"); shift ;;
    --) shift; break ;;
    -*) die "with: unknown option '$1'" ;;
    *) [ -z "$h" ] || die "with: one host count, not '$h' and '$1'"; h=$1; shift ;;
    esac
  done
  [ $# -gt 0 ] || die "with: no command (with H [--rate RATE] [--cc CC] -- CMD...)"
  need_tools
  take_lock wait
  # Under the lock nothing else makes a cluster: what is up now is someone
  # else's, and what comes up from here on is ours to take down.
  if ns_exists $SWITCH || [ "$(count_up)" -gt 0 ]; then
    die "a cluster is already up ($(count_up) hosts), made by 'up' outside any 'with'; run '$0 down' first"
  fi
  export BATON_CLUSTER_WITH=$$
  # The EXIT trap takes the cluster down on every way out; a signal during
  # `up` ends the script once `up` is done. CMD runs in a process group of
  # its own (set -m) so that a signal to this script reaches all of it, and
  # so that it does not ignore SIGINT as a background job would; it does not
  # inherit the lock.
  local child rc
  trap 'cmd_down >/dev/null' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  (cmd_up "$h" "${up_args[@]+"${up_args[@]}"}") || exit 1
  set -m
  CLUSTER_HOSTS=$h "$@" 9>&- &
  child=$!
  set +m
  trap 'forward INT' INT
  trap 'forward TERM' TERM
  trap 'forward HUP' HUP
  wait "$child"
  rc=$?
  while kill -0 "$child" 2>/dev/null; do # wait returned early for a trap
    wait "$child"
    rc=$?
  done
  return $rc
}

# A signal to `with`: pass it on to CMD's group; `wait` then returns.
# shellcheck disable=SC2317 # called from the traps
forward() {
  echo "cluster.sh: got SIG$1; passing it to the command" >&2
  kill "-$1" -- "-$child" 2>/dev/null
}

main() {
  local cmd=${1:-}
  [ $# -gt 0 ] && shift
  case $cmd in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  exec) cmd_exec "$@" ;;
  launch) cmd_launch "$@" ;;
  with) cmd_with "$@" ;;
  -h | --help | help) usage ;;
  "") usage >&2; exit 2 ;;
  *) echo "cluster.sh: unknown command '$cmd'" >&2; usage >&2; exit 2 ;;
  esac
}

main "$@"; exit  # on one line: a run never reads what an edit of this file put after it
