#!/usr/bin/env bash
# tests/test_bench.sh - baton-bench and, where they are built, the peers of
# bench/peers: every collective with --check (the benchmark's own reference
# for each collective's data, which the peers' MPI and Gloo also have to
# match, so a wrong layout in the benchmark shows up as #wrong), the sweep
# flags, --json, and clear errors for bad input. A collective this build of
# baton lacks must be refused with a message that says so.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUN=$BUILD/bin/baton-run
BENCH=$BUILD/bin/baton-bench
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
COLLS="allreduce reduce_scatter allgather broadcast reduce alltoall gather scatter allgatherv reduce_scatterv alltoallv"
SMALL="-b 0 -e 64K -f 8 -w 1 -n 2"
passed=0
failed=0
skipped=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

ok() { passed=$((passed + 1)); echo "ok: $*"; }
skip() { skipped=$((skipped + 1)); echo "SKIP: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; sed 's/^/  | /' "$out" | tail -8; }

# expect_check NAME CMD...: exits 0 and reports no wrong values.
expect_check() {
  local name=$1
  shift
  if timeout 120 "$@" >"$out" 2>&1 && grep -q 'Wrong values total : 0 OK' "$out"; then
    ok "$name"
  else
    bad "$name (exit $?)"
  fi
}

# expect_error NAME TEXT CMD...: exits 2 and says TEXT.
expect_error() {
  local name=$1 text=$2 rc=0
  shift 2
  timeout 60 "$@" >"$out" 2>&1 || rc=$?
  if [ $rc = 2 ] && grep -qF -- "$text" "$out"; then
    ok "$name"
  else
    bad "$name: wanted exit 2 and '$text', got exit $rc"
  fi
}

supported() { # coll: baton-bench has it in this build
  ! "$BENCH" -c "$1" --params 2>&1 | grep -q "not supported by this build"
}

# --------------------------------------------------------------- baton
for c in $COLLS; do
  if ! supported "$c"; then
    expect_error "baton-bench -c $c refused by this build" "not supported by this build" \
      "$RUN" -n 2 "$BENCH" -c "$c"
    skip "baton-bench -c $c --check: include/baton.h does not declare baton_$c"
    continue
  fi
  for n in 2 3; do
    # Declared but without an algorithm yet (gather, scatter before theirs land).
    if "$RUN" -n "$n" "$BENCH" -c "$c" -b 64 -e 64 -w 0 -n 1 2>&1 | grep -q "no algorithm of this build"; then
      skip "baton-bench -n $n -c $c --check: no algorithm of this build serves $c"
      continue
    fi
    expect_check "baton-bench -n $n -c $c --check" "$RUN" -n "$n" "$BENCH" -c "$c" $SMALL --check -r $((n - 1))
  done
done
for dt_op in "float16 avg" "bfloat16 sum" "int32 max" "uint8 prod" "float64 min" "int64 sum"; do
  set -- $dt_op
  expect_check "baton-bench allreduce -d $1 -o $2 --check" "$RUN" -n 3 "$BENCH" -d "$1" -o "$2" $SMALL --check
done
expect_check "baton-bench reduce_scatter -z -d int8 --check" "$RUN" -n 3 "$BENCH" -c reduce_scatter -z -d int8 $SMALL --check

# -i: 8, 24, 40 bytes, one line each, with the nccl-tests columns.
if "$RUN" -n 2 "$BENCH" -b 8 -e 40 -i 16 -w 0 -n 1 >"$out" 2>&1 &&
   [ "$(grep -c '^ *[0-9]' "$out")" = 3 ] &&
   grep -q 'time *algbw *busbw *#wrong *p50 *p99' "$out"; then
  ok "baton-bench -i 16: three sizes, with p50 and p99 columns"
else
  bad "baton-bench -i 16"
fi

# --json: one document, one result per size, the check's total.
if "$RUN" -n 2 "$BENCH" -b 8 -e 8K -f 4 -w 0 -n 2 --check --json >"$out" 2>&1; then
  if command -v python3 >/dev/null; then
    if python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert [r["size"] for r in d["results"]] == [8, 32, 128, 512, 2048, 8192], d["results"]
assert d["wrong_total"] == 0 and d["nranks"] == 2
for r in d["results"]:
    for g in ("out_of_place", "in_place"):
        assert r[g]["time_us"] > 0 and r[g]["p99_us"] >= r[g]["p50_us"] > 0, r' "$out"; then
      ok "baton-bench --json parses, with every size and group"
    else
      bad "baton-bench --json"
    fi
  else
    skip "checking --json needs python3"
  fi
else
  bad "baton-bench --json run"
fi

# Bad input: a clear error naming the flag, exit 2, never a hang.
expect_error "unknown collective" "-c alltoallw: expected allreduce" "$BENCH" -c alltoallw
expect_error "-b above -e" "is larger than -e" "$BENCH" -b 1M -e 8
expect_error "bad size" "-e 12Q: expected a size" "$BENCH" -e 12Q
expect_error "bad dtype" "-d float8" "$BENCH" -d float8
expect_error "-n 0" "-n 0: expected an integer >= 1" "$BENCH" -n 0
rooted=
for c in broadcast reduce gather scatter; do supported "$c" && rooted=$c && break; done
if [ -n "$rooted" ]; then
  expect_error "-r beyond the ranks" "-r 2: there are only 2 ranks" "$RUN" -n 2 "$BENCH" -c "$rooted" -r 2
else
  skip "-r beyond the ranks: this build has no rooted collective"
fi
if "$BENCH" --params | grep -q '^BATON_ALGO '; then
  expect_check "baton-bench -a ring --check" "$RUN" -n 3 "$BENCH" -a ring $SMALL --check
else
  expect_error "-a without BATON_ALGO in this build" "does not read BATON_ALGO" "$RUN" -n 2 "$BENCH" -a ring
fi

# ------------------------------------------------------ compare.sh
# The report from a tiny run of baton alone: a table, plots that parse as
# SVG, and a part this tree lacks skipped with its reason, not failed.
if command -v python3 >/dev/null; then
  dir=$(mktemp -d)
  if CLUSTER=/nonexistent/cluster.sh bash bench/compare.sh --parts "shm2 cluster4" --libs baton \
       --quick -w 0 -n 1 --timeout 60 --out "$dir" >"$out" 2>&1 &&
     md=$(ls "$dir"/compare-*.md) &&
     grep -q '^| 8 B | [0-9.]* | [0-9.]* |$' "$md" &&
     grep -q '| cluster4 | all | skipped: /nonexistent/cluster.sh is not in this tree' "$md" &&
     python3 -c 'import sys, xml.etree.ElementTree as ET
for f in sys.argv[1:]:
    root = ET.parse(f).getroot()
    assert root.tag.endswith("svg") and len(root.findall(".//{http://www.w3.org/2000/svg}polyline")) == 1, f' \
       "$dir"/compare-*-shm2-busbw.svg "$dir"/compare-*-shm2-time.svg; then
    ok "compare.sh: report, plots, and a missing part skipped"
  else
    bad "compare.sh"
    sed 's/^/  | /' "$dir"/compare-*.md 2>/dev/null | head -40
  fi
  rm -rf "$dir"
else
  skip "compare.sh writes its report with python3, which is not installed"
fi

# The ping-pong pairs ranks 2k and 2k+1: an even number of ranks.
if supported sendrecv; then
  for n in 2 4; do
    expect_check "baton-bench -n $n -c sendrecv --check" "$RUN" -n "$n" "$BENCH" -c sendrecv $SMALL --check
  done
  expect_check "baton-bench -c sendrecv -e 1M --check (past the eager limit)" "$RUN" -n 2 "$BENCH" \
    -c sendrecv -b 256K -e 1M -w 1 -n 2 --check
  expect_error "baton-bench -n 3 -c sendrecv refused" "run an even number of ranks" \
    "$RUN" -n 3 "$BENCH" -c sendrecv -b 8 -e 8
else
  skip "baton-bench -c sendrecv: include/baton.h does not declare baton_send"
fi

# --------------------------------------------------------------- peers
# Built by `make -f bench/Makefile.peers`; skipped where they are not.
as_root=; [ "$(id -u)" = 0 ] && as_root=--allow-run-as-root
if [ -x "$BUILD/bench/mpi_bench" ] && command -v mpirun.openmpi >/dev/null; then
  for c in $COLLS; do
    expect_check "Open MPI -n 3 -c $c --check" mpirun.openmpi -n 3 $as_root --oversubscribe \
      --mca btl self,vader --mca mpi_yield_when_idle 1 "$BUILD/bench/mpi_bench" -c "$c" $SMALL --check -r 1
  done
  expect_check "Open MPI -n 2 -c sendrecv --check" mpirun.openmpi -n 2 $as_root --oversubscribe \
    --mca btl self,vader --mca mpi_yield_when_idle 1 "$BUILD/bench/mpi_bench" -c sendrecv $SMALL --check
else
  skip "Open MPI peer: $BUILD/bench/mpi_bench not built (make -f bench/Makefile.peers)"
fi
if [ -x "$BUILD/bench/mpi_bench.mpich" ] && command -v mpiexec.mpich >/dev/null; then
  expect_check "MPICH -n 2 -c alltoall --check" mpiexec.mpich -n 2 "$BUILD/bench/mpi_bench.mpich" -c alltoall $SMALL --check
else
  skip "MPICH peer: $BUILD/bench/mpi_bench.mpich not built (make -f bench/Makefile.peers)"
fi
if [ -x "$BUILD/bench/gloo_bench" ]; then
  for args in "-a ring" "-a hd" "-a bcube" "-c allgather" "-c broadcast -r 1"; do
    store=$(mktemp -d)
    expect_check "Gloo -n 2 $args --check" env LD_PRELOAD="$TCMALLOC" "$RUN" -n 2 "$BUILD/bench/gloo_bench" \
      --store "$store" --timeout 60 $args $SMALL --check
    rm -rf "$store"
  done
  expect_error "Gloo refuses what it lacks" "gloo_bench measures allreduce, allgather and broadcast only" \
    "$BUILD/bench/gloo_bench" -c alltoall
else
  skip "Gloo peer: $BUILD/bench/gloo_bench not built (make -f bench/Makefile.peers)"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ $failed = 0 ]
