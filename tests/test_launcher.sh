#!/usr/bin/env bash
# test_launcher.sh - baton-run: environment, --tag-output, a failing rank,
# a killed rank, signals to the launcher, --timeout and usage errors.
# Each case is bounded by `timeout`; leftover processes are looked up by a
# sleep duration unique to the case.
#   BATON_RUN=path/to/baton-run bash tests/test_launcher.sh
# The rank commands are in single quotes on purpose: the ranks expand them.
# shellcheck disable=SC2016
set -u
R=${BATON_RUN:-build/bin/baton-run}
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
# expect_match NAME TEXT REGEX
expect_match() { if printf '%s' "$2" | grep -Eq -- "$3"; then ok; else bad "$1: [$2] does not match /$3/"; fi; }
now() { date +%s.%N; }
# expect_fast NAME T0 SECONDS: less than SECONDS have passed since T0.
expect_fast() {
  if awk -v a="$2" -v b="$(now)" -v lim="$3" 'BEGIN { exit !(b - a < lim) }'; then ok; else bad "$1: took over $3 s"; fi
}
# No live process whose command line is exactly "sleep N" (zombies have none).
expect_no_leftovers() {
  sleep 0.2
  local left
  left=$(pgrep -fx "sleep $2" || true)
  expect "$1: no 'sleep $2' left" "$left" ""
  for p in $left; do kill -9 "$p" 2>/dev/null; done
  return 0
}
# Waits up to $2 s for pid $1; kills it if it is still there. Sets $st.
wait_bounded() {
  local i=0
  while kill -0 "$1" 2>/dev/null && [ $i -lt $(($2 * 20)) ]; do sleep 0.05; i=$((i + 1)); done
  kill -0 "$1" 2>/dev/null && { kill -9 "$1"; bad "pid $1 still running after $2 s"; }
  wait "$1"
  st=$?
}

if [ ! -x "$R" ]; then
  echo "no launcher at $R (set BATON_RUN)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

# --- normal runs
out=$(timeout 20 "$R" -n 3 --tag-output sh -c 'echo $BATON_RANK/$BATON_SIZE' 2>"$tmp/err")
expect "tag-output status" $? 0
expect "tag-output lines" "$(printf '%s\n' "$out" | sort)" "$(printf '[0] 0/3\n[1] 1/3\n[2] 2/3')"
expect "tag-output stderr" "$(cat "$tmp/err")" ""

out=$(timeout 20 "$R" -n 2 -- sh -c 'echo $BATON_LOCAL_RANK/$BATON_LOCAL_SIZE $BATON_ADDR' | sort)
expect_match "environment" "$out" '^0/2 127\.0\.0\.1:[0-9]+'$'\n''1/2 127\.0\.0\.1:[0-9]+$'
a0=$(printf '%s\n' "$out" | sed -n '1s/.* //p')
a1=$(printf '%s\n' "$out" | sed -n '2s/.* //p')
expect "same BATON_ADDR for all ranks" "$a0" "$a1"

# torch.distributed's env:// variables; MASTER_PORT is not BATON_ADDR's
# port, and MASTER_ADDR / MASTER_PORT set by the user are kept.
out=$(timeout 20 "$R" -n 2 -- sh -c 'echo $RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE $MASTER_ADDR:$MASTER_PORT $BATON_ADDR' | sort)
expect_match "env:// variables" "$out" '^0/2 0/2 127\.0\.0\.1:[0-9]+ 127\.0\.0\.1:[0-9]+'$'\n''1/2 1/2 127\.0\.0\.1:[0-9]+ '
m0=$(printf '%s\n' "$out" | sed -n '1s/.* \([^ ]*\) [^ ]*$/\1/p')
b0=$(printf '%s\n' "$out" | sed -n '1s/.* //p')
[ -n "$m0" ] && [ "$m0" != "$b0" ] && ok || bad "MASTER_PORT should differ from BATON_ADDR's port: $m0 vs $b0"
out=$(MASTER_ADDR=10.1.2.3 MASTER_PORT=4321 timeout 20 "$R" -n 1 -- sh -c 'echo $MASTER_ADDR:$MASTER_PORT')
expect "MASTER_ADDR/PORT kept" "$out" "10.1.2.3:4321"

out=$(timeout 20 "$R" -n 2 --tag-output sh -c 'printf "no newline"; echo oops >&2' 2>"$tmp/err" | sort)
expect "partial lines at EOF" "$out" "$(printf '[0] no newline\n[1] no newline')"
expect "stderr is tagged" "$(sort "$tmp/err")" "$(printf '[0] oops\n[1] oops')"

out=$(timeout 20 "$R" -n 1 --tag-output sh -c 'printf "a"; sleep 0.2; printf "b\nc"; sleep 0.2; echo d')
expect "a line written in pieces keeps one prefix" "$out" "$(printf '[0] ab\n[0] cd')"

long=$(head -c 100000 /dev/zero | tr '\0' x)
out=$(timeout 20 "$R" -n 1 --tag-output sh -c "echo $long")
expect "a 100000-byte line" "$out" "[0] $long"

# --- a failing rank stops the others
t0=$(now)
timeout 20 "$R" -n 4 sh -c '[ "$BATON_RANK" = 2 ] && exit 3; exec sleep 37' 2>"$tmp/err"
expect "failing rank: status" $? 3
expect_fast "failing rank: launcher exit" "$t0" 5
expect_match "failing rank: message" "$(cat "$tmp/err")" \
  '^baton-run: rank 2 \(pid [0-9]+\) exited with status 3; stopping the other 3 ranks$'
expect_no_leftovers "failing rank" 37

# The same when the ranks' shell forks its sleep rather than exec-ing it.
timeout 20 "$R" -n 3 sh -c '[ "$BATON_RANK" = 0 ] && exit 5; sleep 38; true' 2>/dev/null
expect "failing rank, forked children: status" $? 5
expect_no_leftovers "failing rank, forked children" 38

timeout 20 "$R" -n 2 sh -c '[ "$BATON_RANK" = 1 ] && kill -9 $$; exec sleep 39' 2>"$tmp/err"
expect "killed rank: status" $? 137
expect_match "killed rank: message" "$(cat "$tmp/err")" \
  '^baton-run: rank 1 \(pid [0-9]+\) killed by signal 9 \(Killed\); stopping the other 1 rank$'
expect_no_leftovers "killed rank" 39

# --- signals to the launcher
"$R" -n 3 sleep 41 2>"$tmp/err" &
pid=$!
sleep 0.5
t0=$(now)
kill -TERM $pid
wait_bounded $pid 10
expect "SIGTERM to the launcher: status" $st 143
expect_fast "SIGTERM to the launcher: stop" "$t0" 2
expect_match "SIGTERM to the launcher: message" "$(cat "$tmp/err")" 'forwarding it to 3 ranks'
expect_no_leftovers "SIGTERM to the launcher" 41

"$R" -n 2 sh -c 'trap "" TERM INT; sleep 42; sleep 42' 2>/dev/null &
pid=$!
sleep 0.5
t0=$(now)
kill -INT $pid
wait_bounded $pid 10
expect "SIGINT, ranks that ignore it: status" $st 130
expect_fast "SIGINT, ranks that ignore it: SIGKILL after the grace period" "$t0" 5
expect_no_leftovers "SIGINT, ranks that ignore it" 42

timeout 20 "$R" -n 2 --timeout 0.5 sleep 43 2>/dev/null
expect "--timeout: status" $? 124
expect_no_leftovers "--timeout" 43

timeout 20 "$R" -n 3 sh -c '[ "$BATON_RANK" = 0 ] || sleep 0.3; exit 0'
expect "ranks exiting 0 at different times" $? 0

# --- --bind cpu: rank r on the (r*C/N)-th CPU the launcher may use, said on stderr
cpus=$(grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
first=$(printf '%s' "$cpus" | tr ',-' '  ' | awk '{print $1}')
out=$(timeout 20 taskset -c "$first" "$R" -n 3 --bind cpu sh -c \
  'echo "$BATON_RANK $(grep Cpus_allowed_list /proc/self/status | awk "{print \$2}")"' 2>"$tmp/err" | sort)
expect "--bind cpu on one CPU: status" $? 0
expect "--bind cpu on one CPU: every rank there" "$out" "$(printf '0 %s\n1 %s\n2 %s' "$first" "$first" "$first")"
expect "--bind cpu on one CPU: what it says" "$(cat "$tmp/err")" "baton-run: --bind cpu: ranks 0-2 on cpu $first"
ncpu=$(nproc)
if [ "$ncpu" -ge 2 ]; then
  out=$(timeout 20 "$R" -n $((2 * ncpu)) --bind cpu sh -c \
    'echo "$BATON_RANK $(grep Cpus_allowed_list /proc/self/status | awk "{print \$2}")"' 2>"$tmp/err" | sort -n)
  expect "--bind cpu, two ranks a CPU: status" $? 0
  # ranks 2c and 2c+1 share the c-th CPU, and each rank is on exactly one
  want=$(python3 -c '
import os
cpus = sorted(os.sched_getaffinity(0)); n = 2 * len(cpus)
print("\n".join("%d %d" % (r, cpus[r * len(cpus) // n]) for r in range(n)))')
  expect "--bind cpu, two ranks a CPU: placement" "$out" "$want"
  expect_match "--bind cpu, two ranks a CPU: what it says" "$(cat "$tmp/err")" '^baton-run: --bind cpu: ranks 0-1 on cpu [0-9]+, ranks 2-3 on cpu [0-9]+'
else
  skip "--bind cpu with two ranks a CPU: this machine has one CPU"
fi
timeout 20 "$R" -n 2 --bind none sh -c 'exit 0'
expect "--bind none" $? 0
timeout 20 "$R" -n 2 --bind socket true >/dev/null 2>"$tmp/err"
expect "--bind socket: status" $? 2
expect_match "--bind socket: message" "$(cat "$tmp/err")" '^baton-run: --bind wants cpu or none, not "socket"'
timeout 20 "$R" -n 2 --bind cpu --ppn 1 --host-cmd env true >/dev/null 2>"$tmp/err"
expect "--bind cpu with --host-cmd: status" $? 2
expect_match "--bind cpu with --host-cmd: message" "$(cat "$tmp/err")" '^baton-run: --bind cpu pins the ranks this launcher runs itself'

# --- usage errors
for args in "" "-n" "-n 0" "-n 1025" "-n abc" "-n 2" "-n 2 --timeout 0 true" "--bogus -n 2 true"; do
  # shellcheck disable=SC2086
  timeout 20 "$R" $args >/dev/null 2>"$tmp/err"
  expect "usage error [$args]: status" $? 2
  expect_match "usage error [$args]: message" "$(cat "$tmp/err")" '^usage: baton-run'
done
timeout 20 "$R" -n 2 /no/such/program 2>"$tmp/err"
expect "missing program: status" $? 2
expect_match "missing program: message" "$(cat "$tmp/err")" \
  'cannot run "/no/such/program" \(rank 0\): No such file or directory'
out=$(timeout 20 "$R" --help)
expect "--help: status" $? 0
expect_match "--help: text" "$out" '^usage: baton-run -n N'

finish
