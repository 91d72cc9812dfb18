#!/usr/bin/env bash
# test_cluster_net.sh - scripts/cluster.sh itself: 3 emulated hosts have
# exactly their addresses, reach each other and nothing else, links are
# shaped both ways, the root namespace is left as it was, `launch` places
# ranks and keeps baton-run's failure handling, usage errors are clear, and
# everything is gone after `with`, after a signal, and after `down` (twice).
#   BUILD=build bash tests/test_cluster_net.sh
# Needs root, iproute2 and network namespaces; without them it says why and
# checks only the errors cluster.sh gives. ping (iputils-ping) is used when
# present, else a refused TCP connection shows that a host answered.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
C=scripts/cluster.sh
# shellcheck source=tests/shlib.sh
. tests/shlib.sh

# The id of a namespace by name (its nsfs inode), or "gone".
ns_id() { stat -L -c %i "/run/netns/$1" 2>/dev/null || echo gone; }

# What this test may not change in the namespace it runs in.
root_ns_state() {
  ip -o link show | awk '{print $2}'
  ip -o addr show | awk '{print $2, $3, $4}'
  ip -4 route show
}

# --- the errors that need neither root nor a cluster
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups bash -s up 2 <$C 2>&1)
  expect_failure "up as a user" $?
  expect_line "up as a user: the error" <(echo "$out") 'must run as root'
fi
# A PATH with what cluster.sh needs to get as far as its check, but no ip, tc.
mkdir "$tmp/bin"
for f in bash id awk dirname sed cat; do ln -s "$(command -v $f)" "$tmp/bin/"; done
out=$(PATH=$tmp/bin bash $C up 2 2>&1)
expect_failure "up without iproute2" $?
if [ "$(id -u)" = 0 ]; then
  expect_line "up without iproute2: the error" <(echo "$out") "'ip' not found: install iproute2"
fi
out=$(bash $C up 0 2>&1)
expect_failure "up 0" $?
expect_line "up 0: the error" <(echo "$out") "up wants a number of hosts in 1\.\.250, not '0'"
out=$(bash $C up 2 --rate fast 2>&1)
expect_failure "up --rate fast" $?
expect_line "up --rate fast: the error" <(echo "$out") "--rate 'fast' is not a tc rate"

if why=$(cluster_skip_reason); then
  skip "the emulated-cluster checks: $why"
  finish
  exit
fi

# --- inside a cluster of 3 hosts at 100mbit (run by `with`, below)
inside() {
  local i j want
  expect "CLUSTER_HOSTS" "${CLUSTER_HOSTS:-}" 3
  for i in 0 1 2; do
    local ns=baton-h$i a=198.18.0.$((i + 1))
    expect "h$i: IPv4 addresses" "$(ip -n $ns -4 -o addr show | awk '{print $2, $4}' | paste -sd,)" \
      "lo 127.0.0.1/8,eth0 $a/24"
    expect "h$i: no IPv6 addresses" "$(ip -n $ns -6 -o addr show)" ""
    expect "h$i: the one route" "$(ip -n $ns -4 route show | sed 's/  *$//')" \
      "198.18.0.0/24 dev eth0 proto kernel scope link src $a"
    for want in 192.0.2.1 198.19.0.1 127.0.0.1; do # nothing routes out
      if [ $want = 127.0.0.1 ]; then
        expect "h$i: route to $want" "$(ip -n $ns route get $want | grep -o 'dev lo')" "dev lo"
      elif ip -n $ns route get $want >/dev/null 2>&1; then
        bad "h$i: $want has a route"
      else
        ok
      fi
    done
    expect_line "h$i: eth0 shaped" <(tc -n $ns qdisc show dev eth0) "qdisc tbf .* rate 100Mbit"
    expect_line "h$i: switch port shaped" <(tc -n baton-sw qdisc show dev h$i) "qdisc tbf .* rate 100Mbit"
    expect "h$i: on the bridge" "$(ip -n baton-sw -o link show h$i | grep -o 'master br0')" "master br0"
    for j in 0 1 2; do
      [ $i = $j ] && continue
      local to=198.18.0.$((j + 1))
      if command -v ping >/dev/null; then
        ip netns exec $ns ping -c 1 -W 2 -q $to >/dev/null 2>&1
        expect "h$i pings h$j" $? 0
      else # "refused" means the host answered: reachable
        expect_line "h$i reaches h$j" <(ip netns exec $ns timeout 5 bash -c "exec 3<>/dev/tcp/$to/9" 2>&1) refused
      fi
    done
  done
  expect "the switch has no IPv4 address" "$(ip -n baton-sw -4 -o addr show | awk '$2 != "lo"')" ""
  expect "the root namespace is as it was" "$(root_ns_state)" "$(cat "$ROOT_BEFORE")"

  # launch: rank r on host r/2, with its local rank and size.
  # shellcheck disable=SC2016 # the ranks expand it
  out=$(BATON_RUN=$BUILD/bin/baton-run timeout 30 $C launch -n 5 --ppn 2 --tag-output -- \
    sh -c 'echo $BATON_RANK/$BATON_SIZE $BATON_LOCAL_RANK/$BATON_LOCAL_SIZE $BATON_ADDR $(ip -4 -o addr show dev eth0 | awk "{print \$4}")' |
    sort | sed 's/:[0-9]*/:PORT/')
  expect "launch -n 5 --ppn 2: status" "${PIPESTATUS[0]}" 0
  expect "launch -n 5 --ppn 2: placement" "$out" "$(printf '%s\n' \
    '[0] 0/5 0/2 198.18.0.1:PORT 198.18.0.1/24' '[1] 1/5 1/2 198.18.0.1:PORT 198.18.0.1/24' \
    '[2] 2/5 0/2 198.18.0.1:PORT 198.18.0.2/24' '[3] 3/5 1/2 198.18.0.1:PORT 198.18.0.2/24' \
    '[4] 4/5 0/1 198.18.0.1:PORT 198.18.0.3/24')"
  # A failing rank stops the others, and its status is launch's.
  # shellcheck disable=SC2016
  BATON_RUN=$BUILD/bin/baton-run timeout 30 $C launch -n 3 --ppn 1 -- \
    sh -c '[ "$BATON_RANK" = 2 ] && exit 3; exec sleep 41' 2>"$tmp/launch-err"
  expect "launch: a failing rank's status" $? 3
  expect_line "launch: the failure named" "$tmp/launch-err" "rank 2 \(pid [0-9]+\) exited with status 3; stopping the other 2 ranks"
  expect "launch: nothing left on h0" "$(ip netns pids baton-h0)" ""
  out=$(timeout 30 $C launch -n 7 --ppn 2 -- true 2>&1)
  expect_failure "launch on hosts that are not up" $?
  expect_line "launch on hosts that are not up: the error" <(echo "$out") "needs hosts 0\.\.3, but host 3 is not up"
  out=$($C exec 5 -- true 2>&1)
  expect_failure "exec on host 5" $?
  expect_line "exec on host 5: the error" <(echo "$out") "host 5 is not up"
  out=$($C up 2 2>&1)
  expect_failure "up while up" $?
  expect_line "up while up: the error" <(echo "$out") "a cluster is already up \(3 hosts\)"

  # down, twice: everything goes; the second finds nothing and succeeds.
  $C down >/dev/null
  expect "down: status" $? 0
  $C down >/dev/null
  expect "down again: status" $? 0
  expect "down: no namespace left" "$(ip netns list | grep -c '^baton-')" 0
  finish
}
if [ "${1:-}" = --inside ]; then
  inside
  exit
fi

export ROOT_BEFORE=$tmp/root-before BUILD
root_ns_state >"$ROOT_BEFORE"
out=$($C with 3 --rate 100mbit -- bash "$0" --inside 2>&1)
expect "with 3: status" $? 0
printf '%s\n' "$out" | grep -Ev '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' >&2
counts=$(printf '%s\n' "$out" | sed -En 's/^([0-9]+) passed, ([0-9]+) failed(, [0-9]+ skipped)?$/\1 \2/p' | tail -1)
if [ -z "$counts" ]; then
  bad "the checks inside the cluster did not finish"
else
  pass=$((pass + ${counts% *})) fail=$((fail + ${counts#* }))
fi
expect "after with: the root namespace is as it was" "$(root_ns_state)" "$(cat "$ROOT_BEFORE")"

# A signal to `with` reaches the command, and the cluster still goes.
$C with 2 --rate 0 -- sh -c "echo up >$tmp/ready; exec sleep 43" >/dev/null 2>&1 &
w=$!
for _ in $(seq 1200); do [ -e "$tmp/ready" ] && break; sleep 0.1; done # the lock may be busy
ids="$(ns_id baton-h0) $(ns_id baton-h1) $(ns_id baton-sw)"
kill -TERM $w
for _ in $(seq 100); do kill -0 $w 2>/dev/null || break; sleep 0.1; done
kill -0 $w 2>/dev/null && { bad "with did not end after SIGTERM"; kill -KILL $w; }
wait $w
expect "with after SIGTERM: status" $? 143
left=""
for id in $ids; do
  [ "$id" = gone ] && left="$left (one never came up)"
  for n in /run/netns/baton-*; do
    [ -e "$n" ] && [ "$(ns_id "${n##*/}")" = "$id" ] && left="$left ${n##*/}"
  done
done
expect "with after SIGTERM: its namespaces are gone" "$left" ""
expect "with after SIGTERM: the command is gone" "$(pgrep -fx 'sleep 43')" ""
finish
