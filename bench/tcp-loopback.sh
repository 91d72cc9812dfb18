#!/usr/bin/env bash
# bench/tcp-loopback.sh - issue 3's loopback target: N=2, 128 MiB float32 sum
# allreduce over TCP, baton (BATON_TRANSPORT=tcp) against Open MPI's TCP path
# and Gloo's ring, alternating, REPS rounds (default 3); the peers run with
# tcmalloc preloaded (bench/Makefile.peers builds them). Prints the time per
# call (out of place, in place) and busbw of every run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
TC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
ARGS=(-c allreduce -b 128M -e 128M -w 1 -n 4)
row() { awk -v lib="$1" '$1 ~ /^[0-9]+$/ {printf "%-10s oop %8.1f ms %5.2f GB/s   in-place %8.1f ms %5.2f GB/s\n", lib, $6 / 1000, $8, $12 / 1000, $14; exit}'; }
for r in $(seq "$REPS"); do
  echo "== round $r"
  BATON_TRANSPORT=tcp build/bin/baton-run -n 2 build/bin/baton-bench "${ARGS[@]}" 2>/dev/null | row baton
  mpirun.openmpi --allow-run-as-root -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo \
    -x LD_PRELOAD=$TC build/bench/mpi_bench "${ARGS[@]}" 2>/dev/null | row openmpi
  store=$(mktemp -d)
  build/bin/baton-run -n 2 env LD_PRELOAD=$TC build/bench/gloo_bench --store "$store" \
    --host 127.0.0.1 -a ring "${ARGS[@]}" 2>/dev/null | row gloo-ring
  rm -rf "$store"
done
