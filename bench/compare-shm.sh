#!/usr/bin/env bash
# bench/compare-shm.sh - baton against Open MPI over shared memory, in one
# run: float32 sum allreduce, N=2 and N=4, 8 B and 128 MiB plus a sweep of
# 8 B..128 MiB by x4 for context. Prints a markdown table to stdout and to
# bench/results/shm-<date>.md; the raw outputs of every run go next to it
# in shm-<date>.raw (ignored by git).
#
#   make && make -f bench/Makefile.peers && bench/compare-shm.sh [--reps R]
#   bench/compare-shm.sh --baseline "$(bench/baseline.sh f1cff54)" --reps 3
#
# Options: --reps R (default 3); --ranks "2 4"; --libs "baton baton-old
# openmpi" (which of them run; default baton and openmpi, and baton-old
# with --baseline); --max SIZE (the sweep's largest size, default 128M:
# --max 1K with --ranks 2 makes a smoke run of under a minute); --baseline DIR.
#
# --baseline DIR adds baton-old: DIR is the root of another baton checkout,
# already built (DIR/build/bin/baton-run and baton-bench; bench/baseline.sh
# makes one), labelled with its `git -C DIR rev-parse --short HEAD`. It runs
# the same commands with that build's baton-run and baton-bench, right next
# to the current baton in every repetition (baton first in odd repetitions,
# baton-old first in even ones, so neither always runs second), and the
# report adds a table of the two side by side with new/old = current
# baton's time / baton-old's time per size (< 1: the current build is
# faster) and every repetition's time of each, to judge the noise.
#
# Method. Both sides run the same benchmark code (tools/baton-bench.c and
# bench/peers/mpi_bench.c): per size, warm-up calls, a barrier, then timed
# calls; the time is the slowest rank's average per call (nccl-tests).
# Small machines are noisy, and this one may be shared, so each run is
# repeated R times, baton (and baton-old) and Open MPI in turn, and the tables give
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
LIBS=
MAXB=128M
BASELINE=

die() { echo "compare-shm.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --libs) LIBS=$2; shift 2 ;;
    --max) MAXB=$2; shift 2 ;;
    --baseline) BASELINE=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/s/^# \{0,1\}//p' "$0" | grep -v '^set -euo'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
[[ "$MAXB" =~ ^[0-9]+[KMG]?$ ]] || die "--max $MAXB: a size like 128M"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "--reps $REPS: a whole number above 0"
# The sweep's sizes are 8 * 4^k up to --max, in bytes, for the report.
case "$MAXB" in
  *K) MAXBYTES=$((${MAXB%K} << 10)) ;; *M) MAXBYTES=$((${MAXB%M} << 20)) ;;
  *G) MAXBYTES=$((${MAXB%G} << 30)) ;; *) MAXBYTES=$MAXB ;;
esac
[ -n "$LIBS" ] || LIBS="baton${BASELINE:+ baton-old} ompi"
LIBS=" ${LIBS//openmpi/ompi} "
for l in $LIBS; do
  case "$l" in baton|baton-old|ompi) ;; *) die "--libs: unknown library '$l' (baton baton-old openmpi)" ;; esac
done
wants() { case "$LIBS" in *" $1 "*) return 0 ;; esac; return 1; }

BATON_RUN=$BUILD/bin/baton-run
BATON_BENCH=$BUILD/bin/baton-bench
MPI_BENCH=$BUILD/bench/mpi_bench
if wants baton; then
  for f in "$BATON_RUN" "$BATON_BENCH"; do
    [ -x "$f" ] || die "$f missing: run make"
  done
fi
if wants baton-old; then
  [ -n "$BASELINE" ] || die "--libs has baton-old: give --baseline DIR (bench/baseline.sh makes one)"
  BASELINE=$(cd "$BASELINE" 2>/dev/null && pwd) || die "--baseline: no directory '$BASELINE'"
  OLD_RUN=$BASELINE/build/bin/baton-run
  OLD_BENCH=$BASELINE/build/bin/baton-bench
  for f in "$OLD_RUN" "$OLD_BENCH"; do
    [ -x "$f" ] || die "$f missing: --baseline wants the root of a built checkout (bench/baseline.sh COMMIT)"
  done
  OLD_REV=$(git -C "$BASELINE" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$BASELINE" diff --quiet HEAD -- src include tools 2>/dev/null || OLD_REV+=" + uncommitted changes"
elif [ -n "$BASELINE" ]; then
  echo "compare-shm.sh: --libs has no baton-old: --baseline $BASELINE is not run" >&2
fi
TCMALLOC=${TCMALLOC:-/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4}
if wants ompi; then
  [ -x "$MPI_BENCH" ] || die "$MPI_BENCH missing: run make -f bench/Makefile.peers (or leave openmpi out of --libs)"
  [ -e "$TCMALLOC" ] ||
    TCMALLOC=$(ldconfig -p 2>/dev/null | awk '/libtcmalloc_minimal\.so\.4 /{print $NF; exit}')
  [ -e "$TCMALLOC" ] || die "${TCMALLOC:-libtcmalloc_minimal.so.4} missing: apt-get install libtcmalloc-minimal4"
fi

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
old_cmd() { # N: the baseline build, launched the same way with its own tools
  echo "$OLD_RUN -n $1 --timeout $RUN_TIMEOUT -- $OLD_BENCH"
}
cmd_of() { # lib N
  case "$1" in baton) baton_cmd "$2" ;; baton-old) old_cmd "$2" ;; ompi) mpi_cmd "$2" ;; esac
}

# The two kinds of run: the sweep (which gives the 128 MiB figure too) and
# 8 B alone with enough calls to average out the clock.
KINDS="sweep tiny"
args_of() {
  case "$1" in
    sweep) echo "-c allreduce -d float32 -o sum -b 8 -e $MAXB -f 4 -w 5 -n 20" ;;
    tiny) echo "-c allreduce -d float32 -o sum -b 8 -e 8 -w 100 -n 1000" ;;
  esac
}

# One run: appends "lib n kind rep size t_oop t_ip" rows to $ROWS.
run_one() { # lib n kind rep
  local lib=$1 n=$2 kind=$3 rep=$4 cmd out rc=0
  wants "$lib" || return 0
  cmd="$(cmd_of "$lib" "$n") $(args_of "$kind")"
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
      # The two batons next to each other, the first of them alternating.
      if [ $((rep % 2)) = 1 ]; then batons="baton baton-old"; else batons="baton-old baton"; fi
      for lib in $batons ompi; do
        run_one "$lib" "$n" "$kind" "$rep"
      done
    done
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report

GIT_REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src include tools 2>/dev/null || GIT_REV+=" + uncommitted changes"
OMPI_VER=$(mpirun.openmpi --version 2>/dev/null | head -1 || true)
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
  local who="baton vs Open MPI" alt="baton and Open MPI alternating"
  wants ompi || who="baton"
  wants baton-old && { who+=" vs baton $OLD_REV"; alt="$(echo $LIBS | sed 's/ /, /g; s/ompi/Open MPI/') in turn"; }
  echo "# $who over shared memory: float32 sum allreduce"
  echo
  echo "- date: $(date '+%Y-%m-%d %H:%M:%S %Z'); host: $(hostname), $NPROC CPUs ($CPU)"
  wants baton && echo "- baton: git $GIT_REV, launched with \`$BATON_RUN\`"
  wants baton-old && echo "- baton-old: git $OLD_REV, the build in \`$BASELINE\`, launched with \`$OLD_RUN\`"
  if wants ompi; then
    echo "- Open MPI: $OMPI_VER; vader BTL; **LD_PRELOAD=$TCMALLOC** (tcmalloc)"
    echo "  for every Open MPI run; with N > $NPROC also --oversubscribe --mca mpi_yield_when_idle 1"
  fi
  echo "- method: each figure is the **best of $REPS runs**, $alt;"
  echo "  within a run, time = slowest rank's average per call over -n calls after -w warm-up"
  echo "  calls (nccl-tests); busbw = size / time * 2(N-1)/N, GB/s of 1e9 bytes;"
  wants ompi && echo "  ratio = Open MPI time / baton time (> 1: baton faster);"
  wants baton-old && echo "  new/old = baton time / baton-old time (< 1: the current build is faster);"
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
      for lib in $LIBS; do echo "$(cmd_of "$lib" "$n") $(args_of "$kind")"; done
    done
  done
  echo '```'
  echo
  if wants baton && wants baton-old; then old_new; fi
  if wants baton && wants ompi; then vs_ompi; fi
}

# baton against Open MPI: the key figures (8 B, the sweep's largest size)
# and the sweeps, from the best of the repetitions.
vs_ompi() {
  awk -v ranks="$RANKS" -v maxb="$MAXBYTES" '
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
      for (top = 8; top * 4 <= maxb; top *= 4) ;
      print "## Key figures"
      print ""
      print "| N | size | group | baton time (us) | baton busbw (GB/s) | Open MPI time (us) | Open MPI busbw (GB/s) | OMPI time / baton time |"
      print "|--:|-----:|:------|------:|------:|------:|------:|------:|"
      for (r = 1; r <= nr; r++) {
        n = R[r]
        row(n, 8, n " 8t", "out-of-place"); row(n, 8, n " 8t", "in-place")
        row(n, top, n " " top, "out-of-place"); row(n, top, n " " top, "in-place")
      }
      for (r = 1; r <= nr; r++) {
        n = R[r]
        print ""
        print "## Sweep, N=" n " (-w 5 -n 20)"
        print ""
        print "| size | baton oop (us) | OMPI oop (us) | oop ratio | baton in-place (us) | OMPI in-place (us) | in-place ratio | baton oop busbw | OMPI oop busbw |"
        print "|-----:|------:|------:|------:|------:|------:|------:|------:|------:|"
        for (s = 8; s <= maxb; s *= 4) {
          key = n " " s
          if (!(("baton " key) in to) && !(("ompi " key) in to)) continue
          printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", hsize(s),
            t(to["baton " key]), t(to["ompi " key]), ratio(to["ompi " key], to["baton " key]),
            t(ti["baton " key]), t(ti["ompi " key]), ratio(ti["ompi " key], ti["baton " key]),
            b(bw(s, to["baton " key], n)), b(bw(s, to["ompi " key], n))
        }
      }
      print ""
    }' "$BEST"
}

# The current baton against the baseline build, per N and size: the best
# of the repetitions of each, their ratio, and every repetition's time
# (in the order they ran) so that the noise can be read beside the ratio.
old_new() {
  awk -v ranks="$RANKS" -v maxb="$MAXBYTES" -v rev="$OLD_REV" -v reps="$REPS" '
    function t(x) { return x == "" ? "n/a" : (x >= 100 ? sprintf("%.0f", x) : sprintf("%.2f", x)) }
    function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "n/a" }
    function hsize(s) { return s >= 1048576 ? s / 1048576 " MiB" : s >= 1024 ? s / 1024 " KiB" : s " B" }
    function add(k, x) { all[k] = (nrun[k]++ ? all[k] " " : "") t(x); if (!(k in best) || x < best[k]) best[k] = x }
    $1 == "baton" || $1 == "baton-old" {
      k = $1 " " $2 " " ($3 == "tiny" ? "8t" : $5)
      add(k " o", $6); add(k " i", $7)
    }
    function row(n, key, label,   o, w, g, line) {
      line = "| " label
      for (g = 1; g <= 2; g++) {
        w = g == 1 ? " o" : " i"
        o = best["baton-old " n " " key w]
        line = line " | " t(o) " | " t(best["baton " n " " key w]) " | " ratio(best["baton " n " " key w], o)
      }
      for (g = 1; g <= 2; g++) {
        w = g == 1 ? " o" : " i"
        line = line " | " all["baton-old " n " " key w] " / " all["baton " n " " key w]
      }
      print line " |"
    }
    END {
      nr = split(ranks, R, " ")
      print "## baton against baton-old (" rev "), side by side"
      print ""
      print "new/old = the current build'"'"'s time / baton-old'"'"'s, each the best of " reps " runs"
      print "(< 1: the current build is faster); the last two columns give every run'"'"'s time,"
      print "old / new, in the order they ran. 8 B (-n 1000) is the tiny run, the other rows the sweep."
      for (r = 1; r <= nr; r++) {
        n = R[r]
        print ""
        print "### N=" n
        print ""
        print "| size | old oop (us) | new oop (us) | new/old oop | old in-place (us) | new in-place (us) | new/old in-place | oop runs, old / new (us) | in-place runs, old / new (us) |"
        print "|-----:|------:|------:|------:|------:|------:|------:|:------|:------|"
        row(n, "8t", "8 B (-n 1000)")
        for (s = 8; s <= maxb; s *= 4) if (("baton " n " " s " o") in best || ("baton-old " n " " s " o") in best) row(n, s, hsize(s))
      }
      print ""
    }' "$ROWS"
}

report | tee "$MD"
echo >&2
echo "compare-shm.sh: wrote $MD and $RAW" >&2
