#!/usr/bin/env bash
# tests/run.sh - the test suite that `make test` runs.
#
#   bash tests/run.sh                  the whole suite (make test)
#   bash tests/run.sh --quick          a subset, under a minute (make test-quick)
#   bash tests/run.sh --only PATTERN   the entries whose name matches (make test T=PATTERN)
#   bash tests/run.sh --list           the entries' names, one a line
#
# Each entry runs in its own process group under `timeout`, so a hung test
# is killed and reported rather than stopping the suite. One line per entry
# with its status (PASS, FAIL, TIMEOUT or SKIP) and time; the output of each
# is kept in $BUILD/test-logs/ and the tail of a failing one is printed.
# PATTERN matches the names that begin with it (`test_api` selects
# `test_api -n 1` and `-n 2`, not `asan test_api -n 1`); with *, ? or [ it
# is a glob over the whole name ('test_coll -n 3*', '*hier*'). A pattern
# that matches nothing is an error (exit status 2). The sanitizer and fuzz
# builds run when an entry of theirs is selected.
#
# Skips. An entry that cannot run here (not root, no mpirun, no NumPy)
# prints `SKIP: <reason>` and exits with status 77; the suite shows
# `SKIP  <time>  <name>: <reason>` and counts it as skipped. An entry that
# runs some parts and skips others prints `SKIP: <reason>` for each and ends
# with `N passed, M failed, K skipped`; the suite adds its K (without such a
# line, the number of distinct `SKIP: ` or `skip: ` lines). tests/shlib.sh
# has `skip` and `skip_all` for the shell tests. A missing clang is a
# failure, not a skip: the README's set-up line, which CI installs, has it.
#
# The last line is `N passed, M failed, K skipped`: N and M count entries,
# K the skipped entries and the skipped parts of the others. The exit
# status is 1 if any failed.
#
# The whole suite: the unit tests (test_reduce, test_store, test_auth,
# test_schedule, test_model, test_select, test_numa, test_tcp_end) when
# present; test_numa --ring (the ring visits each NUMA node's ranks
# together, from sysfs and from BATON_NUMA, one host and two); test_select.sh,
# test_launcher.sh, test_launcher_hosts.sh and test_launch_env.sh (torchrun,
# mpirun, Hydra and Slurm variables); test_cluster_net.sh (the emulated
# cluster; root only); test_coll at 1, 2, 3, 4, 5 and 8 ranks (8
# oversubscribes the cores), each also through the ring with 256-byte
# segments, and once with the flat algorithm for every size (and its
# broadcast's fan-out in small pieces, in flight and with a rank killed in
# it); TCP, mixed and
# emulated-host sweeps; test_coll with BATON_ALGO=rhd, rd, tree, naive and
# hier; test_calls (two calls of one communicator interleaved step by step);
# test_split (communicators made from communicators) with its kill tests,
# unique ids in a process that has a communicator and examples/split_overlap;
# test_p2p (point-to-point: shared memory, TCP, mixed, 1..6 ranks, a
# killed rank), examples/p2p_exchange and test_alltoallv (1..5 and 8
# ranks, TCP, mixed);
# test_failure (lost ranks, aborts, mismatched calls) and test_abort_signal
# (baton_comm_abort from a signal handler); test_cluster.sh
# and test_linkbreak.sh (root only); the unique-id and MPI starts; test_api
# at 1 and 2 ranks; test_fault (a peer that dies or stalls); test_hostile
# (strangers at the store port); test_secret.sh; a 3-second baton-soak; the
# training example and the Python binding (test_python.py, test_train.py:
# /usr/bin/python3 with python3-numpy, else skipped); the PyTorch backend
# (test_torch.py, test_torch_ddp.py, test_torch_cluster.sh and
# examples/train_torch.py: /usr/bin/python3 with torch and the extension
# built, else skipped); test_install.sh,
# test_cmake.sh (find_package(baton) from a CMake project) and
# test_readme.sh; test_trace and test_viz.sh; test_bench.sh. Then the
# sanitizer pass: `make SAN=1` builds into build-asan/, and the unit tests,
# the quick collective sweeps, the API test and test_hostile run again under
# ASan+UBSan with leak detection. A ThreadSanitizer pass (`make TSAN=1`,
# build-tsan/) runs the threaded parts: test_store, test_auth, test_coll
# --quick at 2 and 3 ranks, test_api, test_hostile, test_split (two
# threads, each driving its own child; the children of an aborted parent),
# test_failure family and test_fault exit. Last,
# each fuzz target of tests/fuzz/ runs for FUZZ_SECONDS.
#
# --quick: the unit tests, test_coll --quick at 1..4 ranks and once at 3
# through the ring with 256-byte segments, test_api at 1 and 2 ranks,
# test_failure, test_calls, test_split at 3 ranks and test_fault.
#
# Environment:
#   BUILD=build          the default build that `make` produced
#   TEST_TIMEOUT=300     seconds one entry may run
#   BATON_SKIP_SAN=1     skip the sanitizer passes (their entries show as SKIP)
#   BATON_SKIP_FUZZ=1    skip the fuzz pass
#   FUZZ_SECONDS=20      how long each fuzz target runs
set -u
cd "$(dirname "$0")/.." || exit 1

usage() {
  echo "usage: bash tests/run.sh [--quick] [--only PATTERN] [--list]" >&2
  exit 2
}
quick=0 only='' list=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --only) [ $# -ge 2 ] || usage; only=$2; shift ;;
    --list) list=1 ;;
    *) usage ;;
  esac
  shift
done

BUILD=${BUILD:-build}
SAN_BUILD=build-asan
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
LOGS=$BUILD/test-logs
SKIP_STATUS=77
passed=0
failed=0
skipped=0
failures=()
# While the suite is walked only to learn its names (--list, --only),
# `listing` is 1 and `names` collects them; `selected` are those --only picks.
listing=0
names=()
selected=()
# When set, the entries that follow are skipped with this reason.
skip_reason=

mkdir -p "$LOGS"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# A test passed when it exited 0 and, if it prints a summary, the summary
# says `N passed, 0 failed` (`, K skipped` may follow) and no line reports a
# failure count.
summary_ok() {
  grep -Eq '(^|[^0-9])[0-9]+ passed, 0 failed(, [0-9]+ skipped)?[[:space:]]*$' "$1" &&
    ! grep -Eq '(^|[^0-9])[0-9]+ passed, [1-9][0-9]* failed' "$1"
}

# The skipped parts in a log: the K of its last `N passed, M failed, K
# skipped` line, else the number of distinct `SKIP: ` / `skip: ` lines.
skips_in() {
  local k
  k=$(grep -Eo '[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped[[:space:]]*$' "$1" | tail -n 1 |
    sed 's/.* failed, \([0-9]*\) skipped.*/\1/')
  [ -n "$k" ] || k=$(grep -E '^(SKIP|skip): ' "$1" | sort -u | wc -l)
  echo $((k))
}

# matches NAME PATTERN: --only's rule (see the top of this file).
# shellcheck disable=SC2053 # a glob, on purpose
matches() {
  case $2 in
    *[*?[]*) [[ $1 == $2 ]] ;;
    *) [[ $1 == "$2"* ]] ;;
  esac
}

# is_selected NAME: --only is unset, or some name it picked is NAME.
is_selected() {
  [ -z "$only" ] && return 0
  local s
  for s in "${selected[@]+"${selected[@]}"}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}

report() { # report STATUS MS TEXT
  printf '%-7s %4d.%01ds  %s\n' "$1" $(($2 / 1000)) $(($2 % 1000 / 100)) "$3"
}

# run NAME SUMMARY CMD...: runs CMD; SUMMARY is 1 when CMD prints the
# `N passed, M failed` line. Returns 1 when it failed, else 0 (a skip too,
# so that a skipped build still walks the entries that depend on it, each
# shown as skipped).
run() {
  local name=$1 summary=$2
  shift 2
  if [ $listing = 1 ]; then
    names+=("$name")
    return 0
  fi
  [ "${force:-0}" = 1 ] || is_selected "$name" || return 0
  if [ -n "$skip_reason" ]; then
    report SKIP 0 "$name: $skip_reason"
    skipped=$((skipped + 1))
    return 0
  fi
  local log start status rc ms why='' k
  log="$LOGS/$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.=-' '_').log"
  start=$(now_ms)
  timeout -k 10 "$TEST_TIMEOUT" "$@" >"$log" 2>&1
  rc=$?
  ms=$(($(now_ms) - start))
  k=$(skips_in "$log")
  skipped=$((skipped + k))
  if [ $rc -eq $SKIP_STATUS ]; then
    why=$(sed -n 's/^SKIP: //p' "$log" | tail -n 1)
    if [ -n "$why" ]; then
      report SKIP "$ms" "$name: $why"
      # The entry itself is the skipped unit, whatever its log counted.
      skipped=$((skipped - k + 1))
      return 0
    fi
  fi
  if [ $rc -eq 0 ] && { [ "$summary" = 0 ] || summary_ok "$log"; }; then
    status=PASS
    passed=$((passed + 1))
  else
    status=FAIL
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && status=TIMEOUT
    failed=$((failed + 1))
    failures+=("$name")
  fi
  report $status "$ms" "$name"
  if [ $status != PASS ]; then
    if [ $rc -eq $SKIP_STATUS ]; then
      echo "        exit status $rc (a skip) without a 'SKIP: <reason>' line; last lines of $log:"
    else
      echo "        exit status $rc; last lines of $log:"
    fi
    tail -n 15 "$log" | sed 's/^/        | /'
  elif [ "$k" -gt 0 ]; then
    grep -E '^(SKIP|skip): ' "$log" | sort -u | sed 's/^[A-Za-z]*: /        skipped: /'
  fi
  [ $status = PASS ]
}

# build NAME GLOB CMD...: an entry that builds what the entries named GLOB
# need. Under --only it runs when one of those is selected.
build() {
  local name=$1 glob=$2 s force=0
  shift 2
  if [ $listing = 0 ] && [ -n "$only" ]; then
    for s in "${selected[@]+"${selected[@]}"}"; do
      # shellcheck disable=SC2053 # a glob, on purpose
      if [[ $s == $glob ]]; then force=1; fi
    done
  fi
  run "$name" 0 "$@"
}

# The collective sweep at one size: with the default settings (the flat
# algorithm for small buffers, the ring with 64 KiB segments for large ones),
# then through the ring only, with 256-byte segments and streaming stores,
# so that the multi-segment, multi-round paths run on small buffers. The
# large counts add little there and cost minutes, so that run is --quick.
RING_SMALL="BATON_FLAT_BYTES=0 BATON_SEGMENT_BYTES=256 BATON_TCP_SEGMENT_BYTES=256 BATON_STREAM_BYTES=0"
# flat's broadcast fanned out in small pieces (below).
FAN="BATON_ALGO=broadcast:flat BATON_FLAT_BYTES=0 BATON_SEGMENT_BYTES=1K"
coll_at() {
  local n=$1 bin=$2
  run "test_coll -n $n" 1 "$bin/bin/baton-run" -n "$n" "$bin/tests/test_coll"
  run "test_coll -n $n --quick $RING_SMALL" 1 \
    env $RING_SMALL "$bin/bin/baton-run" -n "$n" "$bin/tests/test_coll" --quick
}

# The entries that the whole suite and --quick share.
unit_tests() {
  # test_select: the algorithm choice from fixed costs.
  # test_tcp_end: how TCP connections end, clean and not.
  for unit in test_reduce test_store test_auth test_schedule test_model test_select test_numa \
    test_tcp_end; do
    if [ -x "$BUILD/tests/$unit" ]; then
      run "$unit" 1 "$BUILD/tests/$unit"
    fi
  done
}
# Lost ranks, aborts and mismatched calls: every rank fails fast with the
# right code, on shared memory, TCP, and both at once.
failure_tests() {
  for mode in kill abort mismatch; do
    run "test_failure $mode 4" 1 env BATON_TIMEOUT=20 "$BUILD/tests/test_failure" "$mode" 4
    run "test_failure $mode 4 BATON_TRANSPORT=tcp" 1 env BATON_TIMEOUT=20 BATON_TRANSPORT=tcp \
      "$BUILD/tests/test_failure" "$mode" 4
    run "test_failure $mode 4 2 hosts x 2 ranks" 1 env BATON_TIMEOUT=20 TEST_HOSTS=2 \
      "$BUILD/tests/test_failure" "$mode" 4
  done
  # baton_comm_abort from a SIGALRM handler amid a run of allreduces: the
  # signalled rank returns EABORTED, its peers fail fast, SIGPIPE never fires.
  for n in 2 3; do
    run "test_abort_signal -n $n" 1 env BATON_TIMEOUT=20 "$BUILD/bin/baton-run" -n "$n" \
      "$BUILD/tests/test_abort_signal"
    run "test_abort_signal -n $n BATON_TRANSPORT=tcp" 1 env BATON_TIMEOUT=20 BATON_TRANSPORT=tcp \
      "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_abort_signal"
  done
  run "test_abort_signal -n 4 2 hosts x 2 ranks" 1 env BATON_TIMEOUT=20 "$BUILD/bin/baton-run" \
    -n 4 sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' "$BUILD/tests/test_abort_signal"
}
# The i-forms: several in flight, waited in and out of order, against each
# collective's definition; a rank that dies and an abort from another thread
# with requests in flight; destroy with one in flight.
nonblocking_tests() {
  for n in 1 2 3 4 5; do
    run "test_nonblocking -n $n" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_nonblocking"
  done
  run "test_nonblocking -n 3 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp \
    "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_nonblocking"
  run "test_nonblocking -n 4 2 hosts x 2 ranks" 1 "$BUILD/bin/baton-run" -n 4 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' "$BUILD/tests/test_nonblocking"
  for t in "" BATON_TRANSPORT=tcp; do
    run "test_nonblocking kill -n 3 $t" 1 env BATON_TIMEOUT=20 $t "$BUILD/bin/baton-run" -n 3 \
      "$BUILD/tests/test_nonblocking" kill
  done
  run "test_nonblocking abort -n 2" 1 env BATON_TIMEOUT=20 "$BUILD/bin/baton-run" -n 2 \
    "$BUILD/tests/test_nonblocking" abort
  run "test_nonblocking destroy -n 2" 1 env BATON_TIMEOUT=20 "$BUILD/bin/baton-run" -n 2 \
    "$BUILD/tests/test_nonblocking" destroy
}
# Two calls of one communicator, interleaved step by step (the executor's
# call objects): shared memory, TCP, and 2 hosts x 2 ranks.
calls_tests() {
  for n in 1 2 3 4; do
    run "test_calls -n $n" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_calls"
  done
  run "test_calls -n 3 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp "$BUILD/bin/baton-run" -n 3 \
    "$BUILD/tests/test_calls"
  run "test_calls -n 4 2 hosts x 2 ranks" 1 "$BUILD/bin/baton-run" -n 4 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' "$BUILD/tests/test_calls"
}
# NUMA nodes inside a host: the ring visits each node's ranks together,
# with the nodes from sysfs (one node here) and from BATON_NUMA, whose
# nodes interleave the ranks (so the ring must reorder them), on one host
# and on two.
numa_tests() {
  run "test_numa --ring -n 3" 1 "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_numa" --ring
  run "test_numa --ring -n 4 BATON_NUMA=0+2,1+3" 1 env BATON_NUMA=0+2,1+3 \
    "$BUILD/bin/baton-run" -n 4 "$BUILD/tests/test_numa" --ring
  run "test_numa --ring -n 5 BATON_NUMA=0,1-3,4 2 hosts" 1 env BATON_NUMA=0,1-3,4 \
    "$BUILD/bin/baton-run" -n 5 sh -c 'BATON_HOSTID=h$((BATON_RANK % 2)) exec "$0" --ring' \
    "$BUILD/tests/test_numa"
  run "BATON_NUMA=0-1 -n 3: init fails naming rank 2" 0 sh -c \
    'out=$(env BATON_NUMA=0-1 "$0" -n 3 "$1" --ring 2>&1); rc=$?; printf "%s\n" "$out"
     [ $rc -ne 0 ] && printf "%s\n" "$out" | grep -q "BATON_NUMA=\"0-1\" names no node for rank 2"' \
    "$BUILD/bin/baton-run" "$BUILD/tests/test_numa"
}
api_tests() {
  for n in 1 2; do
    run "test_api -n $n" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_api"
  done
}
# Communicators made from communicators (test_split: every kind of split,
# nested, interleaved, two threads, children outliving their parents,
# children failing with an aborted parent) on shared memory, TCP, 2 hosts x
# 2 ranks and 3 hosts interleaved; a killed rank under a parent and its
# child, and under a parent whose child does not have it; a second communicator from a unique
# id in a process that has one; the 2 x 2 groups example; communicators
# made through a caller's key-value store (test_kv).
split_tests() {
  for n in 1 2 3 4 5; do
    run "test_split -n $n" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_split"
    run "test_split -n $n BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp "$BUILD/bin/baton-run" \
      -n "$n" "$BUILD/tests/test_split"
  done
  run "test_split -n 4 2 hosts x 2 ranks" 1 "$BUILD/bin/baton-run" -n 4 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' "$BUILD/tests/test_split"
  run "test_split -n 5 3 hosts interleaved" 1 "$BUILD/bin/baton-run" -n 5 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK % 3)) exec "$0"' "$BUILD/tests/test_split"
  # Communicators that meet through a caller's key-value store
  # (baton_comm_init_kv), over a directory of files.
  run "test_kv --alone" 1 "$BUILD/tests/test_kv" --alone
  for n in 1 2 3 4; do
    run "test_kv -n $n" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_kv"
  done
  run "test_kv -n 3 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp "$BUILD/bin/baton-run" -n 3 \
    "$BUILD/tests/test_kv"
  run "test_kv -n 4 2 hosts x 2 ranks" 1 "$BUILD/bin/baton-run" -n 4 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' "$BUILD/tests/test_kv"
  # A rank that cannot prepare its child (a BATON_TRACE too long for the
  # child's trace name): every rank's split fails at once, naming it.
  run "test_split --one-rank-fails -n 3" 1 "$BUILD/bin/baton-run" -n 3 sh -c '
    f=/tmp/baton-split-$$-$(printf "%0220d" 0)
    [ "$BATON_RANK" != 1 ] && exec "$0" --one-rank-fails
    BATON_TRACE=$f.%r "$0" --one-rank-fails; rc=$?; rm -f "$f".*; exit $rc' \
    "$BUILD/tests/test_split"
  # BATON_DEBUG=INFO names each new communicator's parent, color, parent
  # ranks in the new order, links and ring (split 1 reverses the keys).
  run "test_split -n 3 BATON_DEBUG=INFO" 0 sh -c 'out=$(env BATON_DEBUG=INFO "$0" -n 3 "$1" 2>&1)
    printf "%s\n" "$out"
    printf "%s\n" "$out" | grep -q "rank 0 of 3 ready: communicator [0-9a-f]*, split 1 of [0-9a-f]*, color 0, parent ranks 2 1 0, transport shm, .*links to 2 peers by shm and 0 by tcp, ring 0(" &&
      printf "%s\n" "$out" | grep -q "split 3 of [0-9a-f]*: BATON_SPLIT_NONE"' \
    "$BUILD/bin/baton-run" "$BUILD/tests/test_split"
  run "test_failure split 4" 1 env BATON_TIMEOUT=20 "$BUILD/tests/test_failure" split 4
  run "test_failure split 4 BATON_TRANSPORT=tcp" 1 env BATON_TIMEOUT=20 BATON_TRANSPORT=tcp \
    "$BUILD/tests/test_failure" split 4
  run "test_failure split 4 2 hosts x 2 ranks" 1 env BATON_TIMEOUT=20 TEST_HOSTS=2 \
    "$BUILD/tests/test_failure" split 4
  # A child of a failed parent fails (issue 17): a rank killed under a
  # parent whose child and grandchild on the others do not have it.
  run "test_failure family 4" 1 env BATON_TIMEOUT=20 "$BUILD/tests/test_failure" family 4
  run "test_failure family 4 BATON_TRANSPORT=tcp" 1 env BATON_TIMEOUT=20 BATON_TRANSPORT=tcp \
    "$BUILD/tests/test_failure" family 4
  run "test_failure family 4 2 hosts x 2 ranks" 1 env BATON_TIMEOUT=20 TEST_HOSTS=2 \
    "$BUILD/tests/test_failure" family 4
  run "test_uniqueid --with-comm -n 3" 1 "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_uniqueid" \
    --with-comm
  run "test_uniqueid --with-comm -n 2 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp \
    "$BUILD/bin/baton-run" -n 2 "$BUILD/tests/test_uniqueid" --with-comm
  run "examples/split_overlap -n 4" 0 "$BUILD/bin/baton-run" -n 4 "$BUILD/examples/split_overlap"
}
# A peer that vanishes or stalls: errors naming it, never a hang.
fault_tests() {
  run "test_fault exit" 1 env BATON_TIMEOUT=5 "$BUILD/bin/baton-run" -n 2 "$BUILD/tests/test_fault" exit
  run "test_fault stall" 1 env BATON_TIMEOUT=1 "$BUILD/bin/baton-run" -n 2 "$BUILD/tests/test_fault" stall
}

# Point-to-point messages (test_p2p: ring, random pairs, all-to-one with
# tags out of order, order within a tag, beside collectives, ping-pong,
# mismatched counts, a split) at 1..6 ranks on shared memory, over TCP,
# 2 hosts x 2 ranks and 3 hosts interleaved; a rank that dies while the
# others wait on it.
p2p_tests() {
  for n in 1 2 3 4 5 6; do
    run "test_p2p -n $n" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_p2p"
  done
  for n in 2 3 4 5; do
    run "test_p2p -n $n BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp "$BUILD/bin/baton-run" \
      -n "$n" "$BUILD/tests/test_p2p"
  done
  for n in 3 5; do
    run "test_p2p -n $n 2 hosts interleaved" 1 "$BUILD/bin/baton-run" -n "$n" \
      sh -c 'BATON_HOSTID=h$((BATON_RANK % 2)) exec "$0"' "$BUILD/tests/test_p2p"
  done
  run "test_p2p -n 4 2 hosts x 2 ranks" 1 "$BUILD/bin/baton-run" -n 4 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' "$BUILD/tests/test_p2p"
  run "test_p2p -n 6 3 hosts interleaved" 1 "$BUILD/bin/baton-run" -n 6 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK % 3)) exec "$0"' "$BUILD/tests/test_p2p"
  for t in "" BATON_TRANSPORT=tcp; do
    run "test_p2p kill -n 3 $t" 1 env BATON_TIMEOUT=20 $t "$BUILD/bin/baton-run" -n 3 \
      "$BUILD/tests/test_p2p" kill
  done
  for n in 1 2 3 4 5 6; do
    run "examples/p2p_exchange -n $n" 0 "$BUILD/bin/baton-run" -n "$n" "$BUILD/examples/p2p_exchange"
  done
  # alltoallv (a collective on the executor, not on those lanes): every
  # dtype, counts per pair, gaps, in place, the i-form, a mismatch; with
  # 256-byte segments, blocks of many rounds beside empty ones.
  for n in 1 2 3 4 5 8; do
    run "test_alltoallv -n $n" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_alltoallv"
  done
  for n in 2 3 4 5; do
    run "test_alltoallv -n $n BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp \
      "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_alltoallv"
  done
  for n in 3 5; do
    run "test_alltoallv -n $n 2 hosts interleaved" 1 "$BUILD/bin/baton-run" -n "$n" \
      sh -c 'BATON_HOSTID=h$((BATON_RANK % 2)) exec "$0"' "$BUILD/tests/test_alltoallv"
  done
  run "test_alltoallv -n 4 2 hosts x 2 ranks" 1 "$BUILD/bin/baton-run" -n 4 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' "$BUILD/tests/test_alltoallv"
  run "test_alltoallv -n 8 3 hosts interleaved" 1 "$BUILD/bin/baton-run" -n 8 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK % 3)) exec "$0"' "$BUILD/tests/test_alltoallv"
  run "test_alltoallv -n 3 $RING_SMALL" 1 env $RING_SMALL "$BUILD/bin/baton-run" -n 3 \
    "$BUILD/tests/test_alltoallv"
  run "test_alltoallv -n 4 2 hosts x 2 ranks $RING_SMALL" 1 env $RING_SMALL \
    "$BUILD/bin/baton-run" -n 4 sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' \
    "$BUILD/tests/test_alltoallv"
}

# make test-quick: what a change most often breaks, in under a minute.
quick_suite() {
  unit_tests
  for n in 1 2 3 4; do
    run "test_coll -n $n --quick" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" --quick
  done
  run "test_coll -n 3 --quick $RING_SMALL" 1 \
    env $RING_SMALL "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_coll" --quick
  api_tests
  failure_tests
  calls_tests
  nonblocking_tests
  run "test_split -n 3" 1 "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_split"
  run "test_p2p -n 3" 1 "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_p2p"
  run "test_p2p -n 3 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp "$BUILD/bin/baton-run" -n 3 \
    "$BUILD/tests/test_p2p"
  run "test_alltoallv -n 3" 1 "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_alltoallv"
  fault_tests
}

full_suite() {
unit_tests
# The algorithm choice as a user meets it (BATON_ALGO errors,
# BATON_DEBUG=INFO's decision lines, baton-tune's file).
run "test_select.sh" 1 env BUILD="$BUILD" bash tests/test_select.sh
if [ -f tests/test_launcher.sh ]; then
  run "test_launcher.sh" 1 env BATON_RUN="$BUILD/bin/baton-run" \
    bash tests/test_launcher.sh
fi

# baton-run's options for many hosts, with `env` as the per-host command.
run "test_launcher_hosts.sh" 1 env BATON_RUN="$BUILD/bin/baton-run" bash tests/test_launcher_hosts.sh
# baton_comm_init under torchrun's, Open MPI's, Hydra's and Slurm's variables.
run "test_launch_env.sh" 1 env BUILD="$BUILD" bash tests/test_launch_env.sh
# The emulated cluster (scripts/cluster.sh); says why it skips when not root.
run "test_cluster_net.sh" 1 env BUILD="$BUILD" bash tests/test_cluster_net.sh

# N = 8 is more ranks than this machine usually has cores: oversubscription.
for n in 1 2 3 4 5 8; do
  coll_at "$n" "$BUILD"
done
# The largest counts through small segments: hundreds of rounds per call.
run "test_coll -n 4 $RING_SMALL" 1 env $RING_SMALL "$BUILD/bin/baton-run" -n 4 "$BUILD/tests/test_coll"
# The chain reduce forwards on non-roots and needs no scratch memory there.
run "test_coll -n 3 --coll reduce --quick BATON_ALGO=reduce:ring BATON_SCRATCH_BYTES=4K" 1 \
  env BATON_ALGO=reduce:ring BATON_SCRATCH_BYTES=4K "$BUILD/bin/baton-run" -n 3 \
  "$BUILD/tests/test_coll" --coll reduce --quick
# Every size through the flat algorithm, up to the largest counts.
run "test_coll -n 5 BATON_FLAT_BYTES=16M" 1 \
  env BATON_FLAT_BYTES=16M "$BUILD/bin/baton-run" -n 5 "$BUILD/tests/test_coll"
# flat's broadcast past a mailbox, through the fan-out stream: every count
# past 32 bytes, in pieces of 1 KiB (8 places, so the root waits for the
# slowest reader), two broadcasts in flight at once, and a rank killed in
# the middle of one (pieces of 64 bytes make it last).
for n in 2 3 4 8; do
  run "test_coll -n $n --coll broadcast $FAN" 1 env $FAN "$BUILD/bin/baton-run" -n "$n" \
    "$BUILD/tests/test_coll" --coll broadcast
done
# The chain, which the fan-out now takes big broadcasts from at 3 ranks
# and up, still through 256-byte segments.
for n in 3 4 8; do
  run "test_coll -n $n --coll broadcast BATON_ALGO=broadcast:ring $RING_SMALL" 1 env \
    BATON_ALGO=broadcast:ring $RING_SMALL "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" \
    --coll broadcast
done
run "test_nonblocking -n 4 $FAN" 1 env $FAN "$BUILD/bin/baton-run" -n 4 \
  "$BUILD/tests/test_nonblocking"
run "test_failure kill 4 TEST_COLL=broadcast TEST_KILL_MS=30 (the fan-out)" 1 env BATON_TIMEOUT=20 \
  TEST_COLL=broadcast TEST_KILL_MS=30 BATON_SEGMENT_BYTES=64 BATON_ALGO=broadcast:flat \
  "$BUILD/tests/test_failure" kill 4
# TCP on loopback: everywhere, with small segments over several sockets, and
# mixed with shared memory (BATON_HOSTID makes one machine look like several
# hosts; `%` interleaves them so the ring must reorder the ranks).
for n in 2 4; do
  run "test_coll -n $n --quick BATON_TRANSPORT=tcp" 1 \
    env BATON_TRANSPORT=tcp "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" --quick
done
run "test_coll -n 3 --quick BATON_TRANSPORT=tcp BATON_NSOCKS=3 $RING_SMALL" 1 \
  env BATON_TRANSPORT=tcp BATON_NSOCKS=3 $RING_SMALL "$BUILD/bin/baton-run" -n 3 \
  "$BUILD/tests/test_coll" --quick
# The recursive algorithms and the double binary tree, forced (folded
# pairs at 3 and 5), on shared memory and TCP, and with 256-byte segments
# (many rounds, runs of chunks cut across segments). Then rd's whole-buffer exchange in place over TCP
# with 16M segments: a message larger than the socket buffers, which must
# leave before the rank writes over it (exec.c flush_overlap).
ALGO_SMALL="BATON_FLAT_BYTES=0 BATON_SEGMENT_BYTES=256 BATON_PAIR_SEGMENT_BYTES=256 BATON_TCP_SEGMENT_BYTES=256"
for algo in rhd rd dbtree; do
  for n in 3 4 5 8; do
    run "test_coll -n $n --quick BATON_ALGO=$algo" 1 env BATON_FLAT_BYTES=0 BATON_ALGO=$algo \
      "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" --quick
  done
  for n in 3 4; do
    run "test_coll -n $n --quick BATON_ALGO=$algo BATON_TRANSPORT=tcp" 1 env BATON_FLAT_BYTES=0 \
      BATON_ALGO=$algo BATON_TRANSPORT=tcp "$BUILD/bin/baton-run" -n "$n" \
      "$BUILD/tests/test_coll" --quick
  done
  run "test_coll -n 5 --quick BATON_ALGO=$algo $ALGO_SMALL" 1 env $ALGO_SMALL BATON_ALGO=$algo \
    "$BUILD/bin/baton-run" -n 5 "$BUILD/tests/test_coll" --quick
  run "test_coll -n 3 --quick BATON_ALGO=$algo BATON_TRANSPORT=tcp $ALGO_SMALL" 1 env $ALGO_SMALL \
    BATON_ALGO=$algo BATON_TRANSPORT=tcp "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_coll" --quick
done
# The double binary tree at the other sizes up to 8 (1 and 2: no inner
# node; 6 and 7: trees cut short on both sides).
for n in 1 2 6 7; do
  run "test_coll -n $n --quick BATON_ALGO=dbtree" 1 env BATON_FLAT_BYTES=0 BATON_ALGO=dbtree \
    "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" --quick
done
# Registered memory (baton_mem_alloc): the direct algorithm forced on every
# collective, dtype and mode at 2 and 3 ranks (every count), at 4, 5 and 8
# (quick), through 256-byte pieces (many rounds) and with streaming
# stores at every size (the fused sums); with some ranks'
# buffers not registered (the calls hand themselves to the staged path);
# chosen by the selection; and across 2 emulated hosts, where the memory
# is local and every call staged. test_mem: the API's errors, calls in
# flight, allocation in a loop, a failed allocation.
for n in 2 3; do
  run "test_coll -n $n --registered all BATON_ALGO=direct" 1 env BATON_FLAT_BYTES=0 \
    BATON_ALGO=direct "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" --registered all
done
for n in 4 5 8; do
  run "test_coll -n $n --quick --registered all BATON_ALGO=direct" 1 env BATON_ALGO=direct \
    "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" --quick --registered all
done
run "test_coll -n 3 --quick --registered all BATON_ALGO=direct $ALGO_SMALL" 1 env $ALGO_SMALL \
  BATON_ALGO=direct "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_coll" --quick --registered all
# Streaming stores at every size: the fused sums of reduce_stream.c, whose
# heads and tails go through the scratch piece, and (BATON_FUSED=0) the
# scratch piece streamed whole.
for n in 2 3; do
  run "test_coll -n $n --registered all BATON_ALGO=direct BATON_STREAM_BYTES=0" 1 env \
    BATON_FLAT_BYTES=0 BATON_STREAM_BYTES=0 BATON_ALGO=direct "$BUILD/bin/baton-run" -n "$n" \
    "$BUILD/tests/test_coll" --registered all
done
run "test_coll -n 4 --quick --registered all BATON_ALGO=direct BATON_STREAM_BYTES=0 BATON_FUSED=0" \
  1 env BATON_STREAM_BYTES=0 BATON_FUSED=0 BATON_ALGO=direct "$BUILD/bin/baton-run" -n 4 \
  "$BUILD/tests/test_coll" --quick --registered all
for n in 2 3 4; do
  run "test_coll -n $n --quick --registered some BATON_ALGO=direct" 1 env BATON_ALGO=direct \
    "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" --quick --registered some
done
# Buffers not registered at all: allgather and alltoall copy by the
# kernel (BATON_CMA), every count and dtype; test_cma.sh: the set-up's
# probe as the log says it, a rank in a PID namespace of its own,
# BATON_CMA=0.
for n in 2 3; do
  run "test_coll -n $n BATON_ALGO=direct (CMA)" 1 env BATON_ALGO=direct "$BUILD/bin/baton-run" \
    -n "$n" "$BUILD/tests/test_coll"
done
run "test_coll -n 4 --quick BATON_ALGO=direct (CMA)" 1 env BATON_ALGO=direct \
  "$BUILD/bin/baton-run" -n 4 "$BUILD/tests/test_coll" --quick
# The copy of a rank's own block (out of place) streams where the call is
# large; BATON_STREAM_BYTES=0 makes every call large.
run "test_coll -n 3 --quick BATON_ALGO=direct BATON_STREAM_BYTES=0 (CMA)" 1 env BATON_ALGO=direct \
  BATON_STREAM_BYTES=0 "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_coll" --quick
run "test_cma.sh" 1 env BUILD="$BUILD" bash tests/test_cma.sh
run "test_coll -n 4 --registered all" 1 "$BUILD/bin/baton-run" -n 4 "$BUILD/tests/test_coll" \
  --registered all
# The automatic choice at N=2, where direct now takes large alltoalls.
run "test_coll -n 2 --quick --registered all" 1 "$BUILD/bin/baton-run" -n 2 \
  "$BUILD/tests/test_coll" --quick --registered all
run "test_coll -n 4 --quick --registered all 2 hosts x 2 ranks" 1 "$BUILD/bin/baton-run" -n 4 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0" --quick --registered all' \
  "$BUILD/tests/test_coll"
for n in 1 2 3 4; do
  run "test_mem -n $n" 1 "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_mem"
done
# Local memory (baton_mem_alloc_local): test_mem_local's arguments, pool,
# calls and descriptor budget, direct (BATON_MEM_LOCAL=1) and staged; the
# collective sweep on local buffers on every rank, on the even ranks beside
# registered ones (mixed) and beside malloc'd ones (local-some), direct
# forced; and chosen by the selection.
for n in 1 2 3 4; do
  run "test_mem_local -n $n BATON_MEM_LOCAL=1" 1 env BATON_MEM_LOCAL=1 "$BUILD/bin/baton-run" \
    -n "$n" "$BUILD/tests/test_mem_local"
done
run "test_mem_local -n 3" 1 "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_mem_local"
for n in 2 3; do
  run "test_coll -n $n --registered local BATON_ALGO=direct" 1 env BATON_FLAT_BYTES=0 \
    BATON_MEM_LOCAL=1 BATON_ALGO=direct "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" \
    --registered local
done
for m in mixed local-some; do
  run "test_coll -n 3 --quick --registered $m BATON_ALGO=direct" 1 env BATON_MEM_LOCAL=1 \
    BATON_ALGO=direct "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_coll" --quick --registered "$m"
done
run "test_coll -n 4 --quick --registered local" 1 env BATON_MEM_LOCAL=1 "$BUILD/bin/baton-run" \
  -n 4 "$BUILD/tests/test_coll" --quick --registered local
run "test_coll -n 4 allreduce 2M BATON_ALGO=rd BATON_TRANSPORT=tcp 16M segments" 1 env \
  BATON_ALGO=rd BATON_TRANSPORT=tcp BATON_SEGMENT_BYTES=16M BATON_PAIR_SEGMENT_BYTES=16M \
  BATON_TCP_SEGMENT_BYTES=16M "$BUILD/bin/baton-run" -n 4 "$BUILD/tests/test_coll" \
  --coll allreduce --dtype float32 --op sum --count 2000000
run "test_coll -n 4 --quick 2 hosts x 2 ranks" 1 "$BUILD/bin/baton-run" -n 4 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0" --quick' "$BUILD/tests/test_coll"
run "test_coll -n 5 --quick 3 hosts interleaved $RING_SMALL" 1 env $RING_SMALL \
  "$BUILD/bin/baton-run" -n 5 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK % 3)) exec "$0" --quick' "$BUILD/tests/test_coll"
# The binomial tree and the naive hub, forced: through 256-byte segments
# (runs of chunks over many rounds) at 3, 5 and 8 ranks and over TCP; the
# tree once up to the largest counts with the default segments.
for algo in tree naive; do
  for n in 3 5 8; do
    run "test_coll -n $n --quick BATON_ALGO=$algo $RING_SMALL" 1 env BATON_ALGO=$algo \
      $RING_SMALL "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_coll" --quick
  done
  run "test_coll -n 3 --quick BATON_ALGO=$algo BATON_TRANSPORT=tcp $RING_SMALL" 1 \
    env BATON_ALGO=$algo BATON_TRANSPORT=tcp $RING_SMALL "$BUILD/bin/baton-run" -n 3 \
    "$BUILD/tests/test_coll" --quick
done
run "test_coll -n 4 BATON_ALGO=tree" 1 env BATON_ALGO=tree "$BUILD/bin/baton-run" -n 4 \
  "$BUILD/tests/test_coll"
# The hierarchical allreduce: hosts of 2, hosts of 3 and 1 (small segments),
# interleaved hosts.
run "test_coll -n 4 --quick allreduce hier 2 hosts x 2 ranks" 1 env BATON_ALGO=hier \
  "$BUILD/bin/baton-run" -n 4 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0" --quick --coll allreduce' "$BUILD/tests/test_coll"
run "test_coll -n 4 allreduce hier hosts of 3 and 1 $RING_SMALL" 1 env BATON_ALGO=hier $RING_SMALL \
  BATON_PAIR_SEGMENT_BYTES=256 "$BUILD/bin/baton-run" -n 4 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK / 3)) exec "$0" --coll allreduce' "$BUILD/tests/test_coll"
run "test_coll -n 5 --quick allreduce hier 3 hosts interleaved" 1 env BATON_ALGO=hier \
  "$BUILD/bin/baton-run" -n 5 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK % 3)) exec "$0" --quick --coll allreduce' "$BUILD/tests/test_coll"
failure_tests
calls_tests
numa_tests
nonblocking_tests
split_tests
p2p_tests
# The correctness sweep across emulated hosts (network namespaces, TCP
# between them): 4 hosts over TCP, and 2 hosts x 2 ranks. Skips, saying
# why, without root or iproute2.
run "test_cluster.sh" 1 env BUILD="$BUILD" bash tests/test_cluster.sh
# A link cut without a word (no FIN, no RST) between two emulated hosts:
# both ranks fail long before BATON_TIMEOUT (TCP keepalive and user
# timeout, BATON_TCP_LINK_TIMEOUT).
run "test_linkbreak.sh" 1 env BUILD="$BUILD" bash tests/test_linkbreak.sh
# The unique-id path (the program starts its own ranks) and baton_mpi.h
# under a real mpirun.
run "test_uniqueid 1" 1 "$BUILD/tests/test_uniqueid" 1
run "test_uniqueid 3" 1 "$BUILD/tests/test_uniqueid" 3
run "test_uniqueid 4 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp "$BUILD/tests/test_uniqueid" 4
run "test_mpi_init.sh" 1 env BUILD="$BUILD" bash tests/test_mpi_init.sh
api_tests
fault_tests
# Strangers at the store port (garbage, huge lengths, wrong or no secret,
# a replayed handshake) while the job joins and runs: all turned away, the
# job's results exact.
run "test_hostile -n 3" 1 env BATON_TIMEOUT=10 "$BUILD/bin/baton-run" -n 3 "$BUILD/tests/test_hostile" 40
# Where the secret comes from: baton-run, the user, or nowhere (one WARN).
run "test_secret.sh" 1 env BUILD="$BUILD" bash tests/test_secret.sh
# A short soak: random collectives against the reference for a few seconds.
run "baton-soak -n 3 --seconds 3" 0 "$BUILD/bin/baton-run" -n 3 "$BUILD/bin/baton-soak" --seconds 3
# The training example: N ranks reach one process's weights (--check).
for n in 1 2 3 4; do
  run "examples/train --check -n $n" 0 "$BUILD/bin/baton-run" -n "$n" "$BUILD/examples/train" --check
done
# The Python binding (python/baton) and its examples, with Debian's
# interpreter and python3-numpy; without NumPy they are skipped, saying so.
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null ||
  skip_reason="$PY cannot import numpy (apt-get install -y python3-numpy)"
for n in 1 2 4; do
  run "test_python.py -n $n" 1 env PYTHONPATH=python "$BUILD/bin/baton-run" -n "$n" "$PY" tests/test_python.py
done
run "test_python.py stall" 1 env PYTHONPATH=python BATON_TIMEOUT=1 "$BUILD/bin/baton-run" -n 2 \
  "$PY" tests/test_python.py stall
for n in 1 2 3 4; do
  run "test_train.py -n $n" 1 env PYTHONPATH=python "$BUILD/bin/baton-run" -n "$n" "$PY" tests/test_train.py
done
run "examples/bucketing.py -n 2" 0 env PYTHONPATH=python "$BUILD/bin/baton-run" -n 2 \
  "$PY" examples/bucketing.py --iters 2
skip_reason=
# The PyTorch backend (python/csrc, `import baton.torch`): every call of
# torch.distributed through baton beside Gloo in one job (test_torch.py at
# 1..4 ranks, 2 hosts x 2 ranks by BATON_HOSTID, TCP; once with Gloo on both
# sides, which checks the test itself), DDP against Gloo and a rank killed
# mid-training (test_torch_ddp.py), the same on emulated hosts (root only),
# and examples/train_torch.py. Skipped, saying why, when /usr/bin/python3
# has no torch or the extension is not built.
if ! "$PY" -c 'import torch' 2>/dev/null; then
  skip_reason="$PY cannot import torch (apt-get install -y python3-torch libtorch-dev pybind11-dev)"
elif ! torch_why=$(PYTHONPATH=python "$PY" -c 'import baton.torch' 2>&1); then
  skip_reason="the extension does not load: $(printf '%s' "$torch_why" | tail -n 1 | cut -c1-200)"
fi
for n in 1 2 3 4; do
  run "test_torch.py -n $n" 1 env PYTHONPATH=python "$BUILD/bin/baton-run" -n "$n" \
    "$PY" tests/test_torch.py
done
run "test_torch.py -n 4 2 hosts x 2 ranks" 1 env PYTHONPATH=python "$BUILD/bin/baton-run" -n 4 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0" tests/test_torch.py' "$PY"
run "test_torch.py -n 3 --quick BATON_TRANSPORT=tcp" 1 env PYTHONPATH=python BATON_TRANSPORT=tcp \
  "$BUILD/bin/baton-run" -n 3 "$PY" tests/test_torch.py --quick
# BATON_MEM_LOCAL=1: torch's own tensors over local memory, every part again.
for n in 2 4; do
  run "test_torch.py -n $n BATON_MEM_LOCAL=1" 1 env PYTHONPATH=python BATON_MEM_LOCAL=1 \
    "$BUILD/bin/baton-run" -n "$n" "$PY" tests/test_torch.py
done
run "test_torch.py -n 4 2 hosts x 2 ranks BATON_MEM_LOCAL=1" 1 env PYTHONPATH=python \
  BATON_MEM_LOCAL=1 "$BUILD/bin/baton-run" -n 4 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0" tests/test_torch.py --quick' "$PY"
run "test_torch.py -n 3 --backend gloo" 1 "$BUILD/bin/baton-run" -n 3 "$PY" tests/test_torch.py \
  --backend gloo
for n in 1 2 3 4; do
  run "test_torch_ddp.py -n $n" 1 env PYTHONPATH=python "$BUILD/bin/baton-run" -n "$n" \
    "$PY" tests/test_torch_ddp.py
done
run "test_torch_ddp.py -n 2 BATON_MEM_LOCAL=1" 1 env PYTHONPATH=python BATON_MEM_LOCAL=1 \
  "$BUILD/bin/baton-run" -n 2 "$PY" tests/test_torch_ddp.py
run "test_torch_ddp.py -n 4 2 hosts x 2 ranks" 1 env PYTHONPATH=python "$BUILD/bin/baton-run" -n 4 \
  sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0" tests/test_torch_ddp.py' "$PY"
for n in 2 4; do
  run "test_torch_ddp.py kill $n" 1 "$PY" tests/test_torch_ddp.py kill "$n"
done
run "test_torch_ddp.py kill 3 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp \
  "$PY" tests/test_torch_ddp.py kill 3
run "test_torch_cluster.sh" 1 env BUILD="$BUILD" bash tests/test_torch_cluster.sh
run "examples/train_torch.py -n 2 --check" 0 "$BUILD/bin/baton-run" -n 2 "$PY" \
  examples/train_torch.py --steps 3 --sizes 256,512,256 --check
skip_reason=
# As a user would: install, build against the installed header with
# pkg-config, run at 1..8 ranks. And the README's knob table is current.
run "test_install.sh" 1 env BUILD="$BUILD" bash tests/test_install.sh
# find_package(baton) from CMake: C, C++ and the static archive, a version
# refused, the installed tree moved.
run "test_cmake.sh" 1 env BUILD="$BUILD" bash tests/test_cmake.sh
run "test_readme.sh" 1 env BUILD="$BUILD" bash tests/test_readme.sh
# BATON_TRACE's lines, and baton-viz / baton-model (test_viz.sh traces 4 ranks).
for n in 1 3; do
  run "test_trace -n $n" 1 env BATON_TRACE="$LOGS/trace-n$n.%r" "$BUILD/bin/baton-run" -n "$n" \
    "$BUILD/tests/test_trace"
done
# More steps than the 2N + 1 the trace was once sized for: hier's leader of
# a host of 2, among 4 hosts, runs 14 steps on 5 ranks (the times now live
# in each call, sized by the most steps any algorithm needs).
HIER_HOSTS='BATON_HOSTID=h$((BATON_RANK < 2 ? 0 : BATON_RANK)) exec "$0"'
run "test_trace -n 5 BATON_ALGO=allreduce:hier 4 hosts" 1 env BATON_ALGO=allreduce:hier \
  BATON_TRACE="$LOGS/trace-hier.%r" "$BUILD/bin/baton-run" -n 5 sh -c "$HIER_HOSTS" \
  "$BUILD/tests/test_trace"
run "test_viz.sh" 1 env BUILD="$BUILD" bash tests/test_viz.sh
# baton-bench's --check for every collective it has, its flags and errors;
# the peers too where bench/Makefile.peers built them.
run "test_bench.sh" 1 env BUILD="$BUILD" bash tests/test_bench.sh

# The sanitizer passes; with BATON_SKIP_SAN=1 each entry shows as skipped.
[ "${BATON_SKIP_SAN:-0}" = 1 ] && skip_reason="BATON_SKIP_SAN=1"
# The nested make must not inherit the outer make's jobserver.
if build "make SAN=1" 'asan *' env -u MAKEFLAGS -u MFLAGS make -j2 SAN=1; then
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
  for unit in test_reduce test_store test_auth test_tcp_end; do
    if [ -f "tests/$unit.c" ]; then
      run "asan $unit" 1 "$SAN_BUILD/tests/$unit"
    fi
  done
  run "asan test_select.sh" 1 env BUILD="$SAN_BUILD" bash tests/test_select.sh
  for n in 1 2 3 4; do
    run "asan test_coll -n $n --quick" 1 \
      "$SAN_BUILD/bin/baton-run" -n "$n" "$SAN_BUILD/tests/test_coll" --quick
  done
  run "asan test_coll -n 3 --quick $RING_SMALL" 1 env $RING_SMALL \
    "$SAN_BUILD/bin/baton-run" -n 3 "$SAN_BUILD/tests/test_coll" --quick
  run "asan test_failure kill 3 BATON_TRANSPORT=tcp" 1 env BATON_TIMEOUT=20 \
    BATON_TRANSPORT=tcp "$SAN_BUILD/tests/test_failure" kill 3
  run "asan test_failure mismatch 4 2 hosts x 2 ranks" 1 env BATON_TIMEOUT=20 TEST_HOSTS=2 \
    "$SAN_BUILD/tests/test_failure" mismatch 4
  run "asan test_coll -n 4 --quick 2 hosts x 2 ranks, tcp $RING_SMALL" 1 env $RING_SMALL \
    BATON_NSOCKS=2 "$SAN_BUILD/bin/baton-run" -n 4 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0" --quick' "$SAN_BUILD/tests/test_coll"
  run "asan test_calls -n 3" 1 "$SAN_BUILD/bin/baton-run" -n 3 "$SAN_BUILD/tests/test_calls"
  # Registered memory: the direct algorithm, and calls handed to the staged path.
  run "asan test_coll -n 3 --quick --registered all BATON_ALGO=direct" 1 env BATON_ALGO=direct \
    "$SAN_BUILD/bin/baton-run" -n 3 "$SAN_BUILD/tests/test_coll" --quick --registered all
  run "asan test_coll -n 3 --quick --registered some BATON_ALGO=direct" 1 env BATON_ALGO=direct \
    "$SAN_BUILD/bin/baton-run" -n 3 "$SAN_BUILD/tests/test_coll" --quick --registered some
  run "asan test_mem -n 3" 1 "$SAN_BUILD/bin/baton-run" -n 3 "$SAN_BUILD/tests/test_mem"
  run "asan test_mem_local -n 3" 1 env BATON_MEM_LOCAL=1 "$SAN_BUILD/bin/baton-run" -n 3 \
    "$SAN_BUILD/tests/test_mem_local"
  run "asan test_kv -n 3" 1 "$SAN_BUILD/bin/baton-run" -n 3 "$SAN_BUILD/tests/test_kv"
  run "asan test_nonblocking -n 3" 1 "$SAN_BUILD/bin/baton-run" -n 3 \
    "$SAN_BUILD/tests/test_nonblocking"
  run "asan test_p2p -n 4 2 hosts x 2 ranks" 1 "$SAN_BUILD/bin/baton-run" -n 4 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK / 2)) exec "$0"' "$SAN_BUILD/tests/test_p2p"
  run "asan test_trace -n 5 BATON_ALGO=allreduce:hier 4 hosts" 1 env BATON_ALGO=allreduce:hier \
    BATON_TRACE="$LOGS/asan-trace-hier.%r" "$SAN_BUILD/bin/baton-run" -n 5 \
    sh -c 'BATON_HOSTID=h$((BATON_RANK < 2 ? 0 : BATON_RANK)) exec "$0"' "$SAN_BUILD/tests/test_trace"
  run "asan test_trace -n 3" 1 env BATON_TRACE="$LOGS/asan-trace.%r" \
    "$SAN_BUILD/bin/baton-run" -n 3 "$SAN_BUILD/tests/test_trace"
  for n in 1 2; do
    run "asan test_api -n $n" 1 "$SAN_BUILD/bin/baton-run" -n "$n" \
      "$SAN_BUILD/tests/test_api"
  done
  # Parsing the launchers' variables, malformed ones included.
  run "asan test_launch_env.sh" 1 env BUILD="$SAN_BUILD" bash tests/test_launch_env.sh
  run "asan test_hostile -n 2" 1 env BATON_TIMEOUT=10 "$SAN_BUILD/bin/baton-run" -n 2 \
    "$SAN_BUILD/tests/test_hostile" 10
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

# ThreadSanitizer over what runs threads: the store's server thread in the
# unit tests, and beside the collectives of rank 0 in 2- and 3-rank jobs.
if build "make TSAN=1" 'tsan *' env -u MAKEFLAGS -u MFLAGS make -j2 TSAN=1; then
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  for unit in test_store test_auth; do
    run "tsan $unit" 1 build-tsan/tests/$unit
  done
  for n in 2 3; do
    run "tsan test_coll -n $n --quick" 1 build-tsan/bin/baton-run -n $n build-tsan/tests/test_coll --quick
  done
  run "tsan test_api -n 2" 1 build-tsan/bin/baton-run -n 2 build-tsan/tests/test_api
  # The calls in flight: the progress thread beside the caller.
  run "tsan test_nonblocking -n 2" 1 build-tsan/bin/baton-run -n 2 build-tsan/tests/test_nonblocking
  run "tsan test_coll -n 3 --quick --coll broadcast $FAN" 1 env $FAN build-tsan/bin/baton-run -n 3 \
    build-tsan/tests/test_coll --quick --coll broadcast
  run "tsan test_mem -n 2" 1 build-tsan/bin/baton-run -n 2 build-tsan/tests/test_mem
  run "tsan test_mem_local -n 2" 1 env BATON_MEM_LOCAL=1 build-tsan/bin/baton-run -n 2 \
    build-tsan/tests/test_mem_local
  run "tsan test_nonblocking -n 3 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp \
    build-tsan/bin/baton-run -n 3 build-tsan/tests/test_nonblocking
  run "tsan test_nonblocking abort -n 2" 1 env BATON_TIMEOUT=20 build-tsan/bin/baton-run -n 2 \
    build-tsan/tests/test_nonblocking abort
  run "tsan test_calls -n 3" 1 build-tsan/bin/baton-run -n 3 build-tsan/tests/test_calls
  run "tsan test_hostile -n 2" 1 env BATON_TIMEOUT=10 build-tsan/bin/baton-run -n 2 build-tsan/tests/test_hostile 10
  # Splits, and two children driven from two threads of each rank.
  run "tsan test_split -n 3" 1 build-tsan/bin/baton-run -n 3 build-tsan/tests/test_split
  run "tsan test_failure family 3" 1 env BATON_TIMEOUT=20 build-tsan/tests/test_failure family 3
  run "tsan test_p2p -n 3" 1 build-tsan/bin/baton-run -n 3 build-tsan/tests/test_p2p
  run "tsan test_alltoallv -n 3" 1 build-tsan/bin/baton-run -n 3 build-tsan/tests/test_alltoallv
  run "tsan test_p2p -n 3 BATON_TRANSPORT=tcp" 1 env BATON_TRANSPORT=tcp \
    build-tsan/bin/baton-run -n 3 build-tsan/tests/test_p2p
  run "tsan test_fault exit" 1 env BATON_TIMEOUT=5 build-tsan/bin/baton-run -n 2 build-tsan/tests/test_fault exit
  unset TSAN_OPTIONS
fi
skip_reason=

# Fuzzing: each libFuzzer target of tests/fuzz/ (store server, store
# client, handshake) for FUZZ_SECONDS from its committed corpus. It needs
# clang and libclang-rt-14-dev. Without clang that is a failure, not a skip:
# the README's set-up line, which CI runs, installs both.
fuzz_make=(env -u MAKEFLAGS -u MFLAGS make -j2 fuzz)
if ! command -v clang >/dev/null; then
  fuzz_make=(sh -c 'echo "clang is not installed: apt-get install -y clang libclang-rt-14-dev"
    echo "a failure, not a skip: the README set-up line (and so CI) installs clang"; exit 1')
fi
[ "${BATON_SKIP_FUZZ:-0}" = 1 ] && skip_reason="BATON_SKIP_FUZZ=1"
if build "make fuzz" 'fuzz *' "${fuzz_make[@]}"; then
  for t in fuzz_store_server fuzz_store_client fuzz_auth fuzz_tcp; do
    run "fuzz $t ${FUZZ_SECONDS:-20} s" 1 bash tests/fuzz/run.sh "${FUZZ_SECONDS:-20}" "$t"
  done
fi
skip_reason=
}

suite() {
  if [ $quick = 1 ]; then quick_suite; else full_suite; fi
}

# --list and --only: walk the suite once for its names, without running it.
if [ $list = 1 ] || [ -n "$only" ]; then
  listing=1
  suite >/dev/null
  listing=0
  for s in "${names[@]}"; do
    if [ -z "$only" ] || matches "$s" "$only"; then selected+=("$s"); fi
  done
  if [ $list = 1 ]; then
    printf '%s\n' "${selected[@]+"${selected[@]}"}"
    exit 0
  fi
  if [ ${#selected[@]} = 0 ]; then
    echo "tests/run.sh: no test matches '$only' (a name matches when it begins with it;" \
      "with *, ? or [ it is a glob over the whole name)" >&2
    near=()
    for s in "${names[@]}"; do [[ $s == *"$only"* ]] && near+=("$s"); done
    if [ ${#near[@]} -gt 0 ]; then
      echo "names that contain it ('*$only*' selects them):" >&2
      printf '  %s\n' "${near[@]:0:8}" >&2
    else
      echo "some names:" >&2
      printf '  %s\n' "${names[@]:0:8}" >&2
    fi
    echo "bash tests/run.sh --list prints them all" >&2
    exit 2
  fi
fi

suite_start=$(now_ms)
suite
ms=$(($(now_ms) - suite_start))
echo "suite took $((ms / 1000)) s; logs in $LOGS/"
for f in "${failures[@]+"${failures[@]}"}"; do
  echo "failed: $f"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
