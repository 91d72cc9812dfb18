#!/usr/bin/env bash
# bench/compare.sh - baton next to Open MPI, MPICH and Gloo, in one run.
#
#   make && make -f bench/Makefile.peers && bench/compare.sh [options]
#
# float32 sum allreduce (or --coll), in-place group (every library has
# it), on:
#   shm2, shm4     shared memory, N=2 and N=4 (Gloo has no shared-memory
#                  transport: it runs over loopback TCP there too)
#   tcp2           loopback TCP, N=2: BATON_TRANSPORT=tcp, Open MPI's tcp
#                  BTL, MPICH with MPIR_CVAR_NOLOCAL=1 and UCX_TLS=tcp
#   cluster4, cluster8
#                  the emulated cluster of scripts/cluster.sh, one rank on
#                  each of 4 and 8 hosts, links shaped to --rate (1gbit);
#                  the MPIs reach the hosts through bench/peers/netns-rsh
# A part whose piece is missing in this tree (baton's TCP transport,
# scripts/cluster.sh, a peer binary) is skipped with a line that says so.
#
# Writes bench/results/compare-<date>.md (the machine, the commands, a
# table per part with baton / best peer), SVG plots of busbw and time
# against size (compare-<date>-<part>-{busbw,time}.svg) and keeps every
# run's JSON and log in compare-<date>.raw/ (ignored by git). The cluster
# parts also print the ring's model T = 2(N-1)/N * K/B + 2(N-1)*alpha
# beside baton's measured time.
#
# Options:
#   --parts "shm2 shm4 tcp2 cluster4 cluster8"   which parts to run
#   --libs "baton openmpi mpich gloo"            which libraries to run (and
#                  baton-old, which --baseline adds to the default)
#   --quick        smaller sizes (about half a minute per part)
#   --min SIZE     smallest size (default 8; the sizes are MIN * 4^k), so a
#                  run of the small sizes can take many calls (-n 1000) and
#                  one of the large ones few
#   --max SIZE     largest size (MIN * 4^k up to SIZE; default 32M on shared
#                  memory, 8M over TCP; issue 4's targets go to 128M)
#   --reps R       run every library R times, alternating, and report the
#                  best time of the R runs at each size (default 1)
#   -w W -n N      warm-up and timed calls per size (default 3 and 10)
#   --rate RATE    link rate of the emulated cluster (default 1gbit)
#   --timeout S    seconds one library's run may take (default 240); it is
#                  killed after that, and the table says so
#   --out DIR      where the report goes (default bench/results)
#   --coll NAME    allgather, broadcast, reduce_scatter, sendrecv (the
#                  ping-pong of baton-bench -c sendrecv) ... instead of
#                  allreduce; a library without it is skipped
#   --baseline DIR adds the library baton-old: the build of another baton
#                  checkout whose root is DIR (DIR/build/bin/baton-run and
#                  baton-bench; bench/baseline.sh COMMIT makes one), named
#                  in the report by its `git -C DIR rev-parse --short HEAD`
#
# baton-old runs exactly as baton does in every part, with its own
# baton-run and baton-bench (on the cluster: cluster.sh launch with
# BATON_RUN set to its baton-run), right next to baton in every
# repetition, baton first in odd ones and baton-old first in even ones.
# The tables then add new / old = baton's time / baton-old's time (< 1:
# the current build is faster). To compare the two builds alone:
#
#   bench/compare.sh --parts cluster4 --libs "baton baton-old" \
#     --baseline "$(bench/baseline.sh f1cff54)" --reps 5
#
# Every peer runs with LD_PRELOAD of Debian's libtcmalloc_minimal.so.4: on
# small virtual machines a page fault costs about 12 us and glibc returns
# buffers above 32 MiB with munmap, so an MPI that allocates scratch per
# call would be measured on its allocator. With more ranks than cores Open
# MPI runs with --oversubscribe and mpi_yield_when_idle; MPICH has no such
# switch and busy-waits, which the timeout bounds.
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD

PARTS="shm2 shm4 tcp2 cluster4 cluster8"
LIBS="baton openmpi mpich gloo"
QUICK=0
MINB=8
MAXB=
WARMUP=3
ITERS=10
RATE=1gbit
TIMEOUT=240
LINGER=15
OUTDIR=bench/results
COLL=allreduce
REPS=1
REP=1 # the repetition running now
BUILD=${BUILD:-build}
CLUSTER=${CLUSTER:-scripts/cluster.sh}
TCMALLOC=${TCMALLOC:-/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4}
IN_CLUSTER= # internal: the part to run inside `cluster.sh with`
RAW=
BASELINE=
LIBS_SET=

die() { echo "compare.sh: $*" >&2; exit 2; }
say() { echo "compare.sh: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --parts) PARTS=$2; shift 2 ;;
    --libs) LIBS=$2; LIBS_SET=1; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --min) MINB=$2; shift 2 ;;
    --max) MAXB=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --coll) COLL=$2; shift 2 ;;
    --baseline) BASELINE=$2; shift 2 ;;
    --in-cluster) IN_CLUSTER=$2; RAW=$3; shift 3 ;;
    --libs-in) LIBS=$2; LIBS_SET=1; shift 2 ;; # internal: --libs, passed on
    -h|--help) sed -n '2,/^set -uo/s/^# \{0,1\}//p' "$0" | grep -v '^set -uo'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
[ -z "$MAXB" ] || [[ "$MAXB" =~ ^[0-9]+[KMG]?$ ]] || die "--max $MAXB: a size like 128M"
[[ "$MINB" =~ ^[0-9]+[KMG]?$ ]] || die "--min $MINB: a size like 512K"
for v in "$WARMUP" "$ITERS" "$TIMEOUT" "$REPS"; do
  [[ "$v" =~ ^[0-9]+$ ]] || die "'$v' is not a whole number"
done
case " allreduce reduce_scatter allgather broadcast reduce alltoall gather scatter sendrecv alltoallv " in
  *" $COLL "*) ;; *) die "--coll $COLL: not a collective baton-bench knows" ;;
esac
for p in $PARTS; do
  case "$p" in shm2|shm4|tcp2|cluster4|cluster8) ;; *)
    die "--parts: unknown part '$p' (shm2 shm4 tcp2 cluster4 cluster8)" ;;
  esac
done
[ -n "$LIBS_SET" ] || LIBS="baton${BASELINE:+ baton-old} openmpi mpich gloo"
for l in $LIBS; do
  case "$l" in baton|baton-old|openmpi|mpich|gloo) ;; *)
    die "--libs: unknown library '$l' (baton baton-old openmpi mpich gloo)" ;;
  esac
done

case "$BUILD" in /*) B=$BUILD ;; *) B=$ROOT/$BUILD ;; esac
BATON_RUN=$B/bin/baton-run
BATON_BENCH=$B/bin/baton-bench
OMPI_BENCH=$B/bench/mpi_bench
MPICH_BENCH=$B/bench/mpi_bench.mpich
GLOO_BENCH=$B/bench/gloo_bench
NETNS_RSH=$ROOT/bench/peers/netns-rsh
NPROC=$(nproc)
[ -x "$BATON_BENCH" ] && [ -x "$BATON_RUN" ] || die "$BATON_BENCH missing: run make"
case " $LIBS " in *" baton-old "*)
  [ -n "$BASELINE" ] || die "--libs has baton-old: give --baseline DIR (bench/baseline.sh makes one)"
  BASELINE=$(cd "$BASELINE" 2>/dev/null && pwd) || die "--baseline: no directory '$BASELINE'"
  OLD_RUN=$BASELINE/build/bin/baton-run
  OLD_BENCH=$BASELINE/build/bin/baton-bench
  [ -x "$OLD_BENCH" ] && [ -x "$OLD_RUN" ] ||
    die "$OLD_BENCH or $OLD_RUN missing: --baseline wants the root of a built checkout (bench/baseline.sh COMMIT)"
  ;;
*) [ -z "$BASELINE" ] || [ -n "$IN_CLUSTER" ] || say "--libs has no baton-old: --baseline $BASELINE is not run" ;;
esac
command -v python3 >/dev/null || die "python3 missing (apt-get install -y python3): it writes the report"

# Sizes MIN * 4^k (MIN: 8 B unless --min): shared memory up to 32 MiB;
# TCP and the 1 Gbit/s cluster to 8 MiB, where a call already takes
# 120 ms at N=8.
sizes_of() { # part
  local big=32M
  case "$1" in shm*) ;; *) big=8M ;; esac
  [ "$QUICK" = 1 ] && big=$([ "$big" = 32M ] && echo 8M || echo 2M)
  [ -n "$MAXB" ] && big=$MAXB
  echo "-b $MINB -e $big -f 4"
}
args_of() { # part
  echo "-c $COLL -d float32 -o sum $(sizes_of "$1") -w $WARMUP -n $ITERS --json"
}
ranks_of() { echo "${1//[a-z]/}"; }
as_root() { [ "$(id -u)" = 0 ] && echo "--allow-run-as-root"; }

# Whether --libs asked for a library: gloo covers gloo-ring and gloo-hd,
# but baton does not cover baton-old.
wanted() { # lib
  local l=${1%%-*}
  [ "$1" = baton-old ] && l=$1
  case " $LIBS " in *" $l "*) return 0 ;; esac
  return 1
}

# The two batons: the current build, and with --baseline the old one.
run_of() { [ "$1" = baton-old ] && echo "$OLD_RUN" || echo "$BATON_RUN"; }
bench_of() { [ "$1" = baton-old ] && echo "$OLD_BENCH" || echo "$BATON_BENCH"; }
baton_has_tcp() { "$(bench_of "${1:-baton}")" --params | grep -q '^BATON_TRANSPORT '; }

# baton-bench refuses a collective this build lacks; that is a skip.
baton_ready() { # part [lib]
  local why lib=${2:-baton}
  wanted "$lib" || return 1
  if ! why=$("$(bench_of "$lib")" -c "$COLL" --params 2>&1 >/dev/null); then
    skip_lib "$1" "$lib" "$(printf '%s' "$why" | tail -1 | sed 's/^baton-bench \[-1\]: //')"
    return 1
  fi
}

# baton and baton-old next to each other, the first of them alternating
# with the repetition so that neither always runs second.
batons() { [ $((REP % 2)) = 1 ] && echo "baton baton-old" || echo "baton-old baton"; }

# One library's run of one part: its JSON in $RAW/<part>.<lib>.r<rep>.json,
# its stderr in .log, and a line "part lib status command" in runs.tsv.
run_lib() { # part lib command...
  local part=$1 lib=$2 rc=0 t0 out
  shift 2
  wanted "$lib" || return 0
  say "$part: $lib (run $REP of $REPS) ..."
  out=$RAW/$part.$lib.r$REP
  t0=$(date +%s)
  timeout -k 10 "$TIMEOUT" "$@" > "$out.json" 2> "$out.log" &
  local pid=$! done_at=
  # MPICH over UCX/TCP between namespaces has been seen to hang in
  # MPI_Finalize after its last line: a run whose output is complete gets
  # LINGER seconds to exit and is then stopped.
  while kill -0 $pid 2>/dev/null; do
    if [ -z "$done_at" ] && grep -q '"avg_busbw"' "$out.json" 2>/dev/null; then
      done_at=$(date +%s)
    elif [ -n "$done_at" ] && [ $(($(date +%s) - done_at)) -ge "$LINGER" ]; then
      pkill -TERM -P $pid 2>/dev/null; sleep 2; pkill -KILL -P $pid 2>/dev/null
      break
    fi
    sleep 1
  done
  wait $pid || rc=$?
  local status=ok
  if [ -n "$done_at" ] && [ $rc != 0 ]; then
    status="ok, but it did not exit within $LINGER s of its last line and was stopped"
  elif [ $rc = 124 ] || [ $rc = 137 ]; then
    status="killed after ${TIMEOUT} s ($(grep -c '^ *{"size"' "$out.json") sizes done)"
  elif [ $rc != 0 ]; then status="failed (exit $rc): $(grep -v '^$' "$out.log" | head -1 | cut -c1-160)"
  fi
  printf '%s\t%s\t%s\t%s\n' "$part" "$lib r$REP" "$status" "$*" >> "$RAW/runs.tsv"
  say "$part: $lib $status ($(($(date +%s) - t0)) s)"
}
skip_lib() { # part lib why
  [ "$2" = all ] || wanted "$2" || return 0
  [ "$REP" = 1 ] || return 0
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "skipped: $3" "" >> "$RAW/runs.tsv"
  say "$1: $2 skipped: $3"
}

peer_ready() { # part lib binary
  local why
  wanted "$2" || return 1
  # The MPIs have every collective; Gloo's harness says which it lacks.
  if [ "${2%%-*}" = gloo ] && [ -x "$3" ] && ! why=$("$3" -c "$COLL" --help 2>&1 >/dev/null); then
    skip_lib "$1" "$2" "$(printf '%s' "$why" | tail -1 | sed 's/^gloo_bench \[-1\]: //')"
  elif [ ! -x "$3" ]; then
    skip_lib "$1" "$2" "$3 missing (make -f bench/Makefile.peers)"
  elif [ ! -e "$TCMALLOC" ]; then
    skip_lib "$1" "$2" "$TCMALLOC missing (make -f bench/Makefile.peers installs libtcmalloc-minimal4)"
  else
    return 0
  fi
  return 1
}

# Gloo under baton-run's launcher (it reads BATON_RANK and BATON_SIZE),
# with a fresh FileStore directory per run.
# Allreduce twice, ring and halving-doubling; the others have one algorithm.
gloo_runs() { # part n launcher... (the launcher ends with its "--")
  local part=$1 n=$2 store variant algos="ring hd"
  shift 2
  [ "$COLL" = allreduce ] || algos=
  peer_ready "$part" gloo "$GLOO_BENCH" || return 0
  for variant in ${algos:-one}; do
    store=$(mktemp -d "$RAW/gloo-store.XXXX")
    run_lib "$part" "gloo${algos:+-$variant}" "$@" env LD_PRELOAD="$TCMALLOC" "$GLOO_BENCH" \
      --store "$store" --host "${GLOO_HOST:-127.0.0.1}" --timeout "$TIMEOUT" \
      ${algos:+-a $variant} $(args_of "$part")
    rm -rf "$store"
  done
}

part_local() { # shm2 | shm4 | tcp2
  local part=$1 n over="" btl=self,vader mpich_env=() transport=shm
  n=$(ranks_of "$part")
  [ "$n" -gt "$NPROC" ] && over="--oversubscribe --mca mpi_yield_when_idle 1"
  if [ "${part#tcp}" != "$part" ]; then
    transport=tcp
    btl="tcp,self --mca btl_tcp_if_include lo"
    mpich_env=(-env MPIR_CVAR_NOLOCAL 1 -env UCX_TLS tcp,self -env UCX_NET_DEVICES lo)
  fi
  for lib in $(batons); do
    if ! baton_ready "$part" "$lib"; then
      :
    elif [ $transport = shm ]; then
      run_lib "$part" "$lib" "$(run_of "$lib")" -n "$n" --timeout "$TIMEOUT" -- "$(bench_of "$lib")" \
        $(args_of "$part")
    elif baton_has_tcp "$lib"; then
      run_lib "$part" "$lib" env BATON_TRANSPORT=tcp "$(run_of "$lib")" -n "$n" --timeout "$TIMEOUT" -- \
        "$(bench_of "$lib")" $(args_of "$part")
    else
      skip_lib "$part" "$lib" "this build of baton has no TCP transport (no BATON_TRANSPORT in baton-bench --params)"
    fi
  done
  if peer_ready "$part" openmpi "$OMPI_BENCH"; then
    run_lib "$part" openmpi mpirun.openmpi -n "$n" $(as_root) --mca btl $btl $over \
      -x LD_PRELOAD="$TCMALLOC" "$OMPI_BENCH" $(args_of "$part")
  fi
  if peer_ready "$part" mpich "$MPICH_BENCH"; then
    run_lib "$part" mpich mpiexec.mpich -n "$n" -env LD_PRELOAD "$TCMALLOC" "${mpich_env[@]}" \
      "$MPICH_BENCH" $(args_of "$part")
  fi
  gloo_runs "$part" "$n" "$BATON_RUN" -n "$n" --timeout "$TIMEOUT" --
}

# Inside `cluster.sh with H`: one rank per host.
part_cluster() { # cluster4 | cluster8
  local part=$1 h hosts
  h=$(ranks_of "$part")
  hosts=$(seq -s, -f "198.18.0.%g" 1 "$h")
  # cluster.sh launch starts the ranks with $BATON_RUN: each build's own.
  for lib in $(batons); do
    if ! baton_ready "$part" "$lib"; then
      :
    elif baton_has_tcp "$lib"; then
      run_lib "$part" "$lib" env BATON_TRANSPORT=tcp BATON_RUN="$(run_of "$lib")" "$CLUSTER" launch \
        -n "$h" --ppn 1 --timeout "$TIMEOUT" -- "$(bench_of "$lib")" $(args_of "$part")
    else
      skip_lib "$part" "$lib" "this build of baton has no TCP transport (no BATON_TRANSPORT in baton-bench --params)"
    fi
  done
  if peer_ready "$part" openmpi "$OMPI_BENCH"; then
    run_lib "$part" openmpi "$CLUSTER" exec 0 -- mpirun.openmpi -n "$h" $(as_root) --host "$hosts" \
      --mca plm_rsh_agent "$NETNS_RSH" --mca plm_rsh_no_tree_spawn 1 \
      --mca btl tcp,self --mca btl_tcp_if_include 198.18.0.0/24 --mca oob_tcp_if_include 198.18.0.0/24 \
      $([ "$h" -gt "$NPROC" ] && echo "--oversubscribe --mca mpi_yield_when_idle 1") \
      -x LD_PRELOAD="$TCMALLOC" "$OMPI_BENCH" $(args_of "$part")
  fi
  if peer_ready "$part" mpich "$MPICH_BENCH"; then
    run_lib "$part" mpich "$CLUSTER" exec 0 -- mpiexec.mpich -launcher ssh -launcher-exec "$NETNS_RSH" \
      -hosts "$hosts" -n "$h" -env LD_PRELOAD "$TCMALLOC" -env MPIR_CVAR_NOLOCAL 1 \
      -env UCX_TLS tcp,self -env UCX_NET_DEVICES eth0 \
      "$MPICH_BENCH" $(args_of "$part")
  fi
  GLOO_HOST=auto gloo_runs "$part" "$h" "$CLUSTER" launch -n "$h" --ppn 1 \
    --timeout "$TIMEOUT" --
}

if [ -n "$IN_CLUSTER" ]; then
  for REP in $(seq 1 "$REPS"); do
    part_cluster "$IN_CLUSTER"
  done
  exit 0
fi

# ------------------------------------------------------------------ main

STAMP=$(date +%Y-%m-%d-%H%M%S)
mkdir -p "$OUTDIR" || die "--out $OUTDIR: cannot create it"
BASE=$OUTDIR/compare-$STAMP
RAW=$BASE.raw
mkdir -p "$RAW"
: > "$RAW/runs.tsv"

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(hostname)"
  echo "cpu: $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), $NPROC cores online"
  echo "memory: $(awk '/MemTotal/{printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "kernel: $(uname -srm)"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "baton: git $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src include tools 2>/dev/null || echo ' + uncommitted changes'), $BATON_BENCH"
  case " $LIBS " in *" baton-old "*)
    echo "baton-old: git $(git -C "$BASELINE" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$BASELINE" diff --quiet HEAD -- src include tools 2>/dev/null || echo ' + uncommitted changes'), $OLD_BENCH" ;;
  esac
  echo "openmpi: $(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null || echo none)"
  echo "mpich: $(dpkg-query -W -f='${Version}' mpich 2>/dev/null || echo none)"
  echo "gloo: $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo none)"
  echo "tcmalloc: $TCMALLOC ($(dpkg-query -W -f='${Version}' libtcmalloc-minimal4 2>/dev/null))"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "emulated cluster: $CLUSTER$([ -x "$CLUSTER" ] || echo ' (missing)'), links $RATE"
  echo "options: warmup $WARMUP iters $ITERS reps $REPS quick $QUICK min $MINB max ${MAXB:-default} timeout $TIMEOUT"
} > "$RAW/machine.txt"

for part in $PARTS; do
  case "$part" in
    shm*|tcp*) for REP in $(seq 1 "$REPS"); do part_local "$part"; done ;;
    cluster*)
      h=$(ranks_of "$part")
      if [ ! -x "$CLUSTER" ]; then
        skip_lib "$part" all "$CLUSTER is not in this tree (the emulated cluster)"
      elif [ "$(id -u)" != 0 ]; then
        skip_lib "$part" all "the emulated cluster needs root"
      else
        "$CLUSTER" with "$h" --rate "$RATE" -- "$ROOT/bench/compare.sh" --in-cluster "$part" "$RAW" \
          --timeout "$TIMEOUT" -w "$WARMUP" -n "$ITERS" --reps "$REPS" --libs-in "$LIBS" --coll "$COLL" \
          ${BASELINE:+--baseline "$BASELINE"} \
          $([ "$QUICK" = 1 ] && echo --quick) --min "$MINB" ${MAXB:+--max "$MAXB"} ||
          skip_lib "$part" all "$CLUSTER with $h failed (exit $?)"
      fi
      ;;
  esac
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$RAW/machine.txt"

python3 bench/report.py "$RAW" "$BASE" "$RATE"
say "wrote $BASE.md, its plots $BASE-*.svg, and the raw runs in $RAW/"
