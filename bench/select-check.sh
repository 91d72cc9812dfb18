#!/usr/bin/env bash
# bench/select-check.sh - issue 4's selection target: at every size, the
# automatic choice is within 10% of the best forced algorithm.
#
#   bench/select-check.sh [--part shmN|clusterN|all] [-c COLL[,COLL...]]
#                         [-b MIN] [-e MAX] [-f F] [-w W] [-n N] [--reps R]
#                         [--inplace] [--tune] [--rate RATE] [--cap ALGO=MAX]...
#                         [--bind]
#
# For each part (shmN: N ranks on shared memory; clusterN: N emulated hosts
# of scripts/cluster.sh, one rank each, N 2-9; all: shm2, shm4, cluster4; links of RATE, default 1gbit) and
# each collective (default allreduce): baton-bench sweeps the sizes
# (default 8 B..128 MiB, x4) once for each algorithm baton has for the
# collective (baton-viz --list), forced with -a, and once with the
# automatic choice; then a table with, per size, every algorithm's time
# per call (slowest rank's mean, out of place unless --inplace), the
# automatic time and what it picked, the best forced algorithm and the
# ratio auto/best. The runs of one part alternate, R rounds (--reps,
# default 1, each round in a rotated order), each time the best of the
# rounds. A forced algorithm that
# cannot serve a size (flat above BATON_FLAT_BYTES) shows "-".
#
# What each run picked comes from a short extra run with BATON_DEBUG=INFO
# (one call per size), since logging every call would slow the timed runs.
# --tune first runs baton-tune for the part into a file of its own and
# uses it for every run (else the user's tune file or the built-in costs).
# --cap ALGO=MAX sweeps the forced ALGO only up to MAX (its larger sizes
# show "-"), for a quick look: naive on the emulated cluster pushes all
# of a large buffer through one host's link, 7 s per call at 128 MiB.
# The table says which algorithms were cut. --bind launches the shm parts
# with baton-run --bind cpu (rank r on CPU r*C/N, so the same ranks share a
# core in every launch).
# clusterN needs root and iproute2. Run `make` first.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PART=shm4 COLLS=allreduce MINB=8 MAXB=128M FACTOR=4 WARM=3 ITERS=10 REPS=1
INPLACE=0 TUNE=0 RATE=1gbit INSIDE=0
CAPS=() # ALGO=MAX
BIND=() # baton-run's --bind cpu
usage() { sed -n '5,8s/^# \{0,1\}//p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
  --part) PART=$2; shift 2 ;;
  -c) COLLS=$2; shift 2 ;;
  -b) MINB=$2; shift 2 ;;
  -e) MAXB=$2; shift 2 ;;
  -f) FACTOR=$2; shift 2 ;;
  -w) WARM=$2; shift 2 ;;
  -n) ITERS=$2; shift 2 ;;
  --reps) REPS=$2; shift 2 ;;
  --inplace) INPLACE=1; shift ;;
  --tune) TUNE=1; shift ;;
  --rate) RATE=$2; shift 2 ;;
  --inside) INSIDE=1; shift ;;
  --bind) BIND=(--bind cpu); shift ;;
  --cap)
    [[ "$2" =~ ^[a-z]+=[0-9]+[KMG]?$ ]] || { echo "select-check.sh: --cap $2: ALGO=SIZE, like naive=8M" >&2; exit 2; }
    CAPS+=("$2"); shift 2 ;;
  *) usage ;;
  esac
done
case $PART in shm[1-9] | cluster[2-9] | all) ;; *) echo "select-check.sh: --part shmN (N ranks, 1-9), clusterN (N hosts, 2-9) or all, not '$PART'" >&2; exit 2 ;; esac
for b in baton-run baton-bench baton-viz baton-tune; do
  [ -x "$BUILD/bin/$b" ] || { echo "select-check.sh: $BUILD/bin/$b is missing: run make" >&2; exit 1; }
done
ARGS=(-c "$COLLS" -b "$MINB" -e "$MAXB" -f "$FACTOR" -w "$WARM" -n "$ITERS" --reps "$REPS")
[ "$INPLACE" = 1 ] && ARGS+=(--inplace)
[ "$TUNE" = 1 ] && ARGS+=(--tune)
for c in ${CAPS[@]+"${CAPS[@]}"}; do ARGS+=(--cap "$c"); done

if [ "$PART" = all ]; then
  bash "$0" --part shm2 "${ARGS[@]}"
  bash "$0" --part shm4 "${ARGS[@]}"
  bash "$0" --part cluster4 --rate "$RATE" "${ARGS[@]}"
  exit 0
fi
if [ "${PART#cluster}" != "$PART" ] && [ "$INSIDE" = 0 ]; then
  exec scripts/cluster.sh with "${PART#cluster}" --rate "$RATE" -- bash "$0" --part "$PART" "${ARGS[@]}" --inside
fi

tmp=$(mktemp -d /tmp/baton-select-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# launch PROG ARGS...: the ranks of this part.
launch() {
  if [ "${PART#shm}" != "$PART" ]; then
    "$BUILD/bin/baton-run" -n "${PART#shm}" "${BIND[@]}" --timeout 900 -- "$@"
  else
    scripts/cluster.sh launch -n "${PART#cluster}" --ppn 1 --timeout 900 -- "$@"
  fi
}
if [ "$TUNE" = 1 ]; then
  export BATON_TUNE_FILE=$tmp/tune
  if [ "$PART" = shm4 ]; then # alpha at one rank per core first, then oversubscribed
    "$BUILD/bin/baton-run" -n 2 -- "$BUILD/bin/baton-tune" -o "$BATON_TUNE_FILE" >/dev/null
  fi
  launch "$BUILD/bin/baton-tune" -o "$BATON_TUNE_FILE" | sed 's/^/# /'
  sed 's/^/# tune: /' "$BATON_TUNE_FILE"
fi
col=6 # out-of-place time; in place is column 12
[ "$INPLACE" = 1 ] && col=12
# sweep_of ALGO: the sweep, with ALGO's --cap as its largest size.
sweep_of() {
  local c max=$MAXB
  for c in ${CAPS[@]+"${CAPS[@]}"}; do
    [ "${c%%=*}" = "$1" ] && max=${c#*=}
  done
  echo "-b $MINB -e $max -f $FACTOR"
}

for coll in ${COLLS//,/ }; do
  rm -f "$tmp"/time.* "$tmp"/pick.* # the last collective's
  algos=$("$BUILD/bin/baton-viz" --list | awk -v c="$coll" '$1 == c {print $2}')
  [ -n "$algos" ] || { echo "select-check.sh: baton has no algorithm for '$coll'" >&2; exit 2; }
  # What each run picks, per size: "bytes algo", from rank 0's INFO lines.
  for a in $algos auto; do
    opt=(); [ "$a" = auto ] || opt=(-a "$coll:$a")
    BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=COLL launch "$BUILD/bin/baton-bench" -c "$coll" $(sweep_of "$a") \
      -w 0 -n 1 "${opt[@]}" 2>&1 >/dev/null |
      sed -nE 's/.*\[0\] baton INFO COLL '"$coll"' ([0-9]+) B on .* -> ([a-z]+).*/\1 \2/p' >"$tmp/pick.$a"
  done
  # The timed runs, alternating, R rounds: "size time" per algorithm and
  # round; each round starts one further along the list, so no algorithm
  # always runs first or last.
  # An algorithm that served no size (flat over TCP, hier with one rank per
  # host) is not timed: its runs would only repeat the fallback's.
  all=()
  for a in $algos; do
    grep -q " $a\$" "$tmp/pick.$a" && all+=("$a")
  done
  all+=(auto)
  for r in $(seq 0 $((REPS - 1))); do
    for i in $(seq 0 $((${#all[@]} - 1))); do
      a=${all[$(((i + r) % ${#all[@]}))]}
      opt=(); [ "$a" = auto ] || opt=(-a "$coll:$a")
      # A run that fails (a collective's error, a timeout) keeps the sizes
      # it finished; the others go on, and its error is shown.
      if ! launch "$BUILD/bin/baton-bench" -c "$coll" $(sweep_of "$a") -w "$WARM" -n "$ITERS" \
        "${opt[@]}" 2>"$tmp/err" | awk -v c="$col" '$1 ~ /^[0-9]+$/ {print $1, $c}' >>"$tmp/time.$a"; then
        echo "select-check.sh: $a, round $((r + 1)), failed after $(tail -1 "$tmp/time.$a" 2>/dev/null |
          cut -d' ' -f1) B: $(grep -v '^baton-bench: .* so far' "$tmp/err" | tail -2 | tr '\n' ' ')" >&2
      fi
    done
  done
  echo "== $PART, $coll: time per call in us ($([ "$INPLACE" = 1 ] && echo in place || echo out of place)," \
    "best of $REPS), $(date -u '+%Y-%m-%d %H:%M UTC'), git $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)${CAPS[*]:+, cut: ${CAPS[*]}}${BIND[*]:+, baton-run ${BIND[*]}}"
  # Model bytes -> bench size: the decision lines count N blocks for
  # reduce_scatter, allgather, alltoall, gather and scatter, as baton-bench's
  # size does, so they match.
  awk -v algos="$algos" -v dir="$tmp" '
    BEGIN {
      na = split(algos " auto", A, " ")
      for (i = 1; i <= na; i++) {
        f = dir "/time." A[i]
        while ((getline line < f) > 0) {
          split(line, x, " "); s = x[1]
          if (!(s in seen)) { seen[s] = 1; sizes[++ns] = s }
          if (!((A[i], s) in T) || x[2] + 0 < T[A[i], s]) T[A[i], s] = x[2] + 0
        }
        f = dir "/pick." A[i]
        while ((getline line < f) > 0) { split(line, x, " "); P[A[i], x[1]] = x[2] }
      }
      printf "%10s", "size"
      for (i = 1; i < na; i++) printf " %10s", A[i]
      printf " %10s %-8s %-8s %9s %9s\n", "auto", "(picked)", "best", "auto/best", "pick/best"
      within = 0; pwithin = 0
      for (k = 1; k <= ns; k++) {
        s = sizes[k]; best = ""; bt = 0
        printf "%10s", s
        for (i = 1; i < na; i++) {
          a = A[i]
          # forced but not run: the decision says another algorithm ran
          if (((a, s) in P) && P[a, s] != a) { printf " %10s", "-"; continue }
          # not run at this size (--cap)
          if (!((a, s) in T)) { printf " %10s", "-"; continue }
          printf " %10.2f", T[a, s]
          if (best == "" || T[a, s] < bt) { best = a; bt = T[a, s] }
        }
        r = bt > 0 ? T["auto", s] / bt : 0
        within += r <= 1.10
        # the forced time (same run) of the algorithm auto picked, against the best
        p = P["auto", s]; pr = 0
        if (((p, s) in T) && bt > 0) pr = T[p, s] / bt
        pwithin += pr > 0 && pr <= 1.10
        printf " %10.2f %-8s %-8s %9.2f %9s%s\n", T["auto", s], "(" p ")", best, r,
          (pr > 0 ? sprintf("%.2f", pr) : "-"), r <= 1.10 ? "" : "  > 1.10"
      }
      printf "auto within 10%% of the best forced algorithm at %d of %d sizes;", within, ns
      printf " the forced time of its pick within 10%% at %d of %d\n", pwithin, ns
    }'
done
