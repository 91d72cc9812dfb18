#!/usr/bin/env bash
# bench/compare-shm.sh - baton against Open MPI over shared memory, in one
# run: float32 sum allreduce, N=2 and N=4, 8 B and 128 MiB plus a sweep of
# 8 B..128 MiB by x4 for context. Prints a markdown table to stdout and to
# bench/results/shm-<date>.md; the raw outputs of every run go next to it
# in shm-<date>.raw (ignored by git).
#
#   make && make -f bench/Makefile.peers && bench/compare-shm.sh [--reps R]
#
# Method. Both sides run the same benchmark code (tools/baton-bench.c and
# bench/peers/mpi_bench.c): per size, warm-up calls, a barrier, then timed
# calls; the time is the slowest rank's average per call (nccl-tests).
# Small machines are noisy, and this one may be shared, so each run is
# repeated R times, baton and Open MPI alternating, and the tables give
# the best (lowest) time of the R runs; before each run the script waits
# (up to QUIET_WAIT seconds) for a second in which other processes use
# less than QUIET_PCT% of the CPUs, and it reports the worst it saw.
#
# Open MPI runs with the vader shared-memory BTL and tcmalloc preloaded (its
# allocator makes Open MPI's own buffers cheaper, the usual tuned setup);
# with more ranks than cores it needs --oversubscribe and
# mpi_yield_when_idle, or the busy-polling ranks starve each other.
set -euo pipefail

cd "$(dirname "$0")/.."

REPS=3
QUIET_PCT=${QUIET_PCT:-25}
QUIET_WAIT=${QUIET_WAIT:-120}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
BUILD=${BUILD:-build}
RANKS="2 4"

while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "compare-shm.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

BATON_RUN=$BUILD/bin/baton-run
BATON_BENCH=$BUILD/bin/baton-bench
MPI_BENCH=$BUILD/bench/mpi_bench
for f in "$BATON_RUN" "$BATON_BENCH"; do
  [ -x "$f" ] || { echo "compare-shm.sh: $f missing: run make" >&2; exit 2; }
done
[ -x "$MPI_BENCH" ] || {
  echo "compare-shm.sh: $MPI_BENCH missing: run make -f bench/Makefile.peers" >&2
  exit 2
}
TCMALLOC=${TCMALLOC:-/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4}
[ -e "$TCMALLOC" ] ||
  TCMALLOC=$(ldconfig -p 2>/dev/null | awk '/libtcmalloc_minimal\.so\.4 /{print $NF; exit}')
[ -e "$TCMALLOC" ] || {
  echo "compare-shm.sh: $TCMALLOC missing: apt-get install libtcmalloc-minimal4" >&2
  exit 2
}

NPROC=$(nproc)
STAMP=$(date +%Y-%m-%d-%H%M%S)
mkdir -p bench/results
MD=bench/results/shm-$STAMP.md
RAW=bench/results/shm-$STAMP.raw
ROWS=$(mktemp)
trap 'rm -f "$ROWS"' EXIT
: > "$RAW"

# Percent of all CPUs busy over one second, from /proc/stat.
cpu_busy() {
  local u n s i w q sq st t1 b1 t2 b2
  read -r _ u n s i w q sq st _ < /proc/stat
  t1=$((u + n + s + i + w + q + sq + st)); b1=$((u + n + s + q + sq + st))
  sleep 1
  read -r _ u n s i w q sq st _ < /proc/stat
  t2=$((u + n + s + i + w + q + sq + st)); b2=$((u + n + s + q + sq + st))
  echo $((100 * (b2 - b1) / (t2 - t1 > 0 ? t2 - t1 : 1)))
}

WORST_BUSY=0
wait_quiet() {
  local busy waited=0
  while busy=$(cpu_busy); [ "$busy" -ge "$QUIET_PCT" ] && [ $waited -lt "$QUIET_WAIT" ]; do
    waited=$((waited + 1))
  done
  [ "$busy" -gt "$WORST_BUSY" ] && WORST_BUSY=$busy
  LAST_BUSY=$busy
}

mpi_cmd() { # N
  local cmd="mpirun.openmpi -n $1"
  [ "$(id -u)" = 0 ] && cmd+=" --allow-run-as-root"
  cmd+=" --mca btl self,vader"
  [ "$1" -gt "$NPROC" ] && cmd+=" --oversubscribe --mca mpi_yield_when_idle 1"
  echo "$cmd -x LD_PRELOAD=$TCMALLOC $MPI_BENCH"
}
baton_cmd() { # N
  echo "$BATON_RUN -n $1 --timeout $RUN_TIMEOUT -- $BATON_BENCH"
}

# The two kinds of run: the sweep (which gives the 128 MiB figure too) and
# 8 B alone with enough calls to average out the clock.
KINDS="sweep tiny"
args_of() {
  case "$1" in
    sweep) echo "-c allreduce -d float32 -o sum -b 8 -e 128M -f 4 -w 5 -n 20" ;;
    tiny) echo "-c allreduce -d float32 -o sum -b 8 -e 8 -w 100 -n 1000" ;;
  esac
}

# One run: appends "lib n kind rep size t_oop t_ip" rows to $ROWS.
run_one() { # lib n kind rep
  local lib=$1 n=$2 kind=$3 rep=$4 cmd out rc=0
  if [ "$lib" = baton ]; then cmd="$(baton_cmd "$n") $(args_of "$kind")"
  else cmd="$(mpi_cmd "$n") $(args_of "$kind")"; fi
  wait_quiet
  echo "## $lib n=$n $kind rep=$rep others-busy=${LAST_BUSY}% : $cmd" >> "$RAW"
  out=$(timeout "$RUN_TIMEOUT" $cmd 2>&1) || rc=$?
  printf '%s\n' "$out" >> "$RAW"
  if [ $rc -ne 0 ]; then
    echo "compare-shm.sh: $lib n=$n $kind rep $rep failed (rc $rc); see $RAW" >&2
    return 0
  fi
  printf '%s\n' "$out" | awk -v p="$lib $n $kind $rep" \
    '!/^#/ && NF >= 17 { print p, $1, $6, $12 }' >> "$ROWS"
  echo "compare-shm.sh: $lib n=$n $kind rep $rep done (others busy ${LAST_BUSY}%)" >&2
}

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in $(seq 1 "$REPS"); do
  for n in $RANKS; do
    for kind in $KINDS; do
      run_one baton "$n" "$kind" "$rep"
      run_one ompi "$n" "$kind" "$rep"
    done
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report

GIT_REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src include tools 2>/dev/null || GIT_REV+=" + uncommitted changes"
OMPI_VER=$(mpirun.openmpi --version 2>/dev/null | head -1)
CPU=$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)

# best TIME per (lib n size group), over all reps; the 8 B figure comes
# from the tiny run, every other from the sweep.
best() { # kind -> "lib n size t_oop t_ip" with the lowest times
  awk -v kind="$1" '$3 == kind {
      k = $1 " " $2 " " $5
      if (!(k in o) || $6 < o[k]) o[k] = $6
      if (!(k in i) || $7 < i[k]) i[k] = $7
    } END { for (k in o) print k, o[k], i[k] }' "$ROWS"
}
BEST=$(mktemp)
trap 'rm -f "$ROWS" "$BEST"' EXIT
{ best sweep; best tiny | sed 's/^/tiny:/'; } > "$BEST"

report() {
  echo "# baton vs Open MPI over shared memory: float32 sum allreduce"
  echo
  echo "- date: $(date '+%Y-%m-%d %H:%M:%S %Z'); host: $(hostname), $NPROC CPUs ($CPU)"
  echo "- baton: git $GIT_REV, launched with \`$BATON_RUN\`"
  echo "- Open MPI: $OMPI_VER; vader BTL; **LD_PRELOAD=$TCMALLOC** (tcmalloc)"
  echo "  for every Open MPI run; with N > $NPROC also --oversubscribe --mca mpi_yield_when_idle 1"
  echo "- method: each figure is the **best of $REPS runs**, baton and Open MPI alternating;"
  echo "  within a run, time = slowest rank's average per call over -n calls after -w warm-up"
  echo "  calls (nccl-tests); busbw = size / time * 2(N-1)/N, GB/s of 1e9 bytes;"
  echo "  ratio = Open MPI time / baton time (> 1: baton faster)"
  echo "- machine load: loadavg $LOAD_START at the start, $LOAD_END at the end; before each"
  echo "  run the script waited for other processes to use < $QUIET_PCT% CPU; the worst seen"
  echo "  before a run was $WORST_BUSY%"
  echo "- raw output of every run: \`$RAW\`"
  echo
  echo "Commands (8 B: the tiny run; every other size: the sweep):"
  echo
  echo '```'
  for n in $RANKS; do
    for kind in $KINDS; do
      echo "$(baton_cmd "$n") $(args_of "$kind")"
      echo "$(mpi_cmd "$n") $(args_of "$kind")"
    done
  done
  echo '```'
  echo
  awk -v ranks="$RANKS" '
    function bw(size, t, n) { return t > 0 ? size / (t * 1e-6) / 1e9 * 2 * (n - 1) / n : 0 }
    function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "n/a" }
    function t(x) { return x == "" ? "n/a" : (x >= 100 ? sprintf("%.0f", x) : sprintf("%.2f", x)) }
    function b(x) { return sprintf("%.2f", x) }
    {
      tiny = sub(/^tiny:/, "", $1)
      k = $1 " " $2 " " $3
      if (tiny) { to[k "t"] = $4; ti[k "t"] = $5 } else { to[k] = $4; ti[k] = $5; sizes[$2 " " $3] = 1 }
    }
    function row(n, size, key, grp,   bo, mo) {
      if (grp == "out-of-place") { bo = to["baton " key]; mo = to["ompi " key] }
      else { bo = ti["baton " key]; mo = ti["ompi " key] }
      printf "| %d | %s | %s | %s | %s | %s | %s | %s |\n", n, hsize(size), grp,
        t(bo), b(bw(size, bo, n)), t(mo), b(bw(size, mo, n)), ratio(mo, bo)
    }
    function hsize(s) { return s >= 1048576 ? s / 1048576 " MiB" : s >= 1024 ? s / 1024 " KiB" : s " B" }
    END {
      nr = split(ranks, R, " ")
      print "## Key figures"
      print ""
      print "| N | size | group | baton time (us) | baton busbw (GB/s) | Open MPI time (us) | Open MPI busbw (GB/s) | OMPI time / baton time |"
      print "|--:|-----:|:------|------:|------:|------:|------:|------:|"
      for (r = 1; r <= nr; r++) {
        n = R[r]
        row(n, 8, n " 8t", "out-of-place"); row(n, 8, n " 8t", "in-place")
        row(n, 134217728, n " 134217728", "out-of-place"); row(n, 134217728, n " 134217728", "in-place")
      }
      for (r = 1; r <= nr; r++) {
        n = R[r]
        print ""
        print "## Sweep, N=" n " (-w 5 -n 20)"
        print ""
        print "| size | baton oop (us) | OMPI oop (us) | oop ratio | baton in-place (us) | OMPI in-place (us) | in-place ratio | baton oop busbw | OMPI oop busbw |"
        print "|-----:|------:|------:|------:|------:|------:|------:|------:|------:|"
        for (s = 8; s <= 134217728; s *= 4) {
          key = n " " s
          if (!(("baton " key) in to) && !(("ompi " key) in to)) continue
          printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", hsize(s),
            t(to["baton " key]), t(to["ompi " key]), ratio(to["ompi " key], to["baton " key]),
            t(ti["baton " key]), t(ti["ompi " key]), ratio(ti["ompi " key], ti["baton " key]),
            b(bw(s, to["baton " key], n)), b(bw(s, to["ompi " key], n))
        }
      }
    }' "$BEST"
}

report | tee "$MD"
echo >&2
echo "compare-shm.sh: wrote $MD and $RAW" >&2
