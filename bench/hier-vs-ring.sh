#!/usr/bin/env bash
# bench/hier-vs-ring.sh - issue 3's hierarchical path against the ring, in
# one run: float32 sum allreduce on H emulated hosts (scripts/cluster.sh)
# with P ranks each, links shaped to RATE, sizes 512 KiB..128 MiB x4; the
# two alternate REPS times and the table keeps each one's best time.
#
#   make && bench/hier-vs-ring.sh [--hosts H] [--ppn P] [--reps R] [--rate RATE]
#
# Needs root and iproute2 (the emulated cluster). Prints a markdown table:
# size, ring and hier time per call (out of place, slowest rank's mean) and
# busbw, hier's speed-up, and what the automatic choice picks.
set -euo pipefail
cd "$(dirname "$0")/.."
H=2 P=${P:-2} REPS=${REPS:-3} RATE=1gbit
while [ $# -gt 0 ]; do
  case $1 in
  --hosts) H=$2; shift 2 ;;
  --ppn) P=$2; shift 2 ;;
  --reps) REPS=$2; shift 2 ;;
  --rate) RATE=$2; shift 2 ;;
  *) echo "usage: $0 [--hosts H] [--ppn P] [--reps R] [--rate RATE]" >&2; exit 2 ;;
  esac
done
if [ -z "${CLUSTER_HOSTS:-}" ]; then
  exec scripts/cluster.sh with "$H" --rate "$RATE" -- env P="$P" REPS="$REPS" bash "$0"
fi
N=$((CLUSTER_HOSTS * P))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for rep in $(seq "$REPS"); do
  for algo in ring hier; do
    scripts/cluster.sh launch -n "$N" --ppn "$P" -- build/bin/baton-bench -a "$algo" \
      -c allreduce -b 512K -e 128M -f 4 -w 2 -n 5 2>/dev/null |
      awk '$1 ~ /^[0-9]+$/ {print $1, $6}' >"$out/$algo.$rep"
  done
done
# What the automatic choice picks, per size ("bytes algo"), from rank 0's
# INFO lines (baton-bench's own small allreduces log lines too: matched by size).
scripts/cluster.sh launch -n "$N" --ppn "$P" -- env BATON_DEBUG=INFO \
  build/bin/baton-bench -c allreduce -b 512K -e 128M -f 4 -w 0 -n 1 2>&1 |
  sed -nE 's/.*\[0\] baton INFO COLL allreduce ([0-9]+) B on .* -> ([a-z]+).*/\1 \2/p' >"$out/pick"
echo "allreduce on $CLUSTER_HOSTS emulated hosts x $P ranks, links $RATE, best of $REPS (time per call, out of place)"
echo
echo "| bytes | ring us | hier us | ring busbw MB/s | hier busbw MB/s | hier speed-up | auto picks |"
echo "|---|---|---|---|---|---|---|"
for bytes in $(awk '{print $1}' "$out/ring.1"); do
  r=$(cat "$out"/ring.* | awk -v b="$bytes" '$1 == b {print $2}' | sort -g | head -1)
  h=$(cat "$out"/hier.* | awk -v b="$bytes" '$1 == b {print $2}' | sort -g | head -1)
  p=$(awk -v b="$bytes" '$1 == b {print $2; exit}' "$out/pick")
  awk -v b="$bytes" -v r="$r" -v h="$h" -v n="$N" -v p="$p" 'BEGIN {
    f = b * 2 * (n - 1) / n
    printf "| %d | %.0f | %.0f | %.1f | %.1f | %.2fx | %s |\n", b, r, h, f / r, f / h, r / h, p }'
done
