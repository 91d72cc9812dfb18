#!/usr/bin/env bash
# bench/registered.sh - registered buffers (baton_mem_alloc, the direct
# algorithm) against the staged path and against the memory-bound limit,
# side by side in one run: R rounds, each measuring the copy rate of every
# rank copying at once (baton-bench --membw) and then, for each
# collective, baton-bench on malloc'd buffers (staged, BATON_CMA=0) and with
# --registered, one after the other. Prints each round and the medians.
#
#   bench/registered.sh [-n RANKS] [-s SIZE] [-i ITERS] [-c COLL,...] ROUNDS
#   bench/registered.sh -n 2 -s 128M -i 20 -c allreduce,reduce_scatter,allgather 5
#
# The limit is the collective's minimal memory traffic per rank over the
# copy rate (docs/performance.md, "Registered buffers"): with K the size
# baton-bench reports (the whole buffer) and B the bytes per second one
# rank copies while every rank copies (each byte read once, written once),
# allreduce must read K and write K per rank, K / B; reduce_scatter and
# allgather read and write K + K/N between them, (K + K/N) / 2B, and an
# allgather in place, whose own block is there already, K / 2B.
# efficiency = limit / time, speedup = staged / registered (p50s, out of
# place and in place). Take /tmp/baton-bench.lock first if other
# benchmarks may run.
set -euo pipefail
ranks=2 size=128M iters=20 colls=allreduce,reduce_scatter,allgather
while getopts n:s:i:c: o; do
  case $o in
  n) ranks=$OPTARG ;;
  s) size=$OPTARG ;;
  i) iters=$OPTARG ;;
  c) colls=$OPTARG ;;
  *) sed -n 2,20p "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { sed -n 2,20p "$0" >&2; exit 2; }
rounds=$1
bin=$(cd "$(dirname "$0")/.." && pwd)/build/bin
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
bench() { "$bin/baton-run" -n "$ranks" "$bin/baton-bench" -b "$size" -e "$size" -w 3 -n "$iters" "$@"; }
for ((r = 0; r < rounds; r++)); do
  bw=$(bench --membw | sed -n 's/.* \([0-9.]*\) GB\/s per rank$/\1/p')
  for c in ${colls//,/ }; do
    # BATON_CMA=0: malloc'd allgathers and alltoalls would go by the kernel.
    staged=$(BATON_CMA=0 bench -c "$c" | awk '/^ +[0-9]/ {print $10, $16}')
    reg=$(bench -c "$c" --registered | awk '/^ +[0-9]/ {print $10, $16}')
    echo "$r $c $bw $staged $reg" | tee -a "$raw"
  done
done
echo "# medians over $rounds rounds, N=$ranks, $size; times in us (p50 of $iters calls)"
printf '%-15s %8s %11s %11s %11s %11s %8s %8s %8s %8s\n' coll "GB/s" "staged oop" "staged ip" \
  "reg oop" "reg ip" "eff oop" "eff ip" "x oop" "x ip"
awk -v n="$ranks" -v sz="$size" '
  function bytes(s,   m) {
    m = 1
    if (s ~ /K$/) m = 1024; else if (s ~ /M$/) m = 1048576; else if (s ~ /G$/) m = 1073741824
    sub(/[KMG]$/, "", s)
    return s * m
  }
  function median(a, k,   i, j, t) {
    for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j] < a[j - 1]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  {
    c = $2; k = ++cnt[c]; K = bytes(sz)
    # Bytes copied per rank at least (reads and writes over 2), out of
    # place and in place: only allgather in place starts with its own block.
    to = c == "allreduce" ? K : (K + K / n) / 2
    ti = c ~ /^allgather/ ? K / 2 : to
    lo = to / ($3 * 1e9) * 1e6; li = ti / ($3 * 1e9) * 1e6   # us
    bw[c, k] = $3; so[c, k] = $4; si[c, k] = $5; ro[c, k] = $6; ri[c, k] = $7
    eo[c, k] = lo / $6; ei[c, k] = li / $7; xo[c, k] = $4 / $6; xi[c, k] = $5 / $7
    if (!(c in seen)) { seen[c] = 1; order[++nc] = c }
  }
  END {
    for (q = 1; q <= nc; q++) {
      c = order[q]; k = cnt[c]
      for (f = 1; f <= 9; f++) {
        for (i = 1; i <= k; i++) {
          v[i] = f == 1 ? bw[c, i] : f == 2 ? so[c, i] : f == 3 ? si[c, i] : f == 4 ? ro[c, i] : \
                 f == 5 ? ri[c, i] : f == 6 ? eo[c, i] : f == 7 ? ei[c, i] : f == 8 ? xo[c, i] : xi[c, i]
        }
        m[f] = median(v, k)
      }
      printf "%-15s %8.2f %11.0f %11.0f %11.0f %11.0f %8.2f %8.2f %8.2f %8.2f\n", c, m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9]
    }
  }' "$raw"
