#!/usr/bin/env bash
# bench/alternate.sh - one size of one collective (default allreduce),
# alternating between builds: R rounds, each running every TREE's
# baton-bench once in turn, then the median, lowest and highest time of each
# build (out of place, in place). Short single-size runs repeated many times
# tell a few percent apart where the sweep of compare-shm.sh (-n 20 per
# size) cannot.
#
#   bench/alternate.sh [-n RANKS] [-b SIZE] [-i ITERS] [-c COLL] ROUNDS TREE...
#   bench/alternate.sh 10 . "$(bench/baseline.sh f1cff54)"
#   bench/alternate.sh -c allgather -b 2M -i 300 3 . /tmp/old ompi mpich
#
# Each TREE is a built baton checkout (TREE/build/bin/baton-run and
# baton-bench), or `ompi` or `mpich`: the peer's mpi_bench built in this
# checkout (make -f bench/Makefile.peers), shared memory only, with
# Debian's libtcmalloc_minimal.so.4 preloaded as in bench/compare.sh.
# Take /tmp/baton-bench.lock first if other benchmarks may run.
set -euo pipefail
ranks=2 size=8 iters=100000 coll=allreduce
while getopts n:b:i:c: o; do
  case $o in
  c) coll=$OPTARG ;;
  n) ranks=$OPTARG ;;
  b) size=$OPTARG ;;
  i) iters=$OPTARG ;;
  *) sed -n 2,19p "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { sed -n 2,19p "$0" >&2; exit 2; }
rounds=$1
shift
here=$(cd "$(dirname "$0")/.." && pwd)
tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for ((i = 0; i < rounds; i++)); do
  for t in "$@"; do
    args=(-c "$coll" -b "$size" -e "$size" -w $((iters / 50 + 1)) -n "$iters")
    case $t in
    ompi) cmd=(mpirun.openmpi -n "$ranks" --mca btl self,vader -x "LD_PRELOAD=$tcmalloc"
      "$here/build/bench/mpi_bench") ;;
    mpich) cmd=(mpiexec.mpich -n "$ranks" -env LD_PRELOAD "$tcmalloc"
      "$here/build/bench/mpi_bench.mpich") ;;
    *) cmd=("$t/build/bin/baton-run" -n "$ranks" -- "$t/build/bin/baton-bench") ;;
    esac
    [ "$t" = ompi ] && [ "$(id -u)" = 0 ] && cmd=("${cmd[0]}" --allow-run-as-root "${cmd[@]:1}")
    # More ranks than cores: Open MPI's own switches for it, as bench/compare.sh.
    [ "$t" = ompi ] && [ "$ranks" -gt "$(nproc)" ] &&
      cmd=("${cmd[0]}" --oversubscribe --mca mpi_yield_when_idle 1 "${cmd[@]:1}")
    line=$("${cmd[@]}" "${args[@]}" | awk '$1 ~ /^[0-9]+$/ {print $6, $12; exit}')
    [ -n "$line" ] || { echo "alternate.sh: no result from $t" >&2; exit 1; }
    echo "$t $line" | tee -a "$raw"
  done
done
python3 - "$raw" <<'PY'
import collections, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    tree, oop, inp = line.split()
    runs.setdefault(tree, ([], []))[0].append(float(oop))
    runs[tree][1].append(float(inp))
print("%-40s %s" % ("build", "out of place: median (low-high) us | in place"))
for tree, (a, b) in runs.items():
    print("%-40s %.3f (%.2f-%.2f) | %.3f (%.2f-%.2f)" % (tree, statistics.median(a), min(a), max(a),
                                                        statistics.median(b), min(b), max(b)))
PY
