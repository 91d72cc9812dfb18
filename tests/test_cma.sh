#!/usr/bin/env bash
# tests/test_cma.sh - direct by the kernel (BATON_CMA, exec_direct.c) as a
# user meets it, with buffers that are not registered:
#  - the set-up finds that every rank reads the others (BATON_DEBUG=INFO
#    says "(CMA): yes", and rank 0 what a copy by the kernel costs), and
#    test_coll with BATON_ALGO=direct passes: its
#    allgathers and alltoalls copy by the kernel (no "staged" line names
#    them), and its broadcasts at N=2 (at N=3 on fewer than 3 cores the
#    selection says why not), the other collectives hand themselves to the
#    staged path;
#  - a rank in a PID namespace of its own (unshare --pid, root only; else
#    skipped) is another host (its pids and the others' name different
#    processes), reached by TCP, so direct serves nobody, and the results
#    are right;
#  - BATON_CMA=0: the set-up does not probe, every call is staged, right.
# No timing is checked.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUN=$BUILD/bin/baton-run
COLL=$BUILD/tests/test_coll
tmp=$(mktemp -d /tmp/baton-cma.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0 skipped=0
ok() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# coll NAME [ENV...] [-- WRAPPER...]: test_coll -n $RANKS (3 unless set)
# --quick with BATON_ALGO=direct, logged; each rank through WRAPPER when given.
coll() {
  local name=$1 envs=() wrap=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift && wrap=("$@")
  if env ${envs[@]+"${envs[@]}"} BATON_ALGO=direct BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=SHM,COLL,INIT \
    timeout 300 "$RUN" -n "${RANKS:-3}" ${wrap[@]+"${wrap[@]}"} "$COLL" --quick >"$tmp/$name" 2>&1 &&
    grep -q ' 0 failed' "$tmp/$name"; then
    ok
  else
    fail "$name: test_coll failed: $(grep -v INFO "$tmp/$name" | tail -3)"
  fi
}
# staged NAME COLL: how many of COLL's calls said they were staged.
staged() { grep -c "INFO COLL $2 #[0-9]*: not every rank's buffers are registered" "$tmp/$1"; }

coll reach
# Rank 0 measures what a copy by the kernel costs (select.c), once.
n=$(grep -cE 'INIT a copy by the kernel \(CMA\): [0-9.e+-]+ ns/B' "$tmp/reach")
if [ "$n" = 1 ]; then ok; else fail "reach: want rank 0's measured kernel copy once, got $n"; fi
n=$(grep -c '(CMA): yes' "$tmp/reach")
# Each rank sets up two shared-memory segments: the collectives' and the
# point-to-point messages'.
if [ "$n" = 6 ]; then ok; else fail "reach: want '(CMA): yes' from 3 ranks x 2 segments, got $n"; fi
for c in allgather alltoall; do
  k=$(staged reach "$c")
  if [ "$k" = 0 ]; then ok; else fail "reach: $k ${c}s staged, none should be"; fi
done
# A broadcast copies by the kernel only where every rank of the host has a
# core of its own (select.c): at N=2 on this machine's cores, never staged;
# with more ranks than cores the selection says why not, once per rank.
cores=$(nproc)
if [ "$cores" -ge 2 ]; then
  RANKS=2 coll reach2
  k=$(staged reach2 broadcast)
  if [ "$k" = 0 ]; then ok; else fail "reach2: $k broadcasts staged, none should be"; fi
else
  echo "SKIP: a broadcast by the kernel at N=2 needs 2 cores"
  skipped=$((skipped + 1))
fi
if [ "$cores" -lt 3 ]; then
  n=$(grep -c 'broadcast: BATON_ALGO asks for direct, but a broadcast by the kernel needs a core for each rank' "$tmp/reach")
  if [ "$n" = 3 ]; then ok; else fail "reach: want the broadcast's fallback said by 3 ranks on $cores cores, got $n"; fi
fi
# A reduction cannot be direct's without registered memory: the selection
# says so once per rank and picks another.
n=$(grep -c 'allreduce: BATON_ALGO asks for direct, but it needs' "$tmp/reach")
if [ "$n" = 3 ]; then ok; else fail "reach: want the allreduce's fallback said by 3 ranks, got $n"; fi

if [ "$(id -u)" = 0 ] && unshare --pid --fork true 2>/dev/null; then
  # Rank 1 in a PID namespace of its own: the others' pids name nobody
  # there, so it is another host (bootstrap.c), reached by TCP; ranks 0
  # and 2 still share memory and reach each other by CMA.
  coll apart -- sh -c 'if [ "$BATON_RANK" = 1 ]; then exec unshare --pid --fork "$@"; fi; exec "$@"' sh
  n=$(grep -c '(CMA): yes' "$tmp/apart")
  if [ "$n" = 4 ]; then ok; else fail "apart: want '(CMA): yes' from ranks 0 and 2 x 2 segments, got $n"; fi
  n=$(grep -c 'alltoall: BATON_ALGO asks for direct, but it needs' "$tmp/apart")
  if [ "$n" = 3 ]; then ok; else fail "apart: want the alltoall's fallback said by 3 ranks, got $n"; fi
else
  echo "SKIP: a rank in a PID namespace of its own needs root and unshare --pid"
  skipped=$((skipped + 1))
fi

coll off BATON_CMA=0
n=$(grep -c '(CMA): off (BATON_CMA=0)' "$tmp/off")
if [ "$n" = 6 ]; then ok; else fail "off: want '(CMA): off' from 3 ranks x 2 segments, got $n"; fi
if ! grep -q 'a copy by the kernel (CMA):' "$tmp/off"; then ok; else fail "off: measured all the same"; fi
n=$(grep -c 'alltoall: BATON_ALGO asks for direct, but it needs' "$tmp/off")
if [ "$n" = 3 ]; then ok; else fail "off: want the alltoall's fallback said by 3 ranks, got $n"; fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
