#!/usr/bin/env bash
# test_launcher_hosts.sh - baton-run's options for many hosts (--ppn,
# --host-cmd, --addr) without any namespace: `env HOST=%h` stands in for the
# per-host command, so placement, local ranks, the address, a failing or
# missing host command, and bad values are checked as any user can.
#   BATON_RUN=path/to/baton-run bash tests/test_launcher_hosts.sh
# The rank commands are in single quotes on purpose: the ranks expand them.
# shellcheck disable=SC2016
set -u
R=${BATON_RUN:-build/bin/baton-run}
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"

if [ ! -x "$R" ]; then
  echo "no launcher at $R (set BATON_RUN)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
SHOW='echo $BATON_RANK/$BATON_SIZE host=$HOST local=$BATON_LOCAL_RANK/$BATON_LOCAL_SIZE $BATON_ADDR'

# Rank r on host r/P, local rank r%P, the last host holding what is left.
out=$(timeout 20 "$R" -n 5 --ppn 2 --host-cmd 'env HOST=%h' --addr 198.18.0.1:4242 -- sh -c "$SHOW" | sort)
expect "placement: status" "${PIPESTATUS[0]}" 0
expect "placement" "$out" "$(printf '%s\n' \
  '0/5 host=0 local=0/2 198.18.0.1:4242' '1/5 host=0 local=1/2 198.18.0.1:4242' \
  '2/5 host=1 local=0/2 198.18.0.1:4242' '3/5 host=1 local=1/2 198.18.0.1:4242' \
  '4/5 host=2 local=0/1 198.18.0.1:4242')"

# --addr without a port gets one; --ppn alone only sets the local ranks.
out=$(timeout 20 "$R" -n 3 --ppn 1 --addr 127.0.0.1 -- sh -c 'echo $BATON_LOCAL_RANK/$BATON_LOCAL_SIZE $BATON_ADDR' | sort -u)
expect_line "--addr without a port" <(echo "$out") '^0/1 127\.0\.0\.1:[0-9]+$'
expect "--addr without a port: one address, one local size" "$(echo "$out" | wc -l)" 1
out=$(timeout 20 "$R" -n 1 --addr '[::1]:77' -- sh -c 'echo $BATON_ADDR')
expect "--addr in brackets" "$out" "[::1]:77"

# %h is the host, %% a percent sign; words split at spaces.
out=$(timeout 20 "$R" -n 2 --ppn 1 --host-cmd '  env  A=%h%%h  B=x%h ' -- sh -c 'echo $A $B' | sort)
expect "--host-cmd substitution" "$out" "$(printf '0%%h x0\n1%%h x1')"

# A host command that fails is a failing rank; one that is missing is named.
printf '#!/bin/sh\n[ "$1" = 2 ] && exit 5\nshift\nexec "$@"\n' >"$tmp/host"
chmod +x "$tmp/host"
timeout 20 "$R" -n 3 --ppn 1 --host-cmd "$tmp/host %h" -- sleep 39 2>"$tmp/err"
expect "a rank's host command fails: status" $? 5
expect_line "a rank's host command fails: named" "$tmp/err" 'rank 2 \(pid [0-9]+\) exited with status 5; stopping the other 2 ranks'
expect "no 'sleep 39' left" "$(pgrep -fx 'sleep 39')" ""
timeout 20 "$R" -n 2 --host-cmd 'no-such-command-here %h' -- true 2>"$tmp/err"
expect "missing host command: status" $? 2
expect_line "missing host command: named" "$tmp/err" '^baton-run: cannot run "no-such-command-here" \(rank 0\): No such file or directory$'

# Bad values name the option and the value.
bad_opt() {
  local name=$1 want=$2
  shift 2
  timeout 20 "$R" "$@" -- true 2>"$tmp/err"
  expect "$name: status" $? 2
  expect_line "$name" "$tmp/err" "$want"
}
bad_opt "--ppn 0" '^baton-run: --ppn wants a number of ranks per host in 1\.\.1024, not "0"$' -n 2 --ppn 0
bad_opt "--ppn x" '--ppn wants .*not "x"' -n 2 --ppn x
bad_opt "--host-cmd blank" '^baton-run: --host-cmd wants a command, not " "$' -n 2 --host-cmd ' '
bad_opt "--addr :5" '^baton-run: --addr wants HOST or HOST:PORT \(PORT in 1\.\.65535\), not ":5"$' -n 1 --addr :5
bad_opt "--addr port 0" 'not "h:0"' -n 1 --addr h:0
bad_opt "--addr port too big" 'not "h:65536"' -n 1 --addr h:65536
bad_opt "--addr port not a number" 'not "h:8x"' -n 1 --addr h:8x
bad_opt "--addr empty" '--addr wants HOST or HOST:PORT' -n 1 --addr ''
finish
