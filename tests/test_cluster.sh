#!/usr/bin/env bash
# test_cluster.sh - the correctness sweep across emulated hosts
# (scripts/cluster.sh, links of 1 Gbit/s each way): test_coll on 4 hosts with
# BATON_TRANSPORT=tcp, and on 2 hosts x 2 ranks (shared memory inside a host,
# TCP between), each also --quick through the ring with 256-byte segments,
# as tests/run.sh does on one host.
#   BUILD=build bash tests/test_cluster.sh
# First, from rank 0's INFO line, that every link of the ring is TCP with
# BATON_TRANSPORT=tcp, and shared memory inside a host, TCP between, without.
# Needs root, iproute2 and network namespaces; without them it says why and
# exits 77, a skip.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
C=scripts/cluster.sh
COLL=$BUILD/tests/test_coll
DEMO=$BUILD/examples/allreduce_demo
export BATON_RUN=$BUILD/bin/baton-run BATON_TIMEOUT=${BATON_TIMEOUT:-60}
# shellcheck source=tests/shlib.sh
. tests/shlib.sh

# sweep NAME CMD...: CMD runs the ranks; it passes when every rank exits 0
# and rank 0's summary says `N passed, 0 failed` with N > 0.
sweep() {
  local name=$1 log
  shift
  log=$LOGDIR/$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.=-' '_').log
  "$@" >"$log" 2>&1
  local st=$?
  if [ $st -eq 0 ] && grep -Eq '(^|[^0-9])[1-9][0-9]* passed, 0 failed' "$log"; then
    ok
    echo "PASS $name"
  else
    bad "$name: status $st; last lines of $log:"
    tail -n 15 "$log" | sed 's/^/  | /' >&2
  fi
}

inside() {
  local L=(timeout -k 10 900 "$C" launch --timeout 600)
  local small=(BATON_FLAT_BYTES=0 BATON_SEGMENT_BYTES=256 BATON_TCP_SEGMENT_BYTES=256 BATON_STREAM_BYTES=0)
  # Which transport each link takes, as rank 0 logs it.
  local info=(BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=INIT)
  env BATON_TRANSPORT=tcp "${info[@]}" "${L[@]}" -n 4 --ppn 1 -- "$DEMO" 1 >"$LOGDIR/ring-tcp.log" 2>&1
  expect "4 hosts, tcp: the demo's status" $? 0
  expect_line "4 hosts, tcp: every link is tcp" "$LOGDIR/ring-tcp.log" \
    '\[0\] baton INFO INIT rank 0 of 4 ready: .*transport tcp, .*ring 0[^ ]* =tcp=> 1[^ ]* =tcp=> 2[^ ]* =tcp=> 3[^ ]* =tcp=> 0$'
  env "${info[@]}" "${L[@]}" -n 4 --ppn 2 -- "$DEMO" 1 >"$LOGDIR/ring-mixed.log" 2>&1
  expect "2 hosts x 2 ranks: the demo's status" $? 0
  expect_line "2 hosts x 2 ranks: shm inside a host, tcp between" "$LOGDIR/ring-mixed.log" \
    '\[0\] baton INFO INIT rank 0 of 4 ready: .*transport shm\+tcp, .*ring 0[^ ]* =shm=> 1[^ ]* =tcp=> 2[^ ]* =shm=> 3[^ ]* =tcp=> 0$'

  sweep "4 hosts, tcp" env BATON_TRANSPORT=tcp "${L[@]}" -n 4 --ppn 1 -- "$COLL"
  sweep "4 hosts, tcp, --quick ${small[*]}" env BATON_TRANSPORT=tcp "${small[@]}" \
    "${L[@]}" -n 4 --ppn 1 -- "$COLL" --quick
  sweep "2 hosts x 2 ranks" "${L[@]}" -n 4 --ppn 2 -- "$COLL"
  sweep "2 hosts x 2 ranks, --quick ${small[*]}" env "${small[@]}" \
    "${L[@]}" -n 4 --ppn 2 -- "$COLL" --quick
  finish
}
if [ "${1:-}" = --inside ]; then
  inside
  exit
fi

if [ ! -x "$COLL" ] || [ ! -x "$DEMO" ] || [ ! -x "$BATON_RUN" ]; then
  echo "no $COLL, $DEMO or $BATON_RUN: run make first" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
if why=$(cluster_skip_reason); then
  skip_all "the sweeps on emulated hosts: $why"
fi

export LOGDIR=$BUILD/test-logs/cluster BUILD
mkdir -p "$LOGDIR"
$C with 4 --rate 1gbit -- bash "$0" --inside
