#!/usr/bin/env bash
# test_torch_cluster.sh - baton's torch.distributed backend beside Gloo on
# emulated hosts (scripts/cluster.sh, links of 1 Gbit/s each way):
# tests/test_torch.py and tests/test_torch_ddp.py on 2 hosts x 2 ranks
# (shared memory inside a host, TCP between), and test_torch.py --quick on
# 4 hosts of one rank each (TCP everywhere).
#   BUILD=build bash tests/test_torch_cluster.sh
# Gloo in the hosts is told its interface (GLOO_SOCKET_IFNAME=eth0): the
# host name resolves to loopback there. Needs root, iproute2, network
# namespaces and /usr/bin/python3 with torch and the built extension;
# without them it says why and exits 77, a skip.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
C=scripts/cluster.sh
PY=/usr/bin/python3
export BATON_RUN=$BUILD/bin/baton-run BATON_TIMEOUT=${BATON_TIMEOUT:-60}
# shellcheck source=tests/shlib.sh
. tests/shlib.sh

# run_job NAME CMD...: CMD runs the ranks; it passes when every rank exits 0
# and the summary says `N passed, 0 failed` with N > 0. baton-run picks
# MASTER_PORT free in this namespace, which a host's own namespace may
# hold all the same (one fresh-clone CI run: errno 98 at the 4-host job,
# after two jobs in the same hosts): when torch's store could not bind it,
# the job runs once more with a port picked anew, and says so.
run_job() {
  local name=$1 log
  shift
  log=$LOGDIR/$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.=-' '_').log
  "$@" >"$log" 2>&1
  local st=$?
  if [ $st -ne 0 ] && grep -q 'failed to bind to .*Address already in use' "$log"; then
    echo "note $name: torch's store found MASTER_PORT taken in a host; once more, another port"
    mv "$log" "$log.port-taken"
    "$@" >"$log" 2>&1
    st=$?
  fi
  if [ $st -eq 0 ] && grep -Eq '(^|[^0-9])[1-9][0-9]* passed, 0 failed' "$log"; then
    ok
    echo "PASS $name: $(grep -E 'passed, [0-9]+ failed' "$log" | tail -n 1)"
  else
    bad "$name: status $st; last lines of $log:"
    grep -E 'FAIL|passed, [0-9]+ failed' "$log" | tail -n 15 | sed 's/^/  | /' >&2
    tail -n 5 "$log" | sed 's/^/  | /' >&2
  fi
}

inside() {
  local L=(timeout -k 10 600 "$C" launch --timeout 500)
  local E=(env GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=python "$PY")
  run_job "test_torch.py, 2 hosts x 2 ranks" "${L[@]}" -n 4 --ppn 2 -- "${E[@]}" tests/test_torch.py
  run_job "test_torch_ddp.py, 2 hosts x 2 ranks" "${L[@]}" -n 4 --ppn 2 -- "${E[@]}" \
    tests/test_torch_ddp.py
  run_job "test_torch.py --quick, 4 hosts" "${L[@]}" -n 4 --ppn 1 -- "${E[@]}" \
    tests/test_torch.py --quick
  finish
}
if [ "${1:-}" = --inside ]; then
  inside
  exit
fi

if [ ! -x "$BATON_RUN" ]; then
  echo "no $BATON_RUN: run make first" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
  skip_all "$PY cannot import torch (apt-get install -y python3-torch)"
fi
if ! why=$(PYTHONPATH=python "$PY" -c 'import baton.torch' 2>&1); then
  skip_all "baton.torch does not load: $(printf '%s' "$why" | tail -n 1)"
fi
if why=$(cluster_skip_reason); then
  skip_all "the torch tests on emulated hosts: $why"
fi

export LOGDIR=$BUILD/test-logs/torch-cluster BUILD
mkdir -p "$LOGDIR"
$C with 4 --rate 1gbit -- bash "$0" --inside
