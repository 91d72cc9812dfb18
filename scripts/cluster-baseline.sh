#!/usr/bin/env bash
# scripts/cluster-baseline.sh - what the emulated cluster's links carry,
# measured with iperf3 and ping: the figures baton's TCP transport is held to.
#
#   scripts/cluster-baseline.sh [--hosts H] [--rate RATE] [--time S]
#
# Brings up H hosts (default 4) at RATE (default 1gbit) with cluster.sh, and
# prints, in Mbit/s of TCP payload as iperf3's receiver counts it:
#   one stream host 1 -> host 0; host 0 -> host 1 (iperf3 -R); both
#   directions at once (--bidir); a ring, every host i sending to host i+1 at
#   once, as a ring allreduce does; round-trip times between two hosts, idle
#   and while a stream fills the link.
# Then the same single stream over unshaped links, for the cost of veth
# itself. Needs root, iproute2, iperf3 and ping (iputils-ping).
set -u
cd "$(dirname "$0")/.." || exit 1
H=4 RATE=1gbit T=10
while [ $# -gt 0 ]; do
  case $1 in
  --hosts) H=$2; shift 2 ;;
  --rate) RATE=$2; shift 2 ;;
  --time) T=$2; shift 2 ;;
  *) echo "usage: $0 [--hosts H] [--rate RATE] [--time S]" >&2; exit 2 ;;
  esac
done
for t in iperf3 ping; do
  command -v $t >/dev/null || { echo "$0: $t not found (apt-get install -y iperf3 iputils-ping)" >&2; exit 1; }
done
[ "$H" -ge 2 ] 2>/dev/null || { echo "$0: --hosts wants at least 2" >&2; exit 2; }
C=scripts/cluster.sh

# The phases run inside `cluster.sh with`, which calls this script again.
if [ "${CLUSTER_BASELINE_PHASE:-}" = "" ]; then
  echo "# cluster baseline: git $(git rev-parse --short HEAD 2>/dev/null), $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
  CLUSTER_BASELINE_PHASE=shaped $C with "$H" --rate "$RATE" -- "$0" --hosts "$H" --rate "$RATE" --time "$T" || exit 1
  CLUSTER_BASELINE_PHASE=unshaped $C with 2 --rate 0 -- "$0" --hosts 2 --rate 0 --time "$T"
  exit
fi

addr() { echo "198.18.0.$(($1 + 1))"; }

# servers PORT HOSTS...: an iperf3 server for one test on each host.
servers() {
  local port=$1 h
  shift
  for h in "$@"; do
    $C exec "$h" -- iperf3 -s -1 -D -B "$(addr "$h")" -p "$port" >/dev/null || exit 1
  done
  sleep 0.5
}

# The receiver's Mbit/s from iperf3 -f m output: one figure per direction.
rx_mbits() { awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") print $i }'; }

one_way() { # client host, server host, extra iperf3 options
  servers 5201 "$2"
  $C exec "$1" -- iperf3 -c "$(addr "$2")" -p 5201 -t "$T" -f m "${@:3}" | rx_mbits | paste -sd' '
}

rtt() { # 200 pings h1 -> h0: min/avg/max/mdev in ms
  $C exec 1 -- ping -c 200 -i 0.01 -q "$(addr 0)" | sed -n 's/^rtt [^=]*= //p'
}

echo "## $CLUSTER_HOSTS hosts, links ${RATE} each way (iperf3 ${T} s per figure, receiver's count)"
echo "one stream h1 -> h0:          $(one_way 1 0) Mbit/s"
if [ "$CLUSTER_BASELINE_PHASE" = shaped ]; then
  echo "one stream h0 -> h1 (-R):     $(one_way 1 0 -R) Mbit/s"
  echo "both directions at once:      $(one_way 1 0 --bidir) Mbit/s"
  ring=()
  for ((h = 0; h < H; h++)); do ring+=("$h"); done
  servers 5202 "${ring[@]}"
  tmp=$(mktemp -d)
  for ((h = 0; h < H; h++)); do
    $C exec "$h" -- iperf3 -c "$(addr $(((h + 1) % H)))" -p 5202 -t "$T" -f m >"$tmp/$h" &
  done
  wait
  echo "ring, h(i) -> h(i+1) at once: $(cat "$tmp"/* | rx_mbits | paste -sd' ') Mbit/s"
  rm -rf "$tmp"
  echo "ping h1 -> h0, idle:          $(rtt) (min/avg/max/mdev)"
  servers 5203 0
  $C exec 1 -- iperf3 -c "$(addr 0)" -p 5203 -t 4 >/dev/null &
  sleep 1
  echo "ping h1 -> h0, link full:     $(rtt) (min/avg/max/mdev)"
  wait
else
  echo "ping h1 -> h0, idle:          $(rtt) (min/avg/max/mdev)"
fi
