#!/usr/bin/env bash
# test_cluster.sh - the correctness sweep across emulated hosts
# (scripts/cluster.sh, links of 1 Gbit/s each way): test_coll on 4 hosts with
# BATON_TRANSPORT=tcp, and on 2 hosts x 2 ranks (shared memory inside a host,
# TCP between), each also --quick through the ring with 256-byte segments,
# as tests/run.sh does on one host.
#   BUILD=build bash tests/test_cluster.sh
# Needs root, iproute2 and network namespaces; without them it says why and
# passes nothing. A build without a TCP transport (no BATON_TRANSPORT among
# `baton-bench --params`) cannot run the sweeps: then it checks instead that
# a job on 2 hosts fails at once with the error saying all ranks must share
# one host, and says that it skipped the sweeps.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
C=scripts/cluster.sh
COLL=$BUILD/tests/test_coll
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
  local small=(BATON_FLAT_BYTES=0 BATON_SEGMENT_BYTES=256 BATON_STREAM_BYTES=0)
  if ! "$BUILD/bin/baton-bench" --params | grep -q '^BATON_TRANSPORT '; then
    # Today's library: ranks on different hosts are refused, clearly.
    "${L[@]}" -n 4 --ppn 2 -- "$COLL" --quick >"$LOGDIR/two-hosts.log" 2>&1
    expect_failure "2 hosts x 2 ranks without TCP" $?
    expect_line "2 hosts x 2 ranks without TCP: the error" "$LOGDIR/two-hosts.log" \
      'rank [0-9] runs on ".*netns=[0-9]+" but rank [0-9] on ".*netns=[0-9]+": .*all ranks must share one host'
    echo "SKIP the sweeps across hosts: this build has no TCP transport (no BATON_TRANSPORT knob)"
    finish
    return
  fi
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

if [ ! -x "$COLL" ] || [ ! -x "$BATON_RUN" ]; then
  echo "no $COLL or $BATON_RUN: run make first" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
if skip=$(cluster_skip_reason); then
  echo "SKIP the sweeps on emulated hosts: $skip"
  finish
  exit
fi

export LOGDIR=$BUILD/test-logs/cluster BUILD
mkdir -p "$LOGDIR"
$C with 4 --rate 1gbit -- bash "$0" --inside
