#!/usr/bin/env bash
# tests/test_secret.sh - where the job's secret comes from: baton-run gives
# every rank the same fresh random BATON_SECRET, a new one per job, and
# keeps one the user set; a rank started by hand without one says so once
# at WARN and works as before.
# The rank commands are in single quotes on purpose: the ranks expand them.
# shellcheck disable=SC2016
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
R=$BUILD/bin/baton-run
passed=0 failed=0
check() { # check NAME CONDITION-COMMAND...
  if "${@:2}"; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}

a=$(env -u BATON_SECRET "$R" -n 3 sh -c 'echo "$BATON_SECRET"' | sort -u)
b=$(env -u BATON_SECRET "$R" -n 1 sh -c 'echo "$BATON_SECRET"')
check "one secret for all ranks of a job: [$a]" test "$(printf '%s\n' "$a" | wc -l)" = 1
check "the secret is 64 hex digits: [$a]" sh -c "printf '%s' '$a' | grep -Eqx '[0-9a-f]{64}'"
check "a new secret for each job" test "$a" != "$b"
c=$(BATON_SECRET=chosen-by-the-user "$R" -n 2 sh -c 'echo "$BATON_SECRET"' | sort -u)
check "a secret the user set is kept: [$c]" test "$c" = chosen-by-the-user

# By hand, without baton-run and without a secret: one WARN, and it works.
# The port is a guess, tried again if someone else holds it.
for try in 1 2 3 4 5; do
  port=$(( (RANDOM % 20000) + 30000 ))
  out=$(env -u BATON_SECRET BATON_RANK=0 BATON_SIZE=1 BATON_ADDR=127.0.0.1:$port \
    "$BUILD/examples/allreduce_demo" 1 2>&1)
  rc=$?
  printf '%s' "$out" | grep -q "Address already in use" || break
done
check "a rank without a secret still works (exit $rc): $out" test $rc = 0
n=$(printf '%s\n' "$out" | grep -c "WARN.*BATON_SECRET is not set")
check "it says so once at WARN, not $n times" test "$n" = 1

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
