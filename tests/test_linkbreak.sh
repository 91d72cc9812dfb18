#!/usr/bin/env bash
# tests/test_linkbreak.sh - a link that breaks without a word: two emulated
# hosts run allreduces over TCP, then host 1's link goes down (no FIN, no
# RST). Both ranks must fail long before BATON_TIMEOUT (30 s), in less than
# half of it from their last call's start (tests/test_fault.c link); the
# link's watch, BATON_TCP_LINK_TIMEOUT (3 s), is what should catch it. Without root
# or iproute2 it says why and exits 77, a skip.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null ||
   ! { ip netns add baton-probe-$$ 2>/dev/null && ip netns del baton-probe-$$; }; then
  echo "SKIP: needs root and iproute2 with network namespaces"
  exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
BATON_RUN=$BUILD/bin/baton-run scripts/cluster.sh with 2 --rate 0 -- bash -c "
  (sleep 3; ip netns exec baton-h1 ip link set eth0 down) &
  BATON_TIMEOUT=30 BATON_RUN=$BUILD/bin/baton-run scripts/cluster.sh launch -n 2 --ppn 1 \
    --tag-output -- $BUILD/tests/test_fault link
" >"$out" 2>&1
st=$?
grep -E '^\[[01]\] (ok|FAIL)' "$out" || tail -15 "$out"
passed=$(grep -cE '^\[[01]\] ok ' "$out")
echo "$passed passed, $((2 - passed)) failed"
[ "$st" = 0 ] && [ "$passed" = 2 ]
