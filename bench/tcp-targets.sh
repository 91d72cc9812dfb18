#!/usr/bin/env bash
# bench/tcp-targets.sh - issue 3's targets for baton's TCP transport, each
# measured side by side with its yardstick in one run.
#
#   bench/tcp-targets.sh [--reps R] [--rate RATE]
#
# For H = 2, 4 and 8 emulated hosts (scripts/cluster.sh, one rank per host,
# links of RATE each way, default 1gbit): iperf3's payload rate over one
# link (host 1 -> host 0, 5 s), then baton's float32 sum allreduce at 8 B
# (with BATON_ALGO=ring, then the automatic choice), 512 KiB and 32 MiB
# (best of R runs of baton-bench -w 3 -n 10, default 3; -w 100 -n 1000 at
# 8 B). Prints busbw as a share of the iperf3 rate measured on the same
# cluster and, at the end, busbw at 32 MiB with 8 hosts against 2.
# Needs root, iproute2, iperf3; run `make` first.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3
RATE=1gbit
while [ $# -gt 0 ]; do
  case $1 in
  --reps) REPS=$2; shift 2 ;;
  --rate) RATE=$2; shift 2 ;;
  *) echo "usage: $0 [--reps R] [--rate RATE]" >&2; exit 2 ;;
  esac
done
command -v iperf3 >/dev/null || { echo "tcp-targets.sh: needs iperf3 (apt-get install -y iperf3)" >&2; exit 1; }

if [ "${1:-}" != "--inside" ] && [ -z "${CLUSTER_HOSTS:-}" ]; then
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  for h in 2 4 8; do
    scripts/cluster.sh with "$h" --rate "$RATE" -- env REPS="$REPS" bash "$0" | tee -a "$log"
  done
  # "baton allreduce 32M on H hosts: out of place T us, busbw X MB/s = ..; in place T us, Y MB/s = .."
  awk '/^baton allreduce 32M on/ { h = $5; o[h] = $13; i[h] = $(NF - 3) }
    END { if (o[2] > 0 && o[8] > 0)
      printf "32M busbw, 8 hosts against 2: out of place %.3f, in place %.3f\n", o[8] / o[2], i[8] / i[2] }' "$log"
  exit 0
fi

# Inside `cluster.sh with H`.
H=$CLUSTER_HOSTS
scripts/cluster.sh exec 0 -- iperf3 -s -1 -D >/dev/null
sleep 0.5
mbit=$(scripts/cluster.sh exec 1 -- iperf3 -c 198.18.0.1 -t 5 -f m |
  awk '/receiver/ {print $(NF-2)}')
echo "== $H hosts at $RATE: iperf3 host 1 -> host 0: $mbit Mbit/s = $(awk -v m="$mbit" 'BEGIN {printf "%.1f", m / 8}') MB/s"
best() { # size [algo] -> bytes, best out-of-place and best in-place time (us) of REPS runs
  local size=$1 algo=${2:-} out bytes=0 bo=1e30 bi=1e30 o i iters="-w 3 -n 10"
  [ "$size" = 8 ] && iters="-w 100 -n 1000" # 10 calls of 8 B are one scheduler hiccup away
  for _ in $(seq "$REPS"); do
    out=$(BATON_ALGO=$algo scripts/cluster.sh launch -n "$H" --ppn 1 -- build/bin/baton-bench -c allreduce \
      -b "$size" -e "$size" $iters 2>/dev/null | awk '$1 ~ /^[0-9]+$/ {print $1, $6, $12; exit}')
    read -r bytes o i <<<"$out"
    bo=$(awk -v a="$o" -v b="$bo" 'BEGIN {print (a < b ? a : b)}')
    bi=$(awk -v a="$i" -v b="$bi" 'BEGIN {print (a < b ? a : b)}')
  done
  echo "$bytes $bo $bi"
}
# 8 B twice: the ring alone (issue 3's target) and the automatic choice (issue 4's)
for run in 8:ring 8: 512K: 32M:; do
  size=${run%%:*} algo=${run#*:}
  read -r bytes o i <<<"$(best "$size" "$algo")"
  # busbw = bytes * 2(N-1)/N / time, in MB/s; the mean time of the calls
  awk -v b="$bytes" -v o="$o" -v i="$i" -v n="$H" -v m="$mbit" -v s="$size" -v a="${algo:+ ($algo)}" 'BEGIN {
    f = b * 2 * (n - 1) / n; mb = m / 8
    printf "baton allreduce %s%s on %d hosts: out of place %.1f us, busbw %.1f MB/s = %.1f%% of iperf3; in place %.1f us, %.1f MB/s = %.1f%%\n", s, a, n, o, f / o, 100 * f / o / mb, i, f / i, 100 * f / i / mb }'
done
